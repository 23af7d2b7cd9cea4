"""The base side of ``--perf-ab``: a pytest process running the merge-base's code.

PYTEST_DONT_REWRITE

Started by :mod:`pytest_infperf.ab` as ``python -m pytest_infperf.abworker``. It runs
pytest in the base worktree (that checkout's rootdir, its folders first on ``sys.path``)
with a plugin that, instead of running the session, waits for commands: run this test;
inside it, ``infer_bench`` warms up, says it is ready, then times blocks of samples on
demand, so the controller can interleave them with the head's blocks.

Messages (dicts over a ``multiprocessing.connection``): controller -> worker ``run``,
``block``, ``finish``, ``skip``, ``end``, ``quit``; worker -> controller ``collected``,
``ready``, ``samples``, ``result``, ``done``, ``error``.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

# Imported before sys.path changes: the plugin always runs the head's pytest_infperf, even
# when the base worktree holds an older copy of it.
import pytest

from .timing import take_samples, warm_up

if TYPE_CHECKING:
    from collections.abc import Callable
    from multiprocessing.connection import Connection

    from .backends import Prepared
    from .results import BenchmarkResult
    from .timing import Warm

AUTHKEY_ENV = "INFPERF_AB_AUTHKEY"


def _skip() -> NoReturn:
    # pytest.skip raises an OutcomeException (a BaseException): a test's own
    # `except Exception` cannot swallow it.
    pytest.skip("not measured: the A/B controller needs no base measurement here")


class ABWorkerPlugin:
    """Serves the controller's commands inside the base checkout's pytest session."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.items: dict[str, pytest.Item] = {}
        self.ending = False
        self.outcome: dict[str, Any] = {}

    def send(self, **message: Any) -> None:
        self.conn.send(message)

    def recv(self) -> dict[str, Any]:
        message = self.conn.recv()
        return dict(message)

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        from .plugin import session_key

        config.stash[session_key].ab_server = self

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            if "infer_bench" in getattr(item, "fixturenames", ()):
                self.items[item.nodeid] = item
        self.send(ev="collected", nodeids=sorted(self.items))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        while True:
            try:
                message = self.recv()
            except (EOFError, OSError):
                return True
            op = message.get("op")
            if op == "quit":
                return True
            if op != "run":
                continue
            nodeid = str(message["nodeid"])
            item = self.items.get(nodeid)
            self.ending = False
            self.outcome = {"outcome": "missing"}
            if item is not None:
                item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
            self.send(ev="done", nodeid=nodeid, **self.outcome)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.outcome = {
                "outcome": report.outcome,
                "longrepr": str(report.longrepr)[-2000:] if report.failed else "",
            }

    def serve(
        self,
        name: str | None,
        prepared: Prepared,
        opts: dict[str, Any],
        check: Any,
        build: Callable[[list[float], Warm], BenchmarkResult],
    ) -> BenchmarkResult:
        """Inside the base test's ``infer_bench`` call: warm up, report ready, then time
        blocks on demand until told to finish (returns the result) or skip."""
        if self.ending:
            _skip()
        sampler = prepared.sampler
        with sampler.context():
            from .ab import AB_SAMPLE_TIME_S

            warm = warm_up(
                sampler,
                opts,
                check_output=check,
                target=max(opts["min_sample_time"], AB_SAMPLE_TIME_S),
            )
            self.send(
                ev="ready",
                name=name,
                backend=prepared.backend,
                env=prepared.env,
                info=prepared.info,
                block=warm.block,
            )
            samples: list[float] = []
            while True:
                message = self.recv()
                op = message.get("op")
                if op == "block":
                    # The head's calls per sample: both sides must time identical blocks,
                    # or drift (preemption by a noisy neighbour) hits them unequally.
                    calls = int(message.get("calls") or warm.block)
                    values = take_samples(sampler, int(message["n"]), calls, opts["disable_gc"])
                    samples.extend(values)
                    self.send(ev="samples", values=values)
                elif op == "finish":
                    result = build(samples, warm)
                    self.send(ev="result", median=result.median, n=len(samples))
                    return result
                elif op == "end":
                    self.ending = True
                    _skip()
                else:  # "skip": the controller wants another call of this test
                    _skip()


def main(argv: list[str] | None = None) -> int:
    """``python -m pytest_infperf.abworker ADDRESS WORKTREE ROOTDIR PYTHONPATH -- ARGS``."""
    from multiprocessing.connection import Listener

    args = list(sys.argv[1:] if argv is None else argv)
    address, worktree, rootdir, pythonpath = args[:4]
    pytest_args = args[args.index("--") + 1 :] if "--" in args else []
    authkey = bytes.fromhex(os.environ.pop(AUTHKEY_ENV))
    # Listen on a socket only the controller knows (temp folder) and only it can
    # authenticate to (a fresh random key, passed in the environment).
    with Listener(address, family="AF_UNIX", authkey=authkey) as listener:
        conn = listener.accept()
    try:
        tree = Path(worktree)
        extra = [str(tree / p) for p in pythonpath.split(os.pathsep) if p]
        sys.path[:0] = [*extra, str(tree)]
        os.chdir(rootdir)
        plugin = ABWorkerPlugin(conn)
        return int(
            pytest.main(
                [*pytest_args, "--rootdir", rootdir, "-p", "no:cacheprovider", "-q", "--no-header"],
                plugins=[plugin],
            )
        )
    except BaseException:
        try:
            conn.send({"ev": "error", "traceback": traceback.format_exc()[-4000:]})
        except OSError:
            pass
        raise
    finally:
        conn.close()


if __name__ == "__main__":
    raise SystemExit(main())
