"""A cancelled job is an interrupted one while this run holds a worktree or workers.

CI services cancel a job with signals (GitHub Actions: SIGINT, then SIGTERM, then SIGKILL).
Python's default for SIGTERM ends the process at once, without pytest's teardown: an
interleaving session's git worktree and temporary folder stayed behind, and a persistent
self-hosted runner piled them up. Raised as ``KeyboardInterrupt`` instead, the session ends
as pytest ends an interrupted one: exit 2, the teardown run, the workers and the worktree
removed, no baseline saved, the results file marked incomplete. A second SIGTERM is left to
the default (the process ends at once): a runner that escalates is not held up by a slow
teardown, and what that leaves behind the next run prunes (``ab/checkout.prune``).

Only while there is something to clean up: the handler is installed when the first
:class:`~pytest_infperf.ab.controller.ABController` checks a commit out (:func:`hold`) and
removed when the last one closes (:func:`release`). A run that interleaves nothing keeps
Python's default, as pytest-timeout installs its handler only where asked. A child a test
forks (``multiprocessing``) inherits handlers: it is given the default back at once, so
that its ``terminate()`` ends it with -15 as without the plugin.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from types import FrameType

#: How many controllers hold the handler in this process.
_holders = 0


def _ours() -> bool:
    return signal.getsignal(signal.SIGTERM) in (_interrupt, _finishing)


def hold() -> None:
    """A worktree or workers exist from now on: SIGTERM becomes Ctrl-C, where no one else
    has a handler (pytest-timeout, the user's own: theirs) and on the main thread only
    (the only one that may set one)."""
    global _holders
    _holders += 1
    if _holders > 1 or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)


def release() -> None:
    """One holder's worktree and workers are gone; the last one gives the default back."""
    global _holders
    _holders = max(0, _holders - 1)
    if _holders == 0 and _ours() and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def finishing() -> None:
    """The session's outcome is written: what is left is its teardown (the workers, the
    worktree). A SIGTERM now lets it finish instead of breaking it off halfway with a
    traceback; a second one ends the process at once."""
    if signal.getsignal(signal.SIGTERM) is _interrupt:
        signal.signal(signal.SIGTERM, _finishing)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise KeyboardInterrupt("SIGTERM: the run was cancelled")


def _finishing(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _in_forked_child() -> None:
    """A forked child holds no worktree or worker of ours: Python's default again."""
    global _holders
    _holders = 0
    if _ours():
        with contextlib.suppress(ValueError):  # forked from another thread than the main
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_forked_child)
