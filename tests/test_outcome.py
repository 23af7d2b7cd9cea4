"""A results file says whether its run completed; a perf run that measured nothing fails
closed; the pull-request comment never reads a partial or failed run as "no changes"; a
work limit that could not be checked says so. Real pytest runs in real git repositories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_infperf.report import comment

from .conftest import infperf, init_repo, load_json, stored_file

SUITE = """
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def test_a(infer_bench):
    infer_bench(lambda: sum(range(100)))


def test_b(infer_bench):
    infer_bench(lambda: sum(range(100)))
    if (HERE / "stop.txt").is_file():
        raise KeyboardInterrupt  # Ctrl-C while the run is under way
    if (HERE / "exit.txt").is_file():
        pytest.exit("stopped by the suite", returncode=0)


def test_c(infer_bench):
    infer_bench(lambda: sum(range(100)))
"""


@pytest.fixture
def repo(ourtester: pytest.Pytester, git_env: None) -> pytest.Pytester:
    ourtester.makepyfile(test_suite=SUITE)
    (ourtester.path / ".gitignore").write_text("*.json\n*.txt\n__pycache__/\n")
    init_repo(ourtester.path)
    return ourtester


def test_an_interrupted_run_writes_its_partial_results_marked_incomplete(
    repo: pytest.Pytester, validate: Any
) -> None:
    (repo.path / "stop.txt").write_text("")
    # (pytester re-raises a Ctrl-C of the run inside unless told not to)
    result = repo.runpytest_inprocess(
        "--perf-save", "--perf-json=out.json", "--perf-markdown=r.md", no_reraise_ctrlc=True
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    # The job summary's title says so too.
    md = (repo.path / "r.md").read_text()
    assert md.startswith("## pytest-infperf: incomplete run, 2 benchmarks measured\n")
    result.stdout.fnmatch_lines(
        ["*infperf: wrote results JSON: *out.json (marked incomplete: interrupted (KeyboardInt*"]
    )
    doc = load_json(repo.path / "out.json")
    validate(doc)
    assert len(doc["benchmarks"]) == 2  # test_c never ran
    assert doc["run"]["complete"] is False and doc["run"]["exitstatus"] == 2
    assert doc["run"]["incomplete"] == "interrupted (KeyboardInterrupt)"
    assert not (repo.path / "baselines").exists()  # an interrupted run saves nothing
    # The comment on it says so, never "no changes", and is worth posting.
    out = infperf(repo.path, "comment", "out.json")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(
        comment.MARKER + "\n## pytest-infperf: incomplete run, 2 benchmarks measured\n"
    )
    assert "interrupted (KeyboardInterrupt)" in out.stdout and "no changes" not in out.stdout
    assert comment.body(doc)[1] is True

    # pytest.exit(returncode=0) stops the run with a passing exit status: still incomplete.
    (repo.path / "stop.txt").unlink()
    (repo.path / "exit.txt").write_text("")
    assert repo.runpytest("--perf-json=out.json").ret == 0
    run = load_json(repo.path / "out.json")["run"]
    assert run["complete"] is False and run["exitstatus"] == 0
    assert run["incomplete"] == "interrupted (Exit: stopped by the suite)"

    # -x: stopped by its first failure, with every test after it unrun.
    (repo.path / "exit.txt").unlink()
    repo.makepyfile(test_0first="def test_fails():\n    assert False\n")
    result = repo.runpytest("-x", "--perf-json=out.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    run = load_json(repo.path / "out.json")["run"]
    assert run["complete"] is False and run["failed"] == ["test_0first.py::test_fails"]
    assert run["incomplete"] == "stopped early: stopping after 1 failures (-x/--maxfail)"

    # The whole run: complete, its failed test named.
    result = repo.runpytest("--perf-json=out.json")
    result.assert_outcomes(passed=3, failed=1)
    run = load_json(repo.path / "out.json")["run"]
    assert run == {
        "complete": True,
        "exitstatus": 1,
        "failed": ["test_0first.py::test_fails"],
        "tests_failed": 1,
    }
    text, _ = comment.body(load_json(repo.path / "out.json"))
    assert "## pytest-infperf: run failed: 1 failed test in 3 benchmarks" in text
    assert "> - failed test: test_0first.py::test_fails" in text


def test_a_blown_budget_is_a_failed_run_in_the_comment(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        test_fast="def test_fast(infer_bench):\n"
        "    infer_bench(lambda: sum(range(2000)), max_median_ms=0.000001)\n"
    )
    ourtester.runpytest("--perf-json=out.json").assert_outcomes(failed=1)
    text, notable = comment.body(load_json(ourtester.path / "out.json"))
    assert text.startswith(
        comment.MARKER + "\n## pytest-infperf: run failed: 1 budget exceeded in 1 benchmark\n"
    )
    assert "> - budget exceeded: test_fast.py::test_fast" in text
    assert notable and "no changes" not in text
    # The failed test is the budget's: not said twice.
    assert "failed test" not in text


def test_a_perf_run_that_measured_nothing_fails_closed(
    ourtester: pytest.Pytester, git_env: None, validate: Any
) -> None:
    """A wrong test path: no collected test uses infer_bench. Plain pytest is unaffected,
    and pytest's own "no tests collected" (exit 5) stays as pytest reports it."""
    ourtester.makepyfile(
        test_plain="def test_plain():\n    pass\n",
        test_gpu="import pytest\n\n@pytest.mark.skip(reason='no GPU')\n"
        "def test_gpu(infer_bench):\n    infer_bench(lambda: None)\n",
    )
    (ourtester.path / ".gitignore").write_text("*.json\n__pycache__/\n")
    init_repo(ourtester.path)
    result = ourtester.runpytest("--perf-save", "--perf-json=out.json", "-k", "plain")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "infperf: FAILED: --perf-save measured no benchmark: none of the 1 test collected "
            "uses the infer_bench fixture. Point the run at the perf tests (the test paths, "
            "the Action's `tests` input), or run without --perf-save"
        ]
    )
    doc = load_json(ourtester.path / "out.json")
    validate(doc)
    assert doc["measured_nothing"].startswith("--perf-save measured no benchmark")
    assert not (ourtester.path / "baselines").exists()
    text, notable = comment.body(doc)
    assert notable and "## pytest-infperf: run failed: measured nothing in 0 benchmarks" in text
    # Every perf test skipped: named so.
    result = ourtester.runpytest("--perf-compare=HEAD")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*measured no benchmark: 1 of the 2 tests collected use infer_bench, but none*"]
    )
    result = ourtester.runpytest("--perf-compare=HEAD", "--perf-warn-only")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["infperf: WARNING: --perf-compare measured no benchmark: *"])
    plain = ourtester.runpytest("--perf-json=out.json")
    assert plain.ret == 0 and "infperf:" not in plain.stdout.str()
    assert "measured_nothing" not in load_json(ourtester.path / "out.json")
    assert ourtester.runpytest("--perf-save", "-k", "nothing").ret == 5
    assert ourtester.runpytest("--perf-save", "--collect-only").ret == 0


def test_a_file_that_is_not_results_is_named_for_the_command(tmp_path: Path) -> None:
    (tmp_path / "junk.json").write_text(json.dumps({"a": 1}))
    (tmp_path / "text.json").write_text("not json")
    for name in ("junk.json", "text.json", "missing.json"):
        for command in (("comment", name), ("merge", name, "-o", "m.json")):
            out = infperf(tmp_path, *command)
            assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
            assert f"infperf: error: {name}: " in out.stderr
            assert (
                f"infperf {command[0]} reads the results JSON a pytest run wrote with "
                "--perf-json (or infperf merge -o): pass that file"
            ) in out.stderr
            assert "--perf-compare" not in out.stderr and "--perf-save" not in out.stderr
    out = infperf(tmp_path, "comment", "junk.json")
    assert "is not a pytest-infperf results document" in out.stderr


VARYING = """
import itertools

import torch


class Alternating(torch.nn.Module):
    # every other call runs one operator more: its counts vary from call to call
    def __init__(self):
        super().__init__()
        self.calls = itertools.count()

    def forward(self, x):
        y = x.relu()
        if next(self.calls) % 2:
            y = y.sigmoid()
        return y


def test_varying(infer_bench):
    infer_bench(Alternating(), torch.ones(8), max_work_increase=0.1)
"""


@pytest.mark.slow
def test_a_work_limit_that_cannot_be_checked_says_so(
    pytester: pytest.Pytester, git_env: None
) -> None:
    """Both sides profiled, but their operator counts vary from call to call (and a CPU
    run counts no kernels): no measure is left to hold to max_work_increase. The gate
    says it did not check, in the terminal and the JSON, instead of passing in silence."""
    pytest.importorskip("torch")
    from .conftest import fast_ini

    ini = fast_ini(drift_guard="off").replace("infperf_profile = off", "infperf_profile = counts")
    pytester.makefile(".ini", pytest=ini)
    pytester.makepyfile(test_varying=VARYING)
    (pytester.path / ".gitignore").write_text("baselines/\n*.json\n__pycache__/\n")
    init_repo(pytester.path)
    assert pytester.runpytest_subprocess("--perf-save").ret == 0
    result = pytester.runpytest_subprocess(stored_file(pytester.path), "--perf-json=out.json")
    result.stdout.fnmatch_lines(
        [
            "*max_work_increase=0.1 not checked: the counts vary from call to call "
            "(operators), and no other measure it is held to*"
        ]
    )
    (bench,) = load_json(pytester.path / "out.json")["benchmarks"]
    assert bench["comparison"]["work"]["increase"] is None
    gate = bench["extra"]["work_gate"]
    assert gate["passed"] is None and gate["change"] is None
    assert gate["unchecked"].startswith("the counts vary from call to call (operators)")
    assert any(w.startswith("max_work_increase=0.1 not checked") for w in bench["warnings"])
