"""Descriptive statistics against values computed by hand."""

from __future__ import annotations

import math

import pytest

from pytest_infperf.stats import descriptive as stats


def test_summary_of_one_to_ten() -> None:
    s = stats.summarize([float(v) for v in range(1, 11)])
    assert s["n"] == 10
    assert s["mean"] == pytest.approx(5.5)
    assert s["median"] == s["p50"] == pytest.approx(5.5)
    # sum((x - 5.5)^2) = 82.5, ddof=1 -> sqrt(82.5 / 9)
    assert s["stdev"] == pytest.approx(math.sqrt(82.5 / 9))
    assert s["cv"] == pytest.approx(math.sqrt(82.5 / 9) / 5.5)
    assert (s["min"], s["max"]) == (1.0, 10.0)
    # Linear interpolation (type 7): x[(n-1) q]
    assert s["q1"] == pytest.approx(3.25)
    assert s["q3"] == pytest.approx(7.75)
    assert s["iqr"] == pytest.approx(4.5)
    assert s["p90"] == pytest.approx(9.1)
    assert s["p95"] == pytest.approx(9.55)
    assert s["p99"] == pytest.approx(9.91)
    # n=10: P(B<=1) = 11/1024 <= 0.025 < P(B<=2) = 56/1024 -> [x(2), x(9)]
    assert (s["ci_low"], s["ci_high"]) == (2.0, 9.0)
    assert s["ci_level"] == pytest.approx(1 - 2 * 11 / 1024)
    assert s["ci_rel_halfwidth"] == pytest.approx((9 - 2) / 2 / 5.5)
    assert s["low_sample_percentiles"] == ["p90", "p95", "p99"]
    assert s["outliers"] == 0


@pytest.mark.parametrize(
    ("n", "lo", "hi", "coverage"),
    [
        # n=20: P(B<=5) = 21700/2^20 -> ranks 6..15 (1-based), the textbook 95.86%
        (20, 5, 14, 1 - 2 * 21700 / 2**20),
        # n=5 cannot reach 95%: the full range, covering 1 - 2/32
        (5, 0, 4, 1 - 2 / 32),
        (6, 0, 5, 1 - 2 / 64),
        (1, 0, 0, 0.0),
    ],
)
def test_median_ci_ranks(n: int, lo: int, hi: int, coverage: float) -> None:
    got_lo, got_hi, got_cov = stats.median_ci_ranks(n)
    assert (got_lo, got_hi) == (lo, hi)
    assert got_cov == pytest.approx(coverage)


def test_median_ci_large_n_matches_normal_approximation() -> None:
    n = 10_000
    lo, hi, cov = stats.median_ci_ranks(n)
    # normal approximation: n/2 -/+ 1.96 sqrt(n)/2 = 5000 -/+ 98
    assert abs(lo - (n / 2 - 98)) <= 2
    assert hi == n - 1 - lo
    assert 0.95 <= cov < 0.96


def test_outliers_and_noise_levels() -> None:
    s = stats.summarize([1.0, 1.0, 1.0, 1.0, 100.0])
    assert s["outliers"] == 1
    assert stats.noise_level(0.05) == "ok"
    assert stats.noise_level(0.10) == "high"
    assert stats.noise_level(0.25) == "severe"


def test_percentile_flags_follow_mlperf() -> None:
    assert stats.summarize([1.0] * 64)["low_sample_percentiles"] == ["p95", "p99"]
    assert stats.summarize([1.0] * 662)["low_sample_percentiles"] == []


def test_throughput() -> None:
    assert stats.throughput(8, 0.004) == pytest.approx(2000.0)
    assert stats.throughput(None, 0.004) is None


def test_bad_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="zero samples"):
        stats.summarize([])
    with pytest.raises(ValueError, match="NaN"):
        stats.summarize([1.0, float("nan")])
    with pytest.raises(ValueError, match="one-dimensional"):
        stats.summarize([[1.0, 2.0]])  # type: ignore[list-item]


def test_rel_halfwidth_needs_six_samples() -> None:
    assert stats.ci_rel_halfwidth([1.0] * 5) == math.inf
    assert stats.ci_rel_halfwidth([1.0] * 6) == 0.0
