"""Git through gitpython, imported on first use, with a specific message for every situation
a CI job or a laptop can be in: not a repository, no commits yet, detached HEAD, shallow
clone, unknown ref, dirty tree.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

SHALLOW_FIX = (
    "Fetch the full history: in GitHub Actions set `fetch-depth: 0` on actions/checkout; "
    "locally run `git fetch --unshallow`."
)


class GitError(Exception):
    """A git situation that stops a baseline operation; the message names the fix."""


@dataclasses.dataclass(frozen=True)
class CommitInfo:
    sha: str
    short: str
    branch: str | None
    dirty: bool
    time: str
    subject: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _git() -> Any:
    try:
        import git  # noqa: PLC0415 (gitpython: ~0.3 s, only when git is asked)
    except ImportError as exc:  # gitpython imports fine without git but raises on use
        raise GitError(
            f"gitpython could not be imported ({exc}); baselines need git: install git and "
            "`pip install GitPython`"
        ) from None
    return git


def open_repo(path: Path) -> Any:
    git = _git()
    try:
        return git.Repo(path, search_parent_directories=True)
    except git.InvalidGitRepositoryError:
        raise GitError(
            f"{path} is not inside a git repository: baselines are stored per commit, so "
            "--perf-save and --perf-compare=REF need one (run `git init` and commit), or "
            "compare against a results file with --perf-compare=path/to/results.json"
        ) from None
    except git.NoSuchPathError:
        raise GitError(f"{path} does not exist") from None
    except git.GitCommandNotFound:
        raise GitError("the `git` executable was not found on PATH; install git") from None


def is_shallow(repo: Any) -> bool:
    return Path(repo.git_dir, "shallow").is_file()


def head_sha(repo: Any) -> str:
    try:
        return str(repo.head.commit.hexsha)
    except ValueError:
        raise GitError(
            f"the repository at {repo.working_tree_dir} has no commits yet: commit your code "
            "first; a baseline belongs to a commit"
        ) from None


def dirty(repo: Any, exclude: Path | None = None) -> bool:
    """Tracked files modified, ignoring the baselines folder itself."""
    args = ["--porcelain", "--untracked-files=no", "--", "."]
    if exclude is not None:
        try:
            rel = Path(exclude).resolve().relative_to(Path(repo.working_tree_dir).resolve())
            args.append(f":(exclude){rel.as_posix()}")
        except ValueError:
            pass
    return bool(repo.git.status(*args).strip())


def head(repo: Any, baselines: Path | None = None) -> CommitInfo:
    sha = head_sha(repo)
    commit = repo.head.commit
    try:
        branch: str | None = repo.active_branch.name
    except TypeError:  # detached HEAD, as in most CI checkouts of a pull request
        branch = os.environ.get("GITHUB_HEAD_REF") or None
    return CommitInfo(
        sha=sha,
        short=sha[:10],
        branch=branch,
        dirty=dirty(repo, baselines),
        time=commit.committed_datetime.isoformat(),
        subject=str(commit.summary),
    )


def describe(path: Path, baselines: Path | None = None) -> dict[str, Any] | None:
    """The current commit for a results file, or ``{"error": ...}``; never raises."""
    try:
        return head(open_repo(path), baselines).to_json()
    except GitError as exc:
        return {"sha": None, "error": str(exc)}
    except Exception as exc:  # a results file must not fail on git trouble
        return {"sha": None, "error": f"{type(exc).__name__}: {exc}"}


def resolve(repo: Any, ref: str) -> str:
    """The commit sha a ref names, or a GitError that says why it does not."""
    git = _git()
    try:
        return str(repo.git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}"))
    except git.GitCommandError:
        pass
    hint = ""
    if is_shallow(repo):
        hint = f" This clone is shallow, so the ref may exist but not be fetched. {SHALLOW_FIX}"
    elif "/" not in ref and not ref.startswith("HEAD"):
        remotes = [r.name for r in repo.remotes]
        if remotes:
            hint = (
                f" If it is a remote branch, try {remotes[0]}/{ref} (and `git fetch "
                f"{remotes[0]} {ref}` first in CI)."
            )
    raise GitError(f"'{ref}' is not a commit, branch or tag in {repo.working_tree_dir}.{hint}")


def merge_base(repo: Any, a: str, b: str) -> str:
    git = _git()
    try:
        out = str(repo.git.merge_base(a, b)).strip()
    except git.GitCommandError:
        out = ""
    if out:
        return out.splitlines()[0]
    if is_shallow(repo):
        raise GitError(
            f"cannot find where {a[:10]} and HEAD diverge: this clone is shallow and lacks "
            f"the history that joins them. {SHALLOW_FIX}"
        )
    raise GitError(f"{a[:10]} and {b[:10]} have no common ancestor")


def first_parents(repo: Any, sha: str, depth: int) -> list[str]:
    """``sha`` and its first-parent ancestors, nearest first, at most ``depth`` + 1."""
    git = _git()
    try:
        out = repo.git.rev_list("--first-parent", f"--max-count={depth + 1}", sha)
    except git.GitCommandError as exc:
        raise GitError(f"cannot list the history of {sha[:10]}: {exc.stderr.strip()}") from None
    return [line for line in str(out).splitlines() if line]


def untracked(repo: Any, paths: list[Path]) -> list[str]:
    """Those of ``paths`` (files in the working tree) that git does not track, relative to
    the repository's root; [] where git cannot tell."""
    root = Path(repo.working_tree_dir).resolve()
    rel = []
    for p in paths:
        try:
            rel.append(str(p.resolve().relative_to(root)))
        except ValueError:
            continue  # outside the repository
    if not rel:
        return []
    try:
        tracked = set(repo.git.ls_files("--", *rel).splitlines())
    except Exception:  # gitpython's GitCommandError and friends: nothing to say
        return []
    return sorted(r for r in set(rel) if r not in tracked)
