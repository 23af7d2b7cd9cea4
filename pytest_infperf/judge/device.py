"""GPU verdicts: the device's own time judged apart from the host's, and the GPU's state.

A CUDA benchmark's latency is what a caller sees; at small batch in eager mode it is mostly
host dispatch, which moved by 20-30% between processes on an H100 while the device's busy
time moved by 0.05-0.24% (docs/MEASURED.md, "GPU"). So where both sides of a comparison
have the profiled pass's device time (``gpu_time``), the judge judges it beside the latency
(:func:`device_parts`), the drift guard reads the reference that can speak for each
(:func:`reference_kind`), and a host-bound latency says so (:func:`host_bound_noted`). Also
here: what a throttled or shared GPU does to a verdict (:func:`gpu_withholds`,
:func:`gpu_withheld`). Called by :mod:`.judge`; :mod:`pytest_infperf.ab.interleave` uses the
same rules for an interleaved run.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping
from typing import Any, Protocol

from ..core import family as _family
from ..core.results import HOST_SD, BenchmarkResult, Comparison, Reason, Verdict, WorkProfile
from ..measure.backends import runs_on_gpu
from ..measure.drift import speed_factors, with_gpu_reference
from .plan import GPU_SHARE_LIMIT
from .policy import HOST_BOUND_SHARE


class Measured(Protocol):
    """What :func:`reference_kind` reads of one side's measurement (the judge's
    ``Observation``)."""

    @property
    def env(self) -> Mapping[str, Any]: ...

    @property
    def device_share(self) -> float | None: ...


def work_of(source: BenchmarkResult | Mapping[str, Any]) -> WorkProfile | None:
    """A result's or a stored entry's work profile (None: none was taken)."""
    if isinstance(source, BenchmarkResult):
        return source.work
    return WorkProfile.from_json(source.get("work"))


def device_share(source: BenchmarkResult | Mapping[str, Any] | None) -> float | None:
    """A CUDA benchmark's device busy time over its latency, medians of the profiled pass
    and of the timed samples, for a result or a stored entry (None: no device time)."""
    if source is None:
        return None
    work = work_of(source)
    samples = source.samples if isinstance(source, BenchmarkResult) else source.get("samples")
    if work is None or not work.gpu_time or not samples:
        return None
    latency = statistics.median(samples)
    return statistics.median(work.gpu_time) / latency if latency > 0 else None


def reference_kind(metric: str, current: Measured) -> str:
    """Which reference guards a metric against machine drift: the GPU's clocks for a GPU
    benchmark's device time; the CPU's probes for a CPU benchmark and for a host-bound GPU
    one; for a GPU latency the device bounds, the GPU's clocks, else (no NVML) the CPU's:
    no guard at all let a slowdown hidden by a faster host read ``unchanged``; and for one
    whose share is not known, the larger move of the two (either part may bound it)."""
    if not runs_on_gpu(current.env):
        return "cpu"
    if metric == "gpu_time":
        return "gpu"
    share = current.device_share
    if share is None:
        return "both"
    return "cpu" if share < HOST_BOUND_SHARE else "gpu_or_cpu"


def clocks_held(result: BenchmarkResult, entry: Mapping[str, Any] | None) -> bool | None:
    """Whether the GPU's clocks held between the baseline's run and this one (within GPU
    Boost's steps); None where a side has no clock reference (no NVML, an older baseline)."""
    entry = entry or {}
    factors = speed_factors(
        with_gpu_reference(result.reference, result.extra),
        with_gpu_reference(entry.get("reference"), entry.get("extra")),
        "gpu",
    )
    return None if factors is None else factors == (1.0, 1.0)


def enqueue_share(result: BenchmarkResult) -> float | None:
    """A CUDA benchmark's host time to enqueue over its latency (None off a GPU)."""
    share = result.extra.get("host_bound_ratio")
    return float(share) if runs_on_gpu(result.env) and isinstance(share, int | float) else None


#: Without a device time, a CUDA benchmark whose host took at least this share of its
#: latency to enqueue the work (``host_bound_ratio``) is host-bound: the GPU waited on it.
HOST_ENQUEUE_SHARE = 0.9


def host_bound_noted(
    c: Comparison, share: float | None, enqueue: float | None = None
) -> Comparison:
    """A CUDA benchmark's verdict whose latency is mostly host dispatch says so on its
    latency part: what moved it is the host, and what measures the model instead. ``share``:
    the device's busy time over the latency; without one, ``enqueue`` (the host's time to
    enqueue over the latency) says it for a verdict on the latency alone."""
    if share is None and enqueue is not None and enqueue >= HOST_ENQUEUE_SHARE and not c.parts:
        if c.metric not in ("median", "p90", "p99", "throughput"):
            return c
        note = (
            f"host-bound: the host took {enqueue:.0%} of the latency to enqueue the work, so "
            "the latency follows the host's speed (Python and framework dispatch), and its "
            "device time was not measured (no CUDA kernels seen by the profiler); "
            "cuda_graph=True or torch.compile(mode='reduce-overhead') measure the model "
            "instead of the host"
        )
        return dataclasses.replace(c, note=f"{c.note}; {note}" if c.note else note)
    if share is None or share >= HOST_BOUND_SHARE or not c.parts or "median" not in c.parts:
        return c
    latency = c.parts["median"]
    note = host_bound_text(share)
    latency = dataclasses.replace(latency, note=f"{latency.note}; {note}" if latency.note else note)
    parts = {**c.parts, "median": latency}
    if c.metric == "median":  # the latency decided: its note heads the record too
        return dataclasses.replace(c, note=latency.note, parts=parts)
    return dataclasses.replace(c, parts=parts)


def host_bound_text(share: float) -> str:
    return (
        f"host-bound: the device was busy {share:.0%} of the latency, so the latency follows "
        "the host's speed (Python and framework dispatch), not the model's work; the device "
        "time is judged beside it. cuda_graph=True or torch.compile(mode='reduce-overhead') "
        "measure the model instead of the host"
    )


def gpu_withholds(blocks: Mapping[str, Any], policy: str) -> str | None:
    """Why an interleaved GPU verdict is withheld (None: it stands). ``exclude``: flagged
    blocks were set aside, which is fair until more than ``GPU_SHARE_LIMIT`` of a side's
    blocks were flagged (then what is left is not the GPU's usual state); ``fail``: any
    flagged block; ``keep``: never."""
    total = dict(blocks.get("blocks") or {})
    flagged = dict(blocks.get("flagged") or {})
    if policy == "keep" or not any(flagged.values()):
        return None
    reasons = ", ".join(f"{k} x{v}" for k, v in sorted((blocks.get("reasons") or {}).items()))
    others = blocks.get("other_processes") or []
    seen = f"({reasons}" + (f"; other PIDs {', '.join(map(str, others[:5]))}" if others else "")
    seen += ")"
    if policy == "fail":
        n = sum(flagged.values())
        return (
            f"{n} of {sum(total.values())} GPU blocks ran throttled or beside another "
            f"process {seen}, and infperf_expert gpu_throttle=fail fails the test: fix the runner "
            "(cooling, power limit, locked clocks, the GPU to this job alone)"
        )
    side, share = max(
        ((s, flagged.get(s, 0) / n) for s, n in total.items() if n), key=lambda x: x[1]
    )
    if share <= GPU_SHARE_LIMIT:
        return None
    return (
        f"{share:.0%} of the {side} side's GPU blocks ran throttled or beside another "
        f"process {seen}, more than the {GPU_SHARE_LIMIT:.0%} that may be set aside: the "
        "rest is not the GPU's usual state. Rerun on a GPU that is cool, at its clocks and "
        "not shared (or infperf_expert gpu_throttle=keep to judge them anyway)"
    )


def _region_flags(extra: Mapping[str, Any] | None) -> list[str]:
    """What the stored pass's NVML readings saw across a timed region (``gpu_region``)."""
    region = (extra or {}).get("gpu_region") or {}
    flags = list(region.get("throttle_reasons") or [])
    return flags + (["other_process"] if region.get("other_processes") else [])


def gpu_withheld(
    c: Comparison,
    current: Mapping[str, Any] | None,
    baseline: Mapping[str, Any] | None,
    policy: str,
) -> str | None:
    """Why a stored verdict of a GPU benchmark whose run (or baseline's run) was throttled
    or shared is withheld (None: it stands): it is not a verdict on the code. A decided one
    is withheld (settling then interleaves both sides with the flagged blocks set aside);
    with ``fail``, any is. The judge writes the verdict."""
    decided = c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
    if policy == "keep" or not (decided or policy == "fail"):
        return None
    sides = [
        f"{name} ({', '.join(flags)})"
        for name, flags in (
            ("this run", _region_flags(current)),
            ("the baseline's run", _region_flags(baseline)),
        )
        if flags
    ]
    if not sides:
        return None
    return f"{c.verdict} withheld: the GPU ran throttled or shared during {' and '.join(sides)}" + (
        " (infperf_expert gpu_throttle=fail fails the test)" if policy == "fail" else ""
    )


def quiet_note(c: Comparison, counts: str) -> str:
    """What a verdict that stood on the quiet evidence says of how it was decided."""
    parts = c.parts or {}
    device = parts["gpu_time"]
    agreed = {"same": "are the same", "grew": "grew", "shrank": "fell"}[counts]
    note = (
        f"{device.verdict} by device time (the GPU's clocks held since the baseline's run), "
        f"with the exact work counts, which {agreed}, without settling"
    )
    latency = parts.get("median")
    if latency is not None and latency.verdict is not device.verdict:
        note += f"; the latency beside it: {latency.verdict}"
    return f"{note}; {device.note}" if device.note else note


def by_device_time(c: Comparison, counts: str, family: int) -> Comparison:
    """A GPU benchmark's stored regression decided by its quiet evidence (the policy's
    :attr:`~.policy.Step.STAND` with ``evidence="gpu_time"``): the device-time part heads
    the record, every part kept, with the run's family it held over (Bonferroni)."""
    device, family = (c.parts or {})["gpu_time"], max(1, family)
    n = _family.claims(family, len(c.parts or {}))
    held = device.p_value is not None and device.verdict is Verdict.REGRESSION
    return dataclasses.replace(
        device,
        alpha=c.alpha,
        parts=dict(c.parts or {}),
        work=c.work,
        evidence={"part": "gpu_time", "counts": counts},
        note=quiet_note(c, counts),
        family_size=family if held else device.family_size,
        holm_p=min(1.0, (device.p_value or 0.0) * n) if held else device.holm_p,
    )


def ungated_text(sd: float) -> str:
    """What a latency this runner cannot resolve says of itself."""
    return (
        f"host part ungated on this runner (+-{math.expm1(sd):.0%} between processes, as this "
        "run measured it): the pairs a comparison may take cannot resolve the threshold in "
        "it, so the device time and the exact work counts decide"
    )


def ungated_part(c: Comparison, sd: float) -> Comparison:
    """A verdict decided on the quiet evidence, its latency parts said ungated where they are
    undecided (they head nothing: :meth:`~.judge.Judge.combined`)."""
    text = ungated_text(sd)
    parts = {
        m: p
        if m == "gpu_time" or p.verdict is not Verdict.INCONCLUSIVE
        else dataclasses.replace(p, reason=Reason.HOST_UNGATED, note=text)
        for m, p in (c.parts or {}).items()
    }
    note = f"{c.note}; {text}" if c.note else text
    details = {**c.details, HOST_SD: round(sd, 5)}
    return dataclasses.replace(c, parts=parts, note=note, details=details)
