"""The interleaved protocol's statistics (pooled.py) and the judge's plan, without timing:
scripted sides and synthetic process pairs, scipy as the oracle where it has the formula."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pytest_infperf.ab.interleave import interleave
from pytest_infperf.core.results import Verdict
from pytest_infperf.judge.plan import Design, PairedPlan
from pytest_infperf.stats.pooled import (
    SUITE_MAX_DF,
    SUITE_MIN,
    PairSummary,
    Spread,
    SuiteSpread,
    detectable_effect,
    fit_spread,
    pool,
    quad_contrasts,
    se_from_interval,
    summarize_pair,
    switch_penalties,
)

LOG105 = math.log(1.05)


def test_quads_cancel_linear_drift_and_the_switch_penalty() -> None:
    """Blocks a1 b1 b2 a2 on a linear drift, with b1 and a2 paying a switch penalty: the
    quad contrast is the true log-ratio, the penalty estimate the penalty."""
    true, drift, penalty = 0.07, 0.01, 0.2
    t = np.arange(4)
    a1, b1, b2, a2 = drift * t + np.array([0.0, true + penalty, true, penalty])
    (q,) = quad_contrasts([a1], [b1], [b2], [a2])
    (p,) = switch_penalties([a1], [b1], [b2], [a2])
    assert q == pytest.approx(true) and p == pytest.approx(penalty)


@pytest.mark.parametrize("seed", range(5))
def test_pair_summary_is_scipys_trimmed_mean_and_yuen_error(seed: int) -> None:
    x = np.random.default_rng(seed).standard_t(3, size=30) * 0.05
    s = summarize_pair(x.tolist())
    assert s.mean == pytest.approx(stats.trim_mean(x, 0.2))
    # Yuen's standard error of the 20% trimmed mean (scipy: trimmed_std / sqrt(n) scaled)
    g = math.floor(0.2 * len(x))
    w = stats.mstats.winsorize(x, limits=(0.2, 0.2))
    yuen = float(np.std(w, ddof=1)) / ((1 - 2 * g / len(x)) * math.sqrt(len(x)))
    if not s.batched:
        assert s.se == pytest.approx(yuen)
    else:
        assert s.se > yuen


def test_autocorrelated_quads_get_batch_means() -> None:
    """A speed state lasting many quads (AR(1), phi = 0.8): the plain error is far too
    small, batch means widen it."""
    rng = np.random.default_rng(1)
    x = np.zeros(60)
    for i in range(1, 60):
        x[i] = 0.8 * x[i - 1] + rng.normal(0, 0.02)
    s = summarize_pair(x.tolist())
    assert s.lag1 > 0.5 and s.batched
    naive = float(np.std(x, ddof=1)) / math.sqrt(len(x))
    assert s.se > 1.5 * naive


def test_pool_is_the_random_effects_estimate() -> None:
    """Two agreeing pairs: tau from the data is 0, so the floor counts; two pairs far
    apart: DerSimonian-Laird tau and the Hartung-Knapp spread widen the error."""
    agree = pool([PairSummary(0.01, 0.005, 10, 0, False)] * 2, tau_floor=0.015)
    assert agree.tau_data == 0 and agree.tau == 0.015
    assert agree.se == pytest.approx(math.sqrt((0.005**2 + 0.015**2) / 2))
    apart = pool(
        [PairSummary(-0.05, 0.005, 10, 0, False), PairSummary(0.05, 0.005, 10, 0, False)], 0.015
    )
    assert apart.estimate == pytest.approx(0.0) and apart.tau_data > 0.05
    assert apart.se >= 0.05 - 1e-9  # the spread of the two means itself
    one = pool([PairSummary(0.02, 0.01, 10, 0, False)], 0.015)
    assert one.se == pytest.approx(math.hypot(0.01, 0.015))
    assert one.upper(0.05) == pytest.approx(0.02 + stats.norm.ppf(0.95) * one.se)
    assert one.p_above(0.0) == pytest.approx(stats.norm.sf(0.02 / one.se))


def test_detectable_effect_is_what_the_rule_flags_with_80_percent_power() -> None:
    se = 0.02
    d = detectable_effect(se, 0.05, 0.05)
    # a true log-ratio of log(1 + d): the lower bound clears log(1.05) with probability 0.8
    power = stats.norm.sf((LOG105 + stats.norm.ppf(0.95) * se - math.log1p(d)) / se)
    assert power == pytest.approx(0.8)
    assert se_from_interval(math.exp(-0.1), math.exp(0.1), 0.05) == pytest.approx(
        0.1 / stats.norm.ppf(0.95)
    )


def _pairs(*means: float, se: float = 0.004) -> dict[str, list[PairSummary]]:
    return {"median": [PairSummary(m, se, 12, 0.0, False) for m in means]}


def test_one_process_pair_never_fails_a_test() -> None:
    plan = PairedPlan(0.05, 0.05, ("median",))
    look = plan.look(_pairs(0.3))
    assert look.verdicts["median"] is Verdict.INCONCLUSIVE and not look.stop
    assert "a regression needs two" in look.held_back["median"]
    two = plan.look(_pairs(0.3, 0.31))
    assert two.verdicts["median"] is Verdict.REGRESSION and two.stop


def test_no_regression_may_stop_at_the_first_pair() -> None:
    plan = PairedPlan(0.05, 0.05, ("median",))
    look = plan.look(_pairs(0.0))
    assert look.verdicts["median"] is Verdict.UNCHANGED and look.stop and look.why == "decided"
    # looks 30% faster: one pair rules out a regression, a second may show the improvement
    fast = plan.look(_pairs(-0.35))
    assert fast.verdicts["median"] is Verdict.NO_REGRESSION and not fast.stop
    assert plan.look(_pairs(-0.35, -0.36)).verdicts["median"] is Verdict.IMPROVEMENT


def test_the_run_level_guard_scales_with_the_collected_family() -> None:
    """A noisy +13% estimate whose lower bound clears 1.05 at the look's alpha, but whose
    'no slower at all' p (about 4e-4, moderated t) is not small enough for a run of 1000
    perf tests."""
    small = PairedPlan(0.05, 0.05, ("median",), family=1, run_alpha=0.01)
    big = PairedPlan(0.05, 0.05, ("median",), family=1000, run_alpha=0.01)
    pairs = _pairs(0.13, 0.13, 0.13, se=0.04)
    assert small.look(pairs).verdicts["median"] is Verdict.REGRESSION
    held = big.look(pairs)
    assert held.verdicts["median"] is Verdict.INCONCLUSIVE
    assert "run-level guard" in held.held_back["median"]


def test_futility_stops_what_cannot_be_decided() -> None:
    """An estimate right at the threshold with a wide interval: neither decision within
    reach, so the run stops before the last pair."""
    plan = PairedPlan(0.05, 0.05, ("median",), design=Design())
    look = plan.look(_pairs(0.05, 0.045, 0.05, se=0.04))
    assert look.stop and look.why == "futility"
    assert look.verdicts["median"] is Verdict.INCONCLUSIVE
    # one process pair, however noisy, is never enough to give up: the next may be quiet
    noisy = {"median": [PairSummary(0.05, 0.04, 24, 0.0, False)]}
    assert not plan.look(noisy).stop


def test_futility_weighs_where_the_truth_may_still_be() -> None:
    """Two pairs at +4% with 2.5% errors. Taken as the truth (the rule before), +4%
    cannot be passed by the last pair: the second look would give up. Six more pairs may
    still move the estimate, which leaves a pass in reach, so the predictive rule goes
    on."""
    pairs = _pairs(0.04, 0.04, se=0.025)
    before = PairedPlan(0.05, 0.05, ("median",), design=Design(futility_rule="conditional"))
    assert before.look(pairs).why == "futility"
    look = PairedPlan(0.05, 0.05, ("median",)).look(pairs)
    assert not look.stop and look.verdicts["median"] is Verdict.INCONCLUSIVE


def test_generation_regression_needs_holm_no_regression_needs_each() -> None:
    plan = PairedPlan(0.05, 0.05, ("ttft", "tpot"))
    both = {"ttft": _pairs(0.0)["median"], "tpot": _pairs(0.002)["median"]}
    look = plan.look(both)
    assert set(look.verdicts.values()) == {Verdict.UNCHANGED} and look.stop
    half = {"ttft": _pairs(0.0)["median"], "tpot": _pairs(0.2)["median"]}
    assert not plan.look(half).stop  # TPOT open: "no regression" needs both
    # two metrics near the bound: the weaker one must pass alpha / 1 after the other passed
    # alpha / 2 (Holm), else it is held back
    close = {"ttft": _pairs(0.3, 0.3)["median"], "tpot": _pairs(0.3, 0.3)["median"]}
    assert set(plan.look(close).verdicts.values()) == {Verdict.REGRESSION}


def test_once_one_metric_fails_the_test_the_other_is_named_on_holm_alone() -> None:
    """Pairs of a generation at four times the layers (a real run's): TPOT clears the
    run-level guard; TTFT, whose single-prefill quads are noisy, clears its bound and Holm
    but not the guard alone. The test fails on TPOT either way, so TTFT is named too, at
    the second pair; with TPOT unchanged the guard still holds TTFT back."""
    plan = PairedPlan(0.05, 0.05, ("ttft", "tpot"), family=2)
    ttft = [PairSummary(0.7009, 0.1727, 8, 0.0, False), PairSummary(1.1186, 0.1001, 8, 0.0, False)]
    tpot = [PairSummary(1.1571, 0.0350, 8, 0.0, False), PairSummary(1.1633, 0.0260, 8, 0.0, False)]
    look = plan.look({"ttft": ttft, "tpot": tpot})
    assert look.verdicts == {"ttft": Verdict.REGRESSION, "tpot": Verdict.REGRESSION}
    assert look.stop and not look.held_back
    flat = [PairSummary(0.0, 0.01, 8, 0.0, False), PairSummary(0.002, 0.01, 8, 0.0, False)]
    alone = plan.look({"ttft": ttft, "tpot": flat})
    assert alone.verdicts["ttft"] is Verdict.INCONCLUSIVE
    assert "run-level guard" in alone.held_back["ttft"]


class _Scripted:
    """A side whose block times are given: ``factor`` x the base time, with the first
    block after a switch ``penalty`` slower (as a real process pays it)."""

    def __init__(self, factor: float, penalty: float, log: list[str], name: str) -> None:
        self.factor, self.penalty, self.log, self.name = factor, penalty, log, name

    def block(
        self, count: int, calls: int, cpu: int | None = None
    ) -> tuple[list[float], dict[str, list[float]]]:
        switched = bool(self.log) and self.log[-1] != self.name
        self.log.append(self.name)
        t = 1e-3 * self.factor * (1 + self.penalty if switched else 1)
        return [t] * count, {}


def test_interleave_runs_abba_quads_until_the_plan_has_enough() -> None:
    log: list[str] = []
    base = _Scripted(1.0, 0.3, log, "A")
    head = _Scripted(1.1, 0.3, log, "B")
    plan = PairedPlan(0.05, 0.05, ("median",))
    run = interleave(base, head, calls=1, per_sample_s=1e-3, plan=plan)
    assert log[:8] == list("ABBAABBA")
    assert len(run.quads["median"]) == Design().min_quads  # exact data: no more needed
    assert all(q == pytest.approx(math.log(1.1)) for q in run.quads["median"])
    assert all(p == pytest.approx(math.log(1.3)) for p in run.penalties["median"])


def test_a_pair_whose_head_leads_runs_baab_quads_and_judges_alike() -> None:
    """Every other process pair has the head lead: the same contrast (head over base) and
    the same penalty, from blocks run in the other order."""
    log: list[str] = []
    base = _Scripted(1.0, 0.3, log, "A")
    head = _Scripted(1.1, 0.3, log, "B")
    run = interleave(base, head, 1, 1e-3, PairedPlan(0.05, 0.05, ("median",)), head_first=True)
    assert log[:8] == list("BAABBAAB") and run.head_first
    assert all(q == pytest.approx(math.log(1.1)) for q in run.quads["median"])
    assert all(p == pytest.approx(math.log(1.3)) for p in run.penalties["median"])
    assert min(run.head) == pytest.approx(1.1e-3) and min(run.base) == pytest.approx(1e-3)


def test_a_slow_pair_stops_at_four_quads_when_its_own_error_is_already_small() -> None:
    plan = PairedPlan(0.05, 0.05, ("median",))
    d = Design()
    quiet = {"median": [0.010, 0.012, 0.011, 0.009]}  # own se ~0.5%: below the floor's half
    noisy = {"median": [0.10, -0.08, 0.12, -0.05]}
    assert plan.more_quads(quiet, seconds=2 * d.pair_seconds - 0.1)  # not slow yet
    assert not plan.more_quads(quiet, seconds=2 * d.pair_seconds + 0.1)
    assert plan.more_quads(noisy, seconds=2 * d.pair_seconds + 0.1)  # its own error is large
    assert plan.more_quads({"median": quiet["median"][:3]}, seconds=10.0)  # under slow_quads


def test_a_pair_stops_at_four_quads_once_earlier_pairs_spread_wide() -> None:
    """Two pairs 10% apart (a between-process sd of about 7%): a third pair whose own error
    is 1.5% after four quads stops there, however fast it is; before that look, it went on
    to eight."""
    plan = PairedPlan(0.05, 0.05, ("ttft", "tpot"))
    pair = {"ttft": [0.01, 0.04, -0.02, 0.03], "tpot": [0.0, 0.01, -0.01, 0.005]}
    assert plan.more_quads(pair, seconds=0.5)
    apart = {
        m: [PairSummary(-0.05, 0.01, 8, 0, False), PairSummary(0.05, 0.01, 8, 0, False)]
        for m in ("ttft", "tpot")
    }
    plan.look(apart)
    assert not plan.more_quads(pair, seconds=0.5)
    assert plan.more_quads({m: v[:3] for m, v in pair.items()}, seconds=0.5)  # under 4
    noisy = {"ttft": [0.2, -0.15, 0.25, -0.1], "tpot": pair["tpot"]}
    assert plan.more_quads(noisy, seconds=0.5)  # its own error is large even so


# A pair of quads with an sd of about 4% (n* = sigma / tau x sqrt(c_pair / c_quad), tau the
# 2% floor): at 0.1 s a quad, a new pair that costs 0.1 s is cheaper than a fifth quad
# (n* = 2), one that costs 10 s is not (n* = 20); the rule before the cost was weighed
# (no cost given) takes eight quads; fewer than four never stop; a pair whose earlier
# pairs spread wide (tau 7%) stops sooner.
_Q4 = [0.04, -0.03, 0.05, -0.04]


@pytest.mark.parametrize(
    ("quads", "seconds", "next_pair_s", "more"),
    [
        (_Q4, 0.4, None, True),  # no cost given: the rule before, eight quads
        (_Q4, 0.4, 0.1, False),  # a new pair is cheap: four quads are enough
        (_Q4, 0.4, 10.0, True),  # a new pair costs 100 quads: n* about 23
        (_Q4 * 5, 2.0, 10.0, False),  # 20 quads past the pair's time: ends, whatever n*
        (_Q4[:3], 0.3, 0.0, True),  # under slow_quads, whatever the cost
        ([0.001, -0.001, 0.001, -0.001], 0.4, 1.0, False),  # own spread tiny: n* under 1
        ([0.2, -0.15, 0.25, -0.1], 0.4, 0.1, True),  # own spread 20%: n* 10
        (_Q4, 0.0, 0.1, True),  # no time measured: no quad cost to weigh
        # A quad sd of 9%: n* 3.3 at a cheap new pair, but twelve pairs of 4 quads could not
        # pool to the error that catches +10%: it goes on (to 8).
        ([0.08, -0.08, 0.08, -0.08], 0.4, 0.05, True),
    ],
)
def test_a_pair_takes_the_quads_a_new_pairs_cost_warrants(
    quads: list[float], seconds: float, next_pair_s: float | None, more: bool
) -> None:
    plan = PairedPlan(0.05, 0.05, ("median",))
    if next_pair_s is not None:
        plan.pair_ready(next_pair_s / 2)
        plan.pair_ready(next_pair_s)  # the costliest pair so far is the guess
        plan.pair_ready(next_pair_s / 3)
    assert plan.more_quads({"median": quads}, seconds) is more


def test_the_cost_rule_weighs_every_metric_and_the_spread_seen() -> None:
    """A generation stops only when both metrics have their n*. A spread between the
    earlier pairs (tau 7%) past what twelve pairs of any length can pool under the reach of
    +10% leaves the pair to its time and own error, as before the cost was weighed."""
    told, untold = (
        PairedPlan(0.05, 0.05, ("ttft", "tpot")),
        PairedPlan(0.05, 0.05, ("ttft", "tpot")),
    )
    told.pair_ready(1.0)
    quiet = [0.001, -0.001, 0.001, -0.001]
    assert told.more_quads({"ttft": quiet, "tpot": _Q4}, 0.4)
    assert not told.more_quads({"ttft": quiet, "tpot": quiet}, 0.4)
    noisy = {"ttft": [0.1, -0.08, 0.12, -0.05], "tpot": quiet}
    told = PairedPlan(0.05, 0.05, ("ttft", "tpot"))
    told.pair_ready(0.5)
    assert told.more_quads(noisy, 0.4)
    apart = {
        m: [PairSummary(-0.05, 0.01, 8, 0, False), PairSummary(0.05, 0.01, 8, 0, False)]
        for m in ("ttft", "tpot")
    }
    told.look(apart)
    untold.look(apart)
    assert untold.more_quads(noisy, 0.4)  # its own error is large next to the spread
    assert told.more_quads(noisy, 0.4)  # and the cost does not cut it short there


def test_pairs_that_agree_by_chance_do_not_make_a_claim_alone() -> None:
    """Two pairs at +9% and +8.5% with small own errors: the floor-based bound (2%) clears
    1.05, but two pairs cannot show a between-process sd of 5%, so the claim is also held
    to their spread shrunk towards the floor (a moderated t): not claimed at two pairs,
    claimed once more pairs agree."""
    plan = PairedPlan(0.05, 0.05, ("median",))
    two = plan.look(_pairs(0.09, 0.085))
    est = two.pooled["median"]
    assert est.lower(two.alpha) > math.log1p(0.05)  # the floor alone would have claimed it
    assert two.verdicts["median"] is Verdict.INCONCLUSIVE and not two.stop
    assert two.low["median"] < math.log1p(0.05)
    more = plan.look(_pairs(0.09, 0.085, 0.095, 0.09))
    assert more.verdicts["median"] is Verdict.REGRESSION
    assert more.low["median"] > math.log1p(0.05)


def test_the_claim_bound_is_scipys_t() -> None:
    """The moderated bound against scipy.stats.t: variance (4 se_re^2 + (k-1) se_hk^2) /
    (4 + k - 1), t with 4 + k - 1 degrees of freedom."""
    est = pool(_pairs(0.05, 0.11, 0.08)["median"], 0.02)
    df = 4 + est.k - 1
    se = math.sqrt((4 * est.se_re**2 + (est.k - 1) * est.se_hk**2) / df)
    want = est.estimate - stats.t.ppf(0.99, df) * se
    assert est.lower_claim(0.01, 4.0) == pytest.approx(min(want, est.lower(0.01)), rel=1e-9)
    p = stats.t.sf((est.estimate - 0.03) / se, df)
    assert est.p_claim(0.03, 4.0) == pytest.approx(max(p, est.p_above(0.03)), rel=1e-9)
    # An infinite prior is the floor alone (the rule before); 0 is t with k - 1 df.
    assert est.lower_claim(0.01, math.inf) == est.lower(0.01)
    assert est.p_claim(0.03, math.inf) == est.p_above(0.03)
    hksj = est.estimate - stats.t.ppf(0.99, est.k - 1) * est.se_hk
    assert est.lower_claim(0.01, 0.0) == pytest.approx(min(hksj, est.lower(0.01)), rel=1e-9)


# --- the suite's spread ------------------------------------------------------------------


def _variances(spread_of_logs: float, seed: int, n: int = 200) -> tuple[list[float], list[int]]:
    """``n`` comparisons' pair variances with 1-5 degrees of freedom, around 0.001, their
    true variances differing by ``spread_of_logs`` (log-normal)."""
    rng = np.random.default_rng(seed)
    dfs = rng.integers(1, 6, n)
    true = 0.001 * np.exp(rng.normal(0.0, spread_of_logs, n))
    return list(true * rng.chisquare(dfs) / dfs), [int(d) for d in dfs]


def _prior_dfs(spread_of_logs: float, n: int = 200) -> list[float]:
    fits = [fit_spread(*_variances(spread_of_logs, seed, n)) for seed in range(20)]
    assert all(f is not None for f in fits)
    if n > 20:  # the typical size, whatever the spread
        assert all(f is not None and 0.0003 < f.var < 0.003 for f in fits)
    return sorted(f.df for f in fits if f is not None)


def test_the_suite_prior_counts_as_many_pairs_as_its_benchmarks_vary_alike() -> None:
    """Alike, a suite's prior counts as many pairs; unlike, as few, and each comparison's
    own spread decides. The bound on how much they differ leans to "unlike": one degree
    of freedom's log variance is too noisy to call 200 comparisons alike every time."""
    alike, unlike = _prior_dfs(0.0), _prior_dfs(1.0)
    assert alike[10] >= 6.0 and alike[-1] == SUITE_MAX_DF  # median, and most
    assert unlike[-1] <= 3.0 < alike[10]  # never lent more than a few pairs
    # Four comparisons: a weak prior, and never more pairs than it rests on.
    assert sorted(_prior_dfs(0.0, n=4))[10] <= 3.0


@pytest.mark.parametrize(
    "variances",
    [[0.001] * 3 + [0.0], [0.001, float("nan"), 0.002], [0.001, float("inf"), 0.001]],
)
def test_the_suite_prior_is_none_from_figures_that_are_not_finite(
    variances: list[float],
) -> None:
    assert fit_spread(variances, [1] * len(variances)) is None


def test_the_suite_spread_learns_only_from_comparisons_of_two_pairs() -> None:
    suite = SuiteSpread()
    one = pool([PairSummary(0.1, 0.01, 8, 0.0, False)], 0.02)
    two = pool([PairSummary(m, 0.01, 8, 0.0, False) for m in (0.0, 0.05)], 0.02)
    for _ in range(SUITE_MIN):
        suite.add("median", one)  # one pair tells nothing about the spread between pairs
    assert suite.of("median") is None
    for _ in range(SUITE_MIN - 1):
        suite.add("median", two)
    assert suite.of("median") is None  # too few to tell alike from unlike
    suite.add("median", two)
    prior = suite.of("median")
    assert prior is not None and prior.var >= 0.05**2 / 2
    assert suite.of("ttft") is None  # each metric its own


def test_the_suite_spread_is_about_each_comparisons_own_mean() -> None:
    """A real change moves a comparison's pairs together: it adds nothing to the spread."""
    same = pool([PairSummary(m, 0.01, 8, 0.0, False) for m in (0.0, 0.02, 0.01)], 0.02)
    moved = pool([PairSummary(m + 0.3, 0.01, 8, 0.0, False) for m in (0.0, 0.02, 0.01)], 0.02)
    assert same.s2 == pytest.approx(moved.s2)


@pytest.mark.parametrize(
    ("means", "prior", "verdict"),
    [
        # six pairs around +10% at 200 benchmarks: the floor as four pairs' worth leaves a t
        # with 9 degrees of freedom at the guard's far tail; a suite of alike benchmarks
        # whose spread is 4% (the pairs' own: 3.8%) lends it the normal's
        ((0.05, 0.13, 0.07, 0.11, 0.14, 0.06), None, Verdict.INCONCLUSIVE),
        ((0.05, 0.13, 0.07, 0.11, 0.14, 0.06), Spread(0.04**2, 200.0), Verdict.REGRESSION),
        # the same spread from a suite of unlike benchmarks lends little
        ((0.05, 0.13, 0.07, 0.11, 0.14, 0.06), Spread(0.04**2, 2.0), Verdict.INCONCLUSIVE),
        # one quiet pair at 0: unchanged on the floor; a suite whose pairs vary by 5%
        # holds the pass to that
        ((0.0,), None, Verdict.UNCHANGED),
        ((0.0,), Spread(0.05**2, 200.0), Verdict.INCONCLUSIVE),
        ((0.0,), Spread(0.005**2, 200.0), Verdict.UNCHANGED),
    ],
)
def test_the_suite_spread_moderates_every_bound(
    means: tuple[float, ...], prior: Spread | None, verdict: Verdict
) -> None:
    plan = PairedPlan(
        0.05, 0.05, ("median",), 200, 0.01, prior={"median": prior} if prior else None
    )
    look = plan.look({"median": [PairSummary(m, 0.005, 8, 0.0, False) for m in means]})
    assert look.verdicts["median"] is verdict
    assert look.prior == ({"median": prior} if prior else {})


def test_a_judge_starts_each_comparison_from_the_ones_it_finished() -> None:
    from pytest_infperf.core.options import BenchOptions
    from pytest_infperf.judge.judge import Judge

    judge, opts = Judge(family=100), BenchOptions()
    pairs = {"median": [PairSummary(m, 0.005, 8, 0.0, False) for m in (0.0, 0.04)]}
    for _ in range(SUITE_MIN):
        plan = judge.plan(opts, ("median",))
        assert plan.prior == {}
        judge.learn(plan.look(pairs))
    prior = judge.plan(opts, ("median",)).prior["median"]
    assert prior == judge.spread.of("median") and prior.var > 0


def test_a_noisy_benchmark_in_a_quiet_suite_is_held_to_its_own_spread() -> None:
    """Pairs that vary far more than the suite's spread: the claim falls back to their own
    spread (the F test), and the run-level guard asks it too at every look."""
    quiet = Spread(0.01**2, 200.0)
    noisy = [PairSummary(m, 0.005, 8, 0.0, False) for m in (0.02, 0.22, 0.06, 0.18, 0.10)]
    est = pool(noisy, 0.02)
    assert not est.fits(quiet) and est.fits(Spread(0.08**2, 200.0))
    lent = PairedPlan(0.05, 0.05, ("median",), 200, 0.01)
    lent.prior = {"median": quiet}
    look = lent.look({"median": noisy})
    alone = PairedPlan(0.05, 0.05, ("median",), 200, 0.01).look({"median": noisy})
    assert look.p_zero["median"] >= alone.p_zero["median"]  # never easier than alone
    assert look.verdicts["median"] is not Verdict.REGRESSION
    assert look.spread_record("median")["suite_spread"]["fits"] is False


def test_no_finite_pair_with_a_suite_prior_decides_nothing_and_never_overflows() -> None:
    prior = Spread(0.03**2, 1.0)  # a prior of one degree of freedom: a t with heavy tails
    none = pool([PairSummary(0.1, math.inf, 1, 0.0, False)], 0.02)
    assert none.k == 0 and none.upper_claim(0.05, prior) == math.inf
    plan = PairedPlan(0.05, 0.05, ("median",), prior={"median": Spread(5.0, 1.0)})
    look = plan.look({"median": [PairSummary(0.0, 0.01, 8, 0.0, False)]})
    assert look.high["median"] <= 46.0 and look.verdicts["median"] is Verdict.INCONCLUSIVE
    assert math.isinf(detectable_effect(1.0, 0.05, 0.05, margin=60.0))


def test_a_design_spends_alpha_over_exactly_its_looks() -> None:
    with pytest.raises(ValueError, match="6 shares of alpha for 12 looks"):
        Design(shares=(0.3, 0.2, 0.15, 0.15, 0.1, 0.1))
