"""What ``--perf-budget`` does to a comparing run's time and verdicts, against the same
comparison without it.

    python benchmarks/budget_cost.py [--reps 1] [--budget 1.5x] [--neighbour] [-k EXPR]

The suite is this project's ``examples/`` (as in ``real_models.py``), copied into a
temporary git repository. The baseline is saved on main, quiet (what it records as
``run_seconds`` is what a multiple multiplies); then, per repetition, on a commit that
changes nothing (A/A), ``--perf-compare=main`` with and without the budget, in an order
that alternates between repetitions, quiet or beside a busy loop on every core
(``--neighbour``, started and stopped around each comparing run).

Prints per variant the wall time as a multiple of the baseline's run, whether the budgeted
run ended within its budget, the verdicts, the reasons of what stayed undecided, and any
benchmark the budgeted run called a regression that the full run of the same repetition
did not (the budget's promise: none).
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from decision_quality import Neighbour, git, pytest_run
from real_models import make_repo


def _verdicts(doc: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {b["key"]: b.get("comparison") or {} for b in (doc or {}).get("benchmarks", [])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--budget", default="1.5x")
    parser.add_argument("--neighbour", action="store_true")
    parser.add_argument("-k", dest="keyword", help="only the examples matching -k")
    args = parser.parse_args()
    extra = ["-k", args.keyword] if args.keyword else []
    walls: dict[str, list[float]] = collections.defaultdict(list)
    verdicts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    reasons: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    # How each verdict was reached: the stored pass alone, settled (and why), or not
    # settled (and why): where a run's time went.
    routes: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    over: list[str] = []
    promised: list[str] = []
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp))
        doc, code, took = pytest_run(repo, "--perf-save", *extra)
        plain = float((doc or {}).get("run_seconds") or took)
        print(f"saved: {took:.0f} s wall, run_seconds {plain:.1f}, exit {code}", file=sys.stderr)
        git(repo, "checkout", "-q", "-b", "aa")
        git(repo, "commit", "-q", "--allow-empty", "-m", "A/A")
        variants = {"full": [], "budget": [f"--perf-budget={args.budget}"]}
        for rep in range(args.reps):
            order = list(variants) if rep % 2 == 0 else list(reversed(variants))
            docs: dict[str, dict[str, dict[str, Any]]] = {}
            for name in order:
                with Neighbour(args.neighbour):
                    doc, code, took = pytest_run(
                        repo, "--perf-compare=main", "--perf-warn-only", *variants[name], *extra
                    )
                walls[name].append(took)
                docs[name] = _verdicts(doc)
                for c in docs[name].values():
                    verdicts[name][str(c.get("verdict"))] += 1
                    how = c.get("settled_because") or c.get("not_settled") or "stored pass"
                    routes[name][f"{c.get('decided_by')}: {str(how)[:40]}"] += 1
                    if c.get("verdict") == "inconclusive":
                        reasons[name][str(c.get("reason"))] += 1
                print(f"rep {rep + 1} {name}: {took:.0f} s, exit {code}", file=sys.stderr)
            if walls["budget"][-1] > _budget_s(args.budget, plain):
                over.append(f"rep {rep + 1}: {walls['budget'][-1]:.0f} s")
            for key, c in docs["budget"].items():
                full = docs["full"].get(key, {}).get("verdict")
                if c.get("verdict") == "regression" and full != "regression":
                    promised.append(f"rep {rep + 1} {key}: full run {full}")
    print(
        f"examples{' -k ' + args.keyword if args.keyword else ''}, A/A, "
        f"{'beside a busy loop on every core' if args.neighbour else 'quiet'}, "
        f"{args.reps} repetitions, budget {args.budget} of a plain run of {plain:.0f} s, "
        f"{time.time() - started:.0f} s in all"
    )
    for name in variants:
        multiples = [w / plain for w in walls[name]]
        print(
            f"{name}: {statistics.median(multiples):.2f}x the plain run at the median "
            f"(runs: {', '.join(f'{m:.2f}x' for m in multiples)}); verdicts "
            f"{dict(verdicts[name])}; undecided because {dict(reasons[name]) or 'nothing'}; "
            f"decided by {dict(routes[name])}"
        )
    print(f"budgeted runs over the budget: {over or 'none'}")
    print(f"regressions the budgeted run called and the full run did not: {promised or 'none'}")


def _budget_s(spec: str, plain: float) -> float:
    return plain * float(spec[:-1]) if spec.endswith("x") else float(spec.rstrip("s"))


if __name__ == "__main__":
    main()
