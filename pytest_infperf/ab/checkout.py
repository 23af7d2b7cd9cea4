"""What a worker process works in: a commit checked out as a git worktree (or the working
tree as it is), and the tests it collects there (the controller's own selection, mapped)."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

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
        #: The open owner file whose lock says this run still uses ``tmp``.
        self._owner: IO[str] | None = None

    def add(self) -> None:
        if self.sha is None or self._added:
            return
        import git  # noqa: PLC0415 (gitpython: ~0.3 s, only when git is asked)

        repo = git.Repo(self.toplevel)
        try:
            prune_stale(self.toplevel)
            self.tmp.mkdir(parents=True, exist_ok=True)
            if self._owner is None:
                self._owner = _own(self.tmp)
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
        if self._owner is not None:
            self._owner.close()  # releases the lock
            self._owner = None


#: A file in a temporary folder this tool checked a commit out in, locked (``flock``) by the
#: run that owns the folder for as long as it uses it. A run killed outright (a cancelled CI
#: job's SIGKILL, a crash) cannot remove its worktree; the kernel drops its lock, and the
#: next run in the repository removes it: a persistent self-hosted runner must not pile
#: them up. A lock, not a PID: a run in another container (another PID namespace) sharing
#: the repository holds its lock where its PID would look dead.
OWNER = "infperf-owner"
#: The folders this tool makes (``tempfile.mkdtemp`` with these prefixes) and the name of a
#: worktree in one: nothing else is ever removed.
PREFIXES = ("infperf-ab-", "infperf-bisect-")
TREE = re.compile(r"tree-[0-9a-f]{10}")
#: A worktree in such a folder right in the temporary directory, but with no owner file
#: (made by a version before it), is taken for a dead run's after this long.
LEGACY_AGE_S = 24 * 3600.0


def prune_stale(toplevel: Path) -> list[Path]:
    """Remove this tool's worktrees whose run is gone (their folders too), then let git
    forget worktrees whose folders are gone; the worktrees removed. Never the repository's
    main worktree, never a folder this tool did not make, never one whose owner still
    runs (another session checking a commit out in the same repository)."""
    listed = subprocess.run(
        ["git", "worktree", "list", "--porcelain"],
        cwd=toplevel,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    trees = [
        Path(line[len("worktree ") :])
        for line in listed.splitlines()
        if line.startswith("worktree ")
    ]
    removed = []
    for tree in trees[1:]:  # the first is the main worktree: the user's repository
        if TREE.fullmatch(tree.name) and _stale(tree.parent):
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(tree)],
                cwd=toplevel,
                capture_output=True,
                check=False,
            )
            shutil.rmtree(tree.parent, ignore_errors=True)
            removed.append(tree)
    subprocess.run(["git", "worktree", "prune"], cwd=toplevel, capture_output=True, check=False)
    # Folders whose worktree git no longer lists (removed, or another repository's): the
    # owner file says they are this tool's; git forgets a missing worktree on its own.
    with contextlib.suppress(OSError):
        for folder in Path(tempfile.gettempdir()).iterdir():
            if (folder / OWNER).is_file() and _stale(folder):
                shutil.rmtree(folder, ignore_errors=True)
    return removed


def _own(folder: Path) -> IO[str]:
    """Mark ``folder`` as this run's: its owner file, locked while the file stays open."""
    owner = open(folder / OWNER, "a+")  # noqa: SIM115 (held open for the run)
    fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
    owner.write(f"{os.getpid()}\n")
    owner.flush()
    return owner


def _stale(folder: Path) -> bool:
    """Whether ``folder`` is one this tool made and no live run uses."""
    if not folder.name.startswith(PREFIXES):
        return False
    owner = folder / OWNER
    if not owner.is_file():
        legacy = folder.parent.resolve() == Path(tempfile.gettempdir()).resolve()
        with contextlib.suppress(OSError):
            return legacy and time.time() - folder.stat().st_mtime > LEGACY_AGE_S
        return False
    try:
        with open(owner) as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released as the file closes
    except OSError:  # held: its run goes on (or the file cannot be read: leave it)
        return False
    return True


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
    #: The session's run-wide benchmark options (JSON): the worker times with them.
    layer: str = "{}"
    #: Seconds a worker may stay silent (infperf_expert's ``worker_timeout``: see WORKER_TIMEOUT_S).
    timeout: float = WORKER_TIMEOUT_S
    #: What the head imports of its repository (:class:`~.imports.ImportMap` as JSON; ""
    #: until the controller has looked): each worker imports the project from its checkout.
    imports: str = ""

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
