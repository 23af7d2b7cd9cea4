"""Is a process pair biased by what lies in the working tree? Identical code, real plugin.

    python benchmarks/pair_offset.py [--reps 6] [--variants clean,emptydir,saved,stored]

One workload (``pyloop_50`` of ``decision_quality.py``: a 50-iteration Python loop, the
one most sensitive to a process's state) in a temporary git repository, A/A, a busy loop on
every core during each comparing run (so that most verdicts need worker pairs). Variants,
taken in turn within each repetition:

- ``clean``: ``--perf-ab=main``, nothing untracked in the working tree;
- ``emptydir``: ``--perf-ab=main`` with one empty untracked folder (``baselines/x``);
- ``saved``: ``--perf-ab=main`` after a ``--perf-save`` on main (``baselines/`` present);
- ``outside``: the same save into a folder outside the repository (``--perf-baselines``);
- ``stored``: ``--perf-compare=main`` after a ``--perf-save`` on main.

Prints, per variant, the mean log-ratio (head/base) of pair 1 (this process and the base
worker) and of the worker pairs, with its standard error, and the verdicts. Unbiased pairs
centre on 0.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from decision_quality import (
    Neighbour,
    git,
    make_repo,
    process_pairs,
    pytest_run,
    scenario_branch,
)

VARIANTS = ("clean", "emptydir", "saved", "outside", "stored")


def _mean(values: list[float]) -> str:
    if len(values) < 2:
        return f"n {len(values)}"
    se = statistics.stdev(values) / len(values) ** 0.5
    return f"n {len(values)}, {statistics.mean(values):+.2%} (se {se:.2%})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--variants", default="clean,emptydir,saved,stored")
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v in VARIANTS]
    first: dict[str, list[float]] = collections.defaultdict(list)
    workers: dict[str, list[float]] = collections.defaultdict(list)
    verdicts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp), 1)
        outside = Path(tmp) / "outside"
        for rep in range(args.reps):
            for variant in variants:
                git(repo, "checkout", "-q", "main")
                shutil.rmtree(repo / "baselines", ignore_errors=True)
                shutil.rmtree(outside, ignore_errors=True)
                if variant in ("saved", "stored"):
                    pytest_run(repo, "--perf-save")
                elif variant == "outside":
                    pytest_run(repo, "--perf-save", f"--perf-baselines={outside}")
                elif variant == "emptydir":
                    (repo / "baselines" / "x").mkdir(parents=True)
                scenario_branch(repo, "A/A", 1.0)
                mode = "--perf-compare=main" if variant == "stored" else "--perf-ab=main"
                with Neighbour(True):
                    doc, code, _ = pytest_run(repo, mode)
                if doc is None:
                    print(f"rep {rep + 1} {variant}: no JSON (exit {code})", file=sys.stderr)
                    continue
                for b in doc["benchmarks"]:
                    pairs = process_pairs(b)
                    logs = [p["summary"]["median"]["log_ratio"] for p in pairs]
                    first[variant] += logs[:1]
                    workers[variant] += logs[1:]
                    verdicts[variant][(b.get("comparison") or {}).get("verdict", "none")] += 1
                    shown = ", ".join(f"{x:+.3f}" for x in logs)
                    print(f"rep {rep + 1} {variant}: [{shown}]", file=sys.stderr, flush=True)
    print(f"\nA/A pyloop_50, neighbour on, {args.reps} repetitions; mean log-ratio head/base")
    print("| variant | pair 1 (this process) | worker pairs | verdicts |")
    print("|---|---|---|---|")
    for v in variants:
        counts = ", ".join(f"{k} {n}" for k, n in sorted(verdicts[v].items()))
        print(f"| {v} | {_mean(first[v])} | {_mean(workers[v])} | {counts} |")


if __name__ == "__main__":
    main()
