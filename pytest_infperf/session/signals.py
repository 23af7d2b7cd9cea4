"""A cancelled job is an interrupted one: SIGTERM taken as Ctrl-C.

CI services cancel a job with signals (GitHub Actions: SIGINT, then SIGTERM, then SIGKILL).
Python's default for SIGTERM ends the process at once, without pytest's teardown: an
interleaving session's git worktree and temporary folder stayed behind, and a persistent
self-hosted runner piled them up. Raised as ``KeyboardInterrupt`` instead, the session ends
as pytest ends an interrupted one: exit 2, the teardown run, the workers and the worktree
removed, no baseline saved, the results file marked incomplete. A second SIGTERM is left to
the default (the process ends at once): a runner that escalates is not held up by a slow
teardown, and what that leaves behind the next run prunes (``ab/checkout.prune``).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

import pytest


class TermAsInterrupt:
    """Installs the handler for the session (controller only), where no one else has one."""

    def __init__(self) -> None:
        self._installed = False

    def install(self) -> None:
        # Only the main thread may set a handler; a handler someone else set (pytest-timeout,
        # the user's own) is theirs.
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        signal.signal(signal.SIGTERM, _interrupt)
        self._installed = True

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        # The session's outcome is written: what is left is its teardown (the workers, the
        # worktree). A SIGTERM now lets it finish instead of breaking it off halfway with a
        # traceback; a second one ends the process at once.
        if self._installed and signal.getsignal(signal.SIGTERM) is _interrupt:
            signal.signal(signal.SIGTERM, _finishing)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._installed and signal.getsignal(signal.SIGTERM) in (_interrupt, _finishing):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self._installed = False


def _interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise KeyboardInterrupt("SIGTERM: the run was cancelled")


def _finishing(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
