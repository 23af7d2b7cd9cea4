"""--perf-budget: parsing, what it never cuts, and what a verdict it cut short says. The
end-to-end runs are in test_baselines' save-then-compare test, on its repository."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_infperf.core.budget import Budget, BudgetError, BudgetSpec
from pytest_infperf.core.results import Comparison, Reason, Verdict
from pytest_infperf.judge.policy import budget_stopped

from .conftest import FAST_INI, make_result


@pytest.mark.parametrize(
    ("text", "seconds", "multiple"),
    [("120", 120.0, None), ("90s", 90.0, None), (" 1.5X ", None, 1.5), ("1x", None, 1.0)],
)
def test_a_budget_is_seconds_or_a_multiple(
    text: str, seconds: float | None, multiple: float | None
) -> None:
    assert BudgetSpec.parse(text) == BudgetSpec(seconds=seconds, multiple=multiple)


def test_off_turns_an_ini_budget_off() -> None:
    assert BudgetSpec.parse("off") is None and BudgetSpec.parse(" None ") is None


@pytest.mark.parametrize("text", ["", "fast", "0", "-5", "0.5x", "nanx", "inf x", "inf", "x"])
def test_a_bad_budget_names_every_form(text: str) -> None:
    with pytest.raises(BudgetError, match=r"seconds \(120 or 120s\), a multiple .*, or off"):
        BudgetSpec.parse(text)


def test_a_multiple_needs_the_baselines_run() -> None:
    budget, why = Budget.of(BudgetSpec(multiple=1.5), 60.0, started=0.0)
    assert budget is not None and budget.seconds == 90.0 and why is None
    assert budget.text == "1.5x (a plain run of 60 s)"
    budget, why = Budget.of(BudgetSpec(multiple=1.5), None, started=0.0)
    assert budget is None and why is not None and "give seconds instead" in why
    assert Budget.of(None, 60.0, started=0.0) == (None, None)


def test_the_benchmarks_still_to_come_keep_their_share() -> None:
    import time

    budget, _ = Budget.of(BudgetSpec(multiple=1.5), 60.0, started=time.monotonic())
    assert budget is not None
    budget.total = 20  # 3 s of the plain run each
    assert budget.spare() == pytest.approx(90.0 - 60.0, abs=0.5)
    budget.measured.update(f"t.py::test_{i}" for i in range(15))
    budget.measured.add("t.py::test_0")  # a test's second call is not a second benchmark
    assert budget.spare() == pytest.approx(90.0 - 15.0, abs=0.5)
    # Seconds with no plain run known: nothing to reserve.
    budget, _ = Budget.of(BudgetSpec(seconds=30.0), None, started=time.monotonic())
    assert budget is not None and budget.share() == 0.0
    assert budget.spare() == pytest.approx(30.0, abs=0.5)


def test_a_subset_keeps_a_full_runs_share() -> None:
    """A -k subset of a suite: one test's share is the baseline's plain run over the tests
    it measured, not over this run's few, which would reserve all the budget for them."""
    import time

    budget, _ = Budget.of(BudgetSpec(multiple=1.5), 60.0, time.monotonic(), plain_count=20)
    assert budget is not None
    budget.total = 2
    assert budget.share() == pytest.approx(3.0)
    assert budget.spare() == pytest.approx(90.0 - 6.0, abs=0.5)


def test_pairs_cut_short_say_so_only_where_undecided() -> None:
    undecided = Comparison(Verdict.INCONCLUSIVE, reason=Reason.TOO_FEW, note="n = 1")
    stopped = budget_stopped(undecided, "the run's budget (10 s) was spent before process pair 2")
    assert stopped.reason is Reason.BUDGET and stopped.note is not None
    assert stopped.note.startswith("the run's budget") and stopped.note.endswith("n = 1")
    # Counted in the summary's "not settled" line, one tally whatever the pair.
    assert stopped.not_settled == "the run's budget (10 s) was spent"
    decided = Comparison(Verdict.UNCHANGED)
    assert budget_stopped(decided, "spent") is decided
    assert budget_stopped(undecided, "") is undecided


def test_a_bad_budget_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini(FAST_INI)
    pytester.makepyfile("def test_x(infer_bench):\n    infer_bench(lambda: None)\n")
    for args, says in [
        (["--perf-budget=soon", "--perf-compare=main"], "*--perf-budget='soon': expected*"),
        (["--perf-budget=60"], "*use it with --perf-compare or --perf-ab*"),
        (["--perf-budget=1.5x", "--perf-ab=main"], "*--perf-ab has none: give seconds*"),
    ]:
        result = pytester.runpytest(*args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([says])


def test_a_partial_save_keeps_the_longest_run(tmp_path: Path) -> None:
    """A --perf-save of a subset (or a fleet's shard) merges its entries into the commit's
    baseline: the run time a multiple stands for stays the longest recorded."""
    from pytest_infperf.store.baselines import BaselineStore

    store = BaselineStore(tmp_path)
    env_key, sha = "linux-x86-64-cpu-py3.11-0123456789", "a" * 40
    env = {"key": env_key, "hard": {}, "soft": {}}
    commit = {"sha": sha, "dirty": False}

    def entry(name: str) -> dict[str, Any]:
        return make_result([1e-3, 1.1e-3, 0.9e-3], nodeid=f"test_m.py::{name}").to_json()

    store.save(env_key, sha, [entry("test_a")], env, commit, run_seconds=60.0)
    path, _, total = store.save(env_key, sha, [entry("test_b")], env, commit, run_seconds=3.0)
    assert total == 2 and json.loads(path.read_text())["run_seconds"] == 60.0
    # The whole baseline saved again: its own run time, shorter or not.
    both = [entry("test_a"), entry("test_b")]
    path, _, _ = store.save(env_key, sha, both, env, commit, run_seconds=50.0)
    assert json.loads(path.read_text())["run_seconds"] == 50.0


def test_a_run_is_timed_from_its_process_start() -> None:
    """pytest's own start-up (imports, collection, finding the baseline) counts toward the
    recorded run_seconds and a budget alike."""
    import time

    from pytest_infperf.core.budget import process_started

    age = time.monotonic() - process_started()
    assert 0.0 < age < 3600.0  # this test runs well after its process began
