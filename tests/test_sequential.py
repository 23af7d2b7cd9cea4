"""Group-sequential boundaries (stats/sequential.py), checked against scipy's bivariate
normal and a simulated random walk: the chance of first crossing at each look is the share
of alpha it was given."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pytest_infperf.judge.plan import Design
from pytest_infperf.stats.sequential import boundaries, level, regression_shares


def test_the_first_two_looks_match_the_bivariate_normal() -> None:
    """Look 1 alone is the normal quantile; look 2's value makes P(Z1 <= c1, Z2 > c2) the
    second share, Z1 and Z2 correlated sqrt(1/2) (pair 2 adds as much as pair 1)."""
    alpha, shares = 0.05, (0.3, 0.2)
    c1, c2 = boundaries(alpha, shares)
    assert c1 == pytest.approx(stats.norm.isf(alpha * 0.3), abs=5e-4)
    rho = math.sqrt(0.5)
    both_below = stats.multivariate_normal([0, 0], [[1, rho], [rho, 1]]).cdf([c1, c2])
    first_crossing_at_2 = stats.norm.cdf(c1) - both_below
    assert first_crossing_at_2 == pytest.approx(alpha * 0.2, rel=0.02)


def test_the_design_spends_its_alpha_look_by_look_on_a_random_walk() -> None:
    """400,000 random walks of six equal increments under the null: the share that first
    crosses at each look is alpha x its share, and in all alpha (not less, as Bonferroni's
    larger values would give)."""
    d = Design()
    z = np.asarray(boundaries(0.05, d.shares))
    rng = np.random.default_rng(7)
    walks = np.cumsum(rng.standard_normal((400_000, d.max_pairs)), axis=1)
    zs = walks / np.sqrt(np.arange(1, d.max_pairs + 1))
    crossed = zs > z
    first = np.where(crossed.any(axis=1), crossed.argmax(axis=1), -1)
    for k, share in enumerate(d.shares):
        assert np.mean(first == k) == pytest.approx(0.05 * share, abs=1.5e-3)
    assert np.mean(first >= 0) == pytest.approx(0.05, abs=2e-3)
    bonferroni = stats.norm.isf(0.05 * np.asarray(d.shares))
    assert np.all(z[1:] < bonferroni[1:])  # correlated looks: every later look is easier


def test_a_look_that_cannot_claim_spends_nothing() -> None:
    shares = regression_shares((0.3, 0.2, 0.15, 0.15, 0.1, 0.1))
    assert shares[0] == 0.0 and sum(shares) == pytest.approx(1.0)
    z = boundaries(0.01, shares)
    assert math.isinf(z[0])
    # looks 2 to 6 share all of alpha: the first of them is a plain quantile, each later
    # one easier than Bonferroni's
    assert z[1] == pytest.approx(stats.norm.isf(0.01 * shares[1]), abs=5e-4)
    assert all(level(v) > 0.01 * s for v, s in zip(z[2:], shares[2:], strict=True))


def test_bad_spending_is_refused() -> None:
    with pytest.raises(ValueError, match="alpha must be in"):
        boundaries(0.0, (1.0,))
    with pytest.raises(ValueError, match="sum to at most 1"):
        boundaries(0.05, (0.7, 0.7))
