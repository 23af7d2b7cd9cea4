"""Claims on identical code where settling cannot happen: how often a run says faster or
slower when nothing changed.

    python benchmarks/stored_claims.py [--reps 30] [--remeasure 1]

Twenty benchmarks whose calls take 20 or 60 us at random (their medians cannot be pinned
down: most comparisons cannot guard the 5% tolerance), saved on ``main`` of a temporary
repository, then compared with identical code on a branch: ``pytest --perf-compare=FILE``
with main's stored baseline as a results file (stored passes only: settling needs a commit;
the drift guard at its default; ``--remeasure`` is
the expert ``remeasure``, 0 for the first pass alone). Each repetition is a fresh
repository. Prints per repetition the verdicts, and in all: the runs that claimed a
regression or an improvement, the verdicts that did, and those a claim was withheld from
over the run (reason ``multiplicity``). Quiet runs only: nothing else should run.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from decision_quality import commit_repo, git, pytest_run, stored_file

SUITE = """
import random, time

import pytest


def busy(us):
    end = time.perf_counter_ns() + us * 1000
    while time.perf_counter_ns() < end:
        pass


@pytest.mark.parametrize("i", range(20))
def test_model(infer_bench, i):
    infer_bench(lambda: busy(random.choice((20, 60))))
"""
INI = """[pytest]
infperf_max_time = 0.01
infperf_warmup = 2
infperf_rounds = 10
infperf_profile = off
infperf_expert = warmup_time=0.01 max_rounds=200 remeasure={remeasure}
"""
CLAIMS = ("regression", "improvement")


def one(root: Path, remeasure: int) -> list[dict[str, Any]]:
    """The comparisons of one repetition, in a fresh repository under ``root``."""
    repo = root / "repo"
    repo.mkdir()
    (repo / "test_models.py").write_text(SUITE)
    (repo / "pytest.ini").write_text(INI.format(remeasure=remeasure))
    commit_repo(repo, "suite")
    pytest_run(repo, "--perf-save")
    git(repo, "checkout", "-q", "-B", "aa", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "A/A")
    doc, _, _ = pytest_run(repo, f"--perf-compare={stored_file(repo)}", "--perf-warn-only")
    return [b["comparison"] for b in (doc or {}).get("benchmarks") or []]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--remeasure", type=int, default=1)
    args = parser.parse_args()
    runs_claimed = 0
    tally: collections.Counter[str] = collections.Counter()
    withheld = 0
    for rep in range(1, args.reps + 1):
        with tempfile.TemporaryDirectory() as tmp:
            found = one(Path(tmp), args.remeasure)
        said = collections.Counter(str(c.get("verdict")) for c in found)
        tally.update(said)
        withheld += sum(1 for c in found if c.get("reason") == "multiplicity")
        runs_claimed += any(said[v] for v in CLAIMS)
        print(f"rep {rep}/{args.reps}: {dict(said)}", file=sys.stderr, flush=True)
    total = sum(tally.values())
    print(
        f"identical code, stored passes only, remeasure={args.remeasure}; "
        f"{args.reps} runs of 20 benchmarks"
    )
    print(f"runs that claimed a regression or an improvement: {runs_claimed} of {args.reps}")
    print(
        f"verdicts: {total}; regression {tally['regression']}, improvement "
        f"{tally['improvement']}; claims withheld over the run: {withheld}; {dict(tally)}"
    )


if __name__ == "__main__":
    main()
