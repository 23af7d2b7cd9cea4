"""The interleaved gate at a suite's size: whole runs of 50-200 benchmarks, simulated
through the judge's own plan (``Judge.plan``, ``PairedPlan.look``, ``Judge.learn``).

    python benchmarks/suite_power.py [--runs 200] [--sizes 50,200]
        [--spreads 0.02,0.035,0.05,0.08] [--designs now,"eight pairs",alone,before]
        [--hetero 0.6] [--groups N] [--within SD] [--outliers SHARE:TIMES] [--se 0.01]
        [--seed N]

A run judges its benchmarks one after the other, as a session does: each comparison draws
process pairs one at a time (a pair's log-ratio is the benchmark's true effect, plus a
between-process offset of sd ``tau``, plus its own error: a standard error between 0.5x and
1.5x ``--se``, reported with the noise of 16 quads) and asks the plan after each pair
whether to stop; its pairs then join the suite's spread that later comparisons start from.
``--hetero`` draws each test function's own ``tau`` around the run's spread (log-normal,
this sd of log; ``--groups`` functions, the benchmarks spread over them at random), and
``--within`` each benchmark's around its function's: a suite of quiet and noisy models;
``--outliers 0.05:3`` makes a share of the benchmarks that many times as noisy as the rest
(a model on several threads among single-threaded ones).

Each run holds identical-code benchmarks, eight at +10% and eight at +5% (the threshold),
spread over the run's order. Designs: ``now`` (the suite's spread learned,
``Design.suite``; twelve process pairs at most, the last four for the few undecided after
eight), ``eight pairs`` (the same with eight: the previous release), ``alone`` (each
comparison on its own pairs, ``suite=False``, twelve), ``six pairs`` (the suite's spread,
six at most), ``before`` (each comparison alone, six pairs at most: two releases ago).
Printed per cell: runs whose identical code failed (any
regression claimed on it), identical benchmarks inconclusive, +10% caught, +5% passed (unchanged or
no-regression: the error a pass is held to), the share of identical benchmarks' p of "no
slower at all" under 0.05 (uniform: 5%), and the mean pairs a comparison took.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from sequential_design import until_stop

from pytest_infperf.core.options import BenchOptions
from pytest_infperf.core.results import Verdict
from pytest_infperf.judge.judge import Judge
from pytest_infperf.judge.plan import Design
from pytest_infperf.judge.rules import Policy

DESIGNS = {
    "now": Design(),
    "alone": Design(suite=False),
    "eight pairs": Design(max_pairs=8, shares=(0.24, 0.16, 0.12, 0.12, 0.09, 0.09, 0.09, 0.09)),
    "fourteen pairs": Design(
        max_pairs=14, shares=(0.22, 0.14, 0.11, 0.11, 0.08, 0.08, 0.06, 0.05, *(0.025,) * 6)
    ),
    "six pairs": Design(max_pairs=6, shares=(0.3, 0.2, 0.15, 0.15, 0.1, 0.1)),
    "before": Design(suite=False, max_pairs=6, shares=(0.3, 0.2, 0.15, 0.15, 0.1, 0.1)),
}
CHANGED = 8
PASSED = (Verdict.UNCHANGED, Verdict.NO_REGRESSION)


@dataclasses.dataclass
class Cell:
    runs_failed: int = 0
    runs: int = 0
    same: int = 0
    same_open: int = 0
    same_low_p: int = 0
    caught: int = 0
    at_passed: int = 0
    pairs: int = 0
    comparisons: int = 0


def one_run(cell: Cell, n: int, spread: float, design: Design, args, rng) -> None:
    effects = np.zeros(n)
    order = rng.permutation(n)
    effects[order[:CHANGED]] = math.log(1.10)
    effects[order[CHANGED : 2 * CHANGED]] = math.log(1.05)
    groups = rng.integers(0, args.groups, n) if args.groups else np.arange(n)
    own = rng.normal(0.0, args.hetero, n)[groups] + rng.normal(0.0, args.within, n)
    taus = spread * np.exp(own - (args.hetero**2 + args.within**2) / 2)
    if args.outliers:
        share, times = (float(x) for x in args.outliers.split(":"))
        taus[rng.random(n) < share] *= times
    judge = Judge(Policy(run_alpha=0.01), family=n)
    opts = BenchOptions()
    failed = False
    for effect, tau in zip(effects, taus, strict=True):
        plan = judge.plan(opts, ("median",))
        plan.design = design
        if not design.suite:
            plan.prior = {}
        look = until_stop(plan, float(effect), float(tau), args.se, rng)
        judge.learn(look)
        verdict = look.verdicts["median"]
        cell.pairs += look.k
        cell.comparisons += 1
        if effect == 0.0:
            cell.same += 1
            failed |= verdict is Verdict.REGRESSION
            cell.same_open += verdict is Verdict.INCONCLUSIVE
            cell.same_low_p += look.p_zero["median"] < 0.05
        elif effect > 0.07:
            cell.caught += verdict is Verdict.REGRESSION
        else:
            cell.at_passed += verdict in PASSED
    cell.runs += 1
    cell.runs_failed += failed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--sizes", default="50,200")
    ap.add_argument("--spreads", default="0.02,0.035,0.05,0.08")
    ap.add_argument("--designs", default="now,alone")
    ap.add_argument("--hetero", type=float, default=0.0)
    ap.add_argument(
        "--groups", type=int, default=0, help="test functions the suite sweeps (0: each its own)"
    )
    ap.add_argument("--within", type=float, default=0.0, help="spreads' log sd in a function")
    ap.add_argument(
        "--outliers", help="SHARE:TIMES: that share of benchmarks this many times as noisy"
    )
    ap.add_argument("--se", type=float, default=0.01, help="a pair's own standard error")
    ap.add_argument("--seed", type=int, default=20261128)
    args = ap.parse_args()
    print(
        f"{args.runs} runs per cell; pair se {args.se:.1%} (0.5-1.5x); benchmarks' spreads "
        f"log-normal sd {args.hetero} over {args.groups or 'all'} functions, {args.within} "
        "within; "
        "threshold 5%, alpha 0.05, run alpha 0.01; "
        f"{CHANGED} benchmarks at +10% and {CHANGED} at +5% in each run"
    )
    print(
        "| design | benchmarks | spread | identical: runs failed | identical: inconclusive "
        "| +10% caught | +5% passed | identical: p < 0.05 | pairs |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.sizes.split(",")):
        for spread in (float(x) for x in args.spreads.split(",")):
            for name in args.designs.split(","):
                rng = np.random.default_rng(args.seed)
                cell = Cell()
                for _ in range(args.runs):
                    one_run(cell, n, spread, DESIGNS[name], args, rng)
                c = cell
                print(
                    f"| {name} | {n} | {spread:.1%} | {c.runs_failed}/{c.runs} | "
                    f"{c.same_open / c.same:.1%} | {c.caught / (CHANGED * c.runs):.0%} | "
                    f"{c.at_passed / (CHANGED * c.runs):.1%} | {c.same_low_p / c.same:.1%} | "
                    f"{c.pairs / c.comparisons:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
