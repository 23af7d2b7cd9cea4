"""Split a suite over runners by what its benchmarks cost (pytest-split + the plugin).

    python benchmarks/split_balance.py [--groups 3]

A suite of 24 benchmarks whose costs differ 10x (12 with a 0.05 s budget, then 12 with
0.5 s; the order a suite often has: cheap micro-benchmarks, then models) runs in
a temporary git repository: once whole with ``--perf-save --store-durations`` (the
durations pytest-split reads: each test's wall time, the benchmark's included), then as
``--groups`` pytest-split groups, each in its own process as a runner would: split by
count (no durations file) and split by the recorded durations (pytest-split's
``least_duration`` algorithm). Prints each group's wall
time and the spread (slowest / fastest - 1); the target is within 25% with durations. The
groups' results are then merged with ``infperf merge`` and checked against the whole run's
benchmark set.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from decision_quality import git

BUDGETS = [0.05] * 12 + [0.5] * 12

SUITE = "import pytest\n\n" + "\n".join(
    f"@pytest.mark.infperf(max_time={b}, min_time={b})\n"
    f"def test_b{i:02d}(infer_bench):\n    infer_bench(lambda: sum(range(500)))\n"
    for i, b in enumerate(BUDGETS)
)


def pytest(repo: Path, *args: str) -> float:
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 5):
        raise SystemExit(proc.stdout[-3000:] + proc.stderr[-2000:])
    return time.perf_counter() - t0


def groups(repo: Path, n: int, label: str, durations: bool) -> list[float]:
    walls = []
    for i in range(1, n + 1):
        args = [f"--splits={n}", f"--group={i}", f"--perf-json={label}-{i}.json"]
        if durations:
            # Not pytest-split's default (contiguous chunks in file order): least_duration
            # gives each next-costliest test to the group with the least so far.
            args.append("--splitting-algorithm=least_duration")
        else:
            args.append("--durations-path=none.json")  # no file: pytest-split splits by count
        walls.append(pytest(repo, *args))
    spread = max(walls) / min(walls) - 1
    print(
        f"{label:13} groups: " + ", ".join(f"{w:.1f} s" for w in walls) + f"; spread {spread:.0%}"
    )
    return walls


def _merged(repo: Path, files: list[str], out: str) -> dict:  # type: ignore[type-arg]
    cmd = [sys.executable, "-m", "pytest_infperf", "merge", *files, "-o", out]
    subprocess.run(cmd, cwd=repo, check=False, capture_output=True)
    return json.loads((repo / out).read_text())


def same_verdicts(repo: Path, n: int) -> None:
    """The split comparing run against the unsplit one: verdicts and failing tests."""
    pytest(repo, "--perf-compare=HEAD", "--perf-json=cmp-whole.json")
    for i in range(1, n + 1):
        pytest(
            repo,
            "--perf-compare=HEAD",
            f"--splits={n}",
            f"--group={i}",
            "--splitting-algorithm=least_duration",
            f"--perf-json=cmp-{i}.json",
        )
    whole = json.loads((repo / "cmp-whole.json").read_text())
    merged = _merged(repo, [f"cmp-{i}.json" for i in range(1, n + 1)], "cmp-merged.json")

    def verdicts(doc: dict) -> dict[str, str]:  # type: ignore[type-arg]
        return {b["key"]: (b.get("comparison") or {}).get("verdict") for b in doc["benchmarks"]}

    a, b = verdicts(whole), verdicts(merged)
    differ = sorted(k for k in a if a[k] != b.get(k))
    tally = {v: list(a.values()).count(v) for v in sorted(set(a.values()), key=str)}
    print(
        f"--perf-compare=HEAD whole vs {n} merged groups: verdicts whole {tally}; "
        f"{len(differ)} of {len(a)} differ"
        + (f" ({', '.join(f'{k}: {a[k]} -> {b.get(k)}' for k in differ[:5])})" if differ else "")
        + f"; regressions whole {sum(v == 'regression' for v in a.values())}, "
        f"split {sum(v == 'regression' for v in b.values())}"
    )


def shards_save(repo: Path, n: int) -> None:
    """Each group saves into one baselines folder: the commit's file ends with every one."""
    for i in range(1, n + 1):
        pytest(
            repo,
            "--perf-save",
            f"--splits={n}",
            f"--group={i}",
            "--splitting-algorithm=least_duration",
            "--perf-baselines=split-baselines",
        )
    (saved,) = (repo / "split-baselines").glob("*/*.json")
    keys = {b["key"] for b in json.loads(saved.read_text())["benchmarks"]}
    print(f"{n} groups saved one baseline file holding {len(keys)} of {len(BUDGETS)} benchmarks")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        (repo / "test_suite.py").write_text(SUITE)
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", "suite")
        whole = pytest(repo, "--perf-save", "--store-durations", "--perf-json=whole.json")
        print(f"whole suite with --perf-save --store-durations: {whole:.1f} s")
        groups(repo, args.groups, "by-count", durations=False)
        groups(repo, args.groups, "by-durations", durations=True)
        same_verdicts(repo, args.groups)
        shards_save(repo, args.groups)
        shards = [f"by-durations-{i}.json" for i in range(1, args.groups + 1)]
        merge = [sys.executable, "-m", "pytest_infperf", "merge", *shards, "-o", "merged.json"]
        subprocess.run(merge, cwd=repo, check=True, capture_output=True)
        merged = json.loads((repo / "merged.json").read_text())
        whole_doc = json.loads((repo / "whole.json").read_text())
        same = [b["key"] for b in merged["benchmarks"]] == [
            b["key"] for b in whole_doc["benchmarks"]
        ]
        print(
            f"merged groups hold the whole run's {len(whole_doc['benchmarks'])} benchmarks: {same}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
