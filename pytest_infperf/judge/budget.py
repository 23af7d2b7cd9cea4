"""What a run's time budget (``--perf-budget``) may cut, and what a verdict it cut says:
the one place that decides which verdicts a budget never touches."""

from __future__ import annotations

import dataclasses
import math

from ..core.names import Metric
from ..core.results import Comparison, Reason, Verdict


def might_fail(c: Comparison, faster: float = 1.0) -> bool:
    """Whether a verdict could still end in a failing test: what a run's budget
    (--perf-budget) never cuts short. A regression; a verdict the drift guard withheld or a
    GPU's state set aside (settling could clear or confirm it); an undecided one with no
    estimate (never compared), or whose estimate, or one of its parts', lies past the
    threshold on the slow side once the machine's own speed-up is allowed for (``faster``:
    how much faster it runs now than at the baseline's run; a raw ratio hides that much)."""
    if c.parts and any(might_fail(part, faster) for part in c.parts.values()):
        return True
    if c.verdict is Verdict.REGRESSION or c.reason in (Reason.DRIFT_WITHHELD, Reason.GPU_THROTTLED):
        return True
    if c.verdict is not Verdict.INCONCLUSIVE:
        return False
    if not c.ratio or not math.isfinite(c.ratio):
        return True
    slower = 1.0 / c.ratio if c.metric is Metric.THROUGHPUT else c.ratio
    speed = max(faster, float((c.machine_speed or {}).get("faster") or 1.0))
    return slower * speed > 1.0 + c.threshold


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
