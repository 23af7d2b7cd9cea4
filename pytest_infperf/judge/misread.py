"""When a stored pass misread the machine, as its own settling shows.

The session-start reference (a small GEMM and a Python loop) stands for the machine's
speed; where it holds still, ``--perf-compare`` lets a stored verdict that rules out a
regression stand. But a VM can move under one workload and not another: in an A/B run of
the examples made 10% slower (``python benchmarks/real_models.py --slowdown 1.10``), the
reference read x1.007 and x0.998 while three ONNX Runtime BERTs ran about 10% faster than
at the baseline's run, so the stored pass called them unchanged at x1.002-x1.025; the
benchmarks settled before them had shown that the stored pass could not be trusted (stored
x1.17-x1.20 where interleaving measured x1.11: they ran slower than at the baseline's run,
so the machine had not moved one way for all). A settled verdict is a reference taken
where the benchmarks run: when its interval and the stored pass's do not overlap, and
their ratios differ by more than the reference's own limit, the stored pass misread this
machine, in whichever direction.
"""

from __future__ import annotations

import math

from ..core.names import CompareMode
from ..core.results import Comparison


def misread(stored: Comparison, settled: Comparison) -> float | None:
    """The stored ratio over the interleaved one, of the first judged metric whose two
    intervals do not overlap and whose ratios differ by more than half the threshold (the
    drift guard's limit for the session-start reference); None where they agree, or
    where no metric was judged by both (a generation's TTFT and TPOT are compared part by
    part: the headline ratio is the worst part's, which need not be the same one)."""
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
    """One session's (one process's) state of the rule: the first misread a settling
    showed, and the verdicts that stood on the stored pass alone before it."""

    def __init__(self) -> None:
        #: Where the first misread was seen ("" until then).
        self.found = ""
        self.stood: list[str] = []

    def check(self, nodeid: str, stored: Comparison, settled: Comparison) -> str | None:
        """The warning to give when this settling is the first to show a misread."""
        ratio = misread(stored, settled)
        if ratio is None or self.found:
            return None
        self.found = f"{nodeid}: its stored pass and its interleaved run differ by x{ratio:.3f}"
        stood = ", ".join(dict.fromkeys(self.stood)) or "none"
        return (
            f"{self.found}, beyond both their errors: the stored pass misread this machine's "
            "speed (this process's later CPU benchmarks that can be are interleaved at once, or "
            "re-checked where the stored pass runs first); these CPU verdicts stood on the "
            f"stored pass alone before it and were not re-checked: {stood}"
        )
