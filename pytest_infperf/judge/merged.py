"""The verdicts of a split run, merged (``infperf merge``): what the run's shards judged
against their own group of tests, judged again against the whole run.

A shard of a pytest-split run collects only its group; where it knows the other groups'
tests its run-level multiplicity control counts the whole run's benchmarks, but a shard
that did not (an older one) counted only its group's: the interleaved verdicts' run-level
guard (:class:`~pytest_infperf.judge.plan.PairedPlan`) and the stored claims' Bonferroni
(:func:`~pytest_infperf.judge.judge.held_over`), both at the family level of
:mod:`~pytest_infperf.core.family`. With N such groups the run's chance of a false failure
grew about N-fold. Here every claimed
regression is held to the family of the whole run (the sum of the shards' families), by
the same rule at the same look. A verdict can only lose its claim (become inconclusive):
a shard that went on measuring because its guard held a claim back cannot be measured
further here, so a merged verdict is never more lenient than the unsplit run's rule.

A verdict that loses its claim is gated again on its work: a shard's ``max_work_increase``
let more work pass under a regression (the regression failed it already), and the unsplit
run's gate would have failed the work once the regression was not claimed.

Whether the merged run compared nothing is decided over all its benchmarks: one shard
without a baseline does not make a run that compared the others look blind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..core import family as _family
from ..core.names import CompareMode
from ..core.options import BenchOptions
from ..core.outcome import compared_nothing
from ..core.results import BenchmarkResult, Comparison, Reason, Verdict
from .judge import Judge, held_over
from .plan import PairedPlan
from .work import more_work

#: What a claim on quiet evidence stood on, by its part.
_EVIDENCE = {"gpu_time": "device time", "work": "work counts"}
#: Verdicts that claim a slowdown (an accepted one is a regression a trailer let through).
_CLAIMED = (Verdict.REGRESSION, Verdict.ACCEPTED)


def rejudge(c: Comparison, family: int, run_alpha: float) -> Comparison:
    """``c`` held to a run of ``family`` benchmarks at ``run_alpha``. Unchanged unless it
    claims a slowdown that does not hold at that family; then inconclusive (reason
    ``multiplicity``), without the failure message or the acceptance it had."""
    family = max(1, family)
    if c.evidence and c.p_value is not None and c.verdict in _CLAIMED:
        return _quiet(c, family, run_alpha)
    if c.decided_by is not CompareMode.AB and c.family_size is not None:
        # A stored claim (a fresh pass's, or one that stood): the judge's rule, over the
        # whole run; an accepted regression is held as the regression it is.
        claim = dataclasses.replace(c, verdict=Verdict.REGRESSION) if c.verdict in _CLAIMED else c
        held = held_over(claim, family, run_alpha, "on fresh samples " if c.remeasured else "")
        if held.verdict is claim.verdict:
            return dataclasses.replace(held, verdict=c.verdict)
        return dataclasses.replace(held, message=None, accepted_by=None)
    if c.parts:
        return _generation(c, family, run_alpha)
    why = _guard(c, family, run_alpha)
    if why is None or c.verdict not in _CLAIMED:
        return c
    return _unclaimed(c, f"a regression by its interval, not claimed: {why}")


def _quiet(c: Comparison, family: int, run_alpha: float) -> Comparison:
    """A regression its quiet evidence decided on a stored pass: held over the run's family
    as the policy holds it (Bonferroni), where the unsplit run would have settled it."""
    assert c.p_value is not None
    part = str((c.evidence or {}).get("part"))
    parts = len(c.parts or {}) or 1
    holm = min(1.0, c.p_value * _family.claims(family, parts))
    if holm <= run_alpha:
        return dataclasses.replace(c, family_size=family, holm_p=holm)
    why = (
        f"its p = {c.p_value:.2g} does not hold over the run's "
        f"{_family.words(family, parts)} at {run_alpha:g} (the unsplit run would have "
        "settled it)"
    )
    return dataclasses.replace(
        _unclaimed(
            c, f"a regression by its {_EVIDENCE.get(part, 'work counts')}, not claimed: {why}"
        ),
        family_size=family,
        holm_p=holm,
    )


def _guard(
    c: Comparison, family: int, run_alpha: float, metrics: tuple[str, ...] = ()
) -> str | None:
    """Why the run-level guard of an interleaved verdict holds its claim back at the look
    it stopped at, with the run's family (None: the claim stands, or is not interleaved).
    ``metrics``: what its plan judged, when more than the verdict's own metric (a
    generation's parts), which the family counts."""
    details = c.details or {}
    p_zero, pairs = details.get("p_no_slower"), c.process_pairs
    if c.decided_by is not CompareMode.AB or p_zero is None or not pairs:
        return None
    plan = PairedPlan(c.threshold, c.alpha, metrics or (str(c.metric),), family, run_alpha)
    return plan._run_guard(int(pairs), float(p_zero))


def _generation(c: Comparison, family: int, run_alpha: float) -> Comparison:
    """A generation's metrics: as in the plan, once one claimed metric clears the guard
    the others need only their own bound, so all stand or none does."""
    assert c.parts is not None
    claimed = {k: p for k, p in c.parts.items() if p.verdict in _CLAIMED}
    held = {k: _guard(p, family, run_alpha, tuple(c.parts)) for k, p in claimed.items()}
    if not claimed or any(why is None for why in held.values()):
        return c
    parts = {
        k: _unclaimed(p, f"a regression by its interval, not claimed: {held[k]}")
        if k in held
        else p
        for k, p in c.parts.items()
    }
    worst = Judge().combined(parts, BenchOptions(alpha=c.alpha))
    # What the session added to the record it kept (the work diff, settling, the GPU's
    # state) stays.
    return dataclasses.replace(
        worst,
        work=c.work,
        gpu_blocks=c.gpu_blocks,
        stored_pass=c.stored_pass,
        settled_because=c.settled_because,
        not_settled=c.not_settled,
    )


def _unclaimed(c: Comparison, note: str) -> Comparison:
    return dataclasses.replace(
        c,
        verdict=Verdict.INCONCLUSIVE,
        reason=Reason.MULTIPLICITY,
        note=f"{note}; {c.note}" if c.note else note,
        message=None,
        accepted_by=None,
    )


def _regate_work(entry: dict[str, Any], was: Comparison, now: Comparison) -> None:
    """``max_work_increase`` again, for a verdict the merge changed. The shard's gate let
    more work pass under a regression (the regression failed the test already); withdrawn,
    the work must fail as the unsplit run's gate would have failed it. A regression the
    shard did not accept had no Perf-Accept rule for its key, so none accepts the work."""
    extra = entry.get("extra") or {}
    gate = extra.get("work_gate")
    if not gate or gate.get("max_work_increase") is None or now.verdict is Verdict.REGRESSION:
        return
    work = now.work if now.work is not None else was.work
    if was.verdict is not Verdict.REGRESSION or not more_work(work, gate["max_work_increase"]):
        return
    assert work is not None
    entry["extra"] = {
        **extra,
        "work_gate": {**gate, "change": work.increase, "passed": False, "accepted": None},
    }


def rejudged(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A merged results document with its verdicts held to the run's family (its
    ``family`` record; without one, as the shards left them) and ``compared_nothing``
    decided over every benchmark."""
    out = dict(doc)
    family = doc.get("family") or {}
    entries = [dict(e) for e in doc["benchmarks"]]
    # The benchmarks the run's tests make where recorded, else (an older shard) its tests.
    size = family.get("benchmarks", family.get("perf_tests"))
    if size is not None and family.get("run_alpha") is not None:
        for entry in entries:
            if entry.get("comparison"):
                c = Comparison.from_json(entry["comparison"])
                again = rejudge(c, int(size), float(family["run_alpha"]))
                if again != c:
                    entry["comparison"] = again.to_json()
                    _regate_work(entry, c, again)
    out["benchmarks"] = entries
    if out.get("compared_nothing") and not compared_nothing(
        [BenchmarkResult.from_json(e) for e in entries]
    ):
        del out["compared_nothing"]
    return out
