"""The one judge: the same rules in every mode, and the six bugs the old three-way split
caused (each reproduced through a real pytest run where it showed there)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_infperf.core.options import BenchOptions, recorded
from pytest_infperf.core.results import BenchmarkResult, Comparison, Origin, Reason, Verdict
from pytest_infperf.judge.judge import Judge
from pytest_infperf.judge.observation import Observation
from pytest_infperf.judge.rules import Policy
from pytest_infperf.report.fmt import fmt_time
from pytest_infperf.session.gate import Gate
from pytest_infperf.stats.pooled import summarize_pair

from .conftest import (
    BUSY_HEADER,
    FAST_INI,
    GIT_ENV,
    fast_ini,
    git,
    init_repo,
    load_json,
    make_result,
)

#: The busy-wait helper without the factor file: these suites change by editing the code.
BUSY = BUSY_HEADER.replace('FACTOR = float((Path(__file__).parent / "factor.txt").read_text())', "")
AB_INI = FAST_INI.replace("infperf_max_time = 0.05", "infperf_max_time = 0.3")
OPTS = BenchOptions(metric="median", threshold=0.05, alpha=0.05)
ORIGIN = Origin("stored", "a" * 40, 0, "commit aaaaaaaaaa (the merge-base of main and HEAD)")


def _ab_repo(pytester: pytest.Pytester, base_suite: str, head_suite: str) -> pytest.Pytester:
    pytester.makefile(".ini", pytest=AB_INI)
    pytester.makepyfile(test_suite=base_suite)
    (pytester.path / ".gitignore").write_text("*.json\n__pycache__/\n")
    init_repo(pytester.path, "base")
    git(pytester.path, "checkout", "-q", "-b", "feature")
    pytester.makepyfile(test_suite=head_suite)
    git(pytester.path, "commit", "-qam", "head")
    return pytester


# --- bug 1: --perf-ab with no warmup ---------------------------------------------------


@pytest.mark.slow
def test_ab_without_warmup_measures(pytester: pytest.Pytester, git_env: None) -> None:
    """warmup=0, warmup_time=0 and a call slower than an A/B sample (3.1 ms) left the A/B
    head without warm samples (IndexError)."""
    suite = BUSY + (
        "\nimport pytest\n\n"
        "@pytest.mark.infperf(warmup=0, warmup_time=0)\n"
        "def test_ms(infer_bench):\n"
        "    infer_bench(lambda: busy(5000))\n"
    )
    repo = _ab_repo(pytester, suite, suite + "\n# unchanged\n")
    result = repo.runpytest_subprocess("--perf-ab=main", "--perf-json=ab.json")
    result.assert_outcomes(passed=1)
    (bench,) = load_json(repo.path / "ab.json")["benchmarks"]
    assert bench["comparison"]["mode"] == "ab"
    assert bench["comparison"]["verdict"] in ("unchanged", "no-regression", "inconclusive")


# --- bug 2: budgets under --perf-ab ------------------------------------------------------


@pytest.mark.slow
def test_budget_holds_under_ab(pytester: pytest.Pytester, git_env: None) -> None:
    suite = BUSY + (
        "\nimport pytest\n\n"
        "@pytest.mark.infperf(max_median_ms=0.001)\n"
        "def test_over_budget(infer_bench):\n"
        "    infer_bench(lambda: busy(3500))\n"
    )
    repo = _ab_repo(pytester, suite, suite + "\n# unchanged\n")
    result = repo.runpytest_subprocess("--perf-ab=main", "--perf-json=ab.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*is over the budget max_median_ms=0.001*"])
    (bench,) = load_json(repo.path / "ab.json")["benchmarks"]
    assert bench["extra"]["budget"] == {"max_median_ms": 0.001, "passed": False}


# --- bug 3: memory against a baseline of 0 bytes -----------------------------------------


def _result(
    samples: list[float], memory: dict[str, float] | None = None, **opts: object
) -> BenchmarkResult:
    return make_result(samples, memory=memory or {}, options={**recorded(OPTS), **opts})


def test_memory_regression_from_zero_has_a_message() -> None:
    """A baseline memory figure of 0 gives no ratio; the failure message used to raise
    TypeError formatting None."""
    judge = Judge()
    now = _result([1e-3] * 20, {"rss_growth_bytes": 50 * 2**20})
    entry = _result([1e-3] * 20, {"rss_growth_bytes": 0}).to_json()
    opts = OPTS.replace(metric="memory")
    now.comparison = judge.against(Observation.of(now), entry, opts, ORIGIN)
    assert now.comparison.verdict is Verdict.REGRESSION and now.comparison.ratio is None
    (message,) = Gate(judge.policy).apply(now)
    assert "peak memory grew, from 0 B to 50.0 MiB" in message.splitlines()[0]
    assert "memory: now 50.0 MiB, before 0 B" in message
    assert "differences under 1.0 MiB are ignored" in message


def test_memory_metric_from_zero_in_a_real_run(pytester: pytest.Pytester, git_env: None) -> None:
    pytester.makefile(".ini", pytest=FAST_INI + "infperf_metric = memory\n")
    pytester.makepyfile(
        test_mem="""
        import numpy as np
        from pathlib import Path

        SIZE = int(Path(__file__).with_name("size.txt").read_text())

        def test_alloc(infer_bench):
            infer_bench(lambda: np.ones(SIZE).sum())
        """
    )
    (pytester.path / "size.txt").write_text("1")
    init_repo(pytester.path)
    pytester.runpytest("--perf-save").assert_outcomes(passed=1)
    (path,) = (pytester.path / "baselines").glob("*/*.json")
    doc = json.loads(path.read_text())
    doc["benchmarks"][0]["memory"]["rss_growth_bytes"] = 0
    path.write_text(json.dumps(doc))
    (pytester.path / "size.txt").write_text(str(16 * 2**20))  # 128 MiB per call
    result = pytester.runpytest("--perf-compare=HEAD")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*peak memory grew, from 0 B to * MiB"])
    assert "TypeError" not in result.stdout.str()


# --- bug 4: a base test that fails before infer_bench ----------------------------------


HEAD_SUITE = "def test_model(infer_bench):\n    infer_bench(lambda: sum(range(100)))\n"


@pytest.mark.parametrize(
    ("base", "said"),
    [
        # the base's test fails before its call (a missing fixture fails its setup alike)
        (
            "def test_model(infer_bench):\n    raise RuntimeError('broken on main')\n",
            ("the base side's test failed before this measurement", "RuntimeError: broken on main"),
        ),
        # the base's file cannot be imported: its error, never "not in the base commit"
        (
            "import not_a_module_anywhere\n\n" + HEAD_SUITE,
            ("collecting test_suite.py failed in the merge-base", "ModuleNotFoundError"),
        ),
    ],
    ids=["test-fails", "file-does-not-import"],
)
def test_a_base_side_that_cannot_run_a_benchmark_fails_closed(
    pytester: pytest.Pytester, git_env: None, base: str, said: tuple[str, str]
) -> None:
    """Before, a base file that did not import read as "not in the base commit" and passed
    (the worker sent the tests it collected, not its errors), and a base test's own error
    passed as no-baseline with a warning."""
    repo = _ab_repo(pytester, base, HEAD_SUITE)
    result = repo.runpytest_subprocess("--perf-ab=main", "--perf-json=ab.json")
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    c = load_json(repo.path / "ab.json")["benchmarks"][0]["comparison"]
    assert c["verdict"] == "no-baseline" and c["reason"] == "base-error"
    assert "not in the base commit" not in c["note"]
    result.stdout.fnmatch_lines(
        [
            "*test_suite.py::test_model: not compared: the base side could not run it",
            f"  why: *{said[0]}*",
            "  fix what the base commit needs to run it, or compare with another commit",
        ]
    )
    assert said[1] in c["note"] and said[1] in result.stdout.str()


# --- bug 5 and 6: labels that mean one thing --------------------------------------------


def test_interleaved_interval_carries_the_level_it_was_computed_at() -> None:
    """The second look's bound sits at its group-sequential critical value (the design's
    shares spent over correlated looks): the interval is at 1 - 2 * that level, and the
    message and the level say so, not the overall 95%."""
    from pytest_infperf.judge.plan import Design
    from pytest_infperf.stats.sequential import boundaries, level

    at = level(boundaries(0.05, Design().shares)[1])
    assert 0.05 * Design().shares[1] < at < 0.05  # more than Bonferroni's share
    judge = Judge(family=4)
    plan = judge.plan(OPTS, ("median",))
    pairs = {"median": [summarize_pair([0.3, 0.31] * 6), summarize_pair([0.29, 0.3] * 6)]}
    look = plan.look(pairs)
    assert look.k == 2 and look.alpha == pytest.approx(at) and look.stop
    head, base = [1.35e-3] * 40, [1e-3] * 41
    origin = Origin("ab", "b" * 40, None, "the merge-base")
    c = judge.interleaved(look, {"median": head}, {"median": base}, OPTS, origin)
    assert c.verdict is Verdict.REGRESSION and c.unit == "process pairs" and c.n == 2
    assert c.process_pairs == 2 and c.detectable is not None and c.detectable > 0.05
    assert c.ci_level == pytest.approx(1 - 2 * at) and c.bound_level == pytest.approx(1 - at)
    r = _result(head)
    r.comparison = c
    (message,) = Gate(judge.policy, verbose=True).apply(r)
    assert "90% interval" in message  # the run's level, named once everywhere
    assert f"(alpha {at:.3g} at this look, 0.05 overall)" in message  # -v: the statistics
    assert "over 2 process pairs" in message
    # the baseline figure is the median of the base samples (41, odd; 40, even below)
    assert c.baseline == statistics.median(base)
    even = judge.interleaved(
        look, {"median": head}, {"median": [1e-3] * 20 + [2e-3] * 20}, OPTS, origin
    )
    assert even.baseline == pytest.approx(1.5e-3)


def test_ab_records_the_median_and_its_level(pytester: pytest.Pytester, git_env: None) -> None:
    suite = BUSY + ("\ndef test_a(infer_bench):\n    infer_bench(lambda: busy(200))\n")
    repo = _ab_repo(pytester, suite, suite + "\n# same\n")
    result = repo.runpytest_subprocess(
        "--perf-ab=main", "--perf-json=ab.json", "--perf-markdown=r.md"
    )
    result.assert_outcomes(passed=1)
    (bench,) = load_json(repo.path / "ab.json")["benchmarks"]
    c = bench["comparison"]
    assert c["baseline"] == pytest.approx(statistics.median(bench["extra"]["base_samples"]))
    assert c["current"] == pytest.approx(statistics.median(bench["samples"]))
    alpha = c["details"]["alpha_at_look"]
    assert c["ci_level"] == pytest.approx(1 - 2 * alpha)
    # Every report names one level, the run's (the intervals of all looks hold at it).
    assert "ratio [90% CI]" in (repo.path / "r.md").read_text()


def test_metric_figures_are_labelled_by_what_they_are() -> None:
    """metric=p90: the message shows p90s, not medians labelled p90."""
    judge = Judge(Policy(drift_guard="off"))
    base = [1e-3 * (1 + (i % 10) / 100) for i in range(200)]
    now = [v * 1.5 for v in base]
    r, entry = _result(now), _result(base).to_json()
    opts = OPTS.replace(metric="p90")
    r.comparison = judge.against(Observation.of(r), entry, opts, ORIGIN)
    assert r.comparison.verdict is Verdict.REGRESSION
    p90_now = statistics.quantiles(now, n=100, method="inclusive")[89]
    assert r.comparison.current == pytest.approx(p90_now)
    assert r.comparison.current != pytest.approx(statistics.median(now))
    (message,) = Gate(judge.policy).apply(r)
    assert message.splitlines()[1].startswith("  p90 latency: now 1.6")


def test_p90_failure_shows_p90s(pytester: pytest.Pytester, git_env: None) -> None:
    pytester.makefile(
        ".ini",
        pytest=fast_ini(drift_guard="warn").replace("infperf_rounds = 10", "infperf_rounds = 80")
        + "infperf_metric = p90\n",
    )
    pytester.makepyfile(
        test_p=BUSY_HEADER
        + "\ndef test_p(infer_bench):\n    infer_bench(lambda: busy(200 * FACTOR))\n"
    )
    (pytester.path / "factor.txt").write_text("1.0")
    init_repo(pytester.path)
    pytester.runpytest("--perf-save").assert_outcomes(passed=1)
    (pytester.path / "factor.txt").write_text("1.5")
    result = pytester.runpytest("--perf-compare=HEAD", "--perf-json=out.json")
    (bench,) = load_json(pytester.path / "out.json")["benchmarks"]
    c = bench["comparison"]
    fresh = bench["extra"].get("remeasured_samples") or bench["samples"]
    assert c["current"] == pytest.approx(statistics.quantiles(fresh, n=100, method="inclusive")[89])
    # A p90 is a tail: on a loaded machine (the suite's other xdist worker) a baseline's
    # tail can read 1.2 ms for 200 us, and x1.5 goes undecided. The outcome follows the
    # verdict; the message is checked where it is a failure's.
    regressed = c["verdict"] == "regression"
    result.assert_outcomes(failed=int(regressed), passed=int(not regressed))
    if not regressed:
        assert c["verdict"] == "inconclusive", c
        return
    # The figures the ratio compares: before, and before times the ratio (for a p90, the
    # ratio of the two p90s).
    now = fmt_time(c["baseline"] * c["ratio"])
    result.stdout.fnmatch_lines([f"  p90 latency: now {now}, before {fmt_time(c['baseline'])}"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threshold", "2"], "--threshold='2': must be a number in (0, 1)"),
        (["--alpha", "0.7"], "--alpha='0.7': must be a number in (0, 0.5)"),
        (["--metric", "mean"], "--metric='mean': unknown metric"),
    ],
)
def test_cli_compare_refuses_what_the_plugin_refuses(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest_infperf", "compare", "a.json", "b.json", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **GIT_ENV},
    )
    assert out.returncode == 2 and message in out.stderr


# --- one rule, every mode ----------------------------------------------------------------


def test_comparison_round_trips_through_json() -> None:
    c = Judge().remeasured(
        Comparison(Verdict.REGRESSION, ratio=1.3, p_value=0.01, reason=None),
        Comparison(Verdict.REGRESSION, ratio=1.29, p_value=0.001, reason=Reason.INTERVAL_WIDE),
    )
    again = Comparison.from_json(json.loads(json.dumps(c.to_json())))
    assert again == c and again.first_pass is not None
    assert again.first_pass.verdict is Verdict.REGRESSION


def test_an_unconfirmed_remeasure_keeps_what_the_comparison_said() -> None:
    # A re-measured regression that Bonferroni over the run does not confirm says so, and
    # keeps the note it had (a compact baseline's): the test once lost it this way.
    c = Judge(family=2).remeasured(
        Comparison(Verdict.REGRESSION, ratio=1.3, p_value=0.01, reason=None),
        Comparison(
            Verdict.REGRESSION, ratio=1.2, p_value=0.04, reason=None, note="baseline from a summary"
        ),
    )
    assert c.verdict is Verdict.INCONCLUSIVE
    assert c.note.startswith("regression on fresh samples not confirmed")
    assert c.note.endswith("; baseline from a summary")


R, IM, U = Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.UNCHANGED
NOREG, IN = Verdict.NO_REGRESSION, Verdict.INCONCLUSIVE


def _c(verdict: Verdict, *bounds: float, p_value: float | None = None, **kw: Any) -> Comparison:
    ratio, low, high = bounds
    return Comparison(verdict, ratio=ratio, ci_low=low, ci_high=high, p_value=p_value, **kw)


_TTFT = _c(Verdict.REGRESSION, 1.3, 1.2, 1.4, p_value=0.004, metric="ttft")
_TPOT = _c(Verdict.REGRESSION, 1.2, 1.15, 1.25, p_value=1e-8, metric="tpot")
GENERATION = dataclasses.replace(_TTFT, parts={"ttft": _TTFT, "tpot": _TPOT})


# (id, the stored verdict, the run's perf tests, the verdict held over them at 0.01)
HELD: list[tuple[str, Comparison, int, Verdict]] = [
    ("regression, p x 20 under the run's", _c(R, 1.3, 1.2, 1.4, p_value=0.0004), 20, R),
    ("regression, p x 20 past it", _c(R, 1.1, 1.06, 1.2, p_value=0.001), 20, IN),
    ("regression, alone in its run", _c(R, 1.1, 1.06, 1.2, p_value=0.005), 1, R),
    ("regression, alone, p past the run's", _c(R, 1.1, 1.06, 1.2, p_value=0.02), 1, IN),
    ("regression without a p (memory)", _c(R, 1.5, 1.5, 1.5), 20, R),
    ("improvement far past it", _c(IM, 0.75, 0.70, 0.80), 20, IM),
    ("improvement near the bound", _c(IM, 0.92, 0.90, 0.94), 20, NOREG),
    ("improvement, wide at alpha / 20", _c(IM, 0.7, 0.5, 0.94), 20, IN),
    ("improvement, alone in its run", _c(IM, 0.92, 0.90, 0.94), 1, IM),
    ("improvement without a spread (memory)", _c(IM, 0.5, 0.5, 0.5), 20, IM),
    ("unchanged stays", _c(U, 1.0, 0.99, 1.01, p_value=1e-9), 20, U),
    # the rank test's own p of an improvement decides it, ties or not
    ("improvement by its p", _c(IM, 0.75, 0.7, 0.8, details={"p_faster": 1e-5}), 20, IM),
    ("improvement, p x 20 past", _c(IM, 0.85, 0.8, 0.9, details={"p_faster": 0.003}), 20, NOREG),
    ("improvement, tied units", _c(IM, 0.75, 0.75, 0.75, details={"p_faster": 0.004}), 20, NOREG),
    # throughput: higher is better (a latency of [0.80, 0.85] per item)
    ("throughput improvement", _c(IM, 1.21, 1.176, 1.25, metric="throughput"), 20, IM),
    ("throughput improvement, near", _c(IM, 1.08, 1.06, 1.10, metric="throughput"), 20, NOREG),
    # a tail's bootstrap p is at least 1/2001: its interval decides, however many tests
    ("p99 regression, far", _c(R, 1.35, 1.3, 1.4, p_value=1 / 2001, metric="p99"), 50, R),
    ("p99 regression, near", _c(R, 1.13, 1.06, 1.2, p_value=1 / 2001, metric="p99"), 20, IN),
    # a generation: each metric held over the run and its metrics, then the worst again
    ("generation, one part holds", GENERATION, 20, R),
]


@pytest.mark.parametrize(
    ("stored", "family", "held"), [r[1:] for r in HELD], ids=[r[0] for r in HELD]
)
def test_a_claim_holds_over_the_run_or_says_why(
    stored: Comparison, family: int, held: Verdict
) -> None:
    from pytest_infperf.judge.judge import held_over

    stored = dataclasses.replace(stored, alpha=0.05, threshold=0.05)
    c = held_over(stored, family, 0.01)  # the run's alpha
    assert c.verdict is held
    if stored.parts:  # the part that held is the headline; the other says why not
        assert c.metric == "tpot" and c.parts is not None
        assert c.parts["ttft"].verdict is IN and "20 benchmarks x 2 parts" in str(
            c.parts["ttft"].note
        )
        return
    assert (c.reason is Reason.MULTIPLICITY) == (held is not stored.verdict)
    if held is not stored.verdict:
        said = f"{family} benchmark{'s' if family != 1 else ''}"
        assert f"not confirmed at 0.01 over the run's {said}" in (c.note or "")
    if stored.p_value is not None:
        assert c.family_size == family and c.holm_p == min(1.0, stored.p_value * family)
    assert held_over(c, family, 0.01) == c  # held once or twice: the same


def test_a_withheld_headline_stays_withheld_whatever_its_parts_claim() -> None:
    from pytest_infperf.judge.judge import held_over

    # A CUDA benchmark on a throttled GPU: the headline is withheld, its parts still claim.
    parts = {"median": _TPOT, "gpu_time": dataclasses.replace(_TPOT, metric="gpu_time")}
    withheld = Comparison(IN, reason=Reason.GPU_THROTTLED, parts=parts, note="throttled")
    c = held_over(withheld, 20, 0.01)
    assert c.verdict is IN and c.reason is Reason.GPU_THROTTLED and c.note == "throttled"


def test_a_faster_rank_verdict_carries_its_own_p() -> None:
    from pytest_infperf.stats.ranks import compare_latency

    base = [1e-3 * (1 + 0.01 * (i % 7)) for i in range(40)]
    e = compare_latency([0.8 * x for x in base], base, 0.05, 0.05)
    assert e.verdict is Verdict.IMPROVEMENT and 0 < e.details["p_faster"] < 1e-3  # 10 units a side
    same = compare_latency(base, base, 0.05, 0.05)
    assert "p_faster" not in same.details


def test_strict_env_and_budget_are_the_gates_in_every_mode() -> None:
    judge = Judge(Policy(strict_env=True))
    r = _result([2e-3] * 20, max_median_ms=1.0)
    entry = _result([2e-3] * 20).to_json()
    entry["env"] = {"backend": "onnxruntime"}
    r.env = {"backend": "callable"}
    r.comparison = judge.against(Observation.of(r), entry, OPTS, ORIGIN)
    assert r.comparison.verdict is Verdict.INCOMPARABLE
    failures = Gate(judge.policy).apply(r)
    assert any("max_median_ms=1" in f for f in failures)
    assert any(
        "--perf-strict-env" in f and "backend: 'onnxruntime' -> 'callable'" in f for f in failures
    )


def test_a_misread_is_two_intervals_apart_by_more_than_half_the_threshold() -> None:
    """judge.policy.misread: the stored pass and the interleaved run of one metric disagree beyond
    both their errors; a generation's parts are compared part by part, never a headline
    of TPOT with one of TTFT; what lacks an interval, or is not finite, is no misread."""
    from pytest_infperf.core.names import CompareMode, Metric
    from pytest_infperf.judge.policy import misread

    def c(ratio: float, low: float, high: float, **kw: object) -> Comparison:
        return Comparison(Verdict.UNCHANGED, ratio=ratio, ci_low=low, ci_high=high, **kw)  # type: ignore[arg-type]

    ab = {"decided_by": CompareMode.AB}
    stored, settled = c(1.20, 1.17, 1.24), c(1.10, 1.07, 1.13, **ab)
    assert misread(stored, settled) == pytest.approx(1.20 / 1.10)
    assert misread(stored, c(1.10, 1.07, 1.13)) is None  # not an interleaved verdict
    assert misread(c(1.14, 1.125, 1.16), settled) is None  # overlapping
    assert misread(c(1.02, 1.015, 1.025), c(1.00, 0.998, 1.002, **ab)) is None  # under 2.5%
    assert misread(c(math.inf, 1.17, math.inf), settled) is None
    parts = {"ttft": c(1.02, 1.0, 1.04), "tpot": c(1.20, 1.17, 1.24)}
    ab_parts = {"ttft": c(1.01, 0.99, 1.03), "tpot": c(1.10, 1.07, 1.13)}
    headline = c(1.20, 1.17, 1.24, metric=Metric.TPOT, parts=parts)
    assert misread(headline, c(1.01, 0.99, 1.03, **ab, parts=ab_parts)) == pytest.approx(1.2 / 1.1)
    # a part-less headline of another metric, of a side with parts: never compared
    assert misread(headline, c(1.10, 1.07, 1.13, **ab, metric=Metric.TTFT)) is None
    tpot, ttft = (
        c(1.20, 1.17, 1.24, metric=Metric.TPOT),
        c(1.10, 1.07, 1.13, **ab, metric=Metric.TTFT),
    )
    assert misread(tpot, ttft) is None  # two headlines of different metrics
    assert misread(tpot, c(1.10, 1.07, 1.13, **ab, metric=Metric.TPOT)) == pytest.approx(1.2 / 1.1)
    assert misread(c(math.nan, 1.17, 1.24), settled) is None


@pytest.mark.parametrize(
    ("pattern", "key", "matches"),
    [
        ("t.py::test_latency[*]", "t.py::test_latency[b1]", True),  # the docs' example
        ("t.py::test_latency[*]", "t.py::test_latency[b32]#second", True),
        ("t.py::test_latency[b1]", "t.py::test_latency[b1]", True),
        ("t.py::test_latency[b1]", "t.py::test_latency[b32]", False),
        ("t.py::test_latency[*]", "t.py::test_latency", False),
        ("t.py::test_lat*", "t.py::test_latency[b1]", True),
        ("t.py::test_latency", "t.py::test_latency#second", True),
        ("t.py::test_[lx]atency", "t.py::test_latency", False),  # brackets are literal
    ],
)
def test_an_accept_pattern_takes_brackets_as_a_parametrized_id(
    pattern: str, key: str, matches: bool
) -> None:
    from pytest_infperf.judge.accept import AcceptRule

    assert AcceptRule(pattern, "a reason").matches(key) is matches
