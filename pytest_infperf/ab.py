"""``--perf-ab=REF``: measure the merge-base of REF and HEAD in the same job, interleaved.

A stored baseline was measured at another time, maybe on another runner; a few percent of
machine drift then looks like a regression and no statistic can tell the two apart. Here
both sides run now, in alternating blocks (ABBA), and each verdict is decided on the
ratios of neighbouring blocks, in which drift common to both cancels.

The controller (this pytest process, the head's code):

1. resolves the merge-base of REF and HEAD and checks it out as a detached git worktree in
   a temporary folder;
2. starts one worker process, ``python -m pytest_infperf.abworker``, whose pytest runs in
   that worktree (its rootdir, its folders first on ``sys.path``, plus ini
   ``infperf_ab_pythonpath`` folders such as ``src``) and collects the same selection;
3. when a head test calls ``infer_bench``, asks the worker to run the same test up to the
   call with the same name; the worker warms its model up and waits; the head warms its
   own; then blocks alternate until the verdict is decided or the budget is spent.

Worker and worktree are removed on success, failure and Ctrl-C; a crashed worker fails the
test it was serving with its error and is restarted for the next one.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .gitinfo import GitError

#: Looks at the data after this many pairs, and the share of alpha each look spends
#: (Bonferroni over the looks: the shares sum to 1, so the overall error rate stays at
#: alpha). Eight pairs cannot reach p < 1/256 (exact signed-rank), so the first look needs
#: a quarter; the last look gets the most because the cases still open there are the
#: close ones, where power matters. A look cut short by the time budget spends what is left.
LOOKS = (8, 16, 32, 64, 128)
LOOK_SHARES = (2 / 8, 1 / 8, 1 / 8, 1 / 8, 3 / 8)
#: Target duration of one block of samples on each side.
BLOCK_TIME_S = 0.05
#: Target duration of one sample in A/B mode: about 16 samples make a block.
AB_SAMPLE_TIME_S = BLOCK_TIME_S / 16
CONNECT_TIMEOUT_S = 120.0


class ABError(Exception):
    """The A/B base side failed; the message carries its error."""


class ABController:
    """Owns the base worktree and the worker process for one pytest session."""

    def __init__(
        self,
        ref: str,
        rootdir: Path,
        args: list[str],
        pythonpath: tuple[str, ...],
        keyword: str = "",
        markexpr: str = "",
    ) -> None:
        self.ref = ref
        self.rootdir = rootdir
        self.args = args
        self.pythonpath = pythonpath
        self.keyword = keyword
        self.markexpr = markexpr
        self.base_sha: str | None = None
        self.head_sha: str | None = None
        self.toplevel: Path | None = None
        self.tmp: Path | None = None
        self.worktree: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.conn: Any = None
        self.base_nodeids: set[str] = set()
        self.current: str | None = None
        self.crashes: list[str] = []
        self._closed = False

    # --- set up ------------------------------------------------------------------------
    def setup(self) -> None:
        """Resolve the merge-base and check it out (GitError: a usage error)."""
        from . import gitinfo

        repo = gitinfo.open_repo(self.rootdir)
        self.head_sha = gitinfo.head_sha(repo)
        target = gitinfo.resolve(repo, self.ref)
        self.base_sha = gitinfo.merge_base(repo, target, self.head_sha)
        self.toplevel = Path(repo.working_tree_dir).resolve()
        self.tmp = Path(tempfile.mkdtemp(prefix="infperf-ab-"))
        self.worktree = self.tmp / "base"
        import git

        try:
            repo.git.worktree("prune")
            repo.git.worktree("add", "--detach", "--force", str(self.worktree), self.base_sha)
        except git.GitCommandError as exc:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise GitError(
                f"cannot check out {self.base_sha[:10]} as a worktree: {exc.stderr.strip()}"
            ) from None
        atexit.register(self.close)

    def _map(self, path: Path) -> Path:
        """A path in the head checkout -> the same path in the base worktree."""
        assert self.toplevel is not None and self.worktree is not None
        try:
            return self.worktree / path.resolve().relative_to(self.toplevel)
        except ValueError:
            return path

    def _worker_args(self) -> list[str]:
        out: list[str] = []
        for arg in self.args:
            path_part, sep, rest = arg.partition("::")
            p = Path(path_part)
            if p.exists():
                out.append(str(self._map(p)) + sep + rest)
        if self.keyword:
            out += ["-k", self.keyword]
        if self.markexpr:
            out += ["-m", self.markexpr]
        return out

    def _start(self) -> None:
        from multiprocessing.connection import Client

        from .abworker import AUTHKEY_ENV

        assert self.tmp is not None and self.worktree is not None
        authkey = secrets.token_bytes(32)
        address = str(self.tmp / f"worker-{len(self.crashes)}.sock")
        log = (self.tmp / "worker.log").open("ab")
        env = {**os.environ, AUTHKEY_ENV: authkey.hex(), "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("PYTEST_ADDOPTS", None)
        env.pop("PYTEST_XDIST_WORKER", None)
        rootdir = self._map(self.rootdir)
        cmd = [
            sys.executable,
            "-m",
            "pytest_infperf.abworker",
            address,
            str(self.worktree),
            str(rootdir),
            os.pathsep.join(self.pythonpath),
            "--",
            *self._worker_args(),
        ]
        self.proc = subprocess.Popen(
            cmd, cwd=rootdir, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        # The worker listens; connect once it is up, unless it died first.
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            try:
                self.conn = Client(address, family="AF_UNIX", authkey=authkey)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.proc = None
                    raise ABError(f"the A/B worker did not start: {self.log_tail()}") from None
                time.sleep(0.05)
        first = self._recv()
        if first.get("ev") != "collected":
            raise ABError(f"the A/B worker failed while collecting: {self.log_tail()}")
        self.base_nodeids = set(first["nodeids"])

    def ensure_worker(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self._start()

    def base_tests(self) -> set[str]:
        self.ensure_worker()
        return set(self.base_nodeids)

    def log_tail(self, limit: int = 3000) -> str:
        if self.tmp is None:
            return ""
        try:
            text = (self.tmp / "worker.log").read_text(errors="replace")
        except OSError:
            return ""
        return text[-limit:].strip() or "(no output)"

    # --- messages ----------------------------------------------------------------------
    def _recv(self) -> dict[str, Any]:
        try:
            message = dict(self.conn.recv())
        except (EOFError, OSError):
            self._crashed()
        if message.get("ev") == "error":
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
        self.crashes.append(self.current or "?")
        self.current = None
        self.proc = None
        raise ABError(
            f"the A/B base worker (merge-base {str(self.base_sha)[:10]}) crashed (exit code "
            f"{code}): {detail or self.log_tail()}"
        )

    # --- one test ------------------------------------------------------------------------
    def begin(self, nodeid: str, name: str | None) -> dict[str, Any] | None:
        """Get the base side of ``nodeid``'s call ``name`` ready; None when the base has no
        such test or call (then the head's measurement is ``no-baseline``)."""
        self.ensure_worker()
        if nodeid not in self.base_nodeids:
            return None
        if self.current != nodeid:
            self.end_test()
            self._send(op="run", nodeid=nodeid)
            self.current = nodeid
        while True:
            message = self._recv()
            if message.get("ev") == "ready":
                if message.get("name") == name:
                    return message
                self._send(op="skip")  # a call the head does not make (any more)
                continue
            if message.get("ev") == "done":
                self.current = None
                return None

    def block(self, count: int, calls: int) -> list[float]:
        """``count`` samples of ``calls`` calls each from the base side."""
        self._send(op="block", n=count, calls=calls)
        message = self._recv()
        return [float(v) for v in message["values"]]

    def finish_call(self) -> dict[str, Any]:
        self._send(op="finish")
        return self._recv()

    def end_test(self) -> None:
        """Let the base test run to its end (later calls are skipped)."""
        if self.current is None or self.proc is None:
            return
        self._send(op="end")
        while True:
            message = self._recv()
            if message.get("ev") == "done":
                break
            if message.get("ev") == "ready":
                self._send(op="end")
        self.current = None

    # --- tear down ---------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError, ABError):
                self.conn.send({"op": "quit"})
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.worktree is not None and self.toplevel is not None:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(self.worktree)],
                cwd=self.toplevel,
                capture_output=True,
                check=False,
            )
            subprocess.run(
                ["git", "worktree", "prune"], cwd=self.toplevel, capture_output=True, check=False
            )
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)


def interleave(
    controller: ABController, sampler: Any, block: int, per_sample_s: float, opts: dict[str, Any]
) -> dict[str, Any]:
    """Alternate base (A) and head (B) blocks in ABBA order; decide at the looks.

    Returns the head samples, the base samples, the pairs' log-ratios and the decision.
    """
    import math
    from statistics import median

    from .compare import INCONCLUSIVE, compare_paired
    from .timing import take_samples

    count = max(1, min(256, math.ceil(BLOCK_TIME_S / max(per_sample_s, 1e-9))))
    budget = opts["max_time"] * 4.0  # both sides, so about twice a stored-mode run each
    spent = 0.0
    alpha_look = 0.0
    head: list[float] = []
    base: list[float] = []
    ratios: list[float] = []
    decision: dict[str, Any] | None = None
    looks = 0
    start = time.perf_counter()

    while True:
        a1 = controller.block(count, block)
        b1 = take_samples(sampler, count, block, opts["disable_gc"])
        b2 = take_samples(sampler, count, block, opts["disable_gc"])
        a2 = controller.block(count, block)
        base += a1 + a2
        head += b1 + b2
        ratios += [math.log(median(b1) / median(a1)), math.log(median(b2) / median(a2))]
        elapsed = time.perf_counter() - start
        out_of_time = elapsed >= budget
        at_look = looks < len(LOOKS) and len(ratios) >= LOOKS[looks]
        if at_look or out_of_time:
            share = 1.0 - spent if out_of_time else LOOK_SHARES[looks]
            spent += share
            alpha_look = opts["alpha"] * share
            looks += 1
            decision = compare_paired(ratios, opts["threshold"], alpha_look)
            if decision["verdict"] != INCONCLUSIVE or out_of_time or looks >= len(LOOKS):
                break
    assert decision is not None
    decision.update(
        alpha=opts["alpha"],
        alpha_at_last_look=alpha_look,
        looks=looks,
        block_samples=count,
        ab_seconds=round(time.perf_counter() - start, 3),
    )
    return {"head": head, "base": base, "ratios": ratios, "decision": decision}
