"""Interrupted and cancelled runs end in order and leave nothing behind: Ctrl-C while a
model is timed, SIGTERM (a cancelled CI job), and what a run killed outright left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import AB_INI, GIT_ENV, git, init_repo


def _start(path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **GIT_ENV},
    )


def _wait_for(condition: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


def _worktrees(path: Path) -> list[str]:
    out = git(path, "worktree", "list", "--porcelain")
    return [line for line in out.splitlines() if line.startswith("worktree ")]


TORCH_SUITE = """
from pathlib import Path
import torch

def test_mlp(infer_bench):
    model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(8)])
    x = (torch.randn(64, 512),)
    model(*x)
    Path("timing").write_text("")
    infer_bench(model, x, max_time=60, rounds=10000, max_rounds=100000)
"""


def test_ctrl_c_while_a_torch_model_is_timed_ends_the_run_in_order(tmp_path: Path) -> None:
    """The model runs on the sampling thread inside torch's thread pool while Ctrl-C lands
    on the main thread: the process aborted ("terminate called without an active
    exception", exit 134) where pytest's own exit 2 was due."""
    pytest.importorskip("torch")
    (tmp_path / "test_t.py").write_text(TORCH_SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    proc = _start(tmp_path)
    _wait_for(lambda: (tmp_path / "timing").exists() or proc.poll() is not None)
    time.sleep(2.0)  # warmed up, sampling
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "terminate called" not in out and "KeyboardInterrupt" in out


SLOW_SUITE = """
import time

def test_slow(infer_bench):
    infer_bench(lambda: time.sleep(0.002), max_time=60, rounds=100000, max_rounds=100000)
"""


def test_sigterm_is_an_interrupt_that_leaves_no_worktree(tmp_path: Path, git_env: None) -> None:
    """A cancelled CI job's SIGTERM: the session ends as an interrupted one (exit 2), the
    baseline's worktree and its folder removed; Python's default ended the process at once
    and left them for good."""
    (tmp_path / "test_s.py").write_text(SLOW_SUITE)
    (tmp_path / "pytest.ini").write_text(AB_INI)
    init_repo(tmp_path, "suite")
    proc = _start(tmp_path, "--perf-ab=HEAD", "--perf-json=out.json")
    _wait_for(lambda: len(_worktrees(tmp_path)) > 1 or proc.poll() is not None)
    time.sleep(3.0)  # the workers up, the blocks interleaving
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert _worktrees(tmp_path) == [f"worktree {tmp_path}"], out
    assert git(tmp_path, "worktree", "prune", "--dry-run", "--verbose") == ""


def test_a_worktree_a_killed_run_left_is_pruned_by_the_next(tmp_path: Path, git_env: None) -> None:
    """A run killed outright (SIGKILL) cannot clean up: the next run that checks a commit
    out in the repository removes the worktrees whose owner is gone, and keeps one whose
    owner still runs."""
    from pytest_infperf.ab.checkout import OWNER, Checkout

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a")
    init_repo(repo, "one")
    sha = git(repo, "rev-parse", "HEAD")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], text=True,
                          capture_output=True, check=True)  # fmt: skip
    alive = Checkout(repo, sha, tmp_path / "infperf-ab-alive")
    alive.add()  # owned by this process, which runs
    gone = Checkout(repo, sha, tmp_path / "infperf-ab-gone")
    gone.add()
    (gone.tmp / OWNER).write_text(f"{dead.stdout.strip()} 1")  # a process that ended
    assert len(_worktrees(repo)) == 3
    fresh = Checkout(repo, sha, tmp_path / "infperf-ab-fresh")
    fresh.add()
    listed = _worktrees(repo)
    assert f"worktree {gone.root}" not in listed and not gone.tmp.exists()
    assert f"worktree {alive.root}" in listed and f"worktree {fresh.root}" in listed
    for checkout in (alive, fresh):
        checkout.remove()
