"""Interrupted and cancelled runs end in order and leave nothing behind: Ctrl-C while a
model is timed, SIGTERM (a cancelled CI job), and what a run killed outright left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .conftest import AB_INI, GIT_ENV, git, init_repo


def _default_signals() -> None:
    """The child's SIGINT and SIGTERM at their defaults, whatever this process inherited: a
    job started in the background of a shell without job control ignores SIGINT, and a
    Python started so takes no Ctrl-C at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _start(path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **GIT_ENV},
        preexec_fn=_default_signals,  # noqa: PLW1509 (two signal calls before exec)
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
    """Ctrl-C while a torch model runs inside torch's thread pool: pytest's own exit 2 (a
    model timed on a thread of the plugin's aborted the process there: "terminate called
    without an active exception", exit 134)."""
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


SLEEPING_SUITE = """
import threading
import time
from pathlib import Path

import pytest

@pytest.fixture(autouse=True)
def threads_after():
    yield
    names = [t.name for t in threading.enumerate()]
    Path("threads").write_text(repr(names))

def test_sleepy(infer_bench):
    def call():
        Path("timing").write_text("")
        time.sleep(1.5)
    infer_bench(call, warmup=0, rounds=100, max_rounds=100, max_time=600)
"""


def test_ctrl_c_waits_for_the_call_in_flight(tmp_path: Path) -> None:
    """Ctrl-C while the timed call sits in C (a sleep, an ONNX Runtime run): the run ends
    in order, and no thread of the plugin's is left running while teardown and exit go
    on."""
    (tmp_path / "test_s.py").write_text(SLEEPING_SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    proc = _start(tmp_path)
    _wait_for(lambda: (tmp_path / "timing").exists() or proc.poll() is not None)
    time.sleep(0.3)  # inside the sleep
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "infperf" not in (tmp_path / "threads").read_text(), out


#: Calls whose time varies fourfold at random: no verdict for many process pairs, and each
#: side's process leaves its PID, so the test knows when both interleave.
SLOW_SUITE = """
import os
import random
import time
from pathlib import Path

def test_slow(infer_bench):
    def call():
        Path(os.environ["PIDS"], str(os.getpid())).touch()
        time.sleep(random.choice((0.001, 0.004)))
    infer_bench(call, max_time=60, rounds=100000, max_rounds=100000)
"""


def test_sigterm_is_an_interrupt_that_leaves_no_worktree(tmp_path: Path, git_env: None) -> None:
    """A cancelled CI job's SIGTERM: the session ends as an interrupted one (exit 2), the
    baseline's worktree and its folder removed; Python's default ended the process at once
    and left them for good."""
    (tmp_path / "test_s.py").write_text(SLOW_SUITE)
    (tmp_path / "pytest.ini").write_text(AB_INI)
    init_repo(tmp_path, "suite")
    pids = tmp_path.parent / f"{tmp_path.name}-pids"
    pids.mkdir()
    os.environ["PIDS"] = str(pids)
    try:
        proc = _start(tmp_path, "--perf-ab=HEAD", "--perf-json=out.json")
    finally:
        del os.environ["PIDS"]
    # both sides timing: the blocks interleave
    _wait_for(lambda: len(list(pids.iterdir())) >= 2 or proc.poll() is not None)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert _worktrees(tmp_path) == [f"worktree {tmp_path}"], out
    assert git(tmp_path, "worktree", "prune", "--dry-run", "--verbose") == ""


def test_a_worktree_a_killed_run_left_is_pruned_by_the_next(tmp_path: Path, git_env: None) -> None:
    """A run killed outright (SIGKILL) cannot clean up: the next run that checks a commit
    out in the repository removes the worktrees whose owner is gone, and keeps one whose
    owner still runs."""
    from pytest_infperf.ab.checkout import Checkout

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a")
    init_repo(repo, "one")
    sha = git(repo, "rev-parse", "HEAD")
    gone_tmp = tmp_path / "infperf-ab-gone"
    owner = subprocess.Popen(  # a run that checks the commit out, then is killed
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from pytest_infperf.ab.checkout import Checkout; "
         "c = Checkout(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])); c.add(); "
         "print('added', flush=True); time.sleep(60)", str(repo), sha, str(gone_tmp)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert owner.stdout is not None and owner.stdout.readline().strip() == "added"
    alive = Checkout(repo, sha, tmp_path / "infperf-ab-alive")
    alive.add()  # owned by this process, which runs
    assert len(_worktrees(repo)) == 3
    owner.kill()
    owner.communicate()
    fresh = Checkout(repo, sha, tmp_path / "infperf-ab-fresh")
    fresh.add()
    listed = _worktrees(repo)
    assert f"worktree {gone_tmp}/tree-{sha[:10]}" not in listed and not gone_tmp.exists()
    assert f"worktree {alive.root}" in listed and f"worktree {fresh.root}" in listed
    for checkout in (alive, fresh):
        checkout.remove()


def test_pruning_never_touches_what_this_tool_did_not_make(tmp_path: Path, git_env: None) -> None:
    """A repository checked out in a folder named like this tool's (a project called
    ``infperf-ab-demo`` on a persistent runner), old and with no owner file, and a
    worktree of the user's own in such a folder: both stay, and so does what lies beside
    them."""
    from pytest_infperf.ab.checkout import LEGACY_AGE_S, Checkout

    home = tmp_path / "infperf-ab-projects"
    repo = home / "repo"
    repo.mkdir(parents=True)
    (repo / "a.txt").write_text("a")
    (home / "NOTES.txt").write_text("mine")
    init_repo(repo, "one")
    sha = git(repo, "rev-parse", "HEAD")
    own = tmp_path / "infperf-bisect-mine"
    git(repo, "worktree", "add", "--detach", str(own / "tree-0123456789"), sha)
    old = time.time() - 2 * LEGACY_AGE_S
    for folder in (home, own):
        os.utime(folder, (old, old))
    checkout = Checkout(repo, sha, tmp_path / "infperf-ab-run")
    checkout.add()
    checkout.remove()
    assert (home / "NOTES.txt").read_text() == "mine" and (repo / "a.txt").exists()
    assert f"worktree {own}/tree-0123456789" in _worktrees(repo)


def test_ctrl_c_stops_a_call_that_waits_at_once() -> None:
    """The timed call runs on the test's own thread: Ctrl-C during a call that waits (a
    sleep, as a model waiting on a lock or a device would) stops it there, at once."""
    import contextlib

    from pytest_infperf.measure import timing

    class Sampler:
        def context(self) -> contextlib.AbstractContextManager[None]:
            return contextlib.nullcontext()

    # Python's own Ctrl-C handler, whatever this process inherited (see _default_signals).
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            timing.in_test_context(Sampler(), lambda: time.sleep(5))  # type: ignore[arg-type]
        assert time.monotonic() - started < 3
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.skipif(sys.platform != "linux", reason="fork: POSIX; the test forks a child")
def test_sigterm_is_taken_only_while_something_is_held_and_never_by_a_forked_child() -> None:
    """The handler exists while a worktree or workers exist (ABController holds it), a
    child a test forks meanwhile ends with -15 when terminated, and the default is back
    once the last holder is gone."""
    import multiprocessing

    from pytest_infperf.ab import sigterm

    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    sigterm.hold()
    sigterm.hold()
    try:
        assert signal.getsignal(signal.SIGTERM) is sigterm._interrupt
        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
        child.start()
        time.sleep(0.3)
        child.terminate()
        child.join(30)
        assert child.exitcode == -signal.SIGTERM
        sigterm.release()
        assert signal.getsignal(signal.SIGTERM) is sigterm._interrupt  # one holder left
    finally:
        sigterm.release()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
