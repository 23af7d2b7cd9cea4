"""infperf bisect: the first slow commit, found by interleaved runs in a temporary worktree
of a real git repository; the user's checkout is never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pytest_infperf.cli.bisect import Commit, Search, hints_from_store
from pytest_infperf.store.baselines import BaselineStore
from pytest_infperf.store.history import iter_series

from .conftest import AB_INI, AB_SUITE, GIT_ENV, git, infperf, init_repo

#: The slow tier (bash scripts/test.sh --slow): real bisects, each step a pytest run.
pytestmark = pytest.mark.slow


def _commit(path: Path, message: str) -> str:
    git(path, "add", "-A")
    git(path, "commit", "-qm", message)
    return git(path, "rev-parse", "HEAD")


#: A pytest whose own cleanup hangs after Ctrl-C, when the interrupt tests ask for it: what
#: a second Ctrl-C or SIGTERM must not wait for.
STUCK_CONFTEST = """
import os, signal, time

def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 2 and os.environ.get("INFPERF_TEST_STUCK_CLEANUP"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        time.sleep(120)
"""


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Seven commits: c3 cannot be imported, c5 makes test_slowed 30% slower."""
    repo = tmp_path_factory.mktemp("bisect") / "repo"
    repo.mkdir()
    (repo / "pytest.ini").write_text(AB_INI)
    (repo / "conftest.py").write_text(STUCK_CONFTEST)
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


#: An ONNX Runtime suite whose model's depth comes from layers.txt (a MatMul and a Relu a
#: layer, built with onnx.helper: no torch to import in every step's processes): one more
#: layer is more work (graph nodes, counted exactly) and more time.
ONNX_SUITE = """
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

LAYERS = int((Path(__file__).parent / "layers.txt").read_text())


def test_mlp(infer_bench, tmp_path):
    rng = np.random.default_rng(0)
    nodes, weights, last = [], [], "x"
    for i in range(LAYERS):
        w = (rng.standard_normal((256, 256)) * 0.05).astype(np.float32)
        weights.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [last, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"r{i}"]))
        last = f"r{i}"
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [64, 256]) for n in ("x", last)]
    graph = helper.make_graph(nodes, "mlp", io[:1], io[1:], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "mlp.onnx"))
    x = np.ones((64, 256), np.float32)
    infer_bench(tmp_path / "mlp.onnx", {"x": x}, providers=["CPUExecutionProvider"],
                intra_op_threads=1)
"""


def test_bisect_names_the_commit_where_the_work_jumps_and_times_only_to_confirm(
    tmp_path: Path,
) -> None:
    """Four commits, c2 doubles the model's depth: the confirming run's work diff says the
    work changed, so the search runs on counts (--perf-count: no timing), and only the
    named commit is timed, against its parent, and its parent against GOOD."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pytest.ini").write_text(AB_INI.replace("infperf_profile = off", ""))
    (repo / "test_suite.py").write_text(ONNX_SUITE)
    (repo / "layers.txt").write_text("3")
    (repo / ".gitignore").write_text("*.json\n*.md\n__pycache__/\n")
    init_repo(repo, "c0 suite")
    shas = [git(repo, "rev-parse", "HEAD")]
    for i, (name, text) in enumerate(
        [("README", "a\n"), ("layers.txt", "6"), ("README", "b\n")], start=1
    ):
        (repo / name).write_text(text)
        shas.append(_commit(repo, f"c{i} {name}"))
    out = infperf(repo, "bisect", shas[0], shas[3])
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"first bad commit: {shas[2]} 'c2 layers.txt'" in out.stdout
    assert "named by its work counts, test_suite.py::test_mlp: graph nodes 6 -> 12" in out.stdout
    roles = [line.split()[0] for line in out.stdout.splitlines() if " against " in line]
    assert roles.count("count") >= 1 and "search" not in roles
    assert roles.count("confirm") == 1 and roles.count("check") == 2
    # A range of one commit needs no search: the confirming step measured BAD against its
    # parent, and names it; no count runs, no second timing of the same pair.
    out = infperf(repo, "bisect", shas[1], shas[2])
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith(
        f"bisecting 1 commit: {shas[2][:10]} (bad), whose parent is {shas[1][:10]} (good); "
        "one step: pytest --perf-ab=<good> in a temporary worktree\n"
    )
    steps = [line.split()[0] for line in out.stdout.splitlines() if line[7:8] == " "]
    assert steps == ["confirm"], out.stdout  # a step's line: its role, right-aligned in 7
    assert f"first bad commit: {shas[2]} 'c2 layers.txt'" in out.stdout


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
    for bad in ("-1", "x"):
        out = infperf(repo, "bisect", shas[0], shas[6], "--retries", bad)
        assert out.returncode == 2 and "--retries" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr


def test_a_pytest_usage_error_is_a_usage_error_with_pytests_own_line(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """A mistyped option after -- is not 'BAD does not regress': exit 2, and pytest says
    which option; nothing is left behind."""
    repo, shas = history
    before = _state(repo)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = infperf(
        repo, "bisect", shas[0], shas[6], "-k", "slowed", "--", "--perf-bogus", TMPDIR=str(tmp)
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert "pytest could not run the selection at BAD" in out.stderr
    assert "ERROR: usage:" in out.stderr
    assert "unrecognized arguments: --perf-bogus" in out.stderr
    assert "check them with `pytest -k slowed --perf-bogus` at BAD" in out.stderr
    assert "inconclusive" not in out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert _state(repo) == before
    assert list(tmp.iterdir()) == []


def test_a_git_failure_during_the_search_has_its_own_exit_code(tmp_path: Path) -> None:
    """BAD's tree has lost a blob: the refs resolve, its worktree cannot be checked out."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_suite.py").write_text(AB_SUITE)
    (repo / "factor.txt").write_text("1.0")
    init_repo(repo, "good")
    good = git(repo, "rev-parse", "HEAD")
    (repo / "data.txt").write_text("only in bad\n")
    bad = _commit(repo, "bad")
    blob = git(repo, "rev-parse", "HEAD:data.txt")
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # loose in a new repository
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = infperf(repo, "bisect", good, bad, "-k", "slowed", TMPDIR=str(tmp))
    assert out.returncode == 3, out.stdout + out.stderr
    assert "git failed during the bisect" in out.stderr
    assert f"cannot check out {bad[:10]}" in out.stderr
    assert "Traceback" not in out.stderr
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert list(tmp.iterdir()) == []


def _start_bisect(
    repo: Path, shas: list[str], tmp: Path, **env: str
) -> tuple[subprocess.Popen[str], list[psutil.Process]]:
    """``infperf bisect`` as from a terminal, and its processes once the first step's
    pytest measures (its A/B workers are up)."""
    # Started with Ctrl-C's default action, as from a terminal: a shell's background job
    # (`cmd &` without job control) ignores SIGINT, and the bisect keeps an ignored SIGINT
    # ignored, as Python does.
    unignore = (
        "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "runpy.run_module('pytest_infperf', run_name='__main__', alter_sys=True)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", unignore, "bisect", shas[0], shas[6], "-k", "slowed"],
        cwd=repo,
        env={**os.environ, **GIT_ENV, "TMPDIR": str(tmp), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 90
    below: list[psutil.Process] = []
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            below = psutil.Process(proc.pid).children(recursive=True)
            if any("pytest_infperf.abworker" in " ".join(p.cmdline()) for p in below):
                break
        except psutil.Error:
            pass
        time.sleep(0.1)
    else:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the first step's A/B workers never started: {out[-2000:]}{err[-2000:]}")
    return proc, below


def _alive(procs: list[psutil.Process]) -> list[str]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_an_interrupted_bisect_leaves_the_checkout_as_it_was(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """One Ctrl-C: the step's pytest stops its workers and removes its worktree itself."""
    repo, shas = history
    before = _state(repo)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc, below = _start_bisect(repo, shas, tmp)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    assert "interrupted" in stderr
    assert _alive(below) == []
    assert _state(repo) == before
    assert list(tmp.iterdir()) == []


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("signals", [["SIGINT", "SIGINT"], ["SIGTERM"]])
def test_a_second_ctrl_c_or_sigterm_kills_the_step_at_once(
    history: tuple[Path, list[str]], tmp_path: Path, signals: list[str]
) -> None:
    """The step's pytest hangs in its own cleanup after SIGINT. A second Ctrl-C, or a
    cancelled CI job's SIGTERM (GitHub allows about 10 s), must not wait for it: within
    10 s no process of the bisect is left, and the checkout is as it was."""
    repo, shas = history
    before = _state(repo)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc, below = _start_bisect(repo, shas, tmp, INFPERF_TEST_STUCK_CLEANUP="1")
    start = time.monotonic()
    for i, name in enumerate(signals):
        if i:
            time.sleep(1.0)  # the step's pytest is in its hanging cleanup by now
        proc.send_signal(getattr(signal, name))
    try:
        stdout, stderr = proc.communicate(timeout=10 - (time.monotonic() - start))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"still running 10 s after {' and '.join(signals)}")
    took = time.monotonic() - start
    assert proc.returncode == 130, stdout + stderr
    assert "interrupted" in stderr
    assert _alive(below) == []
    assert _state(repo) == before
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert list(tmp.iterdir()) == []
    assert took < 10


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
