"""``infperf merge``: the shards of a suite split with pytest-split, merged into what one
unsplit run writes. Real pytest runs, real pytest-split groups."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_infperf.core.names import CompareMode, Metric
from pytest_infperf.core.results import Comparison, Reason, Verdict
from pytest_infperf.judge.judge import Judge
from pytest_infperf.judge.merged import rejudge
from pytest_infperf.judge.plan import PairedPlan

from .conftest import GIT_ENV, fast_ini, git, infperf, init_repo

pytest.importorskip("pytest_split")

SUITE = """
import pytest

@pytest.mark.parametrize("n", [200, 400, 800, 1600, 3200, 6400])
def test_sum(infer_bench, n):
    infer_bench(lambda: sum(range(n)))

def test_plain():
    pass
"""
FAST = [
    "-o",
    "infperf_max_time=0.05",
    "-o",
    "infperf_expert=min_time=0.01",
    "-p",
    "no:cacheprovider",
]


#: Each run writes the family its verdicts are held to (the mode's), per pytest-split group.
FAMILY_SPY = """
from pathlib import Path

import pytest

from pytest_infperf.core.keys import settings_key
from pytest_infperf.measure.mode import mode_key


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    run = session.config.stash[settings_key].json_path.stem  # all, shard1...
    mode = session.config.stash[mode_key]
    Path(f"family-{run}.txt").write_text(str(getattr(mode, "family", "")))
"""


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One unsplit run and three pytest-split groups of the same suite, each a process."""
    root = tmp_path_factory.mktemp("split")
    (root / "test_suite.py").write_text(SUITE)
    (root / "conftest.py").write_text(FAMILY_SPY)
    run = [sys.executable, "-m", "pytest", "-q", *FAST]
    # The runs are independent (what they write is under test, not their timing): all at once.
    procs = [
        subprocess.Popen(
            [*run, *args], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for args in (
            ["--perf-json=all.json"],
            *(
                ["-p", "pytest-split", "--splits=3", f"--group={i}", f"--perf-json=shard{i}.json"]
                for i in (1, 2, 3)
            ),
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
    # Every shard's verdicts are held to the whole run's perf tests, as the unsplit run's:
    # a regression that held over one shard keeps its claim in the merge.
    families = {p.name: p.read_text() for p in shards.glob("family-*.txt")}
    assert families == {
        **{f"family-{run}.txt": "6" for run in ("all", "shard1", "shard2", "shard3")},
        "family-empty.txt": "1",  # -k nothing_here: nothing collected, nothing split off
    }
    # The merged document is a results document: the other commands read it.
    assert infperf(shards, "comment", "merged.json").returncode == 0


@pytest.mark.parametrize("expect", [3, None])
def test_every_shards_warnings_reach_the_merged_run(shards: Path, expect: int | None) -> None:
    """The Action merges with --expect: the warnings of every shard, not the last's, are the
    merged run's (its job summary and pull request comment say them)."""
    from pytest_infperf.store.merge import merge

    docs = [
        (f"shard{i}.json", json.loads((shards / f"shard{i}.json").read_text())) for i in (1, 2, 3)
    ]
    docs[0][1]["warnings"] = ["W1: settling is off"]
    docs[1][1]["warnings"] = ["W2: no baseline for 3 benchmarks", "W1: settling is off"]
    merged = merge(docs, expect=expect)
    assert merged["warnings"][:2] == ["W1: settling is off", "W2: no baseline for 3 benchmarks"]


@pytest.mark.parametrize("case", ["overlap", "twice", "commits", "truncated", "mode"])
def test_shards_that_cannot_merge_get_a_clear_error_and_nothing_is_written(
    shards: Path, case: str, tmp_path: Path
) -> None:
    one = json.loads((shards / "shard1.json").read_text())
    two = json.loads((shards / "shard2.json").read_text())
    expected = {
        "overlap": "is in two shards (a.json and b.json): the shards overlap",
        "twice": "a.json and b.json are both group 1: the same shard twice",
        "commits": "the shards measured different commits",
        "truncated": "b.json",
        "mode": "the shards ran in different modes",
    }[case]
    if case == "overlap":  # another group holding the same benchmarks
        two = {**one, "split": {"group": 2, "splits": 3}}
    elif case == "twice":
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
    (tmp_path / "b.json").write_text(json.dumps(two))
    (tmp_path / "c.json").write_text((shards / "shard3.json").read_text())
    merge = ("merge", "a.json", "b.json", "c.json", "-o", "m.json", "--fail-on-regression")
    out = infperf(tmp_path, *merge)
    assert out.returncode == 0, out.stdout + out.stderr
    # A shard whose benchmark regressed (the verdict a comparing shard writes).
    two["benchmarks"][0]["comparison"] = {"verdict": "regression", "ratio": 1.3}
    (tmp_path / "b.json").write_text(json.dumps(two))
    out = infperf(tmp_path, *merge)
    assert out.returncode == 1
    assert f"regression: {two['benchmarks'][0]['key']}" in out.stdout


# --- a comparing split run: order, fail-closed, the run's family ------------------------

SUITE_A = """
import pytest

@pytest.mark.parametrize("n", [200, 400, 800])
def test_a(infer_bench, n):
    infer_bench(lambda: sum(range(n)))
"""
SUITE_B = SUITE_A.replace("test_a", "test_b")
#: A wide threshold: what is under test is what the merge makes of the verdicts, not noise.
COMPARE_INI = fast_ini(drift_guard="off") + "infperf_threshold = 0.5\n"


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """test_a's baselines saved at c0; c1 adds test_b, which has none. Three pytest-split
    groups of c1 compare with c0: group 1 test_a only, group 2 both, group 3 test_b only
    (it compared nothing, and alone fails closed)."""
    root = tmp_path_factory.mktemp("compared")
    (root / "pytest.ini").write_text(COMPARE_INI)
    (root / "test_a.py").write_text(SUITE_A)
    (root / ".gitignore").write_text("*.json\n__pycache__/\n.test_durations\n")
    env = {**os.environ, **GIT_ENV}
    init_repo(root, "c0")
    c0 = git(root, "rev-parse", "HEAD")
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    saved = subprocess.run([*run, "--perf-save"], cwd=root, env=env, capture_output=True, text=True)
    assert saved.returncode == 0, saved.stdout[-3000:]
    (root / "test_b.py").write_text(SUITE_B)
    git(root, "add", "test_b.py")
    git(root, "commit", "-qm", "c1 test_b")
    procs = [
        subprocess.Popen(
            [
                *run,
                f"--perf-compare={c0}",
                "-p",
                "pytest-split",
                "--splits=3",
                f"--group={i}",
                f"--perf-json=shard{i}.json",
                "--perf-warn-only",
            ],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in (1, 2, 3)
    ]
    for proc in procs:
        out, _ = proc.communicate()
        assert proc.returncode == 0, out[-3000:]
    return root, c0


@pytest.mark.slow
def test_merge_is_one_document_and_one_exit_code_in_any_order(
    compared: tuple[Path, str], validate: Any
) -> None:
    root, _ = compared
    docs, codes = [], set()
    for k, order in enumerate(
        itertools.permutations(["shard1.json", "shard2.json", "shard3.json"])
    ):
        out = infperf(
            root, "merge", *order, "-o", f"m{k}.json", "--expect", "3", "--fail-on-regression"
        )
        codes.add(out.returncode)
        assert "Traceback" not in out.stderr, out.stderr
        docs.append((root / f"m{k}.json").read_text())
    assert codes == {0}
    assert len(set(docs)) == 1  # byte for byte, `created` included
    merged = json.loads(docs[0])
    validate(merged)
    assert "compared_nothing" not in merged  # group 1 compared: the run did
    assert merged["comparison"]  # from a shard that found a baseline, whatever came first
    assert [(s["group"], s["splits"]) for s in merged["shards"]] == [(1, 3), (2, 3), (3, 3)]
    assert merged["family"]["perf_tests"] == 6
    shard3 = json.loads((root / "shard3.json").read_text())
    assert shard3["split"] == {"group": 3, "splits": 3}
    assert shard3["family"]["perf_tests"] == 2 and shard3["compared_nothing"]
    # The shard alone is not the run: refused by the split it records, --expect or not.
    alone = infperf(root, "merge", "shard3.json", "-o", "alone.json", "--fail-on-regression")
    assert alone.returncode == 2 and not (root / "alone.json").exists()
    assert "2 of 3 shards missing (the shards' own --splits)" in alone.stderr


def test_a_missing_shard_fails_the_merge_with_its_group(compared: tuple[Path, str]) -> None:
    root, _ = compared
    out = infperf(root, "merge", "shard3.json", "shard1.json", "-o", "gap.json", "--expect", "3")
    assert out.returncode == 2
    assert "1 of 3 shards missing (--expect 3): group(s) 2 of 3 sent no results" in out.stderr
    assert not (root / "gap.json").exists()
    out = infperf(
        root, "merge", "shard1.json", "shard2.json", "shard3.json", "-o", "x.json", "--expect", "4"
    )
    assert out.returncode == 2 and "split into 3 groups" in out.stderr
    out = infperf(root, "merge", "shard1.json", "-o", "x.json", "--expect", "0")
    assert out.returncode == 2 and "--expect" in out.stderr and "Traceback" not in out.stderr


def _remeasured_regression(p: float, family: int) -> dict[str, Any]:
    """What a shard's Judge.remeasured writes for a regression at its own family."""
    first = Comparison(Verdict.REGRESSION, ratio=1.2, p_value=p)
    last = Comparison(Verdict.REGRESSION, ratio=1.2, p_value=p, ci_low=1.1, ci_high=1.3)
    c = Judge(family=family).remeasured(first, last)
    assert c.verdict is Verdict.REGRESSION
    return c.to_json()


def test_the_merged_run_holds_a_shards_regression_to_the_whole_family(
    compared: tuple[Path, str], tmp_path: Path
) -> None:
    """p 0.004 over a shard's 2 perf tests is a regression (0.008 <= 0.01, the run's alpha);
    over the run's 6 it is not (0.024): the merged run, in any order, does not fail where
    the unsplit rule would not."""
    root, _ = compared
    one = json.loads((root / "shard1.json").read_text())
    one["benchmarks"][0]["comparison"] = _remeasured_regression(0.004, 2)
    (tmp_path / "one.json").write_text(json.dumps(one))
    for name in ("shard2.json", "shard3.json"):
        (tmp_path / name).write_text((root / name).read_text())
    alone = infperf(tmp_path, "merge", "one.json", "-o", "a.json", "--fail-on-regression")
    assert alone.returncode == 2 and "shards missing" in alone.stderr  # not the run
    for order in (
        ["one.json", "shard2.json", "shard3.json"],
        ["shard3.json", "shard2.json", "one.json"],
    ):
        out = infperf(
            tmp_path, "merge", *order, "-o", "m.json", "--expect", "3", "--fail-on-regression"
        )
        assert out.returncode == 0, out.stdout + out.stderr
        (entry,) = [
            b
            for b in json.loads((tmp_path / "m.json").read_text())["benchmarks"]
            if b["key"] == one["benchmarks"][0]["key"]
        ]
        c = entry["comparison"]
        assert c["verdict"] == "inconclusive" and c["reason"] == "multiplicity"
        assert c["family_size"] == 6 and c["message"] is None


def test_rejudge_only_ever_withdraws_a_claim() -> None:
    # Re-measured: Bonferroni over the run's family, by the judge's own rule.
    c = Comparison.from_json(_remeasured_regression(0.004, 2))
    assert rejudge(c, 2, 0.01) == dataclasses.replace(c)  # the same family: unchanged
    held = rejudge(c, 3, 0.01)
    assert held.verdict is Verdict.INCONCLUSIVE and held.reason is Reason.MULTIPLICITY
    assert held.family_size == 3 and held.holm_p == pytest.approx(0.012)
    accepted = dataclasses.replace(c, verdict=Verdict.ACCEPTED, accepted_by={"pattern": "*"})
    assert rejudge(accepted, 3, 0.01).accepted_by is None
    assert rejudge(Comparison.from_json(_remeasured_regression(0.001, 2)), 6, 0.01).verdict is (
        Verdict.REGRESSION
    )
    # Interleaved: the run-level guard at the look the shard stopped at.
    plan = {f: PairedPlan(0.05, 0.05, ("median",), f, 0.01) for f in (1, 6)}
    p_zero = next(
        p
        for p in (10 ** (-k / 20) for k in range(40, 200))
        if plan[1]._run_guard(3, p) is None and plan[6]._run_guard(3, p) is not None
    )
    ab = Comparison(
        Verdict.REGRESSION,
        ratio=1.3,
        decided_by=CompareMode.AB,
        process_pairs=3,
        details={"p_no_slower": p_zero},
        message="PERFORMANCE REGRESSION ...",
    )
    assert rejudge(ab, 1, 0.01) is ab
    held = rejudge(ab, 6, 0.01)
    assert held.verdict is Verdict.INCONCLUSIVE and "run-level guard" in (held.note or "")
    assert held.message is None
    # A generation: all its claimed metrics stand if one clears the guard, else none.
    strong = dataclasses.replace(ab, details={"p_no_slower": 1e-12}, metric=Metric("tpot"))
    weak = dataclasses.replace(ab, metric=Metric("ttft"))
    gen = dataclasses.replace(ab, parts={"ttft": weak, "tpot": strong})
    assert rejudge(gen, 6, 0.01) is gen
    both_weak = dataclasses.replace(
        ab, parts={"ttft": weak, "tpot": dataclasses.replace(weak, metric=Metric("tpot"))}
    )
    again = rejudge(both_weak, 6, 0.01)
    assert again.verdict is Verdict.INCONCLUSIVE
    assert again.parts and {p.verdict for p in again.parts.values()} == {Verdict.INCONCLUSIVE}
    # A GPU regression its quiet evidence decided: Bonferroni over the whole run's family.
    device = Comparison(
        Verdict.REGRESSION,
        ratio=1.08,
        p_value=1e-4,
        parts={"gpu_time": Comparison(Verdict.REGRESSION, ratio=1.08, p_value=1e-4)},
        evidence={"part": "gpu_time", "counts": "grew"},
        family_size=1,
        holm_p=1e-4,
        message="PERFORMANCE REGRESSION ...",
    )
    assert rejudge(device, 40, 0.01).holm_p == pytest.approx(4e-3)
    held = rejudge(device, 200, 0.01)
    assert held.verdict is Verdict.INCONCLUSIVE and held.reason is Reason.MULTIPLICITY
    assert held.message is None and "200 benchmarks" in (held.note or "")
    # Never a promotion: an inconclusive verdict stays so at any family.
    assert rejudge(dataclasses.replace(ab, verdict=Verdict.INCONCLUSIVE), 1, 0.5).verdict is (
        Verdict.INCONCLUSIVE
    )
    # A stored claim that stood unchecked (remeasure=0): held over the whole run as well.
    stood = Comparison(
        Verdict.REGRESSION, ratio=1.2, ci_low=1.1, ci_high=1.3, p_value=0.004,
        family_size=2, holm_p=0.008, decided_by=CompareMode.STORED, message="FAILED ...",
    )  # fmt: skip
    assert rejudge(stood, 2, 0.01).verdict is Verdict.REGRESSION
    held = rejudge(stood, 6, 0.01)
    assert held.verdict is Verdict.INCONCLUSIVE and held.message is None


# --- only complete shards; never more lenient than the unsplit run -----------------------

#: A plugin that interrupts the run (Ctrl-C) once its first benchmark has reported.
STOPPER = """
def pytest_runtest_logreport(report):
    if report.when == "call" and any(k.endswith("median_s") for k, _ in report.user_properties):
        raise KeyboardInterrupt
"""


@pytest.mark.slow
def test_a_shard_that_did_not_complete_is_refused_by_name(shards: Path, tmp_path: Path) -> None:
    """Group 2 interrupted after its first benchmark: its JSON holds part of its group. The
    merge refuses it, with or without --expect, and writes nothing; a shard written before
    the run record existed is refused where the run is held to its groups."""
    (tmp_path / "stopper.py").write_text(STOPPER)
    (tmp_path / "test_suite.py").write_text(SUITE)
    group = ["-p", "pytest-split", "--splits=3", "--group=2", "--perf-json=cut.json"]
    cut = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *FAST, "-p", "stopper", *group],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
    )
    assert cut.returncode == 2, cut.stdout[-2000:]
    doc = json.loads((tmp_path / "cut.json").read_text())
    assert len(doc["benchmarks"]) == 1 and doc["run"]["complete"] is False
    for name in ("shard1.json", "shard3.json"):
        (tmp_path / name).write_text((shards / name).read_text())
    for expect in (["--expect", "3"], []):
        out = infperf(
            tmp_path, "merge", "shard1.json", "cut.json", "shard3.json", "-o", "m.json", *expect
        )
        assert out.returncode == 2, out.stdout
        assert (
            "cut.json's run did not complete (interrupted (KeyboardInterrupt)): it holds only "
            "the benchmarks measured before it stopped"
        ) in out.stderr
        assert not (tmp_path / "m.json").exists()
    # Without the record (an older writer): refused under --expect, unknown without it.
    old = json.loads((shards / "shard2.json").read_text())
    del old["run"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    out = infperf(
        tmp_path, "merge", "shard1.json", "old.json", "shard3.json", "-o", "m.json", "--expect", "3"
    )
    assert out.returncode == 2 and "old.json: it does not record whether its run" in out.stderr
    out = infperf(tmp_path, "merge", "shard1.json", "old.json", "shard3.json", "-o", "m.json")
    assert out.returncode == 0, out.stderr
    assert "run" not in json.loads((tmp_path / "m.json").read_text())
    said = infperf(tmp_path, "comment", "m.json").stdout
    assert "run not known to have completed" in said and "no changes" not in said
    # Complete shards merge into a complete run.
    for name in ("shard1.json", "shard2.json", "shard3.json"):
        (tmp_path / name).write_text((shards / name).read_text())
    out = infperf(tmp_path, "merge", "shard1.json", "shard2.json", "shard3.json", "-o", "m.json")
    assert out.returncode == 0, out.stderr
    run = json.loads((tmp_path / "m.json").read_text())["run"]
    assert run == {"complete": True, "exitstatus": 0, "failed": [], "tests_failed": 0}


def test_a_withdrawn_regression_is_gated_on_its_work_as_the_unsplit_run(
    compared: tuple[Path, str], tmp_path: Path
) -> None:
    """A shard's regression that did twice the work: its gate let the work pass (the
    regression failed the test already). The merge withdraws the regression for the run's
    family; the unsplit run's gate, on that verdict, fails the work, and so does the merge."""
    from pytest_infperf.core.results import BenchmarkResult
    from pytest_infperf.judge.rules import Policy
    from pytest_infperf.session.gate import Gate

    root, _ = compared
    one = json.loads((root / "shard1.json").read_text())
    entry = one["benchmarks"][0]
    work = {"flops": [1e6, 2e6], "change": 1.0, "measure": "FLOPs", "increase": 1.0}
    entry["comparison"] = {
        **_remeasured_regression(0.004, 2),
        "work": {**work, "increase_measure": "FLOPs"},
    }
    entry["options"] = {**entry["options"], "max_work_increase": 0.5}
    shard_gate = Gate(Policy()).consequences(BenchmarkResult.from_json(entry))
    assert shard_gate.work_gate is not None and shard_gate.work_gate["passed"] is True
    entry["extra"] = {**entry.get("extra", {}), "work_gate": shard_gate.work_gate}
    (tmp_path / "one.json").write_text(json.dumps(one))
    for name in ("shard2.json", "shard3.json"):
        (tmp_path / name).write_text((root / name).read_text())
    out = infperf(
        tmp_path,
        "merge",
        *("one.json", "shard2.json", "shard3.json"),
        *("-o", "m.json", "--expect", "3", "--fail-on-regression"),
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"more work: {entry['key']} (+100.0%, max_work_increase=0.5)" in out.stdout
    (merged,) = [
        b
        for b in json.loads((tmp_path / "m.json").read_text())["benchmarks"]
        if b["key"] == entry["key"]
    ]
    assert merged["comparison"]["verdict"] == "inconclusive"
    assert merged["comparison"]["work"]["increase"] == 1.0
    # What the unsplit run's gate says of the merged verdict: the same failure.
    unsplit = Gate(Policy()).consequences(BenchmarkResult.from_json(merged))
    assert unsplit.work_gate is not None and unsplit.work_gate["passed"] is False
    assert merged["extra"]["work_gate"] == unsplit.work_gate
    assert any(f.startswith(f"MORE WORK in {entry['key']}: +100.0%") for f in unsplit.failures)
