"""Interleaved blocks net of the time another task held the CPU (measure/cpuwait.py) and
the judge's rule for when a quad may be taken so (judge/plan.net_of_waits). The neighbour
here is real: a busy process pinned to the core the sampling thread is pinned to."""

from __future__ import annotations

import hashlib
import os
import statistics
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from pytest_infperf.ab.interleave import _figures
from pytest_infperf.judge.plan import net_of_waits
from pytest_infperf.measure import cpuwait
from pytest_infperf.measure.timing import HostSampler, take_block

needs_schedstat = pytest.mark.skipif(
    not os.path.exists("/proc/thread-self/schedstat") or not hasattr(os, "sched_setaffinity"),
    reason="the kernel keeps no per-thread run-queue wait here",
)


def _work() -> int:
    """About a millisecond of CPU in one thread."""
    total = 0
    for i in range(30_000):
        total += i * i
    return total


@pytest.fixture
def one_core() -> Iterator[int]:
    """This thread (and so the sampling threads it starts) pinned to one core."""
    before = os.sched_getaffinity(0)
    core = min(before)
    os.sched_setaffinity(0, {core})
    try:
        yield core
    finally:
        os.sched_setaffinity(0, before)


def _share(block: tuple[list[float], dict[str, list[float]]], key: str) -> float:
    values, figures = block
    return sum(figures[key]) / sum(values)


@needs_schedstat
def test_a_neighbour_on_the_same_core_is_counted_and_taken_out(one_core: int) -> None:
    """With a busy process on the sampling thread's core, the samples that lost a scheduler
    slice to it carry the wait; net of it the samples are what the work takes alone."""
    sampler = HostSampler(_work)
    alone = take_block(sampler, 6, 4)
    code = f"import os; os.sched_setaffinity(0, {{{one_core}}}); print(flush=True)\nwhile 1: pass"
    busy = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert busy.stdout is not None
        busy.stdout.readline()  # it runs on our core from here on
        shared = take_block(sampler, 64, 4)
    finally:
        busy.kill()
        busy.communicate()
    assert _share(alone, cpuwait.WAIT) < 0.2
    assert _share(shared, cpuwait.WAIT) > 0.1
    assert _share(shared, cpuwait.OTHERS) < 0.05
    assert len(shared[1][cpuwait.WAIT]) == len(shared[0]) == 64
    assert net_of_waits("median", [alone, shared, shared, alone])
    # Means: a 3 ms scheduler slice lands whole in some samples and misses others.
    wall, net = statistics.mean(shared[0]), statistics.mean(_figures(shared, "median", True))
    assert net < 0.9 * wall
    assert net < 1.3 * statistics.mean(alone[0])


@needs_schedstat
def test_the_benchmarks_own_threads_keep_it_on_wall_time() -> None:
    """A thread of the process itself busy meanwhile: what it costs the timing thread is
    the benchmark's own (oversubscription), so the quad is judged on wall time."""
    stop = threading.Event()
    data = bytes(1 << 20)

    def spin() -> None:  # C work without the GIL, as an intra-op thread pool's
        while not stop.is_set():
            hashlib.sha256(data).digest()

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        # The call releases the GIL too, as a model's does: the threads run side by side.
        block = take_block(HostSampler(lambda: hashlib.sha256(data).digest()), 8, 4)
    finally:
        stop.set()
        spinner.join()
    assert _share(block, cpuwait.OTHERS) > 0.05
    assert not net_of_waits("median", [block] * 4)


def test_the_rule_needs_every_block_to_carry_its_wait() -> None:
    """A side that recorded no waits (a base checkout older than this, another OS) and
    the quad stays on wall time; a generation's metrics use their own waits."""
    net = (
        [0.10, 0.10],
        {
            "ttft": [0.02, 0.02],
            cpuwait.TTFT_WAIT: [0.01, 0.0],
            cpuwait.WAIT: [0.0, 0.0],
            cpuwait.OTHERS: [0.0, 0.001],
        },
    )
    old = ([0.10, 0.10], {"ttft": [0.02, 0.02]})
    assert net_of_waits("ttft", [net] * 4)
    assert not net_of_waits("tpot", [net] * 4)
    assert not net_of_waits("ttft", [net, old, old, net])
    assert _figures(net, "ttft", True) == pytest.approx([0.01, 0.02])
    assert _figures(net, "ttft") == [0.02, 0.02]


def test_nothing_is_read_outside_interleaved_blocks() -> None:
    """Plain runs and the stored pass read no counter (the token clock asks on every
    token): only take_block tracks."""
    assert cpuwait.wait_ns() is None
    _, figures = take_block(HostSampler(lambda: None), 2, 1)
    assert cpuwait.wait_ns() is None
    if os.path.exists("/proc/thread-self/schedstat"):
        assert set(figures) == {cpuwait.WAIT, cpuwait.OTHERS}
