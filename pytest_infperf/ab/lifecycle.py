"""Where a worker process stands: one stage, changed in one place, by the allowed
transitions only.

A worker (``workers.WorkerProcess``) is a small state machine, as pyperf's manager is: it
is started, connected to, collects, is asked for a test, reaches the call asked for (or
another call, which it is told to skip), is timed there, finishes the call and runs on to
the test's next call or its end, and is ended, killed or found dead. Each stage is one
:class:`Stage`; what moves it is an :class:`Event`; :data:`TRANSITIONS` is the whole
table, and :func:`advance` the one function that applies it. A transition the table does
not hold is a bug of the controller, raised at once (``IllegalTransition``) instead of a
worker left waiting on a message that never comes.
"""

from __future__ import annotations

import enum


class Stage(enum.Enum):
    """Where a worker process stands."""

    #: No process (never started, ended, killed, or found dead).
    STOPPED = "stopped"
    #: Started, not yet connected to.
    SPAWNED = "spawned"
    #: Connected to; importing and collecting (its collection not yet received).
    COLLECTING = "collecting"
    #: Collected; no test.
    IDLE = "idle"
    #: A test asked (RUN sent); neither at a call nor ended yet.
    ASKED = "asked"
    #: A test running on after a call (finished, or told to skip it) to its next call or
    #: its end.
    RUNNING = "running"
    #: At a call, warmed up and waiting; its READY read and kept for the next ask.
    PARKED = "parked"
    #: At the call asked for: blocks are timed and its pass profiled here.
    AT_CALL = "at-call"


class Event(enum.Enum):
    """What happens to a worker process."""

    SPAWN = "spawn"
    CONNECT = "connect"
    #: Its collection received.
    COLLECTED = "collected"
    #: A test asked of it (RUN).
    ASK = "ask"
    #: It reached the call asked for (READY of that call read).
    READY = "ready"
    #: Told to skip the call it is at (READY of another call, or a call left by a pair
    #: that failed).
    SKIP = "skip"
    #: It reached a call while nobody waited for it: the READY is kept.
    PARK = "park"
    #: Its call ended (FINISH): the test runs on.
    FINISH = "finish"
    #: Its test ended (DONE: finished, ended when asked, failed, or not collected there).
    DONE = "done"
    #: Told to end its session (QUIT): never spoken to again.
    QUIT = "quit"
    #: Found dead, killed, or silent past its limit (then killed): no process.
    CRASH = "crash"
    KILL = "kill"
    TIMEOUT = "timeout"


#: Stages at which a test is being served (an END is answered with DONE).
IN_TEST = frozenset({Stage.ASKED, Stage.RUNNING, Stage.PARKED, Stage.AT_CALL})
_ANY = frozenset(Stage)

#: The allowed transitions: (stage, event) -> the next stage.
TRANSITIONS: dict[tuple[Stage, Event], Stage] = {
    (Stage.STOPPED, Event.SPAWN): Stage.SPAWNED,
    (Stage.SPAWNED, Event.CONNECT): Stage.COLLECTING,
    (Stage.COLLECTING, Event.COLLECTED): Stage.IDLE,
    (Stage.IDLE, Event.ASK): Stage.ASKED,
    (Stage.IDLE, Event.QUIT): Stage.STOPPED,
    **{(s, Event.READY): Stage.AT_CALL for s in (Stage.ASKED, Stage.RUNNING, Stage.PARKED)},
    **{(s, Event.SKIP): Stage.RUNNING for s in IN_TEST},
    **{(s, Event.PARK): Stage.PARKED for s in (Stage.ASKED, Stage.RUNNING)},
    (Stage.AT_CALL, Event.FINISH): Stage.RUNNING,
    **{(s, Event.DONE): Stage.IDLE for s in IN_TEST},
    **{(s, e): Stage.STOPPED for s in _ANY for e in (Event.CRASH, Event.KILL, Event.TIMEOUT)},
}


class IllegalTransition(RuntimeError):
    """The controller did what the worker's stage does not allow: a bug, said at once."""


def advance(stage: Stage, event: Event) -> Stage:
    """The stage after ``event``; :class:`IllegalTransition` if the table has no such move."""
    try:
        return TRANSITIONS[stage, event]
    except KeyError:
        raise IllegalTransition(f"a worker at {stage.value} cannot {event.value}") from None
