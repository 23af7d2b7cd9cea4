"""The gate at a suite's size on real models: a 100-benchmark sweep compared with
``--perf-ab=main``, 95 cells identical and five slowed by 10-25%, quiet and beside a busy
loop on every core.

    python benchmarks/suite_sweep.py [--reps 2] [--conditions quiet,neighbour] [--keep DIR]

The suite is ``benchmarks/sweep_suite/test_sweep.py`` (a tiny BERT and DistilBERT over
batch x sequence, a small CNN, torch MLPs over width x depth, ONNX Runtime MLPs, a
plain-Python preprocessor; one thread each), in a temporary git repository with
``infperf_max_time = 1`` and a warm-up of 0.5 s at most (what a team sweeping 100 cells
sets). A branch slows five cells by a busy wait after each forward (``slow.json``). Per
condition, one plain ``pytest`` run of the branch (the cost's reference), then ``--reps``
comparing runs, one at a time; the neighbour (``while True: pass`` on every core) is
started before each run of that condition and stopped after it.

Prints per comparing run: its wall time and the ratio to the plain run's; of the 95
identical cells, regressions claimed, inconclusive, and the mean log-ratio with its
standard error (the sides' exchangeability: 0 on identical code), and the same of their
process pairs by kind (pair 1, whose head is this process; worker pairs with the base or
the head leading their quads); of the five slowed cells, each one's ratio and verdict;
the suite's between-process spread as the run's JSON records it. ``--keep DIR`` copies
each run's JSON and output there (``python benchmarks/compare_time.py DIR/*.json`` splits
the time).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from decision_quality import Neighbour, commit_repo, git, pytest_run

SUITE = Path(__file__).resolve().parent / "sweep_suite" / "test_sweep.py"
SLOWED = {
    "test_transformer[bert-4-32]": 1.10,
    "test_transformer[distilbert-8-16]": 1.12,
    "test_cnn[4-32]": 1.15,
    "test_mlp[256-2]": 1.20,
    "test_mlp[1024-1]": 1.25,
}
INI = "[pytest]\ninfperf_max_time = 1.0\ninfperf_expert = warmup_time=0.5\n"


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    shutil.copy(SUITE, repo / SUITE.name)
    (repo / "slow.json").write_text("{}\n")
    (repo / "pytest.ini").write_text(INI)
    commit_repo(repo, "sweep")
    git(repo, "checkout", "-q", "-b", "changed")
    (repo / "slow.json").write_text(json.dumps(SLOWED, indent=1) + "\n")
    git(repo, "commit", "-qam", "five cells slower")
    return repo


def _cell(bench: dict[str, Any]) -> str:
    return str(bench.get("nodeid", "")).rsplit("::", 1)[-1]


def report(doc: dict[str, Any], took: float, plain: float, rc: int) -> None:
    benches = doc.get("benchmarks") or []
    same = [b for b in benches if _cell(b) not in SLOWED]
    verdicts = [(b.get("comparison") or {}).get("verdict") for b in same]
    logs = [
        math.log(c["ratio"])
        for b in same
        if (c := b.get("comparison") or {}).get("ratio") and c.get("verdict") != "error"
    ]
    mean = statistics.fmean(logs) if logs else math.nan
    se = statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else math.nan
    print(
        f"  exit {rc}, {took:.0f} s ({took / plain:.2f}x plain); identical cells: "
        f"{verdicts.count('regression')} regression, {verdicts.count('improvement')} "
        f"improvement, {verdicts.count('inconclusive')} inconclusive of {len(same)}; "
        f"mean log-ratio {mean:+.4f} (se {se:.4f})"
    )
    for b in benches:
        if (cell := _cell(b)) in SLOWED:
            c = b.get("comparison") or {}
            print(
                f"    {cell} x{SLOWED[cell]}: {c.get('ratio') or math.nan:.3f} "
                f"{c.get('verdict')} [{c.get('ci_low') or math.nan:.3f}, "
                f"{c.get('ci_high') or math.nan:.3f}], {c.get('n')} pairs"
            )
    kinds: dict[str, list[float]] = {}
    for b in same:
        for i, pair in enumerate(((b.get("extra") or {}).get("ab") or {}).get("pairs") or []):
            kind = (
                "pair 1" if i == 0 else "head leading" if pair.get("head_first") else "base leading"
            )
            kinds.setdefault(kind, []).append(pair["summary"]["median"]["log_ratio"])
    print(
        "    identical cells' pairs: "
        + "; ".join(
            f"{kind} {statistics.fmean(v):+.2%} "
            f"(se {statistics.stdev(v) / math.sqrt(len(v)):.2%}, n {len(v)})"
            for kind, v in sorted(kinds.items())
            if len(v) > 1
        )
    )
    spread = next(
        (
            s
            for b in reversed(benches)
            if (s := ((b.get("comparison") or {}).get("details") or {}).get("suite_spread"))
        ),
        None,
    )
    if spread:
        print(f"    suite spread: {spread}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--conditions", default="quiet,neighbour")
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp))
        for condition in args.conditions.split(","):
            busy = condition == "neighbour"
            with Neighbour(busy):
                _, rc, plain = pytest_run(repo)
            print(f"{condition}: plain run {plain:.0f} s (exit {rc})", flush=True)
            for rep in range(1, args.reps + 1):
                log = args.keep / f"{condition}-{rep}" if args.keep else None
                with Neighbour(busy):
                    doc, rc, took = pytest_run(repo, "--perf-ab=main", log=log)
                print(f" {condition} run {rep}:", flush=True)
                if doc is None:
                    print(f"  exit {rc}, no JSON")
                    continue
                report(doc, took, plain, rc)
                sys.stdout.flush()


if __name__ == "__main__":
    main()
