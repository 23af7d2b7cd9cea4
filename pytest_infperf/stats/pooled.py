"""Interleaved comparisons replicated across processes. Pure functions (numpy; scipy for t).

Where the variance lives (docs/COMPARING.md, "Interleaved verdicts"): two processes running the
same code can differ by a stable few percent for their whole life (memory layout, hash
seed, what ran in them before), and the pairs of one head/base process pair all share that
offset. An interval built from one process pair's blocks alone leaves it out; more blocks
cannot fix it, more process pairs can. So:

- within a process pair, blocks alternate A B B A and each group of four gives one **quad
  contrast** ``(log b1 + log b2 - log a1 - log a2) / 2``: a linear drift over the four
  blocks and the penalty of switching processes (paid by b1 and a2, the blocks that follow
  a switch) cancel exactly;
- a process pair is summarised by the 20%-trimmed mean of its quads and a standard error
  that is honest about autocorrelation (batch means when the lag-1 autocorrelation is
  high: a speed state lasting seconds spans several quads);
- process pairs are pooled by a **random-effects** model: each pair's mean is the true
  log-ratio plus a between-process offset (sd ``tau``) plus its own sampling error. ``tau``
  is estimated from the pairs (DerSimonian-Laird) but never below a floor, because one or
  two pairs cannot show it; the pooled standard error is also never below the
  Hartung-Knapp one (the spread of the pair means themselves).
- a **regression claim** is also held to a moderated Hartung-Knapp bound: the spread of
  the pair means, shrunk towards the floor-based variance as if the floor were
  ``prior_df`` pairs' worth of evidence, at Student's t with ``prior_df + k - 1`` degrees
  of freedom (the empirical-Bayes "moderated t"). Two or three pairs that happen to agree
  show a spread near zero; the floor alone then let a noisy metric's chance agreement
  through: on real generations (prompt 256) the time to first token varied between
  process pairs by an sd of 3-9%, and two pairs at +9% cleared the 2% floor's bound
  (docs/MEASURED.md, "Claims and the spread of the pairs";
  benchmarks/sequential_design.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

_NORMAL = NormalDist()
#: Share trimmed from each end of a pair's quads (a quad hit by a burst of a neighbour's
#: work is an outlier; the trimmed mean keeps most of the mean's efficiency).
TRIM = 0.2
#: Lag-1 autocorrelation of quads above which their standard error comes from batch means.
AUTOCORR_LIMIT = 0.2
#: Batches of batch means (the standard error then has BATCHES - 1 degrees of freedom).
BATCHES = 6


@dataclasses.dataclass(frozen=True)
class PairSummary:
    """One process pair: the trimmed mean of its quad contrasts (a log-ratio head/base),
    its standard error, how many quads, their lag-1 autocorrelation, and whether the
    standard error came from batch means."""

    mean: float
    se: float
    n: int
    lag1: float
    batched: bool

    def to_json(self) -> dict[str, float | int | bool]:
        return {
            "log_ratio": round(self.mean, 6),
            "se": round(self.se, 6),
            "quads": self.n,
            "lag1": round(self.lag1, 3),
            "batch_means": self.batched,
        }


@dataclasses.dataclass(frozen=True)
class Pooled:
    """Process pairs pooled: the log-ratio estimate, its standard error, the
    between-process sd used (``tau``, floor included) and the one the data alone gave."""

    estimate: float
    se: float
    tau: float
    tau_data: float
    k: int
    #: The random-effects standard error with the floor (before the Hartung-Knapp
    #: maximum) and the Hartung-Knapp one alone (the spread of the pair means; 0 for one
    #: pair), for the claim bound.
    se_re: float = 0.0
    se_hk: float = 0.0

    def upper(self, alpha: float) -> float:
        """One-sided (1 - alpha) upper bound of the log-ratio."""
        return self.estimate + _NORMAL.inv_cdf(1.0 - alpha) * self.se

    def lower(self, alpha: float) -> float:
        """One-sided (1 - alpha) lower bound of the log-ratio."""
        return self.estimate - _NORMAL.inv_cdf(1.0 - alpha) * self.se

    def _moderated(self, prior_df: float) -> tuple[float, float]:
        """The moderated standard error and its degrees of freedom (module docstring)."""
        df = prior_df + self.k - 1
        var = (prior_df * self.se_re**2 + (self.k - 1) * self.se_hk**2) / df
        return math.sqrt(var), df

    def lower_claim(self, alpha: float, prior_df: float) -> float:
        """The one-sided (1 - alpha) lower bound a regression claim is held to: the lower of
        :meth:`lower` and the moderated bound. One pair, or ``prior_df`` infinite (the floor
        taken as certain): :meth:`lower` alone; ``prior_df`` 0:
        the Hartung-Knapp-Sidik-Jonkman bound (t with k - 1 degrees of freedom)."""
        low = self.lower(alpha)
        if self.k < 2 or math.isinf(prior_df):
            return low
        se, df = self._moderated(prior_df)
        from scipy.special import stdtrit  # noqa: PLC0415 (only once pairs are pooled)

        return min(low, self.estimate - float(stdtrit(df, 1.0 - alpha)) * se)

    def p_claim(self, log_limit: float, prior_df: float) -> float:
        """One-sided p of H0 "log-ratio <= log_limit" that a claim is held to: the larger of
        :meth:`p_above` and the moderated t's (``prior_df`` as in :meth:`lower_claim`)."""
        p = self.p_above(log_limit)
        if self.k < 2 or math.isinf(prior_df):
            return p
        se, df = self._moderated(prior_df)
        if se <= 0:
            return p
        from scipy.special import stdtr  # noqa: PLC0415

        return max(p, float(stdtr(df, -(self.estimate - log_limit) / se)))

    def p_above(self, log_limit: float) -> float:
        """One-sided p of H0 "log-ratio <= log_limit" (small: the data say it is above)."""
        if self.se <= 0:
            return 0.0 if self.estimate > log_limit else 1.0
        # erfc, not 1 - cdf: the latter rounds every p below 1e-16 to 0.
        return 0.5 * math.erfc((self.estimate - log_limit) / self.se / math.sqrt(2.0))


def quad_contrasts(
    a1: Sequence[float], b1: Sequence[float], b2: Sequence[float], a2: Sequence[float]
) -> list[float]:
    """Quad contrasts from the log block figures of ABBA quads (one value per quad)."""
    return [(y1 + y2 - x1 - x2) / 2.0 for x1, y1, y2, x2 in zip(a1, b1, b2, a2, strict=True)]


def switch_penalties(
    a1: Sequence[float], b1: Sequence[float], b2: Sequence[float], a2: Sequence[float]
) -> list[float]:
    """The log cost of running right after the other process, per quad. b1 and a2 follow a
    switch, a1 and b2 do not; with an intercept, a linear drift, the head's effect and the
    penalty, four blocks fit exactly, and the penalty is ``((a2 - a1) + 3 (b1 - b2)) / 4``.
    Recorded, never judged: the quad contrast cancels it."""
    return [
        ((x2 - x1) + 3.0 * (y1 - y2)) / 4.0 for x1, y1, y2, x2 in zip(a1, b1, b2, a2, strict=True)
    ]


def _trimmed(values: np.ndarray, trim: float) -> tuple[float, float]:
    """Trimmed mean and Yuen's standard error (winsorized sd / ((1 - 2g) sqrt n))."""
    n = len(values)
    g = math.floor(trim * n)
    ordered = np.sort(values)
    mean = float(np.mean(ordered[g : n - g])) if n - 2 * g > 0 else float(np.median(ordered))
    if n < 2:
        return mean, math.inf
    wins = np.clip(values, ordered[g], ordered[n - 1 - g])
    sd = float(np.std(wins, ddof=1))
    return mean, sd / ((1.0 - 2.0 * g / n) * math.sqrt(n))


def lag1_autocorrelation(values: Sequence[float]) -> float:
    """Lag-1 autocorrelation (0 when fewer than 4 values or no spread)."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) < 4:
        return 0.0
    d = x - x.mean()
    denom = float(np.dot(d, d))
    return 0.0 if denom <= 0 else float(np.dot(d[:-1], d[1:]) / denom)


def summarize_pair(quads: Sequence[float]) -> PairSummary:
    """A process pair's quads, summarised (see the module docstring)."""
    x = np.asarray(quads, dtype=np.float64)
    n = len(x)
    if n == 0:
        return PairSummary(0.0, math.inf, 0, 0.0, False)
    mean, se = _trimmed(x, TRIM)
    r1 = lag1_autocorrelation(x.tolist())
    batched = False
    if n >= 2 * BATCHES and r1 > AUTOCORR_LIMIT:
        # Batch means: contiguous batches are nearly independent when the dependence is
        # shorter than a batch; their spread gives an honest standard error of the mean.
        size = n // BATCHES
        batches = x[n - size * BATCHES :].reshape(BATCHES, size).mean(axis=1)
        se_batch = float(np.std(batches, ddof=1)) / math.sqrt(BATCHES)
        if se_batch > se:
            se, batched = se_batch, True
    return PairSummary(mean, se, n, r1, batched)


def summarize_samples(head: Sequence[float], base: Sequence[float]) -> PairSummary:
    """A process pair measured by one sample set per side instead of quads (the profiled
    pass's device time of each call): the difference of the sides' mean log values and its
    standard error (Welch: the estimate the error is of). Its ``n`` is the smaller side's
    count; infinite error where a side has fewer than two positive values."""
    h = np.log(np.asarray([v for v in head if v > 0], dtype=np.float64))
    b = np.log(np.asarray([v for v in base if v > 0], dtype=np.float64))
    n = int(min(len(h), len(b)))
    if n < 2:
        return PairSummary(0.0, math.inf, n, 0.0, False)
    mean = float(np.mean(h) - np.mean(b))
    se = math.sqrt(float(np.var(h, ddof=1)) / len(h) + float(np.var(b, ddof=1)) / len(b))
    return PairSummary(mean, se, n, 0.0, False)


def pool(pairs: Sequence[PairSummary], tau_floor: float) -> Pooled:
    """Random-effects pool of process pairs (see the module docstring). A pair with no
    finite standard error (one quad) carries no weight and is left out."""
    pairs = [p for p in pairs if math.isfinite(p.se)]
    k = len(pairs)
    if k == 0:
        return Pooled(0.0, math.inf, tau_floor, 0.0, 0)
    m = np.asarray([p.mean for p in pairs])
    v = np.asarray([max(p.se, 1e-12) ** 2 for p in pairs])
    tau2_data = 0.0
    if k >= 2:
        w = 1.0 / v
        fixed = float(np.sum(w * m) / np.sum(w))
        q = float(np.sum(w * (m - fixed) ** 2))
        c = float(np.sum(w) - np.sum(w**2) / np.sum(w))
        tau2_data = max(0.0, (q - (k - 1)) / c) if c > 0 else 0.0
    tau2 = max(tau_floor**2, tau2_data)
    w_star = 1.0 / (v + tau2)
    estimate = float(np.sum(w_star * m) / np.sum(w_star))
    se = se_re = math.sqrt(1.0 / float(np.sum(w_star)))
    se_hk = 0.0
    if k >= 2:
        # Hartung-Knapp: the spread of the pair means themselves, so two pairs that
        # disagree widen the interval even when their own errors look small.
        se_hk = math.sqrt(float(np.sum(w_star * (m - estimate) ** 2) / ((k - 1) * np.sum(w_star))))
        se = max(se, se_hk)
    return Pooled(estimate, se, math.sqrt(tau2), math.sqrt(tau2_data), k, se_re, se_hk)


def detectable_effect(
    se: float, threshold: float, alpha: float, power: float = 0.8, margin: float | None = None
) -> float:
    """The smallest true slowdown (a fraction, e.g. 0.09 for +9%) that a comparison with
    this standard error of the log-ratio flags as a regression with ``power``: its
    one-sided (1 - alpha) lower bound must clear 1 + threshold. ``margin``: the distance
    from the estimate to that bound where it is not z x se (a claim's moderated t)."""
    if not math.isfinite(se) or (margin is not None and not math.isfinite(margin)):
        return math.inf
    reach = _NORMAL.inv_cdf(1.0 - alpha) * se if margin is None else margin
    return math.exp(math.log1p(threshold) + reach + _NORMAL.inv_cdf(power) * se) - 1.0


def detectable_within(low: float, high: float, alpha: float, threshold: float) -> float | None:
    """:func:`detectable_effect` of a ratio interval (:func:`se_from_interval`); None where
    it is not finite."""
    value = detectable_effect(se_from_interval(low, high, alpha), threshold, alpha)
    return value if math.isfinite(value) else None


def se_from_interval(low: float, high: float, alpha: float) -> float:
    """The standard error of the log-ratio implied by a ratio interval whose bounds are
    each one-sided at ``alpha`` (for the stored test, whose interval is a rank interval)."""
    if low <= 0 or high <= 0:
        return math.inf
    return (math.log(high) - math.log(low)) / (2.0 * _NORMAL.inv_cdf(1.0 - alpha))
