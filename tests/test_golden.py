"""Golden outputs: what the terminal, the Markdown report, the pull-request comment and the
failure message say for four runs (identical code, a regression, an accepted regression,
one benchmark undecided), from fixed records, compared with the files in tests/golden/, so
that a change of wording is reviewed as text. ``INFPERF_GOLDEN=update`` rewrites them."""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_infperf.core.names import CompareMode, Metric
from pytest_infperf.core.results import BenchmarkResult, Comparison, Reason, Verdict, WorkDiff
from pytest_infperf.judge.accept import AcceptRule
from pytest_infperf.judge.rules import Policy
from pytest_infperf.report import comment, fmt, markdown, messages, notices, text
from pytest_infperf.session.gate import Gate
from pytest_infperf.stats import pooled as _pool

from .conftest import make_result

GOLDEN = Path(__file__).parent / "golden"
SHA = "1ac89c31e5a7" + "0" * 28
SOURCE = "commit 1ac89c31e5 (the merge-base of main and HEAD)"
BERT = "tests/perf/test_models.py::test_bert"
SAME = WorkDiff(flops=(1.0e9, 1.0e9), op_calls=(561, 561), same=True, change=0.0, measure="FLOPs")
MORE = WorkDiff(
    flops=(8.05e8, 1.007e9),
    op_calls=(571, 696),
    ops=[("aten::addmm", 25, 31)],
    change=0.251,
    measure="FLOPs",
    increase=0.251,
    increase_measure="FLOPs",
)


def _samples(median: float, n: int = 40) -> list[float]:
    """Fixed samples around ``median`` (a fixed spread: the records are the same each run)."""
    return [median * (1 + 0.02 * ((i * 7) % 11 - 5) / 5) for i in range(n)]


def _c(verdict: Verdict, ratio: float, low: float, high: float, **kw: Any) -> Comparison:
    fields: dict[str, Any] = {
        "metric": Metric.MEDIAN,
        "mode": CompareMode.AB,
        "decided_by": CompareMode.AB,
        "source": SOURCE,
        "baseline_commit": SHA,
        "n": 3,
        "n_baseline": 3,
        "unit": "process pairs",
        "process_pairs": 3,
        "p_value": 0.3,
        "detectable": 0.07,
        "settled_because": "machine-moved",
        "ci_level": 0.9,
        **kw,
    }
    return Comparison(verdict, ratio=ratio, ci_low=low, ci_high=high, **fields)


def _result(
    test: str, median: float, c: Comparison, accept: tuple[AcceptRule, ...] = ()
) -> BenchmarkResult:
    """A result as the session records it: its comparison through the gate."""
    base = median / (c.ratio or 1.0)
    c = dataclasses.replace(c, current=median, baseline=base)
    r = make_result(
        _samples(median),
        nodeid=f"tests/perf/test_models.py::{test}",
        backend="torch",
        path="tests/perf/test_models.py",
        lineno=12,
        comparison=c,
    )
    Gate(Policy(accept=accept)).apply(r)
    return r


def _runs() -> dict[str, list[BenchmarkResult]]:
    unchanged = _c(Verdict.UNCHANGED, 1.004, 0.981, 1.027, work=SAME)
    stored = _c(
        Verdict.NO_REGRESSION, 0.97, 0.91, 1.03, decided_by=CompareMode.STORED,
        mode=CompareMode.STORED, unit="time units", n=20, n_baseline=20, process_pairs=None,
        settled_because=None, work=SAME,
    )  # fmt: skip
    regression = _c(Verdict.REGRESSION, 1.251, 1.226, 1.277, p_value=2e-9, work=MORE)
    rule = AcceptRule(BERT, "one layer more, for accuracy", "9f3e2d1c0b" + "0" * 30)
    undecided = _c(
        Verdict.INCONCLUSIVE, 1.031, 0.948, 1.121, work=SAME, detectable=0.14,
        reason=Reason.FUTILITY,
    )  # fmt: skip
    mlp = _result("test_mlp", 42.3e-6, unchanged)
    ort = _result("test_bert_onnx", 54.6e-3, stored)
    return {
        "aa": [mlp, ort],
        "regression": [mlp, _result("test_bert", 81.9e-3, regression)],
        "accepted": [mlp, _result("test_bert", 81.9e-3, regression, (rule,))],
        "inconclusive": [mlp, ort, _result("test_bert", 67.4e-3, undecided)],
    }


def _terminal(results: list[BenchmarkResult]) -> str:
    """The terminal summary as session/terminal.py writes it at default verbosity."""
    lines = [f"infperf: {notices.summary(results)}", f"compared with {SOURCE}"]
    lines += text.summary_lines(results)
    lines += [fmt.fit(x) for x in text.settle_summary(results, verbose=False)]
    lines += [fmt.fit(x) for x in notices.accepted_lines(results)]
    lines += [fmt.fit(f"warning: {w}") for w in notices.run_warnings(results, None)]
    return "\n".join(lines) + "\n"


def _doc(results: list[BenchmarkResult]) -> dict[str, Any]:
    return {
        "mode": "compare",
        "benchmarks": [r.to_json() for r in results],
        "warnings": notices.run_warnings(results, None),
        "comparison": {"origin": "commit", "sha": SHA, "ref": "main", "distance": 0},
        "run": {"complete": True, "exitstatus": 0},
    }


@pytest.fixture(autouse=True)
def _columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prose lines wrap to the terminal's width: 120, as in a CI log."""
    monkeypatch.setenv("COLUMNS", "120")


def _check(name: str, got: str) -> None:
    path = GOLDEN / name
    if os.environ.get("INFPERF_GOLDEN") == "update":
        path.parent.mkdir(exist_ok=True)
        path.write_text(got)
    assert path.exists(), f"{path} missing: INFPERF_GOLDEN=update writes it"
    assert got == path.read_text()


@pytest.mark.parametrize("run", ["aa", "regression", "accepted", "inconclusive"])
def test_what_each_output_says(run: str) -> None:
    results = _runs()[run]
    _check(f"{run}.terminal.txt", _terminal(results))
    _check(f"{run}.md", markdown.render(results, source=_doc(results)["comparison"]))
    _check(f"{run}.comment.md", comment.body(_doc(results))[0])


def test_a_regressions_first_lines() -> None:
    """The failure message: the percentage in the first line, Perf-Accept within six."""
    bert = _runs()["regression"][1]
    assert bert.comparison is not None
    got = bert.comparison.message or ""
    assert got == messages.failure_message(bert.key, bert.comparison, bert.nodeid)
    _check("regression.failure.txt", got + "\n")
    first = got.splitlines()[:6]
    assert "25.1% slower" in first[0] and any("Perf-Accept" in line for line in first)
    verbose = messages.failure_message(bert.key, bert.comparison, bert.nodeid, verbose=True)
    assert verbose.startswith(got) and "p = 2e-09" in verbose


@pytest.mark.parametrize("columns", [80, 120, 200])
def test_prose_lines_wrap_to_the_terminal(columns: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """why: and accepted: lines ran to 260 characters whatever the terminal: they wrap to
    COLUMNS (the terminal's, 120 where unknown), continuation lines indented."""
    monkeypatch.setenv("COLUMNS", str(columns))
    bert = _runs()["accepted"][1]
    assert bert.comparison is not None
    accepted = notices.accepted_lines([bert])
    assert accepted and all(len(line) <= columns for x in accepted for line in x.splitlines())
    assert accepted[0].splitlines()[-1].startswith("    ") or len(accepted[0]) <= columns
    regression = _runs()["regression"][1].comparison
    assert regression is not None
    stored = messages.failure_message(bert.key, regression, bert.nodeid)
    printed = fmt.wrap(stored)  # the test's failure, as printed (Gate.apply)
    why = printed[printed.index("  why:") :].split("\n  decided by")[0]
    assert all(len(line) <= columns for line in why.splitlines()), why
    # The record keeps its lines whole (the JSON, JUnit, annotations), whatever COLUMNS.
    assert "\n    " not in stored[stored.index("  why:") :].split("\n  decided by")[0]


def test_identical_code_says_no_warning() -> None:
    """A/A: one summary line, no warning, no callout in the comment."""
    results = _runs()["aa"]
    assert notices.run_warnings(results, None) == []
    assert "warning" not in _terminal(results)
    body, _ = comment.body(_doc(results))
    assert "[!WARNING]" not in body and "[!CAUTION]" not in body


CPU4 = {"num_threads": 4, "device_type": "cpu"}
ORT0 = {"intra_op_threads": 0, "provider": "CPUExecutionProvider"}
F, W = Reason.FUTILITY, Reason.INTERVAL_WIDE


@pytest.mark.parametrize(
    ("verdict", "detectable", "env", "reason", "said"),
    [
        # what the runner could not see at the tolerance: named, with its figure
        (Verdict.INCONCLUSIVE, 0.14, {}, F, "test_0 >= +14%"),
        (Verdict.INCONCLUSIVE, 0.30, {}, W, "hides a 5% change in it"),
        # undecided, but within twice the tolerance: more of the same samples would decide
        (Verdict.INCONCLUSIVE, 0.10, {}, F, None),
        (Verdict.INCONCLUSIVE, 0.06, {}, W, None),
        (Verdict.INCONCLUSIVE, None, {}, W, None),
        (Verdict.INCONCLUSIVE, math.inf, {}, W, None),
        # undecided for a reason that is not its noise: said by its own warning
        (Verdict.INCONCLUSIVE, 0.30, {}, Reason.MULTIPLICITY, None),
        (Verdict.INCONCLUSIVE, 0.30, {}, Reason.DRIFT_WITHHELD, None),
        (Verdict.INCONCLUSIVE, 0.30, {}, Reason.GPU_THROTTLED, None),
        # decided: nothing to say, however wide what it could catch
        (Verdict.UNCHANGED, 0.30, {}, None, None),
        (Verdict.NO_REGRESSION, 0.30, {}, None, None),
        # a CPU model on several threads (or the library's default) is told about one
        (Verdict.INCONCLUSIVE, 0.3, CPU4, F, "infperf_intra_op_threads = 1, then save a new"),
        (Verdict.INCONCLUSIVE, 0.3, ORT0, F, "infperf_intra_op_threads = 1"),
        # ...never a GPU or other device's, one already on one thread, nor a session the
        # test built (the plugin cannot set its count)
        (Verdict.INCONCLUSIVE, 0.3, {**CPU4, "device_type": "cuda"}, F, "!threads"),
        (Verdict.INCONCLUSIVE, 0.3, {**CPU4, "device_type": "mps"}, F, "!threads"),
        (Verdict.INCONCLUSIVE, 0.3, {**ORT0, "provider": "DmlExecutionProvider"}, F, "!threads"),
        (Verdict.INCONCLUSIVE, 0.3, {**CPU4, "num_threads": 1}, F, "!threads"),
        (Verdict.INCONCLUSIVE, 0.3, {**ORT0, "source": "session"}, F, "!threads"),
        # a budget spent before the decision: a larger one would help
        (Verdict.INCONCLUSIVE, 0.3, {}, Reason.BUDGET, "a larger --perf-budget (1 of 1 were"),
        (Verdict.INCONCLUSIVE, 0.3, {}, F, "!budget"),
    ],
)
def test_what_this_runner_could_not_see_is_said_once(
    verdict: Verdict, detectable: float | None, env: dict[str, Any], reason: Reason | None,
    said: str | None,
) -> None:  # fmt: skip
    c = _c(verdict, 1.02, 0.9, 1.15, detectable=detectable, reason=reason)
    r = _result("test_0", 1e-3, c)
    env = dict(env)
    if "source" in env:
        r.backend_info["source"] = env.pop("source")
    r.env.update(env)
    line = notices.undetectable([r])
    if said is None:
        assert line is None
        return
    assert line is not None and line.startswith("not a failure, but 1 benchmark")
    assert "went ungated" in line and "no other jobs" in line
    if said.startswith("!"):
        assert said[1:] not in line
    else:
        assert said in line
    assert notices.run_warnings([r], None).count(line) == 1


def test_a_detectable_effect_the_judge_computes_names_only_real_blindness() -> None:
    """Any noise puts what a test could catch past the tolerance (a claim needs its lower
    bound beyond it): a tight comparison is not named, a wide one is."""
    tight = _pool.detectable_effect(0.002, 0.05, 0.05)
    wide = _pool.detectable_effect(0.05, 0.05, 0.05)
    assert tight is not None and wide is not None and 0.05 < tight < 0.1 < wide
    rows = [
        _result(f"test_{i}", 1e-3, _c(Verdict.INCONCLUSIVE, 1.0, 0.9, 1.1, detectable=d, reason=W))
        for i, d in enumerate((tight, wide))
    ]
    line = notices.undetectable(rows)
    assert line is not None and "1 benchmark went ungated" in line
    assert "test_1 >=" in line and "test_0" not in line


def test_tolerances_are_said_as_they_are_set() -> None:
    def row(name: str, threshold: float) -> BenchmarkResult:
        c = _c(Verdict.INCONCLUSIVE, 1.0, 0.8, 1.2, detectable=0.3, reason=F, threshold=threshold)
        return _result(name, 1e-3, c)

    line = notices.undetectable([row("test_a", 0.025)])
    assert line is not None and "hides a 2.5% change" in line
    line = notices.undetectable([row("test_a", 0.025), row("test_b", 0.1)])
    assert line is not None and "hides a change of its tolerance in them" in line
    assert "test_a (tolerance 2.5%) >= +30%" in line and "test_b (tolerance 10%)" in line


def test_what_many_benchmarks_could_not_see_is_one_line() -> None:
    blind = _c(Verdict.INCONCLUSIVE, 1.0, 0.8, 1.25, detectable=0.3, reason=Reason.FUTILITY)
    results = [_result(f"test_{i}", 1e-3, blind) for i in range(7)]
    [line] = [w for w in notices.run_warnings(results, None) if "ungated" in w]
    assert "7 benchmarks went ungated" in line and "and 2 more" in line
    assert "test_4 >= +30%" in line and "test_5" not in line
    # Said of many: them, each, the names apart; every remedy that applies, in turn.
    results[0].env.update(CPU4)
    line = notices.undetectable(results[:5])
    assert line is not None and " more" not in line  # five named: none left to count
    assert "test_4 >= +30% and 1 more)" in str(notices.undetectable(results[:6]))
    assert (
        "5 benchmarks went ungated: this runner's noise hides a 5% change in them (the smallest "
        "slowdown each could catch: test_models.py::test_0 >= +30%, test_models.py::test_1 "
        ">= +30%, " in line
    )
    assert line.endswith(
        "To gate them: one intra-op thread where a CPU model runs on several "
        "(infperf_intra_op_threads = 1, then save a new baseline); or a runner with no other "
        "jobs on its CPUs"
    )


def test_a_split_run_says_what_it_could_not_see_once() -> None:
    """Each shard says its own line; the merge says the whole run's, once."""
    blind = _c(Verdict.INCONCLUSIVE, 1.0, 0.8, 1.25, detectable=0.3, reason=Reason.FUTILITY)
    a, b = _result("test_a", 1e-3, blind), _result("test_b", 1e-3, blind)
    shards = [*notices.run_warnings([a], None), "W", *notices.run_warnings([b], None)]
    merged = notices.merged_warnings(shards, [a, b])
    assert merged[0] == "W" and len(merged) == 2
    assert "2 benchmarks went ungated" in merged[1] and "test_b >= +30%" in merged[1]
    # Nothing ungated in the whole run: the shards' lines go, and none comes back.
    decided = _result("test_c", 1e-3, _c(Verdict.UNCHANGED, 1.0, 0.99, 1.01))
    assert notices.merged_warnings(shards, [decided]) == ["W"]


def test_drift_is_said_only_where_a_verdict_rests_on_the_stored_pass() -> None:
    drift = {"gemm_ratio": 0.967, "python_ratio": 0.447, "limit": 0.025, "drifted": True}
    results = _runs()["aa"]
    said = notices.run_warnings(results, drift)
    assert len(said) == 1 and "test_models.py::test_bert_onnx" in said[0]
    assert "test_mlp" not in said[0]  # interleaved: both sides measured now
    interleaved = [r for r in results if r.comparison and r.comparison.decided_by == "ab"]
    assert notices.run_warnings(interleaved, drift) == []
    assert notices.run_warnings(results, drift, ab=True) == []  # never suggests the mode
    md = markdown.render(results, drift=drift, warnings=said)
    assert md.count("The machine moved") == 1 and "<summary>Warnings" not in md


def test_the_default_table_fits_120_columns() -> None:
    name = "test_" + "x" * 150 + "[param-1-2-3]"
    long = _result(name, 42e-6, _c(Verdict.UNCHANGED, 1, 0.98, 1.02))
    lines = text.summary_lines([*_runs()["regression"], long])
    assert max(len(line) for line in lines) <= 120
    assert any("…" in line and line.rstrip().endswith("-") for line in lines)
    wide = text.summary_lines([*_runs()["regression"], long], verbose=True)
    assert max(len(line) for line in wide) > 120  # -v: every column, the name whole
    # Names that differ only in their middle, very noisy (!! widens the spread column):
    # cut around where they differ, not kept whole (169 columns before).
    stem = "tests/perf/test_transformer_models.py::test_bert_base_uncased_onnxruntime_{}"
    plain = []
    for kind in ("cpu_fp32", "cpu_fp16", "cuda_fp32", "cuda_fp16"):
        name = stem.format(kind) + "_sequence_length_128_batch_size_32_latency"
        r = make_result([1e-3 * (1 + 0.3 * (j % 3)) for j in range(40)], nodeid=name)
        r.stats["noise"] = "severe"
        plain.append(r)
    lines = text.summary_lines(plain)
    assert max(len(line) for line in lines) <= 120, lines
    assert len({line.split()[0] for line in lines[2:6]}) == 4  # still told apart


def _gpu(latency: Verdict, device: Verdict) -> Comparison:
    parts = {
        "median": _c(latency, 1.0, 0.8, 1.25),
        "gpu_time": _c(device, 1.0, 0.999, 1.001, metric=Metric.GPU_TIME),
    }
    return _c(Verdict.UNCHANGED, 1.0, 0.999, 1.001, metric=Metric.GPU_TIME, parts=parts)


@pytest.mark.parametrize(
    ("comparison", "warnings", "changes"),
    [
        (_gpu(Verdict.UNCHANGED, Verdict.UNCHANGED), [], False),
        # a judged part that moved, whatever the headline says
        (_gpu(Verdict.REGRESSION, Verdict.UNCHANGED), [], True),
        (_gpu(Verdict.INCONCLUSIVE, Verdict.UNCHANGED), [], True),
        (_gpu(Verdict.UNCHANGED, Verdict.IMPROVEMENT), [], True),
        # a warning that names verdicts nobody checked
        (_gpu(Verdict.UNCHANGED, Verdict.UNCHANGED), ["settling is off for this session: x"], True),
        (
            _gpu(Verdict.UNCHANGED, Verdict.UNCHANGED),
            [f"{BERT}: the worker died; judged against the stored baseline"],
            True,
        ),
        (
            _gpu(Verdict.UNCHANGED, Verdict.UNCHANGED),
            [f"{BERT}: ... these CPU verdicts ... were not re-checked: {BERT}_onnx"],
            True,
        ),
        (
            _gpu(Verdict.UNCHANGED, Verdict.UNCHANGED),
            [f"no action needed: {BERT}: ...; no verdict stood on a stored pass alone before it"],
            False,
        ),
    ],
)
def test_the_comment_says_no_changes_only_where_nothing_moved_or_went_unchecked(
    comparison: Comparison, warnings: list[str], changes: bool
) -> None:
    doc = {**_doc([_result("test_bert", 6e-3, comparison)]), "warnings": warnings}
    body, worth = comment.body(doc)
    assert worth is changes
    assert ("no changes" in body) is not changes


@pytest.mark.parametrize(
    ("shown", "fmt", "value", "text"),
    [
        ("rate", "fmt_rate", 999.6, "1k/s"),
        ("rate", "fmt_rate", 999.4, "999/s"),
        ("rate", "fmt_rate", 999999.7, "1M/s"),
        ("rate", "fmt_rate", 123456, "123k/s"),
        ("rate", "fmt_rate", 12.3, "12.3/s"),
        ("time", "fmt_time", 999.7e-6, "1 ms"),
        ("time", "fmt_time", 0.9996, "1 s"),
        ("time", "fmt_time", 999.96e-9, "1 us"),
        ("time", "fmt_time", 123.4e-6, "123 us"),
        ("time", "fmt_time", 5e-9, "5 ns"),
    ],
)
def test_a_figure_never_reads_in_powers_of_ten_where_a_unit_says_it(
    shown: str, fmt: str, value: float, text: str
) -> None:
    """Rounding to three digits carries into the next unit: 1k/s, not 1e+03/s; 1 ms, not
    1000 us."""
    from pytest_infperf.report import fmt as _fmt

    assert getattr(_fmt, fmt)(value) == text


#: The main job's generations: names that differ only inside their parametrization.
GENERATIONS = [
    f"tests/perf/test_generation.py::test_generate_latency[cpu-{cache}-p{p}-n16-b1-tiny-{m}]"
    for cache in ("eager", "static-cache")
    for p in (32, 256)
    for m in ("gpt2", "llama")
]


def _generation(nodeid: str, compared: bool) -> BenchmarkResult:
    stats = {"stats": {"median": 0.0123, "p99": 0.02}}
    gen = {"prompt_tokens": 256, "new_tokens": 16, "batch_size": 1, "ttft": stats,
           "tpot": stats, "itl": stats, "tokens_per_s": {"stats": {"median": 81.3}}}  # fmt: skip
    parts = {
        m: _c(Verdict.UNCHANGED, 0.998, 0.975, 1.021, metric=Metric(m)) for m in ("ttft", "tpot")
    }
    c = _c(Verdict.UNCHANGED, 0.998, 0.975, 1.021, metric=Metric.TTFT, parts=parts)
    return make_result(
        _samples(0.2), nodeid=nodeid, backend="torch", generation=gen,
        comparison=c if compared else None,
    )  # fmt: skip


@pytest.mark.parametrize("compared", [False, True], ids=["plain run", "compared"])
def test_tables_fit_120_columns_and_no_two_rows_read_alike(compared: bool) -> None:
    results = [_generation(n, compared) for n in GENERATIONS]
    lines = text.summary_lines(results) + text.generation_lines(results)
    assert max(len(line) for line in lines) <= 120, "\n".join(lines)
    for table in (text.summary_lines(results), text.generation_lines(results)[1:]):
        names = [line.split("  ")[0] for line in table[2 : 2 + len(GENERATIONS)]]
        assert len(set(names)) == len(GENERATIONS), table
    # -v: every figure and the names whole, wider than 120 where they need it.
    wide = text.summary_lines(results, verbose=True)
    assert all(any(n.split("/")[-1] in line for line in wide) for n in GENERATIONS)


def test_the_main_jobs_names_fit_and_tell_their_rows_apart() -> None:
    """The main job's 20 names (generations, MLPs and transformers of two frameworks): both
    tables in 120 columns, every row's name its own, a test's parametrizations cut alike to
    the ids that tell them apart (cpu, n16, b1 and tiny are in every one of them)."""
    nodeids = [g.replace("tests/perf/", "examples/").replace("generate_latency", "generation")
               for g in GENERATIONS]  # fmt: skip
    nodeids += [f"examples/test_mlp.py::test_mlp_{f}[b{b}]" for f in ("onnxruntime", "torch")
                for b in (1, 32)]  # fmt: skip
    nodeids += [
        f"examples/test_transformers.py::test_{f}[{p}-b1-s{s}-{m}-base-uncased]"
        for f, p in (("onnxruntime", "ort-cpu"), ("torch", "torch-eager"))
        for s in (128, 32)
        for m in ("bert", "distilbert")
    ]
    plain = [make_result(_samples(1e-3), nodeid=n, backend="onnxruntime") for n in nodeids]
    compared = [_result(n.split("::")[1], 1e-3, _c(Verdict.UNCHANGED, 1.0, 0.96, 1.04))
                for n in nodeids]  # fmt: skip
    for i, r in enumerate(compared):
        r.nodeid = nodeids[i]
    for results in (plain, compared):
        lines = text.summary_lines(results)
        assert max(len(line) for line in lines) <= 120, "\n".join(lines)
        names = [line.split("  ")[0] for line in lines[2 : 2 + len(nodeids)]]
        assert len(set(names)) == len(nodeids), names
    assert "test_generation[…static-cache-p32-llama]" in names
    assert "test_onnxruntime[…s128-distilbert]" in names
