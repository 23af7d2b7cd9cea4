"""The work diff: what the two sides of a comparison did per call, side by side.

The profiled pass (:mod:`pytest_infperf.measure.profile`) counts a call's FLOPs, operator
calls, allocations and (on CUDA) kernels; here two such records become one frozen
:class:`~pytest_infperf.core.results.WorkDiff`: the headline change (FLOPs, else operator
calls, else kernels), the operators and kernels whose counts changed, and, where both sides
were profiled ``full``, the operators whose time moved most. Counts that varied from call to
call on either side are reported as varying and never make a headline. Words are
:mod:`pytest_infperf.report`'s.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping

from ..core.results import Comparison, Pair, WorkDiff, WorkProfile
from ..measure.profile import TOP

#: Names listed per table of changes (the largest changes first).
SHOWN = 8
#: Counts within this relative difference are equal: counts are means over the profiled
#: calls, exact when every call did the same.
EQUAL = 1e-9


def _pair(base: float | None, now: float | None) -> Pair:
    return (None if base is None else float(base), None if now is None else float(now))


def _changed(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return False
    return abs(a - b) > EQUAL * max(abs(a), abs(b), 1.0)


def _table_changes(
    base: Mapping[str, float],
    now: Mapping[str, float],
    base_cut: bool,
    now_cut: bool,
    first: frozenset[str] = frozenset(),
) -> list[tuple[str, float | None, float | None]]:
    """The names whose count differs: those in ``first`` (the operators that do FLOPs: a
    reviewer asks about ``aten::addmm`` before ``aten::as_strided``), then the largest
    absolute change first. A name missing from a side whose table was cut to its most
    frequent names is unknown there, not zero."""
    rows = []
    for name in set(base) | set(now):
        a = base.get(name, None if base_cut else 0.0)
        b = now.get(name, None if now_cut else 0.0)
        if a is None or b is None or _changed(a, b):
            rows.append((name, a, b))
    rows.sort(key=lambda r: (r[0] not in first, -abs((r[2] or 0.0) - (r[1] or 0.0)), r[0]))
    return rows[:SHOWN]


def _flop_ops(*profiles: WorkProfile) -> frozenset[str]:
    """The profiler's names (``aten::addmm``) of the operators FlopCounterMode counted
    FLOPs for (``aten.addmm``)."""
    return frozenset(name.replace(".", "::", 1) for p in profiles for name in p.flops_by_op)


def _movers(base: WorkProfile, now: WorkProfile) -> list[tuple[str, float]]:
    """``full`` on both sides: the operators and kernels whose time per call moved most."""
    out: dict[str, float] = {}
    for a, b in ((base.op_time, now.op_time), (base.kernel_time, now.kernel_time)):
        if a is None or b is None:
            continue
        for name in set(a) | set(b):
            out[name] = b.get(name, 0.0) - a.get(name, 0.0)
    moved = sorted(out.items(), key=lambda kv: (-abs(kv[1]), kv[0]))
    return [(name, delta) for name, delta in moved[:SHOWN] if delta != 0.0]


#: Which ``varying`` entry a measure's counts fall under: FLOPs are counted on one call,
#: so calls whose operators differ may differ in FLOPs too.
_VARIES = {
    "FLOPs": "operators",
    "operator calls": "operators",
    "graph nodes": "operators",
    "kernels": "kernels",
}


def _measures(base: WorkProfile, now: WorkProfile) -> list[tuple[str, float | None, float | None]]:
    nodes = "graph nodes" if "onnx" in now.source else "operator calls"
    return [
        ("FLOPs", base.flops, now.flops),
        (nodes, base.op_calls, now.op_calls),
        ("kernels", base.kernels, now.kernels),
    ]


def headline(base: WorkProfile, now: WorkProfile) -> tuple[float | None, str | None]:
    """The relative change of the first figure both sides counted: FLOPs, else operator
    calls (graph nodes for ONNX Runtime), else kernel launches; None where it varies."""
    varying = set(base.varying) | set(now.varying)
    for measure, a, b in _measures(base, now):
        if a and b is not None:
            return (None if _VARIES[measure] in varying else b / a - 1.0), measure
    return None, None


def largest_increase(base: WorkProfile, now: WorkProfile) -> tuple[float | None, str | None]:
    """The largest relative increase among the measures both sides counted that do not
    vary from call to call (None: none counted on both sides)."""
    varying = set(base.varying) | set(now.varying)
    found = [
        (b / a - 1.0, measure)
        for measure, a, b in _measures(base, now)
        if a and b is not None and _VARIES[measure] not in varying
    ]
    return max(found) if found else (None, None)


def diff(base: WorkProfile | None, now: WorkProfile | None) -> WorkDiff | None:
    """The work diff of two profiles (None where either side has none)."""
    if base is None or now is None:
        return None
    varying = sorted(set(base.varying) | set(now.varying))
    change, measure = headline(base, now)
    increase, increase_measure = largest_increase(base, now)
    figures = {
        "flops": _pair(base.flops, now.flops),
        "op_calls": _pair(base.op_calls, now.op_calls),
        "kernels": _pair(base.kernels, now.kernels),
        "alloc_bytes": _pair(base.alloc_bytes, now.alloc_bytes),
        "python_calls": _pair(base.python_calls, now.python_calls),
        "syncs": _pair(base.syncs, now.syncs),
    }
    ops = _table_changes(
        base.ops, now.ops, base.ops_truncated, now.ops_truncated, _flop_ops(base, now)
    )
    kernels = _table_changes(
        base.kernel_counts,
        now.kernel_counts,
        len(base.kernel_counts) >= TOP,
        len(now.kernel_counts) >= TOP,
    )
    counted = [(a, b) for k, (a, b) in figures.items() if k != "alloc_bytes"]
    same = (
        not varying
        and not ops
        and not kernels
        and any(a is not None and b is not None for a, b in counted)
        and not any(_changed(a, b) for a, b in counted)
    )
    gpu = _pair(
        statistics.median(base.gpu_time) if base.gpu_time else None,
        statistics.median(now.gpu_time) if now.gpu_time else None,
    )
    return WorkDiff(
        flops=figures["flops"],
        op_calls=figures["op_calls"],
        kernels=figures["kernels"],
        alloc_bytes=figures["alloc_bytes"],
        python_calls=figures["python_calls"],
        syncs=figures["syncs"],
        gpu_time=gpu,
        ops=ops,
        kernel_changes=kernels,
        time_movers=_movers(base, now),
        varying=varying,
        change=change,
        measure=measure,
        increase=increase,
        increase_measure=increase_measure,
        same=same,
    )


def not_the_code_of(witness: WorkProfile | None, base: WorkProfile | None) -> str | None:
    """A stored baseline of the base commit counted what one call does (``witness``); the
    base side measured now must count exactly the same, or it did not run that commit's
    code. The first exact count that differs ("FLOPs: 8.389e+06 in the stored baseline,
    1.258e+07 on the base side now"), or None (the same, or nothing to tell)."""
    if witness is None or base is None:
        return None
    varying = set(witness.varying) | set(base.varying)
    for measure, a, b in _measures(witness, base):
        if a is None or b is None or _VARIES[measure] in varying:
            continue
        if _changed(a, b):
            return f"{measure}: {a:.4g} in the stored baseline, {b:.4g} on the base side now"
    return None


def more_work(work: WorkDiff | None, limit: float | None) -> bool:
    """Whether a work diff shows more work than ``limit`` allows (``max_work_increase``):
    the largest increase of a measure that does not vary from call to call."""
    if work is None or limit is None or work.increase is None:
        return False
    return work.increase > limit


def attach(c: Comparison, now: WorkProfile | None, base: WorkProfile | None) -> Comparison:
    """``c`` with the work diff of the two sides' profiled passes (kept when it has one
    already: an interleaved run's, from the two processes it measured)."""
    if c.work is not None:
        return c
    found = diff(base, now)
    return c if found is None else dataclasses.replace(c, work=found)
