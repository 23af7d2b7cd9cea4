"""Replay the interleaved plan on the process pairs that real runs recorded, under two claim
rules, so that both judge the same data: no timing, only kept results JSON.

    python benchmarks/replay_pairs.py RESULTS.json... [--family 20]

Each comparison's pairs (``extra.settle.pairs[*].quads``, written by every interleaved
verdict; ``benchmarks/real_models.py --keep DIR`` keeps a run's JSON) are fed to
``judge.plan.PairedPlan.look`` one pair at a time, as the run did, until the plan stops or
the recorded pairs run out (then "wanted more": the run itself had stopped, under the rule
it ran with). Rules: ``now`` (regression claims also held to the moderated t of the pairs'
spread) and ``floor only`` (the rule until 2026-11-24). Prints each rule's verdict counts
and every comparison where the two differ.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pytest_infperf.judge.plan import Design, PairedPlan
from pytest_infperf.stats.pooled import PairSummary, summarize_pair

#: The rule until 2026-11-24: regression claims held to the floor-based bound alone.
FLOOR_ONLY = Design(claim_prior_df=math.inf)


def replay(plan: PairedPlan, recorded: list[dict[str, list[float]]]) -> tuple[str, int]:
    """The plan's verdict over the recorded pairs, marked when it wanted more than were run."""
    summaries: dict[str, list[PairSummary]] = {m: [] for m in plan.metrics}
    look = None
    for quads in recorded:
        for m in plan.metrics:
            summaries[m].append(summarize_pair(quads[m]))
        look = plan.look(summaries)
        if look.stop:
            break
    assert look is not None
    order = ("regression", "inconclusive", "improvement", "no-regression", "unchanged")
    worst = min((v.value for v in look.verdicts.values()), key=order.index)
    return worst + ("" if look.stop else " (wanted more)"), look.k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--family", type=int, default=20, help="perf tests in each run")
    args = ap.parse_args()
    counts: dict[str, collections.Counter[str]] = {
        "now": collections.Counter(),
        "floor only": collections.Counter(),
    }
    differ: list[str] = []
    for path in args.results:
        doc = json.loads(path.read_text())
        for bench in doc["benchmarks"]:
            pairs = ((bench.get("extra") or {}).get("settle") or {}).get("pairs") or []
            if not pairs:
                continue
            recorded = [p["quads"] for p in pairs]
            metrics = tuple(sorted(recorded[0]))
            comp = bench.get("comparison") or {}
            alpha, threshold = comp.get("alpha", 0.05), comp.get("threshold", 0.05)
            out = {}
            for name, design in (("now", Design()), ("floor only", FLOOR_ONLY)):
                plan = PairedPlan(threshold, alpha, metrics, args.family, 0.01, design)
                out[name] = replay(plan, recorded)
                counts[name][out[name][0].split(" (")[0]] += 1
            if out["now"][0] != out["floor only"][0]:
                differ.append(
                    f"{path.name} {bench['key'].split('::')[-1]}: now {out['now'][0]} at "
                    f"{out['now'][1]} pairs, floor only {out['floor only'][0]} at "
                    f"{out['floor only'][1]} (recorded {len(recorded)})"
                )
    for name, counter in counts.items():
        total = sum(counter.values())
        print(
            f"{name}: {total} comparisons: "
            + ", ".join(f"{k} {v}" for k, v in counter.most_common())
        )
    print(f"{len(differ)} differ:")
    for line in differ:
        print("  " + line)


if __name__ == "__main__":
    main()
