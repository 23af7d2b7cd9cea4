"""The interleaved plan's sequential rule on synthetic process pairs: what it passes, flags
and costs, for a range of between-process sds. No timing: the plan itself, fed pairs.

    python benchmarks/sequential_design.py [--reps 2000] [--se 0.01] [--family 12]
        [--designs "now,futility as before"]

Each comparison draws process pairs one at a time: the pair's log-ratio is the true effect,
plus a between-process offset (sd ``tau``), plus its own sampling error (a standard error
between 0.5x and 1.5x ``--se``, reported with the noise of 16 quads), and asks the real
``judge.plan.PairedPlan.look`` after each pair whether to stop (futility, the run-level
guard at ``--family`` perf tests and everything else included). Scenarios: identical code
(A/A), a slowdown of exactly the threshold (+5%: a regression claim there is the error
alpha bounds, and so is a "no regression" claim), and +10%.

Designs: ``now`` (what the plugin uses: group-sequential critical values, tau floor 2%,
regression claims also held to the moderated t of the pairs' spread, the floor counting as
``Design.claim_prior_df`` = 4 pairs, futility judged on the predictive chance of a decision),
``futility as before`` (the same, futility taking the current estimate as the truth: the
rule until 2026-11-25), ``t, k - 1`` (no prior: the Hartung-Knapp-Sidik-Jonkman
bound, exact at any sd but weak with few pairs),
``floor only`` (the rule until 2026-11-24: claims held to the floor-based bound alone,
``claim_prior_df`` infinite),
``bonferroni`` (the rule until 2026-11-24: alpha x share at each look, shares 0.4, 0.25,
0.1, 0.1, 0.075, 0.075, the run guard at a fixed level, tau floor 1.5%, floor only).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pytest_infperf.core.results import Verdict
from pytest_infperf.judge.plan import Design, Look, PairedPlan
from pytest_infperf.stats.pooled import PairSummary

_N = NormalDist()
OLD_SHARES = (0.4, 0.25, 0.1, 0.1, 0.075, 0.075)


class Bonferroni(PairedPlan):
    """The former rule: each look at alpha x its share, the run guard at a fixed level."""

    def _z(self, k: int, alpha: float | None = None, guard: bool = False) -> float:
        a = self.alpha if alpha is None else alpha
        share = 1.0 if guard else OLD_SHARES[min(k, len(OLD_SHARES)) - 1]
        return _N.inv_cdf(1.0 - a * share)


def plans(family: int) -> dict[str, PairedPlan]:
    return {
        "now": PairedPlan(0.05, 0.05, ("median",), family, 0.01),
        "futility as before": PairedPlan(
            0.05, 0.05, ("median",), family, 0.01, Design(futility_rule="conditional")
        ),
        "t, k - 1": PairedPlan(0.05, 0.05, ("median",), family, 0.01, Design(claim_prior_df=0.0)),
        "floor only": PairedPlan(
            0.05, 0.05, ("median",), family, 0.01, Design(claim_prior_df=math.inf)
        ),
        "bonferroni": Bonferroni(
            0.05,
            0.05,
            ("median",),
            family,
            0.01,
            Design(tau_floor=0.015, shares=OLD_SHARES, claim_prior_df=math.inf, max_pairs=6),
        ),
    }


def until_stop(
    plan: PairedPlan, effect: float, tau: float, se: float, rng: np.random.Generator
) -> Look:
    """One comparison: synthetic process pairs, one at a time, until the plan stops."""
    pairs: list[PairSummary] = []
    while True:
        own = se * rng.uniform(0.5, 1.5)
        mean = effect + rng.normal(0.0, tau) + rng.normal(0.0, own)
        reported = own * math.sqrt(rng.chisquare(15) / 15)
        pairs.append(PairSummary(mean, reported, 16, 0.0, False))
        look = plan.look({"median": pairs})
        if look.stop:
            return look


def one(
    plan: PairedPlan, effect: float, tau: float, se: float, rng: np.random.Generator
) -> tuple[Verdict, int]:
    look = until_stop(plan, effect, tau, se, rng)
    return look.verdicts["median"], look.k


def _share(cell: tuple[list[Verdict], list[int]], verdicts: tuple[Verdict, ...]) -> str:
    return f"{sum(v in verdicts for v in cell[0]) / len(cell[0]):.1%}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--se", type=float, default=0.01, help="a pair's own standard error")
    ap.add_argument("--family", type=int, default=12, help="perf tests in the run")
    ap.add_argument("--taus", default="0.01,0.02,0.03,0.05,0.07,0.09")
    ap.add_argument("--designs", help="comma-separated design names (default: all)")
    args = ap.parse_args()
    passed = (Verdict.UNCHANGED, Verdict.NO_REGRESSION)
    print(
        f"{args.reps} comparisons per cell; pair se {args.se:.1%} (0.5-1.5x), "
        f"{args.family} perf tests, threshold 5%, alpha 0.05, run alpha 0.01"
    )
    print(
        "| design | between-process sd | A/A: regression | A/A: inconclusive | A/A: pairs | "
        "+5%: flagged | +5%: passed | +10%: flagged | +10%: passed | +10%: pairs |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for tau in (float(t) for t in args.taus.split(",")):
        chosen = plans(args.family)
        if args.designs:
            chosen = {n: chosen[n] for n in args.designs.split(",")}
        for name, plan in chosen.items():
            cells: dict[str, tuple[list[Verdict], list[int]]] = {}
            for label, effect in (("aa", 0.0), ("at", math.log(1.05)), ("p10", math.log(1.1))):
                rng = np.random.default_rng(20261124)
                runs = [one(plan, effect, tau, args.se, rng) for _ in range(args.reps)]
                cells[label] = ([v for v, _ in runs], [k for _, k in runs])

            aa, at, p10 = cells["aa"], cells["at"], cells["p10"]
            print(
                f"| {name} | {tau:.1%} | {_share(aa, (Verdict.REGRESSION,))} | "
                f"{_share(aa, (Verdict.INCONCLUSIVE,))} | {np.mean(aa[1]):.2f} | "
                f"{_share(at, (Verdict.REGRESSION,))} | {_share(at, passed)} | "
                f"{_share(p10, (Verdict.REGRESSION,))} | {_share(p10, passed)} | "
                f"{np.mean(p10[1]):.2f} |"
            )


if __name__ == "__main__":
    main()
