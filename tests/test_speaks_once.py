"""Identical code, compared, is quiet: one summary line and a table, no warning that asks
for nothing (the comparison that could not guard the tolerance shows it in its row under
-v, and the inconclusive verdict in the table; the run says once which benchmarks passed
ungated), and the same warnings in the terminal, the JSON and the Markdown report."""

from __future__ import annotations

import pytest

from .conftest import fast_ini, init_repo, load_json, stored_file

#: Twenty quick benchmarks whose calls take 20 or 60 us at random: their medians cannot be
#: pinned down, so most comparisons could not guard the 5% tolerance.
SUITE = """
import random, time

def busy(us):
    end = time.perf_counter_ns() + us * 1000
    while time.perf_counter_ns() < end:
        pass

@pytest.mark.parametrize("i", range(20))
def test_model(infer_bench, i):
    infer_bench(lambda: busy(random.choice((20, 60))))
"""
INI = fast_ini(drift_guard="off").replace("infperf_max_time = 0.05", "infperf_max_time = 0.01")


def _compare(repo: pytest.Pytester, *args: str) -> pytest.RunResult:
    # A results file: no interleaving; what the stored pass flags is measured afresh.
    result = repo.runpytest(stored_file(repo.path), "--perf-warn-only", *args)
    assert result.ret == 0
    return result


def test_a_noisy_twenty_benchmark_aa_compare_asks_for_nothing(
    pytester: pytest.Pytester, git_env: None
) -> None:
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(test_models="import pytest\n" + SUITE)
    init_repo(pytester.path)
    pytester.runpytest("--perf-save", "-q").assert_outcomes(passed=20)
    result = _compare(pytester, "--perf-json=cmp.json", "--perf-markdown=cmp.md")
    out = result.stdout.str()
    doc = load_json(pytester.path / "cmp.json")
    noisy = [b for b in doc["benchmarks"] if (b["comparison"].get("detectable") or 0) > 0.1]
    assert len(noisy) >= 10, "the 5% tolerance should be out of reach of most of them"
    # No warning, but where the machine moved since the baseline's run: these verdicts rest
    # on stored passes (a results file), and then that is said, once, the same
    # in the terminal, the JSON and the Markdown.
    said = [
        line.removeprefix("warning: ") for line in out.splitlines() if line.startswith("warning:")
    ]
    assert said == doc["warnings"]
    # What the runner could not see at 5% is said once, for every such benchmark.
    ungated = [w for w in said if w.startswith("not a failure, but ")]
    blind = [
        b
        for b in noisy
        if b["comparison"]["verdict"] == "inconclusive"
        and b["comparison"]["reason"] in ("interval-too-wide", "futility", "run-budget")
    ]
    assert len(ungated) == (1 if blind else 0)
    assert all(w.startswith(f"not a failure, but {len(blind)} benchmark") for w in ungated)
    moved = [w for w in said if w not in ungated]
    assert all(w.startswith("the machine moved since the baseline's run") for w in moved)
    markdown = (pytester.path / "cmp.md").read_text()
    assert ("Warnings" in markdown) == bool(ungated)
    assert markdown.count("[!WARNING]") == len(moved)
    # One summary line says the verdicts, none a claim on identical code (the fresh passes
    # hold them: without them a stored pass claims one now and then); the table fits 120
    # columns.
    assert "infperf: 20 benchmarks: no regressions (" in out
    assert not [b for b in doc["benchmarks"] if b["comparison"]["verdict"] == "improvement"]
    table = [x for x in out.splitlines() if x.startswith(("benchmark ", "test_models.py::"))]
    assert len(table) == 21 and max(len(line) for line in table) <= 120
    # -v: each row says what its comparison could have caught, and the spread.
    verbose = _compare(pytester, "-v", "-k", "model and 1").stdout.str()
    assert "catches" in verbose and ">= +" in verbose and "spread" in verbose
