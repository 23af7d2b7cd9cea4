"""Bad input, concurrent writers, interrupted saves: nothing stored is lost or half-written,
and every bad file gets a message that names it, never a traceback."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_infperf.core.fsutil import (
    TEMP_PREFIX,
    atomic_path,
    atomic_write_text,
    clean_stale_temps,
)
from pytest_infperf.core.results import document, dumps
from pytest_infperf.store.baselines import BaselineFileError, BaselineStore, read_document, validate

from .conftest import FAST_INI, init_repo, load_json, make_result, stored_file

SHA = "a" * 40
KEY = "linux-x86-64-cpu-py3.11-0123456789"


def entry(name: str, n: int = 5) -> dict[str, Any]:
    samples = [1e-3 * (1 + 0.01 * i) for i in range(n)]
    return make_result(samples, nodeid=f"test_m.py::{name}").to_json()


def valid_doc(names: tuple[str, ...] = ("test_a", "test_b")) -> dict[str, Any]:
    env = {"key": KEY, "hard": {"cpu_model": "x"}, "soft": {}}
    return json.loads(dumps(document([entry(n) for n in names], env, {"sha": SHA})))


# --- bad files -------------------------------------------------------------------------


def _mutate(path: Path, how: str) -> None:
    doc = valid_doc()
    text = dumps(doc)
    if how == "empty":
        path.write_text("")
    elif how == "truncated":
        path.write_text(text[: len(text) // 2])
    elif how == "binary":
        path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    elif how == "array":
        path.write_text("[1, 2, 3]")
    elif how == "no_version":
        path.write_text(json.dumps({k: v for k, v in doc.items() if k != "schema_version"}))
    elif how == "newer_version":
        path.write_text(json.dumps({**doc, "schema_version": 2}))
    elif how == "string_version":
        path.write_text(json.dumps({**doc, "schema_version": "1"}))
    elif how == "no_benchmarks":
        path.write_text(json.dumps({k: v for k, v in doc.items() if k != "benchmarks"}))
    elif how == "no_samples":
        del doc["benchmarks"][0]["samples"]
        path.write_text(json.dumps(doc))
    elif how == "string_sample":
        doc["benchmarks"][0]["samples"][2] = "fast"
        path.write_text(json.dumps(doc))
    elif how == "negative_sample":
        doc["benchmarks"][0]["samples"][0] = -1e-3
        path.write_text(json.dumps(doc))
    elif how == "zero_sample":
        doc["benchmarks"][0]["samples"][0] = 0
        path.write_text(json.dumps(doc))
    elif how == "nan":
        path.write_text(text.replace('"cv": ', '"cv": NaN, "x": ', 1))
    elif how == "infinity_literal":
        path.write_text(text.replace('"cv": ', '"cv": Infinity, "x": ', 1))
    elif how == "overflow":
        path.write_text(text.replace('"cv": ', '"cv": 1e400, "x": ', 1))
    elif how == "conflict":
        path.write_text(f"<<<<<<< HEAD\n{text}=======\n{text}>>>>>>> branch\n")
    elif how == "duplicate_keys":
        doc["benchmarks"].append(copy.deepcopy(doc["benchmarks"][0]))
        path.write_text(json.dumps(doc))
    elif how == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif how == "foreign":  # a pytest-benchmark file
        path.write_text(
            json.dumps(
                {
                    "machine_info": {},
                    "commit_info": {},
                    "benchmarks": [],
                    "datetime": "2026-01-01",
                    "version": "5.1.0",
                }
            )
        )
    elif how == "bad_env_key":
        doc["environment"]["key"] = "../../etc"
        path.write_text(json.dumps(doc))
    elif how == "huge":
        path.write_text(text + " " * (2 * 1024 * 1024))
    elif how == "directory":
        path.mkdir()
    else:  # pragma: no cover
        raise AssertionError(how)


BAD_FILES = {
    "empty": "is empty (an interrupted write or a truncated checkout?)",
    "truncated": "is not valid JSON (* at line * column *; truncated or edited by hand?)",
    "binary": "is not UTF-8 text (byte *)",
    "array": "is not a pytest-infperf results document (top level is a list*",
    "no_version": "is not a pytest-infperf results document (schema_version is None, expected 1)",
    "newer_version": "was written by a newer pytest-infperf (schema version 2; this one reads "
    "version 1). Upgrade pytest-infperf*",
    "string_version": "is not a pytest-infperf results document (schema_version is '1'*",
    "no_benchmarks": "does not match the results schema at (top level): 'benchmarks' is a "
    "required property*",
    "no_samples": "does not match the results schema at benchmarks/0: 'samples' is a required*",
    "string_sample": "does not match the results schema at benchmarks/0/samples/2: 'fast' is "
    "not of type 'number'*",
    "negative_sample": "does not match the results schema at benchmarks/0/samples/0*",
    "zero_sample": "does not match the results schema at benchmarks/0/samples/0: 0 is less "
    "than or equal to the minimum of 0*",
    "nan": "contains the non-standard JSON number NaN*",
    "infinity_literal": "contains the non-standard JSON number Infinity*",
    "overflow": "contains the number 1e400, which overflows to infinity*",
    "conflict": "contains git merge-conflict markers*",
    "duplicate_keys": "lists the same benchmark twice*",
    "deep": "is nested too deeply to be a results document*",
    "foreign": "is not a pytest-infperf results document (schema_version is None, expected 1)*",
    "bad_env_key": "does not match the results schema at environment/key*",
    "huge": "is * MiB, over the 1 MiB limit for baseline files, so it was not read*",
    "directory": "is not a regular file*",
}


@pytest.mark.parametrize("how", sorted(BAD_FILES))
def test_bad_file_is_named_by_the_loader(tmp_path: Path, how: str) -> None:
    import fnmatch

    path = tmp_path / f"{SHA}.json"
    _mutate(path, how)
    with pytest.raises(BaselineFileError) as info:
        read_document(path, max_bytes=1024 * 1024)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert fnmatch.fnmatch(message, f"*{BAD_FILES[how]}*"), message


@pytest.mark.parametrize("how", ["truncated", "newer_version", "zero_sample", "conflict"])
def test_bad_file_through_the_plugin_is_a_usage_error(pytester: pytest.Pytester, how: str) -> None:
    pytester.makefile(".ini", pytest=FAST_INI)
    pytester.makepyfile("def test_a(infer_bench):\n    infer_bench(lambda: None)\n")
    path = pytester.path / "old.json"
    _mutate(path, how)
    result = pytester.runpytest("--perf-compare=old.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --perf-compare: old.json: *"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_the_doc_tally_lists_every_case() -> None:
    """docs/RELIABILITY.md keeps the table of bad inputs and what users see."""
    text = (Path(__file__).parents[1] / "docs" / "RELIABILITY.md").read_text()
    for how in BAD_FILES:
        assert f"`{how}`" in text, how


# --- the loader fed random and mutated documents ----------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_loader_on_random_documents(value: Any) -> None:
    try:
        validate(value, "random.json")
    except BaselineFileError:
        pass


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


VALID = valid_doc()
PATHS = _paths(VALID)[1:]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATHS), json_values, st.booleans())
@example(("benchmarks", 1, "stats", "n"), 0.0, False)  # JSON Schema took 0.0 for an integer
def test_loader_on_mutated_documents(path: tuple[Any, ...], value: Any, delete: bool) -> None:
    doc = copy.deepcopy(VALID)
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    try:
        out = validate(doc, "mutated.json")
    except BaselineFileError as exc:
        assert str(exc).startswith("mutated.json: ")
        return
    # whatever is accepted is usable: every benchmark has positive samples and stats
    for bench in out["benchmarks"]:
        assert all(s > 0 for s in bench["samples"])
        assert isinstance(bench["stats"]["n"], int)


# --- writes ----------------------------------------------------------------------------

SAVER = """
import sys
from pytest_infperf.store.baselines import BaselineStore
from tests.test_reliability import KEY, SHA, entry
names = sys.argv[2].split(",")
BaselineStore(sys.argv[1]).save(KEY, SHA, [entry(n) for n in names],
                                {{"key": KEY, "hard": {{}}, "soft": {{}}}}, {{"sha": SHA}})
"""


def _spawn_saver(root: Path, names: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", SAVER.format(), str(root), ",".join(names)],
        cwd=Path(__file__).parents[1],
    )


@pytest.mark.slow
def test_concurrent_savers_lose_nothing(tmp_path: Path) -> None:
    root = tmp_path / "baselines"
    procs = [_spawn_saver(root, [f"test_{w}_{i}" for i in range(5)]) for w in range(8)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 8
    doc = read_document(root / KEY / f"{SHA}.json")
    assert len(doc["benchmarks"]) == 40
    assert not [p for p in (root / KEY).iterdir() if p.name.startswith(TEMP_PREFIX)]


@pytest.mark.slow
def test_concurrent_pytest_savers_lose_nothing(pytester: pytest.Pytester, git_env: None) -> None:
    pytester.makefile(".ini", pytest=FAST_INI)
    pytester.makepyfile(
        test_many=textwrap.dedent(
            """
        import pytest

        @pytest.mark.parametrize("i", range(8))
        def test_b(infer_bench, i):
            infer_bench(lambda: None, max_time=0.05)
        """
        )
    )
    (pytester.path / ".gitignore").write_text("baselines/\n")
    init_repo(pytester.path, "suite")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--perf-save",
                f"test_many.py::test_b[{i}]",
            ],
            cwd=pytester.path,
            stdout=subprocess.DEVNULL,
        )
        for i in range(8)
    ]
    assert [p.wait(timeout=180) for p in procs] == [0] * 8
    (path,) = (pytester.path / "baselines").glob("*/*.json")
    assert len(load_json(path)["benchmarks"]) == 8


KILLED_WRITER = """
import sys
from pathlib import Path
from pytest_infperf.core.fsutil import atomic_write_text
path = Path(sys.argv[1])
i = 0
while True:
    i += 1
    atomic_write_text(path, '{"gen": %d, "pad": "%s"}' % (i, "x" * 3_000_000))
"""


def test_sigkill_mid_write_keeps_the_previous_file(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    atomic_write_text(path, '{"gen": 0}')
    for trial in range(5):
        proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path)])
        time.sleep(0.3 + 0.07 * trial)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert json.loads(path.read_text())["gen"] >= 0  # complete, old or new
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(TEMP_PREFIX)]
    assert clean_stale_temps(tmp_path) == len(leftovers)  # dead writers' files go at once
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]


def test_stray_temp_files_do_not_look_like_baselines(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    (tmp_path / KEY).mkdir()
    (tmp_path / KEY / f"{TEMP_PREFIX}99999999-abc.tmp").write_text("{")
    assert store.commits(KEY) == []
    store.save(KEY, SHA, [entry("test_a")], {"key": KEY, "hard": {}, "soft": {}}, {"sha": SHA})
    assert sorted(p.name for p in (tmp_path / KEY).iterdir()) == [f"{SHA}.json"]


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_written_files_get_the_mode_an_ordinary_write_would(
    tmp_path: Path, umask: int, mode: int
) -> None:
    """Baselines, results and reports are read by a team: the temp file + rename must not
    leave them 0600 (mkstemp's mode)."""
    old = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "a.json", "{}")
        (tmp_path / "plain.json").write_text("{}")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == mode
    assert (tmp_path / "plain.json").stat().st_mode & 0o777 == mode


def test_a_writer_by_path_replaces_the_file_whole_or_not_at_all(tmp_path: Path) -> None:
    """``atomic_path`` (an ONNX export writes by file name): the old file survives a writer
    that fails part way, no temp file is left, and a finished write gets the usual mode."""
    target = tmp_path / "model.onnx"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_path(target, ".onnx") as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("the exporter failed")
    assert target.read_bytes() == b"old" and sorted(tmp_path.iterdir()) == [target]
    old = os.umask(0o022)
    try:
        with atomic_path(target, ".onnx") as tmp:
            assert tmp.parent == tmp_path and tmp.name.startswith(TEMP_PREFIX)
            tmp.write_bytes(b"new")
    finally:
        os.umask(old)
    assert target.read_bytes() == b"new" and sorted(tmp_path.iterdir()) == [target]
    assert target.stat().st_mode & 0o777 == 0o644


def test_a_real_run_writes_readable_files(pytester: pytest.Pytester, git_env: None) -> None:
    pytester.makefile(".ini", pytest=FAST_INI)
    pytester.makepyfile("def test_a(infer_bench):\n    infer_bench(lambda: None)\n")
    init_repo(pytester.path)
    old = os.umask(0o022)
    try:
        result = pytester.runpytest_subprocess(
            "--perf-save", "--perf-json=out.json", "--perf-markdown=out.md"
        )
    finally:
        os.umask(old)
    assert result.ret == 0
    written = [pytester.path / "out.json", pytester.path / "out.md"]
    written += list((pytester.path / "baselines").glob("*/*.json"))
    assert len(written) == 3
    assert {oct(p.stat().st_mode & 0o777) for p in written} == {"0o644"}


# --- names and paths -------------------------------------------------------------------


def test_odd_test_ids_never_become_paths(pytester: pytest.Pytester, git_env: None) -> None:
    pytester.makefile(".ini", pytest=FAST_INI)
    pytester.makepyfile(
        test_odd=textwrap.dedent(
            """
        import pytest

        @pytest.mark.parametrize("name", ["../../escape", "/etc/passwd", "ünï cödé ☃",
                                          "a\\\\b", "con", "x" * 300])
        def test_odd(infer_bench, name):
            infer_bench(lambda: None, name=name)
        """
        )
    )
    init_repo(pytester.path, "suite")
    pytester.runpytest("--perf-save").assert_outcomes(passed=6)
    files = sorted(p for p in (pytester.path / "baselines").rglob("*") if p.is_file())
    assert len(files) == 1 and files[0].parent.parent == pytester.path / "baselines"
    assert not (pytester.path.parent / "escape").exists()
    # Paths are what this checks, not verdicts: a ~50 ns lambda compared with itself on a
    # shared machine may come out either way, so the comparison only reports, from the
    # stored pass alone (settling its inconclusive ones interleaved took 9-26 s).
    result = pytester.runpytest(
        stored_file(pytester.path), "--perf-json=out.json", "--perf-warn-only"
    )
    result.assert_outcomes(passed=6)
    names = {b["name"] for b in load_json(pytester.path / "out.json")["benchmarks"]}
    assert "../../escape" in names and "ünï cödé ☃" in names


def test_store_refuses_keys_and_shas_that_are_paths(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    for key, sha in [("../x", SHA), (KEY, "../" + "a" * 37), ("/abs", SHA), (KEY, "HEAD")]:
        with pytest.raises(ValueError, match="invalid"):
            store.path_for(key, sha)


# --- failures while measuring ----------------------------------------------------------


def test_failing_models_fail_alone(pytester: pytest.Pytester, git_env: None) -> None:
    """A model that raises, runs out of memory or returns NaN fails its own test; the other
    benchmarks, the JSON, the JUnit file and the baseline save all complete."""
    pytester.makefile(".ini", pytest=FAST_INI)
    pytester.makepyfile(
        test_mixed=textwrap.dedent(
            """
        import math

        def test_ok(infer_bench):
            infer_bench(lambda: None)

        def test_raises(infer_bench):
            def model():
                raise RuntimeError("CUDA error: device-side assert triggered")
            infer_bench(model)

        def test_oom(infer_bench):
            def model():
                raise MemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
            infer_bench(model)

        def test_nan(infer_bench):
            infer_bench(lambda: math.nan)

        def test_ok_too(infer_bench):
            infer_bench(lambda: 1 + 1)
        """
        )
    )
    (pytester.path / ".gitignore").write_text("*.json\n*.xml\nbaselines/\n")
    init_repo(pytester.path, "suite")
    result = pytester.runpytest("--perf-save", "--perf-json=out.json", "--junitxml=j.xml")
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines(
        [
            "*RuntimeError: CUDA error: device-side assert triggered",
            "*MemoryError: CUDA out of memory. Tried to allocate 20.00 GiB",
            "*BenchmarkError: the model's output contains NaN*",
        ],
        consecutive=False,
    )
    keys = sorted(b["key"] for b in load_json(pytester.path / "out.json")["benchmarks"])
    assert keys == ["test_mixed.py::test_ok", "test_mixed.py::test_ok_too"]
    (path,) = (pytester.path / "baselines").glob("*/*.json")
    assert len(load_json(path)["benchmarks"]) == 2
    assert (pytester.path / "j.xml").read_text().count("<testcase") == 5
