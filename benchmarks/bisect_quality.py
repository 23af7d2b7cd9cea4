"""Does ``infperf bisect`` name the right commit, quiet and with a noisy neighbour?

    python benchmarks/bisect_quality.py [--trials 5] [--step 0.15] [--neighbour]
        [--commits 12] [--at 7]

A temporary git repository holds five CPU benchmarks (Python loops, json, sort), each doing
``round(20 * factor)`` units of work with its factor in ``factors.json``. Of ``--commits``
commits, commit ``--at`` (counted from 1, the first holding the suite) multiplies one
benchmark's factor (``pyloop_500``) by ``1 + --step``; the others change a text file.
Each trial runs ``infperf bisect <first> <last> -k pyloop_500`` as a user would and reads
the commit it names; ``--neighbour`` runs a busy loop on every core for each trial's whole
bisect. Prints per trial: named right / wrong / none (and why), the steps measured, the
wall time; then the totals.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from decision_quality import ENV, Neighbour, git

SUITE = """
import json
from pathlib import Path

import pytest

FACTORS = json.loads((Path(__file__).parent / "factors.json").read_text())


def pyloop(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


DOC = {"k%d" % i: list(range(10)) for i in range(10)}
WORK = {
    "pyloop_50": lambda: pyloop(50),
    "pyloop_500": lambda: pyloop(500),
    "pyloop_5000": lambda: pyloop(5000),
    "json": lambda: json.dumps(DOC),
    "sort": lambda: sorted(range(300, 0, -1)),
}


@pytest.mark.parametrize("name", list(WORK))
def test_workload(infer_bench, name):
    fn, units = WORK[name], round(20 * FACTORS[name])

    def work():
        for _ in range(units):
            fn()

    infer_bench(work)
"""

TARGET = "pyloop_500"
BISECT = [sys.executable, "-m", "pytest_infperf", "bisect"]


def make_history(root: Path, commits: int, at: int, step: float) -> list[str]:
    repo = root / "repo"
    repo.mkdir()
    (repo / "test_bq.py").write_text(SUITE)
    factors = dict.fromkeys(("pyloop_50", "pyloop_500", "pyloop_5000", "json", "sort"), 1.0)
    (repo / "factors.json").write_text(json.dumps(factors))
    (repo / "pytest.ini").write_text("[pytest]\n")
    (repo / ".gitignore").write_text("__pycache__/\n*.json.out\n")
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(1, commits + 1):
        if i == at:
            factors[TARGET] *= 1 + step
            (repo / "factors.json").write_text(json.dumps(factors))
        elif i > 1:
            (repo / "notes.txt").write_text(f"note {i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"commit {i}")
        shas.append(
            subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
            ).stdout.strip()
        )
    return shas


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--step", type=float, default=0.15)
    parser.add_argument("--commits", type=int, default=12)
    parser.add_argument("--at", type=int, default=7)
    parser.add_argument("--neighbour", action="store_true", help="busy loops on every core")
    args = parser.parse_args()
    results: list[tuple[str, int, float]] = []
    with tempfile.TemporaryDirectory(prefix="infperf-bq-") as tmp:
        shas = make_history(Path(tmp), args.commits, args.at, args.step)
        repo = Path(tmp) / "repo"
        right = shas[args.at - 1]
        for trial in range(1, args.trials + 1):
            started = time.time()
            with Neighbour(args.neighbour):
                proc = subprocess.run(
                    [*BISECT, shas[0], shas[-1], "-k", TARGET],
                    cwd=repo,
                    capture_output=True,
                    text=True,
                    check=False,
                    env={**os.environ, **ENV},
                )
            took = time.time() - started
            lines = proc.stdout.splitlines()
            steps = sum(1 for ln in lines if ln.lstrip().startswith(("confirm", "search", "check")))
            named = next((ln for ln in lines if ln.startswith("first bad commit: ")), None)
            if named is None:
                outcome = "none"
                why = (lines or [proc.stderr.strip()])[-1]
            elif right in named:
                outcome, why = "right", f"commit {args.at}"
            else:
                wrong = named.split()[3]
                outcome, why = "WRONG", f"commit {shas.index(wrong) + 1}"
            results.append((outcome, steps, took))
            print(
                f"trial {trial}: {outcome:<5} exit {proc.returncode} {steps} steps "
                f"{took:.0f} s  {why[:150]}",
                flush=True,
            )
    neighbour = "busy loop on every core" if args.neighbour else "quiet"
    counts = {k: sum(1 for r in results if r[0] == k) for k in ("right", "WRONG", "none")}
    print(
        f"\n{args.commits} commits, +{args.step:.0%} at commit {args.at}, {neighbour}: "
        f"named right {counts['right']}/{len(results)}, wrong {counts['WRONG']}, none "
        f"{counts['none']}; steps median {statistics.median(r[1] for r in results):.0f}, "
        f"wall time median {statistics.median(r[2] for r in results):.0f} s"
    )


if __name__ == "__main__":
    main()
