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
- :func:`interleave`: one process pair's blocks, alternating ABBA, taken until the judge's
  plan says the pair has enough;
- :func:`run_paired`: the process pairs of one comparison: this process with the base
  worker first, then pairs of worker processes (a head worker in the working tree and a
  base worker in the base checkout, started once and reused by later benchmarks) until the
  plan stops. The judge (:class:`~pytest_infperf.judge.PairedPlan`) decides everything:
  how many quads, how many pairs, every alpha split; this module only measures.

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
from multiprocessing.connection import Client
from pathlib import Path
from statistics import median
from typing import Any, Protocol

from ..core.results import Comparison, Origin
from ..judge.judge import Judge, generation_metrics
from ..judge.plan import PairedPlan
from ..measure import environment
from ..measure import memory as _memory
from ..measure.call import BenchCall
from ..measure.timing import Warm, take_block
from ..stats import pooled as _pool
from ..store.git import GitError
from . import protocol

#: One block from a side: seconds per call of each sample, and the per-sample figures the
#: sampler recorded besides (a generation's TTFT and TPOT; empty otherwise).
Block = tuple[list[float], dict[str, list[float]]]

#: Target duration of one block of an interleaved run, on each side. A quad (A B B A) is
#: four of them; the process pair, not the block, is the unit the verdict replicates, so
#: blocks are short and pairs many (half the 50 ms blocks of before).
BLOCK_S = 0.025
#: Generations per block of an interleaved generation benchmark: the block's figure is their
#: median. The quad contrast cancels the mean penalty of the first generation after a switch,
#: not its spread; with single generations TTFT intervals stayed at +-40% after 8 quads.
GENERATIONS_PER_BLOCK = 3
CONNECT_TIMEOUT_S = 120.0
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
        import git  # noqa: PLC0415 (gitpython: ~0.3 s, only when git is asked)

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

        self.checkout.add()
        authkey = secrets.token_bytes(32)
        self.starts += 1
        address = str(self.checkout.tmp / f"{self.label}-{self.serial}-{self.starts}.sock")
        env = {**os.environ, protocol.AUTHKEY_ENV: authkey.hex(), "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("PYTEST_ADDOPTS", None)
        env.pop("PYTEST_XDIST_WORKER", None)
        if self.hash_seed is not None:
            env["PYTHONHASHSEED"] = str(self.hash_seed)
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
        if not self.request(nodeid):
            return BaseCall("missing")
        return self.await_ready(name)

    def request(self, nodeid: str) -> bool:
        """Ask for ``nodeid`` to run up to its calls (False: this side has no such test).
        Returns at once, so two sides can get ready at the same time."""
        self.ensure()
        if nodeid not in self.nodeids:
            return False
        if self.current != nodeid:
            self.end_test()
            self._send(op=protocol.RUN, nodeid=nodeid)
            self.current = nodeid
        return True

    def await_ready(self, name: str | None) -> BaseCall:
        """Wait until the requested test reaches its call ``name``, warmed up."""
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
        self.pairs: list[ProcessPair] = []
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

    def process_pair(self, k: int) -> ProcessPair:
        """The ``k``-th extra process pair (k >= 1), started on first use and kept for
        the session's later benchmarks: a base worker in the base checkout and a head
        worker in the working tree, with the same hash seed."""
        while len(self.pairs) < k:
            seed = len(self.pairs) + 1
            head_tree = Checkout(self.toplevel, None, self.tmp, "the working tree")
            self.pairs.append(
                ProcessPair(
                    WorkerSide(self.checkout, self.selection, f"base{seed}", seed),
                    WorkerSide(head_tree, self.selection, f"head{seed}", seed),
                )
            )
        return self.pairs[k - 1]

    def end_test(self, nodeid: str) -> None:
        if self.base.current == nodeid:
            self.base.end_test()
        for pair in self.pairs:
            pair.end_test(nodeid)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.base.close()
        for pair in self.pairs:
            pair.close()
        self.checkout.remove()
        shutil.rmtree(self.tmp, ignore_errors=True)
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)


@dataclasses.dataclass
class ProcessPair:
    """Two worker processes, base and head, that measure together."""

    base: WorkerSide
    head: WorkerSide

    def begin(self, nodeid: str, name: str | None) -> None:
        """Both sides to ``nodeid``'s call ``name``, getting ready at the same time (model
        building and warmup are not timed, so they may overlap)."""
        asked = [side for side in (self.base, self.head) if side.request(nodeid)]
        if len(asked) < 2:
            raise ABError(f"a worker process pair does not collect {nodeid}")
        for side in asked:
            ready = side.await_ready(name)
            if not ready.ready:
                detail = f": {ready.error}" if ready.error else ""
                raise ABError(
                    f"the {side.label} worker ({side.checkout.title}) did not reach {nodeid} "
                    f"call {name!r} ({ready.status}{detail})"
                )

    def finish(self) -> None:
        for side in (self.base, self.head):
            if side.current is not None and side.proc is not None:
                side.finish_call()

    def end_test(self, nodeid: str) -> None:
        for side in (self.base, self.head):
            if side.current == nodeid:
                side.end_test()

    def close(self) -> None:
        self.base.close()
        self.head.close()


@dataclasses.dataclass
class PairRun:
    """One process pair's interleaved measurement: each side's samples, every per-sample
    figure the sides recorded, and per judged metric the quads' contrasts and switch
    penalties (log units)."""

    head: list[float]
    base: list[float]
    head_metrics: dict[str, list[float]]
    base_metrics: dict[str, list[float]]
    quads: dict[str, list[float]]
    penalties: dict[str, list[float]]
    seconds: float
    #: Which processes: "this process" for the first pair's head, else a worker's label.
    head_process: str

    def summary(self, metric: str) -> _pool.PairSummary:
        return _pool.summarize_pair(self.quads[metric])


def interleave(
    base: Side,
    head: Side,
    calls: int,
    per_sample_s: float,
    plan: PairedPlan,
    head_process: str = "this process",
) -> PairRun:
    """One process pair: base (A) and head (B) blocks in ABBA quads, until the plan says
    the pair has enough. Each judged metric gets a quad contrast per quad: "median" is the
    time per call; a generation's metrics ("ttft", "tpot") are the figures its sampler
    recorded per generation. The first block after a switch pays a penalty (the other
    process's threads still spinning, cold caches: TTFT 27 ms against 17-21 ms back to back,
    measured with a tiny Llama on 2 cores); the quad contrast cancels its mean."""
    metrics = plan.metrics
    count = block_count(per_sample_s, generation=metrics != ("median",))
    a_all: list[float] = []
    b_all: list[float] = []
    a_met: dict[str, list[float]] = {}
    b_met: dict[str, list[float]] = {}
    quads: dict[str, list[float]] = {m: [] for m in metrics}
    penalties: dict[str, list[float]] = {m: [] for m in metrics}
    start = time.perf_counter()
    while True:
        blocks = [
            base.block(count, calls),
            head.block(count, calls),
            head.block(count, calls),
            base.block(count, calls),
        ]
        a_all += blocks[0][0] + blocks[3][0]
        b_all += blocks[1][0] + blocks[2][0]
        for side, got in ((a_met, (blocks[0], blocks[3])), (b_met, (blocks[1], blocks[2]))):
            for _, block_metrics in got:
                for key, values in block_metrics.items():
                    side.setdefault(key, []).extend(values)
        for m in metrics:
            logs = [math.log(median(_figures(block, m))) for block in blocks]
            a1, b1, b2, a2 = ([v] for v in logs)
            quads[m] += _pool.quad_contrasts(a1, b1, b2, a2)
            penalties[m] += _pool.switch_penalties(a1, b1, b2, a2)
        if not plan.more_quads(quads, time.perf_counter() - start):
            break
    return PairRun(
        b_all,
        a_all,
        b_met,
        a_met,
        quads,
        penalties,
        time.perf_counter() - start,
        head_process,
    )


def block_count(per_sample_s: float, generation: bool) -> int:
    """Samples per block: about ``BLOCK_S`` of them, and a generation's block at least
    ``GENERATIONS_PER_BLOCK``."""
    count = max(1, min(256, math.ceil(BLOCK_S / max(per_sample_s, 1e-9))))
    return max(count, GENERATIONS_PER_BLOCK) if generation else count


def _side_values(runs: Sequence[PairRun], side: str) -> dict[str, list[float]]:
    """One side's values over all process pairs: ``"median"`` its samples (time per call),
    and every per-sample figure its sampler recorded."""
    out: dict[str, list[float]] = {"median": []}
    for run in runs:
        out["median"].extend(run.head if side == "head" else run.base)
        for key, values in (run.head_metrics if side == "head" else run.base_metrics).items():
            out.setdefault(key, []).extend(values)
    return out


def _figures(block: Block, metric: str) -> list[float]:
    """A block's values of ``metric``: its samples' times, or a figure its sampler recorded."""
    values, metrics = block
    if metric == "median":
        return values
    got = metrics.get(metric)
    if not got:
        raise ABError(
            f"a side recorded no {metric} figures for its block: is the same call a "
            "generation benchmark (infer_bench.generate) on both sides?"
        )
    return got


@dataclasses.dataclass
class PairedRun:
    """An interleaved comparison of one call: the verdict, each process pair's run, the
    head's warmup, and the head process's memory over its own pair."""

    comparison: Comparison
    runs: list[PairRun]
    warm: Warm
    memory: dict[str, Any]

    @property
    def head(self) -> list[float]:
        return _side_values(self.runs, "head")["median"]

    @property
    def base(self) -> list[float]:
        return _side_values(self.runs, "base")["median"]

    def metrics(self, side: str) -> dict[str, list[float]]:
        """The per-sample figures the side's sampler recorded (a generation's TTFT...)."""
        out = _side_values(self.runs, side)
        del out["median"]
        return out

    def record(self) -> dict[str, Any]:
        """What the JSON keeps of it: per process pair its quads and summary."""
        return {
            "pairs": [
                {
                    "head_process": run.head_process,
                    "seconds": round(run.seconds, 3),
                    "quads": {m: [round(q, 6) for q in qs] for m, qs in run.quads.items()},
                    "switch_penalty": {
                        m: round(median(ps), 6) for m, ps in run.penalties.items() if ps
                    },
                    "summary": {m: run.summary(m).to_json() for m in run.quads},
                }
                for run in self.runs
            ]
        }


def run_paired(
    call: BenchCall,
    controller: ABController,
    judge: Judge,
    origin: Origin,
    warm_per_call_s: float | None = None,
) -> PairedRun | BaseCall:
    """``call`` interleaved with the same call of the base commit, over as many process
    pairs as the judge's plan asks for: first this process (the head, its model prepared
    here) with the controller's base worker, then pairs of worker processes. Returns the
    base side's answer instead when it is not ready (no such test or call, or its test
    failed first). ``warm_per_call_s``: the head has just been measured (settling after a
    stored pass, at this many seconds per call): only its block size is calibrated again.
    Raises :class:`ABError` when the base worker crashes; a worker pair that fails ends the
    replication there, and says why."""
    base = controller.base.begin(call.nodeid, call.name)
    if not base.ready:
        return base
    opts = call.opts
    env_diff = environment.diff(call.prepared.env, base.env)
    metrics = generation_metrics(opts) if call.prepared.generation is not None else ("median",)
    plan = judge.plan(opts, metrics)
    target = max(opts.min_sample_time, protocol.SAMPLE_TIME_S)
    if warm_per_call_s is None:
        warm = call.warm(target)
    else:
        warm = call.recalibrate(target, warm_per_call_s)
    local = LocalSide(call.prepared.sampler, opts.disable_gc)
    per_sample = warm.per_call_s * warm.block
    started = time.perf_counter()
    _memory.before_timed()
    runs = [interleave(controller.base, local, warm.block, per_sample, plan)]
    memory = _memory.after_timed()
    controller.base.finish_call()
    summaries = {m: [runs[0].summary(m)] for m in metrics}
    look = plan.look(summaries)
    stopped_early = ""
    while not look.stop:
        k = len(runs)
        try:
            pair = controller.process_pair(k)
            pair.begin(call.nodeid, call.name)
            try:
                run = interleave(
                    pair.base, pair.head, warm.block, per_sample, plan, pair.head.label
                )
            finally:
                pair.finish()
        except ABError as exc:
            stopped_early = f"process pair {k + 1} could not measure: {exc}"
            break
        runs.append(run)
        for m in metrics:
            summaries[m].append(run.summary(m))
        look = plan.look(summaries)
    details: dict[str, Any] = {
        "quads": sum(len(run.quads[metrics[0]]) for run in runs),
        "block_samples": block_count(per_sample, generation=metrics != ("median",)),
        "ab_seconds": round(time.perf_counter() - started, 3),
        "pair_log_ratios": {m: [round(sm.mean, 6) for sm in summaries[m]] for m in metrics},
    }
    if stopped_early:
        details["replication_stopped"] = stopped_early
    head, base_values = _side_values(runs, "head"), _side_values(runs, "base")
    c = judge.interleaved(look, head, base_values, opts, origin, details, env_diff)
    return PairedRun(c, runs, warm, memory)
