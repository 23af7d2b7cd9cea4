"""The results JSON (contents and schema), JUnit properties, and the terminal summary."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from pytest_infperf.core.results import SCHEMA_VERSION

from .conftest import expert, load_json

SUITE = """
import numpy as np
import pytest

def model(x):
    return x * 2

@pytest.mark.parametrize("batch", [1, 4])
def test_model(infer_bench, batch):
    infer_bench(model, np.ones((batch, 8)))

def test_two(infer_bench):
    infer_bench(lambda: None)
    infer_bench(lambda: None, name="other")
"""


@pytest.fixture
def run(ourtester: pytest.Pytester) -> Any:
    ourtester.makepyfile(test_suite=SUITE)

    def go(*args: str) -> pytest.RunResult:
        return ourtester.runpytest(*args)

    return go


def test_json_document(run: Any, ourtester: pytest.Pytester, validate: Any) -> None:
    run("--perf-json=out/results.json").assert_outcomes(passed=3)
    doc = load_json(ourtester.path / "out" / "results.json")
    validate(doc)
    assert doc["schema_version"] == SCHEMA_VERSION == 1
    assert doc["created"].endswith("+00:00")
    env = doc["environment"]
    for key in ("os", "python", "cpu", "threads", "packages", "hostname", "hard", "soft", "key"):
        assert key in env, key
    assert env["cpu"]["model"] and env["cpu"]["logical"] >= 1
    assert "numpy" in env["packages"]
    assert "gpu" in env  # null on this machine, a section on a GPU machine
    assert len(doc["benchmarks"]) == 4
    bench = next(b for b in doc["benchmarks"] if b["params"] == {"batch": 4})
    for key in (
        "nodeid",
        "name",
        "backend",
        "params",
        "options",
        "samples",
        "warmup_samples",
        "first_call",
        "stats",
        "memory",
    ):
        assert key in bench, key
    assert bench["name"] is None
    assert bench["batch_size"] == 4
    assert bench["throughput"] == pytest.approx(4 / bench["stats"]["median"], rel=1e-9)
    assert all(s > 0 for s in bench["samples"])
    assert len(bench["samples"]) == bench["stats"]["n"]
    for key in (
        "median",
        "mean",
        "stdev",
        "min",
        "max",
        "p50",
        "p90",
        "p95",
        "p99",
        "ci_low",
        "ci_high",
        "cv",
    ):
        assert isinstance(bench["stats"][key], float), key
    assert bench["memory"]["rss_peak_bytes"] > 0
    # pytest locates a decorated test at its first decorator line
    assert bench["path"] == "test_suite.py" and bench["lineno"] == 7
    keys = [b["key"] for b in doc["benchmarks"]]
    assert keys == sorted(keys)


def test_json_is_deterministic(run: Any, ourtester: pytest.Pytester) -> None:
    run("--perf-json=a.json").assert_outcomes(passed=3)
    text = (ourtester.path / "a.json").read_text()
    assert text.endswith("\n")
    lines = text.splitlines()
    assert lines[0] == "{" and ' "benchmarks": [' in lines  # sorted keys, indent 1
    assert "NaN" not in text and "Infinity" not in text


def test_json_from_ini(ourtester: pytest.Pytester) -> None:
    ourtester.makefile(
        ".ini", pytest="[pytest]\ninfperf_json = out/from-ini.json\ninfperf_max_time = 0.01\n"
    )
    ourtester.makepyfile("def test_a(infer_bench):\n    infer_bench(lambda: None)\n")
    sub = ourtester.mkdir("sub")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(sub)  # an ini path is relative to the rootdir, not the cwd
        ourtester.runpytest(str(ourtester.path)).assert_outcomes(passed=1)
    assert (ourtester.path / "out" / "from-ini.json").is_file()


def test_junit_properties(run: Any, ourtester: pytest.Pytester) -> None:
    run("--junitxml=junit.xml").assert_outcomes(passed=3)
    root = ET.parse(ourtester.path / "junit.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_model[4]"].iter("property")}
    assert float(props["infperf.median_s"]) > 0
    assert float(props["infperf.p90_s"]) >= float(props["infperf.median_s"])
    assert int(props["infperf.n"]) >= 10
    assert props["infperf.backend"] == "callable"
    assert float(props["infperf.throughput_per_s"]) > 0
    two = {p.get("name") for p in cases["test_two"].iter("property")}
    assert "infperf.median_s" in two and "infperf.other.median_s" in two


def test_terminal_table(run: Any) -> None:
    result = run(
        "-o", f"infperf_expert={expert(max_rounds=40)}"
    )  # n < 64 everywhere: the p90 footnote shows
    result.stdout.fnmatch_lines(
        [
            "*- infperf: 4 benchmarks -*",
            "benchmark*backend*median*p90*spread*items/s*n*mem",
            "test_suite.py::test_model[[]1[]]*callable*",
            "test_suite.py::test_two#other*callable*",
            "* p90 from fewer than 64 samples*",
        ]
    )
    # The interval of the median with -v (120 columns keep the rest).
    assert "95% CI of median" not in result.stdout.str()
    wide = run("-v", "-o", f"infperf_expert={expert(max_rounds=40)}")
    wide.stdout.fnmatch_lines(
        ["benchmark*backend*median*p90*95% CI of median*spread*items/s*n*mem"]
    )


def test_terminal_quiet(run: Any) -> None:
    result = run("-q")
    result.stdout.fnmatch_lines(["infperf: 4 benchmarks"])
    assert "95% CI of median" not in result.stdout.str()
    result = run("-qq")
    assert "infperf:" not in result.stdout.str()


def test_no_benchmarks_no_output_but_an_empty_results_file(ourtester: pytest.Pytester) -> None:
    """Nothing printed; the asked-for JSON is a valid, empty results document (a shard of a
    split run may hold no benchmark, and `infperf merge` reads every shard's file)."""
    from pytest_infperf.store.baselines import read_document

    ourtester.makepyfile("def test_plain():\n    pass\n")
    result = ourtester.runpytest("--perf-json=x.json")
    result.assert_outcomes(passed=1)
    assert "infperf:" not in result.stdout.str()
    assert read_document(ourtester.path / "x.json")["benchmarks"] == []
