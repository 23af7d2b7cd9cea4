"""Interleaved comparisons replicated across processes. Pure functions (numpy; scipy for t).

Where the variance lives (docs/COMPARING.md, "Interleaved verdicts"): two processes running the
same code can differ by a stable few percent for their whole life (memory layout, hash
seed, what ran in them before), and the pairs of one head/base process pair all share that
offset. An interval built from one process pair's blocks alone leaves it out; more blocks
cannot fix it, more process pairs can. So:

- within a process pair, blocks alternate A B B A (B A A B where the head leads) and each
  group of four gives one **quad contrast** ``(log b1 + log b2 - log a1 - log a2) / 2``: a
  linear drift over the four blocks and the penalty of switching processes (paid by the
  second and fourth blocks, which follow a switch) cancel exactly;
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
    #: The pair means' own variance (unweighted, k - 1 degrees of freedom): what
    #: :class:`SuiteSpread` learns from. Comparisons whose pairs agree stop earlier, so
    #: it understates a little; the variance of only the first two pairs (taken whatever
    #: the second reads) is unbiased but, with one degree of freedom each, too noisy to
    #: tell a suite of alike models from unlike ones.
    s2: float = 0.0

    def upper(self, alpha: float) -> float:
        """One-sided (1 - alpha) upper bound of the log-ratio."""
        return self.estimate + _NORMAL.inv_cdf(1.0 - alpha) * self.se

    def lower(self, alpha: float) -> float:
        """One-sided (1 - alpha) lower bound of the log-ratio."""
        return self.estimate - _NORMAL.inv_cdf(1.0 - alpha) * self.se

    def _moderated(self, prior: float | Spread) -> tuple[float, float] | None:
        """The moderated standard error and its degrees of freedom (module docstring), or
        None where there is none: one pair and no suite's spread, or the floor taken as
        certain. ``prior``: how many pairs' worth the floor-based variance counts as, or
        the suite's spread (:class:`SuiteSpread`), which counts from the first pair."""
        if isinstance(prior, Spread):
            if self.k < 1:  # no pair with a finite error: nothing to bound
                return None
            df = prior.df + self.k - 1
            if df <= 0:  # an unmeasured spread and one pair: no bound at all
                return math.inf, 1.0
            var = (prior.df * prior.var / self.k + (self.k - 1) * self.se_hk**2) / df
        else:
            if self.k < 2 or math.isinf(prior):
                return None
            df = prior + self.k - 1
            var = (prior * self.se_re**2 + (self.k - 1) * self.se_hk**2) / df
        return (math.sqrt(var), df) if var > 0 else None

    def lower_claim(self, alpha: float, prior: float | Spread) -> float:
        """The one-sided (1 - alpha) lower bound a regression claim is held to: the lower of
        :meth:`lower` and the moderated bound. One pair, or ``prior`` infinite (the floor
        taken as certain): :meth:`lower` alone; ``prior`` 0:
        the Hartung-Knapp-Sidik-Jonkman bound (t with k - 1 degrees of freedom)."""
        low = self.lower(alpha)
        if (moderated := self._moderated(prior)) is None:
            return low
        from scipy.special import stdtrit  # noqa: PLC0415 (only once pairs are pooled)

        se, df = moderated
        return min(low, self.estimate - float(stdtrit(df, 1.0 - alpha)) * se)

    def upper_claim(self, alpha: float, prior: float | Spread) -> float:
        """The one-sided (1 - alpha) upper bound a pass is held to: the higher of
        :meth:`upper` and the moderated bound of the suite's spread. Only a suite's spread
        widens it: where the pairs vary more than the floor says, a pass at the floor's
        bound let a true slowdown of the threshold through 15-27% of the time
        (``benchmarks/suite_power.py``)."""
        high = self.upper(alpha)
        if not isinstance(prior, Spread) or (moderated := self._moderated(prior)) is None:
            return high
        from scipy.special import stdtrit  # noqa: PLC0415

        se, df = moderated
        return max(high, self.estimate + float(stdtrit(df, 1.0 - alpha)) * se)

    def p_claim(self, log_limit: float, prior: float | Spread) -> float:
        """One-sided p of H0 "log-ratio <= log_limit" that a claim is held to: the larger of
        :meth:`p_above` and the moderated t's (``prior`` as in :meth:`lower_claim`)."""
        p = self.p_above(log_limit)
        if (moderated := self._moderated(prior)) is None:
            return p
        from scipy.special import stdtr  # noqa: PLC0415

        se, df = moderated
        return max(p, float(stdtr(df, -(self.estimate - log_limit) / se)))

    def fits(self, prior: Spread) -> bool:
        """Whether these pairs vary as the suite's spread says they may: their variance is
        not past the F test's 95% point against it. A benchmark noisier than its suite
        (a model on several threads among single-threaded ones) is then judged on its own
        pairs' spread, not lent the suite's degrees of freedom (:mod:`..judge.plan`)."""
        if self.k < 2 or self.s2 <= 0:
            return True
        if prior.df <= 0 or prior.var <= 0:  # nothing measured to fit: its own spread
            return False
        from scipy.special import fdtrc  # noqa: PLC0415

        return float(fdtrc(self.k - 1, prior.df, self.s2 / prior.var)) >= SUITE_FIT_P

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
    s2 = float(np.var(m, ddof=1)) if k >= 2 else 0.0
    return Pooled(estimate, se, math.sqrt(tau2), math.sqrt(tau2_data), k, se_re, se_hk, s2)


@dataclasses.dataclass(frozen=True)
class Spread:
    """What a suite's comparisons say a pair's log-ratio varies by about its comparison's
    mean: the prior variance ``var`` (between processes and a pair's own error together)
    and its degrees of freedom ``df`` (1 to :data:`SUITE_MAX_DF`: how alike they vary)."""

    var: float
    df: float


#: Comparisons of two pairs or more before the suite's spread is used. Few: the
#: comparisons before it keep the floor, which passes a true +5% far more often than 5%
#: where the spread is past it (docs/MEASURED.md, "A suite's size", the "alone" rows);
#: the bound on how much they differ keeps a prior from four comparisons weak.
SUITE_MIN = 4
#: The prior's degrees of freedom at most (Student's t is then within 2.5% of the normal's
#: at the run-level guard's far tail).
SUITE_MAX_DF = 200.0
#: The comparisons' variances are taken to differ by as much as a one-sided 95% bound on
#: what they showed beyond chance, not by the estimate: with a few dozen comparisons the
#: estimate often says "alike" of a suite that is not, and the run-level guard's far tail
#: then trusted a prior that understated its noisier benchmarks (on the estimate, 200
#: simulated benchmarks whose spreads differed by a log-sd of 0.6 failed identical code
#: in 6-7 runs in 100).
SUITE_EXCESS_Z = 1.645
#: Below this p of the F test, a comparison's pairs vary more than its suite's spread
#: allows, and its claims are held to its own spread (:meth:`Pooled.fits`).
SUITE_FIT_P = 0.05


class SuiteSpread:
    """How much a pair's log-ratio varies about its comparison's mean, learned from the
    comparisons a session has judged so far: the empirical-Bayes prior of a moderated t
    (Smyth's, as in limma). A suite's benchmarks share the worker processes and the
    machine, so one comparison's 2-12 pairs (1-11 degrees of freedom) say little that the
    suite's hundreds do not; but a suite also mixes quiet models with noisy ones, so the
    prior's degrees of freedom are estimated from how much the comparisons' variances
    differ beyond chance: alike, the prior counts as many pairs; unlike, as few, and each
    comparison's own spread decides. Each variance is about its own comparison's mean, so
    a true change in one benchmark adds nothing.

    One prior for the suite, not one per test function: a sweep's cells learned apart
    give each a prior from a few comparisons, weaker where they vary alike and no safer
    where they do not."""

    def __init__(self) -> None:
        self._seen: dict[str, list[tuple[float, int]]] = {}

    def add(self, metric: str, pooled: Pooled) -> None:
        """One finished comparison's pairs of ``metric`` (one pair tells nothing)."""
        if pooled.k >= 2 and pooled.s2 > 0 and math.isfinite(pooled.s2):
            self._seen.setdefault(metric, []).append((pooled.s2, pooled.k - 1))

    def of(self, metric: str) -> Spread | None:
        """The prior for ``metric`` (None until :data:`SUITE_MIN` comparisons)."""
        seen = self._seen.get(metric, [])
        if len(seen) < SUITE_MIN:
            return None
        return fit_spread([v for v, _ in seen], [d for _, d in seen])


#: A spread nothing on this runner has measured yet: a bound on it rests on the
#: comparison's own pairs alone (Student's t with k - 1 degrees of freedom; none from one).
UNMEASURED = Spread(0.0, 0.0)


class RunnerSpread:
    """How far a latency moves between two processes on this runner, from the run's own
    evidence, never from another machine's floor. On a GPU runner the device's time of
    identical code agreed within 0.5% between processes where the host's latency moved by
    tens of percent (docs/MEASURED.md, "A GPU runner's host"), so a latency there is held to
    what this run saw:

    - **stored draws**: a stored pass is one process pair (the baseline's run against this
      one): the session-start reference's Python loop, and the latency of every benchmark
      whose device time and exact work counts are the same on both sides (the run's own
      identical code), each a log-ratio of that pair, about no change (one degree of
      freedom each). They share the two processes, and with them whatever shift a process
      gives all its models: their mean square holds that shift, which is what the other
      stored passes of the same two processes are judged in;
    - **pairs**: an interleaved comparison's process pairs, their spread about its mean
      (``k - 1`` degrees of freedom each).

    A stored pass is judged in all of it (:meth:`of`: its own pair's shift is in the
    draws); an interleaved comparison's process pairs, new processes each, in the pairs'
    alone (:meth:`of_pairs`: two processes that happened to agree say little of the next
    two). Either is the prior of a moderated t (:class:`Spread`), their pooled variance;
    before any evidence, :data:`UNMEASURED`."""

    def __init__(self) -> None:
        self._draws: list[float] = []
        self._pairs: list[tuple[float, int]] = []

    def draw(self, log_ratio: float) -> None:
        """One stored pair's log-ratio of a latency that did the same work on both sides."""
        if math.isfinite(log_ratio):
            self._draws.append(log_ratio)

    def pairs(self, pooled: Pooled) -> None:
        """One interleaved comparison's process pairs (one pair tells nothing)."""
        if pooled.k >= 2 and math.isfinite(pooled.s2):
            self._pairs.append((pooled.s2, pooled.k - 1))

    def of(self) -> Spread:
        """The spread this run measured so far, stored draws and pairs (:data:`UNMEASURED`
        before any)."""
        return _pooled_spread([(r * r, 1) for r in self._draws] + self._pairs)

    def of_pairs(self) -> Spread:
        """The spread the run's interleaved process pairs showed (:data:`UNMEASURED` before
        any comparison of two pairs)."""
        return _pooled_spread(self._pairs)


def _pooled_spread(parts: Sequence[tuple[float, int]]) -> Spread:
    """Variances with their degrees of freedom, pooled."""
    df = float(sum(d for _, d in parts))
    squares = sum(v * d for v, d in parts)
    if df <= 0 or squares <= 0:
        return UNMEASURED
    return Spread(squares / df, min(df, SUITE_MAX_DF))


def fit_spread(variances: Sequence[float], dfs: Sequence[int]) -> Spread | None:
    """The scaled inverse-chi-square prior of ``variances`` (each with its ``dfs``), by the
    moments of their logs (Smyth 2004): their spread beyond what their own degrees of
    freedom explain is the prior's. None where the figures are not finite."""
    from scipy.special import digamma, polygamma  # noqa: PLC0415 (once pairs are pooled)

    d = np.asarray(dfs, dtype=np.float64)
    v = np.asarray(variances, dtype=np.float64)
    if len(v) < 2 or not np.all(np.isfinite(v) & (v > 0)) or not np.all(d >= 1):
        return None
    z = np.log(v) - digamma(d / 2) + np.log(d / 2)
    mean = float(np.mean(z))
    dev = z - mean
    var_z = float(np.sum(dev**2) / (len(z) - 1))
    # The sample variance's standard error from the logs' own fourth moment: a log
    # chi-square is heavy-tailed (excess kurtosis 4 at one degree of freedom), so the
    # normal's sqrt(2 / (n - 1)) understated it and the bound often said "alike".
    # Never below what alike variances would show (their logs' own cumulants), so that a
    # few comparisons whose sample kurtosis happens to be low still get a bound.
    chance = float(np.mean(polygamma(1, d / 2)))  # the logs' variance if alike
    floor = float(np.mean(polygamma(3, d / 2))) + 2 * chance**2
    se_var = math.sqrt(max(float(np.mean(dev**4)) - var_z**2, floor) / len(z))
    excess = var_z - chance + SUITE_EXCESS_Z * se_var
    # A prior counts as no more pairs than it rests on, and as one at least (fewer gives
    # a t whose bounds run off to infinity).
    cap = min(SUITE_MAX_DF, float(np.sum(d)))
    df = cap if excess <= 1e-12 else min(2.0 * _trigamma_inverse(excess), cap)
    if not math.isfinite(df):
        return None
    df = max(df, 1.0)
    var = math.exp(mean + float(digamma(df / 2)) - math.log(df / 2))
    return Spread(var, df) if math.isfinite(var) and var > 0 else None


def _trigamma_inverse(x: float) -> float:
    """The y with trigamma(y) = x (Newton's method from Smyth's start)."""
    from scipy.special import polygamma  # noqa: PLC0415

    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = float(polygamma(1, y))
        step = tri * (1.0 - tri / x) / float(polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


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
    exponent = math.log1p(threshold) + reach + _NORMAL.inv_cdf(power) * se
    # Past x 1e20 nothing is detectable; a t with one degree of freedom can ask that much.
    return math.exp(exponent) - 1.0 if exponent < 46.0 else math.inf


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
