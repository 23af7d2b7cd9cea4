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


class FailureKind(Named):
    """What fails a run (:class:`~pytest_infperf.core.outcome.Failure`): a benchmark's
    regression, budget (``max_median_ms``) or work limit (``max_work_increase``); a test
    that failed for its own reasons; a whole run that compared or measured nothing."""

    REGRESSION = "regression"
    BUDGET = "budget"
    WORK = "work"
    TEST = "test"
    COMPARED_NOTHING = "compared-nothing"
    MEASURED_NOTHING = "measured-nothing"

    @property
    def whole_run(self) -> bool:
        """A failure of the whole run, not of a benchmark or a test."""
        return self in (FailureKind.COMPARED_NOTHING, FailureKind.MEASURED_NOTHING)


class Interleaved(Named):
    """Why a benchmark was interleaved at once, before any stored pass: the
    ``settled_because`` of its comparison (a settling after a stored pass records what
    the stored pass could not decide, in words)."""

    #: The session-start reference read this machine's speed moved since the baseline's run.
    MACHINE_MOVED = "machine-moved"
    #: The baseline was measured in another environment: no stored pass compares with it.
    ENVIRONMENT_CHANGED = "environment-changed"
    #: An earlier settling of this session showed the stored pass misread the machine.
    STORED_MISREAD = "stored-misread"
