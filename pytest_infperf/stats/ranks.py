"""The verdict engine: is the current measurement slower than the baseline by more than the
tolerance? Pure functions, numpy only.

Latency (the default metric) is judged on log times. The ratio current/baseline is
estimated as exp(Hodges-Lehmann shift) with a one-sided Moses rank confidence bound on each
side, and the tolerance ``d`` is part of the hypothesis (a minimum-effect test: a change
must be shown past ``d``, not merely past zero; docs/COMPARING.md, "Decision"):

- ``regression``: the lower bound is above 1 + d (significantly slower by more than d);
- ``improvement``: the upper bound is below 1 / (1 + d);
- ``unchanged``: the whole interval lies within [1 / (1 + d), 1 + d];
- ``no-regression``: the upper bound is at most 1 + d (the gate's question answered), the
  lower one below 1 / (1 + d);
- ``inconclusive``: anything else.

The p-value reported is that of the one-sided Mann-Whitney test of H0 "ratio <= 1 + d",
the test that the lower bound inverts.

The rank test needs independent observations, and timing samples are not: a machine's
speed drifts over seconds, so neighbouring samples share its state. The test therefore runs
on *time units*: the medians of up to 20 contiguous blocks of samples per side
(:func:`time_units`). Drift inside a run then widens the interval (an honest
``inconclusive``) instead of shrinking it into a false ``regression``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from ..core.results import Reason, Verdict
from .descriptive import FloatArray, as_array

#: Minimum samples for a tail percentile to be judged (MLPerf's early-stopping minimums).
TAIL_MIN = {"p90": 64, "p99": 662}
#: Memory changes smaller than this are noise whatever the ratio says.
MEMORY_FLOOR_BYTES = 1 << 20
BOOTSTRAP_RESAMPLES = 2000
#: Most time units per side; fewer when there are fewer than 4 samples per unit.
MAX_UNITS = 20
MIN_UNITS = 5
_NORMAL = NormalDist()


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What a statistical test concluded about now/baseline, before any policy (drift guard,
    Holm, budgets) is applied. ``ci_low``/``ci_high`` are one-sided bounds at ``alpha`` each."""

    verdict: Verdict
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    alpha: float
    n: int
    m: int
    unit: str
    reason: Reason | None = None
    note: str | None = None
    #: Test-specific figures (samples per side, bytes, pairs).
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def ci_level(self) -> float | None:
        """Two-sided coverage of [ci_low, ci_high]."""
        return None if self.ci_low is None else 1.0 - 2.0 * self.alpha


def time_units(samples: Sequence[float] | FloatArray, max_units: int = MAX_UNITS) -> FloatArray:
    """Medians of contiguous blocks of samples, in time order: the independent-enough units
    the rank tests run on. Below 10 samples every sample is its own unit."""
    arr = as_array(samples)
    n = len(arr)
    if n < 2 * MIN_UNITS:
        return arr
    groups = min(max_units, max(MIN_UNITS, n // 4))
    return np.asarray([np.median(chunk) for chunk in np.array_split(arr, groups)])


def _normal_sf(z: float) -> float:
    """P(Z > z). Not ``NormalDist().cdf(-z)``: that computes 1 + erf(-z/sqrt 2), which loses
    every p-value below 1e-16 to rounding; erfc keeps them."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def count_le(xs: FloatArray, ys_sorted: FloatArray, t: float) -> int:
    """Number of pairs with x_i - y_j <= t."""
    m = len(ys_sorted)
    return int(np.sum(m - np.searchsorted(ys_sorted, xs - t, side="left")))


def kth_pairwise_difference(xs: FloatArray, ys_sorted: FloatArray, k: int) -> float:
    """The k-th smallest (1-based) of the n*m differences x_i - y_j, without forming them.

    Bisection on the value, counting pairs with ``searchsorted``: O((n + m) log m) per step,
    so 10,000 samples a side cost milliseconds where the full matrix would need 800 MB.
    """
    n, m = len(xs), len(ys_sorted)
    k = min(max(k, 1), n * m)
    lo = float(xs.min() - ys_sorted[-1]) - 1e-12
    hi = float(xs.max() - ys_sorted[0])
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        if count_le(xs, ys_sorted, mid) >= k:
            hi = mid
        else:
            lo = mid
    return hi


def mann_whitney_u(xs: FloatArray, ys_sorted: FloatArray) -> float:
    """U = #{x_i > y_j} + 0.5 #{x_i == y_j}."""
    below = np.searchsorted(ys_sorted, xs, side="left")
    below_or_eq = np.searchsorted(ys_sorted, xs, side="right")
    return float(np.sum(below) + 0.5 * np.sum(below_or_eq - below))


def _sigma_u(n: int, m: int) -> float:
    return math.sqrt(n * m * (n + m + 1) / 12.0)


def moses_rank(n: int, m: int, alpha: float) -> int:
    """1-based rank k of the pairwise difference that is a one-sided (1 - alpha) lower
    confidence bound of the shift; the upper bound is the (n*m + 1 - k)-th. 0 when no
    difference is such a bound: so few samples cannot give that confidence (2 and 2: even
    the smallest of the four differences lies above the true shift with chance 1/6, so a
    "95%" bound there would hold 83% of the time, so none is claimed)."""
    z = _NORMAL.inv_cdf(1.0 - alpha)
    k = math.floor(n * m / 2.0 - z * _sigma_u(n, m) + 0.5)
    return max(k, 0)


def shift_estimate(x: FloatArray, y: FloatArray, alpha: float) -> tuple[float, float, float]:
    """Hodges-Lehmann shift of x relative to y with one-sided (1-alpha) Moses bounds."""
    ys = np.sort(y)
    n, m = len(x), len(ys)
    total = n * m
    if total % 2:
        hl = kth_pairwise_difference(x, ys, total // 2 + 1)
    else:
        hl = 0.5 * (
            kth_pairwise_difference(x, ys, total // 2)
            + kth_pairwise_difference(x, ys, total // 2 + 1)
        )
    k = moses_rank(n, m, alpha)
    if k < 1 or k > total:  # too few samples for the confidence asked (or absurd alpha)
        return hl, -math.inf, math.inf
    low = kth_pairwise_difference(x, ys, k)
    high = kth_pairwise_difference(x, ys, total + 1 - k)
    return hl, low, high


def min_effect_p_value(x: FloatArray, y: FloatArray, delta: float) -> float:
    """One-sided Mann-Whitney p of H0: shift <= delta against H1: shift > delta
    (normal approximation with continuity correction)."""
    ys = np.sort(y)
    n, m = len(x), len(ys)
    u = mann_whitney_u(x - delta, ys)
    z = (u - n * m / 2.0 - 0.5) / _sigma_u(n, m)
    return _normal_sf(z)


def classify(
    low: float, high: float, threshold: float, slower: float = 1.0, faster: float = 1.0
) -> Verdict:
    """Verdict from a ratio interval [low, high] and the tolerance d.

    ``slower``/``faster`` (>= 1) say how much slower/faster the machine itself ran than at
    the baseline (the drift guard's probes). The code's own ratio is then only known to lie
    in [low / slower, high * faster]: a slowdown the machine explains is not blamed on the
    code, and "unchanged" is not claimed where drift could hide a change.
    """
    low, high = low / slower, high * faster
    if low > 1.0 + threshold:
        return Verdict.REGRESSION
    if high < 1.0 / (1.0 + threshold):
        return Verdict.IMPROVEMENT
    if high <= 1.0 + threshold:
        # The gate's question is answered either way; "unchanged" also rules out a
        # speed-up past the tolerance.
        if low >= 1.0 / (1.0 + threshold):
            return Verdict.UNCHANGED
        return Verdict.NO_REGRESSION
    return Verdict.INCONCLUSIVE


def _undecided(
    reason: Reason,
    note: str,
    alpha: float,
    n: int,
    m: int,
    unit: str,
    ratio: float | None = None,
    details: dict[str, Any] | None = None,
) -> Estimate:
    """An inconclusive estimate without an interval: the data cannot support a bound."""
    return Estimate(
        Verdict.INCONCLUSIVE,
        ratio,
        None,
        None,
        None,
        alpha,
        n,
        m,
        unit,
        reason,
        note,
        details or {},
    )


def _interval(
    ratio: float, low: float, high: float, p: float, threshold: float, alpha: float, **kw: Any
) -> Estimate:
    verdict = classify(low, high, threshold)
    reason = Reason.INTERVAL_WIDE if verdict is Verdict.INCONCLUSIVE else None
    return Estimate(verdict, ratio, low, high, p, alpha, reason=reason, **kw)


def compare_latency(
    current: Sequence[float] | FloatArray,
    baseline: Sequence[float] | FloatArray,
    threshold: float = 0.05,
    alpha: float = 0.05,
) -> Estimate:
    """The min-effect decision on two sets of latency samples (seconds, in time order)."""
    x = np.log(time_units(current))
    y = np.log(time_units(baseline))
    n, m = len(x), len(y)
    samples = {"samples": [len(current), len(baseline)]}
    if n < 2 or m < 2:
        return _undecided(
            Reason.TOO_FEW,
            "fewer than 2 samples on a side",
            alpha,
            n,
            m,
            "time units",
            details=samples,
        )
    hl, low, high = shift_estimate(x, y, alpha)
    if not math.isfinite(low):
        return _undecided(
            Reason.TOO_FEW,
            f"{n} and {m} time units cannot bound the ratio at {1 - alpha:.1%} one-sided "
            "confidence: more samples (rounds, max_time) would",
            alpha,
            n,
            m,
            "time units",
            ratio=math.exp(hl),
            details=samples,
        )
    p = min_effect_p_value(x, y, math.log1p(threshold))
    est = _interval(
        math.exp(hl),
        math.exp(low),
        math.exp(high),
        p,
        threshold,
        alpha,
        n=n,
        m=m,
        unit="time units",
        details=samples,
    )
    if est.verdict is Verdict.IMPROVEMENT:
        # The claim's own p ("faster by at most d"), which the run's family holds it to.
        est.details["p_faster"] = min_effect_p_value(y, x, math.log1p(threshold))
    return est


def _block_resample_quantiles(
    arr: FloatArray, q: float, resamples: int, rng: np.random.Generator
) -> FloatArray:
    """Quantile ``q`` of ``resamples`` block-bootstrap resamples: whole contiguous blocks
    are drawn, so the resamples keep the samples' dependence on machine state."""
    n = len(arr)
    groups = min(MAX_UNITS, max(MIN_UNITS, n // 4)) if n >= 2 * MIN_UNITS else n
    blocks = np.array_split(arr, groups)
    picks = rng.integers(0, groups, size=(resamples, groups))
    out = np.empty(resamples)
    for i, row in enumerate(picks):
        out[i] = np.quantile(np.concatenate([blocks[j] for j in row]), q)
    return out


def _quantile_bootstrap(
    x: FloatArray, y: FloatArray, q: float, resamples: int, seed: int
) -> FloatArray:
    rng = np.random.default_rng(seed)
    qx = _block_resample_quantiles(x, q, resamples, rng)
    qy = _block_resample_quantiles(y, q, resamples, rng)
    return np.asarray(np.log(qx) - np.log(qy), dtype=np.float64)


def compare_tail(
    current: Sequence[float] | FloatArray,
    baseline: Sequence[float] | FloatArray,
    metric: str,
    threshold: float = 0.05,
    alpha: float = 0.05,
    seed: int = 0,
) -> Estimate:
    """Ratio of a tail percentile (p90/p99) with a percentile-bootstrap interval.

    Rank shift tests say nothing about tails, so tails get their own test: resample each
    side, take the percentile, and use the bootstrap distribution of the log-ratio. With
    fewer samples than the percentile needs, the verdict is ``inconclusive``.
    """
    x, y = as_array(current), as_array(baseline)
    n, m = len(x), len(y)
    q = {"p90": 0.90, "p99": 0.99}[metric]
    need = TAIL_MIN[metric]
    point = float(np.quantile(x, q) / np.quantile(y, q)) if n and m else None
    if n < need or m < need or point is None:
        return _undecided(
            Reason.TOO_FEW,
            f"{metric} needs >= {need} samples on each side",
            alpha,
            n,
            m,
            "samples",
            ratio=point,
        )
    boot = _quantile_bootstrap(x, y, q, BOOTSTRAP_RESAMPLES, seed)
    low = math.exp(float(np.quantile(boot, alpha)))
    high = math.exp(float(np.quantile(boot, 1.0 - alpha)))
    p = float((np.count_nonzero(boot <= math.log1p(threshold)) + 1) / (len(boot) + 1))
    return _interval(point, low, high, p, threshold, alpha, n=n, m=m, unit="samples")


def compare_throughput(
    current: Sequence[float] | FloatArray,
    baseline: Sequence[float] | FloatArray,
    batch_current: int,
    batch_baseline: int,
    threshold: float = 0.05,
    alpha: float = 0.05,
) -> Estimate:
    """Items/s, higher is better. Judged as the latency rule on batch/latency per sample, so
    a regression is a throughput ratio whose upper bound is below 1 / (1 + d)."""
    lat = compare_latency(
        np.asarray(current) / batch_current,
        np.asarray(baseline) / batch_baseline,
        threshold,
        alpha,
    )
    if lat.ratio is None or lat.ci_low is None or lat.ci_high is None:
        return lat
    # Slower per item is lower throughput: the verdicts coincide, the ratio inverts.
    return dataclasses.replace(
        lat, ratio=1.0 / lat.ratio, ci_low=1.0 / lat.ci_high, ci_high=1.0 / lat.ci_low
    )


def compare_memory(
    current_bytes: float | None,
    baseline_bytes: float | None,
    threshold: float = 0.05,
    alpha: float = 0.05,
) -> Estimate:
    """Peak memory: a single number per run, so a plain ratio against the tolerance, ignoring
    differences under 1 MiB. A baseline of 0 bytes has no ratio: growth past the floor from
    nothing is a regression whatever the tolerance."""
    details = {"current_bytes": current_bytes, "baseline_bytes": baseline_bytes}
    if current_bytes is None or baseline_bytes is None:
        return _undecided(
            Reason.NO_FIGURE, "no memory figure on one side", alpha, 1, 1, "runs", details=details
        )
    diff = current_bytes - baseline_bytes
    ratio = current_bytes / baseline_bytes if baseline_bytes > 0 else None
    if abs(diff) < MEMORY_FLOOR_BYTES:
        verdict = Verdict.UNCHANGED
    elif ratio is None or ratio > 1.0 + threshold:
        verdict = Verdict.REGRESSION if diff > 0 else Verdict.IMPROVEMENT
    elif ratio < 1.0 / (1.0 + threshold):
        verdict = Verdict.IMPROVEMENT
    else:
        verdict = Verdict.UNCHANGED
    return Estimate(verdict, ratio, ratio, ratio, None, alpha, 1, 1, "runs", details=details)
