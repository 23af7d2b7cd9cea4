"""The A/B worker processes, as the controller sees them: ``python -m
pytest_infperf.abworker`` processes running pytest in one checkout on demand, each spoken
to over its own socket with a deadline on every reply, and a pair of them (base and head)
that measure together. :mod:`~pytest_infperf.ab.controller` starts them once per session
and reuses them; :mod:`~pytest_infperf.ab.interleave` says what they measure and how.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Client
from pathlib import Path
from typing import Any

from ..core.results import WorkProfile
from ..measure.numa import Binding
from ..measure.profile import calls_for
from . import imports, proof, protocol
from .checkout import Checkout, Selection
from .interpreter import Interpreter
from .lifecycle import IN_TEST, Event, IllegalTransition, Stage, advance
from .procs import kill_group, socket_path

#: One block from a side: seconds per call of each sample, and the per-sample figures the
#: sampler recorded besides (a generation's TTFT and TPOT; empty otherwise).
Block = tuple[list[float], dict[str, list[float]]]
CONNECT_TIMEOUT_S = 120.0
#: Times WORKER_TIMEOUT_S (ab/checkout.py): how long a worker may take to collect, or to
#: build and warm a model (a torch.compile of a large model takes minutes).
READY_FACTOR = 15
#: How long closing waits for a worker to end its current test before killing it.
QUIT_GRACE_S = 5.0
_SERIAL = itertools.count(1)

#: A worker's own process group in the controller's session (``process_group`` is Python
#: 3.11's; before it, ``setpgid`` in the child does the same).
_OWN_GROUP: dict[str, Any] = (
    {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
)


class ABError(Exception):
    """A worker side failed; the message carries its error."""


class ForeignCode(ABError):
    """A side imported the project's code from somewhere other than its own checkout (the
    base from HEAD's, the head from a stale installed copy): nothing it measured compares
    the two commits, so the test is not passed and nothing is kept."""


@dataclasses.dataclass(frozen=True)
class BaseCall:
    """What a worker side said when asked for a test's call: ``ready`` (warmed up and
    waiting, with its environment), or why not (``missing``, or ``failed`` with the error)."""

    status: str  # "ready" | "missing" | "failed"
    env: dict[str, Any] = dataclasses.field(default_factory=dict)
    block: int = 1
    error: str = ""

    @property
    def ready(self) -> bool:
        return self.status == "ready"


class WorkerProcess:
    """One worker process of one checkout: started in its own process group, spoken to over
    an authenticated socket with a deadline on every reply, and ended with its children.
    Where it stands is one :class:`~.lifecycle.Stage`, moved only by :meth:`_on`."""

    #: Told what the worker could not be given (options its checkout does not define).
    notice: Callable[[str], None] | None = None

    def __init__(
        self, checkout: Checkout, selection: Selection, label: str, hash_seed: int | None = None
    ) -> None:
        self.checkout = checkout
        self.selection = selection
        self.label = label
        #: PYTHONHASHSEED of the process: both workers of a process pair get the same one
        #: (same dict and set orders on both sides), each pair another.
        self.hash_seed = hash_seed
        self.proc: subprocess.Popen[bytes] | None = None
        self.conn: Any = None
        self.nodeids: set[str] = set()
        #: The checkout's collection errors: (node id, the error's tail).
        self.errors: list[tuple[str, str]] = []
        self.features: frozenset[str] = frozenset()  # what it serves (protocol.FEATURES)
        self.per_call_s = 0.0  # the ready call's, at its warmup: how long a block takes
        #: The test it serves (None at IDLE and STOPPED).
        self.current: str | None = None
        self.starts = 0
        #: Tests asked of the current process: 0 until its first (its first model then
        #: pays the imports a test's model brings, besides building it).
        self.served = 0
        self.stage = Stage.STOPPED
        #: At PARKED: the READY read while nobody waited, kept for the next ask.
        self._kept: dict[str, Any] | None = None
        #: At SPAWNED: its socket's address and key.
        self._address: tuple[str, bytes] = ("", b"")
        self.serial = next(_SERIAL)
        self.log = checkout.tmp / f"{label}-{self.serial}-worker.log"
        #: Where the project's modules in the process came from, at its last READY (None:
        #: not told, by an older worker).
        self.origins: dict[str, str] | None = None
        #: A head worker: the base's checkout, which none of its modules may come from.
        self.other: Path | None = None
        #: The Python it runs, and what it is told of the project (a base worker of a
        #: compiled project: where the environment built for the base installed it).
        self.python = sys.executable
        #: The GPU's NUMA node this worker starts bound to (None: none).
        self.numa: Binding | None = None
        self.imports = selection.imports
        #: A base worker: the interpreter every process of its side runs, held to its
        #: checkout as it starts (None: this process's own, a head worker's).
        self.interpreter: Interpreter | None = None
        #: What the other processes of its side recorded at its last READY.
        self.children: list[dict[str, str]] = []

    def launch(self) -> bool:
        """Start the process if it is not running, without waiting for it: a process pair's
        two sides start, and collect, at the same time (new pairs ready for an example
        benchmark in 2.8-3.7 s on 2 cores, 4.2-5.3 s one side after the other:
        ``benchmarks/real_models.py --mode ab``). Whether it started one."""
        if self.stage in (Stage.SPAWNED, Stage.COLLECTING):
            return False
        alive = self.proc is not None and self.proc.poll() is None
        if alive and self.stage is not Stage.STOPPED:
            return False
        if self.proc is not None and not alive and self.stage is Stage.ASKED:
            # It died on the way to a call asked of it, with no one reading: that test's
            # error, not a silent start of a new one.
            self._crashed()
        if alive:  # told to quit, not yet gone
            self.kill()
        self._address = self._spawn()
        self._on(Event.SPAWN)
        return True

    def connect(self) -> None:
        """Connected to the worker (started here if need be). The worker only begins its
        pytest session once connected to, so both sides of a pair are connected to before
        either's collection is waited for."""
        self.launch()
        if self.stage is Stage.SPAWNED:
            self._connect(*self._address)
            self._on(Event.CONNECT)

    def _spawn(self) -> tuple[str, bytes]:
        """The worker process, started; its socket address and key."""
        self.checkout.add()
        authkey = secrets.token_bytes(32)
        self.starts += 1
        self.served = 0
        self._reset(Event.CRASH)  # whatever stood for the old process, if any, is gone
        address = socket_path(self.checkout.tmp, f"{self.label}-{self.serial}-{self.starts}")
        env = {**os.environ, protocol.AUTHKEY_ENV: authkey.hex(), "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("PYTEST_ADDOPTS", None)
        env.pop("PYTEST_XDIST_WORKER", None)
        if self.hash_seed is not None:
            env["PYTHONHASHSEED"] = str(self.hash_seed)
        # The project's options: the worker adds those its checkout's conftest defines.
        env[protocol.OPTIONS_ENV] = json.dumps(self.selection.forwarded.project)
        env[protocol.HEAP_ENV] = self.selection.heap
        env[protocol.LAYER_ENV] = self.selection.layer
        env[protocol.PARENT_ENV] = str(os.getpid())
        env[protocol.IMPORTS_ENV] = self.imports
        rootdir = self.checkout.map(self.selection.rootdir)
        here = self.checkout.map(self.selection.invocation_dir or self.selection.rootdir)
        env[protocol.CWD_ENV] = str(here if here.is_dir() else rootdir)
        if self.interpreter is not None:
            env = self.interpreter.environ(env)
            env[protocol.CHILDREN_ENV] = self.interpreter.origins
        cmd = [
            self.python,
            "-m",
            "pytest_infperf.abworker",
            address,
            str(self.checkout.root),
            str(rootdir),
            os.pathsep.join(self.selection.pythonpath),
            "--",
            *self.selection.args_in(self.checkout),
            # A repository that holds pytest_infperf itself (this project's main job) has
            # the worker import the base's copy before pytest loads it as a plugin; pytest
            # then warns that it cannot rewrite its asserts, and `filterwarnings = error`
            # ended the worker before any test ran. Passed from here, so that a base
            # commit's older worker gets it too.
            "-W",
            "ignore::pytest.PytestAssertRewriteWarning",
        ]
        if self.numa is not None:  # bound at birth, both sides alike (measure/numa.py)
            cmd = self.numa.command(cmd)
        with self.log.open("ab") as log:
            # Its own process group: ended with every child it starts, and a terminal's
            # Ctrl-C (sent to the foreground group) reaches the controller alone, which ends
            # it in order. Not its own session: under the kernel's autogroup scheduling
            # (sched_autogroup_enabled, the default of many distributions) each session
            # gets its own share of the CPU, so a worker in a session of its own ran at a
            # full share while the controller shared its session's with everything else
            # the job started, and beside two busy loops the first process pair (this
            # process and a worker) read the head 15-62% slower than the later pairs (two
            # workers). Both sides of every pair now compete for the CPU alike.
            self.proc = subprocess.Popen(
                cmd, cwd=rootdir, env=env, stdout=log, stderr=log, **_OWN_GROUP
            )
        return address, authkey

    def _connect(self, address: str, authkey: bytes) -> None:
        """Connect once the worker listens, unless it died first."""
        assert self.proc is not None
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            try:
                self.conn = Client(address, family="AF_UNIX", authkey=authkey)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    kill_group(self.proc)
                    self.proc = None
                    self._reset(Event.CRASH)
                    raise ABError(
                        f"the A/B {self.label} worker ({self.checkout.title}) did not start: "
                        f"{self.log_tail()}"
                    ) from None
                time.sleep(0.05)

    @property
    def collecting(self) -> bool:
        """Started and connected to, its collection not yet received: it is importing and
        collecting on a CPU the timed blocks may need."""
        return self.stage is Stage.COLLECTING

    def log_tail(self, limit: int = 3000) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return text[-limit:].strip() or "(no output)"

    @property
    def _ready_timeout(self) -> float:
        return self.selection.timeout * READY_FACTOR

    def _recv(self, timeout: float | None = None, what: str = "") -> dict[str, Any]:
        """The worker's next message, within ``timeout`` seconds (default: the selection's)."""
        limit = self.selection.timeout if timeout is None else timeout
        try:
            if not self.conn.poll(limit):
                self._stopped_answering(limit, what)
            message = dict(self.conn.recv())
        except (EOFError, OSError):
            self._crashed()
        if message.get("ev") == protocol.ERROR:
            self._crashed(str(message.get("traceback", "")))
        return message

    def _send(self, **message: Any) -> None:
        try:
            self.conn.send(message)
        except OSError:
            self._crashed()

    def _on(self, event: Event, nodeid: str | None = None) -> None:
        """The one place the stage moves (:data:`~.lifecycle.TRANSITIONS`); ``nodeid``: the
        test an ASK is for. Out of a test, none is served and no READY is kept."""
        try:
            self.stage = advance(self.stage, event)
        except IllegalTransition as exc:
            raise ABError(f"the A/B {self.label} worker: {exc} (a bug of pytest-infperf)") from None
        if event is Event.ASK:
            self.current = nodeid
        if self.stage not in IN_TEST:
            self.current = None
        if self.stage is not Stage.PARKED:
            self._kept = None

    def _reset(self, event: Event) -> None:
        """No process any more (CRASH, KILL, TIMEOUT: allowed from any stage)."""
        self._on(event)

    def _stopped_answering(self, limit: float, what: str) -> Any:
        """A worker silent past its limit is killed, with its children, and said so."""
        if self.proc is not None:
            kill_group(self.proc)
        self.proc = None
        self._reset(Event.TIMEOUT)
        raise ABError(
            f"the A/B {self.label} worker ({self.checkout.title}) stopped answering: no reply "
            f"in {limit:.0f} s{' to ' + what if what else ''} (infperf_expert's "
            f"worker_timeout); its processes were killed. Its log: {self.log_tail(1500)}"
        )

    def _crashed(self, detail: str = "") -> Any:
        proc = self.proc
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            kill_group(proc)  # still running after 5 s, or children left behind
        code = proc.returncode if proc is not None else None
        self.proc = None
        self._reset(Event.CRASH)
        raise ABError(
            f"the A/B {self.label} worker ({self.checkout.title}) crashed (exit code {code}): "
            f"{detail or self.log_tail()}"
        )

    def kill(self) -> None:
        """The worker and everything it started, ended now."""
        proc, self.proc = self.proc, None
        self._reset(Event.KILL)
        if proc is not None:
            kill_group(proc)

    def wait(self, timeout: float = 10.0) -> None:
        """Wait for the worker to exit; after ``timeout`` seconds (and for any child it
        left behind) its process group is killed."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
        kill_group(proc)


class WorkerSide(WorkerProcess):
    """One worker process serving measurements of one checkout: the protocol's requests."""

    def ensure(self) -> None:
        """The worker running and its collection known (started here if need be)."""
        self.connect()
        if self.stage is Stage.COLLECTING:
            first = self._recv(self._ready_timeout, "its collection")
            if first.get("ev") != protocol.COLLECTED:
                self.kill()
                raise ABError(
                    f"the A/B {self.label} worker ({self.checkout.title}) failed while "
                    f"collecting: {self.log_tail()}"
                )
            self._on(Event.COLLECTED)
            self.nodeids = set(first["nodeids"])
            self.errors = [(str(n), str(e)) for n, e in first.get("errors") or ()]
            self.features = frozenset(first.get("features") or ())
            dropped = ", ".join(str(flag) for flag in first.get("dropped") or ())
            if dropped and self.notice is not None:
                self.notice(f"the {self.checkout.title} lacks option(s) {dropped}: not passed on")

    def tests(self) -> set[str]:
        self.ensure()
        return set(self.nodeids)

    def absent(self, nodeid: str) -> BaseCall:
        """Why this side does not collect ``nodeid``: its file (or a folder above it) could
        not be collected in this checkout (``failed``, with that error), or the checkout
        has no such test (``missing``)."""
        for where, error in self.errors:
            if not where or nodeid.startswith((f"{where}::", f"{where.rstrip('/')}/")):
                what = f"collecting {where or 'the session'} failed in the {self.checkout.title}"
                return BaseCall("failed", error=f"{what}: {error.strip()}")
        return BaseCall("missing")

    def request(self, nodeid: str) -> bool:
        """Ask for ``nodeid`` to run up to its calls (False: this side has no such test).
        Returns at once, so two sides can get ready at the same time."""
        self.ensure()
        if nodeid not in self.nodeids:
            return False
        if self.current != nodeid:
            self.end_test()
            self._send(op=protocol.RUN, nodeid=nodeid)
            self._on(Event.ASK, nodeid)
            self.served += 1
        return True

    def await_ready(self, name: str | None) -> BaseCall:
        """Wait until the requested test reaches its call ``name``, warmed up."""
        if self.stage is Stage.AT_CALL:  # left at a call (its pair failed): not the one wanted
            self._send(op=protocol.SKIP)
            self._on(Event.SKIP)
        while True:
            call = f"{self.current}'s call {name!r}" if name else f"{self.current}'s call"
            what = (
                f"reaching {call} (a test that holds a lock, a fixed port or a whole GPU "
                "through infer_bench keeps its other side from it)"
            )
            message = self._kept or self._recv(self._ready_timeout, what)
            self._kept = None
            if message.get("ev") == protocol.READY:
                if message.get("name") == name:
                    self.per_call_s = float(message.get("per_call_s") or 0.0)
                    self._on(Event.READY)
                    self._vouch(message.get("origins"), message.get("children"))
                    return BaseCall("ready", dict(message.get("env") or {}), int(message["block"]))
                self._send(op=protocol.SKIP)  # a call the other side does not make
                self._on(Event.SKIP)
                continue
            if message.get("ev") == protocol.DONE:
                self._on(Event.DONE)
                if message.get("outcome") in ("failed", "error"):
                    return BaseCall("failed", error=str(message.get("longrepr") or "").strip())
                return BaseCall("missing")

    def _vouch(self, found: Any, children: Any = None) -> None:
        """Where the worker's project modules came from, and those of the processes of its
        side (``children``: what its tests started), checked for its side: raises
        :class:`ForeignCode` (the worker left at its call, which the caller ends)."""
        told = imports.ImportMap.from_json(self.imports)
        if told is None or not isinstance(found, dict):
            self.origins = None  # no project known, or an older worker: nothing to check
            if told is not None and self.notice is not None:
                self.notice(
                    f"the {self.checkout.title}'s pytest-infperf is too old to prove which "
                    "code its side ran (its origins are not in the JSON)"
                )
            return
        self.origins = {str(k): str(v) for k, v in found.items()}
        side = "head" if self.checkout.sha is None else "base"
        other = None if self.other is None else str(self.other.resolve())
        tree = str(self.checkout.root.resolve())
        bad = proof.problems(side, self.origins, told, tree, other)
        if bad:
            raise ForeignCode(proof.explain(side, f"{self.label}, {self.checkout.title}", bad))
        self._vouch_children(children)

    def _vouch_children(self, children: Any) -> None:
        """What the other processes of this side recorded (``children``: those its tests
        started), checked for its side: one that could not be held to the checkout, or
        that imported the project from elsewhere, raises :class:`ForeignCode`."""
        told = imports.ImportMap.from_json(self.imports)
        if told is None or not isinstance(children, list):
            return
        side = "head" if self.checkout.sha is None else "base"
        other = None if self.other is None else str(self.other.resolve())
        tree = str(self.checkout.root.resolve())
        self.children = []
        for child in children:
            if not isinstance(child, dict) or not isinstance(child.get("origins"), dict):
                continue
            origins = {str(k): str(v) for k, v in child["origins"].items()}
            self.children.append(origins)
            where = f"a process its tests started (pid {child.get('pid')})"
            title = f"{self.label}, {self.checkout.title}, {where}"
            if child.get("error"):
                raise ForeignCode(
                    f"refused to compare: the {side} side ({title}) could not be held to its "
                    f"checkout as it started: {child['error']}"
                )
            bad = proof.problems(side, origins, told, tree, other)
            if bad:
                raise ForeignCode(proof.explain(side, title, bad))

    def block(self, count: int, calls: int, cpu: int | None = None) -> Block:
        self._send(op=protocol.BLOCK, n=count, calls=calls, cpu=cpu)
        expected = count * calls * self.per_call_s
        message = self._reply(max(self.selection.timeout, 50 * expected), "a block of samples")
        metrics = {
            str(k): [float(v) for v in values]
            for k, values in dict(message.get("metrics") or {}).items()
        }
        return [float(v) for v in message["values"]], metrics

    def profile(self, mode: str, per_call_s: float) -> WorkProfile | None:
        """The profiled pass of the ready call on this side (None: the worker is too old
        to serve one, or the call has nothing to profile)."""
        if mode == "off" or protocol.PROFILE not in self.features:
            return None
        self._send(op=protocol.PROFILE, mode=mode, per_call_s=per_call_s)
        # The pass makes a few calls (and a FLOP count, and a probe for a plain callable):
        # a model of many seconds a call must not look silent while it runs them.
        calls = calls_for(per_call_s, cuda=True) + 2
        limit = max(self.selection.timeout, 50 * calls * per_call_s)
        return WorkProfile.from_json(self._reply(limit, "a profiled pass").get("work"))

    def finish_call(self, park: bool = True) -> dict[str, Any]:
        """The ready call ended and the test parked: what it runs after its call (teardown,
        the next call's build) runs now, not beside the blocks that come next. A test that
        cannot park is left to its worker's restart: the call's blocks stand."""
        self._send(op=protocol.FINISH)
        self._on(Event.FINISH)
        reply = self._reply(self.selection.timeout, "the end of its call")
        if park:
            with contextlib.suppress(ABError):
                self.park()
        # The processes its call started while it was timed: proved before its blocks count.
        self._vouch_children(reply.get("children"))
        return reply

    def _reply(self, limit: float, what: str) -> dict[str, Any]:
        """A reply inside a call; the test's end instead (its model raised, so the worker
        ended the test) is an error that says so, not a wait for a reply never sent."""
        message = self._recv(limit, what)
        if message.get("ev") == protocol.DONE:
            self._on(Event.DONE)
            detail = str(message.get("longrepr") or message.get("outcome") or "").strip()
            raise ABError(
                f"the A/B {self.label} worker's test ({self.checkout.title}) ended when "
                f"asked for {what}: {detail}"
            )
        return message

    def park(self) -> None:
        """Wait until the current test (asked early, or run on after a call) does nothing:
        at its next call, warmed (the READY kept for :meth:`await_ready`), or at its end."""
        if self.stage not in (Stage.ASKED, Stage.RUNNING) or self.proc is None:
            return
        while True:  # a stray reply (an interrupted block's) is passed over
            message = self._recv(self._ready_timeout, f"{self.current} to reach a call")
            if message.get("ev") == protocol.READY:
                self._on(Event.PARK)
                self._kept = message
                return
            if message.get("ev") == protocol.DONE:
                self._on(Event.DONE)
                return

    def end_test(self, timeout: float | None = None) -> None:
        """Let the current test run to its end (later calls are skipped), waiting for it
        ``timeout`` seconds (default: as long as a model may take to build)."""
        if self.stage not in IN_TEST or self.proc is None:
            return
        self._kept = None
        self._send(op=protocol.END)
        limit = self._ready_timeout if timeout is None else timeout
        while True:
            message = self._recv(limit, f"the end of {self.current}")
            if message.get("ev") == protocol.DONE:
                break
            if message.get("ev") == protocol.READY:
                self._send(op=protocol.END)
        self._on(Event.DONE)

    def quit(self, grace: float = QUIT_GRACE_S) -> None:
        """Tell the worker to end its session, without waiting for it to exit. One that
        cannot be told (started and never connected to: its pair's other side failed
        first, or Ctrl-C came while it started) or that does not end its test within
        ``grace`` seconds is killed with its children: closing never waits on a worker."""
        if self.stage is Stage.SPAWNED or self.conn is None:
            self.kill()
            return
        if self.proc is not None and self.stage in IN_TEST:
            try:
                self.end_test(grace)
            except (ABError, OSError):
                self.kill()
                return
        if self.stage is not Stage.IDLE:  # still collecting, or gone: nothing to tell it
            self.kill()
            return
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.conn.send({"op": protocol.QUIT})
        self._on(Event.QUIT)


@dataclasses.dataclass
class ProcessPair:
    """Two worker processes, base and head, that measure together."""

    base: WorkerSide
    head: WorkerSide

    def begin(self, nodeid: str, name: str | None) -> bool:
        """Both sides to ``nodeid``'s call ``name``, one after the other: the base's test
        body starts once the head's has reached its call, as in the first pair, so two
        bodies never run at once (a test may hold what only one process can have while it
        builds its model: a lock, a fixed port, a whole GPU). Whether a worker process was
        started for it, or serves its first test with it (one prestarted)."""
        started = [side.launch() or side.served == 0 for side in (self.base, self.head)]
        for side in (self.base, self.head):
            side.connect()
        asked: list[WorkerSide] = []
        try:
            for side in (self.head, self.base):
                if not side.request(nodeid):
                    raise ABError(f"a worker process pair does not collect {nodeid}")
                asked.append(side)
                ready = side.await_ready(name)
                if not ready.ready:
                    detail = f": {ready.error}" if ready.error else ""
                    raise ABError(
                        f"the {side.label} worker ({side.checkout.title}) did not reach "
                        f"{nodeid} call {name!r} ({ready.status}{detail})"
                    )
        except ABError:
            for side in asked:  # neither left at its call, nor building beside what comes
                with contextlib.suppress(ABError):
                    side.end_test()
            raise
        return any(started)

    def finish(self, park: bool = True) -> None:
        """Both sides' calls ended, each whatever the other did (the pair's blocks stand),
        then both parked at once."""
        sides = [s for s in (self.base, self.head) if s.current is not None and s.proc]
        foreign: list[ForeignCode] = []
        for side in sides:
            try:
                side.finish_call(park=False)
            except ForeignCode as exc:  # its blocks do not count: said once both ended
                foreign.append(exc)
            except ABError:
                pass
        for side in sides if park else ():
            with contextlib.suppress(ABError):
                side.park()
        if foreign:
            raise foreign[0]
