"""What a worker process works in: a commit checked out as a git worktree (or the working
tree as it is), and the tests it collects there (the controller's own selection, mapped)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
import time
from pathlib import Path

from ..core.cmdline import Forwarded
from ..store.git import GitError

#: How long a worker may stay silent when asked for a block, a profile or its result
#: (infperf_expert's ``worker_timeout``; a block expected to take long gets fifty times its
#: expected length), and, times ``workers.READY_FACTOR``, while it collects or builds and
#: warms a model. Past it the worker "stopped answering": its process group is killed and
#: the test that needed it fails with that.
WORKER_TIMEOUT_S = 120.0


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
            prune_stale(self.toplevel)
            self.tmp.mkdir(parents=True, exist_ok=True)
            (self.tmp / OWNER).write_text(_identity(os.getpid()) or str(os.getpid()))
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


#: A file in a temporary folder this tool checked a commit out in: the PID and start time
#: of the process that owns it. A run killed outright (a cancelled CI job's SIGKILL, a
#: crash) cannot remove its worktree; the next run in the repository does, once its owner
#: is gone: a persistent self-hosted runner must not pile them up.
OWNER = "infperf-owner"
#: A worktree in a folder named like this tool's temporary ones, but with no owner file
#: (made by a version before it), is taken for a dead run's after this long.
LEGACY_AGE_S = 24 * 3600.0


def prune_stale(toplevel: Path) -> list[Path]:
    """Remove this tool's worktrees whose run is gone (their folders too), then let git
    forget worktrees whose folders are gone; the worktrees removed. Never one whose
    owner still runs (another session checking a commit out in the same repository)."""
    listed = subprocess.run(
        ["git", "worktree", "list", "--porcelain"],
        cwd=toplevel,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    removed = []
    for line in listed.splitlines():
        if not line.startswith("worktree "):
            continue
        tree = Path(line[len("worktree ") :])
        if _stale(tree.parent):
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(tree)],
                cwd=toplevel,
                capture_output=True,
                check=False,
            )
            shutil.rmtree(tree.parent, ignore_errors=True)
            removed.append(tree)
    subprocess.run(["git", "worktree", "prune"], cwd=toplevel, capture_output=True, check=False)
    return removed


def _stale(folder: Path) -> bool:
    owner = folder / OWNER
    if not owner.is_file():
        legacy = folder.name.startswith(("infperf-ab-", "infperf-bisect-"))
        with contextlib.suppress(OSError):
            return legacy and time.time() - folder.stat().st_mtime > LEGACY_AGE_S
        return False
    try:
        pid_text, _, started = owner.read_text().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return False
    now = _identity(pid)
    if now is None:  # no /proc (macOS): alive is all that can be told
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False
    return now == "" or (bool(started) and now != f"{pid} {started.strip()}")


def _identity(pid: int) -> str | None:
    """``"PID START"`` (its start in clock ticks after boot: a PID is reused, its start is
    not); "" when no such process runs; None where /proc cannot tell."""
    if not Path("/proc/self/stat").exists():
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            # Field 22 is the start time; the command name in field 2 may hold spaces.
            return f"{pid} {f.read().rsplit(')', 1)[1].split()[19]}"
    except (OSError, IndexError):
        return ""


@dataclasses.dataclass(frozen=True)
class Selection:
    """The tests a worker collects: the controller's own selection, mapped."""

    rootdir: Path
    args: tuple[str, ...]
    pythonpath: tuple[str, ...]
    keyword: str = ""
    markexpr: str = ""
    #: What the workers are given of the session's command line besides (the project's
    #: options, -p, -o...: :mod:`~pytest_infperf.core.cmdline`).
    forwarded: Forwarded = dataclasses.field(default_factory=Forwarded)
    #: The ini file given with ``-c`` (absolute), if one was: each checkout's own copy.
    inifile: str = ""
    #: Where pytest was invoked: a worker works in the same folder of its checkout.
    invocation_dir: Path | None = None
    #: The session's heap policy (infperf_expert's heap): every worker applies it before its session
    #: starts, whatever its own checkout's ini says, so both sides run alike.
    heap: str = "steady"
    #: Seconds a worker may stay silent (infperf_expert's ``worker_timeout``: see WORKER_TIMEOUT_S).
    timeout: float = WORKER_TIMEOUT_S

    def args_in(self, checkout: Checkout) -> list[str]:
        """The worker's pytest arguments in ``checkout``: paths and the ini file mapped
        into it (those it lacks left out), then ``-k``, ``-m`` and the forwarded options."""
        out: list[str] = []
        for arg in self.args:
            path_part, sep, rest = arg.partition("::")
            p = Path(path_part)
            if p.exists():
                out.append(str(checkout.map(p)) + sep + rest)
        ini = checkout.map(Path(self.inifile)) if self.inifile else None
        if ini is not None and ini.is_file():
            out += ["-c", str(ini)]
        if self.keyword:
            out += ["-k", self.keyword]
        if self.markexpr:
            out += ["-m", self.markexpr]
        return out + list(self.forwarded.early)
