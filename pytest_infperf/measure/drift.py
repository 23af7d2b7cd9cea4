"""The drift guard: a fixed reference workload timed in every run that saves or compares.

The code of the reference never changes, so when its time moves between the baseline's run
and this one, the machine moved (another tenant, clocks, thermal state, a different runner
of the same type), and every verdict against a stored baseline is suspect by about as much.
Two parts, because machines drift differently in each: a small numpy GEMM (BLAS, memory)
and a pure-Python loop (interpreter and framework overhead, the "framework tax" side).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping
from typing import Any

WARMUP = 5
REPEATS = 31


def _python_loop(n: int = 20_000) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def _time(fn: Any, repeats: int) -> float:
    pc = time.perf_counter_ns
    for _ in range(WARMUP):
        fn()
    samples = []
    for _ in range(repeats):
        t0 = pc()
        fn()
        samples.append(pc() - t0)
    return statistics.median(samples) / 1e9


def measure_reference(repeats: int = REPEATS) -> dict[str, float]:
    """Median seconds of each reference part (about 50 ms in all on a 2-core runner)."""
    import numpy as np  # noqa: PLC0415 (numpy: this module is imported at start-up)

    a = np.random.default_rng(0).standard_normal((128, 128))
    b = a.T.copy()
    return {
        "gemm_s": _time(lambda: a @ b, repeats),
        "python_s": _time(_python_loop, repeats),
    }


_PROBE_STATE: dict[str, Any] = {}
#: The GPU's reference entries: its SM and memory clocks (MHz, NVML), the medians of the
#: readings taken while a GPU benchmark's samples ran (``tenancy.RegionWatch``). They replace a
#: fixed kernel's timed device time (``gpu_kernel_s``, an fp16 1024x1024 matmul): on a lent
#: H200 that kernel took 13.8-26.2 us a launch, several times what its 2.1 GFLOP need there
#: (most likely the host's launch rate, not the GPU's speed), and moved by x1.10-x1.39
#: between runs of a quiet GPU whose SM clock read 1980 MHz throughout and whose
#: benchmarks' device time moved by 0.999-1.002 (docs/MEASURED.md). A clock is read, not
#: timed: the host cannot move it. What it cannot see: a tenant that time-slices the GPU
#: without capping its power (the region watch names such processes instead).
GPU_KEYS = ("gpu_sm_mhz", "gpu_mem_mhz")
#: Clock ratios within this of 1 are no move: GPU Boost steps by 15 MHz (0.8% at 1980).
GPU_DEADBAND = 0.02


def probe(repeats: int = 5) -> tuple[float, float]:
    """A ~1 ms snapshot of machine speed (Python loop, small GEMM), taken at the sampling
    checkpoints of every benchmark, outside the timed region."""
    if "gemm" not in _PROBE_STATE:
        import numpy as np  # noqa: PLC0415 (numpy: this module is imported at start-up)

        a = np.random.default_rng(0).standard_normal((64, 64))
        b = a.T.copy()
        _PROBE_STATE["gemm"] = lambda: a @ b
    pc = time.perf_counter_ns
    gemm = _PROBE_STATE["gemm"]
    py: list[int] = []
    mm: list[int] = []
    for _ in range(repeats):
        t0 = pc()
        _python_loop(2000)
        t1 = pc()
        gemm()
        t2 = pc()
        py.append(t1 - t0)
        mm.append(t2 - t1)
    return statistics.median(py) / 1e9, statistics.median(mm) / 1e9


def summarize_probes(
    probes: list[tuple[float, float]], cpu_share: float | None = None
) -> dict[str, Any] | None:
    """The probes' medians, and the CPU share of the timed region: process CPU time over
    wall time. Short probes fit in one scheduler time slice and cannot see a noisy
    neighbour taking turns on the same core (or a hypervisor stealing time); the share
    can: it falls when the process is runnable but not running."""
    if not probes:
        return None
    out: dict[str, Any] = {
        "python_s": statistics.median(p[0] for p in probes),
        "gemm_s": statistics.median(p[1] for p in probes),
        "probes": len(probes),
    }
    if cpu_share is not None:
        out["cpu_share"] = round(cpu_share, 4)
    return out


def speed_factors(
    current: Mapping[str, Any] | None, baseline: Mapping[str, Any] | None, kind: str = "cpu"
) -> tuple[float, float] | None:
    """(slower, faster): how much slower (>= 1) and how much faster (>= 1) the machine ran
    during this measurement than during the baseline's, by the median of its indicators
    (the Python-loop probe, the GEMM probe, the CPU share).

    Not the largest-moving one: each is a noisy ratio of two short timings, and the max of
    three of them, with no real drift, widened about a fifth of comparisons by more than the
    whole tolerance. The median moves only when most indicators agree.

    ``kind="gpu"``: the GPU's own reference instead (:func:`gpu_reference`, its clocks; a
    clock at half the speed takes twice the time): the CPU probes say nothing of a GPU's
    clocks, and the host's speed moved by tens of percent between processes where the
    device's time moved by a fraction of one. None where either side lacks
    them (no NVML, a baseline saved before them). ``kind="gpu_or_cpu"`` (a latency the
    device bounds): the GPU's, else the CPU's; ``kind="both"`` (a GPU latency whose device
    share is not known): the larger move of the two."""
    if not current or not baseline:
        return None
    if kind in ("both", "gpu_or_cpu"):
        gpu = speed_factors(current, baseline, "gpu")
        if kind == "gpu_or_cpu" and gpu is not None:  # the device's clocks, where it has them
            return gpu
        found = [f for f in (gpu, speed_factors(current, baseline, "cpu")) if f]
        return (max(f[0] for f in found), max(f[1] for f in found)) if found else None
    if kind == "gpu":
        pairs = [
            (float(current[k]), float(baseline[k]))
            for k in GPU_KEYS
            if _positive(current.get(k)) and _positive(baseline.get(k))
        ]
        if not pairs:
            return None
        slower = max(then / now for now, then in pairs)
        faster = max(now / then for now, then in pairs)
        return (
            1.0 if slower <= 1.0 + GPU_DEADBAND else slower,
            1.0 if faster <= 1.0 + GPU_DEADBAND else faster,
        )
    ratios = [
        current[k] / baseline[k]
        for k in ("python_s", "gemm_s")
        if current.get(k) and baseline.get(k)
    ]
    if current.get("cpu_share") and baseline.get("cpu_share"):
        # Half the CPU now means about twice the time for the same work.
        ratios.append(baseline["cpu_share"] / current["cpu_share"])
    if not ratios:
        return None
    middle = statistics.median(ratios)
    return max(1.0, middle), max(1.0, 1.0 / middle)


def drift(
    current: dict[str, Any] | None, baseline: dict[str, Any] | None, threshold: float
) -> dict[str, Any] | None:
    """Ratios current/baseline of each part; ``drifted`` when any moved by more than
    ``threshold / 2`` (half the regression tolerance)."""
    if not current or not baseline:
        return None
    ratios = {}
    for part in ("gemm_s", "python_s"):
        if current.get(part) and baseline.get(part):
            ratios[part.replace("_s", "_ratio")] = current[part] / baseline[part]
    if not ratios:
        return None
    limit = threshold / 2.0
    drifted = any(abs(r - 1.0) > limit for r in ratios.values())
    return {**ratios, "limit": limit, "drifted": drifted}


def _positive(value: Any) -> bool:
    """A clock a document may hold: a finite number above zero (not a bool, not a string)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def gpu_reference(
    region: Mapping[str, Any] | None, state: Mapping[str, Any] | None = None
) -> dict[str, float]:
    """The drift guard's GPU reference from a GPU benchmark's region record
    (``extra.gpu_region``: the NVML readings taken while its samples ran): the median SM
    and memory clocks of the readings at which the GPU was not idle. Where no region was
    watched (a record written before generations watched theirs), the clocks NVML read
    just before and after the timed region (``extra.gpu_state``), both of them, else none.
    Empty without NVML or where no clock was read."""
    out = {}
    fields = ("sm_clock_mhz", "mem_clock_mhz")
    for key, field in zip(GPU_KEYS, fields, strict=True):
        if region and _positive(region.get(field)):
            out[key] = float(region[field])
    if out or not state:
        return out
    ends = [state.get("before") or {}, state.get("after") or {}]
    for key, field in zip(GPU_KEYS, fields, strict=True):
        read = [float(end[field]) for end in ends if _positive(end.get(field))]
        if len(read) == 2:
            out[key] = statistics.median(read)
    return out


def with_gpu_reference(
    reference: Mapping[str, Any] | None, extra: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """A measurement's drift references with its GPU's clocks (:func:`gpu_reference`) where
    they lack them; None where there is neither."""
    extra = extra or {}
    if reference and any(k in reference for k in GPU_KEYS):
        return dict(reference)
    gpu = gpu_reference(extra.get("gpu_region"), extra.get("gpu_state"))
    if not reference and not gpu:
        return None
    return {**(reference or {}), **gpu}
