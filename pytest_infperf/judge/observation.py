"""One side's measurement, as the judge needs it (:class:`Observation`)."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.results import BenchmarkResult, memory_figure
from ..measure.drift import with_gpu_reference
from .device import work_of


@dataclasses.dataclass(frozen=True)
class Observation:
    """One side's measurement, as the judge needs it."""

    samples: Sequence[float]
    memory: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    batch_size: int | None = None
    env: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: Machine-speed probes taken while sampling (the drift guard), or None.
    reference: Mapping[str, Any] | None = None
    #: A CUDA benchmark's device busy time over its latency (None: not measured): below
    #: ``HOST_BOUND_SHARE`` its latency is the host's, and the host's speed guards it.
    device_share: float | None = None

    @classmethod
    def of(cls, source: BenchmarkResult | Mapping[str, Any]) -> Observation:
        """From a result, or from a stored baseline entry (the same fields in JSON)."""
        # A GPU's clocks read around the timed region stand in for a region's readings
        # where a record has none (drift.with_gpu_reference).
        if isinstance(source, BenchmarkResult):
            reference = with_gpu_reference(source.reference, source.extra)
            return cls(source.samples, source.memory, source.batch_size, source.env, reference)
        return cls(
            source["samples"],
            source.get("memory") or {},
            source.get("batch_size"),
            source.get("env") or {},
            with_gpu_reference(source.get("reference"), source.get("extra")),
        )

    @classmethod
    def part(cls, source: BenchmarkResult | Mapping[str, Any], metric: str) -> Observation | None:
        """One judged part of a benchmark: a generation's ``ttft`` or ``tpot``, a CUDA
        benchmark's ``gpu_time`` (the profiled pass's device time of each call) or its
        latency (``median``): its samples, with the rest of the benchmark's facts; None
        when ``source`` has no such figures."""
        if metric == "median":
            return cls.of(source)
        if metric == "gpu_time":
            work = work_of(source)
            samples = list(work.gpu_time) if work is not None else []
        else:
            gen = (
                source.generation
                if isinstance(source, BenchmarkResult)
                else source.get("generation")
            )
            samples = list(((gen or {}).get(metric) or {}).get("samples") or [])
        if not samples:
            return None
        return dataclasses.replace(cls.of(source), samples=samples)

    def figure(self, metric: str) -> float | None:
        """The metric's own figure: a percentile (s), items/s, or bytes."""
        if metric == "memory":
            return memory_figure(self.memory)
        if not self.samples:
            return None
        if metric == "throughput":
            median = statistics.median(self.samples)
            return (self.batch_size or 1) / median if median > 0 else None
        q = {"median": 50, "p90": 90, "p99": 99, "ttft": 50, "tpot": 50, "gpu_time": 50}[metric]
        if q == 50:
            return float(statistics.median(self.samples))
        return float(statistics.quantiles(self.samples, n=100, method="inclusive")[q - 1])
