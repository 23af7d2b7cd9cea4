"""The terminal speaks once: a warning most of a noisy run's benchmarks share (the
comparison could not guard the tolerance) is one line with the count, not one per
benchmark; the names come with -v, in the Markdown report, and in the JSON, which keeps
each result's own warnings as they were."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from .conftest import FAST_INI, init_repo, load_json

#: Twenty quick benchmarks whose calls take 20 or 60 us at random: their medians cannot be
#: pinned down, so each comparison warns that it cannot guard the 5% tolerance.
SUITE = """
import random, time
import dataclasses
from typing import Any

import pytest

def busy(us):
    end = time.perf_counter_ns() + us * 1000
    while time.perf_counter_ns() < end:
        pass

@pytest.mark.parametrize("i", range(20))
def test_model(infer_bench, i):
    infer_bench(lambda: busy(random.choice((20, 60))))
"""
INI = FAST_INI.replace("infperf_max_time = 0.05", "infperf_max_time = 0.01") + (
    "infperf_drift_guard = off\ninfperf_remeasure = 0\n"
)
PHRASE = "could only have caught slowdowns"


def _compare(repo: pytest.Pytester, *args: str) -> pytest.RunResult:
    # --perf-settle=off: the stored verdicts only (settling would interleave each one).
    result = repo.runpytest("--perf-compare=HEAD", "--perf-settle=off", "--perf-warn-only", *args)
    assert result.ret == 0
    return result


def test_a_twenty_benchmark_compare_says_cannot_guard_once(
    pytester: pytest.Pytester, git_env: None
) -> None:
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(test_models=SUITE)
    init_repo(pytester.path)
    pytester.runpytest("--perf-save", "-q").assert_outcomes(passed=20)
    result = _compare(pytester, "--perf-json=cmp.json", "--perf-markdown=cmp.md")
    out = result.stdout.str()
    lines = [line for line in out.splitlines() if "could only have caught" in line]
    # One line, with the count of the benchmarks whose JSON record carries the warning.
    doc = load_json(pytester.path / "cmp.json")
    carrying = [
        b["key"]
        for b in doc["benchmarks"]
        if any("could only have caught a slowdown" in w for w in b["warnings"])
    ]
    assert len(carrying) >= 10, "the 5% tolerance should be out of reach of most of them"
    assert len(lines) == 1, lines
    (line,) = lines
    assert line.startswith(f"warning: {len(carrying)} benchmarks could only have caught ")
    assert "cannot guard the 5% tolerance here" in line
    assert line.endswith("(-v names them, as do the Markdown report and the JSON)")
    assert "test_model[" not in line
    # It comes before any other benchmark's warning.
    assert next(x for x in out.splitlines() if x.startswith("warning: ")) == line
    # The report names every one of them.
    (said,) = [x for x in (pytester.path / "cmp.md").read_text().splitlines() if PHRASE in x]
    assert said.count("test_models.py::test_model[") == len(carrying)
    # -v names them in the terminal too (here in a run of 11 of them: [1], [10] to [19]).
    result = _compare(pytester, "-v", "--perf-progress=off", "-k", "model and 1")
    (line,) = [x for x in result.stdout.str().splitlines() if PHRASE in x]
    names = line.split("would help: ", 1)[1].split(", ")
    assert len(names) >= 5 and all(n.startswith("test_models.py::test_model[") for n in names)


def test_a_few_are_named_and_each_tolerance_is_its_own_line() -> None:
    """Through the real gate: the warning each result carries is the one grouped, by the
    record (no text parsed); other warnings stay each benchmark's own."""
    from pytest_infperf.core.results import Comparison, Verdict
    from pytest_infperf.judge.judge import Policy
    from pytest_infperf.report.messages import cannot_guard_groups, ungrouped_warnings
    from pytest_infperf.session.gate import Gate

    from .conftest import make_result

    def judged(name: str, threshold: float, detectable: float, ratio: float = 1.0) -> Any:
        c = Comparison(Verdict.NO_REGRESSION, threshold=threshold, ratio=ratio)
        r = make_result([1e-3] * 5, nodeid=f"test_m.py::{name}")
        r.comparison = dataclasses.replace(c, detectable=detectable)
        Gate(Policy()).apply(r)
        return r

    results = [
        judged("test_b", 0.05, 0.12),
        judged("test_a", 0.05, 0.31),
        judged("test_quiet", 0.05, 0.06),  # can guard 5%: no warning
        judged("test_loose", 0.10, 0.50),
    ]
    results[0].warnings.append("the GPU was throttled around the timed region")
    lines = [g.line(names=len(g.names) <= 3) for g in cannot_guard_groups(results)]
    assert lines == [
        "2 benchmarks could only have caught slowdowns of +12% to +31% or more (80% power at "
        "this run's noise), so they cannot guard the 5% tolerance here: more sampling time "
        "(max_time), --perf-ab, or a quieter runner would help: test_m.py::test_a, "
        "test_m.py::test_b",
        "1 benchmark could only have caught a slowdown of +50% or more (80% power at this "
        "run's noise), so it cannot guard the 10% tolerance here: more sampling time "
        "(max_time), --perf-ab, or a quieter runner would help: test_m.py::test_loose",
    ]
    assert [ungrouped_warnings(r) for r in results] == [
        ["the GPU was throttled around the timed region"],
        [],
        [],
        [],
    ]
    assert len(results[1].warnings) == 1  # the record keeps its own warning
