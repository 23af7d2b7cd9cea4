"""Workers started ahead of need (infperf_expert's ``prestart``): an interleaving session starts
its first process pair while it collects, so that its imports and collection overlap the
session's own, none of which is timed; and every worker is quiet (its test ended, its
collection done) before anything is timed beside it.

A test's body is never run on two sides at once: the baseline's side of a test is asked
when the head's reaches ``infer_bench`` (it then builds its model while the head warms
up). Asked as the head's call started, both bodies ran together, and a test that takes an
exclusive resource before ``infer_bench`` (a lock file, a fixed port) left the head
waiting for it while the base side held it, waiting for blocks: the run hung for good.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..ab.controller import ABController


def end_test(controller: ABController, nodeid: str) -> None:
    """``nodeid`` ended on every worker that serves it: at its logfinish, so that none of
    its code runs on into the next test; and as it starts its call, for a rerun
    (pytest-rerunfailures runs its attempts with no logfinish between them), so that it
    is asked afresh, not answered by the last attempt's end."""
    from ..ab.workers import ABError

    with contextlib.suppress(ABError):
        controller.end_test(nodeid)


def quiet_workers(controller: ABController) -> None:
    """Before a stored pass: every worker's test parked (one asked early, or run on after
    its call, waits at its next call, warmed and kept, or has ended) and none collecting,
    so that nothing of this session runs beside the timed samples."""
    from ..ab.workers import ABError

    for side in controller.sides():
        with contextlib.suppress(ABError):
            side.park()
    controller.quiet()
