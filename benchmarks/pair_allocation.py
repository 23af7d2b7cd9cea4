"""How long each side samples in a process pair against how many pairs: the allocation of an
interleaved comparison, per family, from this machine's own spreads and costs.

    python benchmarks/pair_allocation.py RUN.json [RUN.json ...] [--reps 400] [--family 20]

The inputs are comparing runs' JSON (``benchmarks/real_models.py --keep DIR`` or
``decision_quality.py``'s logs): each interleaved benchmark's process pairs, with every
quad's contrast, the pair's seconds and the seconds its sides took to be ready. Per family
(the test function) and judged metric it measures:

- the quads' own spread (a quad contrast's sd within a pair, pooled over pairs), and the
  quads themselves, centred per pair: a simulated pair is made of runs of two neighbouring
  real quads, each from a random real pair, so heavy tails, busy spells and the
  dependence between neighbours stay (quiet and loaded runs apart: pass the runs of one
  condition);
- the between-process sd (each benchmark's pair means about their own mean, less what the
  pairs' own errors explain), the floor where no benchmark had two pairs;
- a quad's cost (a pair's seconds over its quads) and a pair's fixed cost besides its
  quads, as the JSON records them: the first pair's (this process against the base
  worker) and a later pair's (two workers already running, the model prepared again in
  each); a simulated pair draws one of the family's and tells the plan, as the plugin does.

Then it runs the real sequential rule (``judge.plan.PairedPlan``: its looks, its futility,
its pair cap) on comparisons drawn from those figures, with the quads per pair set by each
allocation: ``now`` (the plugin's ``more_quads``, told each pair's fixed cost as the
plugin tells it: a pair also ends at ``judge.plan.cheapest_quads``, ``n* = (sigma / tau)
sqrt(c_pair / c_quad)``, the classic two-stage allocation), ``before`` (the same rule not
told the cost: a pair's quads by its time and own error alone), ``n* alone`` (``n*`` up as
well as down, whatever the pair's time) and fixed counts. Each row: identical code (A/A),
a slowdown of exactly the threshold (+5%) and +10%, the verdicts and the mean seconds a
comparison took (fresh plan each). Not modelled: a worker pair's start (a session's first
pair of workers, several seconds, paid once per session, not per benchmark), what a pair
costs besides readiness and quads (its profiled passes, parking the workers), and that
400 comparisons bound a rare error only to about 1% (the run-level guard aims at 0.05% a
test). A generation's two metrics replay the same real pair's quads.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pytest_infperf.core.results import Verdict
from pytest_infperf.judge.plan import Design, PairedPlan, cheapest_quads
from pytest_infperf.stats import pooled as _pool

PASSED = (Verdict.UNCHANGED, Verdict.NO_REGRESSION)
#: Neighbouring real quads replayed together.
BLOCK = 2
COLUMNS = (
    "allocation",
    "A/A passed",
    "A/A inconclusive",
    "A/A regression",
    "+5% flagged",
    "+10% passed",
    "A/A seconds",
    "+10% caught",
    "+10% seconds",
    "pairs (A/A, +10%)",
    "quads a pair (A/A)",
)
#: A simulated comparison: its verdict, seconds, process pairs and quads a pair.
Outcome = tuple[Verdict, float, int, float]


class Family:
    """What the runs showed of one test function's interleaved comparisons."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.metrics: set[str] = set()
        #: Per metric, each pair's quad contrasts less their mean, in order, scaled back to
        #: the quads' own spread (centring shrinks it by (n - 1) / n).
        self.residuals: dict[str, list[list[float]]] = collections.defaultdict(list)
        self.pair_vars: dict[str, list[float]] = collections.defaultdict(list)
        #: Per metric, per benchmark run, its pairs' summaries.
        self.groups: dict[str, list[list[_pool.PairSummary]]] = collections.defaultdict(list)
        self.quad_s: list[float] = []
        self.first_ready: list[float] = []
        self.later_ready: list[float] = []

    def add(self, pairs: Sequence[dict[str, Any]]) -> None:
        per_metric: dict[str, list[_pool.PairSummary]] = collections.defaultdict(list)
        for i, pair in enumerate(pairs):
            quads = {m: q for m, q in (pair.get("quads") or {}).items() if len(q) >= 2}
            if not quads:
                continue
            n = min(len(q) for q in quads.values())
            self.quad_s.append(float(pair["seconds"]) / n)
            ready = float(pair.get("ready_seconds") or 0.0)
            if i == 0:
                self.first_ready.append(ready)
            elif not pair.get("started_workers"):
                self.later_ready.append(ready)
            for m, q in quads.items():
                self.metrics.add(m)
                mean = statistics.fmean(q)
                scale = math.sqrt(len(q) / (len(q) - 1))
                self.residuals[m].append([(v - mean) * scale for v in q])
                self.pair_vars[m].append(statistics.variance(q))
                per_metric[m].append(_pool.summarize_pair(q))
        for m, summaries in per_metric.items():
            self.groups[m].append(summaries)

    def sigma(self, m: str) -> float:
        return math.sqrt(statistics.fmean(self.pair_vars[m]))

    def tau(self, m: str) -> float | None:
        """The between-process sd: per benchmark of two pairs or more, the pair means'
        spread about their own mean less their own errors' share (None: no such one)."""
        excess: list[float] = []
        for summaries in self.groups[m]:
            if len(summaries) < 2:
                continue
            means = [s.mean for s in summaries]
            own = statistics.fmean(s.se**2 for s in summaries)
            excess.append(statistics.variance(means) - own)
        return math.sqrt(max(0.0, statistics.fmean(excess))) if excess else None

    def costs(self) -> tuple[float, float, float]:
        """A quad's seconds, the first pair's and a later pair's fixed seconds."""
        quad = statistics.median(self.quad_s)
        first = statistics.median(self.first_ready) if self.first_ready else 0.0
        later = statistics.median(self.later_ready) if self.later_ready else first
        return quad, first, later


class Fixed(PairedPlan):
    """A pair of exactly ``n`` quads (``slow_quads`` at least)."""

    def __init__(self, n: int, *args: Any) -> None:
        super().__init__(*args)
        self.n = n

    def more_quads(self, quads: Any, seconds: float, gpu: Any = None) -> bool:
        return min(len(q) for q in quads.values()) < self.n


class Before(PairedPlan):
    """The rule before the cost was weighed: a pair's quads by its time and own error."""

    def pair_ready(self, seconds: float) -> None:
        pass


class Cost(PairedPlan):
    """``n*`` alone, up as well as down: quads while one more narrows the pair more cheaply
    than a new pair would (``slow_quads`` to ``max_quads``), whatever the pair's time."""

    def more_quads(self, quads: Any, seconds: float, gpu: Any = None) -> bool:
        n = min(len(q) for q in quads.values())
        if n < self.design.slow_quads:
            return True
        if n >= self.design.max_quads:
            return False
        pair_s = self._pair_s or 0.0
        tau = {m: max(self.floor(m), self._spread.get(m, 0.0)) for m in quads}
        reach = self._reach_var
        return any(
            n < cheapest_quads(_pool.summarize_pair(q), tau[m], seconds / n, pair_s, reach)
            for m, q in quads.items()
        )


def load(paths: Sequence[Path]) -> dict[str, Family]:
    families: dict[str, Family] = {}
    for path in paths:
        doc = json.loads(path.read_text())
        for bench in doc.get("benchmarks") or []:
            extra = bench.get("extra") or {}
            pairs = (extra.get("ab") or extra.get("settle") or {}).get("pairs") or []
            if not pairs:
                continue
            name = bench["key"].split("::")[-1].split("[")[0]
            families.setdefault(name, Family(name)).add(pairs)
    return families


def simulate(
    plan: PairedPlan,
    fam: Family,
    taus: dict[str, float],
    effect: float,
    rng: np.random.Generator,
) -> Outcome:
    """One comparison: its verdict (the worst metric's), seconds and process pairs."""
    quad_s = fam.costs()[0]
    metrics = plan.quad_metrics
    summaries: dict[str, list[_pool.PairSummary]] = {m: [] for m in plan.metrics}
    seconds = 0.0
    quad_count = 0
    while True:
        k = len(summaries[plan.metrics[0]])
        # A readiness the family's pairs took (pair 1's, or a reused worker pair's), told to
        # the plan as the plugin tells it.
        ready = fam.first_ready if k == 0 else fam.later_ready or fam.first_ready
        ready_s = float(rng.choice(ready)) if ready else 0.0
        seconds += ready_s
        plan.pair_ready(ready_s)
        offsets = {m: rng.normal(0.0, taus[m]) for m in metrics}
        # Runs of two neighbouring real quads, each from a random pair at a random place
        # (never wrapping): busy spells and the dependence between neighbours stay, and a
        # replayed pair never sums its centred quads back to exactly nothing.
        quads: dict[str, list[float]] = {m: [] for m in metrics}
        block: list[tuple[int, int]] = []
        while True:
            if not block:
                source = int(rng.integers(len(fam.residuals[metrics[0]])))
                size = len(fam.residuals[metrics[0]][source])
                start = int(rng.integers(max(1, size - BLOCK + 1)))
                block = [(source, min(start + i, size - 1)) for i in range(BLOCK)]
            source, at = block.pop(0)
            for m in metrics:
                quads[m].append(effect + offsets[m] + fam.residuals[m][source][at])
            if not plan.more_quads(quads, quad_s * len(quads[metrics[0]])):
                break
        seconds += quad_s * len(quads[metrics[0]])
        quad_count += len(quads[metrics[0]])
        for m in metrics:
            summaries[m].append(_pool.summarize_pair(quads[m]))
        look = plan.look(summaries)
        if look.stop:
            verdicts = list(look.verdicts.values())
            worst = next(
                (v for v in (Verdict.REGRESSION, Verdict.INCONCLUSIVE) if v in verdicts),
                verdicts[0],
            )
            return worst, seconds, look.k, quad_count / look.k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="comparing runs' JSON")
    ap.add_argument("--reps", type=int, default=400, help="comparisons per cell")
    ap.add_argument("--family", type=int, default=20, help="perf tests in the run")
    ap.add_argument("--fixed", default="4,8,16,32", help="fixed quads per pair to try")
    ap.add_argument("-k", dest="only", help="only families whose name contains this")
    args = ap.parse_args()
    families = load(args.runs)
    floor = Design().tau_floor
    print(f"{len(args.runs)} runs; {args.reps} comparisons per cell; threshold 5%, alpha 0.05")
    for name, fam in sorted(families.items()):
        if args.only and args.only not in name:
            continue
        metrics = tuple(sorted(fam.metrics))
        quad_s, first_s, later_s = fam.costs()
        measured = {m: fam.tau(m) for m in metrics}
        taus = {m: floor if t is None else t for m, t in measured.items()}
        print(f"\n{name} ({len(fam.quad_s)} pairs in {len(fam.groups[metrics[0]])} verdicts)")
        for m in metrics:
            t = measured[m]
            print(
                f"  {m}: quad sd {fam.sigma(m):.2%}, between-process sd "
                + (
                    "not measured (one pair each): the floor's 2.0% drawn"
                    if t is None
                    else f"{t:.2%}"
                )
            )
        print(
            f"  a quad {quad_s * 1000:.0f} ms; fixed cost of the first pair {first_s:.2f} s, "
            f"of a later one {later_s:.2f} s"
        )
        rule = (0.05, 0.05, metrics, args.family)
        plans: dict[str, Callable[[], PairedPlan]] = {
            "now": functools.partial(PairedPlan, *rule),
            "before (no cost weighed)": functools.partial(Before, *rule),
            "n* alone": functools.partial(Cost, *rule),
        }
        for n in (int(x) for x in args.fixed.split(",")):
            plans[f"{n} quads"] = functools.partial(Fixed, n, *rule)
        print("  | " + " | ".join(COLUMNS) + " |")
        print("  |" + "---|" * len(COLUMNS))
        for label, plan in plans.items():
            cells: dict[str, list[Outcome]] = {}
            for scen, effect in (("aa", 0.0), ("p5", math.log(1.05)), ("p10", math.log(1.10))):
                rng = np.random.default_rng(20261127)
                cells[scen] = [simulate(plan(), fam, taus, effect, rng) for _ in range(args.reps)]
            print(f"  | {label} | " + " | ".join(_row(cells)) + " |")


def _share(runs: Sequence[Outcome], verdicts: tuple[Verdict, ...]) -> float:
    return sum(r[0] in verdicts for r in runs) / len(runs)


def _row(cells: dict[str, list[Outcome]]) -> list[str]:
    aa, p5, p10 = cells["aa"], cells["p5"], cells["p10"]
    mean = statistics.fmean
    return [
        f"{_share(aa, PASSED):.0%}",
        f"{_share(aa, (Verdict.INCONCLUSIVE,)):.0%}",
        f"{_share(aa, (Verdict.REGRESSION,)):.1%}",
        f"{_share(p5, (Verdict.REGRESSION,)):.1%}",
        f"{_share(p10, PASSED):.1%}",
        f"{mean(r[1] for r in aa):.1f}",
        f"{_share(p10, (Verdict.REGRESSION,)):.0%}",
        f"{mean(r[1] for r in p10):.1f}",
        f"{mean(r[2] for r in aa):.1f}, {mean(r[2] for r in p10):.1f}",
        f"{mean(r[3] for r in aa):.1f}",
    ]


if __name__ == "__main__":
    main()
