"""The comparing policy: what happens to one compared benchmark, decided in one place.

A ``--perf-compare`` run can reach a benchmark's verdict in several ways: the stored pass's
verdict stands; the benchmark is interleaved with the baseline commit's code at once, with
no stored pass; the stored verdict is settled by interleaving; a verdict that passes is
re-checked; fresh samples re-measure it against the stored baseline; or the run's budget
leaves it as the stored pass said. Which one is decided here, by pure functions from the
facts about one benchmark (:class:`Facts`) to the next step and its reason
(:class:`Decision`): :func:`route` before the stored pass, :func:`after_stored` after it.
:mod:`pytest_infperf.session.modes` and :mod:`pytest_infperf.ab.interleave` gather the
facts and act on the answer; they decide nothing themselves.

The rules, in the order they apply:

- **The quiet evidence decides on a GPU**: the device's own time and the exact work counts
  are not noisy (on a real H200 the device time of identical code agreed within 0.5%
  between processes where the host's latency moved -59% to +59%, and counts are exact).
  Where the GPU's clock reference held, the device time regressed and the counts grew,
  that regression stands without settling, whatever the latency said; where the device time
  passes and the counts did not grow, a latency its stored pass left undecided (held to
  this runner's measured spread) stands on it, unless it reads slower. Where the host is
  too noisy for the pairs to resolve the threshold (``host_ungated``), no pair is spent on
  the latency: a device time that did not decide is settled on its pairs, and what the
  quiet evidence does not pass is not a pass (:func:`_quiet`).
- **No pass stands against more work**: a pass whose exact counts grew is settled, or
  withheld (``work-grew``) where it cannot be.
- **What rules out a regression stands** (``unchanged``, ``no-regression``); a regression,
  an improvement (drift fakes speed-ups as well as slowdowns) or no decision is settled,
  or re-measured where settling cannot happen.
- **A machine that moved** (the session-start reference) is interleaved at once: no stored
  pass can be trusted there. So is everything after a **misread** (:func:`misread`: a
  settling showed that the stored pass read this machine wrong while the reference held
  still); then what passes is re-checked too.
- **The run's budget** (``--perf-budget``) trades time only for what passes either way: it
  never cuts a verdict that might still fail (:func:`might_fail`), nor a process pair
  whose interval still reaches past the threshold (:func:`next_pair`).

Imports only ``core/``: ``tests/test_policy.py`` tests it as a table, without pytester or
git; docs/COMPARING.md shows the same table in words.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterable

from ..core import family as _family
from ..core.budget import Spare
from ..core.names import CompareMode, Interleaved, Metric
from ..core.options import GENERATION_METRICS
from ..core.results import Comparison, Reason, Verdict, WorkDiff

#: A CUDA benchmark whose device was busy for less than this share of its latency is
#: host-bound: its latency follows the host's speed (Python and framework dispatch, the
#: "framework tax"), not the model's work on the GPU.
HOST_BOUND_SHARE = 0.5
#: The metrics an interleaved run can judge: a stored verdict on another (p90, memory...)
#: cannot be settled.
SETTLEABLE = ("median", *GENERATION_METRICS)


class Step(str, enum.Enum):
    """What happens next to a compared benchmark."""

    #: Before the stored pass: take it (then ask :func:`after_stored`).
    STORED = "stored"
    #: Before the stored pass: interleave with the baseline's commit at once, no stored pass.
    INTERLEAVE = "interleave"
    #: The stored verdict stands (``reason``: why it was not settled, "" when it needed not).
    STAND = "stand"
    #: The stored verdict stands because the run's budget keeps the time (``reason``).
    CUT = "cut"
    #: Settle the stored verdict by interleaving with the baseline's commit.
    SETTLE = "settle"
    #: Settle a stored verdict that passes: an earlier settling showed a misread.
    RECHECK = "recheck"
    #: Fresh samples against the stored baseline (settling cannot happen: ``reason``).
    REMEASURE = "remeasure"

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass(frozen=True)
class Facts:
    """What is known about one compared benchmark when the next step is due."""

    #: Where it runs: "cpu", or a GPU ("gpu"; the timing lock's "gpu-<devices>" reads alike).
    domain: str = "cpu"
    #: ``--perf-settle``: auto or stored-first.
    settle: str = "auto"
    #: The baseline is a commit that can be checked out (not a results file).
    commit: bool = True
    #: The metric the benchmark is judged on.
    metric: str = "median"
    #: How many fresh passes may re-measure a flagged verdict that cannot be settled.
    remeasure: int = 1
    #: Why settling cannot happen for it in this session (the baseline's commit cannot be
    #: checked out, its worker failed, its test failed...), or None.
    unsettled: str | None = None
    #: The stored baseline can judge it: an entry from a comparable environment.
    comparable: bool = True
    #: The baseline holds it, measured in another environment (a thread count, a package
    #: version): nothing stored compares, both commits measured here do.
    env_changed: bool = False
    #: The drift guard adjusts a stored verdict for the machine's speed (``adjust``).
    guard_adjusts: bool = True
    #: The session-start reference moved by more than half the threshold.
    moved: bool = False
    #: How much faster the machine runs now than at the baseline's run (>= 1).
    faster: float = 1.0
    #: A settling in this process showed the stored pass misread this machine.
    misread: bool = False
    budget: Spare | None = None
    #: The run's benchmarks (its family) and its run-level alpha: a regression that stands on
    #: a stored pass alone must hold over them, as an interleaved one does.
    family: int = 1
    run_alpha: float = 0.01
    # --- after the stored pass ---------------------------------------------------------
    #: The stored pass's verdict.
    stored: Comparison | None = None
    #: Seconds the stored pass timed: settling costs about twice that.
    timed_s: float = 0.0
    #: Why the budget sent it to the stored pass instead of interleaving at once ("").
    refused: str = ""
    #: A GPU benchmark: whether the GPU's clocks held between the baseline's run and this
    #: one (None: no clock reference on a side).
    clocks_held: bool | None = None
    #: A GPU benchmark: the between-process sd (log) of its latency on this runner, as the
    #: run measured it, where the most pairs a comparison may take cannot resolve the
    #: threshold in it (:func:`~.plan.ungated`); None where they can, or nothing measured it.
    host_ungated: float | None = None


@dataclasses.dataclass(frozen=True)
class Decision:
    """The next step for a benchmark, and why."""

    step: Step
    #: For :attr:`Step.INTERLEAVE`, the ``settled_because`` it records (``machine-moved``,
    #: ``stored-misread``); for a stored verdict left unsettled, the ``not_settled`` it
    #: records; for a settling on quiet evidence that disagrees, what disagreed.
    reason: str = ""
    #: An interleaving may stop its later process pairs for the budget (False: a verdict
    #: that might fail, or anything after a misread, is measured to its end).
    budget_may_cut: bool = True
    #: :attr:`Step.STAND` on quiet evidence: the judged part whose verdict heads the
    #: record ("gpu_time"), and the counts' agreement ("same", "grew", "shrank").
    evidence: str | None = None
    counts: str | None = None
    #: A budget tally the session adds one to: "refused" (a moved machine's benchmark sent
    #: to the stored pass), "resettled" (one of those that needed settling after all).
    tally: str = ""
    #: :attr:`Step.STAND` of a verdict that is not a pass after all: why (the work grew, or
    #: the host part is ungated and nothing quiet decides).
    withhold: Reason | None = None
    #: :attr:`Step.STAND` on a GPU whose host part is ungated: its between-process sd (log).
    ungated: float | None = None


def cannot_settle(f: Facts) -> str | None:
    """Why settling cannot happen for this benchmark, or None where it can."""
    if not f.commit:
        return "--perf-compare names a results file, so there is no commit to measure"
    if f.metric not in SETTLEABLE:
        return (
            f"metric={f.metric}: an interleaved run judges the median latency, so the "
            f"stored {f.metric} verdict stands"
        )
    return f.unsettled


def route(f: Facts) -> Decision:
    """Before the stored pass: interleave at once, or take the stored pass. A benchmark the
    baseline measured in another environment is interleaved at once, CPU or GPU (no stored
    pass compares with it, and a CI environment moves: a thread count, a package's
    release). A CPU benchmark the stored baseline could judge is interleaved at once where
    the machine moved (no stored verdict can be trusted there) or after a misread; the
    budget may send a moved machine's benchmark to the stored pass instead, never after a
    misread. A GPU benchmark takes its stored pass: the session-start reference measures
    the CPU, and the device time has a reference of its own, read beside it."""
    if f.env_changed and cannot_settle(f) is None:  # auto or stored-first: no stored pass
        # Interleaved, both commits measure in this environment: the only comparison there is.
        return Decision(Step.INTERLEAVE, Interleaved.ENVIRONMENT_CHANGED)
    routable = (
        f.settle == "auto" and f.domain == "cpu" and f.comparable and cannot_settle(f) is None
    )
    if not routable or not (f.moved or f.misread):
        return Decision(Step.STORED)
    why = Interleaved.MACHINE_MOVED if f.moved else Interleaved.STORED_MISREAD
    if f.misread:
        return Decision(Step.INTERLEAVE, why, budget_may_cut=False)
    refusal = _refusal(f)
    if refusal:
        return Decision(Step.STORED, refusal, tally="refused")
    return Decision(Step.INTERLEAVE, why)


def routes_all(f: Facts) -> bool:
    """Whether every benchmark like ``f`` (as far as is known before any test runs) is
    interleaved at once: then its workers may start early. Not under a budget, which may
    send some to the stored pass."""
    return f.budget is None and route(f).step is Step.INTERLEAVE


def _refusal(f: Facts) -> str:
    """Why the budget sends a moved machine's benchmark to the stored pass instead of
    interleaving it at once ("" when it does not). Interleaving costs about two of its
    share of the plain run more; refused only where the drift guard adjusts the stored
    verdict for the machine's speed (so what might fail is still settled), and only while
    at most half of those refused needed settling anyway (beside a noisy neighbour most
    do, and a stored pass plus a settling costs more than interleaving at once)."""
    b = f.budget
    if b is None or not f.guard_adjusts or b.seconds > 2 * b.share:
        return ""
    if b.resettled * 2 > b.refused:
        return ""
    return f"{b.why}: the machine moved, and the stored pass judged it alone"


#: Stored verdicts that do not rule out a regression, or whose speed-up drift may fake.
_UNDECIDED = (Verdict.REGRESSION, Verdict.INCONCLUSIVE, Verdict.IMPROVEMENT)
#: Verdicts that pass a benchmark: none stands where the exact work counts grew.
PASSES = (Verdict.UNCHANGED, Verdict.NO_REGRESSION, Verdict.IMPROVEMENT)


def after_stored(f: Facts) -> Decision:
    """After the stored pass (``f.stored``): what decides the benchmark."""
    c = f.stored
    assert c is not None, "after_stored needs the stored pass's verdict"
    no_settle = cannot_settle(f)
    quiet = _quiet(f, c, no_settle)
    if quiet is not None:
        return quiet
    if c.verdict in PASSES and counts_relation(c.work) == "grew":
        # No pass stands against more work: settled, or not a pass.
        if no_settle is None and f.host_ungated is None:
            return Decision(Step.SETTLE, "the exact work counts grew", budget_may_cut=False)
        return Decision(Step.STAND, no_settle or "", withhold=Reason.WORK_GREW)
    stands = c.verdict not in _UNDECIDED
    # After a misread the machine's state is unknown: a CPU verdict that passes might be
    # the masked regression, so it is re-checked, and nothing is cut for the budget.
    after = f.misread and f.domain == "cpu"
    passes = f.domain == "cpu" and c.verdict in (Verdict.UNCHANGED, Verdict.NO_REGRESSION)
    if stands and not (after and passes and no_settle is None):
        return Decision(Step.STAND, f.refused)
    if no_settle is not None:
        # An improvement too: drift and chance fake speed-ups as well as slowdowns, and
        # identical code called faster is as false as called slower.
        if stands or not _remeasurable(f):
            return Decision(Step.STAND, no_settle)
        return Decision(Step.REMEASURE, no_settle)
    tally = "resettled" if f.refused and f.budget is not None else ""
    if after:
        return Decision(Step.RECHECK if stands else Step.SETTLE, budget_may_cut=False, tally=tally)
    whole = might_fail(c, f.faster)
    if not whole and (cut := _cut(f)):
        return Decision(Step.CUT, cut)
    return Decision(Step.SETTLE, budget_may_cut=not whole, tally=tally)


def _remeasurable(f: Facts) -> bool:
    """Whether fresh samples can re-measure the verdict: not where the benchmark allows
    no fresh pass (``remeasure=0``), nor for its peak memory, which fresh samples of the
    same call repeat rather than re-measure, nor for its device time, which comes from the
    profiled pass fresh samples do not repeat (they would judge the same figures again)."""
    return f.remeasure > 0 and f.metric not in ("memory", "gpu_time")


def _cut(f: Facts) -> str:
    """Why the budget leaves a verdict that passes either way unsettled (""): settling
    costs about twice the stored pass's timed seconds (both sides measure)."""
    b = f.budget
    if b is None or b.seconds >= 2 * f.timed_s:
        return ""
    return b.why


# --- quiet evidence --------------------------------------------------------------------
def counts_relation(work: WorkDiff | None) -> str | None:
    """How the exact work counts of two sides relate: "same" (every count both counted is
    equal), "grew" (some grew, none fell), "shrank" (some fell, none grew), "mixed"; None
    where nothing was counted on both sides or a count varied from call to call (then it
    is no evidence). Allocated bytes are left out: a caching allocator's hand-outs move
    with what the process freed before."""
    if work is None or not set(work.varying) <= set(_VARYING):
        return None
    # A count that varied from call to call is no evidence; the others can still say "grew".
    left = _COUNTED.difference(*(_VARYING[v] for v in work.varying))
    counts = {
        "flops": work.flops,
        "op_calls": work.op_calls,
        "kernels": work.kernels,
        "python_calls": work.python_calls,
        "syncs": work.syncs,
    }
    pairs = [
        (a, b) for k, (a, b) in counts.items() if k in left and a is not None and b is not None
    ]
    if not pairs:
        return None
    # The tables of names list only what changed; a name missing from a side's cut table
    # is unknown there (None), not zero.
    tables = (
        *(work.ops if "ops" in left else ()),
        *(work.kernel_changes if "kernel_changes" in left else ()),
    )
    pairs += [(a, b) for _, a, b in tables if a is not None and b is not None]
    up = any(b > a * (1 + _EQUAL) for a, b in pairs)
    down = any(b < a * (1 - _EQUAL) for a, b in pairs)
    if up and down:
        return "mixed"
    if work.varying and not up:
        # What varied may have grown: the rest say only that it grew, never that it did not.
        return None
    return "grew" if up else "shrank" if down else "same"


#: What each ``varying`` entry of a profile (``measure/profile.py``) takes out of the
#: evidence: FLOPs are counted on one call, so calls whose operators differ may differ in
#: FLOPs too. An entry not named here leaves no count standing.
_VARYING = {
    "operators": {"flops", "op_calls", "ops"},
    "kernels": {"kernels", "kernel_changes"},
    "syncs": {"syncs"},
    "python calls": {"python_calls"},
}
_COUNTED = frozenset().union(*_VARYING.values())

#: Counts within this relative difference are equal (means over identical calls).
_EQUAL = 1e-9


def _quiet(f: Facts, c: Comparison, no_settle: str | None) -> Decision | None:
    """A GPU benchmark on its quiet evidence: its device time, judged with the GPU's clocks
    held, and the exact work counts (kernels, operator calls, Python calls, device syncs,
    FLOPs). None where it does not decide; then the usual rule does.

    - A device-time regression whose counts grew stands without settling, the device time
      heading the record: a failing verdict, whatever the noisy latency said.
    - A latency left undecided by its stored pass (one process pair, held to this runner's
      measured spread), where the device time passes and the counts did not grow, stands on
      the device time: no pair is spent where the quiet evidence agrees. A latency that
      reads slower at all, or was claimed slower, is never waved through: the usual rule.
    - Where this runner's host moves the latency by more than the pairs could resolve
      (``f.host_ungated``), no pair is spent on it: where the device time did not decide
      here (undecided, its clocks or counts unread), the pairs measure it and it decides
      there; what the quiet evidence does not pass (counts grew, no device time, a latency
      that reads slower) is no pass, the host part said ungated."""
    if f.domain == "cpu":
        return None
    parts = c.parts or {}
    device = parts.get("gpu_time")
    counts = counts_relation(c.work)
    # What the device time says where it can speak: clocks held, not throttled, counted.
    said = None
    if f.clocks_held is True and device is not None and not _throttled(c) and counts:
        said = device.verdict
    timed = f.metric not in ("memory", "gpu_time")  # a time the host moves
    ungated = f.host_ungated if timed else None
    host = [p for m, p in parts.items() if m != "gpu_time"] or [c]
    # A latency claimed slower at this runner's own spread is the usual rule's (settled).
    claimed = any(p.verdict is Verdict.REGRESSION for p in host)
    undecided = any(p.verdict is Verdict.INCONCLUSIVE for p in host)
    quiet = said in PASSES and counts in ("same", "shrank") and not claimed
    if quiet and (undecided or ungated is not None) and not _reads_slower(c):
        return Decision(Step.STAND, evidence="gpu_time", counts=counts, ungated=ungated)
    if ungated is not None and said is not Verdict.REGRESSION and not claimed:
        if no_settle is None and device is not None and said not in PASSES:
            # The device time did not speak here (undecided, clocks unknown or moved, the
            # counts unread): the pairs measure it too, at its own quiet spread, and decide
            # there; the ungated latency holds them only while it reads slower.
            why = "the device time did not decide"
            return Decision(Step.SETTLE, why, budget_may_cut=not might_fail(c, f.faster))
        withhold = Reason.WORK_GREW if counts == "grew" else Reason.HOST_UNGATED
        return Decision(Step.STAND, no_settle or "", withhold=withhold, ungated=ungated)
    if said is not Verdict.REGRESSION or not parts:
        return None
    assert device is not None and counts is not None  # what said a regression
    if counts != "grew":
        # The device's time grew while the work did not: settled, with what disagreed.
        why = f"the device time says {device.verdict} while the work counts {_SAID[counts]}"
        if no_settle is not None:
            return None
        return Decision(Step.SETTLE, why, budget_may_cut=False)
    if not _holds_over_run(device, f, len(parts)):
        return None
    return Decision(Step.STAND, evidence="gpu_time", counts=counts, ungated=ungated)


_SAID = {"same": "are the same", "grew": "grew", "shrank": "fell", "mixed": "moved both ways"}


def _reads_slower(c: Comparison) -> bool:
    """Whether a time the host moves reads slower: its interval (one process pair, held to
    the spread the run measured) lies above 1, or its ratio lies past the threshold however
    wide the interval. Never passed on the device time: a host regression that may be
    real (one read x1.4 in a simulated quiet run whose spread rested on one draw)."""
    for metric, part in (c.parts or {"": c}).items():
        if metric == "gpu_time":
            continue
        ratio, low = part.ratio, part.ci_low
        if part.metric is Metric.THROUGHPUT:  # judged on its latency's orientation
            ratio = 1.0 / ratio if ratio else None
            low = 1.0 / part.ci_high if part.ci_high else None
        if (ratio or 0.0) > 1.0 + part.threshold or (low or 0.0) > 1.0:
            return True
    return False


def _throttled(c: Comparison) -> bool:
    parts = (c, *(c.parts or {}).values())
    return any(p.reason is Reason.GPU_THROTTLED for p in parts)


def _holds_over_run(device: Comparison, f: Facts, parts: int) -> bool:
    """A regression standing on a stored pass alone must reject its null at the run's
    family level, as an interleaved one must: the device time is one of the benchmark's
    ``parts`` judged parts, beside its latency (:mod:`~pytest_infperf.core.family`)."""
    p = device.p_value
    return p is not None and p <= _family.level(f.run_alpha, f.family, parts)


# --- the budget ------------------------------------------------------------------------
def might_fail(c: Comparison, faster: float = 1.0) -> bool:
    """Whether a verdict could still end in a failing test: what a run's budget never
    cuts short. A regression; a verdict the drift guard withheld or a GPU's state set
    aside; a pass whose exact work counts grew; an improvement the stored pass called (a
    stored pass that misread the machine calls a hidden regression that); an undecided one
    without an interval, or whose interval, or one of its parts', reaches past the threshold
    on the slow side once the machine's own speed-up is allowed for (``faster``: how much
    faster it runs now than at the baseline's run; a raw ratio hides that much)."""
    if c.parts and any(might_fail(part, faster) for part in c.parts.values()):
        return True
    if c.verdict in PASSES and counts_relation(c.work) == "grew":  # no pass stands on it
        return True
    if c.verdict is Verdict.REGRESSION or c.reason in (Reason.DRIFT_WITHHELD, Reason.GPU_THROTTLED):
        return True
    if c.verdict is Verdict.IMPROVEMENT:
        return c.decided_by is not CompareMode.AB
    if c.verdict is not Verdict.INCONCLUSIVE:
        return False
    slow = c.ci_low if c.metric is Metric.THROUGHPUT else c.ci_high
    if not slow or not math.isfinite(slow):
        return True
    slower = 1.0 / slow if c.metric is Metric.THROUGHPUT else slow
    speed = max(faster, float((c.machine_speed or {}).get("faster") or 1.0))
    return slower * speed > 1.0 + c.threshold


def next_pair(
    budget: Spare | None, pair_s: float, uppers: Iterable[float], threshold: float
) -> str:
    """Why process pair ``k + 1`` of an interleaving does not start ("" when it does): the
    run's budget would not cover another pair like the last one (``pair_s`` seconds). Never
    while an interval's upper bound (log ratios, ``uppers``) still reaches past the
    threshold: a possible regression is measured to its end whatever the budget."""
    if budget is None or any(u > math.log1p(threshold) for u in uppers):
        return ""
    if budget.seconds >= pair_s:
        return ""
    return budget.why


def budget_stopped(c: Comparison, why: str) -> Comparison:
    """An interleaved verdict whose process pairs the run's budget cut short (``why``; ""
    when it did not): one still undecided says the budget is why (a decided one stands:
    its pairs crossed a boundary already)."""
    if not why or c.verdict is not Verdict.INCONCLUSIVE:
        return c
    note = f"{why}; {c.note}" if c.note else why
    # One tally line in the summary, whichever pair the budget stopped before.
    generic = why.partition(" before process pair")[0]
    return dataclasses.replace(c, reason=Reason.BUDGET, note=note, not_settled=generic)


# --- the misread rule ------------------------------------------------------------------
def misread(stored: Comparison, settled: Comparison) -> float | None:
    """The stored ratio over the interleaved one, of the first judged metric whose two
    intervals do not overlap and whose ratios differ by more than half the threshold (the
    drift guard's limit for the session-start reference); None where they agree, or
    where no metric was judged by both (a generation's TTFT and TPOT are compared part by
    part: the headline ratio is the worst part's, which need not be the same one).

    The session-start reference (a small GEMM and a Python loop) stands for the machine's
    speed, but a VM can move under one workload and not another: in an A/B run of the
    examples made 10% slower, the reference read x1.007 and x0.998 while three ONNX
    Runtime BERTs ran about 10% faster than at the baseline's run, and their stored pass
    called them unchanged. A settled verdict is a reference taken where the benchmarks
    run: when it and the stored pass disagree beyond both their errors, the stored pass
    misread this machine, in whichever direction."""
    if settled.decided_by is not CompareMode.AB:
        return None
    limit = math.log1p(stored.threshold / 2)
    for first, then in _matching(stored, settled):
        a, b = _interval(first), _interval(then)
        if a is None or b is None:
            continue
        ratio = a[0] / b[0]
        if (a[1] > b[2] or a[2] < b[1]) and abs(math.log(ratio)) > limit:
            return ratio
    return None


def _matching(stored: Comparison, settled: Comparison) -> list[tuple[Comparison, Comparison]]:
    """The parts both judged, by metric; else the two headlines, if of one metric."""
    mine, theirs = stored.parts or {}, settled.parts or {}
    common = [m for m in mine if m in theirs]
    if common:
        return [(mine[m], theirs[m]) for m in common]
    if mine or theirs or stored.metric != settled.metric:
        return []
    return [(stored, settled)]


def _interval(c: Comparison) -> tuple[float, float, float] | None:
    values = (c.ratio, c.ci_low, c.ci_high)
    if any(v is None or not math.isfinite(v) or v <= 0 for v in values):
        return None
    ratio, low, high = (float(v or 0.0) for v in values)
    return ratio, low, high


class Watch:
    """One session's (one process's) state of the misread rule: the first misread a
    settling showed, and the CPU verdicts that stood on the stored pass alone before it."""

    def __init__(self) -> None:
        #: Where the first misread was seen ("" until then).
        self.found = ""
        self.stood: list[str] = []

    def note(self, key: str, f: Facts, d: Decision) -> None:
        """A CPU verdict that passes and stood on its stored pass alone, before any misread:
        named when one is found."""
        c = f.stored
        passes = c is not None and c.verdict in (Verdict.UNCHANGED, Verdict.NO_REGRESSION)
        if d.step is Step.STAND and f.domain == "cpu" and passes:
            self.stood.append(key)

    def check(self, nodeid: str, stored: Comparison, settled: Comparison) -> str | None:
        """The warning to give when this settling is the first to show a misread."""
        ratio = misread(stored, settled)
        if ratio is None or self.found:
            return None
        self.found = f"{nodeid}: its stored pass and its interleaved run differ by x{ratio:.3f}"
        stood = list(dict.fromkeys(self.stood))
        # The first clause says whether the user has anything to do.
        what = (
            f"check {len(stood)} verdict{'s' * (len(stood) != 1)} with --perf-ab"
            if stood
            else "no action needed"
        )
        said = (
            f"{what}: {self.found}, beyond both their errors, so the stored passes misread "
            "this machine's speed; this process's later CPU benchmarks are interleaved at "
            "once, or re-checked where the stored pass runs first"
        )
        if not stood:
            return f"{said}; no verdict stood on a stored pass alone before it"
        return (
            f"{said}; these CPU verdicts stood on the stored pass alone before it and were "
            f"not re-checked: {', '.join(stood)}"
        )
