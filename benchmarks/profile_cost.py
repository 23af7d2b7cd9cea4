"""What the profiled pass costs, and whether having it on moves any latency.

    python benchmarks/profile_cost.py [--reps 3] [--modes off,counts,full] [-k EXPR]

The suite is this project's ``examples/`` (as in ``real_models.py``), copied into a
temporary git repository. Per repetition, in turn (the order rotates between repetitions):

- a plain run per ``--perf-profile`` mode: wall time, and the profiled passes' own seconds
  (the JSON's ``work.cost_s``, summed) as a share of the run;
- A/A both ways, the stored pass alone (main's baseline as a results file, drift guard on): the
  baseline saved with the pass off and compared with it on (``counts``), then saved on and
  compared off. The pass runs after the timed samples; if it moved the latency of what
  follows (a model's next benchmark, the process's state), these verdicts and ratios would
  show it.

Prints per mode the median plain-run wall time and its ratio to ``off``, the pass's share
of the run, and per direction the verdicts and the median and spread of the latency ratios.
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
from decision_quality import git, pytest_run, stored_file
from real_models import make_repo


def _cost(doc: dict[str, Any] | None) -> float:
    return sum(
        float((b.get("work") or {}).get("cost_s") or 0.0) for b in (doc or {}).get("benchmarks", [])
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--modes", default="off,counts,full")
    parser.add_argument("-k", dest="keyword", help="only the examples matching -k")
    args = parser.parse_args()
    extra = ["-k", args.keyword] if args.keyword else []
    modes = args.modes.split(",")
    walls: dict[str, list[float]] = collections.defaultdict(list)
    shares: dict[str, list[float]] = collections.defaultdict(list)
    verdicts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    ratios: dict[str, list[float]] = collections.defaultdict(list)
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp))
        for rep in range(args.reps):
            order = modes[rep % len(modes) :] + modes[: rep % len(modes)]
            git(repo, "checkout", "-q", "main")
            for mode in order:
                doc, code, took = pytest_run(repo, f"--perf-profile={mode}", *extra)
                walls[mode].append(took)
                shares[mode].append(_cost(doc) / took)
                print(f"rep {rep + 1} plain {mode}: {took:.0f} s, exit {code}", file=sys.stderr)
            for saved, compared in (("off", "counts"), ("counts", "off")):
                git(repo, "checkout", "-q", "main")
                pytest_run(repo, "--perf-save", f"--perf-profile={saved}", *extra)
                git(repo, "checkout", "-q", "-B", "aa", "main")
                git(repo, "commit", "-q", "--allow-empty", "-m", "A/A")
                doc, code, took = pytest_run(
                    repo,
                    f"--perf-compare={stored_file(repo)}",
                    "--perf-warn-only",
                    f"--perf-profile={compared}",
                    *extra,
                )
                way = f"saved {saved}, compared {compared}"
                for b in (doc or {}).get("benchmarks", []):
                    c = b.get("comparison") or {}
                    verdicts[way][str(c.get("verdict"))] += 1
                    if c.get("ratio"):
                        ratios[way].append(float(c["ratio"]))
                print(f"rep {rep + 1} {way}: {took:.0f} s, exit {code}", file=sys.stderr)
    print(
        f"examples{' -k ' + args.keyword if args.keyword else ''}, {args.reps} repetitions, "
        f"{time.time() - started:.0f} s"
    )
    base = statistics.median(walls["off"]) if walls.get("off") else None
    for mode in modes:
        wall = statistics.median(walls[mode])
        vs = f" ({wall / base:.3f}x off)" if base else ""
        print(
            f"plain, profile {mode}: {wall:.1f} s{vs}; the pass's own seconds "
            f"{statistics.median(shares[mode]):.1%} of the run (runs: "
            f"{', '.join(f'{w:.0f}' for w in walls[mode])} s)"
        )
    for way, counts in verdicts.items():
        r = sorted(ratios[way])
        print(
            f"A/A {way}: {dict(counts)}; latency ratio median {statistics.median(r):.3f}, "
            f"middle 80% {r[len(r) // 10]:.3f}-{r[(9 * len(r)) // 10]:.3f}"
        )


if __name__ == "__main__":
    main()
