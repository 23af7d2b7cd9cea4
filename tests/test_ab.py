"""--perf-ab: base and head measured in the same job, interleaved, in real git repositories."""

from __future__ import annotations

import dataclasses
import os
import shutil
import textwrap
import time
from pathlib import Path

import pytest

from .conftest import AB_INI, AB_SUITE, ROOT, ab_ini, git, init_repo, load_json


def commit(path: Path, message: str) -> None:
    git(path, "add", "-A")
    git(path, "commit", "-qm", message)


@pytest.fixture
def repo(pytester: pytest.Pytester, git_env: None) -> pytest.Pytester:
    pytester.makefile(".ini", pytest=AB_INI)
    pytester.makepyfile(test_suite=AB_SUITE)
    (pytester.path / "factor.txt").write_text("1.0")
    (pytester.path / ".gitignore").write_text("*.json\n__pycache__/\n")
    init_repo(pytester.path, "suite")
    git(pytester.path, "checkout", "-q", "-b", "feature")
    return pytester


def worktrees(path: Path) -> list[str]:
    return [
        line
        for line in git(path, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    ]


def test_ab_flags_the_slowed_test_only(repo: pytest.Pytester, validate: object) -> None:
    (repo.path / "factor.txt").write_text("1.3")
    (repo.path / "test_new.py").write_text(
        "def test_new(infer_bench):\n    infer_bench(lambda: None)\n"
    )
    commit(repo.path, "slower, and a new benchmark")
    base = git(repo.path, "rev-parse", "main")
    # With a budget spent from the start (--perf-budget): a possible regression is still
    # measured to its end, and only what passes either way is cut short.
    result = repo.runpytest_subprocess(
        "--perf-ab=main", "--perf-json=ab.json", "--perf-budget=0.001"
    )
    result.assert_outcomes(passed=2, failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "PERFORMANCE REGRESSION in test_suite.py::test_slowed: *% slower (median latency;*",
            "*median latency: now * us, before * us",
            "*decided by: interleaving in this job over * process pairs",
            "*accept it: a 'Perf-Accept: test_suite.py::test_slowed <reason>' trailer*",
            f"*baseline: the merge-base {base[:10]} of main and HEAD, measured in this job, "
            "interleaved with it (A/B)",
        ]
    )
    doc = load_json(repo.path / "ab.json")
    validate(doc)  # type: ignore[operator]
    assert doc["mode"] == "ab" and doc["base_commit"] == base
    verdicts = {b["key"].split("::", 1)[1]: b["comparison"] for b in doc["benchmarks"]}
    slowed = verdicts["test_slowed"]
    assert slowed["verdict"] == "regression" and slowed["mode"] == "ab"
    # Each pair takes four quads at least (more where a new pair costs more: judge/plan.py).
    assert 1.2 < slowed["ratio"] < 1.4 and slowed["details"]["quads"] >= 8
    # a regression needs two head/base process pairs at least, pooled
    assert slowed["unit"] == "process pairs" and slowed["n"] == slowed["process_pairs"] >= 2
    assert slowed["detectable"] > 0.05
    assert verdicts["test_steady"]["verdict"] in ("unchanged", "no-regression", "inconclusive")
    assert verdicts["test_steady#second"]["verdict"] in (
        "unchanged",
        "no-regression",
        "inconclusive",
    )
    assert verdicts["test_new"]["verdict"] == "no-baseline"
    for steady in (verdicts["test_steady"], verdicts["test_steady#second"]):
        cut = steady["verdict"] == "inconclusive" and steady["process_pairs"] == 1
        assert not cut or (steady["reason"] == "run-budget" and steady["not_settled"])
    bench = next(b for b in doc["benchmarks"] if b["key"].endswith("test_slowed"))
    pairs = bench["extra"]["ab"]["pairs"]
    assert bench["extra"]["base_samples"] and len(pairs) == slowed["process_pairs"]
    assert pairs[0]["head_process"] == "this process" and pairs[1]["head_process"] == "head1"
    assert all(len(p["quads"]["median"]) >= 4 for p in pairs)
    # what each pair cost besides its quads, and whether its workers were started for it
    assert all(p["ready_seconds"] > 0 and isinstance(p["started_workers"], bool) for p in pairs)
    every = [
        p for b in doc["benchmarks"] for p in (b.get("extra") or {}).get("ab", {}).get("pairs", [])
    ]
    assert any(p["started_workers"] for p in every if p["head_process"] == "head1")
    # one-thread callables: both sides timed on one CPU (expert pin=auto), where there are two
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    pinned = max(cpus) if len(cpus) >= 2 else None
    interleaved = [v["details"] for v in verdicts.values() if "quads" in v["details"]]
    assert len(interleaved) == 3 and {d["pinned_cpu"] for d in interleaved} == {pinned}
    # one-thread callables: quads net of the run-queue wait, wherever Linux keeps it
    if Path("/proc/thread-self/schedstat").exists():
        assert all(p["net_of_waits_quads"]["median"] > 0 for p in every)
        assert all(0 <= p["cpu_wait_share"]["head"] < 1 for p in every)
    assert worktrees(repo.path) == [f"worktree {repo.path}"]


def test_process_pairs_collect_the_same_files_on_both_sides(repo: pytest.Pytester) -> None:
    """Process pairs collect the perf tests' files that both checkouts hold, not the
    session's folder: the working tree's untracked folders (baselines/) made head workers
    slower than their base partners (docs/MEASURED.md, "A/A run counts, and the same
    files on both sides")."""
    from pytest_infperf.ab.checkout import Selection
    from pytest_infperf.ab.controller import ABController

    (repo.path / "baselines" / "x").mkdir(parents=True)
    suite, new = repo.path / "test_suite.py", repo.path / "test_new.py"
    new.write_text("def test_new(infer_bench):\n    infer_bench(lambda: None)\n")
    selection = Selection(rootdir=repo.path, args=(str(repo.path),), pythonpath=())
    controller = ABController(git(repo.path, "rev-parse", "main"), repo.path, selection)
    # What this process imports of the repository, which every worker is told.
    selection = dataclasses.replace(selection, imports=controller.selection.imports)
    try:
        controller.setup()
        controller.collected([])  # nothing collected: the session's own selection
        assert controller.pair_selection == selection
        controller.collected([str(suite), str(new), str(suite)])  # test_new: head only
        assert controller.pair_selection.args == (str(suite),)
        assert controller.selection == selection  # the base worker lists every base test
    finally:
        controller.close()
    assert worktrees(repo.path) == [f"worktree {repo.path}"]


def test_a_pair_past_those_a_session_keeps_is_started_afresh(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A comparison that takes more process pairs than the session keeps workers for gets
    one of the kept pairs started again: new processes (a pair must be two processes the
    comparison has not measured yet), and no more of them alive than the session keeps."""
    from pytest_infperf.ab import controller as _controller
    from pytest_infperf.ab.checkout import Selection

    monkeypatch.setattr(_controller, "LIVE_PAIRS", 1)
    # The head's workers say their session ended (the working tree's conftest alone), after
    # a teardown that takes a while, as torch's does.
    (repo.path / "conftest.py").write_text(
        "import os, pathlib, time\n\n\ndef pytest_unconfigure(config):\n"
        "    time.sleep(1.0)\n"
        "    pathlib.Path(__file__).with_name(f'ended-{os.getpid()}').touch()\n"
    )
    selection = Selection(rootdir=repo.path, args=(str(repo.path),), pythonpath=())
    controller = _controller.ABController(git(repo.path, "rev-parse", "main"), repo.path, selection)
    nodeid = "test_suite.py::test_steady"
    try:
        controller.setup()
        first = controller.process_pair(1)
        first.begin(nodeid, None)
        pids = {first.base.proc.pid, first.head.proc.pid}  # type: ignore[union-attr]
        first_head = first.head.proc.pid  # type: ignore[union-attr]
        seed = first.base.hash_seed
        first.finish()
        again = controller.process_pair(2)
        assert again is first and len(controller.pairs) == 1
        assert again.base.hash_seed == again.head.hash_seed != seed  # a new pair's own seed
        again.begin(nodeid, None)
        fresh = {again.base.proc.pid, again.head.proc.pid}  # type: ignore[union-attr]
        again.finish()
        assert not fresh & pids
        # The replaced head worker ended its session, as at close(): not killed mid-exit.
        assert (repo.path / f"ended-{first_head}").exists()
        for pid in pids:  # the first processes are gone, not kept beside the new ones
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
                time.sleep(0.1)
            assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid)
    finally:
        controller.close()
    assert worktrees(repo.path) == [f"worktree {repo.path}"]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1]
    except (OSError, IndexError):
        return "Z"


@pytest.mark.slow
def test_a_project_with_filterwarnings_error(repo: pytest.Pytester) -> None:
    """The worker imports pytest_infperf before pytest loads it as a plugin; pytest's
    "cannot be rewritten" warning must not end the worker under filterwarnings = error
    (found by the main job: this project's own settings)."""
    (repo.path / "pytest.ini").write_text(AB_INI + "filterwarnings = error\n")
    # As in this project's own main job: the repository holds the plugin's package, which
    # the worker imports from the base's worktree.
    shutil.copytree(ROOT / "pytest_infperf", repo.path / "pytest_infperf")
    commit(repo.path, "warnings are errors")
    # HEAD: the base's worktree holds the package too.
    result = repo.runpytest_subprocess("--perf-ab=HEAD", "--perf-json=ab.json")
    assert "crashed" not in result.stdout.str()
    result.assert_outcomes(passed=2)
    doc = load_json(repo.path / "ab.json")
    verdicts = [b["comparison"]["decided_by"] for b in doc["benchmarks"]]
    assert verdicts and all(v == "ab" for v in verdicts)


@pytest.mark.slow
def test_removed_tests_are_listed(repo: pytest.Pytester) -> None:
    (repo.path / "test_suite.py").write_text(AB_SUITE.replace("def test_steady", "def _gone"))
    commit(repo.path, "drop a benchmark")
    result = repo.runpytest_subprocess("--perf-ab=main", "--perf-json=ab.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*1 perf test(s) of the base are gone in HEAD: test_suite.py::test_steady*"]
    )
    assert load_json(repo.path / "ab.json")["comparison"]["removed"] == [
        "test_suite.py::test_steady"
    ]


@pytest.mark.slow
def test_uncommitted_changes_are_said(repo: pytest.Pytester) -> None:
    """--perf-ab measures the files on disk: with uncommitted changes that is not HEAD's
    code, and the run says so (terminal, JSON, Markdown)."""
    (repo.path / "factor.txt").write_text("1.01")
    result = repo.runpytest_subprocess(
        "--perf-ab=main", "-k", "steady", "--perf-json=ab.json", "--perf-markdown=ab.md"
    )
    result.stdout.fnmatch_lines(
        [
            "*compared with the merge-base * of main and HEAD, measured in this job, "
            "interleaved with the working tree (uncommitted changes) (A/B)",
            "*warning: --perf-ab: the working tree has uncommitted changes: the head side "
            "measures the files on disk, not commit *",
        ]
    )
    doc = load_json(repo.path / "ab.json")
    assert doc["commit"]["dirty"] is True and doc["comparison"]["head_dirty"] is True
    assert "head with uncommitted changes" in (repo.path / "ab.md").read_text()


@pytest.mark.slow
def test_cleanup_after_failure_and_ctrl_c(repo: pytest.Pytester) -> None:
    (repo.path / "test_zz.py").write_text(
        "def test_interrupt(infer_bench):\n"
        "    infer_bench(lambda: None)\n"
        "    raise KeyboardInterrupt\n"
    )
    commit(repo.path, "interrupting test")
    result = repo.runpytest_subprocess("--perf-ab=main")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert worktrees(repo.path) == [f"worktree {repo.path}"]
    # nothing stale left for git to prune: the worktree's folder is gone too
    assert git(repo.path, "worktree", "prune", "--dry-run", "--verbose") == ""


LOCKED_SUITE = """
import fcntl, os, time

def test_model(infer_bench, tmp_path_factory):
    # A resource only one process may hold at a time (a lock file here; a fixed port, a GPU
    # taken whole), held while the test builds its model, released before infer_bench.
    with open(os.environ["INFPERF_TEST_LOCK"], "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if another side holds it
        time.sleep(1.0)
        fcntl.flock(lock, fcntl.LOCK_UN)
    infer_bench(lambda: sum(range(200)))
"""


@pytest.mark.slow
@pytest.mark.parametrize("prestart", ["on", "off"])
def test_a_tests_body_never_runs_on_two_sides_at_once(
    pytester: pytest.Pytester, git_env: None, prestart: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The baseline's side of a test is asked when the head reaches infer_bench, never as
    the head's call starts (prestart starts only the first worker pair early): two
    bodies of one test at once fought over what the test holds before infer_bench, and
    where the test held it through infer_bench the run hung for good."""
    pytester.makefile(".ini", pytest=ab_ini(prestart=prestart))
    pytester.makepyfile(test_locked=LOCKED_SUITE)
    init_repo(pytester.path, "suite")
    git(pytester.path, "checkout", "-q", "-b", "feature")
    monkeypatch.setenv("INFPERF_TEST_LOCK", str(pytester.path / "resource.lock"))
    result = pytester.runpytest_subprocess("--perf-ab=main", "--perf-json=out.json")
    result.assert_outcomes(passed=1)
    comparison = load_json(pytester.path / "out.json")["benchmarks"][0]["comparison"]
    assert comparison["verdict"] != "no-baseline", comparison  # the base side measured too
    assert worktrees(pytester.path) == [f"worktree {pytester.path}"]


@pytest.mark.slow
def test_a_crashing_base_worker_fails_the_affected_test(
    pytester: pytest.Pytester, git_env: None
) -> None:
    pytester.makefile(".ini", pytest=AB_INI)
    crashing = AB_SUITE.replace(
        "infer_bench(lambda: busy(300 * FACTOR))", "import os\n    infer_bench(lambda: os._exit(3))"
    )
    pytester.makepyfile(test_suite=crashing)  # on main the model kills its process
    (pytester.path / "factor.txt").write_text("1.0")
    init_repo(pytester.path, "a base that crashes")
    git(pytester.path, "checkout", "-q", "-b", "feature")
    (pytester.path / "test_suite.py").write_text(textwrap.dedent(AB_SUITE))
    commit(pytester.path, "fixed")
    repo = pytester
    result = repo.runpytest_subprocess("--perf-ab=main")
    # test_slowed fails with the worker's crash; the worker is restarted for test_steady
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*BenchmarkError: the A/B base worker (merge-base *) crashed (exit code 3)*"]
    )
    assert worktrees(repo.path) == [f"worktree {repo.path}"]


def test_an_ab_run_that_compared_nothing_fails_closed(repo: pytest.Pytester) -> None:
    """The base commit has none of the selected benchmarks: nothing was compared, and a gate
    that compared nothing does not pass, whichever mode it runs in."""
    (repo.path / "test_new.py").write_text(
        "def test_new(infer_bench):\n    infer_bench(lambda: None)\n\n"
        "def test_newer(infer_bench):\n    infer_bench(lambda: None)\n"
    )
    commit(repo.path, "two new benchmarks")
    result = repo.runpytest_subprocess("--perf-ab=main", "-k", "new")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*compared nothing*main has none of the benchmarks*"])
    allowed = repo.runpytest_subprocess("--perf-ab=main", "-k", "new", "--perf-allow-missing")
    assert allowed.ret == 0


@pytest.mark.slow
def test_a_later_process_pair_that_cannot_measure_fails_the_test(repo: pytest.Pytester) -> None:
    """Pair 1 (this process and a base worker) reads test_slowed twice as slow, which one
    pair never claims; pair 2's head worker cannot run it (a GPU with room for one more copy
    of the model, a test that needs the session's process). Ending on pair 1 would pass
    it as inconclusive: it fails, as a crash in the first pair does."""
    suite = AB_SUITE.replace(
        "def test_slowed(infer_bench):\n",
        "def test_slowed(infer_bench):\n"
        "    import sys\n"
        "    if 'abworker' in sys.argv[0] and 'infperf-ab-' not in __file__:\n"
        "        raise RuntimeError('no room for another copy of the model')\n",
    )
    assert suite != AB_SUITE
    (repo.path / "test_suite.py").write_text(suite)
    (repo.path / "factor.txt").write_text("2.0")
    commit(repo.path, "twice as slow, and no second head worker")
    result = repo.runpytest_subprocess("--perf-ab=main", "-k", "slowed")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*process pair 2 could not measure*"])
    assert worktrees(repo.path) == [f"worktree {repo.path}"]


@pytest.mark.slow
def test_a_worker_that_stops_answering_is_killed_and_the_session_ends(
    pytester: pytest.Pytester, git_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base side's model hangs inside a block: the controller's wait ends at
    the expert worker_timeout, the worker's whole process group is killed (a child it started
    included), the test that needed it fails saying so, and the session ends on time."""
    import psutil

    pytester.makefile(".ini", pytest=ab_ini(worker_timeout=3))
    hanging = AB_SUITE.replace(
        "infer_bench(lambda: busy(300 * FACTOR))",
        textwrap.indent(
            textwrap.dedent(
                """
                import os, subprocess, sys, time
                worker = "abworker" in " ".join(sys.orig_argv)
                calls = [0]
                if worker:  # the worker's child, which must not outlive it
                    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
                    Path(os.environ["CHILD_PID_FILE"]).write_text(str(child.pid))
                def model():
                    calls[0] += 1
                    if worker and calls[0] > 200:
                        time.sleep(300)  # hangs mid-block, past its warmup
                    busy(300)
                infer_bench(model)
                """
            ),
            "    ",
        ).strip(),
    )
    pytester.makepyfile(test_suite=hanging)
    (pytester.path / "factor.txt").write_text("1.0")
    (pytester.path / ".gitignore").write_text("*.json\n*.pid\n__pycache__/\n")
    init_repo(pytester.path, "a base whose model hangs in a worker")
    git(pytester.path, "checkout", "-q", "-b", "feature")
    monkeypatch.setenv("CHILD_PID_FILE", str(pytester.path / "child.pid"))
    started = time.monotonic()
    result = pytester.runpytest_subprocess("--perf-ab=main", "-k", "slowed", timeout=120)
    took = time.monotonic() - started
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the A/B base worker (merge-base *) stopped answering*"])
    assert took < 90
    child = int((pytester.path / "child.pid").read_text())
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == "zombie"
    assert worktrees(pytester.path) == [f"worktree {pytester.path}"]


def test_a_worker_whose_controller_is_gone_ends_with_what_it_started(
    tmp_path: Path, git_env: None
) -> None:
    """Workers run in their own process group (a terminal's Ctrl-C reaches the controller
    alone, which ends them in order). A controller that dies between starting a worker and
    connecting to it (killed, or interrupted there) must not leave it waiting for a
    connection forever: it follows its parent and ends."""
    import subprocess
    import sys

    import psutil

    (tmp_path / "test_x.py").write_text("def test_x(infer_bench):\n    infer_bench(lambda: 1)\n")
    init_repo(tmp_path, "one test")
    script = (
        "import os, tempfile\n"
        "from pathlib import Path\n"
        "from pytest_infperf.ab.checkout import Checkout, Selection\n"
        "from pytest_infperf.ab.workers import WorkerSide\n"
        f"top = Path({str(tmp_path)!r})\n"
        "side = WorkerSide(Checkout(top, None, Path(tempfile.mkdtemp())),\n"
        "                  Selection(rootdir=top, args=(), pythonpath=()), 'base')\n"
        "side.launch()\n"
        "print(side.proc.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    worker = psutil.Process(int(out.stdout.strip()))
    _, alive = psutil.wait_procs([worker], timeout=10)
    assert alive == []


@pytest.mark.slow
def test_both_sides_of_a_pair_compete_for_the_cpu_alike(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every side of every process pair runs in the controller's session, each worker in a
    process group of its own. Under the kernel's autogroup scheduling a session is a group
    that gets its own share of the CPU: workers in sessions of their own ran at a full share
    while the controller (the first pair's head) shared its session's with the job's other
    processes, and beside two busy loops that read the head 15-62% slower."""
    seen = repo.path / "seen"
    seen.mkdir()
    monkeypatch.setenv("INFPERF_TEST_SEEN", str(seen))
    (repo.path / "test_where.py").write_text(
        "import os\n"
        "from pathlib import Path\n\n"
        "def test_where(infer_bench):\n"
        "    pid = os.getpid()\n"
        "    out = Path(os.environ['INFPERF_TEST_SEEN']) / str(pid)\n"
        "    out.write_text(f'{os.getsid(0)} {os.getpgid(0)}')\n"
        "    infer_bench(lambda: None)\n"
    )
    commit(repo.path, "a test that says where it runs")
    result = repo.runpytest_subprocess("--perf-ab=HEAD", "-k", "where")
    result.assert_outcomes(passed=1)
    where = {int(f.name): tuple(map(int, f.read_text().split())) for f in seen.iterdir()}
    assert len(where) >= 2, where  # the controller and the base worker at least
    assert len({sid for sid, _ in where.values()}) == 1, where
    workers = [pid for pid, (_, group) in where.items() if group == pid]
    assert len(workers) == len(where) - 1, where  # each worker leads its own group


@pytest.mark.slow
def test_workers_write_no_reports_of_their_own(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker serves its controller's measurements: with a job summary and a results file
    set for every run (GITHUB_STEP_SUMMARY, infperf_json), only the controller writes them
    (each worker appended a report of its own to the job summary)."""
    summary = repo.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = repo.runpytest_subprocess(
        "--perf-ab=main", "-k", "steady", "-o", f"infperf_json={repo.path / 'every.json'}"
    )
    result.assert_outcomes(passed=1)
    assert summary.read_text().count("## pytest-infperf") == 1
    assert load_json(repo.path / "every.json")["mode"] == "ab"


def test_ctrl_c_while_a_worker_connects_leaves_nothing_behind(
    tmp_path: Path, git_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the controller waits for a new worker's socket: the worker is running
    and not connected to. Closing kills it (with its children) and still removes the
    worktree and the temporary folder."""
    import psutil

    from pytest_infperf.ab.checkout import Selection
    from pytest_infperf.ab.controller import ABController, WorkerSide

    (tmp_path / "test_x.py").write_text("def test_x(infer_bench):\n    infer_bench(lambda: 1)\n")
    init_repo(tmp_path, "one test")
    sha = git(tmp_path, "rev-parse", "HEAD")

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # Ctrl-C lands while connecting

    # Where the controller's worker looks it up (pytester's runs may import a module again).
    monkeypatch.setitem(WorkerSide._connect.__globals__, "Client", interrupted)
    selection = Selection(rootdir=tmp_path, args=(), pythonpath=())
    controller = ABController(sha, tmp_path, selection)
    with pytest.raises(KeyboardInterrupt):
        controller.setup()
    proc = controller.base.proc
    assert proc is not None and controller.base.conn is None
    controller.close()
    assert not controller.tmp.exists()
    assert worktrees(tmp_path) == [f"worktree {tmp_path}"]
    assert proc.poll() is not None  # killed and reaped
    assert not psutil.pid_exists(proc.pid)


@pytest.mark.slow
def test_ab_with_torch_and_onnxruntime(pytester: pytest.Pytester, git_env: None) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    pytester.makefile(".ini", pytest=AB_INI)
    pytester.makepyfile(
        test_models=textwrap.dedent(
            """
        import warnings
        import numpy as np
        import pytest
        import torch

        WIDTH = 128
        BATCH = 64

        def model():
            torch.manual_seed(0)
            return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()).eval()

        def test_torch(infer_bench):
            infer_bench(model(), (torch.randn(BATCH, WIDTH),), intra_op_threads=1)

        def test_ort(infer_bench, tmp_path):
            path = tmp_path / "m.onnx"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(model(), (torch.randn(BATCH, WIDTH),), str(path),
                                  input_names=["x"], dynamic_axes={"x": {0: "b"}},
                                  dynamo=False)
            x = np.ones((BATCH, WIDTH), np.float32)
            infer_bench(path, {"x": x}, providers=["CPUExecutionProvider"],
                        intra_op_threads=1)
        """
        )
    )
    (pytester.path / ".gitignore").write_text("*.json\n__pycache__/\n")
    init_repo(pytester.path, "models")
    git(pytester.path, "checkout", "-q", "-b", "feature")
    test = pytester.path / "test_models.py"
    # 16x the arithmetic; batch 64 keeps both sides compute-bound (at batch 4 a 64-wide
    # layer is all framework overhead and 16x the FLOPs costs only ~1.3x the time)
    test.write_text(test.read_text().replace("WIDTH = 128", "WIDTH = 512"))
    commit(pytester.path, "bigger")
    result = pytester.runpytest_subprocess(
        "--perf-ab=main", "--perf-json=ab.json", "--perf-profile=counts"
    )
    result.assert_outcomes(failed=2)
    doc = load_json(pytester.path / "ab.json")
    assert {b["backend"] for b in doc["benchmarks"]} == {"torch", "onnxruntime"}
    assert all(b["comparison"]["verdict"] == "regression" for b in doc["benchmarks"])
    # The work diff of the two processes' profiled passes (the base worker's through the
    # protocol): 16x the FLOPs in torch; the same graph, bigger, in ONNX Runtime.
    work = {b["backend"]: b["comparison"]["work"] for b in doc["benchmarks"]}
    assert work["torch"]["flops"] == [2 * 64 * 128 * 128, 2 * 64 * 512 * 512]
    assert work["torch"]["change"] == 15.0 and work["torch"]["measure"] == "FLOPs"
    assert work["onnxruntime"]["same"] and work["onnxruntime"]["measure"] == "graph nodes"
    result.stdout.fnmatch_lines(
        ["*why: more work per call: FLOPs +1500.0% (2.1 MFLOP -> 33.6 MFLOP)*"]
    )


@pytest.mark.slow
def test_a_pythonpath_into_head_imports_the_base_package(
    pytester: pytest.Pytester, git_env: None
) -> None:
    """With the user's package on PYTHONPATH (as an editable install puts it), the base
    side imports the base's copy, with no setting: its entry is mapped into the base's
    checkout."""
    pytester.makefile(".ini", pytest=AB_INI)
    pkg = pytester.path / "src" / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VERSION = 'base'\n")
    pytester.makepyfile(
        test_pkg=textwrap.dedent(
            """
        import os
        import mypkg

        def test_version(infer_bench):
            with open(os.environ["VERSIONS_LOG"], "a") as fh:
                fh.write(mypkg.VERSION + "\\n")
            infer_bench(lambda: None)
        """
        )
    )
    (pytester.path / ".gitignore").write_text("*.json\n__pycache__/\n")
    init_repo(pytester.path, "package")
    git(pytester.path, "checkout", "-q", "-b", "feature")
    (pkg / "__init__.py").write_text("VERSION = 'head'\n")
    commit(pytester.path, "new version")
    log = pytester.path.parent / "versions.log"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", str(pytester.path / "src"))
        mp.setenv("VERSIONS_LOG", str(log))
        result = pytester.runpytest_subprocess("--perf-ab=main")
    result.assert_outcomes(passed=1)
    # every process pair (this process and the base worker, then worker pairs) ran the test
    # once on each side, each side with its own package
    versions = log.read_text().split()
    assert set(versions) == {"base", "head"}
    assert versions.count("base") == versions.count("head")


def test_ab_usage_errors(repo: pytest.Pytester) -> None:
    result = repo.runpytest("--perf-ab=nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-ab=nope: 'nope' is not a commit, branch or tag*"])
    pytest.importorskip("xdist")
    # In this process the suite's filterwarnings = error holds: pytest-benchmark (the dev
    # extra's) would stop the run first, with its own usage error (tests/test_coexist.py).
    result = repo.runpytest("--perf-ab=main", "-p", "xdist", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-ab measures one benchmark at a time*without*-n"])
    assert worktrees(repo.path) == [f"worktree {repo.path}"]


def test_the_command_line_options_a_worker_is_given() -> None:
    """Workers get the project's options and the pytest options that change what runs,
    one token per option where it takes one value; never paths, -k, reports or basetemp."""
    from pytest_infperf.core.cmdline import MANY, forwarded

    known = {
        "-p": ("plugins", 1),
        "-o": ("override_ini", 1),
        "-W": ("pythonwarnings", 1),
        "-s": ("capture", 0),
        "-v": ("verbose", 0),
        "-k": ("keyword", 1),
        "--junitxml": ("xmlpath", 1),
        "--basetemp": ("basetemp", 1),
        "--threads": ("threads", 1),
        "--sizes": ("sizes", MANY),
        "--fast": ("fast", 0),
        "--perf-rounds": ("perf_rounds", 1),
    }
    tokens = [
        *("tests", "-vs", "-k", "slow and x", "--threads", "0", "--sizes", "1", "2", "--fast"),
        *("-pno:foo", "-p", "bar", "--junitxml=out.xml", "--basetemp", "/tmp/b"),
        *("--perf-rounds", "3", "-o", "a=b", "-W", "error", "--unknown", "--", "--threads"),
    ]
    got = forwarded(tokens, known, {"--threads", "--sizes", "--fast"}, ["--perf-rounds"])
    assert got.early == ("-s", "-pno:foo", "-pbar", "-oa=b", "-Werror")
    assert got.project == (
        ("--threads=0",),
        ("--sizes", "1", "2"),
        ("--fast",),
        ("--perf-rounds=3",),
    )


@pytest.mark.slow
def test_workers_see_the_session_as_the_head_does(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from a subfolder with ``-c ../perf.ini``, a conftest option that picks the
    parametrization and one that only the head's conftest defines: the base worker reads
    its checkout's perf.ini (it collects perf_*.py), gets --size (it collects
    test_sized[7]), works in sub/ (the test opens a relative path) and runs without
    --extra, saying so. Given only the paths and -k/-m, in the rootdir, it collected
    nothing of this and nothing was compared."""
    (repo.path / "conftest.py").write_text(
        textwrap.dedent(
            """
            def pytest_addoption(parser):
                parser.addoption("--size", type=int, default=3)

            def pytest_generate_tests(metafunc):
                if "size" in metafunc.fixturenames:
                    metafunc.parametrize("size", [metafunc.config.getoption("size")])
            """
        )
    )
    (repo.path / "perf.ini").write_text(AB_INI + "python_files = perf_*.py\n")
    sub = repo.path / "sub"
    sub.mkdir()
    (sub / "scale.txt").write_text("100")
    (sub / "perf_sized.py").write_text(
        "def test_sized(infer_bench, size):\n"
        "    n = int(open('scale.txt').read()) * size\n"
        "    infer_bench(lambda: sum(range(n)))\n"
    )
    git(repo.path, "checkout", "-q", "main")
    commit(repo.path, "a sized benchmark")
    git(repo.path, "checkout", "-q", "feature")
    git(repo.path, "merge", "-q", "main")
    with (repo.path / "conftest.py").open("a") as f:
        f.write("\n\ndef pytest_addoption(parser):\n")
        f.write('    parser.addoption("--size", type=int, default=3)\n')
        f.write('    parser.addoption("--extra", action="store_true")\n')
    commit(repo.path, "an option the base lacks")
    monkeypatch.chdir(sub)
    result = repo.runpytest_subprocess(
        "-c", "../perf.ini", "--perf-ab=main", "--size", "7", "--extra", "--perf-json=ab.json"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*merge-base * lacks option(s) --extra: not passed on*"])
    (bench,) = load_json(sub / "ab.json")["benchmarks"]
    assert bench["key"].endswith("perf_sized.py::test_sized[7]")
    assert bench["comparison"]["decided_by"] == "ab", bench["comparison"]


@pytest.mark.slow
def test_the_base_times_with_the_heads_settings_whatever_its_ini_says(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base commit's ini times with the garbage collector on; the head's (the default)
    with it off. Both sides time the head's way: an ini that moved a key between the two
    commits timed the base with the collector on and called a regression of +113%."""
    log = repo.path.parent / "gc.log"
    monkeypatch.setenv("GC_LOG", str(log))
    (repo.path / "test_gc.py").write_text(
        "import gc, os\n\n"
        "def test_gc(infer_bench):\n"
        "    def call():\n"
        "        with open(os.environ['GC_LOG'], 'a') as f:\n"
        "            f.write(f'{os.getpid()} {gc.isenabled()}\\n')\n"
        "    infer_bench(call)\n"
    )
    git(repo.path, "checkout", "-q", "main")
    (repo.path / "pytest.ini").write_text(ab_ini(disable_gc="false"))
    commit(repo.path, "timed with the collector on")
    git(repo.path, "checkout", "-q", "feature")
    git(repo.path, "merge", "-q", "main")
    (repo.path / "pytest.ini").write_text(AB_INI)
    commit(repo.path, "the default again")
    result = repo.runpytest_subprocess("--perf-ab=main", "-k", "test_gc")
    result.assert_outcomes(passed=1)
    seen: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        pid, enabled = line.split()
        seen.setdefault(pid, set()).add(enabled)
    # the head (this process) and the base (a worker) saw the collector alike
    assert len(seen) >= 2 and len({frozenset(s) for s in seen.values()}) == 1, seen
