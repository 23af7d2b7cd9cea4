"""The expert pin setting: both sides of an interleaved comparison time their blocks on one CPU."""

from __future__ import annotations

import os
import sys

import pytest

from pytest_infperf.core import cpus
from pytest_infperf.measure import pinning
from pytest_infperf.measure.timing import HostSampler, take_block

LINUX = hasattr(os, "sched_setaffinity")
CPUS = frozenset(os.sched_getaffinity(0)) if LINUX else frozenset()


def test_the_cpu_a_setting_names() -> None:
    assert cpus.resolve("off") is None
    assert cpus.resolve("auto") == (max(CPUS) if len(CPUS) >= 2 else None)
    if CPUS:
        assert cpus.resolve(str(min(CPUS))) == min(CPUS)
        with pytest.raises(ValueError, match=r"may run on CPUs .* only"):
            cpus.resolve(str(max(CPUS) + 1000))
    assert cpus.ranges(frozenset({0, 1, 2, 3, 6, 8, 9})) == "0-3,6,8-9"


@pytest.mark.skipif(not LINUX, reason="CPU affinity is Linux's (os.sched_setaffinity)")
def test_a_block_runs_on_the_cpu_and_leaves_the_caller_alone() -> None:
    seen: list[frozenset[int]] = []
    sampler = HostSampler(lambda: seen.append(frozenset(os.sched_getaffinity(0))))
    cpu = max(CPUS)
    take_block(sampler, 2, 1, cpu=cpu)
    assert seen and set(seen) == {frozenset({cpu})}
    assert frozenset(os.sched_getaffinity(0)) == CPUS  # given back after the block
    seen.clear()
    take_block(sampler, 2, 1)  # unpinned: wherever this process may run
    assert set(seen) == {CPUS}


def test_only_one_thread_benchmarks_are_pinned() -> None:
    assert pinning.single_threaded({"backend": "torch", "num_threads": 1})
    assert not pinning.single_threaded({"backend": "torch", "num_threads": 4})
    # ONNX Runtime's 0 is its default: a thread per core
    assert not pinning.single_threaded({"backend": "onnxruntime", "intra_op_threads": 0})
    assert pinning.single_threaded({"backend": "onnxruntime", "intra_op_threads": 1})
    torch = sys.modules.get("torch")
    callable_env = {"backend": "callable"}
    assert pinning.single_threaded(callable_env) == (torch is None or torch.get_num_threads() == 1)
    with pinning.pinned(None) as done:
        assert not done


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "infperf_expert=pin=sometimes"], "*pin='sometimes': expected auto, off*"),
        (["-o", "infperf_expert=pin=99999"], "*pin='99999': this process may run on*"),
    ],
)
def test_a_bad_pin_says_what_to_give(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    if "99999" in args[1] and not LINUX:
        pytest.skip("no CPU affinity to check a CPU number against")
    pytester.makepyfile("def test_x(infer_bench):\n    infer_bench(lambda: None)\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
