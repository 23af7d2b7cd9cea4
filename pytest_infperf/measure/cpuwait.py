"""How long the timing thread waited for a CPU that another task held.

On a shared runner a busy neighbour takes the CPU away from the benchmark for whole
scheduler slices. The wall-clock time of a block then says as much about the neighbour as
about the code: with a busy loop on each of two cores, a tiny decoder's time to first
token moved by x0.55 to x1.8 from one generation to the next, and a process pair's quads
gave an interval of +-20% after 8 quads (docs/MEASURED.md, "Waiting for the CPU"). Linux
counts that time per thread: the second field of ``/proc/thread-self/schedstat`` is the
time the thread spent runnable but not running (``run_delay``), updated each time it gets
a CPU back. Wall time less that wait is what the block would have taken had nothing else
wanted the CPU; time the thread spent blocked (a GPU sync, I/O, a lock) stays in it.

This module only reads the counters; whether a comparison may use them is the judge's
decision (:func:`pytest_infperf.judge.plan.net_of_waits`): a wait caused by the
benchmark's own threads (oversubscription) is part of its speed and must not be removed,
so the other threads' CPU time is recorded with every sample.

Off Linux, or where the kernel keeps no schedstat, nothing is recorded and comparisons use
wall time as before.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

_SCHEDSTAT = "/proc/thread-self/schedstat"

#: Keys of the per-sample figures :func:`pytest_infperf.measure.timing.take_block` adds
#: (seconds per call, aligned with the samples): the run-queue wait, clipped to what the
#: wall time less the thread's CPU time leaves, and the CPU time of the process's other
#: threads meanwhile.
WAIT = "cpu_wait"
OTHERS = "other_cpu"
#: A generation's waits, per generation: during its first token, and per later token.
TTFT_WAIT = "ttft_cpu_wait"
TPOT_WAIT = "tpot_cpu_wait"
#: Every key above: recorded per block for the judge, never reported as a benchmark figure.
KEYS = frozenset({WAIT, OTHERS, TTFT_WAIT, TPOT_WAIT})
#: The wait that goes with each judged metric ("median": the time per call).
WAIT_OF = {"median": WAIT, "ttft": TTFT_WAIT, "tpot": TPOT_WAIT}

_local = threading.local()


class _Counter:
    """The open schedstat file of one thread, closed when the thread's locals go."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def wait_ns(self) -> int:
        return int(os.pread(self.fd, 128, 0).split()[1])

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _open() -> _Counter | None:
    try:
        counter = _Counter(os.open(_SCHEDSTAT, os.O_RDONLY))
        counter.wait_ns()
    except (OSError, ValueError, IndexError):
        return None
    return counter


@contextlib.contextmanager
def tracking() -> Iterator[_Counter | None]:
    """Within the block, :func:`wait_ns` reads this thread's run-queue wait (the counter
    is yielded, None where the kernel has none)."""
    counter = _open()
    _local.counter = counter
    try:
        yield counter
    finally:
        _local.counter = None


def wait_ns() -> int | None:
    """This thread's run-queue wait so far, in nanoseconds, inside :func:`tracking`; None
    outside it (a plain run reads nothing) or where it is not kept."""
    counter: _Counter | None = getattr(_local, "counter", None)
    return None if counter is None else counter.wait_ns()


def cpu_ns() -> tuple[int, int]:
    """This thread's CPU time and the whole process's, in nanoseconds."""
    return time.thread_time_ns(), time.process_time_ns()
