"""The rank tests and intervals behind a stored comparison (``stats/ranks.py``) and the
median's interval (``stats/descriptive.py``), as properties against scipy and brute force
as oracles: the module avoids scipy (its import costs ~0.7 s at the first comparison), so
nothing else checks that the fast paths compute the textbook figures."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pytest_infperf.stats import ranks
from pytest_infperf.stats.descriptive import median_ci_ranks

# Latency-like samples: positive, distinct (the normal approximation here has no tie
# correction, scipy's does; timing samples in ns are distinct almost surely).
samples = st.lists(
    st.floats(min_value=1e-6, max_value=1.0, allow_nan=False, allow_infinity=False),
    min_size=2,
    max_size=40,
    unique=True,
)


@settings(max_examples=200, deadline=None)
@given(samples, samples)
def test_mann_whitney_u_is_scipys(x: list[float], y: list[float]) -> None:
    xs, ys = np.asarray(x), np.sort(np.asarray(y))
    oracle = stats.mannwhitneyu(xs, ys, alternative="greater").statistic
    assert ranks.mann_whitney_u(xs, ys) == oracle


@settings(max_examples=200, deadline=None)
@given(samples, samples, st.floats(min_value=-0.2, max_value=0.2), st.data())
def test_min_effect_p_value_is_scipys_asymptotic_test(
    x: list[float], y: list[float], delta: float, data: st.DataObject
) -> None:
    xs, ys = np.asarray(x), np.asarray(y)
    shifted = xs - delta
    if len(set(shifted.tolist()) | set(y)) < len(x) + len(y):
        return  # a tie made by the shift: scipy corrects for it, the plugin need not
    oracle = stats.mannwhitneyu(
        shifted, ys, alternative="greater", method="asymptotic", use_continuity=True
    ).pvalue
    assert math.isclose(
        ranks.min_effect_p_value(xs, ys, delta), oracle, rel_tol=1e-9, abs_tol=1e-15
    )


@settings(max_examples=200, deadline=None)
@given(samples, samples, st.data())
def test_kth_pairwise_difference_is_the_sorted_matrix(
    x: list[float], y: list[float], data: st.DataObject
) -> None:
    xs, ys = np.asarray(x), np.sort(np.asarray(y))
    every = np.sort(np.subtract.outer(xs, ys).ravel())
    k = data.draw(st.integers(min_value=1, max_value=len(every)))
    assert math.isclose(ranks.kth_pairwise_difference(xs, ys, k), every[k - 1], abs_tol=1e-9)


@settings(max_examples=100, deadline=None)
@given(samples, samples, st.sampled_from([0.01, 0.025, 0.05, 0.1]))
def test_shift_estimate_is_hodges_lehmann_with_moses_bounds(
    x: list[float], y: list[float], alpha: float
) -> None:
    xs, ys = np.asarray(x), np.asarray(y)
    every = np.sort(np.subtract.outer(xs, ys).ravel())
    hl, low, high = ranks.shift_estimate(xs, ys, alpha)
    assert math.isclose(hl, float(np.median(every)), abs_tol=1e-9)
    # Moses: the k-th and (nm + 1 - k)-th differences, k from the normal quantile of U.
    n, m = len(x), len(y)
    z = stats.norm.ppf(1 - alpha)
    k = math.floor(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12) + 0.5)
    if k < 1:  # too few samples for this confidence: no bound (test_compare: 2 and 2)
        assert (low, high) == (-math.inf, math.inf)
        return
    assert math.isclose(low, every[k - 1], abs_tol=1e-9)
    assert math.isclose(high, every[n * m - k], abs_tol=1e-9)
    assert low <= hl <= high


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=2000), st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_median_interval_is_the_binomial_one(n: int, level: float) -> None:
    lo, hi, coverage = median_ci_ranks(n, level)
    assert hi == n - 1 - lo
    exact = 1 - 2 * stats.binom.cdf(lo, n, 0.5)
    assert math.isclose(coverage, exact, rel_tol=1e-9, abs_tol=1e-12)
    if lo > 0 or coverage >= level:
        assert coverage >= level - 1e-12
        # ...and the narrowest such pair: one rank further in would miss the level.
        if lo + 1 <= (n - 1) // 2:
            assert 1 - 2 * stats.binom.cdf(lo + 1, n, 0.5) < level
