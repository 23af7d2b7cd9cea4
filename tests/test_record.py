"""The typed run record: what a result's ``extra`` may hold is declared once
(``core/record.py``), the schema's ``$defs/extra`` is generated from it, and the documents
the previous version wrote still load and read the same."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_infperf.core import outcome, record
from pytest_infperf.core.names import FailureKind
from pytest_infperf.core.results import BenchmarkResult, Verdict, verdict_counts, verdict_of
from pytest_infperf.report import comment, html, markdown
from pytest_infperf.store.baselines import validate as validate_document

from .conftest import SCHEMA

DATA = Path(__file__).parent / "data"
#: Written by pytest-infperf 0.2.0 (before the typed record) in real runs: two benchmarks,
#: a budget and a work limit, measured with --perf-ab and with --perf-compare (settled).
OLD = ("results-0.2.0-ab.json", "results-0.2.0-compare.json")


def test_the_shipped_schema_is_the_generated_one(tmp_path: Path) -> None:
    copy = tmp_path / "schema.json"
    shutil.copy(SCHEMA, copy)
    assert not record.write_schema(copy), (
        "the schema's $defs/extra is not generated from core/record.py: run "
        "`python -m pytest_infperf.core.record`"
    )
    shipped = json.loads(SCHEMA.read_text())
    assert shipped["$defs"]["benchmark"]["properties"]["extra"] == {"$ref": "#/$defs/extra"}


def test_a_stale_schema_is_rewritten(tmp_path: Path) -> None:
    stale = json.loads(SCHEMA.read_text())
    stale["$defs"]["extra"] = {"type": "object"}
    copy = tmp_path / "schema.json"
    copy.write_text(json.dumps(stale))
    assert record.write_schema(copy) is True
    assert json.loads(copy.read_text())["$defs"]["extra"] == record.extra_schema()
    assert record.write_schema(copy) is False


def test_a_type_the_generator_does_not_know_is_named() -> None:
    with pytest.raises(TypeError, match=r"no JSON Schema for .*set.*record\.py"):
        record._schema_of(set[int])


def test_every_declared_key_has_a_schema() -> None:
    schema = record.extra_schema()
    keys = record.ResultExtra.__optional_keys__ | record.ResultExtra.__required_keys__
    assert set(schema["properties"]) == keys
    # No key is required (older documents wrote fewer); each is typed where present.
    assert "required" not in json.dumps(schema)
    assert schema["properties"]["budget"]["properties"]["passed"] == {"type": "boolean"}
    region = schema["properties"]["gpu_region"]["properties"]
    assert region["throttle_reasons"] == {
        "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]
    }
    assert region["sm_clock_mhz"] == {"type": "number"}
    assert schema["properties"]["work_gate"]["properties"]["change"] == {"type": ["number", "null"]}


def test_an_undeclared_key_is_refused_not_written() -> None:
    assert record.declared({"recompiles": 2, "host_bound_ratio": 0.5}) == {
        "recompiles": 2,
        "host_bound_ratio": 0.5,
    }
    with pytest.raises(KeyError, match=r"undeclared extra keys \['mystery'\].*core/record.py"):
        record.declared({"recompiles": 1, "mystery": 3})


@pytest.mark.parametrize(
    ("samples", "extra", "expected"),
    [
        ([1.0], {}, None),
        # A settling's record is read as it is.
        (
            [1.0],
            {"settle": {"head_samples": [2.0], "base_samples": [3.0], "pairs": []}},
            ([2.0], [3.0]),
        ),
        # --perf-ab's: the result's own samples are the head's.
        ([1.0, 1.1], {"base_samples": [0.9], "ab": {"origins": {}}}, ([1.0, 1.1], [0.9])),
        # A settle with no base samples is no interleaved record; an empty base neither.
        ([1.0], {"settle": {"head_samples": [2.0], "base_samples": []}}, None),
        ([1.0], {"base_samples": []}, None),
        # Hand-made or hostile documents: wrong types read as nothing.
        ([1.0], {"settle": "x", "base_samples": "y"}, None),
    ],
)
def test_interleaved_reads_both_shapes_as_one(
    samples: list[float], extra: dict[str, Any], expected: tuple[list[float], list[float]] | None
) -> None:
    got = record.interleaved(samples, extra)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert (got["head_samples"], got["base_samples"]) == expected


@pytest.mark.parametrize(
    ("extra", "budget", "work"),
    [
        ({}, False, False),
        ({"budget": {"max_median_ms": 1, "passed": True}}, False, False),
        ({"budget": {"max_median_ms": 1, "passed": False}}, True, False),
        ({"work_gate": {"max_work_increase": 0.1, "change": 0.3, "passed": False}}, False, True),
        # Accepted by a Perf-Accept rule: recorded, not a failure.
        (
            {
                "work_gate": {
                    "max_work_increase": 0.1,
                    "change": 0.3,
                    "passed": False,
                    "accepted": {"pattern": "*"},
                }
            },
            False,
            False,
        ),
        # Not checked (None) is not failed.
        ({"work_gate": {"max_work_increase": 0.1, "change": None, "passed": None}}, False, False),
        ({"budget": "bad", "work_gate": 3}, False, False),
    ],
)
def test_the_gates_records_read_once(extra: dict[str, Any], budget: bool, work: bool) -> None:
    assert (record.budget_failed(extra) is not None) is budget
    assert (record.work_failed(extra) is not None) is work


@pytest.mark.parametrize(
    ("entry", "verdict"),
    [
        ({}, None),
        ({"comparison": None}, None),
        ({"comparison": {"verdict": "regression"}}, Verdict.REGRESSION),
        ({"comparison": {"verdict": "no-regression"}}, Verdict.NO_REGRESSION),
        ({"comparison": {"verdict": "from-the-future"}}, None),
        ({"comparison": "regression"}, None),
    ],
)
def test_a_documents_verdict_is_read_typed(entry: dict[str, Any], verdict: Verdict | None) -> None:
    assert verdict_of(entry) is verdict


@pytest.mark.parametrize("name", OLD)
def test_the_previous_versions_documents_load_and_read_the_same(name: str) -> None:
    path = DATA / name
    doc = validate_document(json.loads(path.read_text()), path, full=True)
    results = [BenchmarkResult.from_json(b) for b in doc["benchmarks"]]
    assert [r.key for r in results] == [
        "tests/test_old.py::test_callable",
        "tests/test_old.py::test_torch",
    ]
    for entry, result in zip(doc["benchmarks"], results, strict=True):
        both = record.interleaved(result.samples, result.extra)
        assert both is not None and both["base_samples"], "the interleaved samples are read"
        drawn = html._drawn_samples(entry, None)
        assert drawn[2] is True and drawn[1] == both["base_samples"]
    assert results[0].extra["budget"]["passed"] is True
    assert "max_work_increase" in results[1].extra["work_gate"]
    assert sum(verdict_counts(doc["benchmarks"]).values()) == 2
    assert outcome.incomplete(doc) is None
    assert outcome.failures(doc) == []
    assert markdown.render(results).strip()
    assert comment.body(doc)[0].strip()


def test_a_settling_recorded_without_its_samples_still_loads(tmp_path: Path) -> None:
    """0.2.0 wrote a benchmark interleaved at once with ``settle`` holding its pairs only,
    and earlier GPU regions lacked ``unseen_processes``: such documents load (no key of
    ``extra`` is required), and a wrong type is still refused."""
    path = DATA / OLD[1]
    doc = json.loads(path.read_text())
    entry = doc["benchmarks"][0]
    entry["extra"]["settle"] = {"pairs": entry["extra"]["settle"]["pairs"]}
    entry["extra"]["gpu_region"] = {"throttle_reasons": None, "other_processes": []}
    validate_document(doc, path, full=True)
    assert record.interleaved(entry["samples"], entry["extra"]) is None
    entry["extra"]["settle"] = {"pairs": "not a list"}
    with pytest.raises(Exception, match="extra/settle/pairs"):
        validate_document(doc, path, full=True)


def test_hostile_sample_arrays_read_as_their_numbers() -> None:
    extra = {"settle": {"head_samples": [1.0, "x", None, 2], "base_samples": [True, 3.0]}}
    got = record.interleaved([1.0], extra)
    assert got is not None
    assert (got["head_samples"], got["base_samples"]) == ([1.0, 2.0], [3.0])
    assert record.numbers([float("nan"), 1, "2", [3]]) == [1.0]


def test_every_backends_figures_sort_into_extra_and_memory() -> None:
    """What a CUDA torch backend's ``end_timed`` returns (its memory figures, enqueue and
    device times, the region watch's record) sorts into the result's memory and a declared
    ``extra``, for a first measurement and a re-measurement alike (both go through
    ``figures_of``): an undeclared figure would be a KeyError on a GPU runner only."""
    from pytest_infperf.measure.call import figures_of
    from pytest_infperf.measure.timing import Measurement

    cuda = {
        "cuda_max_allocated_bytes": 10,
        "cuda_max_reserved_bytes": 20,
        "enqueue_samples": [0.001],
        "device_samples": [0.002],
        "host_bound_ratio": 0.5,
        "recompiles": 0,
        "gpu_region": {"throttle_reasons": None, "other_processes": [], "unseen_processes": []},
    }
    m = Measurement([0.002], [], None, 1, {}, {"rss_growth_bytes": 1}, cuda)
    extra, memory = figures_of(m)
    assert memory == {
        "rss_growth_bytes": 1,
        "cuda_max_allocated_bytes": 10,
        "cuda_max_reserved_bytes": 20,
    }
    assert set(extra) == {
        "enqueue_samples",
        "device_samples",
        "host_bound_ratio",
        "recompiles",
        "gpu_region",
    }
    assert m.backend_extra == cuda  # the measurement itself is left as it was


def _f(kind: str) -> outcome.Failure:
    return outcome.Failure(FailureKind(kind), kind)


@pytest.mark.parametrize(
    ("kinds", "warn_only", "shard", "fails"),
    [
        ((), False, False, False),
        # A benchmark's failures failed its test: pytest's exit status carries them.
        (("regression", "budget", "work", "test"), False, False, False),
        (("compared-nothing",), False, False, True),
        (("compared-nothing",), False, True, True),  # a shard compared nothing: it fails
        (("measured-nothing",), False, False, True),
        (("measured-nothing",), False, True, False),  # the merge decides over every shard
        (("measured-nothing", "compared-nothing"), False, True, True),
        (("compared-nothing",), True, False, False),  # --perf-warn-only fails nothing
        (("measured-nothing",), True, False, False),
    ],
)
def test_what_fails_the_session_is_one_rule(
    kinds: tuple[str, ...], warn_only: bool, shard: bool, fails: bool
) -> None:
    found = [_f(k) for k in kinds]
    assert outcome.fails_session(found, warn_only=warn_only, shard=shard) is fails


@pytest.mark.parametrize(
    ("doc", "kinds"),
    [
        ({}, []),
        ({"compared_nothing": "no baselines"}, ["compared-nothing"]),
        ({"measured_nothing": "none"}, ["measured-nothing"]),
        ({"compared_nothing": ""}, []),
        (
            {
                "benchmarks": [
                    {"key": "a", "nodeid": "a", "comparison": {"verdict": "regression"}},
                    {"key": "b", "nodeid": "b", "comparison": {"verdict": "accepted"}},
                    {
                        "key": "c",
                        "nodeid": "c",
                        "extra": {"budget": {"max_median_ms": 1, "passed": False}},
                    },
                ],
                "run": {"failed": ["a", "c", "d"], "tests_failed": 5},
            },
            ["regression", "budget", "test", "test"],
        ),
    ],
)
def test_failures_read_from_the_record(doc: dict[str, Any], kinds: list[str]) -> None:
    found = outcome.failures(doc)
    assert [f.kind for f in found] == kinds
    if kinds[-2:] == ["test", "test"]:
        assert [f.count for f in found][-2:] == [1, 2]  # "d", and two unnamed


def test_each_failure_says_what_failed() -> None:
    doc = {
        "benchmarks": [
            {"key": "r", "nodeid": "r", "comparison": {"verdict": "regression"}},
            {"key": "b", "nodeid": "b", "extra": {"budget": {"max_median_ms": 2, "passed": False}}},
            {
                "key": "w",
                "nodeid": "w",
                "extra": {"work_gate": {"max_work_increase": 0.1, "change": 0.3, "passed": False}},
            },
            {
                "key": "u",
                "nodeid": "u",
                "extra": {"work_gate": {"max_work_increase": 0.1, "change": None, "passed": False}},
            },
        ],
        "run": {"failed": ["r", "b", "w", "t"], "tests_failed": 6},
        "compared_nothing": "no baselines",
        "measured_nothing": "no tests",
    }
    assert [str(f) for f in outcome.failures(doc)] == [
        "regression: r",
        "budget exceeded: b (max_median_ms=2)",
        "more work: w (+30.0%, max_work_increase=0.1)",
        "more work: u (max_work_increase=0.1)",
        "failed test: t",
        "2 more failed tests",
        "compared nothing: no baselines",
        "measured nothing: no tests",
    ]
    assert [f.kind for f in outcome.failures(doc)] == [
        "regression",
        "budget",
        "work",
        "work",
        "test",
        "test",
        "compared-nothing",
        "measured-nothing",
    ]
    one_more = {"run": {"failed": [], "tests_failed": 1}}
    assert [str(f) for f in outcome.failures(one_more)] == ["1 more failed test"]
    assert outcome.failures({"run": "garbled"}) == []


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ({}, outcome.UNMARKED),
        ({"run": "x"}, outcome.UNMARKED),
        ({"run": {"complete": True}}, None),
        ({"run": {"complete": "yes"}}, "pytest ended with exit status None"),
        ({"run": {"complete": False, "incomplete": "interrupted"}}, "interrupted"),
        ({"run": {"complete": False, "exitstatus": 2}}, "pytest ended with exit status 2"),
    ],
)
def test_only_a_run_marked_complete_is_complete(doc: dict[str, Any], why: str | None) -> None:
    assert outcome.incomplete(doc) == why


def test_the_interleaved_record_keeps_its_pairs_and_proof() -> None:
    pairs = [{"head_process": 1}]
    settled = {"settle": {"head_samples": [1.0], "base_samples": [2.0], "pairs": pairs}}
    got = record.interleaved([9.0], settled)
    assert got is not None and got["pairs"] == pairs and got["head_samples"] == [1.0]
    ab = {"base_samples": [2.0], "ab": {"pairs": pairs, "origins": {"head": {}}}}
    got = record.interleaved([1.0, 3.0], ab)
    assert got is not None
    assert got == {
        "pairs": pairs,
        "origins": {"head": {}},
        "head_samples": [1.0, 3.0],
        "base_samples": [2.0],
    }
    assert record.interleaved([1.0], {"base_samples": [2.0], "ab": "x"}) == {
        "head_samples": [1.0],
        "base_samples": [2.0],
    }
