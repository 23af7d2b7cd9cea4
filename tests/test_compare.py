"""The verdict engine: hand-computed values, coverage by simulation, and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_infperf.stats import ranks as compare


def test_kth_pairwise_difference_and_hodges_lehmann() -> None:
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([0.0, 1.0])
    # differences x_i - y_j: 1, 0, 2, 1, 3, 2 -> sorted 0, 1, 1, 2, 2, 3
    got = [compare.kth_pairwise_difference(x, np.sort(y), k) for k in range(1, 7)]
    assert got == pytest.approx([0, 1, 1, 2, 2, 3], abs=1e-9)
    hl, low, high = compare.shift_estimate(x, y, 0.05)
    assert hl == pytest.approx(1.5)  # mean of the 3rd and 4th differences
    assert low <= hl <= high


def test_moses_rank_matches_the_normal_approximation() -> None:
    # n = m = 10: 50 - 1.645 * sqrt(100 * 21 / 12) + 0.5 = 28.7 -> 28 (exact tables: 28)
    assert compare.moses_rank(10, 10, 0.05) == 28
    assert compare.moses_rank(5, 5, 0.05) == 5
    # 2 and 2: P(U = 0) = 1/6 > 0.05, so no difference bounds the shift at 95%
    assert compare.moses_rank(2, 2, 0.05) == 0
    assert compare.shift_estimate(np.array([2.0, 3.0]), np.array([0.0, 1.0]), 0.05)[1:] == (
        -np.inf,
        np.inf,
    )


def test_mann_whitney_u_counts_ties_as_half() -> None:
    assert compare.mann_whitney_u(np.array([1.0, 2.0]), np.array([1.0, 3.0])) == 1.5


def test_normal_tail_keeps_tiny_p_values() -> None:
    assert compare._normal_sf(1.6448536) == pytest.approx(0.05, abs=1e-7)
    assert 0 < compare._normal_sf(12.0) < 1e-30  # 1 - cdf would round this to 0


def test_time_units() -> None:
    assert list(compare.time_units([3.0, 1.0, 2.0])) == [3.0, 1.0, 2.0]
    units = compare.time_units([float(i) for i in range(20)])
    assert list(units) == [1.5, 5.5, 9.5, 13.5, 17.5]  # 5 blocks of 4, medians, in order
    assert len(compare.time_units(np.ones(1000))) == compare.MAX_UNITS


@pytest.mark.parametrize(
    ("low", "high", "verdict"),
    [
        (1.06, 1.20, "regression"),
        (0.80, 0.94, "improvement"),
        (0.97, 1.04, "unchanged"),
        (1.00, 1.10, "inconclusive"),
        (0.90, 1.00, "no-regression"),  # the gate's question answered, one-sided
        (0.90, 1.06, "inconclusive"),
    ],
)
def test_classify(low: float, high: float, verdict: str) -> None:
    assert compare.classify(low, high, 0.05) == verdict


def test_classify_with_machine_drift() -> None:
    # the machine ran 10% slower: a 1.10-1.20 interval is explained by it
    assert compare.classify(1.10, 1.20, 0.05, slower=1.10) == "inconclusive"
    assert compare.classify(1.20, 1.30, 0.05, slower=1.10) == "regression"
    # the machine ran 10% faster: "unchanged" is no longer claimed
    assert compare.classify(0.97, 1.03, 0.05, faster=1.10) == "inconclusive"


def _lognormal(rng: np.random.Generator, n: int, cv: float, scale: float = 1.0) -> np.ndarray:
    return scale * np.exp(rng.normal(0.0, cv, n))


def test_clear_changes_are_detected() -> None:
    rng = np.random.default_rng(1)
    base = _lognormal(rng, 200, 0.05)
    slow = compare.compare_latency(_lognormal(rng, 200, 0.05, 1.3), base)
    fast = compare.compare_latency(_lognormal(rng, 200, 0.05, 0.7), base)
    assert (slow.verdict, fast.verdict) == ("regression", "improvement")
    same = compare.compare_latency(_lognormal(rng, 200, 0.05), base)
    assert same.verdict == "unchanged"
    assert (same.n, same.m, same.unit) == (20, 20, "time units")
    assert same.details["samples"] == [200, 200]


def test_one_sided_coverage_by_simulation() -> None:
    """With d = 0, an A/A comparison is 'regression' (lower bound > 1) about alpha of the
    time: the Moses bound on time units holds its level."""
    rng = np.random.default_rng(7)
    trials = 600
    lows = [
        compare.compare_latency(
            _lognormal(rng, 80, 0.1), _lognormal(rng, 80, 0.1), threshold=1e-9
        ).ci_low
        for _ in range(trials)
    ]
    hits = sum(low is not None and low > 1.0 for low in lows)
    assert 0.02 < hits / trials < 0.085


def test_min_effect_rule_keeps_small_changes_quiet() -> None:
    """A true +3% change is below the 5% tolerance: almost never a regression."""
    rng = np.random.default_rng(3)
    verdicts = [
        compare.compare_latency(_lognormal(rng, 100, 0.05, 1.03), _lognormal(rng, 100, 0.05))
        for _ in range(300)
    ]
    flagged = sum(c.verdict == "regression" for c in verdicts)
    assert flagged / 300 < 0.05


def test_p_value_agrees_with_the_bound() -> None:
    rng = np.random.default_rng(5)
    c = compare.compare_latency(_lognormal(rng, 100, 0.05, 1.3), _lognormal(rng, 100, 0.05))
    assert c.p_value < 0.05 and c.ci_low > 1.05
    c = compare.compare_latency(_lognormal(rng, 100, 0.05), _lognormal(rng, 100, 0.05))
    assert c.p_value > 0.5


def test_tail_metric_needs_enough_samples() -> None:
    rng = np.random.default_rng(2)
    short = compare.compare_tail(_lognormal(rng, 40, 0.05), _lognormal(rng, 40, 0.05), "p90")
    assert short.verdict == "inconclusive" and "needs >= 64" in str(short.note)
    long_base = _lognormal(rng, 400, 0.05)
    slow = compare.compare_tail(_lognormal(rng, 400, 0.05, 1.3), long_base, "p90")
    assert slow.verdict == "regression" and slow.ratio == pytest.approx(1.3, rel=0.05)


def test_throughput_orientation() -> None:
    rng = np.random.default_rng(4)
    base = _lognormal(rng, 100, 0.03)
    # same latency per call but the batch doubled: throughput doubles -> improvement
    c = compare.compare_throughput(_lognormal(rng, 100, 0.03), base, 8, 4)
    assert c.verdict == "improvement" and c.ratio == pytest.approx(2.0, rel=0.03)
    c = compare.compare_throughput(_lognormal(rng, 100, 0.03, 1.3), base, 4, 4)
    assert c.verdict == "regression" and c.ratio < 1 / 1.05


def test_memory_is_a_plain_ratio_with_a_floor() -> None:
    mib = 1 << 20
    assert compare.compare_memory(100 * mib, 90 * mib).verdict == "regression"
    assert compare.compare_memory(80 * mib, 90 * mib).verdict == "improvement"
    assert compare.compare_memory(1.5 * mib, 1.0 * mib).verdict == "unchanged"  # < 1 MiB
    assert compare.compare_memory(None, mib).verdict == "inconclusive"


# --- properties ------------------------------------------------------------------------

positive_samples = st.lists(
    st.floats(min_value=1e-7, max_value=10.0, allow_nan=False), min_size=2, max_size=120
)


@settings(max_examples=60, deadline=None)
@given(positive_samples, st.floats(min_value=1e-3, max_value=1e3))
def test_statistics_scale_with_the_unit(samples: list[float], c: float) -> None:
    from pytest_infperf.stats.descriptive import summarize

    a, b = summarize(samples), summarize([v * c for v in samples])
    # A spread (IQR, CV) of nearly equal samples is a difference of rounded values, so its
    # error is relative to the samples' magnitude, not to itself (hypothesis found two
    # samples one ulp apart).
    scale = max(samples) * c
    for key in ("mean", "median", "min", "max", "p90", "p99", "ci_low", "ci_high", "iqr"):
        assert b[key] == pytest.approx(a[key] * c, rel=1e-9, abs=1e-12 * scale), key
    assert b["cv"] == pytest.approx(a["cv"], rel=1e-6, abs=1e-9)
    assert b["n"] == a["n"] and b["outliers"] == a["outliers"]


@settings(max_examples=60, deadline=None)
@given(positive_samples, positive_samples, st.floats(min_value=1e-3, max_value=1e3))
def test_comparison_is_unit_free(x: list[float], y: list[float], c: float) -> None:
    a = compare.compare_latency(x, y)
    b = compare.compare_latency([v * c for v in x], [v * c for v in y])
    assert b.verdict == a.verdict
    assert b.ratio == pytest.approx(a.ratio, rel=1e-6)


@settings(max_examples=80, deadline=None)
@given(positive_samples)
def test_a_sample_against_itself_is_never_a_change(samples: list[float]) -> None:
    c = compare.compare_latency(samples, samples)
    assert c.verdict in ("unchanged", "no-regression", "inconclusive")
    assert c.ratio == pytest.approx(1.0)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(min_value=20, max_value=300),
    # Up to 2.5% (0 of 3,000 random cases undecided). Not 4%: 20 samples are 5 time units
    # a side, and at CV 3.9% their interval reached +-5.8% (seed 1232): inconclusive is
    # then the right verdict, as hypothesis found.
    st.floats(min_value=0.001, max_value=0.025),
    st.integers(min_value=0, max_value=2**31),
)
def test_a_quiet_sample_against_itself_is_unchanged(n: int, cv: float, seed: int) -> None:
    samples = _lognormal(np.random.default_rng(seed), n, cv)
    assert compare.compare_latency(samples, samples).verdict == "unchanged"


RANK = {"improvement": 0, "unchanged": 1, "no-regression": 1, "inconclusive": 1, "regression": 2}


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=2**31), st.floats(min_value=0.005, max_value=0.2))
def test_verdicts_are_monotone_in_an_injected_slowdown(seed: int, cv: float) -> None:
    rng = np.random.default_rng(seed)
    x, y = _lognormal(rng, 60, cv), _lognormal(rng, 60, cv)
    ranks = [
        RANK[compare.compare_latency(x * s, y).verdict]
        for s in (0.5, 0.7, 0.9, 1.0, 1.1, 1.3, 1.6, 2.0)
    ]
    assert ranks == sorted(ranks)
    ratios = [compare.compare_latency(x * s, y).ratio for s in (0.8, 1.0, 1.25)]
    assert ratios == sorted(ratios)
    assert math.isclose(ratios[2] / ratios[1], 1.25, rel_tol=1e-6)
