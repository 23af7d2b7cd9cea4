"""The interleaved protocol's sequential rule: how many quads a process pair takes, how
many process pairs a comparison takes, how alpha is spent over the looks, and when to
stop. :mod:`pytest_infperf.ab.interleave` measures and asks; every decision of the
protocol is made here (docs/COMPARING.md, "Interleaved verdicts").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any, Literal

from ..core import family as _family
from ..core.results import Verdict
from ..measure import cpuwait as _cpuwait
from ..stats import pooled as _pool
from ..stats import sequential as _seq

_NORMAL = NormalDist()

#: The largest share of a side's GPU blocks that may be set aside (throttled, or beside
#: another process on the GPU) before an interleaved verdict is withheld: past it, what is
#: left measures a GPU that was rarely in its usual state.
GPU_SHARE_LIMIT = 0.25
#: GPU blocks seen before that share is trusted enough to stop a pair early (4 quads).
GPU_MIN_BLOCKS = 16
#: Metrics a process pair measures by the profiled pass of each side instead of by quads
#: (:func:`~pytest_infperf.stats.pooled.summarize_samples`): the device's busy time.
PROFILED = ("gpu_time",)
#: The largest share of a block's wall time the process's other threads may spend on the
#: CPU for its samples to be judged net of their run-queue wait. Past it the benchmark runs
#: threads of its own (torch or ORT intra-op threads), which may be what kept its timing
#: thread waiting: waits it causes itself are its speed, so its wall time is judged.
OTHER_CPU_LIMIT = 0.05


@dataclasses.dataclass(frozen=True)
class Design:
    """The interleaved protocol's constants: how many process pairs, how many quads each,
    and how alpha is spent over the looks (docs/COMPARING.md, "Interleaved verdicts")."""

    #: Process pairs at most: the first is this process and the base worker, the others
    #: pairs of worker processes started for it (the session keeps seven for its later
    #: benchmarks; a comparison past those starts them afresh, ``ab/controller.py``).
    #: Two stages: the first eight pairs screen every comparison, most deciding or
    #: stopping for futility there; the four after, each spending a small share of alpha,
    #: go to the few still undecided, which is where a real change at a suite's size
    #: hides. At 200 benchmarks and a between-process sd of 3.5%, a true +10% was caught
    #: 92% of the time against 62% with eight pairs, for 4.69 pairs a comparison instead
    #: of 4.28, identical code failing no run in 200 and a true +5% passing 4.1%
    #: (``benchmarks/suite_power.py``; docs/MEASURED.md, "A suite's size"). Fourteen
    #: (``--designs 'fourteen pairs'``) caught more where benchmarks spread unalike, but
    #: failed identical code 6 runs in 200 where one in twenty is three times as noisy at
    #: 8%; twelve, 2.
    max_pairs: int = 12
    #: Quads a process pair runs at least (a pair's own standard error needs some), and at
    #: most; a pair also stops after ``pair_seconds`` once it has ``min_quads``, and from
    #: ``slow_quads`` on where it is slow, where the earlier pairs spread wide, or where a
    #: new pair is the cheaper way on (:func:`cheapest_quads`).
    min_quads: int = 8
    max_quads: int = 48
    pair_seconds: float = 1.5
    #: A pair may stop at this many quads once its own standard error is small next to the
    #: between-process sd, when it is slow (past twice ``pair_seconds``: BERT-base at
    #: sequence 128 in torch, 0.23 s a call, took 7.4 s a pair for 8 quads) or when the
    #: comparison's earlier pairs already spread wider than the floor (a generation's TTFT
    #: at prompt 256: an sd of 3-9% between pairs, 2.5 s a pair for 8 quads): there the
    #: pooled interval is set by that spread, and more quads would not narrow it.
    slow_quads: int = 4
    #: The between-process sd assumed at least (log units): one or two pairs cannot show
    #: it. A/A process pairs on the 2-core VM differ by an sd of 2.6-3.7% (own error
    #: included; docs/MEASURED.md, "Where the offset lives"). 2%, not 1.5%:
    #: with a true between-process sd of 2.5%, a slowdown of exactly the threshold was
    #: passed as "no regression" 14% of the time at 1.5% and 8% at 2%
    #: (benchmarks/sequential_design.py).
    tau_floor: float = 0.02
    #: The same floor for the device's busy time (``gpu_time``): on an H100, the kernel
    #: sum per call of eager BERT-base differed between five fresh processes by an sd of
    #: 0.05% (batch 1) and 0.24% (batch 32, fp16), CUDA-graph latency by 0.15-0.33%
    #: (docs/MEASURED.md, "GPU"). Half a percent is twice the largest.
    device_tau_floor: float = 0.005
    #: A regression claim is also held to the pairs' own spread, shrunk towards the floor as
    #: if the floor were this many pairs' worth of evidence (a moderated t,
    #: :mod:`~pytest_infperf.stats.pooled`). Four: at a true between-process
    #: sd of 5-7%, a slowdown of exactly the threshold was flagged 5% of the time (14-16%
    #: with the floor alone), and at 2% sd +10% was still flagged 98% of the time (99%)
    #: (benchmarks/sequential_design.py; docs/MEASURED.md). ``math.inf``: the floor alone
    #: (the rule before); 0: t with k - 1 degrees of freedom (no prior).
    claim_prior_df: float = 4.0
    #: Whether the suite's spread (:class:`~pytest_infperf.stats.pooled.SuiteSpread`: what
    #: the session's earlier comparisons showed), once there is one, moderates every bound
    #: (the claim, the guard and the pass) instead of the floor. At 200 benchmarks, each
    #: comparison alone passed a true +5% 16-25% of the time where the spread was 3.5-8%
    #: (promised: 5%) and failed 18 runs in 200 of identical code at 8%; with the suite's,
    #: 2-5% and 1 (``benchmarks/suite_power.py``; docs/MEASURED.md, "A suite's size").
    suite: bool = True
    #: Up to this look the run-level guard also holds a claim to the comparison's own
    #: pairs' spread (the floor as ``claim_prior_df`` pairs), whatever the suite's says
    #: (two pairs of a noisy benchmark can agree by chance), as it does at any look where
    #: the pairs vary more than the suite's prior. With one benchmark in twenty three
    #: times as noisy as the rest, identical code failed 0, 0 and 2 runs in 200 at spreads
    #: of 2%, 3.5% and 8%, twelve pairs (``benchmarks/suite_power.py --outliers 0.05:3``).
    own_guard_looks: int = 2
    #: The share of alpha each look spends, for each bound; a look follows each process
    #: pair. The critical values are group-sequential (error spending over correlated
    #: looks, :mod:`~pytest_infperf.stats.sequential`), not Bonferroni (docs/COMPARING.md
    #: gives them at alpha 0.05, where Bonferroni would ask up to 2.97). Both bounds
    #: use the same value at a look (one interval); regressions and improvements are claimed
    #: only from the second look on, so what the first look spends on the lower bound is
    #: unused.
    shares: tuple[float, ...] = (0.22, 0.14, 0.11, 0.11, 0.08, 0.08, 0.08, 0.06) + (0.03,) * 4
    #: Stop for futility when the chance of reaching either decision by the last pair,
    #: if the current estimate were the truth, is under this...
    futility: float = 0.10
    #: ...from this many quads on (32 block pairs) and this many process pairs: one pair that
    #: happened to run in a noisy spell says little about the next (measured: most A/A
    #: verdicts left inconclusive had stopped for futility after one noisy pair).
    futility_quads: int = 16
    futility_pairs: int = 2
    #: How "within reach" is judged: ``"predictive"`` averages over what the true effect may
    #: still be given the pairs so far (the final estimate drawn around the current one with
    #: the variance the remaining pairs add), ``"conditional"`` takes the current estimate as
    #: the truth. Two or three pairs pin the estimate down
    #: poorly: taken as the truth, an estimate near the threshold stopped generations for
    #: futility after two pairs and 4 s (docs/MEASURED.md, "Futility from what may still
    #: come"; benchmarks/sequential_design.py).
    futility_rule: Literal["predictive", "conditional"] = "predictive"

    def __post_init__(self) -> None:
        # A look past the shares would reuse the last one's level: alpha overspent.
        if len(self.shares) != self.max_pairs:
            raise ValueError(f"{len(self.shares)} shares of alpha for {self.max_pairs} looks")


@dataclasses.dataclass(frozen=True)
class Look:
    """What the plan concluded after a process pair: stop or go on, each judged metric's
    verdict, its pooled estimate, and the alpha each bound was taken at."""

    stop: bool
    why: str
    verdicts: dict[str, Verdict]
    pooled: dict[str, _pool.Pooled]
    alpha: float
    k: int
    #: Per metric, the one-sided p of "slower by at most the threshold", and of "no slower
    #: at all" (the run-level guard's null).
    p_threshold: dict[str, float]
    p_zero: dict[str, float]
    #: Per metric, why a regression the interval showed was not claimed, if it was not.
    held_back: dict[str, str]
    #: Per metric, the lower bound (log) a claim is held to: the interval's lower end.
    low: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Per metric, the upper bound (log) a pass is held to: the interval's upper end.
    high: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Per metric, the distance from the estimate to the claim bound at the comparison's
    #: full alpha (for the detectable effect: what a claim would have to clear).
    margin: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Per metric, the suite's spread the bounds were moderated by (absent: the floor).
    prior: dict[str, _pool.Spread] = dataclasses.field(default_factory=dict)
    #: Per metric, the between-process sd (log) of a latency this runner cannot resolve
    #: the threshold in within the pairs a comparison may take (:func:`ungated`): its
    #: verdict is kept but does not hold the comparison open, nor head it undecided.
    ungated: dict[str, float] = dataclasses.field(default_factory=dict)

    def spread_record(self, metric: str) -> dict[str, Any]:
        """The suite's spread ``metric``'s bounds were moderated by, for its JSON, and
        whether its pairs fit it (else its claims were held to their own spread)."""
        if (prior := self.prior.get(metric)) is None:
            return {}
        fits = self.pooled[metric].fits(prior)
        sd, df = round(math.sqrt(prior.var), 5), round(prior.df, 1)
        return {"suite_spread": {"sd": sd, "df": df, "fits": fits}}


class PairedPlan:
    """The judge's sequential rule for one interleaved comparison. The interleaving code
    measures; it asks :meth:`more_quads` after each quad whether the current process pair
    needs more, and :meth:`look` after each pair whether to stop. Every alpha split and
    stopping decision of an interleaved comparison is made here.

    - A process pair takes quads until it has ``min_quads`` and either its own standard
      error is small next to the between-process floor (more quads would not narrow the
      pooled interval) or its time is up; a slow pair (past twice its time) stops at
      ``slow_quads`` when its own error is already that small, and any pair from
      ``slow_quads`` on where a new pair is the cheaper way on (:func:`cheapest_quads`).
    - After pair k the pairs are pooled (random effects,
      :mod:`~pytest_infperf.stats.pooled`) and each bound is taken at look k's
      group-sequential critical value (``shares`` spent over correlated looks).
    - ``regression`` needs two process pairs or more, the lower bound above 1 + d (Holm
      over the metrics of a generation), and the run-level guard: the p of "no slower at
      all" under the run's family level (:mod:`~pytest_infperf.core.family`: its
      benchmarks times the metrics judged here, spent over the later looks like the
      bounds), so that a run with nothing changed fails with probability at most
      ``run_alpha``. Once one metric of a generation has cleared
      the guard, the others need only their bound and Holm: the test fails either way.
    - ``improvement`` also needs two process pairs (the same offsets fake speed-ups), and
      the run-level guard's level for its p of "no faster at all".
    - ``unchanged`` / ``no-regression`` may stop the first look: they need each metric's
      upper bound at most 1 + d at full alpha (intersection-union: no split).
    - Futility: when neither decision is within reach (see ``Design.futility``).
    """

    def __init__(
        self,
        threshold: float,
        alpha: float,
        metrics: tuple[str, ...],
        family: int = 1,
        run_alpha: float = 0.01,
        design: Design | None = None,
        prior: Mapping[str, _pool.Spread] | None = None,
        runner: Mapping[str, _pool.Spread] | None = None,
    ) -> None:
        self.threshold = threshold
        self.alpha = alpha
        self.metrics = metrics
        #: The metrics each process pair measures in quads (the rest: by profiled passes).
        self.quad_metrics = tuple(m for m in metrics if m not in PROFILED)
        self.family = max(1, family)
        self.run_alpha = run_alpha
        self.design = design or Design()
        #: Per metric, the between-process spread the session's earlier comparisons showed;
        #: ``runner``'s, a GPU latency's spread on this runner (:class:`~..stats.pooled.
        #: RunnerSpread`), whatever the design: no floor stands in for it there.
        self.prior = dict(prior or {}) if self.design.suite else {}
        self.prior.update(runner or {})
        self.runner = dict(runner or {})
        #: Per metric, the between-process sd the pairs so far showed (DerSimonian-Laird,
        #: from two pairs on): a pair's own error need not go far below it.
        self._spread: dict[str, float] = {}
        #: What a process pair costs besides its quads (None: not told).
        self._pair_s: float | None = None
        #: ``max_pairs`` times the squared pooled error at which the last look (at Holm's
        #: first step) still catches twice the tolerance with 80% power (cheapest_quads).
        z_end = self._z(self.design.max_pairs, alpha / len(metrics)) + _NORMAL.inv_cdf(0.8)
        se_end = math.log1p(threshold / (1 + threshold)) / z_end
        self._reach_var = self.design.max_pairs * se_end**2

    def pair_ready(self, seconds: float) -> None:
        """A pair took ``seconds`` to be ready: the next costs the most any did, we guess."""
        self._pair_s = max(self._pair_s or 0.0, seconds)

    def more_quads(
        self,
        quads: Mapping[str, Sequence[float]],
        seconds: float,
        gpu: tuple[int, float] | None = None,
    ) -> bool:
        """Whether the current process pair should take another quad. ``gpu``: the pair's
        GPU blocks so far and the larger side's share of them set aside: a pair past the
        share limit stops (its verdict is withheld), and quads set aside count towards the
        pair's time but not its quads, so a pair on a shared GPU ends by its time. Told what
        a pair costs (:meth:`pair_ready`), it also ends at :func:`cheapest_quads`."""
        d = self.design
        metrics = self.quad_metrics
        n = min(len(quads[m]) for m in metrics)
        if gpu is not None:
            blocks, share = gpu
            if blocks >= GPU_MIN_BLOCKS and share > GPU_SHARE_LIMIT:
                return False
            # Out of time, a pair still takes the quads a standard error needs: one quad
            # of a slow GPU benchmark (a sample of 0.75 s) gave no error at all, and the
            # pooled look then divided by zero.
            if d.slow_quads <= n < d.min_quads and seconds >= 2 * d.pair_seconds:
                return False
        target = {m: max(d.tau_floor, self._spread.get(m, 0.0)) for m in metrics}
        wide = any(t > d.tau_floor for t in target.values())
        if n < d.slow_quads:
            return True
        if n >= d.max_quads or (n >= d.min_quads and seconds >= d.pair_seconds):
            return False
        own = {m: _pool.summarize_pair(quads[m]) for m in metrics}
        if self._pair_s is not None and seconds > 0:
            costs = (seconds / n, self._pair_s, self._reach_var)
            if all(n >= cheapest_quads(own[m], target[m], *costs) for m in metrics):
                return False
        if n < d.min_quads and not wide and seconds < 2 * d.pair_seconds:
            return True
        # Enough quads for this pair's time: more only while its own error is large next
        # to the between-process sd (the floor, or what earlier pairs showed).
        return any(own[m].se > target[m] / 2.0 for m in metrics)

    def floor(self, metric: str) -> float:
        """The between-process sd assumed at least for ``metric``."""
        return self.design.device_tau_floor if metric in PROFILED else self.design.tau_floor

    def moderation(self, metric: str) -> float | _pool.Spread:
        """What a bound's moderated t shrinks the pairs' own spread towards: the suite's
        spread once there is one, else the floor (``claim_prior_df`` pairs' worth)."""
        return self.prior.get(metric, self.design.claim_prior_df)

    def look(self, pairs: Mapping[str, Sequence[_pool.PairSummary]]) -> Look:
        """The verdicts after ``k`` process pairs, and whether to stop there."""
        d = self.design
        k = min(len(pairs[m]) for m in self.metrics)
        alpha = _seq.level(self._z(k))
        limit = math.log1p(self.threshold)
        pooled = {m: _pool.pool(pairs[m], self.floor(m)) for m in self.metrics}
        self._spread = {m: pooled[m].tau_data for m in self.metrics}
        # Claims are held to the pairs' own spread at Student's t as well as to the floor
        # (stats.pooled: the floor alone let two agreeing pairs of a noisy metric through).
        prior = {m: self.moderation(m) for m in self.metrics}
        # Held to their own pairs' spread, where that is what counts: moderated by the floor
        # (``claim_prior_df`` pairs' worth); a GPU latency by nothing but the pairs (Student's
        # t, k - 1 degrees of freedom: no floor stands for a host the run did not measure).
        own = {m: 0.0 if m in self.runner else d.claim_prior_df for m in self.metrics}
        claim = {m: _claim_prior(pooled[m], p, own[m]) for m, p in prior.items()}
        p_threshold = {m: pooled[m].p_claim(limit, claim[m]) for m in self.metrics}
        p_zero = {m: pooled[m].p_claim(0.0, claim[m]) for m in self.metrics}
        if k <= d.own_guard_looks or any(_noisier(pooled[m], prior[m]) for m in self.metrics):
            # Two pairs of a noisy benchmark can agree by chance, and then look alike
            # to a quiet suite's spread: at the guard's far tail they are held to their
            # own spread as well.
            theirs = {m: pooled[m].p_claim(0.0, own[m]) for m in self.metrics}
            p_zero = {m: max(p_zero[m], theirs[m]) for m in self.metrics}
        claimable = _holm_rejected(p_threshold, alpha)
        verdicts: dict[str, Verdict] = {}
        held: dict[str, str] = {}
        # Within x / 1e20 of 1: a t with one degree of freedom (a suite's spread that rests
        # on little) can reach past what a float's exp holds.
        lows = {m: max(pooled[m].lower_claim(alpha, claim[m]), -46.0) for m in self.metrics}
        highs = {m: min(pooled[m].upper_claim(alpha, prior[m]), 46.0) for m in self.metrics}
        # Why each metric whose interval lies above the tolerance is not claimed, if it is
        # not: first its own rules (two pairs, Holm), then the run-level guard. The guard
        # decides whether the test fails: once one metric of a generation has cleared it the
        # test fails anyway, so the others are claimed on Holm alone (the per-metric error
        # every claim is held to): naming TTFT beside TPOT took one to three more process
        # pairs where the guard held it back (docs/COMPARING.md).
        above = [m for m in self.metrics if lows[m] > limit]
        held_by = {m: self._why_not_claimed(m, k, claimable) for m in above}
        guard = {m: self._run_guard(k, p_zero[m]) for m in above if held_by[m] is None}
        if any(why is None for why in guard.values()):
            guard = {}
        for m in self.metrics:
            low, high = lows[m], highs[m]
            if low > limit:
                why = held_by[m] or guard.get(m)
                if why is None:
                    verdicts[m] = Verdict.REGRESSION
                    continue
                held[m] = why
                verdicts[m] = Verdict.INCONCLUSIVE
            elif high < -limit and k >= 2 and self._faster_held(k, pooled[m], claim[m], own[m]):
                verdicts[m] = Verdict.IMPROVEMENT
            elif high <= limit:
                verdicts[m] = Verdict.UNCHANGED if low >= -limit else Verdict.NO_REGRESSION
            else:
                verdicts[m] = Verdict.INCONCLUSIVE
        # A GPU latency this runner cannot resolve within the pairs, by what it and this
        # comparison's own pairs showed so far: no more pairs are spent on it.
        unresolved = {
            m: sd
            for m, spread in self.runner.items()
            if (sd := ungated(_posterior(spread, pooled[m]), self.threshold, self.alpha, d))
            is not None
        }
        stop, why = self._stop(k, verdicts, pooled, pairs, unresolved, lows)
        margin = {
            m: pooled[m].estimate - pooled[m].lower_claim(self.alpha, claim[m])
            for m in self.metrics
        }
        return Look(
            stop,
            why,
            verdicts,
            pooled,
            alpha,
            k,
            p_threshold,
            p_zero,
            held,
            lows,
            highs,
            margin,
            dict(self.prior),
            unresolved,
        )

    def _faster_held(
        self, k: int, est: _pool.Pooled, claim: float | _pool.Spread, own: float
    ) -> bool:
        """Whether an improvement clears the run-level guard as a regression must: its p of
        "no faster at all" under the run's family level, held to its own pairs' spread at
        the first looks. Identical code called faster is as false as called slower: two
        pairs that agreed by chance claimed it in 1 run in 100 of a simulated GPU suite
        (``benchmarks/gpu_runner.py``)."""
        faster = dataclasses.replace(est, estimate=-est.estimate)
        p = faster.p_claim(0.0, claim)
        if k <= self.design.own_guard_looks:
            p = max(p, faster.p_claim(0.0, own))
        return self._run_guard(k, p) is None

    def _why_not_claimed(self, metric: str, k: int, claimable: set[str]) -> str | None:
        if k < 2:
            return "one process pair: a regression needs two"
        if metric not in claimable:
            return f"not after Holm over {len(self.metrics)} metrics"
        return None

    def _run_guard(self, k: int, p_zero: float) -> str | None:
        """Why the run-level guard holds a claim back at look ``k``, if it does."""
        parts = len(self.metrics)
        level = _family.level(self.run_alpha, self.family, parts)
        # The guard looks at the later pairs too: spent over those looks like the bounds.
        at_look = _seq.level(self._z(k, level, guard=True))
        if p_zero > at_look:
            return (
                f"the run-level guard: p {p_zero:.2g} of 'no slower at all' is above "
                f"{at_look:.2g} at this look (run_alpha / ({_family.words(self.family, parts)})"
                f" = {level:.2g}, spent over the looks)"
            )
        return None

    def _z(self, k: int, alpha: float | None = None, guard: bool = False) -> float:
        """The critical value of look ``k`` (the last one's past the last look)."""
        shares = self.design.shares
        if guard:
            shares = _seq.regression_shares(shares)
        z = _seq.boundaries(self.alpha if alpha is None else alpha, tuple(shares))
        return z[min(k, len(z)) - 1]

    def _stop(
        self,
        k: int,
        verdicts: Mapping[str, Verdict],
        pooled: Mapping[str, _pool.Pooled],
        pairs: Mapping[str, Sequence[_pool.PairSummary]],
        unresolved: Mapping[str, float],
        lows: Mapping[str, float],
    ) -> tuple[bool, str]:
        d = self.design
        if k >= d.max_pairs:
            return True, "pairs spent"
        limit = math.log1p(self.threshold)
        regressed = any(v is Verdict.REGRESSION for v in verdicts.values())
        open_: list[str] = []
        for m, v in verdicts.items():
            if m in unresolved and lows[m] <= 0.0 and pooled[m].estimate <= limit:
                # Pairs cannot resolve it here: spent only while it reads or looks slower.
                continue
            if v is Verdict.INCONCLUSIVE:
                # Another metric regressed: this one still goes on, so that the message
                # says which of them regressed (the test fails either way).
                open_.append(m)
            elif (
                not regressed
                and v is not Verdict.IMPROVEMENT
                and pooled[m].estimate < -limit
                and m not in self.runner
            ):
                # It looks faster by more than the tolerance: one more pair may say so
                # (an improvement needs two), where stopping would only say "no regression".
                # Not a GPU's latency: its host's spread would keep pairs going for a claim
                # that fails nothing.
                open_.append(m)
        if not open_:
            return True, "regression" if regressed else "decided"
        quads = min(sum(p.n for p in pairs[m]) for m in self.quad_metrics)
        if (
            quads >= d.futility_quads
            and k >= d.futility_pairs
            and all(_futile(self, pooled[m], k) for m in open_)
        ):
            return True, "futility"
        return False, "undecided"


#: How sure the run's evidence must be that a latency's spread is past what the pairs
#: can resolve before it is left ungated: the spread's one-sided lower bound at this level.
UNGATE_CONFIDENCE = 0.95


def ungated(
    spread: _pool.Spread, threshold: float, alpha: float, design: Design | None = None
) -> float | None:
    """The between-process sd (log) of a latency whose spread on this runner is ``spread``,
    where the most pairs a comparison takes cannot resolve the threshold in it: identical
    code would not pass (its upper bound under 1 + threshold) with 80% power even then,
    at the lower :data:`UNGATE_CONFIDENCE` bound of the spread: a quiet host's one draw
    read 9% once in a simulated run, and its +40% regression was waved through on the
    device time. None where they can, or where nothing measured the spread yet (the pairs
    will say). Returns the spread's own estimate, what the message says."""
    d = design or Design()
    if spread.df <= 0 or spread.var <= 0:
        return None
    from scipy.special import chdtri, stdtrit  # noqa: PLC0415 (scipy: once a GPU is compared)

    # Left ungated only where the evidence says so at 95%: the spread's lower bound.
    low = spread.var * spread.df / float(chdtri(spread.df, 1.0 - UNGATE_CONFIDENCE))
    se = math.sqrt(low / d.max_pairs)
    reach = (float(stdtrit(spread.df + d.max_pairs - 1, 1.0 - alpha)) + _NORMAL.inv_cdf(0.8)) * se
    return math.sqrt(spread.var) if reach > math.log1p(threshold) else None


def _posterior(spread: _pool.Spread, est: _pool.Pooled) -> _pool.Spread:
    """A runner's spread with one comparison's own pairs pooled into it (their spread about
    their mean, ``k - 1`` degrees of freedom)."""
    own = est.k - 1 if est.k >= 2 and math.isfinite(est.s2) else 0
    df = spread.df + own
    if df <= 0:
        return spread
    return _pool.Spread((spread.df * spread.var + own * est.s2) / df, df)


def _noisier(est: _pool.Pooled, prior: float | _pool.Spread) -> bool:
    """Whether a comparison's pairs vary more than the suite's spread: then the run-level
    guard also asks its own spread, whatever the F test said (it has little power with
    two or three pairs, and the guard asks a far tail)."""
    return isinstance(prior, _pool.Spread) and est.s2 > prior.var


def _claim_prior(
    est: _pool.Pooled, prior: float | _pool.Spread, own: float
) -> float | _pool.Spread:
    """What a claim's bounds are moderated by. A claim is lent the suite's spread only where
    its own pairs vary as that says they may; a noisier benchmark is held to its own pairs'
    spread (``own``: the floor as that many pairs' worth). A pass is held to the suite's
    spread whatever: a benchmark noisier than its suite is no easier to pass."""
    if isinstance(prior, _pool.Spread) and not est.fits(prior):
        return own
    return prior


def net_of_waits(
    metric: str, blocks: Sequence[tuple[Sequence[float], Mapping[str, Sequence[float]]]]
) -> bool:
    """Whether a quad's contrast of ``metric`` is taken on its blocks' wall time less the
    time another task held the CPU (:mod:`~pytest_infperf.measure.cpuwait`): only when
    every block of both sides recorded that wait and ran on one thread. One block on
    either side with busy threads of its own (a head that starts more threads than the
    base: oversubscription) and the quad is judged on wall time, so what the code's
    own threads cost stays in the verdict."""
    wait_key = _cpuwait.WAIT_OF.get(metric)
    for values, figures in blocks:
        others = figures.get(_cpuwait.OTHERS) or ()
        waits = figures.get(wait_key or "") or ()
        if len(others) != len(values) or not waits:
            return False
        if sum(others) > OTHER_CPU_LIMIT * sum(values):
            return False
    return True


def _futile(plan: PairedPlan, est: _pool.Pooled, k: int) -> bool:
    """Neither decision within reach by the last pair. The standard error shrinks about
    as 1 / sqrt(pairs), to ``se_end``; the last pair's estimate lies around the current
    one with the variance the remaining pairs add (predictive: se^2 - se_end^2, the
    uncertainty of where the truth is), or exactly at it with ``se_end`` (conditional:
    the current estimate taken as the truth)."""
    d = plan.design
    limit = math.log1p(plan.threshold)
    se_end = est.se * math.sqrt(k / d.max_pairs)
    remaining = max(0.0, 1.0 - k / d.max_pairs)
    spread = se_end if d.futility_rule == "conditional" else est.se * math.sqrt(remaining)
    if spread <= 0:
        return False
    z = plan._z(d.max_pairs)
    # The last estimate must clear the bound by z x se_end.
    reach_regression = _NORMAL.cdf((est.estimate - limit - z * se_end) / spread)
    reach_pass = _NORMAL.cdf((limit - z * se_end - est.estimate) / spread)
    return max(reach_regression, reach_pass) < d.futility


def cheapest_quads(
    own: _pool.PairSummary, tau: float, quad_s: float, pair_s: float, reach_var: float
) -> float:
    """The quads a process pair takes in the cheapest allocation, given its quads so far
    (``own``, summarised), the between-process sd ``tau``, a quad's seconds and a pair's
    seconds besides its quads.
    A pair's variance is tau^2 + sigma^2 / n at a cost of pair_s + n quad_s, so the time to
    a given pooled error is least at n* = (sigma / tau) sqrt(pair_s / quad_s), the classic
    two-stage allocation. Where the model is ready in a fraction of a second, a pair of
    four quads decides in less time than one of eight; where it takes seconds, n* is past
    what the pair's time allows, and that ends it. ``python benchmarks/pair_allocation.py``
    (this machine's quads, spreads and costs per family, through the plan's own looks)
    chose it (docs/MEASURED.md, "Quads a pair, by what a new pair costs"). Never fewer
    than the pair cap allows: ``max_pairs`` pairs of n quads pool to a variance of (tau^2 +
    sigma^2 / n) / max_pairs, which must stay within ``reach_var / max_pairs`` (the cap's
    pairs must still be able to catch twice the tolerance); past that reach no pair length
    is enough, and the pair's time decides. Even so, a noisy ONNX Runtime MLP (quad sd 11%)
    caught +10% 88% of the time, not 98% (its quiet first quads end a pair early)."""
    sigma = own.se * math.sqrt(own.n)
    if tau <= 0 or quad_s <= 0 or not math.isfinite(sigma):
        return math.inf  # nothing to weigh: the pair's time and own error decide
    room = reach_var - tau**2
    # Past the reach of any pair length the cap binds harder still: the pair's time decides.
    reach = sigma**2 / room if room > 0 else math.inf
    return max(sigma / tau * math.sqrt(max(pair_s, 0.0) / quad_s), reach)


def _holm_rejected(p_values: Mapping[str, float], alpha: float) -> set[str]:
    """The metrics whose p survives Holm's step-down at ``alpha``."""
    out: set[str] = set()
    ordered = sorted(p_values.items(), key=lambda kv: kv[1])
    for i, (metric, p) in enumerate(ordered):
        if p > alpha / (len(ordered) - i):
            break
        out.add(metric)
    return out
