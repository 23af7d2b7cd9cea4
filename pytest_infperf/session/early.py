"""Workers started ahead of need (``infperf_prestart``): an interleaving session starts
its first process pair while it collects and asks each test's baseline side as the head's
test starts its call, so that importing, collecting and building a model on the base side
overlap the head's, none of which is timed; and every worker is quiet (its test ended,
its collection done) before anything is timed beside it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..ab.workers import ABController


def request_early(controller: ABController, nodeid: str) -> bool:
    """The baseline's side of ``nodeid`` asked for as the head's test starts its call
    (after the head's own fixtures: a fixture that holds a port or a path is the head's
    first): the base builds its model while this process builds the head's (neither is
    timed), not after. False when the worker cannot be asked: it is started again, and
    its error reported, where it is needed, and not asked early again this session (each
    early ask would start it once more)."""
    from ..ab.workers import ABError

    try:
        controller.base.request(nodeid)
    except ABError:
        return False
    return True


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
