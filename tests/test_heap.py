"""The expert heap setting: every process that measures runs on the same heap (measure/heap.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_infperf.measure import heap

from .conftest import AB_INI, ab_ini, expert, git, init_repo, load_json, stored_file

GLIBC = (
    (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    if hasattr(os, "confstr")
    else False
)

#: A perf test that says, for the process running it, whether glibc serves a 20 MiB request
#: with pages of its own mmap (the chunk's IS_MMAPPED bit): yes at glibc's start threshold
#: (128 KiB, and nothing freed so large before), no where heap=steady fixed it at
#: 32 MiB. Each process appends "pid mmapped" to $HEAP_LOG.
SUITE = """
import ctypes, os

def _mmapped(size=20 << 20):
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = (ctypes.c_size_t,)
    libc.free.argtypes = (ctypes.c_void_p,)
    p = libc.malloc(size)
    try:
        return bool(ctypes.c_size_t.from_address(p - ctypes.sizeof(ctypes.c_size_t)).value & 2)
    finally:
        libc.free(p)

def test_heap(infer_bench):
    with open(os.environ["HEAP_LOG"], "a") as fh:
        fh.write(f"{os.getpid()} {int(_mmapped())}\\n")
    infer_bench(lambda: None)
"""


def _log(path: Path) -> dict[int, bool]:
    lines = [line.split() for line in path.read_text().splitlines()]
    return {int(pid): bool(int(bit)) for pid, bit in lines}


@pytest.mark.skipif(not GLIBC, reason="the heap policy is glibc's (mallopt)")
@pytest.mark.parametrize(
    ("args", "mmapped", "state"),
    [((), False, "steady"), (("-o", f"infperf_expert={expert(heap='system')}"), True, "system")],
)
def test_the_policy_holds_in_the_measuring_process(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    mmapped: bool,
    state: str,
) -> None:
    log = pytester.path / "heap.log"
    monkeypatch.setenv("HEAP_LOG", str(log))
    pytester.makepyfile(test_suite=SUITE)
    pytester.makefile(".ini", pytest=AB_INI)
    result = pytester.runpytest_subprocess("--perf-json=out.json", *args)
    result.assert_outcomes(passed=1)
    assert list(_log(log).values()) == [mmapped]
    assert load_json(pytester.path / "out.json")["environment"]["soft"]["heap"] == state


@pytest.mark.slow
@pytest.mark.skipif(not GLIBC, reason="the heap policy is glibc's (mallopt)")
def test_interleaving_workers_take_the_controllers_policy(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, git_env: None
) -> None:
    """The base checkout's ini says system, the session says steady: every process of the
    comparison, this one and the workers in either checkout, runs steady."""
    log = pytester.path / "heap.log"
    monkeypatch.setenv("HEAP_LOG", str(log))
    pytester.makepyfile(test_suite=SUITE)
    pytester.makefile(".ini", pytest=ab_ini(heap="system"))
    (pytester.path / ".gitignore").write_text("heap.log\n*.json\n__pycache__/\n")
    init_repo(pytester.path)
    git(pytester.path, "checkout", "-q", "-b", "change")
    result = pytester.runpytest_subprocess(
        "--perf-ab=main", "-o", f"infperf_expert={expert(heap='steady')}"
    )
    result.assert_outcomes(passed=1)
    seen = _log(log)
    assert len(seen) >= 2  # this process and the base worker at least
    assert not any(seen.values()), seen


@pytest.mark.parametrize("value", ["fast", "1"])
def test_a_bad_heap_setting_says_what_to_give(pytester: pytest.Pytester, value: str) -> None:
    pytester.makepyfile("def test_x(infer_bench):\n    infer_bench(lambda: None)\n")
    pytester.makefile(".ini", pytest=f"[pytest]\ninfperf_expert = heap={value}\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*infperf_expert's heap='{value}': expected one of steady, system*"]
    )


def test_a_baseline_on_another_heap_is_said() -> None:
    assert heap.changed("steady", "steady") is None
    assert heap.changed("system", "system (not glibc)") is None  # steady on neither side
    before = heap.changed(None, "steady")  # a baseline saved before the heap setting existed
    assert before is not None and "glibc's own malloc thresholds" in before
    assert "settled interleaved, both sides on this run's heap" in before
    assert "heap system and this run on heap steady" in str(heap.changed("system", "steady"))
    assert "on heap steady and this run on heap system" in str(heap.changed("steady", "system"))


@pytest.mark.slow
@pytest.mark.skipif(not GLIBC, reason="the heap policy is glibc's (mallopt)")
def test_a_compare_against_a_baseline_on_another_heap_warns(
    pytester: pytest.Pytester, git_env: None
) -> None:
    pytester.makepyfile("def test_x(infer_bench):\n    infer_bench(lambda: None)\n")
    pytester.makefile(".ini", pytest=AB_INI)
    (pytester.path / ".gitignore").write_text("*.json\n__pycache__/\n")
    init_repo(pytester.path)
    # No baseline found: nothing to say about its heap.
    nothing = pytester.runpytest_subprocess("--perf-compare=main", "--perf-allow-missing")
    assert "measured on" not in nothing.stdout.str()
    system = ("-o", f"infperf_expert={expert(heap='system')}")
    pytester.runpytest_subprocess("--perf-save", *system).assert_outcomes(passed=1)
    # What is under test is the warning, not the verdict: a no-op's stored pass on this
    # noisy machine once read x1.59 (a results file: no settling), so it only warns.
    result = pytester.runpytest_subprocess(stored_file(pytester.path), "--perf-warn-only")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*the baseline was measured on heap system and this run on heap steady*"]
    )
    assert (
        "measured on heap"
        not in pytester.runpytest_subprocess(stored_file(pytester.path), *system).stdout.str()
    )
