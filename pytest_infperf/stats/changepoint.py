"""Change points in a benchmark's history along main: where did a shift enter?

A pairwise gate compares one commit with its baseline; a slow drift of 1% a commit, or a
step that slipped through as ``inconclusive``, is invisible to it but obvious on a trend.
This finds steps in the series of per-commit medians (log scale) by binary segmentation:
find the split that best separates two means, keep it if a Welch t-test between the two
segments gives p <= ``p_max`` (default 0.001, as Hunter/Otava's ``--max-pvalue``) *and* the
step is at least ``min_magnitude`` (default 5%, the gate's own threshold; Hunter/Otava
default to no minimum and use E-divisive means over windows, which this simplifies), then
look for more splits inside each segment. Pure functions; scipy's t distribution for the
p-value.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

MIN_SEGMENT = 3


@dataclasses.dataclass(frozen=True)
class ChangePoint:
    """A step at ``index``: the first point of the new level."""

    index: int
    ratio: float  # mean after / mean before, on the original scale (exp of log means)
    p_value: float
    before: float  # geometric mean of the segment before
    after: float


def welch_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Welch t-test p-value (1.0 when a segment is too short to test)."""
    from scipy import stats  # noqa: PLC0415 (scipy takes ~0.7 s to import)

    if len(a) < 2 or len(b) < 2:
        return 1.0
    if np.var(a) == 0 and np.var(b) == 0:
        # scipy answers NaN for two spread-free segments; a step between two exact levels
        # is certain, and no step at all is certainly none.
        return 0.0 if float(np.mean(a)) != float(np.mean(b)) else 1.0
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def _best_split(x: np.ndarray) -> int | None:
    """The split maximising the between-segment sum of squares (n_l n_r / n) (m_l - m_r)^2."""
    n = len(x)
    if n < 2 * MIN_SEGMENT:
        return None
    csum = np.cumsum(x)
    total = csum[-1]
    best, best_i = -1.0, None
    for i in range(MIN_SEGMENT, n - MIN_SEGMENT + 1):
        left = csum[i - 1] / i
        right = (total - csum[i - 1]) / (n - i)
        score = i * (n - i) / n * (left - right) ** 2
        if score > best:
            best, best_i = score, i
    return best_i


def detect(
    values: Sequence[float], p_max: float = 0.001, min_magnitude: float = 0.05
) -> list[ChangePoint]:
    """Change points of a positive series (e.g. medians in seconds, oldest first)."""
    arr = np.log(np.asarray(values, dtype=np.float64))
    found: list[ChangePoint] = []

    def visit(lo: int, hi: int) -> None:
        segment = arr[lo:hi]
        split = _best_split(segment)
        if split is None:
            return
        before, after = segment[:split], segment[split:]
        p = welch_p(before, after)
        ratio = math.exp(float(np.mean(after) - np.mean(before)))
        if p <= p_max and abs(ratio - 1.0) >= min_magnitude:
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
