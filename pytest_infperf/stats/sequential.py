"""Group-sequential boundaries: how far out each look's bound must sit so that a test that
looks after every process pair still errs with probability at most alpha in all.

Bonferroni over the looks (alpha x share at each) is valid but wasteful: successive looks
share most of their data (the estimate after pair 3 contains pairs 1 and 2), so their
errors overlap. Error spending (Lan and DeMets) gives each look the critical value at which
the chance of *first* crossing there is exactly alpha x share, counting that earlier looks
did not cross. Under the usual model (each process pair adds an equal amount of
information, the cumulative statistic moves as a random walk) that chance is computed by the
Armitage-McPherson-Rowe recursion: carry the density of the sum of the increments over a
grid, cut off what crossed at each look, convolve with the next increment. Pure numpy.

For six looks at one-sided alpha 0.05 with shares (0.3, 0.2, 0.15, 0.15, 0.1, 0.1) the
critical values are about 2.17, 2.19, 2.19, 2.13, 2.17, 2.14, where Bonferroni asks 2.17,
2.33, 2.44, 2.44, 2.58, 2.58 (tests/test_sequential.py checks them by simulation).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

#: Grid step of the sum statistic, and how many standard deviations the grid spans.
_STEP = 0.004
_SPAN = 12.0


@functools.lru_cache(maxsize=64)
def boundaries(alpha: float, shares: tuple[float, ...]) -> tuple[float, ...]:
    """Critical values z_1..z_K of the standardised statistic Z_k = S_k / sqrt(k), S_k a
    sum of k independent N(0, 1) increments, such that the chance of crossing above z_k
    at look k for the first time is ``alpha x shares[k-1]`` (a share of 0: that look never
    claims, its value is infinite). Shares should sum to at most 1."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if any(s < 0 for s in shares) or sum(shares) > 1.0 + 1e-9:
        raise ValueError(f"shares must be >= 0 and sum to at most 1, got {shares}")
    looks = len(shares)
    half = _SPAN * math.sqrt(looks)
    x = np.arange(-half, half + _STEP / 2, _STEP)
    m = int(8.0 / _STEP)
    kernel = np.exp(-((np.arange(-m, m + 1) * _STEP) ** 2) / 2.0) / math.sqrt(2.0 * math.pi)
    kernel *= _STEP
    density = np.exp(-(x**2) / 2.0) / math.sqrt(2.0 * math.pi)
    out: list[float] = []
    for k, share in enumerate(shares, start=1):
        if k > 1:
            density = np.convolve(density, kernel, mode="same")
        target = alpha * share
        if target <= 0:
            out.append(math.inf)
            continue
        # P(S_k >= x_i, no earlier crossing), by the trapezoid rule
        tail = (np.cumsum(density[::-1])[::-1] - density / 2.0) * _STEP
        i = int(np.searchsorted(-tail, -target))
        i = min(max(i, 1), len(x) - 1)
        t0, t1 = float(tail[i - 1]), float(tail[i])
        cut = float(x[i - 1]) + ((t0 - target) / (t0 - t1) * _STEP if t0 != t1 else 0.0)
        out.append(cut / math.sqrt(k))
        density = np.where(x > cut, 0.0, density)
    return tuple(out)


def level(z: float) -> float:
    """The one-sided nominal level of a critical value (what one look's bound holds at)."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def regression_shares(shares: Sequence[float]) -> tuple[float, ...]:
    """The same spending for a claim that the first look may not make (a regression needs
    two process pairs): nothing at look 1, the rest in the same proportions."""
    rest = sum(shares[1:])
    return (0.0, *(s / rest for s in shares[1:])) if rest > 0 else tuple(0.0 for _ in shares)
