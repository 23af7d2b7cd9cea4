"""One ``infer_bench(...)`` call, ready to be measured by a mode.

PYTEST_DONT_REWRITE

Measurement layer: a :class:`BenchCall` knows the prepared model, the merged options and
where the call sits (node id, name, line); it can warm up, measure, and turn a
:class:`~pytest_infperf.timing.Measurement` into a
:class:`~pytest_infperf.results.BenchmarkResult`. What to do with the result (compare it,
interleave it with a base) is the mode's business.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from filelock import FileLock, Timeout

from ..core import options as _options
from ..core.fsutil import lock_dir
from ..core.options import BenchOptions
from ..core.record import GpuRegion, ResultExtra, declared
from ..core.results import BenchmarkResult, WorkProfile
from ..stats.descriptive import summarize, throughput
from . import environment, gpu
from . import profile as _profile
from .backends import Prepared, find_nan, runs_on_gpu
from .timing import Measurement, Warm, measure, recalibrate, warm_up

#: How long a measurement waits for another one to finish timing on the same device.
LOCK_WAIT_S = 900.0


class BenchmarkError(Exception):
    """The model ran but its result cannot be used (NaN output, no samples...)."""


@dataclasses.dataclass
class BenchCall:
    """One call of the fixture: the model prepared, the options merged, the place named."""

    nodeid: str
    name: str | None
    prepared: Prepared
    opts: BenchOptions
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    path: str | None = None
    lineno: int | None = None
    #: Messages that fail the test once its body has finished (regressions, budgets).
    failures: list[str] = dataclasses.field(default_factory=list)

    @property
    def domain(self) -> str:
        """Which device the measurement occupies, for the timing lock: 'cpu' or 'gpu-<id>'."""
        if not runs_on_gpu(self.prepared.env):
            return "cpu"
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "_") or "all"
        return f"gpu-{visible}"

    def check_output(self, output: Any) -> None:
        """A NaN in the first output fails the test: timing NaN measures nothing useful."""
        if not self.opts.check_nan:
            return
        where = find_nan(output)
        if where is not None:
            part = "output" if where == "output" else f"output {where}"
            raise BenchmarkError(
                f"the model's {part} contains NaN: timing a model that computes "
                "NaN measures nothing useful (check the inputs and weights, or pass "
                "check_nan=False)"
            )

    def measure(
        self, *, first: bool = True, probe: Callable[[], tuple[float, float]] | None = None
    ) -> Measurement:
        """Warm up and sample. ``first=False``: a re-measurement of a warm model."""
        __tracebackhide__ = True
        check = self.check_output if first else None
        return measure(
            self.prepared.sampler, self.opts, first=first, check_output=check, probe=probe
        )

    def warm(self, target: float) -> Warm:
        """First call, warmup and calibration for samples of ``target`` seconds (A/B)."""
        __tracebackhide__ = True
        return warm_up(
            self.prepared.sampler, self.opts, check_output=self.check_output, target=target
        )

    def recalibrate(self, target: float, per_call_s: float) -> Warm:
        """Calibration only, for a model this call has just measured (settling)."""
        __tracebackhide__ = True
        return recalibrate(self.prepared.sampler, target, per_call_s)

    def fail(self, message: str) -> None:
        self.failures.append(message)

    def profile(self, per_call_s: float, mode: str | None = None) -> WorkProfile | None:
        """The profiled pass (``mode``, else ``opts.profile``) of this warm model: what one
        call does (:mod:`~pytest_infperf.measure.profile`). Run after the timed samples,
        never inside them."""
        return _profile.run(self.prepared, mode or self.opts.profile, per_call_s)

    def counted(self) -> BenchmarkResult:
        """``--perf-count``: one untimed call (its output checked), then the profiled pass
        (``counts`` where the options say ``off``: counting is the point); the result's one
        sample is that call's time, for the record, never a figure to compare."""
        sampler = self.prepared.sampler
        with sampler.context():
            t0 = time.perf_counter()
            self.check_output(sampler.call())
            took = time.perf_counter() - t0
        m = Measurement([took], [], took, 1, {"count_only": True}, {}, {})
        result = self.result(m)
        mode = self.opts.profile if self.opts.profile != "off" else "counts"
        result.work = self.profile(took, mode)
        return result

    def result(self, m: Measurement) -> BenchmarkResult:
        """The result of a measurement: statistics, throughput, memory, warnings."""
        if not m.samples:
            raise BenchmarkError("no timed samples were taken")
        prepared = self.prepared
        stats = summarize(m.samples)
        batch = self.opts.batch_size or prepared.batch_size
        extra, memory = figures_of(m)
        warnings = list(prepared.warnings)
        if extra.get("recompiles"):
            warnings.append(
                f"torch.compile recompiled {extra['recompiles']} time(s) during the timed "
                "region, so samples include compilation: use fixed shapes, mark dynamic "
                "dimensions (torch._dynamo.mark_dynamic), or warm up with every shape"
            )
        threads = _threads_hint(prepared.env, stats, self.opts.intra_op_threads)
        if threads:
            warnings.append(threads)
        params = dict(self.params)
        if self.opts.params:
            params.update(self.opts.params)
        generation = None
        if prepared.generation is not None:
            generation = generation_record(m.metrics, prepared.generation)
        return BenchmarkResult(
            nodeid=self.nodeid,
            name=self.name,
            backend=prepared.backend,
            samples=m.samples,
            stats=stats,
            params=params,
            options=_options.recorded(self.opts, leave_out=("params",)),
            warmup_samples=m.warmup_samples,
            first_call=m.first_call,
            block_size=m.block_size,
            batch_size=batch,
            throughput=throughput(batch, stats["median"]),
            memory=memory,
            decisions=m.decisions,
            backend_info=prepared.info,
            env=prepared.env,
            extra=extra,
            warnings=warnings,
            reference=m.reference,
            path=self.path,
            lineno=self.lineno,
            generation=generation,
        )

    def disabled_result(self) -> BenchmarkResult:
        """``--perf-disable``: one untimed call, no statistics."""
        return BenchmarkResult(
            nodeid=self.nodeid,
            name=self.name,
            backend=self.prepared.backend,
            samples=[],
            stats={"n": 0, "median": math.nan},
            decisions={"disabled": True},
        )


def generation_record(
    metrics: dict[str, list[float]], meta: dict[str, Any]
) -> dict[str, Any] | None:
    """A generation benchmark's ``generation`` entry: each metric's raw samples and
    statistics, tokens/s per generation, and the fixed figures (``meta``). None when no
    generation was timed (the base side of an interleaved run keeps no figures)."""
    if not metrics.get("e2e"):
        return None
    out: dict[str, Any] = dict(meta)
    batch, new = int(meta["batch_size"]), int(meta["new_tokens"])
    series = {k: metrics.get(k, []) for k in ("ttft", "tpot", "itl", "e2e")}
    series["tokens_per_s"] = [new * batch / e for e in metrics["e2e"] if e > 0]
    for key, values in series.items():
        out[key] = {"samples": list(values), "stats": summarize(values) if values else None}
    share = metrics.get("host_share")
    out["decode_host_bound_ratio"] = round(float(statistics.median(share)), 4) if share else None
    return out


def from_warm(samples: list[float], warm: Warm) -> Measurement:
    """A Measurement from block samples taken after ``warm`` (A/B mode)."""
    return Measurement(
        samples=list(samples),
        warmup_samples=[v / 1e9 for v in warm.warm_ns],
        first_call=warm.first_call_s,
        block_size=warm.block,
        decisions={**warm.decisions, "rounds": len(samples), "stop_reason": "ab"},
        memory={},
        backend_extra={},
        first_output=warm.first_output,
    )


@contextlib.contextmanager
def timing_lock(domain: str, on_timeout: Callable[[str], None]) -> Iterator[None]:
    """Machine-wide lock around a measurement: no two benchmarks (xdist workers, or two
    pytest runs on one runner) time at once on the same CPU or GPU."""

    lock = FileLock(str(lock_dir() / f"timing-{domain}.lock"))
    try:
        lock.acquire(timeout=LOCK_WAIT_S)
    except Timeout:
        on_timeout(
            f"waited {LOCK_WAIT_S:.0f} s for another benchmark to finish timing on "
            f"{domain}; measured anyway, so results may be disturbed"
        )
        yield
        return
    try:
        yield
    finally:
        lock.release()


def gpu_index(prepared: Prepared) -> int | None:
    """The NVML index of the GPU a benchmark runs on (None: not on a GPU). torch names its
    device (``cuda:1``), ONNX Runtime's CUDA provider its ``device_id``."""
    if not runs_on_gpu(prepared.env):
        return None
    device = str(prepared.info.get("device") or "")
    if device.startswith("cuda:") and device[5:].isdigit():
        index = int(device[5:])
    else:
        index = int(prepared.info.get("device_id") or 0)
    return gpu.nvml_index(index)


def gpu_state(prepared: Prepared) -> dict[str, Any] | None:
    """NVML state of the GPU a benchmark runs on (clocks, temperature, throttling, memory)."""
    index = gpu_index(prepared)
    return gpu.device_state(index if index is not None else 0)


def gpu_clocks(prepared: Prepared) -> dict[str, Any] | None:
    """The clock state of the benchmark's GPU (locked or not, persistence, compute mode)."""
    index = gpu_index(prepared)
    return gpu.clock_state(index) if index is not None else None


#: A backend's figures that belong in the result's memory record, not its ``extra``.
MEMORY_FIGURES = ("cuda_max_allocated_bytes", "cuda_max_reserved_bytes", "nvml_used_bytes")


def figures_of(m: Measurement) -> tuple[ResultExtra, dict[str, Any]]:
    """A measurement's backend figures as a result's ``extra`` (every key declared) and its
    memory record (with the backend's memory figures moved into it): the one place a
    backend's figures are sorted, for a first measurement and a re-measurement alike."""
    figures = dict(m.backend_extra)
    memory = dict(m.memory)
    for key in MEMORY_FIGURES:
        if key in figures:
            memory[key] = figures.pop(key)
    return declared(figures), memory


def record_gpu_state(
    result: BenchmarkResult,
    before: dict[str, Any],
    after: dict[str, Any] | None,
    clocks: dict[str, Any] | None = None,
) -> list[str]:
    """Record the GPU's state around the timed region and its clock state on ``result``;
    returns the run's warnings about the GPU (say once per run, not per benchmark)."""
    result.extra["gpu_state"] = {"before": before, "after": after}
    run_warnings = []
    if clocks is not None:
        result.extra["gpu_clocks"] = clocks
        if not clocks.get("locked"):
            run_warnings.append(gpu.UNLOCKED_CLOCKS)
    if (
        after is not None
        and before.get("memory_used_bytes") is not None
        and after.get("memory_used_bytes") is not None
    ):
        result.memory["nvml_used_bytes"] = after["memory_used_bytes"]
        result.memory["nvml_growth_bytes"] = (
            after["memory_used_bytes"] - before["memory_used_bytes"]
        )
    region = result.extra.get("gpu_region") or GpuRegion(
        throttle_reasons=None, other_processes=[], unseen_processes=[]
    )
    throttled = sorted(
        set(before.get("throttle_reasons") or [])
        | set((after or {}).get("throttle_reasons") or [])
        | set(region.get("throttle_reasons") or [])
    )
    others = region.get("other_processes") or []
    if others:
        result.warnings.append(
            f"other processes used this GPU during the timed region (PIDs "
            f"{', '.join(map(str, others[:5]))}{'...' if len(others) > 5 else ''}): a GPU "
            "shared with another job is a noisy neighbour; its latency is not this model's alone"
        )
    if throttled:
        result.warnings.append(
            f"the GPU was throttled around the timed region ({', '.join(throttled)}): "
            "clocks were below their maximum, so latency is higher than the GPU can do; "
            "check cooling, power limits and other jobs on the GPU"
        )
    return run_warnings


def _threads_hint(env: Any, stats: dict[str, Any], asked: int | None) -> str | None:
    """A CPU model run on several intra-op threads whose samples are very noisy (IQR a
    quarter of the median or more): its kernels' threads wait on each other whenever
    another task takes a core, and its calls can swing by tens of times on a busy machine
    (a torch model read 32 ms and 640 us in two runs). One thread is steadier; said only
    where the user did not choose the count."""
    if asked is not None or stats.get("noise") != "severe" or runs_on_gpu(env):
        return None
    n = environment.intra_op_threads(env)
    if n is None or n == 1:
        return None
    many = "its default" if n == 0 else f"{n}"
    median, iqr = stats.get("median") or 0.0, stats.get("iqr") or 0.0
    spread = f"IQR {iqr / median:.0%} of the median" if median > 0 else "IQR past a quarter"
    return (
        f"very noisy at {many} intra-op threads ({spread}): a busy or shared CPU makes "
        "multi-threaded kernels wait on each other; "
        "infperf_intra_op_threads = 1 (or intra_op_threads=1) gives a steadier figure"
    )
