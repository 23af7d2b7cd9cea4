"""The far side of an interleaved comparison: a pytest process serving measurements.

PYTEST_DONT_REWRITE

Started by :mod:`pytest_infperf.ab.interleave` as ``python -m pytest_infperf.abworker``. It runs
pytest in one checkout (the base worktree, or the working tree for a head worker of a process
pair) with a plugin that, instead of running the session, waits for commands: run
this test; inside it, ``infer_bench`` warms up, says it is ready, then times blocks of
samples on demand, so the controller can interleave them with the other side's blocks.

A leaf, like pytest-xdist's ``remote.py``: it imports the protocol, the measurement layer
and the stash keys, nothing of the controller's session. The plugin is this session's
measurement mode (``name = "ab-base"``).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Generator, Sequence
from multiprocessing.connection import Listener
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

# Imported before sys.path changes: pytest is the environment's. pytest_infperf is the copy
# `python -m` found: the checkout's own where the repository holds it (cwd is on sys.path).
import pytest

from ..core import cmdline
from ..core.settings import served_layer, served_layer_key
from ..measure import heap, profile
from ..measure.call import BenchCall, from_warm
from ..measure.mode import mode_key
from ..measure.timing import take_block
from . import imports, interpreter, proof, protocol

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from ..core.results import BenchmarkResult


def _skip() -> NoReturn:
    # pytest.skip raises an OutcomeException (a BaseException): a test's own
    # `except Exception` cannot swallow it.
    pytest.skip("not measured: the A/B controller needs no measurement here")


class ABWorkerPlugin:
    """Serves the controller's commands inside the checkout's pytest session."""

    name = "ab-base"

    def __init__(
        self,
        conn: Connection,
        options: Sequence[Sequence[str]] = (),
        layer: dict[str, Any] | None = None,
        origins: proof.Origins | None = None,
        children: str = "",
    ) -> None:
        self.conn = conn
        #: Where the processes its tests start record their modules' origins ("": none).
        self.children = children
        #: Where the project's modules came from, told with every ``ready``.
        self.origins = origins
        #: The controller's run-wide benchmark options, which this side times with.
        self.layer = layer
        self.items: dict[str, pytest.Item] = {}
        self.ending = False
        self.outcome: dict[str, Any] = {}
        #: The project's options from the controller's command line, and those of them this
        #: checkout does not define (left out: pytest would stop at them).
        self.options = [tuple(option) for option in options]
        self.dropped: list[str] = []
        #: The collection errors of this checkout: (node id, the error's tail).
        self.errors: list[tuple[str, str]] = []

    def send(self, **message: Any) -> None:
        self.conn.send(message)

    def recv(self) -> dict[str, Any]:
        return dict(self.conn.recv())

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        # Before infperf's own configure, which then keeps this mode instead of choosing.
        config.stash[mode_key] = self
        if self.layer is not None:
            config.stash[served_layer_key] = self.layer

    @pytest.hookimpl(wrapper=True)
    def pytest_load_initial_conftests(
        self, parser: pytest.Parser, args: list[str]
    ) -> Generator[None, None, None]:
        """The project's options, added once this checkout's conftest files have
        registered theirs: ``args`` is what pytest parses next."""
        result = yield
        known = cmdline.arity(parser)
        for option in self.options:
            flag = cmdline.flag_of(option)
            if flag in known:
                args.extend(option)
            elif flag not in self.dropped:
                self.dropped.append(flag)
        return result

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # A file of this checkout that cannot be collected (an import error, a layout
        # pytest-infperf could not follow) is the base side's error, never a test the base
        # commit lacks: the controller fails its tests with it.
        if report.failed:
            self.errors.append((report.nodeid, str(report.longrepr)[-2000:]))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            if "infer_bench" in getattr(item, "fixturenames", ()):
                self.items[item.nodeid] = item
        self.send(
            ev=protocol.COLLECTED,
            nodeids=sorted(self.items),
            dropped=self.dropped,
            features=list(protocol.FEATURES),
            errors=self.errors,
        )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        while True:
            try:
                message = self.recv()
            except (EOFError, OSError):
                return True
            op = message.get("op")
            if op == protocol.QUIT:
                return True
            if op != protocol.RUN:
                continue
            nodeid = str(message["nodeid"])
            item = self.items.get(nodeid)
            self.ending = False
            self.outcome = {"outcome": "missing", "longrepr": ""}
            if item is not None:
                item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
            done = protocol.Done(
                ev=protocol.DONE,
                nodeid=nodeid,
                outcome=self.outcome["outcome"],
                longrepr=self.outcome["longrepr"],
            )
            self.conn.send(done)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.outcome = {
                "outcome": report.outcome,
                "longrepr": str(report.longrepr)[-2000:] if report.failed else "",
            }

    def _children(self) -> dict[str, Any]:
        """What the other processes of this side recorded (:mod:`.interpreter`), for a
        ``ready`` or ``result``."""
        if not self.children:
            return {"children": []}
        return {"children": interpreter.recorded(self.children, os.getpid())}

    def measure(self, call: BenchCall) -> BenchmarkResult:
        """Inside the test's ``infer_bench`` call: warm up, report ready, then time blocks
        on demand until told to finish (returns the result) or to skip."""
        if self.ending:
            _skip()
        prepared = call.prepared
        sampler = prepared.sampler
        warm = call.warm(max(call.opts.min_sample_time, protocol.SAMPLE_TIME_S))
        ready = protocol.Ready(
            ev=protocol.READY,
            name=call.name,
            backend=prepared.backend,
            env=prepared.env,
            info=prepared.info,
            block=warm.block,
            per_call_s=warm.per_call_s,
            origins=None if self.origins is None else self.origins.read(),
            children=self._children()["children"],
        )
        self.conn.send(ready)
        samples: list[float] = []
        while True:
            message = self.recv()
            op = message.get("op")
            if op == protocol.BLOCK:
                # The controller's calls per sample: both sides must time identical
                # blocks, or drift (preemption by a noisy neighbour) hits them unequally.
                calls = int(message.get("calls") or warm.block)
                # The CPU the controller times both sides on (None: not pinned).
                cpu = message.get("cpu")
                values, metrics = take_block(
                    sampler,
                    int(message["n"]),
                    calls,
                    call.opts.disable_gc,
                    None if cpu is None else int(cpu),
                )
                samples.extend(values)
                self.send(ev=protocol.SAMPLES, values=values, metrics=metrics)
            elif op == protocol.PROFILE:
                # Outside the blocks: what one call does (the controller compares both
                # sides' records, and judges a GPU's device time from them).
                mode = str(message.get("mode") or call.opts.profile)
                per_call = float(message.get("per_call_s") or warm.per_call_s)
                work = profile.run(prepared, mode, per_call)
                self.send(ev=protocol.PROFILED, work=None if work is None else work.to_json())
            elif op == protocol.FINISH:
                result = call.result(from_warm(samples, warm))
                children = self._children()
                self.send(ev=protocol.RESULT, median=result.median, n=len(samples), **children)
                return result
            elif op == protocol.SKIP:
                # The controller wants a later call of this test: this one returns
                # unmeasured (no samples, like --perf-disable) and the test goes on.
                return call.disabled_result()
            else:  # END, or anything unknown: let the test finish, measuring nothing
                self.ending = True
                _skip()


def main(argv: list[str] | None = None) -> int:
    """``python -m pytest_infperf.abworker ADDRESS WORKTREE ROOTDIR PYTHONPATH -- ARGS``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 4 or protocol.AUTHKEY_ENV not in os.environ:
        # Started by hand: say what it is instead of a traceback.
        print(
            "usage: python -m pytest_infperf.abworker ADDRESS WORKTREE ROOTDIR PYTHONPATH "
            "-- PYTEST_ARGS\nthe far side of --perf-ab; pytest-infperf starts it itself",
            file=sys.stderr,
        )
        return 2
    address, worktree, rootdir, pythonpath = args[:4]
    _follow_parent()
    pytest_args = args[args.index("--") + 1 :] if "--" in args else []
    authkey = bytes.fromhex(os.environ.pop(protocol.AUTHKEY_ENV))
    options = json.loads(os.environ.pop(protocol.OPTIONS_ENV, "") or "[]")
    # The controller's heap policy, before this process builds any model: the first call
    # decides, so the checkout's own ini cannot set another.
    heap.settle(os.environ.pop(protocol.HEAP_ENV, "") or "steady")
    # Listen on a socket only the controller knows (temp folder) and only it can
    # authenticate to (a fresh random key, passed in the environment).
    with Listener(address, family="AF_UNIX", authkey=authkey) as listener:
        conn = listener.accept()
    try:
        tree = Path(worktree)
        told = imports.ImportMap.from_json(os.environ.pop(protocol.IMPORTS_ENV, ""))
        if told is None:  # a controller that does not say what the project is
            extra = [str(tree / p) for p in pythonpath.split(os.pathsep) if p]
            sys.path[:0] = [*extra, str(tree)]
        elif not imports.held():  # not by its interpreter's start-up already
            imports.hold(told, tree)
        # Where pytest was invoked, in this checkout (a test may open paths relative to
        # it); the rootdir where that folder is not in this checkout.
        os.chdir(os.environ.pop(protocol.CWD_ENV, "") or rootdir)
        layer = served_layer(os.environ.pop(protocol.LAYER_ENV, ""))
        origins = None if told is None else proof.Origins(told, tree)
        children = os.environ.pop(protocol.CHILDREN_ENV, "")
        plugin = ABWorkerPlugin(conn, options, layer, origins, children)
        # No xdist: this process serves one measurement at a time, in its own session.
        options = ["--rootdir", rootdir, "-p", "no:cacheprovider", "-p", "no:xdist", "-q"]
        options.append("--no-header")
        code = int(pytest.main([*pytest_args, *options], plugins=[plugin]))
    except BaseException:
        try:
            conn.send({"ev": protocol.ERROR, "traceback": traceback.format_exc()[-4000:]})
        except OSError:
            pass
        raise
    finally:
        conn.close()
    _exit_now(code)


def _follow_parent(period: float = 1.0) -> None:
    """End this worker, and every process it started, when its controller is gone. The
    worker runs in its own process group (a terminal's Ctrl-C reaches the controller alone,
    which ends its workers in order); a controller killed outright, or interrupted between
    starting a worker and noting it, must not leave one waiting for a connection forever."""
    # The controller's PID from the environment: it may be gone already (the worker spends
    # a second importing pytest before it gets here), and os.getppid() would then name the
    # process that adopted it.
    given = os.environ.pop(protocol.PARENT_ENV, "")
    parent = int(given) if given.isdigit() else os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(period)
        if os.getpgid(0) == os.getpid():  # its own group: it and what it started
            os.killpg(os.getpid(), signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="infperf-follow-parent", daemon=True).start()


def _exit_now(code: int) -> NoReturn:
    """Exit without the interpreter's teardown of torch, transformers and the models the
    session held: of the ~3 s a worker took to exit after a compare of the examples on 2
    cores, 1.2-1.5 s came after its pytest session had ended. That session has ended
    (fixtures torn down) and atexit handlers still run; only the modules' teardown is
    skipped."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    raise SystemExit(main())
