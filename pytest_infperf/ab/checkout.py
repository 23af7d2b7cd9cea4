"""What a worker process works in: a commit checked out as a git worktree (or the working
tree as it is), and the tests it collects there (the controller's own selection, mapped)."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

from ..core.cmdline import Forwarded
from ..store.git import GitError

#: How long a worker may stay silent when asked for a block, a profile or its result
#: (``infperf_worker_timeout``; a block expected to take long gets fifty times its
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
    #: What the workers are given of the session's command line besides (the project's
    #: options, -p, -o...: :mod:`~pytest_infperf.core.cmdline`).
    forwarded: Forwarded = dataclasses.field(default_factory=Forwarded)
    #: The ini file given with ``-c`` (absolute), if one was: each checkout's own copy.
    inifile: str = ""
    #: Where pytest was invoked: a worker works in the same folder of its checkout.
    invocation_dir: Path | None = None
    #: The session's heap policy (--perf-heap): every worker applies it before its session
    #: starts, whatever its own checkout's ini says, so both sides run alike.
    heap: str = "steady"
    #: Seconds a worker may stay silent (``infperf_worker_timeout``: see WORKER_TIMEOUT_S).
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
