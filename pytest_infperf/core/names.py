"""Named values that travel as strings: str enums that are their own JSON value, print as
it, and hash and compare as it, so a member finds a string key of a dict built from JSON
(an ``(str, Enum)`` member otherwise hashes by its *name*: ``{"median": 1}[Metric.MEDIAN]``
would miss). Imports nothing."""

from __future__ import annotations

import enum


class Named(str, enum.Enum):
    """Base of the package's str enums (no members of its own)."""

    def __str__(self) -> str:
        return str(self.value)

    def __hash__(self) -> int:
        return str.__hash__(self)


class Metric(Named):
    """What a comparison judges."""

    MEDIAN = "median"
    P90 = "p90"
    P99 = "p99"
    THROUGHPUT = "throughput"
    MEMORY = "memory"
    #: Generation benchmarks only: time to first token, time per output token.
    TTFT = "ttft"
    TPOT = "tpot"
    #: CUDA benchmarks: the device's busy time per call (kernels and copies), from the
    #: profiled pass (:mod:`~pytest_infperf.measure.profile`), judged beside the latency.
    GPU_TIME = "gpu_time"


class CompareMode(Named):
    """How a baseline side was measured, and so who decided a verdict: a baseline stored
    earlier (``stored``), or the base commit measured in this job, interleaved (``ab``)."""

    STORED = "stored"
    AB = "ab"
