"""Living with the gate: accepted regressions (Perf-Accept trailers, --perf-accept), failing
closed when a comparison compared nothing, --perf-require-baseline, the pull-request comment.
All in real git repositories with real pytest runs."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_infperf.report import comment

from .conftest import BUSY_HEADER, fast_ini, git, infperf, init_repo, load_json, stored_file

SUITE = (
    BUSY_HEADER
    + """

def test_slowed(infer_bench):
    infer_bench(lambda: busy(200 * FACTOR))

def test_steady(infer_bench):
    infer_bench(lambda: busy(150))

def test_other(infer_bench):
    infer_bench(lambda: busy(120))
"""
)

ACCEPT = "Perf-Accept: test_suite.py::test_slow* tokenizer moved into the model"


@pytest.fixture
def repo(pytester: pytest.Pytester, git_env: None) -> pytest.Pytester:
    """A suite on main with its baseline committed, and a feature branch that makes one
    benchmark 30% slower."""
    pytester.makefile(".ini", pytest=fast_ini(remeasure=1, drift_guard="warn"))
    pytester.makepyfile(test_suite=SUITE)
    (pytester.path / "factor.txt").write_text("1.0")
    (pytester.path / ".gitignore").write_text("__pycache__/\n*.json\n*.xml\n*.md\n")
    init_repo(pytester.path, "suite")
    pytester.runpytest("--perf-save").assert_outcomes(passed=3)
    git(pytester.path, "add", "-f", "baselines")
    git(pytester.path, "commit", "-qm", "add baselines")
    git(pytester.path, "checkout", "-q", "-b", "feature")
    return pytester


def slow_down(repo: pytest.Pytester, *message: str) -> str:
    (repo.path / "factor.txt").write_text("1.3")
    git(repo.path, "add", "factor.txt")
    git(repo.path, "commit", "-q", *(arg for m in message for arg in ("-m", m)))
    return git(repo.path, "rev-parse", "HEAD")


def verdicts(path: Path) -> dict[str, dict[str, Any]]:
    return {b["key"].split("::")[1]: b["comparison"] for b in load_json(path)["benchmarks"]}


def test_a_trailer_accepts_the_regression_it_names(repo: pytest.Pytester, validate: Any) -> None:
    # A trailer with a typo in its pattern, in an earlier commit of the change.
    (repo.path / "notes.txt").write_text("x")
    git(repo.path, "add", "notes.txt")
    git(repo.path, "commit", "-qm", "notes", "-m", "Perf-Accept: test_suite.py::test_slwed oops")
    sha = slow_down(repo, "make it slower", ACCEPT)

    result = repo.runpytest(
        stored_file(repo.path),
        "--perf-json=out.json",
        "--junitxml=j.xml",
        "--perf-markdown=r.md",
    )
    result.assert_outcomes(passed=3)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*infperf: 3 benchmarks: no regressions (1 accepted, 2 unchanged)*",
            "*test_slowed*1.*accepted*",
            "accepted: test_suite.py::test_slowed at +*%*, by a Perf-Accept trailer in commit *",
            "*warning: a Perf-Accept trailer in commit * accepts 'test_suite.py::test_slwed', "
            "which matches no benchmark of this run: check the pattern*",
        ]
    )
    doc = load_json(repo.path / "out.json")
    validate(doc)
    got = verdicts(repo.path / "out.json")
    slowed = got["test_slowed"]
    assert slowed["verdict"] == "accepted" and slowed["ratio"] > 1.2
    assert slowed["accepted_by"] == {
        "pattern": "test_suite.py::test_slow*",
        "reason": "tokenizer moved into the model",
        "commit": sha,
    }
    assert got["test_steady"]["verdict"] == "unchanged"
    assert got["test_steady"].get("accepted_by") is None
    # The figures are recorded as for any benchmark.
    (entry,) = [b for b in doc["benchmarks"] if b["key"].endswith("test_slowed")]
    assert entry["samples"] and entry["stats"]["median"] > 0
    props = {
        p.get("name"): p.get("value")
        for case in ET.parse(repo.path / "j.xml").iter("testcase")
        if case.get("name") == "test_slowed"
        for p in case.iter("property")
    }
    assert props["infperf.verdict"] == "accepted"
    md = (repo.path / "r.md").read_text()
    assert md.startswith("## pytest-infperf: no regressions, 1 accepted in 3 benchmarks")
    assert "🟠 accepted" in md and "### Accepted regressions" in md
    assert f"accepted by commit `{sha[:10]}`" in md and "tokenizer moved into the model" in md

    # Without the trailer in the change, the same slowdown fails.
    git(repo.path, "commit", "-q", "--amend", "-m", "make it slower")
    result = repo.runpytest(stored_file(repo.path))
    result.assert_outcomes(passed=2, failed=1)


@pytest.mark.slow
def test_accepted_when_settled_and_under_ab(repo: pytest.Pytester) -> None:
    """Acceptance is the judge's: a regression that settling or --perf-ab decides is
    accepted the same way."""
    slow_down(repo, "make it slower", ACCEPT)
    # Settling: --perf-settle=auto confirms a first-pass regression against the baseline's
    # commit, interleaved in this job.
    result = repo.runpytest("--perf-compare=main", "--perf-json=out.json")
    result.assert_outcomes(passed=3)
    slowed = verdicts(repo.path / "out.json")["test_slowed"]
    assert slowed["verdict"] == "accepted" and slowed["decided_by"] == "ab"
    result = repo.runpytest("--perf-ab=main", "--perf-json=ab.json")
    result.assert_outcomes(passed=3)
    slowed = verdicts(repo.path / "ab.json")["test_slowed"]
    assert slowed["verdict"] == "accepted" and slowed["accepted_by"]["pattern"].endswith("slow*")


def test_perf_accept_flag_for_a_manual_run(repo: pytest.Pytester) -> None:
    (repo.path / "factor.txt").write_text("1.3")  # uncommitted: a manual run
    result = repo.runpytest(
        stored_file(repo.path),
        "--perf-accept=*::test_slowed known: batch size doubled",
        "--perf-accept=test_suite.py::test_nope",
        "--perf-json=out.json",
    )
    result.assert_outcomes(passed=3)
    slowed = verdicts(repo.path / "out.json")["test_slowed"]
    assert slowed["verdict"] == "accepted"
    assert slowed["accepted_by"] == {
        "pattern": "*::test_slowed",
        "reason": "known: batch size doubled",
        "commit": None,
    }
    result.stdout.fnmatch_lines(
        ["*warning: --perf-accept accepts 'test_suite.py::test_nope', which matches no benchmark*"]
    )


def test_a_comparison_that_compared_nothing_fails_closed(
    repo: pytest.Pytester, validate: Any
) -> None:
    # The baselines were not pulled: the folder is missing.
    git(repo.path, "rm", "-rq", "baselines")
    git(repo.path, "commit", "-qm", "baselines live on their own branch now")
    result = repo.runpytest("--perf-compare=main", "--perf-json=out.json", "--perf-markdown=r.md")
    result.assert_outcomes(passed=3)  # no single test is to blame
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "FAILED: this comparison compared nothing: the baselines folder * holds no "
            "baselines: pull the stored baselines first (`infperf baselines pull`)*"
            "--perf-allow-missing lets a first run pass",
        ]
    )
    doc = load_json(repo.path / "out.json")
    validate(doc)
    assert "holds no baselines" in doc["compared_nothing"]
    # A stray subfolder (no baseline file in it) is no environment to offer.
    (repo.path / "baselines" / "stray").mkdir(parents=True)
    (repo.path / "baselines" / "stray" / "notes.txt").write_text("not a baseline\n")
    result = repo.runpytest("--perf-compare=main")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["FAILED: * the baselines folder * holds no baselines: pull *"])
    assert "stray" not in result.stdout.str()
    # Nor is one whose only file cannot be read.
    damaged = repo.path / "baselines" / "linux-x86-64-cpu-py3.11-0123456789" / f"{'a' * 40}.json"
    damaged.parent.mkdir()
    damaged.write_text("{")
    result = repo.runpytest("--perf-compare=main")
    result.stdout.fnmatch_lines(
        [
            "FAILED: this comparison compared nothing: no baseline for this machine's "
            "environment *, and no baseline of another environment in * could be read "
            "(linux-x86-64-cpu-py3.11-0123456789): save one on main with --perf-save*"
        ]
    )
    assert "nearest environment" not in result.stdout.str()
    damaged.unlink()
    md = (repo.path / "r.md").read_text()
    assert md.startswith("## pytest-infperf: compared nothing in 3 benchmarks")
    assert "> [!CAUTION]" in md

    # The lenient behaviour for a first run: the flag or the ini key.
    result = repo.runpytest("--perf-compare=main", "--perf-allow-missing", "--perf-json=out.json")
    assert result.ret == 0
    assert "compared_nothing" not in load_json(repo.path / "out.json")
    result = repo.runpytest("--perf-compare=main", "-o", "infperf_allow_missing=true")
    assert result.ret == 0
    # --perf-warn-only never fails on performance: it says so as loudly, and passes.
    result = repo.runpytest("--perf-compare=main", "--perf-warn-only")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["WARNING: this comparison compared nothing: *"])
    result = repo.runpytest("--perf-compare=main", "-o", "infperf_allow_missing=maybe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*infperf_allow_missing='maybe': expected true or false*"])
    # A saving run that compares nothing is not a gate: --perf-save alone never fails closed.
    assert repo.runpytest("--perf-save").ret == 0
    # A results file that has none of this run's benchmarks is named as the cause.
    repo.runpytest("--perf-json=steady.json", "-k", "steady").assert_outcomes(passed=1)
    result = repo.runpytest("--perf-compare=steady.json", "-k", "other")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["FAILED: this comparison compared nothing: the file *steady.json has none of the*"]
    )


def test_compared_nothing_names_the_nearest_environment(repo: pytest.Pytester) -> None:
    (path,) = sorted((repo.path / "baselines").glob("*/*.json"))
    doc = json.loads(path.read_text())
    doc["environment"]["hard"]["cpu_model"] = "Some Other CPU @ 3.0GHz"
    doc["environment"]["key"] = "linux-x86-64-cpu-py3.11-0123456789"
    target = repo.path / "baselines" / doc["environment"]["key"] / path.name
    target.parent.mkdir()
    target.write_text(json.dumps(doc))
    path.unlink()
    path.parent.rmdir()
    # A results file of another environment: nothing can be interleaved, nothing compares
    # (a commit's baseline is compared interleaved instead: tests/test_baselines.py).
    result = repo.runpytest(stored_file(repo.path))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["FAILED: this comparison compared nothing: *cpu_model*"])
    assert "Some Other CPU" in result.stdout.str()


def test_require_baseline_fails_each_benchmark_without_one(repo: pytest.Pytester) -> None:
    # test_other is renamed: the baseline has nothing under its new name.
    src = (repo.path / "test_suite.py").read_text().replace("test_other", "test_renamed")
    (repo.path / "test_suite.py").write_text(src)
    result = repo.runpytest(stored_file(repo.path))
    result.assert_outcomes(passed=3)
    assert result.ret == 0  # one benchmark without a baseline is not a comparison of nothing
    result.stdout.fnmatch_lines(
        [
            "*warning: this run's selection of tests differs from the baseline's run (1 of "
            "the baseline's 3 benchmarks did not run; 1 benchmark is new): a benchmark's "
            "speed depends on what ran before it*"
        ]
    )
    result = repo.runpytest(stored_file(repo.path), "--perf-require-baseline")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_suite.py::test_renamed: no-baseline*--perf-require-baseline asks every "
            "benchmark to be compared*"
        ]
    )
    result = repo.runpytest(stored_file(repo.path), "-o", "infperf_require_baseline=yes")
    result.assert_outcomes(passed=2, failed=1)


def test_pull_request_comment_from_a_real_run(repo: pytest.Pytester) -> None:
    slow_down(repo, "make it slower")
    repo.runpytest(stored_file(repo.path), "--perf-json=bad.json")
    out = repo.path / "gh_output"
    done = infperf(
        repo.path, "comment", "bad.json", "-o", "c.md", "--github-output", GITHUB_OUTPUT=str(out)
    )
    assert done.returncode == 0, done.stderr
    text = (repo.path / "c.md").read_text()
    assert text.startswith(comment.MARKER + "\n## pytest-infperf: 1 regression in 3 benchmarks")
    assert "### Regressions" in text
    assert out.read_text() == "notable=true\n"

    # A change that changes nothing: the comment (if one exists) says so.
    git(repo.path, "revert", "--no-edit", "HEAD")
    repo.runpytest(stored_file(repo.path), "--perf-json=good.json")
    done = infperf(repo.path, "comment", "good.json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        comment.MARKER + "\n## pytest-infperf: no changes in 3 benchmarks"
    )
    done = infperf(repo.path, "comment", "good.json", "--github-output")
    assert done.returncode == 2 and "GITHUB_OUTPUT is not set" in done.stderr

    # It always fits GitHub's limit: the table folds, then loses rows, and says where the
    # rest is.
    doc = load_json(repo.path / "bad.json")
    slowed = next(b for b in doc["benchmarks"] if b["comparison"]["verdict"] == "regression")
    many = [dict(slowed, key=f"test_suite.py::test_{i}") for i in range(300)]
    body, notable = comment.body({**doc, "benchmarks": many}, limit=6000)
    assert notable and len(body) <= 6000 and body.startswith(comment.MARKER)
    assert "<details><summary>All 300 benchmarks</summary>" in body
    assert "more rows in the job summary" in body
