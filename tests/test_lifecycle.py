"""The A/B worker's lifecycle (ab/lifecycle.py) as a table: every stage, what moves it,
and the paths the controller takes through it, crash, kill, timeout, Ctrl-C and a rerun of
the same test included. Pure: no process is started here (test_ab.py runs the real ones)."""

from __future__ import annotations

import pytest

from pytest_infperf.ab.lifecycle import (
    IN_TEST,
    TRANSITIONS,
    Event,
    IllegalTransition,
    Stage,
    advance,
)

S, E = Stage, Event

ALLOWED = [
    (S.STOPPED, E.SPAWN, S.SPAWNED),
    (S.SPAWNED, E.CONNECT, S.COLLECTING),
    (S.COLLECTING, E.COLLECTED, S.IDLE),
    (S.IDLE, E.ASK, S.ASKED),
    (S.ASKED, E.READY, S.AT_CALL),  # the call asked for, warmed up
    (S.ASKED, E.SKIP, S.RUNNING),  # a call the other side does not make
    (S.ASKED, E.PARK, S.PARKED),  # at a call while nobody waited
    (S.ASKED, E.DONE, S.IDLE),  # failed, or no such call
    (S.RUNNING, E.READY, S.AT_CALL),
    (S.RUNNING, E.PARK, S.PARKED),
    (S.RUNNING, E.DONE, S.IDLE),
    (S.PARKED, E.READY, S.AT_CALL),  # its kept READY is the call asked for
    (S.PARKED, E.SKIP, S.RUNNING),
    (S.AT_CALL, E.FINISH, S.RUNNING),
    (S.AT_CALL, E.SKIP, S.RUNNING),  # left at a call by a pair that failed
    (S.AT_CALL, E.DONE, S.IDLE),  # its model raised inside the call
    (S.IDLE, E.QUIT, S.STOPPED),
]


@pytest.mark.parametrize(("stage", "event", "after"), ALLOWED)
def test_an_allowed_move(stage: Stage, event: Event, after: Stage) -> None:
    assert advance(stage, event) is after


@pytest.mark.parametrize("stage", list(Stage))
@pytest.mark.parametrize("event", [E.CRASH, E.KILL, E.TIMEOUT])
def test_crash_kill_and_timeout_leave_no_process_from_anywhere(stage: Stage, event: Event) -> None:
    assert advance(stage, event) is S.STOPPED


ILLEGAL = [
    (S.STOPPED, E.ASK),  # a test asked of no process
    (S.SPAWNED, E.COLLECTED),  # collected before connected to
    (S.COLLECTING, E.ASK),  # asked before its collection is known
    (S.AT_CALL, E.ASK),  # a new test while one is at its call: end it first
    (S.ASKED, E.ASK),
    (S.IDLE, E.READY),  # a call of no test
    (S.IDLE, E.FINISH),
    (S.RUNNING, E.FINISH),  # only a call in progress finishes
    (S.PARKED, E.PARK),
    (S.AT_CALL, E.QUIT),  # told to quit mid-call: end its test first
    (S.COLLECTING, E.QUIT),  # (closing kills one that still collects)
]


@pytest.mark.parametrize(("stage", "event"), ILLEGAL)
def test_an_illegal_move_is_said_at_once(stage: Stage, event: Event) -> None:
    with pytest.raises(IllegalTransition, match=f"at {stage.value} cannot {event.value}"):
        advance(stage, event)


def test_the_table_is_exactly_these_moves() -> None:
    expected = {(s, e): a for s, e, a in ALLOWED}
    expected.update({(s, e): S.STOPPED for s in Stage for e in (E.CRASH, E.KILL, E.TIMEOUT)})
    # SKIP and DONE are allowed from every stage in a test
    expected.update({(s, E.SKIP): S.RUNNING for s in IN_TEST})
    expected.update({(s, E.DONE): S.IDLE for s in IN_TEST})
    assert expected == TRANSITIONS


def _walk(*events: Event, start: Stage = S.STOPPED) -> Stage:
    stage = start
    for event in events:
        stage = advance(stage, event)
    return stage


STARTED = (E.SPAWN, E.CONNECT, E.COLLECTED)

PATHS = [
    ("a pair's measured call", (*STARTED, E.ASK, E.READY, E.FINISH, E.DONE), S.IDLE),
    ("a test with two calls", (*STARTED, E.ASK, E.READY, E.FINISH, E.READY), S.AT_CALL),
    ("parked, then asked", (*STARTED, E.ASK, E.READY, E.FINISH, E.PARK, E.READY), S.AT_CALL),
    ("a call the other side lacks", (*STARTED, E.ASK, E.SKIP, E.READY), S.AT_CALL),
    ("crash while collecting, started again", (E.SPAWN, E.CONNECT, E.CRASH, *STARTED), S.IDLE),
    ("timeout at a call (killed)", (*STARTED, E.ASK, E.READY, E.TIMEOUT), S.STOPPED),
    # Ctrl-C while the blocks run: the controller ends the test on every side (END is
    # answered with DONE), then closes the session (QUIT, or KILL where that fails).
    ("Ctrl-C at a call", (*STARTED, E.ASK, E.READY, E.DONE, E.QUIT), S.STOPPED),
    ("Ctrl-C while connecting", (E.SPAWN, E.KILL), S.STOPPED),
    # A rerun of the same test (pytest-rerunfailures): the earlier attempt is ended as the
    # rerun's call starts, then asked afresh.
    ("a rerun of the same test", (*STARTED, E.ASK, E.READY, E.DONE, E.ASK, E.READY), S.AT_CALL),
    ("a worker killed, then needed again", (*STARTED, E.KILL, *STARTED, E.ASK), S.ASKED),
]  # fmt: skip


@pytest.mark.parametrize(("events", "end"), [p[1:] for p in PATHS], ids=[p[0] for p in PATHS])
def test_the_paths_the_controller_takes(events: tuple[Event, ...], end: Stage) -> None:
    assert _walk(*events) is end
