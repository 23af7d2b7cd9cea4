"""``infperf merge``: the shards of a suite split with pytest-split, merged into what one
unsplit run writes (issue 26). Real pytest runs, real pytest-split groups."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import infperf

pytest.importorskip("pytest_split")

SUITE = """
import pytest

@pytest.mark.parametrize("n", [200, 400, 800, 1600, 3200, 6400])
def test_sum(infer_bench, n):
    infer_bench(lambda: sum(range(n)))

def test_plain():
    pass
"""
FAST = ["-o", "infperf_max_time=0.05", "-o", "infperf_min_time=0.01", "-p", "no:cacheprovider"]


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One unsplit run and three pytest-split groups of the same suite, each a process."""
    root = tmp_path_factory.mktemp("split")
    (root / "test_suite.py").write_text(SUITE)
    run = [sys.executable, "-m", "pytest", "-q", *FAST]
    # The runs are independent (what they write is under test, not their timing): all at once.
    procs = [
        subprocess.Popen(
            [*run, *args], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for args in (
            ["--perf-json=all.json"],
            *(["--splits=3", f"--group={i}", f"--perf-json=shard{i}.json"] for i in (1, 2, 3)),
            ["-k", "nothing_here", "--perf-json=empty.json"],
        )
    ]
    for proc in procs:
        out, _ = proc.communicate()
        assert proc.returncode in (0, 5), out[-3000:]
    return root


def test_merged_shards_hold_what_one_run_holds(shards: Path) -> None:
    out = infperf(
        shards,
        "merge",
        "shard1.json",
        "shard2.json",
        "shard3.json",
        "empty.json",
        "-o",
        "merged.json",
        "--markdown",
        "merged.md",
    )
    assert out.returncode == 0, out.stderr
    assert "merged 4 shards, 6 benchmarks" in out.stdout
    merged = json.loads((shards / "merged.json").read_text())
    whole = json.loads((shards / "all.json").read_text())
    assert [b["key"] for b in merged["benchmarks"]] == [b["key"] for b in whole["benchmarks"]]
    assert merged["commit"] == whole["commit"] and merged["mode"] == whole["mode"]
    assert [s["benchmarks"] for s in merged["shards"]][-1] == 0  # the empty shard
    assert sum(s["benchmarks"] for s in merged["shards"]) == 6
    markdown = (shards / "merged.md").read_text()
    assert markdown.startswith("## ") and "test_sum[6400]" in markdown
    # The merged document is a results document: the other commands read it.
    assert infperf(shards, "comment", "merged.json").returncode == 0


@pytest.mark.parametrize("case", ["overlap", "commits", "truncated", "mode"])
def test_shards_that_cannot_merge_get_a_clear_error_and_nothing_is_written(
    shards: Path, case: str, tmp_path: Path
) -> None:
    one = json.loads((shards / "shard1.json").read_text())
    two = json.loads((shards / "shard2.json").read_text())
    expected = {
        "overlap": "is in two shards (a.json and b.json): the shards overlap",
        "commits": "the shards measured different commits",
        "truncated": "b.json",
        "mode": "the shards ran in different modes",
    }[case]
    if case == "overlap":
        two = one
    elif case == "commits":
        two["commit"] = {**(two["commit"] or {}), "sha": "f" * 40}
    elif case == "mode":
        two["mode"] = "ab"
    (tmp_path / "a.json").write_text(json.dumps(one))
    text = json.dumps(two)
    (tmp_path / "b.json").write_text(text[: len(text) // 2] if case == "truncated" else text)
    out = infperf(tmp_path, "merge", "a.json", "b.json", "-o", "merged.json")
    assert out.returncode == 2
    assert expected in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "merged.json").exists()


def test_the_merged_run_fails_once_for_any_shard_that_regressed(
    shards: Path, tmp_path: Path
) -> None:
    one = json.loads((shards / "shard1.json").read_text())
    two = json.loads((shards / "shard2.json").read_text())
    (tmp_path / "a.json").write_text(json.dumps(one))
    assert (
        infperf(tmp_path, "merge", "a.json", "-o", "m.json", "--fail-on-regression").returncode == 0
    )
    # A shard whose benchmark regressed (the verdict a comparing shard writes).
    two["benchmarks"][0]["comparison"] = {"verdict": "regression", "ratio": 1.3}
    (tmp_path / "b.json").write_text(json.dumps(two))
    out = infperf(tmp_path, "merge", "a.json", "b.json", "-o", "m.json", "--fail-on-regression")
    assert out.returncode == 1
    assert f"regression: {two['benchmarks'][0]['key']}" in out.stdout
