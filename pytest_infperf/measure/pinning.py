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

Only the thread that times a block is pinned, for the block's time (:func:`pinned`, in
:func:`~pytest_infperf.measure.timing.take_block`; its CPUs are given back after), and only
for a benchmark that runs on one thread: torch's intra-op threads are
started by, and inherit the CPUs of, the thread that first runs a parallel region, so a
multi-threaded model would be squeezed onto one CPU.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from ..core.cpus import available


def single_threaded(env: Mapping[str, Any]) -> bool:
    """Whether a prepared benchmark runs on one thread, as far as its environment says:
    torch's ``num_threads`` or ONNX Runtime's ``intra_op_threads`` (0 is ORT's default: one
    per core), else torch's own setting where torch is loaded (a plain callable)."""
    for key in ("num_threads", "intra_op_threads"):
        if key in env:
            return bool(env[key] == 1)
    torch = sys.modules.get("torch")
    return torch is None or bool(torch.get_num_threads() == 1)


@contextlib.contextmanager
def pinned(cpu: int | None) -> Iterator[bool]:
    """The calling thread on ``cpu`` alone where it may run there (yields whether it is),
    and back on the CPUs it had when the block ends."""
    if cpu is None or cpu not in available():
        yield False
        return
    try:
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {cpu})
    except OSError:
        yield False
        return
    try:
        yield True
    finally:
        os.sched_setaffinity(0, before)
