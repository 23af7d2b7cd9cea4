"""One step of ``infperf bisect``: a pytest ``--perf-ab`` run of the selection at a
candidate commit in the temporary worktree, its verdicts read from the run's JSON, and how
a running step is stopped (the first Ctrl-C asks pytest to clean up; a second one, or
SIGTERM, kills pytest and every process under it at once).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.results import BenchmarkResult, Verdict, WorkDiff, WorkProfile

if TYPE_CHECKING:
    from ..ab.checkout import Checkout

#: How long an interrupted step's pytest gets to remove its own worktree and workers after
#: the first Ctrl-C; a second one, or SIGTERM, kills it at once.
STOP_GRACE_S = 30.0
#: pytest's exit statuses that say its command line or the session could not start (2:
#: interrupted or collection errors, 3: internal error, 4: usage error, 5: nothing
#: collected). At the confirming step BAD runs the user's own selection and arguments, so
#: one of them there is the user's to fix, not a commit to skip.
PYTEST_UNUSABLE = (2, 3, 4, 5)


class BisectError(Exception):
    """A usage problem (refs, history, selection): exit 2 with the message."""


class GitFailed(Exception):
    """A git command failed during the search (not a ref the user named): exit 3."""


@dataclasses.dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author: str

    @property
    def short(self) -> str:
        return self.sha[:10]


@dataclasses.dataclass(frozen=True)
class Measured:
    """One benchmark's verdict at a step."""

    key: str
    verdict: str
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    reason: str | None
    #: The work diff of the step's two sides (None: not profiled on both).
    work: WorkDiff | None = None

    @property
    def slower(self) -> bool:
        """The slowdown sought: a regression, also one a ``Perf-Accept`` trailer accepted."""
        return self.verdict in (Verdict.REGRESSION, Verdict.ACCEPTED)

    def figure(self) -> str:
        if self.ratio is None:
            return self.verdict
        ci = (
            f" [{self.ci_low:.3f}, {self.ci_high:.3f}]"
            if self.ci_low is not None and self.ci_high is not None
            else ""
        )
        return f"{self.ratio:.3f}x{ci} {self.verdict}"


@dataclasses.dataclass(frozen=True)
class Step:
    """One measured candidate: ``outcome`` is bad, good, undecided (measured, not decided:
    measured again up to ``--retries`` times, then skipped) or skip (cannot be measured
    there); ``why`` says why."""

    role: str  # "confirm", "search", "check", or "count" (the work counted, not timed)
    commit: Commit
    against: Commit
    outcome: str
    why: str
    benchmarks: tuple[Measured, ...]
    seconds: float


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if out.returncode != 0:
        raise GitFailed(f"git {' '.join(args)}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout.strip()


class Bench:
    """Runs the selection at one commit against another, interleaved, in the temporary
    worktree; returns the step. Child output goes to a log per step in the temporary
    folder (its last error line is the reason a step is skipped)."""

    def __init__(
        self,
        top: Path,
        tmp: Path,
        subdir: Path,
        selection: Sequence[str],
        pytest_args: Sequence[str],
        interrupts: Interrupts | None = None,
    ) -> None:
        self.top = top
        self.interrupts = interrupts or Interrupts()
        self.tmp = tmp
        self.subdir = subdir
        self.selection = list(selection)
        self.pytest_args = list(pytest_args)
        self.count = 0
        #: The one worktree, added at the first step's commit (the A/B base's helper) and
        #: switched to each later one.
        self.tree: Checkout | None = None
        self.child: subprocess.Popen[bytes] | None = None

    def checkout(self, sha: str) -> Path:
        if self.tree is None:
            # The A/B base's worktree helper; imported here, not when `infperf list` starts.
            from ..ab.checkout import Checkout
            from ..store.git import GitError

            self.tree = Checkout(self.top, sha, self.tmp, "infperf bisect")
            try:
                self.tree.add()
            except GitError as exc:
                raise GitFailed(str(exc)) from None
            return self.tree.root
        git(self.tree.root, "checkout", "--quiet", "--force", "--detach", sha)
        git(self.tree.root, "clean", "-qfdx")  # a fresh checkout: no build output of the last
        return self.tree.root

    def command(self, against: Commit, json_path: Path) -> list[str]:
        return [
            sys.executable,
            "-m",
            "pytest",
            *self.selection,
            f"--perf-ab={against.sha}",
            f"--perf-json={json_path}",
            "-p",
            "no:cacheprovider",
            *self.pytest_args,
        ]

    def _run(self, commit: Commit, command: list[str], log_path: Path) -> int:
        """pytest at ``commit`` in the worktree, its output in ``log_path``; its exit code."""
        root = self.checkout(commit.sha)
        child_tmp = self.tmp / "t"
        child_tmp.mkdir(exist_ok=True)
        env = {
            **os.environ,
            "TMPDIR": str(child_tmp),
            "TEMP": str(child_tmp),
            "TMP": str(child_tmp),
        }
        with log_path.open("wb") as log, self.interrupts.held():
            self.child = subprocess.Popen(
                command,
                cwd=root / self.subdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                # Its own process group: Ctrl-C at the terminal reaches it only from stop(),
                # and stop() can signal pytest and its A/B workers together.
                start_new_session=True,
            )
        # The child holds its own copy of the log's descriptor: ours may close.
        rc = self.child.wait()
        self.child = None
        return rc

    def measure(self, role: str, commit: Commit, against: Commit, tracked: set[str]) -> Step:
        self.count += 1
        start = time.monotonic()
        json_path = self.tmp / f"step-{self.count}.json"
        log_path = self.tmp / f"step-{self.count}.log"
        rc = self._run(commit, self.command(against, json_path), log_path)
        seconds = time.monotonic() - start
        measured = _read(json_path)
        if role == "confirm" and not measured and rc in PYTEST_UNUSABLE:
            raise BisectError(
                f"pytest could not run the selection at BAD {commit.short} (pytest exit "
                f"{rc}): {_pytest_error(log_path)}\n(the selection and the arguments after "
                f"-- are pytest's: check them with "
                f"`{shlex.join(['pytest', *self.selection, *self.pytest_args])}` at BAD)"
            )
        outcome, why = classify(measured, tracked, rc, log_path)
        return Step(role, commit, against, outcome, why, tuple(measured), seconds)

    def works(self, commit: Commit) -> tuple[dict[str, WorkProfile], float, str]:
        """The selection's work at ``commit``, counted, not timed (``--perf-count``): per
        benchmark its profile, the seconds the run took, and why there is none (a failed
        run's error) when the dict is empty."""
        self.count += 1
        start = time.monotonic()
        json_path = self.tmp / f"step-{self.count}.json"
        log_path = self.tmp / f"step-{self.count}.log"
        command = [
            sys.executable,
            "-m",
            "pytest",
            *self.selection,
            "--perf-count",
            f"--perf-json={json_path}",
            "-p",
            "no:cacheprovider",
            *self.pytest_args,
        ]
        rc = self._run(commit, command, log_path)
        found: dict[str, WorkProfile] = {}
        try:
            doc = json.loads(json_path.read_text())
        except (OSError, ValueError):
            doc = {}
        for entry in doc.get("benchmarks", []):
            r = BenchmarkResult.from_json(entry)
            if r.work is not None:
                found[r.key] = r.work
        why = "" if found else f"nothing counted (pytest exit {rc}): {_failure(log_path)}"
        return found, time.monotonic() - start, why

    def stop(self, now: Callable[[], bool] = lambda: False) -> None:
        """Stop the running step: SIGINT to its process group (pytest: its A/B workers run
        in sessions of their own, which pytest ends in order), so that pytest removes its
        base worktree and workers itself; SIGKILL to the group and every process under
        pytest, wherever its group, once ``now()`` says so (a second Ctrl-C, SIGTERM) or
        after the grace period."""
        child, self.child = self.child, None
        if child is None or child.poll() is not None:
            return
        if not now():
            _signal_group(child, signal.SIGINT)
            deadline = time.monotonic() + STOP_GRACE_S
            while time.monotonic() < deadline and not now():
                try:
                    child.wait(timeout=0.05)
                    return
                except subprocess.TimeoutExpired:
                    continue
        _kill_tree(child)

    def close(self) -> None:
        """Kill what still runs, remove the worktree and the temporary folder (the base
        worktrees of the steps included), then let git forget worktrees whose folders are
        gone."""
        child, self.child = self.child, None
        if child is not None and child.poll() is None:
            _kill_tree(child)
        if self.tree is not None:
            self.tree.remove()
        shutil.rmtree(self.tmp, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=self.top, capture_output=True, check=False)


def _signal_group(child: subprocess.Popen[bytes], sig: int) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(child.pid, sig)
        else:  # pragma: no cover (Windows)
            child.send_signal(sig)
    except ProcessLookupError:
        pass


def _kill_tree(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL the step's process group and every process below its pytest, wherever their
    group (a worker that made its own), and wait for them: none outlives the worktree."""
    import psutil

    try:
        below = psutil.Process(child.pid).children(recursive=True)
    except psutil.Error:
        below = []
    _signal_group(child, signal.SIGKILL if hasattr(signal, "SIGKILL") else signal.SIGTERM)
    for proc in below:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    child.wait()
    # Orphans are reaped by init; wait until they are gone (killed: a moment).
    psutil.wait_procs(below, timeout=5)


class Interrupts:
    """SIGINT and SIGTERM during a bisect. The first SIGINT stops the search (a
    KeyboardInterrupt) and gives the running step its grace; a second one, or SIGTERM at any
    time (a cancelled CI job, which allows about 10 s), kills the step at once. Once the
    search is stopping no signal raises again, so cleanup cannot be cut short."""

    def __init__(self) -> None:
        self.stopping = False
        self.hard = False
        self._held = False
        self._pending = False

    def __call__(self, signum: int, frame: Any) -> None:
        if self.stopping or signum == signal.SIGTERM:
            self.hard = True
        if not self.stopping:
            self.stopping = True
            if self._held:
                self._pending = True
                return
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """No KeyboardInterrupt inside (one that comes is raised on leaving): a step's
        pytest is started and its handle kept, or neither, so none runs on unknown."""
        self._held = True
        try:
            yield
        finally:
            self._held = False
            if self._pending:
                self._pending = False
                raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self) -> Iterator[Interrupts]:
        # An ignored SIGINT stays ignored (a shell's background job, nohup): as Python does.
        wanted = [signal.SIGTERM]
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            wanted.append(signal.SIGINT)
        previous = {sig: signal.signal(sig, self) for sig in wanted}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _read(path: Path) -> list[Measured]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    out = []
    for entry in doc.get("benchmarks", []):
        r = BenchmarkResult.from_json(entry)
        c = r.comparison
        if c is None:
            continue
        out.append(
            Measured(
                r.key,
                str(c.verdict),
                c.ratio,
                c.ci_low,
                c.ci_high,
                str(c.reason) if c.reason else None,
                c.work,
            )
        )
    return out


def classify(
    measured: Sequence[Measured], tracked: set[str], rc: int, log: Path
) -> tuple[str, str]:
    """bad / good / undecided / skip for one step, and why. ``tracked`` empty: every
    benchmark counts (the confirming step, which finds out which ones regressed)."""
    if not measured:
        return "skip", f"nothing measured (pytest exit {rc}): {_failure(log)}"
    wanted = [m for m in measured if not tracked or m.key in tracked]
    slower = [m for m in wanted if m.slower]
    if slower:
        return "bad", "regression: " + ", ".join(m.key for m in slower)
    missing = sorted(tracked - {m.key for m in measured})
    if missing:
        return "skip", "not measured at this commit: " + ", ".join(missing)
    undecided = [m for m in wanted if not Verdict(m.verdict).passes]
    if undecided:
        return "undecided", "; ".join(
            f"{m.key} {m.verdict}" + (f" ({m.reason})" if m.reason else "") for m in undecided
        )
    return "good", "no regression"


def _pytest_error(log: Path) -> str:
    """pytest's own ``ERROR:`` line(s) from a log (argparse's usage line comes with the
    line that says what was wrong), else the line that says what went wrong."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "no output"
    for i, line in enumerate(lines):
        if line.startswith("ERROR:"):
            said = [line.strip()]
            if line.startswith("ERROR: usage:"):
                said += [ln.strip() for ln in lines[i + 1 : i + 2] if ": error:" in ln]
            return " ".join(said)
    return _failure(log)


def _failure(log: Path) -> str:
    """The line of a pytest log that says what went wrong (an import error, usually)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "no output"
    errors = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    if errors:
        return errors[-1]
    tail = [ln.strip() for ln in lines if ln.strip()]
    return tail[-1] if tail else "no output"
