"""Change points in a benchmark's history along main: where did a shift enter?

A pairwise gate compares one commit with its baseline; a slow drift of 1% a commit, or a
step that slipped through as ``inconclusive``, is invisible to it but obvious on a trend.
This finds steps in the series of per-commit medians (log scale) by binary segmentation:
find the split that best separates two means, keep it if the split is unlikely under no
change (p <= ``P_MAX``) *and* the step is at least ``MIN_MAGNITUDE``, then look for more
splits inside each segment.

"Unlikely under no change" is a permutation test of the best split itself: the statistic
is the largest standardised between-segment sum of squares over *all* split positions, and
its p-value is the share of shuffles of the segment whose own best split scores as high
(a fixed-seed sample of ``PERMUTATIONS``). Testing the chosen split with a two-sample test
as if its position had been fixed in advance (what this module did before) ignores the
search over positions and reported steps on flat noisy histories.
``benchmarks/changepoint_quality.py`` measures both on synthetic histories. Pure
functions; numpy only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

MIN_SEGMENT = 3
#: Shuffles per test; the smallest p-value a test can give is 1 / (PERMUTATIONS + 1).
PERMUTATIONS = 999
_SEED = 20261124


@dataclasses.dataclass(frozen=True)
class ChangePoint:
    """A step at ``index``: the first point of the new level."""

    index: int
    ratio: float  # mean after / mean before, on the original scale (exp of log means)
    p_value: float
    before: float  # geometric mean of the segment before
    after: float


def _scores(x: np.ndarray) -> np.ndarray:
    """Per row of ``x`` (series as rows), the between-segment sum of squares
    ``n_l n_r / n (m_l - m_r)^2`` of every split leaving ``MIN_SEGMENT`` points a side."""
    n = x.shape[-1]
    csum = np.cumsum(x, axis=-1)
    i = np.arange(MIN_SEGMENT, n - MIN_SEGMENT + 1)
    left = csum[..., i - 1] / i
    right = (csum[..., -1:] - csum[..., i - 1]) / (n - i)
    out: np.ndarray = i * (n - i) / n * (left - right) ** 2
    return out


def _best_split(x: np.ndarray) -> int | None:
    """The split maximising the between-segment sum of squares."""
    if len(x) < 2 * MIN_SEGMENT:
        return None
    return int(np.argmax(_scores(x))) + MIN_SEGMENT


#: Half-width (commits) of the window whose posterior mass places a step (see _locate).
LOCATE_WINDOW = 5


def _locate(x: np.ndarray) -> int | None:
    """Where the step of ``x`` is, for a reader who looks within ``LOCATE_WINDOW`` commits
    of it: the split whose window holds the most posterior mass (flat prior over splits,
    likelihood exp(score / 2 sigma^2), sigma from the best split's residuals), rather than
    the single best split. For a 5% step in 5% noise the best split lands within 5 commits
    823 times in 1000, the window's centre 861 (``benchmarks/changepoint_quality.py``: the
    argmax jumps to a far noise peak more often than the window does)."""
    if len(x) < 2 * MIN_SEGMENT:
        return None
    scores = _scores(x)
    best = int(np.argmax(scores)) + MIN_SEGMENT
    var = float(np.var(np.concatenate([x[:best] - x[:best].mean(), x[best:] - x[best:].mean()])))
    if var <= 0:
        return best
    weight = np.exp((scores - scores.max()) / (2 * var))
    mass = np.convolve(weight, np.ones(2 * LOCATE_WINDOW + 1), mode="same")
    # Windows that hold (all but 1% of) the most mass tie: a sharp step is in every window
    # around it, so take the one centred nearest the best split.
    near = np.flatnonzero(mass >= 0.99 * mass.max())
    return int(near[np.argmin(np.abs(near + MIN_SEGMENT - best))]) + MIN_SEGMENT


def split_p(x: np.ndarray, rng: np.random.Generator) -> float:
    """The permutation p-value of the best split of ``x`` (see the module docstring)."""
    if np.var(x) == 0:
        return 1.0
    observed = float(np.max(_scores(x)))
    shuffled = rng.permuted(np.broadcast_to(x, (PERMUTATIONS, len(x))), axis=1)
    as_high = int(np.sum(np.max(_scores(shuffled), axis=1) >= observed * (1 - 1e-12)))
    return (1 + as_high) / (PERMUTATIONS + 1)


#: The defaults, chosen with ``benchmarks/changepoint_quality.py``: on 100 flat histories of
#: 200 points at 5% noise none reports a step, and 88 of 100 with a 5% step name it within
#: 5 commits (245 of 300 with --histories 300; 4 of those 300 flat ones report a step; a 5%
#: minimum magnitude found 47 of 100: half of the estimates of a 5% step fall under 5%).
#: Smaller than the gate's threshold on purpose: a history shows the steps that slipped
#: through it.
P_MAX = 0.01
MIN_MAGNITUDE = 0.02


def detect(
    values: Sequence[float], p_max: float = P_MAX, min_magnitude: float = MIN_MAGNITUDE
) -> list[ChangePoint]:
    """Change points of a positive series (e.g. medians in seconds, oldest first)."""
    arr = np.log(np.asarray(values, dtype=np.float64))
    rng = np.random.default_rng(_SEED)  # the same history always gives the same answer
    found: list[ChangePoint] = []

    def visit(lo: int, hi: int) -> None:
        segment = arr[lo:hi]
        split = _locate(segment)
        if split is None:
            return
        before, after = segment[:split], segment[split:]
        ratio = math.exp(float(np.mean(after) - np.mean(before)))
        if abs(ratio - 1.0) < min_magnitude:
            return
        p = split_p(segment, rng)
        if p <= p_max:
            found.append(
                ChangePoint(
                    lo + split,
                    ratio,
                    p,
                    math.exp(float(np.mean(before))),
                    math.exp(float(np.mean(after))),
                )
            )
            visit(lo, lo + split)
            visit(lo + split, hi)

    visit(0, len(arr))
    return sorted(found, key=lambda c: c.index)
