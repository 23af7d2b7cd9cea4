"""One CPU for both sides of an interleaved comparison.

An interleaved comparison runs one side at a time, so its blocks never need two CPUs; but
left to the scheduler, each process's timing thread runs on whichever CPU it is woken on.
On this project's 2-core VM the CPUs do not run alike from one second to the next (another
tenant on a sibling hyperthread, interrupts), so a head and a base process that sat on
different CPUs for a process pair's few seconds differed by that. With the timing thread
of both sides pinned to the same CPU, a tiny Llama's process pairs (fresh workers, eight
ABBA quads of one generation a block) spread half as much: TTFT sd of the pair means 2.9%
against 6.1%, the pairs' own errors 3.4% against 5.5%; TPOT 4.6% against 5.5% and 2.7%
against 5.0% (``python benchmarks/generation_offset.py --pairs 16 --variants
plain,plain-core0``, docs/MEASURED.md, "One CPU for both sides").

Only the sampling thread of a block is pinned (:func:`pin_this_thread`, on the fresh thread
:func:`~pytest_infperf.measure.timing.take_block` starts for it, which ends with the
block), and only for a benchmark that runs on one thread: torch's intra-op threads are
started by, and inherit the CPUs of, the thread that first runs a parallel region, so a
multi-threaded model would be squeezed onto one CPU.

A multi-threaded benchmark whose library pins its own worker threads gets the CPUs that
library left for its caller (:data:`CALLER`): ONNX Runtime at its default threading starts
one intra-op thread per physical core but the first and pins each to its core, expecting
the calling thread on the first. Left to the scheduler, a block's fresh thread may start on
a pinned worker's CPU and share it with that worker until it is moved, so one block ran at
a two-thread speed and the next at a one-thread speed.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from typing import Any

from ..core.cpus import available

#: The ``cpu`` that asks for the CPUs a benchmark's library left for its calling thread
#: (the CPUs none of its pinned threads may run on): an int, so that it travels to a worker
#: as a CPU number does.
CALLER = -1


def single_threaded(env: Mapping[str, Any]) -> bool:
    """Whether a prepared benchmark runs on one thread, as far as its environment says:
    torch's ``num_threads`` or ONNX Runtime's ``intra_op_threads`` (0 is ORT's default: one
    per core), else torch's own setting where torch is loaded (a plain callable)."""
    for key in ("num_threads", "intra_op_threads"):
        if key in env:
            return bool(env[key] == 1)
    torch = sys.modules.get("torch")
    return torch is None or bool(torch.get_num_threads() == 1)


def pin_this_thread(cpu: int | None) -> bool:
    """Pin the calling thread to ``cpu`` where it may run there (:data:`CALLER`: to the CPUs
    the process's pinned threads left it, where they left some); whether it did."""
    cpus = caller_cpus() if cpu == CALLER else frozenset({cpu}) & available()
    if not cpus:
        return False
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:
        return False
    return True


def caller_cpus() -> frozenset[int]:
    """The CPUs this thread may run on that no other thread of this process is pinned to
    (one pinned to some but not all of them), where that leaves some and takes some; else
    empty (nothing pinned, or pinned everywhere: the scheduler's choice is as good)."""
    mine = available()
    taken: set[int] = set()
    me = threading.get_native_id()
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return frozenset()
    for task in tasks:
        if not task.isdigit() or int(task) == me:
            continue
        try:
            theirs = frozenset(os.sched_getaffinity(int(task)))
        except OSError:  # the thread ended while we looked
            continue
        if theirs < mine:
            taken |= theirs
    left = mine - taken
    return left if taken and left else frozenset()
