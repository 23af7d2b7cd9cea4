"""When a stored pass misread the machine, as its own settling shows.

The session-start reference (a small GEMM and a Python loop) stands for the machine's
speed; where it holds still, ``--perf-compare`` lets a stored verdict that rules out a
regression stand. But a VM can move under one workload and not another: in an A/B run of
the examples made 10% slower (``python benchmarks/real_models.py --slowdown 1.10``), the
reference read x1.007 and x0.998 while three ONNX Runtime BERTs ran about 10% faster than
at the baseline's run, so the stored pass called them unchanged at x1.002-x1.025; the
benchmarks settled before them had shown the move (stored x1.17-x1.20 where interleaving
measured x1.11). A settled verdict is such a reference, taken where the benchmarks run:
when its interval and the stored pass's do not overlap, and their ratios differ by more
than the reference's own limit, the stored pass misread this machine.
"""

from __future__ import annotations

import math

from ..core.names import CompareMode
from ..core.results import Comparison


def misread(stored: Comparison, settled: Comparison) -> float | None:
    """The stored ratio over the interleaved one, where the two verdicts' intervals do
    not overlap and the ratios differ by more than half the threshold (the drift guard's
    limit for the session-start reference); None where they agree, or either lacks one."""
    if settled.decided_by is not CompareMode.AB:
        return None
    first, then = _interval(stored), _interval(settled)
    if first is None or then is None:
        return None
    ratio = first[0] / then[0]
    apart = first[1] > then[2] or first[2] < then[1]
    return ratio if apart and abs(math.log(ratio)) > math.log1p(stored.threshold / 2) else None


def _interval(c: Comparison) -> tuple[float, float, float] | None:
    ratio, low, high = c.ratio, c.ci_low, c.ci_high
    if ratio is None or low is None or high is None or min(ratio, low, high) <= 0:
        return None
    return ratio, low, high
