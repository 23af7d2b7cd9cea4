"""--perf-save and --perf-compare in real git repositories."""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from .conftest import (
    BUSY_HEADER,
    FAST_INI,
    expert,
    fast_ini,
    git,
    init_repo,
    load_json,
    stored_file,
)

# Busy-waits are immune to the machine's speed, so verdicts here are deterministic: these
# tests check behaviour; benchmarks/decision_quality.py checks the statistics.
SUITE = (
    BUSY_HEADER
    + """

def test_slowed(infer_bench):
    infer_bench(lambda: busy(200 * FACTOR))

def test_steady(infer_bench):
    infer_bench(lambda: busy(150))

def test_named(infer_bench):
    infer_bench(lambda: busy(100))
    infer_bench(lambda: busy(120), name="second")
"""
)


#: The repository's expert settings (a test that overrides infperf_expert repeats them).
REPO_EXPERT = {"remeasure": 1, "drift_guard": "warn"}


def _expert(**extra: object) -> list[str]:
    """``-o infperf_expert=...``: the repository's expert settings and ``extra``."""
    return ["-o", f"infperf_expert={expert(**{**REPO_EXPERT, **extra})}"]


@pytest.fixture
def repo(pytester: pytest.Pytester, git_env: None) -> pytest.Pytester:
    """A git repository with a perf suite committed on main."""
    # The drift guard only reports here: busy-waits do not slow down with the machine, and
    # its adjustments are tested on their own below.
    pytester.makefile(".ini", pytest=fast_ini(**REPO_EXPERT))
    pytester.makepyfile(test_suite=SUITE)
    (pytester.path / "factor.txt").write_text("1.0")
    (pytester.path / ".gitignore").write_text("__pycache__/\n*.json.out\n")
    init_repo(pytester.path, "suite")
    return pytester


def baseline_files(root: Path) -> list[Path]:
    return sorted((root / "baselines").glob("*/*.json"))


def commit_all(path: Path, message: str) -> str:
    git(path, "add", "-A")
    git(path, "commit", "-qm", message)
    return git(path, "rev-parse", "HEAD")


def slow_down(path: Path, factor: float = 1.3) -> None:
    (path / "factor.txt").write_text(str(factor))


@pytest.mark.slow
def test_save_then_compare_from_a_branch_two_commits_later(
    repo: pytest.Pytester, validate: Any
) -> None:
    head = git(repo.path, "rev-parse", "HEAD")
    result = repo.runpytest("--perf-save")
    result.assert_outcomes(passed=3)
    files = baseline_files(repo.path)
    assert [f.stem for f in files] == [head]
    result.stdout.fnmatch_lines(
        [
            f"infperf: wrote baseline of {head[:10]}: baselines/*/{head}.json"
            " (4 benchmarks saved, 4 stored)"
        ]
    )
    doc = json.loads(files[0].read_text())
    validate(doc)
    assert doc["mode"] == "baseline" and doc["commit"]["sha"] == head
    assert doc["commit"]["dirty"] is False
    assert doc["reference"]["gemm_s"] > 0 and doc["reference"]["python_s"] > 0
    assert doc["run_seconds"] > 0  # what --perf-budget=1.5x multiplies
    assert files[0].parent.name == doc["environment"]["key"]
    assert not list((repo.path / "baselines").rglob("*.lock"))

    # Baselines committed on main (the simple setup), then a feature branch two commits on.
    commit_all(repo.path, "add baselines")
    git(repo.path, "checkout", "-q", "-b", "feature")
    (repo.path / "notes.txt").write_text("x")
    commit_all(repo.path, "unrelated change")
    slow_down(repo.path)
    commit_all(repo.path, "make it slower")

    # The stored baseline alone decides where settling cannot happen: a results file.
    result = repo.runpytest(stored_file(repo.path), "--perf-json=cmp.json", "--junitxml=j.xml")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "PERFORMANCE REGRESSION in test_suite.py::test_slowed: *% slower (median latency; "
            "90% interval +*% to +*%, past the 5% threshold)",
            "*median latency: now 2?? us, before 2?? us",
            "*decided by: the stored baseline, confirmed on fresh samples (not settled in this "
            "job: --perf-compare names a results file, so there is no commit to measure)",
            f"*reproduce (interleaved on this machine, from the rootdir): pytest "
            f"test_suite.py::test_slowed --perf-ab={head[:12]}",
            "*accept it: a 'Perf-Accept: test_suite.py::test_slowed <reason>' trailer*",
            "*baseline: *",
        ]
    )
    # The untouched three pass; what each is called (unchanged, or inconclusive after a
    # stall of the loaded machine in a 0.05 s stored pass) is not this test's subject.
    result.stdout.fnmatch_lines(["*infperf: 4 benchmarks: 1 regression (*)*"])
    cmp = load_json(repo.path / "cmp.json")
    validate(cmp)
    by_key = {b["key"].split("::")[1]: b for b in cmp["benchmarks"]}
    slowed = by_key["test_slowed"]["comparison"]
    assert slowed["verdict"] == "regression"
    assert slowed["baseline_commit"] == head  # its distance: the settled run's, below
    assert 1.2 < slowed["ratio"] < 1.4 and slowed["ci_low"] > 1.05
    for key in (
        "ratio",
        "ci_low",
        "ci_high",
        "p_value",
        "threshold",
        "alpha",
        "metric",
        "baseline_commit",
        "baseline_distance",
        "env_diff",
    ):
        assert key in slowed, key
    passing = ("unchanged", "no-regression", "inconclusive")
    assert by_key["test_steady"]["comparison"]["verdict"] in passing
    assert by_key["test_named#second"]["comparison"]["verdict"] in passing
    assert cmp["comparison"]["sha"] == head
    props = {
        (c.get("name"), p.get("name")): p.get("value")
        for c in ET.parse(repo.path / "j.xml").getroot().iter("testcase")
        for p in c.iter("property")
    }
    assert props[("test_slowed", "infperf.verdict")] == "regression"
    assert float(props[("test_slowed", "infperf.ratio")]) > 1.2
    assert props[("test_steady", "infperf.verdict")] == "unchanged"
    assert slowed["decided_by"] == "stored" and slowed["stored_pass"] is None

    # By default, what the stored baseline flags is settled in this job, interleaved
    # against the code of the baseline's commit, over two process pairs or more.
    result = repo.runpytest_subprocess("--perf-compare=main", "--perf-json=cmp.json")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "PERFORMANCE REGRESSION in test_suite.py::test_slowed: *% slower*",
            "*decided by: interleaving in this job over * process pairs, settling the stored "
            "pass (first-pass regression: regression 1.* [[]1.*, 1.*])",
            f"*baseline: commit {head[:10]} (the stored baseline's commit), measured in this "
            "job, interleaved with it",
        ]
    )
    cmp = load_json(repo.path / "cmp.json")
    validate(cmp)
    by_key = {b["key"].split("::")[1]: b for b in cmp["benchmarks"]}
    slowed = by_key["test_slowed"]["comparison"]
    assert slowed["verdict"] == "regression" and slowed["decided_by"] == "ab"
    assert slowed["mode"] == "ab" and slowed["unit"] == "process pairs"
    assert slowed["baseline_commit"] == head and slowed["baseline_distance"] == 1
    assert slowed["settled_because"] == "regression"
    assert slowed["stored_pass"]["verdict"] == "regression"
    assert slowed["stored_pass"]["decided_by"] == "stored"
    assert slowed["process_pairs"] >= 2
    assert len(by_key["test_slowed"]["extra"]["settle"]["pairs"]) == slowed["process_pairs"]
    steady = by_key["test_steady"]["comparison"]
    assert steady["verdict"] == "unchanged" and steady["decided_by"] == "stored"
    assert not list((repo.path / ".git").glob("worktrees/*"))  # the baseline's worktree is gone

    # A budget spent before the first benchmark: what might fail is still settled to its
    # end (a budget trades time only for verdicts that pass either way).
    result = repo.runpytest("--perf-compare=main", "--perf-budget=0.001", "--perf-json=b.json")
    result.assert_outcomes(passed=2, failed=1)
    by_key = {b["key"].split("::")[1]: b for b in load_json(repo.path / "b.json")["benchmarks"]}
    slowed = by_key["test_slowed"]["comparison"]
    assert slowed["verdict"] == "regression" and slowed["decided_by"] == "ab"
    assert slowed["process_pairs"] >= 2


def test_the_family_counts_benchmarks_not_tests(repo: pytest.Pytester) -> None:
    """test_named calls infer_bench twice: two claims. The run's family (its multiplicity
    control, the run-level guard, the JSON's record a merge sums) counts the baseline's
    benchmarks of each test: 4 for 3 tests. Before, it counted the tests."""
    from pytest_infperf.session.facts import family

    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    git(repo.path, "checkout", "-q", "-b", "feature")
    repo.runpytest("--perf-compare=main", "--perf-json=out.json")
    assert load_json(repo.path / "out.json")["family"]["benchmarks"] == 4

    class Context:  # a baseline of test_a twice, test_b once
        source = type("Source", (), {"origin": "commit", "entries": {}})()

    Context.source.entries = {
        "a": {"nodeid": "t.py::test_a"},
        "a2": {"nodeid": "t.py::test_a"},
        "b": {"nodeid": "t.py::test_b"},
    }
    rows = [
        (["t.py::test_a"], 2),
        (["t.py::test_a", "t.py::test_b"], 3),
        (["t.py::test_new"], 1),  # not in the baseline: its calls are not known yet
        ([], 0),
    ]
    for nodeids, size in rows:
        assert family(Context(), nodeids) == size  # type: ignore[arg-type]


#: A test that makes as many benchmarks as names.txt says, each x3 slower with factor.txt.
MANY = (
    BUSY_HEADER
    + """
NAMES = int((Path(__file__).parent / "names.txt").read_text())

def test_one(infer_bench):
    infer_bench(lambda: busy(100 * FACTOR))

def test_many(infer_bench):
    for i in range(NAMES):
        infer_bench(lambda: busy(100 * FACTOR), name=f"n{i}")
"""
)


@pytest.mark.parametrize(
    ("made", "size", "counted", "family"),
    [
        (1, 2, 1, 2),  # as counted: the run's family
        (3, 2, 3, 2),  # the baseline held all three
        (3, 2, 1, 6),  # a new test's share over all three it made
        (50, 1, 1, 50),  # one test, fifty names, nothing counted: before, a family of 1
        (5, 10, 2, 25),  # rounded up
        (0, 0, 0, 1),
    ],
)
def test_a_tests_claims_are_held_to_its_share(
    made: int, size: int, counted: int, family: int
) -> None:
    from pytest_infperf.core.family import of_test

    assert of_test(size, made, counted) == family


def test_a_test_that_makes_more_benchmarks_than_counted_holds_its_claims(
    pytester: pytest.Pytester, git_env: None
) -> None:
    """The baseline holds test_many's one benchmark; now it makes three. The run counted
    two benchmarks (test_one, test_many): before, test_many's n0 was claimed at a family of
    2 (p 0.0025 x 2 <= 0.01) beside two more claims it did not count. Each test's claims now
    share its part of the run's alpha: n0 is held at 2 x 3 and not claimed, test_one's
    stands at 2; the JSON's family counts the four made."""
    ini = fast_ini(drift_guard="off", max_rounds=6, min_time=0.0001).replace(
        "infperf_rounds = 10", "infperf_rounds = 6"
    )
    pytester.makefile(".ini", pytest=ini)
    pytester.makepyfile(test_many=MANY)
    (pytester.path / "factor.txt").write_text("1.0")
    (pytester.path / "names.txt").write_text("1")
    init_repo(pytester.path)
    pytester.runpytest("--perf-save").assert_outcomes(passed=2)
    (pytester.path / "factor.txt").write_text("3.0")
    (pytester.path / "names.txt").write_text("3")
    result = pytester.runpytest(stored_file(pytester.path), "--perf-json=out.json")
    doc = load_json(pytester.path / "out.json")
    found = {b["key"].split("::")[1]: b["comparison"] for b in doc["benchmarks"]}
    # test_one is held to its own share, 2: its claim stands at six samples a side only
    # where they separate all but once (under a loaded CI runner they may not: then it
    # is left undecided, and nothing below changes).
    one = found["test_one"]
    assert one["family_size"] == 2, one
    claimed = one["verdict"] == "regression"
    assert claimed or one["verdict"] == "inconclusive", result.stdout.str()
    n0 = found["test_many#n0"]
    assert n0["verdict"] == "inconclusive" and n0["reason"] == "multiplicity", n0
    assert n0["family_size"] == 6 and "over the run's 6 benchmarks" in n0["note"]
    assert {found["test_many#n1"]["verdict"], found["test_many#n2"]["verdict"]} == {"no-baseline"}
    assert doc["family"]["benchmarks"] == 4
    # test_one's claim fails it; test_many's was withdrawn
    result.assert_outcomes(passed=2 - claimed, failed=int(claimed))


def test_a_saved_baseline_says_which_failed_tests_it_lacks(repo: pytest.Pytester) -> None:
    """--perf-save with a perf test that fails before measuring stores a partial baseline:
    the run says which tests it lacks (their comparisons would find no baseline)."""
    (repo.path / "test_broken.py").write_text(
        "def test_broken(infer_bench):\n    raise RuntimeError('model failed to load')\n"
    )
    result = repo.runpytest("--perf-save")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        ["*lacks 1 perf test(s) that failed before measuring: test_broken.py::test_broken*"]
    )
    assert (
        "perf test(s) that failed"
        not in repo.runpytest("--perf-save", "-k", "not broken").stdout.str()
    )


def test_warn_only_reports_without_failing(repo: pytest.Pytester) -> None:
    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    slow_down(repo.path)
    result = repo.runpytest("--perf-compare=HEAD", "--perf-warn-only")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*1 regression*", "*test_slowed*regression*"])


def test_improvement_is_reported_and_passes(repo: pytest.Pytester) -> None:
    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    slow_down(repo.path, 0.7)
    result = repo.runpytest("--perf-compare=HEAD", "--perf-json=out.json")
    result.assert_outcomes(passed=3)
    doc = load_json(repo.path / "out.json")
    verdicts = {b["key"].split("::")[1]: b["comparison"]["verdict"] for b in doc["benchmarks"]}
    assert verdicts["test_slowed"] == "improvement"


def test_compare_against_a_json_file(repo: pytest.Pytester) -> None:
    repo.runpytest("--perf-json=before.json").assert_outcomes(passed=3)
    slow_down(repo.path)
    result = repo.runpytest("--perf-compare=before.json")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["*baseline: file */before.json", "compared with file */before.json"]
    )


def test_no_baseline_and_new_benchmarks(repo: pytest.Pytester) -> None:
    result = repo.runpytest("--perf-compare=main", "--perf-json=out.json")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*warning: no baseline for environment * first-parent commit(s)"
            " from *save one on main with --perf-save*"
        ]
    )
    doc = load_json(repo.path / "out.json")
    assert {b["comparison"]["verdict"] for b in doc["benchmarks"]} == {"no-baseline"}
    # A benchmark added after the baseline is 'no-baseline'; the others are compared.
    repo.runpytest("--perf-save", "-k", "steady").assert_outcomes(passed=1, deselected=2)
    result = repo.runpytest("--perf-compare=main", "--perf-json=out.json")
    result.assert_outcomes(passed=3)
    verdicts = {
        b["key"].split("::")[1]: b["comparison"]["verdict"]
        for b in load_json(repo.path / "out.json")["benchmarks"]
    }
    assert verdicts["test_steady"] == "unchanged"
    assert verdicts["test_slowed"] == "no-baseline"


def test_resave_merges(repo: pytest.Pytester) -> None:
    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    (path,) = baseline_files(repo.path)
    before = {b["key"]: b for b in json.loads(path.read_text())["benchmarks"]}
    result = repo.runpytest("--perf-save", "-k", "steady")
    result.stdout.fnmatch_lines(["*(1 benchmark saved, 4 stored)*"])
    after = {b["key"]: b for b in json.loads(path.read_text())["benchmarks"]}
    assert set(after) == set(before)
    steady = next(k for k in after if k.endswith("test_steady"))
    slowed = next(k for k in after if k.endswith("test_slowed"))
    assert after[slowed] == before[slowed]  # not re-run: kept as stored
    assert after[steady]["samples"] != before[steady]["samples"]  # re-run: replaced


def test_dirty_tree_is_recorded_and_warned(repo: pytest.Pytester) -> None:
    slow_down(repo.path, 1.0001)
    result = repo.runpytest("--perf-save")
    result.stdout.fnmatch_lines(["*warning: the working tree has uncommitted changes*dirty: true*"])
    (path,) = baseline_files(repo.path)
    assert json.loads(path.read_text())["commit"]["dirty"] is True


def test_baselines_dir_option_and_ini(repo: pytest.Pytester) -> None:
    repo.runpytest("--perf-save", "--perf-baselines=elsewhere/bl").assert_outcomes(passed=3)
    assert list((repo.path / "elsewhere" / "bl").glob("*/*.json"))
    assert not (repo.path / "baselines").exists()
    slow_down(repo.path)
    result = repo.runpytest("--perf-compare=HEAD", "-o", "infperf_baselines=elsewhere/bl")
    result.assert_outcomes(passed=2, failed=1)


def test_search_depth_bounds_the_walk(repo: pytest.Pytester) -> None:
    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    for i in range(3):
        (repo.path / "notes.txt").write_text(str(i))
        commit_all(repo.path, f"c{i}")
    result = repo.runpytest("--perf-compare=HEAD", *_expert(search_depth=2))
    result.stdout.fnmatch_lines(["*no baseline for environment*3 first-parent commit(s)*"])
    result = repo.runpytest("--perf-compare=HEAD", *_expert(search_depth=3))
    result.stdout.fnmatch_lines(["compared with commit * (3 commits before HEAD)"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--perf-compare=nope"],
            "ERROR: --perf-compare=nope: 'nope' is not a commit, branch or tag in *",
        ),
        (["--perf-compare=missing.json"], "ERROR: --perf-compare: *missing.json: does not exist*"),
        (["--perf-compare="], "ERROR: --perf-compare needs a value*"),
        (
            ["--perf-compare=main", "--perf-ab=main"],
            "ERROR: --perf-compare and --perf-ab are two ways of comparing*",
        ),
    ],
)
def test_bad_refs_are_usage_errors(repo: pytest.Pytester, args: list[str], message: str) -> None:
    result = repo.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def test_remote_branch_hint(repo: pytest.Pytester, tmp_path: Path) -> None:
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo.path, "remote", "add", "origin", str(bare))
    result = repo.runpytest("--perf-compare=develop")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*If it is a remote branch, try origin/develop*"])


def test_ambiguous_ref_and_file(repo: pytest.Pytester) -> None:
    (repo.path / "main").write_text("{}")
    result = repo.runpytest("--perf-compare=main")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --perf-compare=main is ambiguous: it is both a git ref "
            "and a file. Write ./main for the file, or refs/heads/main*"
        ]
    )


def test_not_a_repository(pytester: pytest.Pytester) -> None:
    pytester.makefile(".ini", pytest=FAST_INI)
    pytester.makepyfile("def test_a(infer_bench):\n    infer_bench(lambda: None)\n")
    result = pytester.runpytest("--perf-save")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-save: * is not inside a git repository*git init*"])
    result = pytester.runpytest("--perf-compare=main")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-compare=main: * is not inside a git repository*"])


def test_no_commits_yet(pytester: pytest.Pytester, git_env: None) -> None:
    pytester.makefile(".ini", pytest=FAST_INI)
    pytester.makepyfile("def test_a(infer_bench):\n    infer_bench(lambda: None)\n")
    git(pytester.path, "init", "-q", "-b", "main")
    result = pytester.runpytest("--perf-save")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-save: the repository at * has no commits yet*"])


def test_detached_head_saves_by_sha(repo: pytest.Pytester) -> None:
    head = git(repo.path, "rev-parse", "HEAD")
    git(repo.path, "checkout", "-q", "--detach", head)
    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    (path,) = baseline_files(repo.path)
    doc = json.loads(path.read_text())
    assert path.stem == head and doc["commit"]["branch"] is None


def test_tag_ref(repo: pytest.Pytester) -> None:
    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    git(repo.path, "tag", "v1.0")
    (repo.path / "notes.txt").write_text("x")
    commit_all(repo.path, "after the tag")
    result = repo.runpytest("--perf-compare=v1.0")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["compared with commit * (the merge-base of v1.0 and HEAD)"])


def test_shallow_clone_names_the_fix(repo: pytest.Pytester, tmp_path: Path) -> None:
    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    for i in range(3):
        (repo.path / "notes.txt").write_text(str(i))
        commit_all(repo.path, f"c{i}")
    clone = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth=1", f"file://{repo.path}", str(clone)], check=True
    )
    shutil.copytree(repo.path / "baselines", clone / "baselines", dirs_exist_ok=True)
    result = repo.runpytest(
        "--perf-compare=HEAD", f"--rootdir={clone}", "-c", str(clone / "pytest.ini"), str(clone)
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*this shallow clone has*fetch-depth: 0*git fetch --unshallow*"])


def _other_environment(root: Path) -> Path:
    """Copy the saved baseline into another environment's folder, as if measured elsewhere."""
    (path,) = baseline_files(root)
    doc = json.loads(path.read_text())
    doc["environment"]["hard"]["cpu_model"] = "Some Other CPU @ 3.0GHz"
    doc["environment"]["key"] = "linux-x86-64-cpu-py3.11-0123456789"
    target = root / "baselines" / doc["environment"]["key"] / path.name
    target.parent.mkdir()
    target.write_text(json.dumps(doc))
    path.unlink()
    return target


def test_another_environment_is_compared_interleaved(repo: pytest.Pytester) -> None:
    """A baseline measured in another environment compares nothing stored; both commits
    measured here, interleaved, do: a slowed benchmark fails, the rest are judged, and the
    field that moved is said once."""
    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    _other_environment(repo.path)
    slow_down(repo.path)
    result = repo.runpytest("--perf-compare=HEAD", "--perf-json=out.json")
    result.assert_outcomes(passed=2, failed=1)
    said = [line for line in result.outlines if "cpu_model" in line]
    assert len(said) == 1 and "measured in another environment" in said[0], said
    assert "both commits are measured here instead, interleaved" in said[0]
    doc = load_json(repo.path / "out.json")
    comparisons = [b["comparison"] for b in doc["benchmarks"]]
    assert {c["settled_because"] for c in comparisons} == {"environment-changed"}
    assert {c["decided_by"] for c in comparisons} == {"ab"}
    slowed = next(b for b in doc["benchmarks"] if b["nodeid"].endswith("test_slowed"))
    assert slowed["comparison"]["verdict"] == "regression"
    # Where nothing can be interleaved (a results file), nothing compares: incomparable,
    # and strict fails it.
    result = repo.runpytest(stored_file(repo.path), "--perf-json=out.json")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*warning: the baseline (*) was measured in another environment (cpu_model: *): "
            "verdicts are 'incomparable'"
        ]
    )
    comparison = load_json(repo.path / "out.json")["benchmarks"][0]["comparison"]
    assert comparison["verdict"] == "incomparable"
    assert comparison["env_diff"]["cpu_model"][0] == "Some Other CPU @ 3.0GHz"
    result = repo.runpytest(stored_file(repo.path), "--perf-strict-env")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*comes from a different environment: cpu_model: 'Some Other "
            "CPU @ 3.0GHz' -> *(--perf-strict-env)"
        ]
    )


def test_a_thread_count_set_on_ci_compares_identical_code(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Baselines saved without OMP_NUM_THREADS, a job that sets it: identical code is
    judged, interleaved in this job, and passes; the moved field is said once (before:
    "compared nothing", exit 1)."""
    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    result = repo.runpytest("--perf-compare=HEAD", "--perf-json=out.json")
    assert result.ret == pytest.ExitCode.OK
    said = [line for line in result.outlines if "OMP_NUM_THREADS" in line]
    assert len(said) == 1 and "env:OMP_NUM_THREADS: None -> '1'" in said[0], said
    verdicts = [b["comparison"]["verdict"] for b in load_json(repo.path / "out.json")["benchmarks"]]
    assert len(verdicts) == 4 and not {"incomparable", "no-baseline"} & set(verdicts)


def test_per_benchmark_environment_is_compared(repo: pytest.Pytester) -> None:
    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    (path,) = baseline_files(repo.path)
    doc = json.loads(path.read_text())
    doc["benchmarks"][0]["env"]["backend"] = "onnxruntime"
    path.write_text(json.dumps(doc))
    result = repo.runpytest("--perf-compare=HEAD", "--perf-json=out.json")
    benchmarks = load_json(repo.path / "out.json")["benchmarks"]
    verdicts = [b["comparison"]["verdict"] for b in benchmarks]
    assert "incomparable" not in verdicts
    # The benchmark whose own environment moved is measured on both sides here.
    moved = benchmarks[0]["comparison"]
    assert moved["settled_because"] == "environment-changed", moved
    result.assert_outcomes(passed=3)
    result = repo.runpytest(stored_file(repo.path), "--perf-json=out.json")
    verdicts = [b["comparison"]["verdict"] for b in load_json(repo.path / "out.json")["benchmarks"]]
    assert sorted(verdicts) == ["incomparable", "unchanged", "unchanged", "unchanged"]


def test_drift_guard_warns(repo: pytest.Pytester) -> None:
    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    (path,) = baseline_files(repo.path)
    doc = json.loads(path.read_text())
    # a machine four times as fast: far beyond this machine's own drift between two runs
    doc["reference"] = {k: v / 4 for k, v in doc["reference"].items()}
    path.write_text(json.dumps(doc))
    # A results file: every verdict rests on the stored pass, so the warning is due
    # whatever the stored pass reads (one a loaded machine leaves undecided would be
    # settled, and a run where all were settled rightly says nothing).
    result = repo.runpytest(stored_file(repo.path), "--perf-json=out.json")
    result.stdout.fnmatch_lines(
        [
            # (a reference part whose ratio is past x10 is not named: the other part is)
            "*warning: the machine moved since the baseline's run (reference workload *), "
            "and * rest* on the stored pass alone: test_suite.py::*"
        ]
    )
    drift = load_json(repo.path / "out.json")["comparison"]["environment_drift"]
    # Fourfold, read as more than x1.5 (a loaded machine read x2.75: it ran slower too).
    parts = [drift[k] for k in ("python_ratio", "gemm_ratio") if drift.get(k)]
    assert drift["drifted"] is True and max(parts) > 1.5, drift


def test_interrupted_run_keeps_the_stored_baseline(repo: pytest.Pytester) -> None:
    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    (path,) = baseline_files(repo.path)
    before = path.read_bytes()
    repo.makepyfile(
        test_zz_interrupt="def test_z(infer_bench):\n"
        "    infer_bench(lambda: None)\n"
        "    raise KeyboardInterrupt\n"
    )
    result = repo.runpytest_subprocess("--perf-save")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_corrupt_baseline_is_named(repo: pytest.Pytester) -> None:
    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    (path,) = baseline_files(repo.path)
    path.write_text(path.read_text()[:200])
    result = repo.runpytest("--perf-compare=HEAD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: --perf-compare=HEAD: baseline {path}: is not valid JSON"
            " (* at line * column *; truncated or edited by hand?)*restore "
            "it with `git checkout -- <file>`*"
        ]
    )
    result = repo.runpytest("--perf-save")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-save would replace a damaged baseline: *"])
    assert path.read_text().startswith("{")  # not replaced


@pytest.mark.slow
def test_a_machine_that_moved_is_interleaved_at_once(repo: pytest.Pytester) -> None:
    """--perf-settle=auto: the session-start reference ran ten times faster at the
    baseline's run, so no stored verdict can be trusted: each benchmark with a comparable
    entry is measured interleaved only (no stored pass), and one without an entry is still
    no-baseline."""
    repo.runpytest("--perf-save", "-k", "not named").assert_outcomes(passed=2, deselected=1)
    (path,) = baseline_files(repo.path)
    doc = json.loads(path.read_text())
    doc["reference"] = {k: v / 10 for k, v in doc["reference"].items()}
    path.write_text(json.dumps(doc))
    slow_down(repo.path)
    result = repo.runpytest_subprocess(
        "--perf-compare=HEAD", "--perf-settle=auto", "--perf-json=out.json"
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*decided by: interleaving in this job over * process pairs, with no stored pass "
            "(the machine moved since the baseline's run)",
        ]
    )
    by_key = {
        b["key"].split("::")[1]: b["comparison"]
        for b in load_json(repo.path / "out.json")["benchmarks"]
    }
    slowed = by_key["test_slowed"]
    assert slowed["verdict"] == "regression" and slowed["decided_by"] == "ab"
    assert slowed["settled_because"] == "machine-moved" and slowed["stored_pass"] is None
    assert slowed["process_pairs"] >= 2
    steady = by_key["test_steady"]
    assert steady["decided_by"] == "ab" and steady["settled_because"] == "machine-moved"
    assert steady["verdict"] in ("unchanged", "no-regression", "inconclusive")
    assert by_key["test_named"]["verdict"] == "no-baseline"


@pytest.mark.slow
@pytest.mark.parametrize("settle", ["stored-first", "auto"])
def test_a_stored_pass_its_settling_shows_misread_is_not_trusted_after(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, settle: str
) -> None:
    """The machine moved under the benchmarks, not under the reference (simulated: the
    baseline's samples scaled): test_a's stored pass reads about x1.95 where interleaving
    measures x1.3, so test_b, a true x1.3 its baseline masks as unchanged, is not left to
    its stored pass: settled after it (stored-first) or interleaved at once (auto, with the
    session-start reference held still here), and fails."""
    repo.makepyfile(
        test_suite=BUSY_HEADER
        + "\ndef test_a(infer_bench):\n    infer_bench(lambda: busy(200 * FACTOR))\n"
        + "\ndef test_b(infer_bench):\n    infer_bench(lambda: busy(150 * FACTOR))\n"
    )
    commit_all(repo.path, "two benchmarks")
    repo.runpytest("--perf-save").assert_outcomes(passed=2)
    (path,) = baseline_files(repo.path)
    doc = json.loads(path.read_text())
    for bench in doc["benchmarks"]:
        scale = 1 / 1.5 if bench["key"].endswith("test_a") else 1.3
        bench["samples"] = [v * scale for v in bench["samples"]]
        bench["stats"] = {
            k: v * scale
            if isinstance(v, float) and k not in ("cv", "ci_level", "ci_rel_halfwidth")
            else v
            for k, v in bench["stats"].items()
        }
    path.write_text(json.dumps(doc))
    slow_down(repo.path)
    args = ("--perf-compare=HEAD", "--perf-json=out.json", f"--perf-settle={settle}")
    if settle == "auto":  # in this process, so that the reference can be held still
        monkeypatch.setattr("pytest_infperf.session.facts._moved", lambda context: False)
        result = repo.runpytest_inprocess(*args)
    else:
        result = repo.runpytest_subprocess(*args)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*test_a: its stored pass and its interleaved run differ by x1.*misread this machine*"]
    )
    got = {
        b["key"].split("::")[1]: b["comparison"]
        for b in load_json(repo.path / "out.json")["benchmarks"]
    }
    assert got["test_b"]["verdict"] == "regression" and got["test_b"]["decided_by"] == "ab"
    if settle == "auto":
        assert got["test_b"]["settled_because"] == "stored-misread"
        assert got["test_b"]["stored_pass"] is None
    else:
        assert got["test_b"]["stored_pass"]["verdict"] in ("unchanged", "no-regression")
    assert got["test_a"]["verdict"] == "regression"


@pytest.mark.slow
def test_drift_guard_raises_the_bar(repo: pytest.Pytester) -> None:
    """Probes say the machine runs ten times slower than during the baseline: a +30% change
    is then explained by the machine, and is not blamed on the code."""
    repo.runpytest("--perf-save").assert_outcomes(passed=3)
    (path,) = baseline_files(repo.path)
    doc = json.loads(path.read_text())
    for bench in doc["benchmarks"]:
        bench["reference"] = {k: v / 10 for k, v in bench["reference"].items() if k != "probes"}
    path.write_text(json.dumps(doc))
    slow_down(repo.path)

    def slowed(**expert: object) -> dict[str, object]:
        result = repo.runpytest(
            stored_file(repo.path),  # the stored verdict alone
            "--perf-json=out.json",
            *_expert(drift_guard="adjust", **expert),
        )
        result.assert_outcomes(passed=3)
        bench = next(
            b
            for b in load_json(repo.path / "out.json")["benchmarks"]
            if b["key"].endswith("test_slowed")
        )
        return dict(bench["comparison"])

    # beyond the drift limit (25%): the verdict is withheld
    c = slowed()
    assert c["verdict"] == "inconclusive"
    assert c["machine_speed"]["slower"] > 3  # type: ignore[index]
    assert "regression withheld by the drift guard" in str(c["note"])
    # within a (raised) limit the bar moves instead: 1.3 < 1.05 x 10
    c = slowed(drift_limit=100)
    assert c["verdict"] == "inconclusive"
    assert "regression without the drift guard" in str(c["note"])
    # with the guard only warning, the same comparison is a regression
    result = repo.runpytest(stored_file(repo.path), *_expert(drift_guard="warn"))
    result.assert_outcomes(passed=2, failed=1)
    # by default, the withheld verdict is settled in the job: measured against the
    # baseline commit's code now, the machine's state cancels and the slowdown shows
    result = repo.runpytest_subprocess(
        "--perf-compare=HEAD", "--perf-json=out.json", *_expert(drift_guard="adjust")
    )
    result.assert_outcomes(passed=2, failed=1)
    by_key = {
        b["key"].split("::")[1]: b["comparison"]
        for b in load_json(repo.path / "out.json")["benchmarks"]
    }
    assert by_key["test_slowed"]["verdict"] == "regression"
    assert by_key["test_slowed"]["settled_because"] == "drift-guard"
    assert by_key["test_slowed"]["stored_pass"]["reason"] == "drift-guard"
    # The unchanged ones: a machine ten times slower can hide a speed-up, not a slowdown,
    # so the stored pass alone rules out a regression (no-regression) and that stands.
    assert by_key["test_slowed"]["decided_by"] == "ab"
    for key in ("test_steady", "test_named"):
        assert by_key[key]["verdict"] in ("unchanged", "no-regression"), key


#: A test whose body fails at the baseline's commit (its worktree lies in an infperf-ab-*
#: folder), counting each time it runs there.
FAILS_AT_BASE = """
import os

def test_x(infer_bench):
    if "infperf-ab-" in __file__:
        with open(os.environ["BASE_RUNS"], "a") as f:
            f.write("ran\\n")
        raise RuntimeError("broken at the baseline's commit")
    infer_bench(lambda: sum(range(300)))
"""


def test_a_benchmark_that_cannot_be_interleaved_at_once_is_not_settled_either(
    pytester: pytest.Pytester, git_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The machine moved (so it is interleaved at once), and the test fails at the
    baseline's commit: the stored pass runs instead, and why it could not be interleaved is
    its reason not to be settled. The base's failing body runs once, not a second time."""
    pytester.makefile(".ini", pytest=fast_ini(**REPO_EXPERT))
    pytester.makepyfile(test_x=FAILS_AT_BASE)
    init_repo(pytester.path, "suite")
    runs = pytester.path.parent / f"{pytester.path.name}-base-runs"
    monkeypatch.setenv("BASE_RUNS", str(runs))
    pytester.runpytest("--perf-save").assert_outcomes(passed=1)
    (path,) = baseline_files(pytester.path)
    doc = json.loads(path.read_text())
    doc["reference"] = {k: v / 10 for k, v in doc["reference"].items()}  # ten times slower
    path.write_text(json.dumps(doc))
    # The head ten times slower (uncommitted): its stored verdict needs settling.
    test = pytester.path / "test_x.py"
    test.write_text(test.read_text().replace("range(300)", "range(3000)"))
    result = pytester.runpytest("--perf-compare=HEAD", "--perf-settle=auto", "--perf-json=out.json")
    result.assert_outcomes(failed=1)
    # Said as it starts, so a long compare is never silent.
    said = [line for line in result.outlines if line.startswith("infperf: interleaving ")]
    assert said and "test_x.py::test_x" in said[0] and "machine moved" in said[0], said
    assert runs.read_text().splitlines() == ["ran"]
    c = load_json(pytester.path / "out.json")["benchmarks"][0]["comparison"]
    assert c["verdict"] == "regression" and c["decided_by"] == "stored"
    assert "the test failed at the baseline's commit" in c["not_settled"]
