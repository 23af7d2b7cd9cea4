"""Interleaved measurement: one benchmark timed on two code versions in the same job.

A stored baseline was measured at another time, maybe on another runner; a few percent of
machine drift then looks like a regression and no statistic can tell the two apart. Here
both sides run now, in alternating blocks (ABBA), and each verdict is decided on the
ratios of neighbouring blocks, in which drift common to both cancels.

The pieces:

- :class:`Checkout`: a commit checked out as a detached git worktree in a temporary folder
  (or the head's own tree), removed on success, failure and Ctrl-C;
- :class:`WorkerSide`: one ``python -m pytest_infperf.abworker`` process running pytest in
  a checkout (its rootdir, its folders first on ``sys.path``, plus ini
  ``infperf_ab_pythonpath`` folders such as ``src``) on the same selection of tests; asked
  to run a test up to its ``infer_bench`` call, it warms up and times blocks on demand;
- :class:`LocalSide`: the same for a model already prepared in this process;
- :func:`interleave`: blocks alternate ABBA until the paired test decides or the budget is
  spent, with sequential looks that split alpha.

A crashed worker fails the test it was serving with its error and is restarted for the
next one.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import itertools
import math
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from statistics import median
from typing import Any, Protocol

from . import environment, protocol
from . import memory as _memory
from .bench import BenchCall
from .compare import compare_paired
from .gitinfo import GitError
from .judge import Judge, generation_metrics
from .results import Comparison, Origin, Verdict
from .timing import Warm, take_block

#: One block from a side: seconds per call of each sample, and the per-sample figures the
#: sampler recorded besides (a generation's TTFT and TPOT; empty otherwise).
Block = tuple[list[float], dict[str, list[float]]]

#: Looks at the data after this many pairs, and the share of alpha each look spends
#: (Bonferroni over the looks: the shares sum to 1, so the overall error rate stays at
#: alpha). Eight pairs cannot reach p < 1/256 (exact signed-rank), so the first look needs
#: a quarter; the last look gets the most because the cases still open there are the
#: close ones, where power matters. A look cut short by the time budget spends what is left.
LOOKS = (8, 16, 32, 64, 128)
LOOK_SHARES = (2 / 8, 1 / 8, 1 / 8, 1 / 8, 3 / 8)
CONNECT_TIMEOUT_S = 120.0
#: Fewest generations per block of an interleaved generation benchmark (see interleave).
GENERATIONS_PER_BLOCK = 3
#: How many times a single call's time budget an interleaved generation run may take.
GENERATION_BUDGET = 4.0
_SERIAL = itertools.count(1)


class ABError(Exception):
    """A worker side failed; the message carries its error."""


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


class Side(Protocol):
    """One side of an interleaved run: something that times blocks of calls on demand."""

    def block(self, count: int, calls: int) -> Block:
        """``count`` samples of ``calls`` calls each, in seconds per call, and what the
        sampler recorded per sample besides."""
        ...


class LocalSide:
    """The model prepared in this process (the head of ``--perf-ab``)."""

    def __init__(self, sampler: Any, disable_gc: bool) -> None:
        self.sampler = sampler
        self.disable_gc = disable_gc

    def block(self, count: int, calls: int) -> Block:
        return take_block(self.sampler, count, calls, self.disable_gc)


class Checkout:
    """A commit checked out as a detached worktree (``sha``), or the head's working tree
    as it is (``sha=None``); paths of the head's checkout map onto it."""

    def __init__(self, toplevel: Path, sha: str | None, tmp: Path, title: str = "") -> None:
        self.toplevel = toplevel
        self.sha = sha
        self.tmp = tmp
        #: For messages: "merge-base 1a2b3c4d5e", "the working tree".
        self.title = title or (f"commit {sha[:10]}" if sha else "the working tree")
        self.root = toplevel if sha is None else tmp / f"tree-{sha[:10]}"
        self._added = False

    def add(self) -> None:
        if self.sha is None or self._added:
            return
        import git

        repo = git.Repo(self.toplevel)
        try:
            repo.git.worktree("prune")
            repo.git.worktree("add", "--detach", "--force", str(self.root), self.sha)
        except git.GitCommandError as exc:
            raise GitError(
                f"cannot check out {self.sha[:10]} as a worktree: {exc.stderr.strip()}"
            ) from None
        self._added = True

    def map(self, path: Path) -> Path:
        """A path in the head checkout -> the same path in this checkout."""
        try:
            return self.root / path.resolve().relative_to(self.toplevel)
        except ValueError:
            return path

    def remove(self) -> None:
        if not self._added:
            return
        self._added = False
        for args in (["worktree", "remove", "--force", str(self.root)], ["worktree", "prune"]):
            subprocess.run(["git", *args], cwd=self.toplevel, capture_output=True, check=False)


@dataclasses.dataclass(frozen=True)
class Selection:
    """The tests a worker collects: the controller's own selection, mapped."""

    rootdir: Path
    args: tuple[str, ...]
    pythonpath: tuple[str, ...]
    keyword: str = ""
    markexpr: str = ""


class WorkerSide:
    """One worker process serving measurements of one checkout."""

    def __init__(self, checkout: Checkout, selection: Selection, label: str) -> None:
        self.checkout = checkout
        self.selection = selection
        self.label = label
        self.proc: subprocess.Popen[bytes] | None = None
        self.conn: Any = None
        self.nodeids: set[str] = set()
        self.current: str | None = None
        self.starts = 0
        self.serial = next(_SERIAL)
        self.log = checkout.tmp / f"{label}-{self.serial}-worker.log"

    def _args(self) -> list[str]:
        out: list[str] = []
        for arg in self.selection.args:
            path_part, sep, rest = arg.partition("::")
            p = Path(path_part)
            if p.exists():
                out.append(str(self.checkout.map(p)) + sep + rest)
        if self.selection.keyword:
            out += ["-k", self.selection.keyword]
        if self.selection.markexpr:
            out += ["-m", self.selection.markexpr]
        return out

    def start(self) -> None:
        from multiprocessing.connection import Client

        self.checkout.add()
        authkey = secrets.token_bytes(32)
        self.starts += 1
        address = str(self.checkout.tmp / f"{self.label}-{self.serial}-{self.starts}.sock")
        env = {**os.environ, protocol.AUTHKEY_ENV: authkey.hex(), "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("PYTEST_ADDOPTS", None)
        env.pop("PYTEST_XDIST_WORKER", None)
        rootdir = self.checkout.map(self.selection.rootdir)
        cmd = [
            sys.executable,
            "-m",
            "pytest_infperf.abworker",
            address,
            str(self.checkout.root),
            str(rootdir),
            os.pathsep.join(self.selection.pythonpath),
            "--",
            *self._args(),
            # A repository that holds pytest_infperf itself (this project's main job) has
            # the worker import the base's copy before pytest loads it as a plugin; pytest
            # then warns that it cannot rewrite its asserts, and `filterwarnings = error`
            # ended the worker before any test ran. Passed from here, so that a base
            # commit's older worker gets it too.
            "-W",
            "ignore::pytest.PytestAssertRewriteWarning",
        ]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=rootdir, env=env, stdout=log, stderr=log)
        # The worker listens; connect once it is up, unless it died first.
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            try:
                self.conn = Client(address, family="AF_UNIX", authkey=authkey)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.proc = None
                    raise ABError(
                        f"the A/B {self.label} worker ({self.checkout.title}) did not start: "
                        f"{self.log_tail()}"
                    ) from None
                time.sleep(0.05)
        first = self._recv()
        if first.get("ev") != protocol.COLLECTED:
            raise ABError(
                f"the A/B {self.label} worker ({self.checkout.title}) failed while collecting: "
                f"{self.log_tail()}"
            )
        self.nodeids = set(first["nodeids"])

    def ensure(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.start()

    def tests(self) -> set[str]:
        self.ensure()
        return set(self.nodeids)

    def log_tail(self, limit: int = 3000) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return text[-limit:].strip() or "(no output)"

    # --- messages ----------------------------------------------------------------------
    def _recv(self) -> dict[str, Any]:
        try:
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

    def _crashed(self, detail: str = "") -> Any:
        proc = self.proc
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        code = proc.returncode if proc is not None else None
        self.current = None
        self.proc = None
        raise ABError(
            f"the A/B {self.label} worker ({self.checkout.title}) crashed (exit code {code}): "
            f"{detail or self.log_tail()}"
        )

    # --- one test ------------------------------------------------------------------------
    def begin(self, nodeid: str, name: str | None) -> BaseCall:
        """Get ``nodeid``'s call ``name`` ready on this side."""
        self.ensure()
        if nodeid not in self.nodeids:
            return BaseCall("missing")
        if self.current != nodeid:
            self.end_test()
            self._send(op=protocol.RUN, nodeid=nodeid)
            self.current = nodeid
        while True:
            message = self._recv()
            if message.get("ev") == protocol.READY:
                if message.get("name") == name:
                    return BaseCall("ready", dict(message.get("env") or {}), int(message["block"]))
                self._send(op=protocol.SKIP)  # a call the other side does not make
                continue
            if message.get("ev") == protocol.DONE:
                self.current = None
                if message.get("outcome") in ("failed", "error"):
                    return BaseCall("failed", error=str(message.get("longrepr") or "").strip())
                return BaseCall("missing")

    def block(self, count: int, calls: int) -> Block:
        self._send(op=protocol.BLOCK, n=count, calls=calls)
        message = self._recv()
        metrics = {
            str(k): [float(v) for v in values]
            for k, values in dict(message.get("metrics") or {}).items()
        }
        return [float(v) for v in message["values"]], metrics

    def finish_call(self) -> dict[str, Any]:
        self._send(op=protocol.FINISH)
        return self._recv()

    def end_test(self) -> None:
        """Let the current test run to its end (later calls are skipped)."""
        if self.current is None or self.proc is None:
            return
        self._send(op=protocol.END)
        while True:
            message = self._recv()
            if message.get("ev") == protocol.DONE:
                break
            if message.get("ev") == protocol.READY:
                self._send(op=protocol.END)
        self.current = None

    def close(self) -> None:
        if self.proc is not None and self.current is not None:
            with contextlib.suppress(ABError, OSError):
                self.end_test()
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                self.conn.send({"op": protocol.QUIT})
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class ABController:
    """The base side of one pytest session: the base commit's worktree and its worker."""

    def __init__(
        self, base_sha: str, toplevel: Path, selection: Selection, title: str = "merge-base"
    ) -> None:
        self.base_sha = base_sha
        self.toplevel = toplevel
        self.selection = selection
        self.tmp = Path(tempfile.mkdtemp(prefix="infperf-ab-"))
        self.checkout = Checkout(toplevel, base_sha, self.tmp, f"{title} {base_sha[:10]}")
        self.base = WorkerSide(self.checkout, selection, "base")
        self._closed = False
        atexit.register(self.close)

    def setup(self) -> None:
        """Check the base commit out (GitError: a usage error for the caller)."""
        try:
            self.checkout.add()
        except GitError:
            self.close()
            raise

    def base_tests(self) -> set[str]:
        return self.base.tests()

    def confirm(
        self,
        nodeid: str,
        name: str | None,
        calls: int,
        per_sample_s: float,
        opts: dict[str, Any],
        metrics: tuple[str, ...] = (),
    ) -> Interleaved:
        """Interleave the call again between two processes that have run nothing yet: a new
        worker on the base checkout and one on the head's own tree. A process can sit in a
        slow or fast state for seconds (pyperf and asv run many processes for this reason);
        a first pass and a confirmation in different processes turn that bias into
        variance instead of a verdict."""
        head_tree = Checkout(self.toplevel, None, self.tmp, "the working tree")
        base = WorkerSide(self.checkout, self.selection, "base")
        head = WorkerSide(head_tree, self.selection, "head")
        try:
            for side in (base, head):
                ready = side.begin(nodeid, name)
                if not ready.ready:
                    detail = f": {ready.error}" if ready.error else ""
                    raise ABError(
                        f"a fresh {side.label} process ({side.checkout.title}) did not reach "
                        f"{nodeid} call {name!r} ({ready.status}{detail})"
                    )
            return interleave(base, head, calls, per_sample_s, opts, metrics)
        finally:
            base.close()
            head.close()

    def end_test(self, nodeid: str) -> None:
        if self.base.current == nodeid:
            self.base.end_test()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.base.close()
        self.checkout.remove()
        shutil.rmtree(self.tmp, ignore_errors=True)
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)


@dataclasses.dataclass
class Interleaved:
    """One interleaved run: both sides' samples, the pairs' log-ratios, and the looks."""

    head: list[float]
    base: list[float]
    ratios: list[float]
    #: The alpha the last look spent, over all judged metrics together.
    alpha_used: float
    looks: int
    block_samples: int
    seconds: float
    #: A generation benchmark: each judged metric's samples per side and pair log-ratios.
    head_metrics: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    base_metrics: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    metric_ratios: dict[str, list[float]] = dataclasses.field(default_factory=dict)

    def details(self) -> dict[str, Any]:
        return {
            "pairs": len(self.ratios),
            "looks": self.looks,
            "alpha_at_last_look": self.alpha_used,
            "block_samples": self.block_samples,
            "ab_seconds": round(self.seconds, 3),
        }

    def __add__(self, later: Interleaved) -> Interleaved:
        """A confirmation's samples appended; its pairs and looks are the ones that count."""

        def joined(a: dict[str, list[float]], b: dict[str, list[float]]) -> dict[str, list[float]]:
            return {k: a.get(k, []) + b.get(k, []) for k in {*a, *b}}

        return dataclasses.replace(
            later,
            head=self.head + later.head,
            base=self.base + later.base,
            head_metrics=joined(self.head_metrics, later.head_metrics),
            base_metrics=joined(self.base_metrics, later.base_metrics),
        )


def interleave(
    base: Side,
    head: Side,
    calls: int,
    per_sample_s: float,
    opts: dict[str, Any],
    metrics: tuple[str, ...] = (),
    time_scale: float = 4.0,
) -> Interleaved:
    """Alternate base (A) and head (B) blocks in ABBA order; stop at the first look whose
    paired test decides, or when the budget (``max_time`` x ``time_scale``) is spent.

    ``metrics``: judge these per-sample figures (a generation's TTFT and TPOT) instead of
    the time per call, each at an even share of the look's alpha; a look decides when all
    of them are decided."""
    count = max(1, min(256, math.ceil(protocol.BLOCK_TIME_S / max(per_sample_s, 1e-9))))
    if metrics:
        # A generation is long, so a block would be one of them; but the first generation
        # after the other side's block runs slower (measured here with a tiny Llama on 2
        # cores: TTFT 27 ms against 17-21 ms back to back, as the other process's OpenMP
        # threads still spin), and a pair of single generations is mostly that noise.
        # The median of 3 per block leaves the first one out.
        count = max(count, GENERATIONS_PER_BLOCK)
    budget = opts["max_time"] * time_scale  # both sides, so about twice a stored run each
    if metrics:
        # A sample is a whole generation and a pair 4 blocks of them: within a single call's
        # budget (12 s by default) a run got 8-12 pairs, too few to decide anything with a
        # noisy neighbour (benchmarks/decision_quality.py --suite generation: 0 of 9 A/A
        # decided, TTFT intervals of x0.6-x1.8). Generation gets GENERATION_BUDGET times it.
        budget *= GENERATION_BUDGET
    spent = 0.0
    alpha_look = 0.0
    a_all: list[float] = []
    b_all: list[float] = []
    ratios: list[float] = []
    # Every figure the sides recorded is kept (a generation's ITL and E2E too, for the
    # head's result); the judged ones also get their pairs' log-ratios.
    a_met: dict[str, list[float]] = {}
    b_met: dict[str, list[float]] = {}
    m_ratios: dict[str, list[float]] = {m: [] for m in metrics}
    looks = 0
    start = time.perf_counter()
    while True:
        a1, a1m = base.block(count, calls)
        b1, b1m = head.block(count, calls)
        b2, b2m = head.block(count, calls)
        a2, a2m = base.block(count, calls)
        a_all += a1 + a2
        b_all += b1 + b2
        ratios += [_log_ratio(b1, a1), _log_ratio(b2, a2)]
        for side, got in ((a_met, (a1m, a2m)), (b_met, (b1m, b2m))):
            for block in got:
                for key, values in block.items():
                    side.setdefault(key, []).extend(values)
        for m in metrics:
            if not all(block.get(m) for block in (a1m, a2m, b1m, b2m)):
                raise ABError(
                    f"a side recorded no {m} figures for its block: is the same call a "
                    "generation benchmark (infer_bench.generate) on both sides?"
                )
            m_ratios[m] += [_log_ratio(b1m[m], a1m[m]), _log_ratio(b2m[m], a2m[m])]
        # The budget may end a run only after the first look: fewer pairs than that give
        # no bound at any useful alpha, so stopping earlier would measure for nothing.
        out_of_time = len(ratios) >= LOOKS[0] and time.perf_counter() - start >= budget
        at_look = looks < len(LOOKS) and len(ratios) >= LOOKS[looks]
        if at_look or out_of_time:
            share = 1.0 - spent if out_of_time else LOOK_SHARES[looks]
            spent += share
            alpha_look = opts["alpha"] * share
            looks += 1
            if metrics:
                each = alpha_look / len(metrics)
                verdicts = [
                    compare_paired(m_ratios[m], opts["threshold"], each).verdict for m in metrics
                ]
                # Go on until every metric is decided: the message says which regressed.
                decided = Verdict.INCONCLUSIVE not in verdicts
            else:
                verdict = compare_paired(ratios, opts["threshold"], alpha_look).verdict
                decided = verdict is not Verdict.INCONCLUSIVE
            if decided or out_of_time or looks >= len(LOOKS):
                break
    seconds = time.perf_counter() - start
    return Interleaved(
        b_all, a_all, ratios, alpha_look, looks, count, seconds, b_met, a_met, m_ratios
    )


def _log_ratio(head: Sequence[float], base: Sequence[float]) -> float:
    return math.log(median(head) / median(base))


@dataclasses.dataclass
class PairedRun:
    """An interleaved measurement of one call: the verdict, both sides' samples, the head's
    warmup, and the head process's memory over the run."""

    comparison: Comparison
    run: Interleaved
    warm: Warm
    memory: dict[str, Any]


def run_paired(
    call: BenchCall, controller: ABController, judge: Judge, origin: Origin
) -> PairedRun | BaseCall:
    """``call`` interleaved with the same call on the controller's base side (the head is
    this process's prepared model); a regression is confirmed in fresh processes on both
    sides. Returns the base side's answer instead when it is not ready (no such test or
    call, or its test failed first). Raises :class:`ABError` when a worker crashes."""
    base = controller.base.begin(call.nodeid, call.name)
    if not base.ready:
        return base
    opts = call.opts
    env_diff = environment.diff(call.prepared.env, base.env)
    metrics = generation_metrics(opts) if call.prepared.generation is not None else ()

    def judged(run: Interleaved) -> Comparison:
        details = run.details()
        if not metrics:
            return judge.paired(
                run.head, run.base, run.ratios, opts, origin, run.alpha_used, details, env_diff
            )
        k = len(metrics)
        part_opts = {**opts, "alpha": opts["alpha"] / k}
        parts = {
            m: judge.paired(
                run.head_metrics[m],
                run.base_metrics[m],
                run.metric_ratios[m],
                part_opts,
                origin,
                run.alpha_used / k,
                details,
                env_diff,
                metric=m,
            )
            for m in metrics
        }
        return judge.combined(parts, opts)

    sampler = call.prepared.sampler
    warm = call.warm(max(opts["min_sample_time"], protocol.SAMPLE_TIME_S))
    local = LocalSide(sampler, opts["disable_gc"])
    per_sample = warm.per_call_s * warm.block
    _memory.before_timed()
    run = interleave(controller.base, local, warm.block, per_sample, opts, metrics)
    c = judged(run)
    if c.verdict is Verdict.REGRESSION and opts["remeasure"] > 0:
        # The base worker waits inside its call meanwhile: nothing else runs.
        try:
            again = controller.confirm(
                call.nodeid, call.name, warm.block, per_sample, opts, metrics
            )
            where = "fresh processes"
        except ABError as exc:
            again = interleave(controller.base, local, warm.block, per_sample, opts, metrics)
            where = f"the same processes (fresh ones could not run it: {exc})"
        second = judged(again)
        second.details["confirmed_in"] = where
        c = judge.confirmed(c, second)
        run = run + again
    memory = _memory.after_timed()
    controller.base.finish_call()
    return PairedRun(c, run, warm, memory)
