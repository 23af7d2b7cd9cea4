"""Workers started ahead of need (``infperf_prestart``): an interleaving session starts
its first process pair while it collects and asks each test's baseline side as the head's
test starts its call, so that importing, collecting and building a model on the base side
overlap the head's, none of which is timed; and every worker is quiet (its test ended,
its collection done) before anything is timed beside it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..ab.workers import ABController
    from ..core.budget import Budget
    from .context import RunContext


def routes_all(
    context: RunContext, budget: Budget | None, session: pytest.Session, moved: bool
) -> bool:
    """Whether, as far as is known before any test runs, this session sends every
    benchmark the baseline can judge to interleaving at once (:meth:`~.modes.Stored.measure`'s
    route): ``infperf_prestart`` on, settling on, against a commit, the session-start
    reference moved, no budget (it may send some to the stored pass), no GPU here (a GPU
    benchmark takes the stored pass, guarded by the GPU's clocks), not an xdist worker
    (each would start its own pairs at once), and a collected test the baseline holds.
    Then the workers, and each test's baseline side, start early."""
    from ..measure import gpu

    source = context.source
    return bool(
        source is not None
        and context.settings.prestart
        and context.settings.settle == "auto"
        and source.origin == "commit"
        and source.sha
        and not source.env_diff
        and budget is None
        and not hasattr(session.config, "workerinput")
        and not session.config.option.collectonly
        and any(item.nodeid in source.entries for item in session.items)
        and moved
        and not gpu.any_visible()
    )


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
