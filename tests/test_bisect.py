"""infperf bisect: the first slow commit, found by interleaved runs in a temporary worktree
of a real git repository; the user's checkout is never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_infperf.cli.bisect import Commit, Search, hints_from_store
from pytest_infperf.store.baselines import BaselineStore
from pytest_infperf.store.history import iter_series

from .conftest import AB_INI, AB_SUITE, GIT_ENV, git, infperf, init_repo


def _commit(path: Path, message: str) -> str:
    git(path, "add", "-A")
    git(path, "commit", "-qm", message)
    return git(path, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Seven commits: c3 cannot be imported, c5 makes test_slowed 30% slower."""
    repo = tmp_path_factory.mktemp("bisect") / "repo"
    repo.mkdir()
    (repo / "pytest.ini").write_text(AB_INI)
    (repo / "test_suite.py").write_text(AB_SUITE)
    (repo / "factor.txt").write_text("1.0")
    (repo / ".gitignore").write_text("*.json\n*.md\n__pycache__/\n")
    init_repo(repo, "c0 suite")
    shas = [git(repo, "rev-parse", "HEAD")]
    for i, change in enumerate(
        [
            ("README", "one\n"),
            ("README", "two\n"),
            ("test_suite.py", "import not_a_module\n" + AB_SUITE),
            ("test_suite.py", AB_SUITE),
            ("factor.txt", "1.3"),
            ("README", "three\n"),
        ],
        start=1,
    ):
        (repo / change[0]).write_text(change[1])
        shas.append(_commit(repo, f"c{i} {change[0]}"))
    git(repo, "checkout", "-q", "-b", "feature")
    return repo, shas


def _state(repo: Path) -> tuple[str, ...]:
    """What the user owns: branch, HEAD, index and working tree, and git's worktrees."""
    return (
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "rev-parse", "HEAD"),
        git(repo, "diff", "--cached"),
        git(repo, "diff"),
        git(repo, "status", "--porcelain"),
        git(repo, "worktree", "list", "--porcelain"),
        git(repo, "for-each-ref", "refs/bisect"),
    )


def test_bisect_names_the_slow_commit_and_skips_one_that_cannot_import(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, shas = history
    # The user's own work in progress, staged and not: bisect must leave both alone.
    (repo / "README").write_text("staged\n")
    git(repo, "add", "README")
    (repo / "README").write_text("staged, then edited\n")
    before = _state(repo)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    md = tmp_path / "bisect.md"
    out = infperf(
        repo, "bisect", shas[0], shas[6], "-k", "slowed", "--markdown", str(md), TMPDIR=str(tmp)
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"first bad commit: {shas[5]} 'c5 factor.txt'" in out.stdout
    lines = out.stdout.splitlines()
    # c3 is skipped with the reason, its neighbour c4 judged good, c5 checked against c4.
    skipped = next(i for i, line in enumerate(lines) if shas[3][:10] in line)
    assert "skip" in lines[skipped]
    assert "ModuleNotFoundError: No module named 'not_a_module'" in " ".join(
        lines[skipped : skipped + 2]
    )
    assert any(
        line.strip().startswith(f"check {shas[5][:10]} against {shas[4][:10]}: bad")
        for line in lines
    )
    assert _state(repo) == before
    assert list(tmp.iterdir()) == []  # the worktrees lived there and are gone
    text = md.read_text()
    assert text.startswith(f"## infperf bisect: first bad commit `{shas[5][:10]}`")
    assert "| confirm |" in text and "| check |" in text and "| skip |" in text
    git(repo, "reset", "-q", "--hard")


def test_bisect_says_when_bad_does_not_regress(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    before = _state(repo)
    out = infperf(repo, "bisect", shas[0], shas[2], "-k", "slowed")
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"not reproducible: BAD {shas[2][:10]} against GOOD {shas[0][:10]}" in out.stdout
    assert _state(repo) == before  # a bisect that ends without an answer leaves no trace


def test_bisect_usage_errors(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    out = infperf(repo, "bisect", shas[5], shas[1])
    assert out.returncode == 2
    assert f"GOOD {shas[5][:10]} is not on BAD {shas[1][:10]}'s first-parent history" in out.stderr
    out = infperf(repo, "bisect", "nope", shas[1])
    assert out.returncode == 2 and "'nope' is not a commit, branch or tag" in out.stderr
    out = infperf(repo, "list", "--", "-x")
    assert out.returncode == 2 and "takes no arguments after --" in out.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])  # Ctrl-C; a cancelled CI job
def test_an_interrupted_bisect_leaves_the_checkout_as_it_was(
    history: tuple[Path, list[str]], tmp_path: Path, sig: str
) -> None:
    repo, shas = history
    before = _state(repo)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # Started with Ctrl-C's default action, as from a terminal: a shell's background job
    # (`cmd &` without job control) ignores SIGINT, and Python keeps an ignored SIGINT
    # ignored, so run under such a job the bisect ran on to its end.
    unignore = (
        "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "runpy.run_module('pytest_infperf', run_name='__main__', alter_sys=True)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", unignore, "bisect", shas[0], shas[6], "-k", "slowed"],
        cwd=repo,
        env={**os.environ, **GIT_ENV, "TMPDIR": str(tmp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Interrupt while the first step's pytest measures (its log exists).
    deadline = time.monotonic() + 60
    while not list(tmp.glob("infperf-bisect-*/step-1.log")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    proc.send_signal(getattr(signal, sig))
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    assert "interrupted" in stderr
    assert _state(repo) == before
    assert list(tmp.iterdir()) == []


def test_search_skips_and_hints() -> None:
    s = Search(7)
    assert s.next() == 3
    s.mark(3, "skip")
    assert s.next() == 4  # the nearest open neighbour, the later one on a tie
    s.mark(4, "good")
    assert s.next() == 5
    s.mark(5, "bad")
    assert s.next() is None and s.suspects() == [5]
    s = Search(7, hints=[5, 4])
    assert s.next() == 5
    s.mark(5, "bad")
    assert s.next() == 4
    s.mark(4, "skip")
    assert s.next() == 3  # the middle of 0..5, the later one on a tie
    s.mark(3, "good")
    assert s.next() is None and s.suspects() == [4, 5]  # 4 was skipped: either


def test_stored_baselines_order_the_search(history_repo: tuple[Path, list[str]]) -> None:
    """test_step's stored medians step up at commit 17: those are measured first."""
    repo, shas = history_repo
    store = BaselineStore(repo / "baselines")
    (env,) = store.env_keys()
    commits = [Commit(s, "", "") for s in shas[10:26]]

    def series(newest_first: list[str]):  # type: ignore[no-untyped-def]
        for s in iter_series(store, env, newest_first):
            yield s.key, [(p.sha, p.median) for p in s.points]

    hints, why = hints_from_store(commits, {"test_h.py::test_step"}, series)
    assert [commits[i].sha for i in hints] == [shas[17], shas[16]]
    assert "step up between" in why
    assert hints_from_store(commits, {"test_h.py::test_flat"}, series) == ([], "")
