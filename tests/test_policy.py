"""The comparing policy (judge/policy.py) as tables: what happens to one compared benchmark
from the facts about it. Pure functions, no pytester, no git: the whole file runs in well
under a second. docs/COMPARING.md ("What decides a compared benchmark") says the same
table in words."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_infperf.cli.compare import facts_of
from pytest_infperf.core.budget import Spare
from pytest_infperf.core.names import CompareMode, Metric
from pytest_infperf.core.options import BenchOptions
from pytest_infperf.core.results import (
    BenchmarkResult,
    Comparison,
    Origin,
    Reason,
    Verdict,
    WorkDiff,
)
from pytest_infperf.judge.judge import Judge
from pytest_infperf.judge.policy import (
    Decision,
    Facts,
    Step,
    Watch,
    after_stored,
    budget_stopped,
    cannot_settle,
    counts_relation,
    might_fail,
    misread,
    next_pair,
    route,
    routes_all,
)
from pytest_infperf.judge.rules import Policy

R, U, N, IN, X = (
    Verdict.REGRESSION,
    Verdict.UNCHANGED,
    Verdict.NO_REGRESSION,
    Verdict.INCONCLUSIVE,
    Verdict.IMPROVEMENT,
)
SHORT = Spare(seconds=1.0, share=10.0, why="the run's budget (60 s) was spent")
PLENTY = Spare(seconds=500.0, share=10.0, why="the run's budget (600 s) was spent")

SAME = WorkDiff(flops=(1e9, 1e9), op_calls=(500, 500), kernels=(275, 275), same=True)
GREW = WorkDiff(flops=(1e9, 1.083e9), op_calls=(500, 540), kernels=(275, 297), increase=0.083)
FEWER = WorkDiff(flops=(1e9, 0.9e9), op_calls=(500, 460), kernels=(275, 253))
MIXED = WorkDiff(flops=(1e9, 1.1e9), op_calls=(500, 460))
VARYING = WorkDiff(op_calls=(500, 500), varying=["operators"])
HOST_MOVED = WorkDiff(
    flops=(1e9, 1e9), op_calls=(500, 500), kernels=(275, 275), python_calls=(900, 1200)
)


def cmp(
    verdict: Verdict, ratio: float = 1.0, low: float = 0.98, high: float = 1.02, **kw: Any
) -> Comparison:
    return Comparison(verdict, ratio=ratio, ci_low=low, ci_high=high, **kw)


def gpu(
    device: Verdict,
    latency: Verdict = Verdict.INCONCLUSIVE,
    work: WorkDiff | None = SAME,
    p: float = 1e-6,
    lat: tuple[float, float, float] = (1.05, 0.75, 1.4),
    **kw: Any,
) -> Comparison:
    """A CUDA benchmark's stored verdict: its latency and device-time parts, the worst
    heading the record (as judge.combined does)."""
    dev_ratio = {R: 1.08, X: 0.9}.get(device, 1.0)
    parts = {
        "median": cmp(latency, *lat, metric=Metric.MEDIAN),
        "gpu_time": cmp(
            device,
            dev_ratio,
            dev_ratio - 0.001,
            dev_ratio + 0.001,
            metric=Metric.GPU_TIME,
            p_value=p,
        ),
    }
    order = [R, IN, N, X, U]
    worst = min(parts.values(), key=lambda c: order.index(c.verdict))
    return Comparison(
        worst.verdict, ratio=worst.ratio, ci_low=worst.ci_low, ci_high=worst.ci_high,
        parts=parts, work=work, **kw,
    )  # fmt: skip


GPU = {"domain": "gpu", "clocks_held": True}
#: Latency parts (ratio, interval): twice as slow, and within a host's own spread.
X2, X13 = (2.0, 1.8, 2.2), (1.3, 1.2, 1.4)
#: Stored verdicts of a CPU benchmark.
UNC, NOREG = cmp(U), cmp(N, 0.95, 0.8, 1.04)
REG, UND, IMP = cmp(R, 1.2, 1.1, 1.3), cmp(IN, 1.04, 0.9, 1.2), cmp(X, 0.8, 0.7, 0.9)
FAIL = "the worker failed"
WIDE, WITHIN = cmp(IN, 1.045, 0.97, 1.3), cmp(IN, 1, 0.97, 1.04)
INTER, SETTLE = Step.INTERLEAVE, Step.SETTLE


def short(**kw: Any) -> Facts:
    """A CPU benchmark, the budget nearly spent, its stored pass 5 s."""
    return Facts(budget=SHORT, timed_s=5, **kw)


def on_gpu(stored: Comparison, **kw: Any) -> Facts:
    return Facts(**{**GPU, **kw}, stored=stored)


LAYER, LAYER_WEAK = gpu(R, work=GREW), gpu(R, work=GREW, p=1e-4)
#: The latency withheld by the drift guard (the host moved), device and counts unchanged.
WITHHELD = gpu(U)
WITHHELD = Comparison(
    IN, ratio=1.0, ci_low=0.98, ci_high=1.02, reason=Reason.DRIFT_WITHHELD,
    parts={**(WITHHELD.parts or {}), "median": cmp(IN, reason=Reason.DRIFT_WITHHELD)},
    work=SAME,
)  # fmt: skip
#: A device-time regression whose own part ran throttled.
THROTTLED_PART = Comparison(
    R, ratio=1.08, ci_low=1.07, ci_high=1.09, work=GREW,
    parts={**(LAYER.parts or {}), "gpu_time": cmp(R, 1.08, 1.07, 1.09, metric=Metric.GPU_TIME,
           p_value=1e-6, reason=Reason.GPU_THROTTLED)},
)  # fmt: skip
REMEASURE, STAND, THROTTLED = Step.REMEASURE, Step.STAND, Reason.GPU_THROTTLED

# (id, facts, step, a word of the reason; None: no reason)
AFTER: list[tuple[str, Facts, Step, str | None]] = [
    # --- CPU: what rules out a regression stands; the rest is settled
    ("cpu unchanged stands", Facts(stored=UNC), Step.STAND, None),
    ("cpu no-regression stands", Facts(stored=NOREG), Step.STAND, None),
    ("cpu regression settles", Facts(stored=REG), Step.SETTLE, None),
    ("cpu inconclusive settles", Facts(stored=UND), Step.SETTLE, None),
    ("cpu improvement settles", Facts(stored=IMP), Step.SETTLE, None),
    ("ttft regression settles", Facts(metric="ttft", stored=REG), Step.SETTLE, None),
    # --- settling impossible: stands, or fresh samples for what is flagged
    ("a results file: unchanged", Facts(commit=False, stored=UNC), Step.STAND, None),
    ("a results file: improvement", Facts(commit=False, stored=IMP), Step.REMEASURE, "file"),
    ("a results file: regression", Facts(commit=False, stored=REG), Step.REMEASURE, "file"),
    ("a results file: inconclusive", Facts(commit=False, stored=UND), Step.REMEASURE, "file"),
    ("metric p90: improvement", Facts(metric="p90", stored=IMP), REMEASURE, "metric=p90"),
    ("metric memory: regression stands", Facts(metric="memory", stored=REG), Step.STAND, "memory"),
    ("gpu_time: improvement stands", Facts(metric="gpu_time", commit=False, stored=IMP), STAND,
     "file"),
    ("remeasure=0: regression stands", Facts(commit=False, remeasure=0, stored=REG), STAND, "file"),
    ("remeasure=0: undecided stands", Facts(commit=False, remeasure=0, stored=UND), STAND, "file"),
    ("worker broke: regression", Facts(unsettled=FAIL, stored=REG), Step.REMEASURE, FAIL),
    ("worker broke: improvement", Facts(unsettled=FAIL, stored=IMP), REMEASURE, FAIL),
    # --- after a misread, a CPU verdict that passes is re-checked
    ("misread: unchanged re-checked", Facts(misread=True, stored=UNC), Step.RECHECK, None),
    ("misread: no-regression re-checked", Facts(misread=True, stored=NOREG), Step.RECHECK, None),
    ("misread: regression settled", Facts(misread=True, stored=REG), Step.SETTLE, None),
    ("misread, a results file: stands", Facts(misread=True, commit=False, stored=UNC), STAND, None),
    ("misread, on a GPU: stands", Facts(misread=True, domain="gpu", stored=UNC), Step.STAND, None),
    # --- the budget cuts only what passes either way, never what might fail
    ("budget short: regression settled", short(stored=REG), Step.SETTLE, None),
    ("budget short: [0.97, 1.30] settled", short(stored=WIDE), Step.SETTLE, None),
    ("budget short: stored improvement settled", short(stored=IMP), Step.SETTLE, None),
    ("budget short, machine faster: settled", short(faster=1.1, stored=WITHIN), Step.SETTLE, None),
    ("budget short: undecided within it cut", short(stored=WITHIN), Step.CUT, "(60 s)"),
    ("budget plenty: undecided within it", Facts(budget=PLENTY, stored=WITHIN), Step.SETTLE, None),
    ("budget refused routing: stands", Facts(refused="spent", stored=UNC), Step.STAND, "spent"),
    ("budget: seconds = 2 x the stored pass", Facts(budget=Spare(10), timed_s=5, stored=WITHIN),
     SETTLE, None),
    ("misread: no-baseline stands", Facts(misread=True, stored=cmp(Verdict.NO_BASELINE)), STAND,
     None),
    # --- a GPU benchmark: its quiet evidence stands only for a regression whose counts grew
    ("gpu +1 layer: device regression, counts grew", on_gpu(LAYER), Step.STAND, None),
    ("gpu +1 layer, latency unchanged", on_gpu(gpu(R, U, work=GREW)), Step.STAND, None),
    ("gpu +1 layer, the lock's domain name", on_gpu(LAYER, domain="gpu-all"), Step.STAND, None),
    ("gpu +1 layer, a results file: stands", on_gpu(LAYER, commit=False), Step.STAND, None),
    ("gpu +1 layer, budget short: stands", on_gpu(LAYER, budget=SHORT), Step.STAND, None),
    # a latency its stored pass left undecided stands on the device time where that passes
    # and the counts did not grow; one claimed or read slower is settled
    ("gpu A/A: latency undecided, device unchanged", on_gpu(gpu(U)), STAND, None),
    ("gpu A/A: latency undecided, device no-reg.", on_gpu(gpu(N)), STAND, None),
    ("gpu: latency regressed, device and work same", on_gpu(gpu(U, R)), SETTLE, None),
    ("gpu: latency x1.3, device and work same", on_gpu(gpu(U, R, lat=X13)), SETTLE, None),
    ("gpu: latency x2, device and work same", on_gpu(gpu(U, R, lat=X2)), SETTLE, None),
    ("gpu: latency reads slower, undecided", on_gpu(gpu(U, IN, lat=X13)), SETTLE, None),
    ("gpu: latency withheld, device and work same", on_gpu(WITHHELD), STAND, None),
    ("gpu: latency x1.3, a results file", on_gpu(gpu(U, R), commit=False), REMEASURE, "file"),
    ("gpu: latency undecided, worker broke", on_gpu(gpu(U), unsettled=FAIL), STAND, None),
    ("gpu: latency read slower, worker broke", on_gpu(gpu(U, IN, lat=X13), unsettled=FAIL),
     REMEASURE, FAIL),
    ("gpu: both unchanged, same counts", on_gpu(gpu(U, U)), Step.STAND, None),
    ("gpu: both unchanged, counts grew", on_gpu(gpu(U, U, work=GREW)), SETTLE, "work counts grew"),
    ("gpu: latency undecided, counts grew", on_gpu(gpu(U, work=GREW)), SETTLE, None),
    ("gpu: device improvement, fewer counts", on_gpu(gpu(X, work=FEWER)), STAND, None),
    ("gpu: device improvement, latency unchanged", on_gpu(gpu(X, U, work=FEWER)), SETTLE, None),
    # a device-time regression the counts do not explain: settled, saying what disagreed
    ("gpu: device regression, same counts", on_gpu(gpu(R)), SETTLE, "says regression"),
    ("gpu: device regression, fewer counts", on_gpu(gpu(R, work=FEWER)), SETTLE, "fell"),
    ("gpu: counts moved both ways", on_gpu(gpu(R, work=MIXED)), SETTLE, "both ways"),
    ("gpu: device reg., Python calls grew", on_gpu(gpu(R, U, work=HOST_MOVED)), STAND, None),
    ("gpu disagrees, a results file: usual rule", on_gpu(gpu(R), commit=False), REMEASURE,
     "file"),
    # no quiet evidence: the usual rule
    ("gpu regression, not over the family", on_gpu(LAYER_WEAK, family=200), SETTLE, None),
    ("gpu clocks moved: usual rule", on_gpu(LAYER, clocks_held=False), SETTLE, None),
    ("gpu no clock reference: usual rule", on_gpu(LAYER, clocks_held=None), SETTLE, None),
    ("gpu counts vary: usual rule", on_gpu(gpu(R, work=VARYING)), SETTLE, None),
    ("gpu not profiled: usual rule", on_gpu(gpu(R, work=None)), SETTLE, None),
    ("gpu device undecided: usual rule", on_gpu(gpu(IN, U, work=GREW)), SETTLE, None),
    ("gpu throttled: settled", on_gpu(gpu(R, work=GREW, reason=THROTTLED)), SETTLE, None),
    ("gpu device throttled", on_gpu(THROTTLED_PART), SETTLE, None),
    ("gpu latency alone, unchanged", on_gpu(UNC), Step.STAND, None),
    ("gpu latency alone, regression", on_gpu(REG), SETTLE, None),
    ("gpu on the CPU's facts: usual rule", Facts(stored=LAYER), SETTLE, None),
    ("cpu with clocks held: usual rule", Facts(clocks_held=True, stored=LAYER), SETTLE, None),
    ("gpu +1 layer, p x 2 parts under run alpha", on_gpu(gpu(R, work=GREW, p=0.004)), STAND,
     None),
    ("gpu +1 layer, p x 2 parts over run alpha", on_gpu(gpu(R, work=GREW, p=0.008)), SETTLE,
     None),
    ("gpu +1 layer, p x family x parts = run alpha",
     on_gpu(gpu(R, work=GREW, p=0.0025), family=2), STAND, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("facts", "step", "reason"), [row[1:] for row in AFTER], ids=[row[0] for row in AFTER]
)
def test_after_the_stored_pass(facts: Facts, step: Step, reason: str | None) -> None:
    d = after_stored(facts)
    assert d.step is step, d
    if reason is None:
        assert d.reason == ""
    else:
        assert reason in d.reason
    if not facts.refused:
        assert d.tally == ""
    # Only what passes either way may be cut by the budget; nothing after a misread.
    if d.step in (Step.SETTLE, Step.RECHECK):
        assert facts.stored is not None
        whole = (facts.misread and facts.domain == "cpu") or might_fail(facts.stored, facts.faster)
        assert d.budget_may_cut is (not whole)
    # Only a GPU's device time stands as the quiet evidence: a regression whose counts grew,
    # or a pass beside a latency its stored pass left undecided.
    parts = facts.stored.parts or {}
    device = parts.get("gpu_time")
    undecided = any(p.verdict is IN for m, p in parts.items() if m != "gpu_time")
    expected = device is not None and facts.domain != "cpu" and d.step is Step.STAND
    expected = expected and (device.verdict is R or undecided)
    assert (d.evidence is not None) == expected, d


#: A host this runner cannot resolve the threshold in (log sd; the recorded H200: +-24%).
UNGATED = 0.24
#: Latency parts within the host's spread, and one that reads slower at all.
LAT, LAT_WITHIN, LAT_SLOWER = (1.0, 0.7, 1.4), (1.3, 0.9, 1.9), (1.3, 1.1, 1.6)
WORK_GREW, HOST_UNGATED = Reason.WORK_GREW, Reason.HOST_UNGATED


def ungated(stored: Comparison, **kw: Any) -> Facts:
    return on_gpu(stored, host_ungated=UNGATED, **kw)


def gpu_lat(device: Verdict, latency: Verdict = IN, **kw: Any) -> Comparison:
    return gpu(device, latency, lat=kw.pop("lat", LAT), **kw)


# (id, facts, step, the evidence that decided, what withholds a pass, a word of the reason)
HOST: list[tuple[str, Facts, Step, str | None, Reason | None, str | None]] = [
    # the host part cannot resolve the threshold: no pair is spent, the quiet evidence decides
    ("ungated: device unchanged, same counts", ungated(gpu_lat(U)), STAND, "gpu_time", None, None),
    ("ungated: device no-regression", ungated(gpu_lat(N)), STAND, "gpu_time", None, None),
    ("ungated: device faster, fewer counts", ungated(gpu_lat(X, work=FEWER)), STAND, "gpu_time",
     None, None),
    ("ungated: +1 layer", ungated(gpu_lat(R, work=GREW)), STAND, "gpu_time", None, None),
    ("ungated: +1 layer, latency x1.3", ungated(gpu_lat(R, lat=LAT_WITHIN, work=GREW)), STAND,
     "gpu_time", None, None),
    ("ungated: results file, device unchanged", ungated(gpu_lat(U), commit=False), STAND,
     "gpu_time", None, None),
    # ...and where it cannot, the verdict is no pass
    ("ungated: device unchanged, counts grew", ungated(gpu_lat(U, work=GREW)), STAND, None,
     WORK_GREW, None),
    ("ungated: Python calls grew", ungated(gpu_lat(U, work=HOST_MOVED)), STAND, None, WORK_GREW,
     None),
    ("ungated: no device time", ungated(UND), STAND, None, HOST_UNGATED, None),
    ("ungated: a pass, no device time", ungated(UNC), STAND, None, HOST_UNGATED, None),
    # ...where the device time did not speak here, the pairs measure it: settled on it
    ("ungated: device undecided", ungated(gpu_lat(IN)), SETTLE, None, None, "did not decide"),
    ("ungated: clocks moved", ungated(gpu_lat(U), clocks_held=False), SETTLE, None, None,
     "did not decide"),
    ("ungated: no clock reference", ungated(gpu_lat(U), clocks_held=None), SETTLE, None, None,
     "did not decide"),
    ("ungated: all counts vary", ungated(gpu_lat(U, work=VARYING)), SETTLE, None, None,
     "did not decide"),
    ("ungated: not profiled", ungated(gpu_lat(U, work=None)), SETTLE, None, None,
     "did not decide"),
    ("ungated: throttled", ungated(gpu_lat(U, reason=THROTTLED)), SETTLE, None, None,
     "did not decide"),
    ("ungated: device undecided, latency reads slower",
     ungated(gpu_lat(IN, lat=LAT_SLOWER)), SETTLE, None, None, "did not decide"),
    ("ungated: results file, counts grew", ungated(gpu_lat(U, work=GREW), commit=False), STAND,
     None, WORK_GREW, "file"),
    ("ungated: worker broke", ungated(gpu_lat(IN), unsettled=FAIL), STAND, None, HOST_UNGATED,
     FAIL),
    # a latency within the host's spread is the host's; one that reads slower is never
    # passed on the device time, and one claimed slower at the runner's spread is settled
    ("ungated: latency x1.3 within its spread", ungated(gpu_lat(U, lat=LAT_WITHIN)), STAND,
     None, HOST_UNGATED, None),
    ("ungated: latency x0.8 within its spread", ungated(gpu_lat(U, lat=(0.8, 0.5, 1.3))), STAND,
     "gpu_time", None, None),
    ("ungated: latency reads slower", ungated(gpu_lat(U, lat=LAT_SLOWER)), STAND, None,
     HOST_UNGATED, None),
    ("ungated: latency reads slower, +1 layer", ungated(gpu_lat(R, lat=LAT_SLOWER, work=GREW)),
     STAND, "gpu_time", None, None),
    ("ungated: latency x2 regression", ungated(gpu_lat(U, R, lat=X2)), SETTLE, None, None, None),
    ("ungated: latency x2, a results file", ungated(gpu_lat(U, R, lat=X2), commit=False),
     REMEASURE, None, None, "file"),
    ("ungated: device reg., same counts", ungated(gpu_lat(R)), SETTLE, None, None, "says"),
    # the host's spread speaks of times the host moves, not of memory or the device alone
    ("ungated, metric memory", ungated(gpu_lat(IN), metric="memory"), STAND, None, None,
     "metric=memory"),
    ("ungated, metric gpu_time", ungated(gpu_lat(IN), metric="gpu_time"), STAND, None, None,
     "metric=gpu_time"),
    # a device-time regression the clocks cannot vouch for claims nothing for the latency
    ("ungated: clocks moved, device reg.", ungated(gpu_lat(R), clocks_held=False), SETTLE, None,
     None, "did not decide"),
    ("ungated: clocks moved, device reg., a results file",
     ungated(gpu_lat(R), clocks_held=False, commit=False), STAND, None, HOST_UNGATED, "file"),
    # resolvable: the usual rule
    ("resolvable: device unchanged", on_gpu(gpu_lat(U)), STAND, "gpu_time", None, None),
    ("resolvable: latency reads slower", on_gpu(gpu_lat(U, lat=LAT_SLOWER)), SETTLE, None, None,
     None),
    ("ungated on the CPU's facts: usual rule", Facts(stored=UNC, host_ungated=UNGATED), STAND,
     None, None, None),
    # no pass stands against grown work: settled, or no pass
    ("cpu unchanged, counts grew", Facts(stored=cmp(U, work=GREW)), SETTLE, None, None, "grew"),
    ("cpu no-regression, counts grew", Facts(stored=cmp(N, work=GREW)), SETTLE, None, None,
     "grew"),
    ("cpu improvement, counts grew", Facts(stored=cmp(X, 0.8, 0.7, 0.9, work=GREW)), SETTLE, None,
     None, "grew"),
    ("cpu unchanged, Python calls grew", Facts(stored=cmp(U, work=HOST_MOVED)), SETTLE, None, None,
     "grew"),
    ("cpu unchanged, counts grew, metric p90", Facts(metric="p90", stored=cmp(U, work=GREW)),
     STAND, None, WORK_GREW, "metric=p90"),
    ("cpu unchanged, counts grew, results file", Facts(commit=False, stored=cmp(U, work=GREW)),
     STAND, None, WORK_GREW, "file"),
    ("cpu unchanged, counts grew, worker broke", Facts(unsettled=FAIL, stored=cmp(U, work=GREW)),
     STAND, None, WORK_GREW, FAIL),
    ("cpu unchanged, same counts", Facts(stored=cmp(U, work=SAME)), STAND, None, None, None),
    ("cpu unchanged, fewer counts", Facts(stored=cmp(U, work=FEWER)), STAND, None, None, None),
    ("cpu unchanged, counts vary", Facts(stored=cmp(U, work=VARYING)), STAND, None, None, None),
    ("cpu unchanged, counts both ways", Facts(stored=cmp(U, work=MIXED)), STAND, None, None, None),
    ("gpu unchanged, counts grew, resolvable", on_gpu(gpu_lat(U, U, work=GREW)), SETTLE, None,
     None, "grew"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("facts", "step", "evidence", "withhold", "reason"),
    [row[1:] for row in HOST],
    ids=[row[0] for row in HOST],
)
def test_the_host_part_and_the_work(
    facts: Facts, step: Step, evidence: str | None, withhold: Reason | None, reason: str | None
) -> None:
    d = after_stored(facts)
    assert (d.step, d.evidence, d.withhold) == (step, evidence, withhold), d
    assert facts.stored is not None
    assert d.counts == (counts_relation(facts.stored.work) if evidence else None), d
    if reason is None:
        assert d.reason == ""
    else:
        assert reason in d.reason
    # The host part is said ungated exactly where it is and the verdict stood without pairs.
    stood_ungated = facts.host_ungated is not None and facts.domain != "cpu" and step is STAND
    assert d.ungated == (UNGATED if stood_ungated and (evidence or withhold) else None), d
    if d.step is SETTLE:  # what may still fail is settled whole
        assert d.budget_may_cut is (not might_fail(facts.stored, facts.faster))


def _part(ratio: float | None, low: float | None, high: float | None, **kw: Any) -> Comparison:
    return Comparison(IN, ratio=ratio, ci_low=low, ci_high=high, **kw)


TP, GT = Metric.THROUGHPUT, Metric.GPU_TIME
# (id, the parts, or a headline alone, whether a time the host moves reads slower)
READS: list[tuple[str, dict[str, Comparison] | Comparison, bool]] = [
    ("past the threshold", {"median": _part(1.06, 0.7, 1.5)}, True),
    ("at the threshold", {"median": _part(1.05, 0.7, 1.5)}, False),
    ("its interval above 1", {"median": _part(1.02, 1.01, 1.03)}, True),
    ("its interval from 1", {"median": _part(1.02, 1.0, 1.04)}, False),
    ("no interval", {"median": _part(1.02, None, None)}, False),
    ("no ratio, an interval above 1", {"median": _part(None, 1.01, 1.03)}, True),
    ("a ratio of 1 inside an interval above it", {"median": _part(1.0, 1.001, 1.1)}, True),
    ("its own threshold", {"median": _part(1.08, 0.7, 1.5, threshold=0.1)}, False),
    ("the device alone slower", {"median": _part(1.0, 0.9, 1.1),
                                 "gpu_time": _part(1.3, 1.2, 1.4, metric=GT)}, False),
    ("the device first, the latency slower", {"gpu_time": _part(1.0, 0.99, 1.01, metric=GT),
                                              "median": _part(1.2, 1.1, 1.3)}, True),
    ("a TTFT slower beside a TPOT", {"ttft": _part(1.0, 0.9, 1.1),
                                     "tpot": _part(1.1, 0.9, 1.3)}, True),
    ("throughput lower", {"median": _part(0.94, 0.7, 1.3, metric=TP)}, True),
    ("throughput higher", {"median": _part(1.06, 0.97, 1.2, metric=TP)}, False),
    ("throughput's interval below 1", {"median": _part(0.98, 0.95, 0.99, metric=TP)}, True),
    ("throughput's interval up to 1", {"median": _part(0.98, 0.95, 1.0, metric=TP)}, False),
    ("throughput without figures", {"median": _part(None, None, None, metric=TP)}, False),
    ("no parts: the headline slower", _part(1.2, 0.9, 1.6), True),
    ("no parts: the headline within", _part(1.0, 0.9, 1.1), False),
]  # fmt: skip


@pytest.mark.parametrize(("parts", "slower"), [r[1:] for r in READS], ids=[r[0] for r in READS])
def test_what_reads_slower(parts: dict[str, Comparison] | Comparison, slower: bool) -> None:
    from pytest_infperf.judge.policy import _reads_slower

    c = parts if isinstance(parts, Comparison) else Comparison(IN, parts=parts)
    assert _reads_slower(c) is slower


def test_the_reasons_and_defaults_said_exactly() -> None:
    d = after_stored(Facts(stored=cmp(U, work=GREW)))
    assert (d.step, d.reason, d.budget_may_cut) == (SETTLE, "the exact work counts grew", False)
    # A verdict undecided up to 1.04: within the threshold only where the machine's speed
    # is not allowed for (the default: no faster than at the baseline's run).
    assert not might_fail(cmp(IN, 1.0, 0.9, 1.04))
    assert might_fail(cmp(IN, 1.0, 0.9, 1.04), 1.02)


def test_the_quiet_evidence_says_what_decided() -> None:
    d = after_stored(on_gpu(gpu(R, work=GREW)))
    assert (d.evidence, d.counts) == ("gpu_time", "grew")
    assert after_stored(Facts(stored=cmp(U))).evidence is None


MOVED, MISREAD = "machine-moved", "stored-misread"
ENV = "environment-changed"
ROUTE: list[tuple[str, Facts, Step, str]] = [
    ("a still machine: stored pass", Facts(), Step.STORED, ""),
    ("a moved machine: interleaved at once", Facts(moved=True), Step.INTERLEAVE, MOVED),
    ("after a misread: interleaved at once", Facts(misread=True), Step.INTERLEAVE, MISREAD),
    ("moved, on a GPU: stored pass", Facts(moved=True, domain="gpu"), Step.STORED, ""),
    ("moved, stored-first: stored pass", Facts(moved=True, settle="stored-first"), Step.STORED, ""),
    ("moved, not in the baseline: stored", Facts(moved=True, comparable=False), Step.STORED, ""),
    ("moved, a results file: stored pass", Facts(moved=True, commit=False), Step.STORED, ""),
    ("moved, metric p99: stored pass", Facts(moved=True, metric="p99"), Step.STORED, ""),
    ("moved, worker broken: stored pass", Facts(moved=True, unsettled=FAIL), Step.STORED, ""),
    ("moved, budget short: stored pass", Facts(moved=True, budget=SHORT), Step.STORED, "moved"),
    ("moved, short, guard warns", Facts(moved=True, budget=SHORT, guard_adjusts=0), INTER, MOVED),
    ("moved, short, refusals settled", Facts(moved=True, budget=Spare(1, 10, 2, 2)), INTER, MOVED),
    ("moved, budget plenty", Facts(moved=True, budget=PLENTY), Step.INTERLEAVE, MOVED),
    ("moved, seconds = 2 shares: refused", Facts(moved=True, budget=Spare(20, 10)), Step.STORED,
     "budget"),
    ("moved, seconds past 2 shares", Facts(moved=True, budget=Spare(21, 10)), INTER, MOVED),
    ("moved, half the refused resettled", Facts(moved=True, budget=Spare(1, 10, 4, 2)), Step.STORED,
     "budget"),
    ("moved, 3 of 7 refused resettled", Facts(moved=True, budget=Spare(1, 10, 7, 3)), Step.STORED,
     "budget"),
    ("misread, budget short: never refused", Facts(misread=True, budget=SHORT), INTER, MISREAD),
    # a baseline of another environment compares nothing stored: both commits measured here
    ("another environment: interleaved", Facts(comparable=False, env_changed=True), INTER, ENV),
    ("another env., on a GPU", Facts(comparable=False, env_changed=True, domain="gpu"), INTER,
     ENV),
    ("another env., stored-first", Facts(env_changed=True, settle="stored-first"), INTER, ENV),
    ("another env., budget short", Facts(env_changed=True, budget=SHORT), INTER, ENV),
    ("another env., a results file", Facts(env_changed=True, commit=False), Step.STORED, ""),
    ("another env., metric p90", Facts(env_changed=True, metric="p90"), Step.STORED, ""),
    ("another env., worker broken", Facts(env_changed=True, unsettled=FAIL), Step.STORED, ""),
]  # fmt: skip


@pytest.mark.parametrize(
    ("facts", "step", "reason"), [row[1:] for row in ROUTE], ids=[row[0] for row in ROUTE]
)
def test_before_the_stored_pass(facts: Facts, step: Step, reason: str) -> None:
    d = route(facts)
    assert d.step is step and reason in d.reason, d
    assert (d.tally == "refused") == (step is Step.STORED and bool(reason))
    if step is Step.INTERLEAVE:  # the reason recorded as settled_because, exactly
        assert d.reason == reason
        # after a misread nothing is cut for the budget; a moved machine's may be
        assert d.budget_may_cut is (reason in (MOVED, ENV))


def test_a_refusal_and_its_settling_are_tallied() -> None:
    d = after_stored(Facts(refused="spent", budget=PLENTY, stored=cmp(R, 1.2, 1.1, 1.3)))
    assert d == Decision(Step.SETTLE, budget_may_cut=False, tally="resettled")
    d = after_stored(Facts(refused="spent", budget=PLENTY, misread=True, stored=UNC))
    assert d == Decision(Step.RECHECK, budget_may_cut=False, tally="resettled")
    d = after_stored(Facts(refused="spent", stored=REG))  # refused, but no budget: no tally
    assert d.tally == ""


def test_the_stored_pass_is_needed_and_why_settling_cannot_happen_is_said() -> None:
    with pytest.raises(AssertionError, match="^" + re.escape("after_stored needs the stored pass")):
        after_stored(Facts())
    file = "--perf-compare names a results file, so there is no commit to measure"
    assert cannot_settle(Facts(commit=False)) == file
    assert cannot_settle(Facts(metric="p90")) == (
        "metric=p90: an interleaved run judges the median latency, so the stored p90 verdict stands"
    )
    assert cannot_settle(Facts(unsettled=FAIL)) == FAIL and cannot_settle(Facts()) is None


@pytest.mark.parametrize(
    ("c", "why", "verdict", "reason", "note", "not_settled"),
    [
        (UND, "", IN, None, None, None),  # not cut short: as it was
        (REG, "spent", R, None, None, None),  # decided: its pairs crossed a boundary
        (UND, "spent before process pair 3", IN, Reason.BUDGET, "spent before process pair 3",
         "spent"),
        (cmp(IN, note="n"), "spent", IN, Reason.BUDGET, "spent; n", "spent"),
    ],
)  # fmt: skip
def test_a_verdict_the_budget_cut_short_says_so(
    c: Comparison, why: str, verdict: Verdict, reason: Reason | None, note: str | None,
    not_settled: str | None,
) -> None:  # fmt: skip
    got = budget_stopped(c, why)
    assert (got.verdict, got.reason, got.note, got.not_settled) == (
        verdict, reason, note, not_settled,
    )  # fmt: skip


AB = {"decided_by": CompareMode.AB}
#: (stored, settled, the ratio misread() returns): the threshold 5%, half of it the limit.
MISREAD: list[tuple[str, Comparison, Comparison, float | None]] = [
    ("apart beyond both errors", cmp(R, 1.2, 1.17, 1.24), cmp(U, 1.1, 1.08, 1.12, **AB),
     1.2 / 1.1),
    ("the other way round", cmp(U, 1.0, 0.98, 1.02), cmp(R, 1.2, 1.17, 1.24, **AB), 1.0 / 1.2),
    ("overlapping intervals", cmp(R, 1.2, 1.1, 1.3), cmp(R, 1.15, 1.12, 1.18, **AB), None),
    ("touching intervals", cmp(R, 1.2, 1.12, 1.3), cmp(R, 1.1, 1.0, 1.12, **AB), None),
    ("apart, within half the threshold", cmp(U, 1.02, 1.015, 1.025), cmp(U, 1.0, 0.995, 1.005,
     **AB), None),
    ("not interleaved", cmp(R, 1.2, 1.17, 1.24), cmp(U, 1.1, 1.08, 1.12), None),
    ("no interval", cmp(R, 1.2, 1.17, 1.24), Comparison(U, ratio=1.0, **AB), None),
    ("an infinite bound", cmp(R, 1.2, 1.17, math.inf), cmp(U, 1.1, 1.08, 1.12, **AB), None),
    ("a zero bound", cmp(R, 1.2, 0.0, 1.24), cmp(U, 1.1, 1.08, 1.12, **AB), None),
    ("other metrics", cmp(R, 1.2, 1.17, 1.24), cmp(U, 1.1, 1.08, 1.12, metric=Metric.P90, **AB),
     None),
    ("parts judged by both", Comparison(R, ratio=1.2, parts={"ttft": cmp(R, 1.2, 1.17, 1.24)}),
     Comparison(U, ratio=1.1, parts={"ttft": cmp(U, 1.1, 1.08, 1.12)}, **AB), 1.2 / 1.1),
    ("parts on one side only", Comparison(R, ratio=1.2, parts={"ttft": cmp(R, 1.2, 1.17, 1.24)}),
     cmp(U, 1.1, 1.08, 1.12, **AB), None),
    ("no common part", Comparison(R, parts={"ttft": cmp(R, 1.2, 1.17, 1.24)}),
     Comparison(U, parts={"tpot": cmp(U, 1.1, 1.08, 1.12)}, **AB), None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("stored", "settled", "ratio"), [r[1:] for r in MISREAD], ids=[r[0] for r in MISREAD]
)
def test_a_misread_is_two_intervals_apart_by_more_than_half_the_threshold(
    stored: Comparison, settled: Comparison, ratio: float | None
) -> None:
    got = misread(stored, settled)
    assert got == (None if ratio is None else pytest.approx(ratio))


def test_workers_start_early_only_where_all_are_interleaved_at_once() -> None:
    assert routes_all(Facts(moved=True))
    assert not routes_all(Facts())
    assert not routes_all(Facts(moved=True, budget=PLENTY))  # a budget may refuse some
    assert not routes_all(Facts(moved=True, domain="gpu"))


TTFT_TPOT = {"ttft": UNC, "tpot": REG}
TPUT, WITHHELD, FASTER = Metric.THROUGHPUT, Reason.DRIFT_WITHHELD, {"faster": 1.1}
MIGHT_FAIL: list[tuple[str, Comparison, float, bool]] = [
    ("regression", REG, 1.0, True),
    ("interval past the threshold", cmp(IN, 1.045, 0.97, 1.30), 1.0, True),
    ("interval within it", cmp(IN, 1.0, 0.97, 1.04), 1.0, False),
    ("no interval", Comparison(IN, ratio=1.0), 1.0, True),
    ("infinite bound", cmp(IN, 1.0, 0.9, math.inf), 1.0, True),
    ("a machine 10% faster hides it", cmp(IN, 1.0, 0.97, 1.04), 1.1, True),
    ("its drift guard says faster", cmp(IN, 1, 0.97, 1.04, machine_speed=FASTER), 1.0, True),
    ("throughput: the slow side is the low bound", cmp(IN, 1, 0.9, 1.2, metric=TPUT), 1.0, True),
    ("throughput within it", cmp(IN, 1.0, 0.97, 1.2, metric=TPUT), 1.0, False),
    ("withheld by the drift guard", cmp(IN, 0.9, 0.8, 1.0, reason=WITHHELD), 1.0, True),
    ("a GPU set aside", cmp(IN, 1.0, 0.99, 1.01, reason=Reason.GPU_THROTTLED), 1.0, True),
    ("a stored improvement (a misread's shape)", IMP, 1.0, True),
    ("an interleaved improvement", cmp(X, 0.8, 0.7, 0.9, decided_by=CompareMode.AB), 1.0, False),
    ("unchanged", UNC, 1.0, False),
    ("one part might fail", Comparison(IN, parts=TTFT_TPOT), 1.0, True),
    ("interval exactly at the threshold", cmp(IN, 1.0, 0.97, 1.05), 1.0, False),
    ("a part the faster machine hides", Comparison(IN, ratio=0.9, ci_low=0.85, ci_high=0.95,
     parts={"median": cmp(IN, 1.0, 0.97, 1.04)}), 1.1, True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("c", "faster", "expected"), [r[1:] for r in MIGHT_FAIL], ids=[r[0] for r in MIGHT_FAIL]
)
def test_what_the_budget_never_cuts(c: Comparison, faster: float, expected: bool) -> None:
    assert might_fail(c, faster) is expected


@pytest.mark.parametrize(
    ("budget", "uppers", "cut"),
    [
        (None, [0.0], False),
        (SHORT, [math.log(1.2)], False),  # still reaches past the threshold: measured on
        (SHORT, [math.log(1.04), math.log(1.06)], False),  # one metric does
        (SHORT, [math.log(1.04)], True),
        (PLENTY, [math.log(1.04)], False),
        (SHORT, [math.log1p(0.05)], True),  # exactly at the threshold: nothing past it
        (Spare(5.0), [math.log(1.04)], False),  # exactly one more pair's seconds left
    ],
)
def test_the_budget_stops_pairs_only_once_nothing_might_fail(
    budget: Spare | None, uppers: list[float], cut: bool
) -> None:
    assert bool(next_pair(budget, 5.0, uppers, 0.05)) is cut


@pytest.mark.parametrize(
    ("work", "relation"),
    [
        (SAME, "same"),
        (GREW, "grew"),
        (FEWER, "shrank"),
        (MIXED, "mixed"),
        (VARYING, None),
        (None, None),
        (WorkDiff(), None),  # nothing counted on both sides
        (WorkDiff(op_calls=(500, None)), None),
        (HOST_MOVED, "grew"),
        (WorkDiff(op_calls=(500, 500), ops=[("aten::addmm", 25, 31)]), "grew"),
        (WorkDiff(op_calls=(500, 500), ops=[("aten::x", None, 3)]), "same"),  # a cut table
        (WorkDiff(op_calls=(500, 500), syncs=(2, 1)), "shrank"),
        (WorkDiff(op_calls=(0, 0), syncs=(0, 0)), "same"),  # zero is equal to zero
        # a count that varied is no evidence: the others say only that the work grew
        (WorkDiff(op_calls=(500, 530), kernels=(275, 297), varying=["operators"]), "grew"),
        (WorkDiff(op_calls=(500, 650), kernels=(275, 275), varying=["operators"]), None),
        (WorkDiff(kernels=(275, 275), ops=[("aten::x", 3, 4)], varying=["operators"]), None),
        (WorkDiff(kernels=(275, 250), varying=["operators"]), None),  # fewer, beside what varied
        (WorkDiff(kernels=(9, 9), kernel_changes=[("k", 1, 2)], varying=["kernels"]), None),
        (WorkDiff(kernels=(9, 9), kernel_changes=[("k", 1, 2)]), "grew"),
        (WorkDiff(op_calls=(5, 6), kernel_changes=[("k", 2, 1)], varying=["kernels"]), "grew"),
        (WorkDiff(kernels=(275, 297), syncs=(2, 9), varying=["syncs"]), "grew"),
        (WorkDiff(flops=(1e9, 1e9), python_calls=(90, 80), varying=["python calls"]), None),
        (WorkDiff(flops=(1e9, 1e9), varying=["operators", "kernels"]), None),
        (WorkDiff(kernels=(275, 275), varying=["something new"]), None),  # unknown: none stands
    ],
)
def test_how_the_work_counts_relate(work: WorkDiff | None, relation: str | None) -> None:
    assert counts_relation(work) == relation


def test_the_misread_watch_names_what_stood_before_it() -> None:
    watch = Watch()
    assert (watch.found, watch.stood) == ("", [])
    ab = {"decided_by": CompareMode.AB}
    stood = Facts(stored=cmp(U))
    watch.note("t.py::test_a", stood, after_stored(stood))
    watch.note("t.py::test_gpu", Facts(domain="gpu", stored=cmp(U)), Decision(Step.STAND))
    warning = watch.check("t.py::test_b", cmp(R, 1.2, 1.17, 1.24), cmp(U, 1.1, 1.08, 1.12, **ab))
    assert warning == (
        "check 1 verdict with --perf-ab: t.py::test_b: its stored pass and its interleaved "
        "run differ by x1.091, beyond both their errors, so the stored passes misread this "
        "machine's speed; this process's later CPU benchmarks are interleaved at once, or "
        "re-checked where the stored pass runs first; these CPU verdicts stood on the stored "
        "pass alone before it and were not re-checked: t.py::test_a"
    )
    assert watch.found == "t.py::test_b: its stored pass and its interleaved run differ by x1.091"
    # what did not stand on its stored pass, or does not pass, is not named
    watch.note("t.py::test_r", Facts(stored=REG), Decision(Step.SETTLE))
    watch.note("t.py::test_s", Facts(stored=NOREG), Decision(Step.SETTLE))
    watch.note("t.py::test_n", Facts(stored=NOREG), Decision(Step.STAND))
    assert watch.stood == ["t.py::test_a", "t.py::test_n"]
    fresh = Watch()
    agree = fresh.check("t.py::x", cmp(U, 1.0, 0.98, 1.02), cmp(U, 1.0, 0.99, 1.01, **ab))
    assert agree is None and fresh.found == ""
    alone = fresh.check("t.py::y", cmp(R, 1.2, 1.17, 1.24), cmp(U, 1.1, 1.08, 1.12, **ab))
    assert alone is not None and alone.startswith("no action needed: t.py::y")
    assert alone.endswith("no verdict stood on a stored pass alone before it")
    # Only the first misread warns.
    assert (
        watch.check("t.py::test_c", cmp(R, 1.2, 1.17, 1.24), cmp(U, 1.1, 1.08, 1.12, **ab)) is None
    )


def test_a_device_share_reads_a_result_and_a_stored_entry_alike() -> None:
    """Host-bound is judged on both sides (the session takes the larger share): a change
    that made a device-bound model host-bound shows in its latency."""
    from pytest_infperf.core.results import WorkProfile
    from pytest_infperf.judge.device import device_share

    work = WorkProfile(gpu_time=[0.5e-3, 0.5e-3, 0.5e-3])
    entry = {"samples": [1e-3, 1e-3, 1e-3], "work": work.to_json()}
    assert device_share(entry) == pytest.approx(0.5)
    assert device_share({"samples": [1e-3]}) is None and device_share(None) is None


#: The drift guard: (the verdict, the interval, the machine's speed now over then (python
#: probe ratio, > 1: slower now), what the guard leaves).
DRIFT = [
    ("regression, machine slower beyond the limit: withheld", R, (1.2, 1.3), 1.5, IN),
    ("regression, machine faster beyond the limit: stands", R, (1.2, 1.3), 1 / 1.5, R),
    ("improvement, machine faster beyond the limit: withheld", X, (0.7, 0.8), 1 / 1.5, IN),
    ("improvement, machine slower beyond the limit: stands", X, (0.7, 0.8), 1.5, X),
    ("regression, machine slower within the limit: explained", R, (1.08, 1.12), 1.1, IN),
]


@pytest.mark.parametrize(
    ("verdict", "interval", "speed", "left"), [r[1:] for r in DRIFT], ids=[r[0] for r in DRIFT]
)
def test_the_drift_guard_withholds_only_what_the_machine_could_explain(
    verdict: Verdict, interval: tuple[float, float], speed: float, left: Verdict
) -> None:
    from pytest_infperf.judge.judge import _drift_guarded
    from pytest_infperf.judge.observation import Observation
    from pytest_infperf.judge.rules import Policy

    c = cmp(verdict, sum(interval) / 2, *interval, threshold=0.05)
    then = Observation([1.0], reference={"python_s": 1.0})
    now = Observation([1.0], reference={"python_s": speed})
    guarded = _drift_guarded(c, now, then, Policy(drift_limit=0.25))
    assert guarded.verdict is left, guarded.note


@pytest.mark.parametrize(
    ("verdict", "unreferenced", "left"),
    [
        (R, True, IN),  # two plain runs compared offline: no change can be claimed
        (X, True, IN),
        (U, True, IN),  # nor its absence: a move may as well have hidden one
        (N, True, IN),
        (R, False, R),  # a session's own stored pass without probes: as before
    ],
)
def test_a_side_without_a_reference_withholds_a_claimed_change(
    verdict: Verdict, unreferenced: bool, left: Verdict
) -> None:

    c = cmp(verdict, 1.3 if verdict is R else 0.7, 0.6, 1.4, threshold=0.05)
    check_unreferenced(c, unreferenced, left)


@pytest.mark.parametrize(
    ("c", "left"),
    [
        (cmp(R, 3.0, 2.5, 3.5), R),  # beyond any move two runs showed: claimed
        (cmp(R, 2.2, 1.9, 2.5), IN),  # within it on the low side
        (cmp(X, 0.3, 0.2, 0.4), X),
        (cmp(X, 0.6, 0.45, 0.55), IN),
        (cmp(R, 3.0, 2.5, 3.5, metric=Metric.MEMORY), R),  # memory: no drift guard
        (cmp(X, 3.0, 2.5, 3.5, metric=Metric.THROUGHPUT), X),  # 3x the items/s
    ],
)
def test_a_change_beyond_any_machine_move_is_claimed_without_a_reference(
    c: Comparison, left: Verdict
) -> None:
    check_unreferenced(c, True, left)


def check_unreferenced(c: Comparison, unreferenced: bool, left: Verdict) -> None:
    from pytest_infperf.judge.judge import _drift_guarded
    from pytest_infperf.judge.observation import Observation
    from pytest_infperf.judge.rules import Policy

    with_probes = Observation([1.0], reference={"python_s": 1.0})
    guarded = _drift_guarded(c, Observation([1.0]), with_probes, Policy(unreferenced=unreferenced))
    assert guarded.verdict is left
    if left is not c.verdict:
        assert "this run carries no reference of the machine's speed" in (guarded.note or "")
        assert (guarded.note or "").startswith(f"{c.verdict} withheld, cannot tell:")
        assert guarded.details["withheld"] == c.verdict.value


@pytest.mark.parametrize(
    ("withheld", "flops", "python_calls", "left"),
    [
        ("regression", (8.4e6, 12.6e6), (100, 100), R),  # +50% work: evidence
        ("regression", (8.4e6, 8.4e6), (100, 100), IN),  # the same work: a move explains it
        ("regression", (8.4e6, 8.6e6), (100, 100), IN),  # +2.4%: within the threshold
        ("regression", (8.4e6, 8.4e6), (4000, 4001), IN),  # a refactor's Python call
        ("regression", None, (100, 100), IN),  # nothing counted: no evidence
        ("improvement", (12.6e6, 8.4e6), (100, 100), IN),  # only a regression stands on it
        ("unchanged", (8.4e6, 12.6e6), (100, 100), IN),
    ],
)
def test_two_runs_without_references_claim_a_regression_on_grown_work(
    withheld: str,
    flops: tuple[float, float] | None,
    python_calls: tuple[int, int],
    left: Verdict,
) -> None:
    """`infperf compare` of two plain runs: a regression withheld for want of references
    stands where the exact work grew past the threshold (FLOPs, operator calls, kernels),
    as a GPU's quiet evidence does; a Python call more is no evidence."""
    from pytest_infperf.core.results import Reason, WorkProfile
    from pytest_infperf.judge.judge import _counted
    from pytest_infperf.judge.work import diff

    a, b = (None, None) if flops is None else flops
    work = diff(
        WorkProfile(calls=5, flops=a, python_calls=python_calls[0]),
        WorkProfile(calls=5, flops=b, python_calls=python_calls[1]),
    )
    c = dataclasses.replace(
        cmp(IN, 1.56, 1.4, 1.7), reason=Reason.DRIFT_WITHHELD, details={"withheld": withheld}
    )
    judged = _counted(c, work)
    assert judged.verdict is left
    if left is R:
        assert judged.evidence == {"part": "work", "counts": "grew"} and judged.reason is None


# --- the recorded GPU runs, replayed ----------------------------------------------------
#: A real H200 runner's records (NVIDIA H200, 16 cores, torch 2.11 cu130; the models in an
#: installed package; clocks not locked), their sample lists kept and the settlings' left
#: out: ``save`` (--perf-save on main), ``reg`` (BERT and GPT-2 with one layer more,
#: ResNet-50 untouched) and ``aa2`` (identical code), both --perf-compare=main runs.
RECORDS = Path(__file__).parent / "data" / "gpu-h200"


@functools.cache
def recorded(name: str) -> dict[str, tuple[Facts, Comparison]]:
    """Each benchmark of a recorded run against the recorded baseline, as ``infperf compare``
    judges it: the facts the policy decided on, and the verdict that stands."""

    def load(file: str) -> dict[str, Any]:
        return dict(json.loads((RECORDS / file).read_text()))

    base, head = load("save.json"), load(f"{name}.json")
    entries = {e["key"]: e for e in base["benchmarks"]}
    results = [BenchmarkResult.from_json(e) for e in head["benchmarks"]]
    judge = Judge(Policy(unreferenced=True), family=len(results))
    judge.host_moved(head["reference"]["python_s"] / base["reference"]["python_s"])
    out = {}
    for r in results:
        origin = Origin(CompareMode.STORED, "0f2f6ea0b6")
        facts = facts_of(judge, r, entries.get(r.key), BenchOptions(), origin, {})
        assert facts.stored is not None
        final = judge.stands(facts.stored, after_stored(facts))
        judge.learn_stored(facts.stored, final)
        out[r.nodeid.rpartition("::")[2]] = (facts, final)
    return out


# (record, benchmark, the verdict that stands, the evidence that decided it)
REPLAYED: list[tuple[str, str, Verdict, str | None]] = [
    # one layer more: FLOPs +8.3% / +7.2%, the device time +7-8% in every process pair
    ("reg", "test_bert_b1_fp32", R, "gpu_time"),
    ("reg", "test_bert_b32_autocast_fp16", R, "gpu_time"),
    ("reg", "test_gpt2_generate", R, "gpu_time"),  # the stored pass alone read 0.920 once
    ("reg", "test_resnet50_b16", U, "gpu_time"),  # untouched: "improvement 0.894" once
    # identical code: no claim
    ("aa2", "test_bert_b1_fp32", U, "gpu_time"),
    ("aa2", "test_bert_b32_autocast_fp16", U, "gpu_time"),
    ("aa2", "test_gpt2_generate", U, "gpu_time"),
    ("aa2", "test_resnet50_b16", U, "gpu_time"),
]


@pytest.mark.parametrize(("record", "name", "verdict", "evidence"), REPLAYED)
def test_the_recorded_gpu_runs(
    record: str, name: str, verdict: Verdict, evidence: str | None
) -> None:
    facts, c = recorded(record)[name]
    assert (c.verdict, (c.evidence or {}).get("part")) == (verdict, evidence), c.note
    assert facts.domain == "gpu" and facts.clocks_held is True
    # The latency never claims on one process pair at this runner's spread.
    latency = [p for m, p in (c.parts or {}).items() if m != "gpu_time"]
    assert latency and all(p.verdict not in (R, X) for p in latency)
    if record == "aa2":  # identical code: the device time reads the same
        device = (c.parts or {})["gpu_time"]
        assert 0.995 < (device.ratio or 0) < 1.005


def test_the_recorded_untouched_model_stands_on_its_device_time() -> None:
    """The untouched ResNet-50, whose stored latency once read "improvement 0.894 [0.877,
    0.911]": held to what the run measured of its host (the reference's Python loop x0.724,
    past what twelve pairs could resolve even at its 95% lower bound), its latency goes
    ungated, said with its spread, and its device time and counts, the same, decide."""
    facts, c = recorded("reg")["test_resnet50_b16"]
    assert facts.host_ungated == pytest.approx(-math.log(0.7236), rel=0.01)
    latency = (c.parts or {})["median"]
    assert latency.verdict is IN and latency.reason is Reason.HOST_UNGATED
    assert c.verdict is U and (c.evidence or {}).get("counts") == "same"
    assert "host part ungated on this runner (+-38% between processes" in (c.note or "")


@pytest.mark.parametrize(
    ("final", "learned"),
    [(U, True), (N, True), (IN, False), (R, False), (X, False)],
)
def test_the_hosts_spread_learns_only_from_a_pass(final: Verdict, learned: bool) -> None:
    """Identical work (the device time unchanged, the counts the same) whose latency read
    x1.3: a draw of the host's spread where the benchmark passed, never where it was left
    undecided (a host-only regression may be what read x1.3; learned, it would ungate the
    benchmarks after it) or claimed."""
    judge = Judge()
    stored = gpu(U, IN, lat=(1.3, 0.9, 1.9))
    judge.learn_stored(stored, cmp(final))
    assert (judge.host.of().df > 0) is learned
