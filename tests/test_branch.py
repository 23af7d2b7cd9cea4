"""Baselines on a dedicated branch: `python -m pytest_infperf baselines pull|push`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_infperf.core.results import document, dumps
from pytest_infperf.store.baselines import BaselineStore

from .conftest import GIT_ENV, git, make_result

ENV_KEY = "linux-x86-64-cpu-py3.11-0123456789"


def _doc_entries(names: list[str]) -> list[dict[str, Any]]:
    return [make_result([1e-3, 1.1e-3, 0.9e-3], nodeid=f"test_m.py::{n}").to_json() for n in names]


def save(clone: Path, sha: str, names: list[str]) -> None:
    env = {"key": ENV_KEY, "hard": {}, "soft": {}}
    BaselineStore(clone / "baselines").save(
        ENV_KEY, sha, _doc_entries(names), env, {"sha": sha, "dirty": False}
    )


def cli(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_infperf", "baselines", *args],
        cwd=clone,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **GIT_ENV},
    )


@pytest.fixture
def remote(tmp_path: Path, git_env: None) -> tuple[Path, Path, Path]:
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(bare), str(seed))
    (seed / "README").write_text("project\n")
    git(seed, "add", ".")
    git(seed, "commit", "-qm", "init")
    git(seed, "push", "-q", "origin", "HEAD:main")
    a, b = tmp_path / "a", tmp_path / "b"
    for clone in (a, b):
        git(tmp_path, "clone", "-q", str(bare), str(clone))
    return bare, a, b


def branch_files(bare: Path, branch: str = "infperf-baselines") -> dict[str, dict[str, Any]]:
    names = git(bare, "ls-tree", "-r", "--name-only", branch).splitlines()
    return {n: json.loads(git(bare, "show", f"{branch}:{n}")) for n in names if n.endswith(".json")}


def test_pull_before_the_branch_exists(remote: tuple[Path, Path, Path]) -> None:
    _, a, _ = remote
    out = cli(a, "pull")
    assert out.returncode == 0, out.stderr
    assert "origin/infperf-baselines does not exist yet" in out.stdout


def test_push_then_pull(remote: tuple[Path, Path, Path]) -> None:
    bare, a, b = remote
    sha = git(a, "rev-parse", "HEAD")
    save(a, sha, ["test_x", "test_y"])
    head_before = git(a, "rev-parse", "--abbrev-ref", "HEAD")
    out = cli(a, "push")
    assert out.returncode == 0, out.stderr
    assert "pushed 1 baseline file(s) to origin/infperf-baselines" in out.stdout
    # the working tree and the checked-out branch are untouched
    assert git(a, "rev-parse", "--abbrev-ref", "HEAD") == head_before
    assert git(a, "status", "--porcelain", "--untracked-files=no") == ""
    files = branch_files(bare)
    assert list(files) == [f"baselines/{ENV_KEY}/{sha}.json"]
    # the branch holds baselines only (orphan history)
    assert git(bare, "log", "--format=%P", "infperf-baselines") == ""
    assert cli(a, "push").stdout.strip().endswith("nothing to push")
    out = cli(b, "pull")
    assert out.returncode == 0 and "pulled 1 baseline file(s)" in out.stdout
    assert (b / "baselines" / ENV_KEY / f"{sha}.json").is_file()


def test_two_concurrent_pushers_lose_nothing(remote: tuple[Path, Path, Path]) -> None:
    bare, a, b = remote
    # Make the server slow, so both pushers fetch the same tip and one must retry.
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\ncat > /dev/null\nsleep 0.6\n")
    hook.chmod(0o755)
    shared = "f" * 40
    save(a, "a" * 40, ["test_a"])
    save(b, "b" * 40, ["test_b"])
    save(a, shared, ["test_from_a", "test_both"])
    save(b, shared, ["test_from_b", "test_both"])
    env = {**os.environ, **GIT_ENV}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pytest_infperf", "baselines", "push"],
            cwd=c,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for c in (a, b)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert any("retrying" in out for out, _ in outs), outs  # the race really happened
    files = branch_files(bare)
    assert sorted(Path(n).stem for n in files) == ["a" * 40, "b" * 40, shared]
    merged = files[f"baselines/{ENV_KEY}/{shared}.json"]
    keys = sorted(b["key"] for b in merged["benchmarks"])
    assert keys == ["test_m.py::test_both", "test_m.py::test_from_a", "test_m.py::test_from_b"]


def test_bad_remote_is_a_clear_error(remote: tuple[Path, Path, Path]) -> None:
    _, a, _ = remote
    out = cli(a, "pull", "--remote", "nowhere")
    assert out.returncode == 2
    assert out.stderr.startswith("infperf: error: cannot reach remote 'nowhere'")


def test_corrupt_local_baseline_is_not_pushed(remote: tuple[Path, Path, Path]) -> None:
    bare, a, _ = remote
    path = a / "baselines" / ENV_KEY / ("c" * 40 + ".json")
    path.parent.mkdir(parents=True)
    path.write_text('{"schema_version": 1, "benchm')
    out = cli(a, "push")
    assert out.returncode == 2
    assert "is not valid JSON" in out.stderr and str(path) in out.stderr
    assert git(bare, "branch", "--list", "infperf-baselines") == ""


def _raw_entries(
    names: list[str], saved_at: str = "2026-01-01T00:00:00+00:00"
) -> list[dict[str, Any]]:
    entries = _doc_entries(names)
    for e in entries:
        e["samples"] = [1e-3 * (1 + i / 1000) for i in range(200)]
        e["saved_at"] = saved_at
    return entries


def test_pruned_baselines_stay_pruned_and_leave_the_branch(
    remote: tuple[Path, Path, Path],
) -> None:
    bare, a, b = remote
    old, new = "1" * 40, "2" * 40
    save(a, old, ["test_x"])
    save(a, new, ["test_x"])
    assert cli(a, "push").returncode == 0
    assert cli(b, "pull").returncode == 0
    # a prunes the old one and pushes: the branch drops it and remembers why
    store = BaselineStore(a / "baselines")
    assert store.remove(ENV_KEY, [old]) == 1
    out = cli(a, "push")
    assert out.returncode == 0, out.stderr
    assert "removed 1 pruned" in out.stdout
    assert sorted(Path(n).stem for n in branch_files(bare)) == [new]
    pruned = git(bare, "show", f"infperf-baselines:baselines/{ENV_KEY}/pruned.txt")
    assert pruned.split() == [old]
    # a's next pull does not bring it back; b's pull removes b's copy
    out = cli(a, "pull")
    assert out.returncode == 0 and not (a / "baselines" / ENV_KEY / f"{old}.json").exists()
    out = cli(b, "pull")
    assert out.returncode == 0, out.stderr
    assert "removed 1 pruned on the branch" in out.stdout
    assert not (b / "baselines" / ENV_KEY / f"{old}.json").exists()
    # and b's next push does not re-add it
    assert cli(b, "push").stdout.strip().endswith("nothing to push")
    # saving that commit again on purpose takes it off the list
    save(b, old, ["test_x"])
    assert old not in BaselineStore(b / "baselines").pruned(ENV_KEY)


def test_a_stale_raw_copy_does_not_undo_a_compaction(remote: tuple[Path, Path, Path]) -> None:
    bare, a, b = remote
    sha = "3" * 40
    env = {"key": ENV_KEY, "hard": {}, "soft": {}}
    for clone in (a, b):
        store = BaselineStore(clone / "baselines")
        path = store.path_for(ENV_KEY, sha)
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = document(_raw_entries(["test_x"]), env, {"sha": sha, "dirty": False})
        path.write_text(dumps(doc))
    assert cli(a, "push").returncode == 0
    BaselineStore(a / "baselines").compact(ENV_KEY, sha)
    assert cli(a, "push").returncode == 0
    # b still has the raw copy of the same measurement: its push keeps the compact one
    out = cli(b, "push")
    assert out.returncode == 0, out.stderr
    (entry,) = branch_files(bare)[f"baselines/{ENV_KEY}/{sha}.json"]["benchmarks"]
    assert entry["compact"] == {"samples": 200, "sketch": 33} and len(entry["samples"]) == 33
    # a newer measurement of it wins over the compact copy
    save(b, sha, ["test_x"])
    assert cli(b, "push").returncode == 0
    (entry,) = branch_files(bare)[f"baselines/{ENV_KEY}/{sha}.json"]["benchmarks"]
    assert "compact" not in entry


def test_push_squash_replaces_the_history_with_one_commit(remote: tuple[Path, Path, Path]) -> None:
    bare, a, b = remote
    for i, sha in enumerate(("4" * 40, "5" * 40, "6" * 40)):
        save(a if i % 2 == 0 else b, sha, ["test_x"])
        assert cli(a if i % 2 == 0 else b, "push").returncode == 0
    assert len(git(bare, "rev-list", "infperf-baselines").split()) == 3
    tree = git(bare, "rev-parse", "infperf-baselines^{tree}")
    out = cli(a, "push", "--squash")
    assert out.returncode == 0, out.stderr
    assert "history squashed" in out.stdout
    assert git(bare, "rev-list", "infperf-baselines").split() == [
        git(bare, "rev-parse", "infperf-baselines")
    ]
    assert git(bare, "rev-parse", "infperf-baselines^{tree}") == tree  # nothing lost
    # a pusher that fetched before the squash retries on top of it and loses nothing
    save(b, "7" * 40, ["test_x"])
    assert cli(b, "push").returncode == 0
    assert len(branch_files(bare)) == 4
    assert cli(b, "pull", "--squash").returncode == 2


def test_pull_depth_takes_only_the_recent_history(remote: tuple[Path, Path, Path]) -> None:
    _, a, b = remote
    shas = []
    for i in range(3):
        (a / "f.txt").write_text(f"{i}\n")
        git(a, "add", "f.txt")
        git(a, "commit", "-qm", f"c{i}")
        sha = git(a, "rev-parse", "HEAD")
        save(a, sha, ["test_x"])
        shas.append(sha)
    git(a, "push", "-q", "origin", "HEAD:main")
    assert cli(a, "push").returncode == 0
    git(b, "pull", "-q", "origin", "main")
    out = cli(b, "pull", "--depth", "2")
    assert out.returncode == 0, out.stderr
    assert "pulled 2 baseline file(s)" in out.stdout and "1 older than --depth" in out.stdout
    got = {p.stem for p in (b / "baselines" / ENV_KEY).glob("*.json")}
    assert got == set(shas[1:])
    assert cli(b, "pull", "--ref", "HEAD").returncode == 2
    bad = cli(b, "pull", "--depth", "2", "--ref", "nope")
    assert bad.returncode == 2 and "'nope' is not a commit" in bad.stderr
