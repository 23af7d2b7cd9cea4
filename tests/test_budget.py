"""--perf-budget: parsing, what it spends, and what it does to a verdict it cut short. The
end-to-end run (a spent budget leaves a stored regression unsettled, and says so) is in
test_baselines' save-then-compare test, on its repository."""

from __future__ import annotations

import pytest

from pytest_infperf.core.budget import Budget, BudgetError, BudgetSpec
from pytest_infperf.core.results import Comparison, Reason, Verdict
from pytest_infperf.judge.judge import budget_cut, budget_stopped

from .conftest import FAST_INI


@pytest.mark.parametrize(
    ("text", "seconds", "multiple"),
    [("120", 120.0, None), ("90s", 90.0, None), (" 1.5X ", None, 1.5), ("1x", None, 1.0)],
)
def test_a_budget_is_seconds_or_a_multiple(
    text: str, seconds: float | None, multiple: float | None
) -> None:
    assert BudgetSpec.parse(text) == BudgetSpec(seconds=seconds, multiple=multiple)


@pytest.mark.parametrize("text", ["", "fast", "0", "-5", "0.5x", "nanx", "inf x", "inf", "x"])
def test_a_bad_budget_names_both_forms(text: str) -> None:
    with pytest.raises(BudgetError, match=r"seconds \(120 or 120s\) or a multiple"):
        BudgetSpec.parse(text)


def test_a_multiple_needs_the_baselines_run() -> None:
    budget, why = Budget.of(BudgetSpec(multiple=1.5), 60.0, started=0.0)
    assert budget is not None and budget.seconds == 90.0 and why is None
    assert budget.text == "1.5x (a plain run of 60 s)"
    budget, why = Budget.of(BudgetSpec(multiple=1.5), None, started=0.0)
    assert budget is None and why is not None and "give seconds instead" in why
    assert Budget.of(None, 60.0, started=0.0) == (None, None)


def test_allows_counts_what_it_refuses() -> None:
    import time

    budget = Budget(10.0, time.monotonic(), "10 s")
    assert budget.allows(5.0) and budget.cut == 0
    assert not budget.allows(60.0) and budget.cut == 1


def test_a_cut_never_claims_a_regression_and_says_why() -> None:
    stored = Comparison(Verdict.REGRESSION, ratio=1.3, ci_low=1.2, ci_high=1.4)
    cut = budget_cut(stored, "the run's budget (10 s) was spent")
    assert cut.verdict is Verdict.INCONCLUSIVE and cut.reason is Reason.BUDGET
    assert cut.not_settled == "the run's budget (10 s) was spent" and cut.ratio == 1.3
    # What the stored pass could not decide stays undecided, with the budget as the reason
    # it was not settled.
    undecided = Comparison(Verdict.INCONCLUSIVE, reason=Reason.DRIFT_WITHHELD)
    assert budget_cut(undecided, "spent").reason is Reason.DRIFT_WITHHELD
    assert budget_cut(undecided, "spent").not_settled == "spent"


def test_pairs_cut_short_say_so_only_where_undecided() -> None:
    undecided = Comparison(Verdict.INCONCLUSIVE, reason=Reason.TOO_FEW, note="n = 1")
    stopped = budget_stopped(undecided, "the run's budget (10 s) was spent before pair 2")
    assert stopped.reason is Reason.BUDGET and stopped.note is not None
    assert stopped.note.startswith("the run's budget") and stopped.note.endswith("n = 1")
    decided = Comparison(Verdict.UNCHANGED)
    assert budget_stopped(decided, "spent") is decided
    assert budget_stopped(undecided, "") is undecided


def test_a_bad_budget_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini(FAST_INI)
    pytester.makepyfile("def test_x(infer_bench):\n    infer_bench(lambda: None)\n")
    result = pytester.runpytest("--perf-budget=soon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--perf-budget / infperf_budget = 'soon': expected seconds*"])
