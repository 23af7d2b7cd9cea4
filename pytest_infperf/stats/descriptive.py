"""Descriptive statistics of latency samples: pure functions, numpy only.

scipy is deliberately not imported here: ``scipy.stats`` takes ~0.7 s to import, and
these functions also run at checkpoints inside the sampling loop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: MLPerf LoadGen's minimum sample counts for a tail percentile to be reportable.
PERCENTILE_MIN_SAMPLES: dict[str, int] = {"p90": 64, "p95": 130, "p99": 662}

#: torch.utils.benchmark's thresholds on IQR/median.
NOISE_WARN = 0.10
NOISE_SEVERE = 0.25


def as_array(samples: Sequence[float] | FloatArray) -> FloatArray:
    arr = np.asarray(samples, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"samples must be one-dimensional, got shape {arr.shape}")
    return arr


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, level: float = 0.95) -> tuple[int, int, float]:
    """0-based order-statistic indices (lo, hi) bracketing the median at ``level``.

    Distribution-free: the number of samples below the true median is Binomial(n, 1/2), so
    [x_(j), x_(n-1-j)] covers the median with probability 1 - 2 P(B <= j). Returns the
    largest j whose coverage is still >= level, with the exact coverage achieved. For
    n < 6 no pair reaches 95%; the full range (0, n-1) is returned with its coverage.
    """
    if n < 1:
        raise ValueError("need at least one sample")
    tail = (1.0 - level) / 2.0
    # Coverage of [x_(lo), x_(n-1-lo)] (0-based) is 1 - 2 P(B <= lo); pick the largest lo
    # whose coverage is still >= level. P(B <= j) is accumulated in log space: exact, O(n).
    log_half_n = -n * math.log(2.0)
    lgn = math.lgamma(n + 1)
    cdf = 0.0
    lo, lo_cdf = 0, 0.5**n
    for j in range(n // 2 + 1):
        cdf += math.exp(lgn - math.lgamma(j + 1) - math.lgamma(n - j + 1) + log_half_n)
        if cdf > tail:
            break
        lo, lo_cdf = j, cdf
    hi = n - 1 - lo
    coverage = 1.0 - 2.0 * lo_cdf
    return lo, hi, coverage


def ci_rel_halfwidth(samples: Sequence[float] | FloatArray, level: float = 0.95) -> float:
    """Half the width of the median's CI relative to the median (the stopping criterion)."""
    arr = np.sort(as_array(samples))
    n = len(arr)
    if n < 6:
        return math.inf
    lo, hi, _ = median_ci_ranks(n, level)
    med = float(np.median(arr))
    if med <= 0:
        return math.inf
    return (float(arr[hi]) - float(arr[lo])) / 2.0 / med


def noise_level(iqr_over_median: float) -> str:
    """'ok', 'high' (>= 0.10) or 'severe' (>= 0.25), as torch.utils.benchmark warns."""
    if iqr_over_median >= NOISE_SEVERE:
        return "severe"
    if iqr_over_median >= NOISE_WARN:
        return "high"
    return "ok"


def summarize(samples: Sequence[float] | FloatArray, level: float = 0.95) -> dict[str, Any]:
    """Every statistic the plugin reports for one benchmark's samples (seconds).

    Percentiles are always computed, but those from fewer samples than MLPerf requires are
    listed in ``low_sample_percentiles`` so that reports can flag them.
    """
    arr = as_array(samples)
    n = len(arr)
    if n == 0:
        raise ValueError("cannot summarize zero samples")
    if not np.all(np.isfinite(arr)):
        raise ValueError("samples contain NaN or infinite values")
    srt = np.sort(arr)
    mean = float(np.mean(srt))
    median = float(np.median(srt))
    stdev = float(np.std(srt, ddof=1)) if n > 1 else 0.0
    q1, q3, p90, p95, p99 = (float(v) for v in np.percentile(srt, [25, 75, 90, 95, 99]))
    iqr = q3 - q1
    lo, hi, coverage = median_ci_ranks(n, level)
    # Tukey fences: points beyond 1.5 IQR from the quartiles.
    outliers = int(np.count_nonzero((srt < q1 - 1.5 * iqr) | (srt > q3 + 1.5 * iqr)))
    iqr_rel = iqr / median if median > 0 else math.inf
    return {
        "n": n,
        "mean": mean,
        "median": median,
        "stdev": stdev,
        "min": float(srt[0]),
        "max": float(srt[-1]),
        "q1": q1,
        "q3": q3,
        "iqr": iqr,
        "p50": median,
        "p90": p90,
        "p95": p95,
        "p99": p99,
        "cv": stdev / mean if mean > 0 else math.inf,
        "ci_low": float(srt[lo]),
        "ci_high": float(srt[hi]),
        "ci_level": round(coverage, 6),
        "ci_rel_halfwidth": (float(srt[hi]) - float(srt[lo])) / 2.0 / median
        if median > 0
        else math.inf,
        "outliers": outliers,
        "noise": noise_level(iqr_rel),
        "low_sample_percentiles": sorted(
            k for k, need in PERCENTILE_MIN_SAMPLES.items() if n < need
        ),
    }


def throughput(batch_size: int | None, median_s: float) -> float | None:
    """Items per second at the median latency."""
    if not batch_size or median_s <= 0:
        return None
    return batch_size / median_s
