"""Baselines kept on a dedicated git branch (e.g. ``infperf-baselines``) instead of main.

Committing baselines to main on every push is noisy, so CI keeps them on an orphan branch
that holds only ``baselines/``:

- ``pull`` fetches the branch and writes its baseline files into the local baselines
  folder (files only present locally are kept);
- ``push`` builds a commit on top of the remote branch whose tree is the remote's files
  merged with the local ones (per file, and per benchmark inside a file that both sides
  have), and pushes it. If another job pushed in between, the push is rejected as
  non-fast-forward, and the whole fetch-merge-push is retried.

Both work with git plumbing and a temporary index: the working tree and the checked-out
branch are never touched.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .baseline import KEY_RE, SHA_RE, iter_entries, parse_bytes
from .fsutil import atomic_write_text
from .gitinfo import GitError, open_repo
from .results import document, dumps

PREFIX = "baselines"


def _remote_ref(remote: str, branch: str) -> str:
    return f"refs/remotes/{remote}/{branch}"


def fetch(repo: Any, remote: str, branch: str) -> str | None:
    """Fetch the branch; its tip sha, or None when the remote has no such branch yet."""
    import git

    try:
        out = repo.git.ls_remote("--heads", remote, f"refs/heads/{branch}")
    except git.GitCommandError as exc:
        raise GitError(f"cannot reach remote {remote!r}: {exc.stderr.strip()}") from None
    if not out.strip():
        return None
    try:
        repo.git.fetch("--quiet", remote, f"+refs/heads/{branch}:{_remote_ref(remote, branch)}")
    except git.GitCommandError as exc:
        raise GitError(f"cannot fetch {remote}/{branch}: {exc.stderr.strip()}") from None
    return str(repo.git.rev_parse(_remote_ref(remote, branch)))


def _branch_files(repo: Any, tip: str) -> dict[str, bytes]:
    """``{"<key>/<sha>.json": content}`` of the baselines on the branch at ``tip``."""
    files: dict[str, bytes] = {}
    listing = repo.git.ls_tree("-r", "--name-only", tip, f"{PREFIX}/")
    for name in listing.splitlines():
        rel = name[len(PREFIX) + 1 :]
        parts = rel.split("/")
        if (
            len(parts) == 2
            and KEY_RE.match(parts[0])
            and parts[1].endswith(".json")
            and SHA_RE.match(parts[1][:-5])
        ):
            # Exact bytes: GitPython strips a trailing newline unless told not to.
            files[rel] = repo.git.show(
                f"{tip}:{name}", stdout_as_string=False, strip_newline_in_stdout=False
            )
    return files


def _local_files(folder: Path) -> dict[str, Path]:
    files: dict[str, Path] = {}
    if not folder.is_dir():
        return files
    for path in sorted(folder.glob("*/*.json")):
        if KEY_RE.match(path.parent.name) and SHA_RE.match(path.stem):
            files[f"{path.parent.name}/{path.name}"] = path
    return files


def merge_documents(theirs: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """One file changed on both sides: the union of benchmarks, ours winning per benchmark
    (ours is the newer measurement of this job); top-level fields from ours."""
    merged = dict(iter_entries(theirs))
    merged.update(iter_entries(ours))
    top = ("schema_version", "created", "environment", "commit", "benchmarks")
    extra = {k: v for k, v in ours.items() if k not in top}
    return document(merged.values(), ours["environment"], ours["commit"], **extra)


def pull(
    root: Path,
    folder: Path,
    remote: str = "origin",
    branch: str = "infperf-baselines",
    log: Callable[[str], None] = print,
) -> int:
    """Write the branch's baselines into ``folder``; returns how many files were written."""
    repo = open_repo(root)
    tip = fetch(repo, remote, branch)
    if tip is None:
        log(f"{remote}/{branch} does not exist yet: nothing to pull (the first push creates it)")
        return 0
    written = 0
    for rel, data in _branch_files(repo, tip).items():
        target = folder / rel
        if target.is_file() and target.read_bytes() == data:
            continue
        parse_bytes(data, f"{remote}/{branch}:{PREFIX}/{rel}")
        atomic_write_text(target, data.decode("utf-8"))
        written += 1
    log(f"pulled {written} baseline file(s) from {remote}/{branch} ({tip[:10]}) into {folder}")
    return written


def _commit_tree(repo: Any, parent: str | None, files: dict[str, bytes], message: str) -> str:
    """A commit whose tree is the parent's plus ``files`` (under baselines/), built in a
    temporary index so that nothing in the working tree changes."""
    fd, index = tempfile.mkstemp(prefix="infperf-index-")
    os.close(fd)
    os.unlink(index)  # git creates it; an empty existing file would be a corrupt index
    try:
        with repo.git.custom_environment(GIT_INDEX_FILE=index):
            if parent is not None:
                repo.git.read_tree(parent)
            for rel, data in sorted(files.items()):
                with tempfile.NamedTemporaryFile(delete=False) as fh:
                    fh.write(data)
                try:
                    blob = repo.git.hash_object("-w", fh.name)
                finally:
                    os.unlink(fh.name)
                repo.git.update_index("--add", "--cacheinfo", f"100644,{blob},{PREFIX}/{rel}")
            tree = repo.git.write_tree()
        args = [tree, "-m", message]
        if parent is not None:
            args += ["-p", parent]
        return str(repo.git.commit_tree(*args))
    finally:
        Path(index).unlink(missing_ok=True)


def push(
    root: Path,
    folder: Path,
    remote: str = "origin",
    branch: str = "infperf-baselines",
    attempts: int = 6,
    log: Callable[[str], None] = print,
) -> str | None:
    """Merge the local baselines into the branch and push; retried on a lost race.
    Returns the pushed commit, or None when there was nothing new."""
    import git

    repo = open_repo(root)
    local = _local_files(folder)
    if not local:
        log(f"no baselines in {folder}: nothing to push")
        return None
    for attempt in range(1, attempts + 1):
        tip = fetch(repo, remote, branch)
        theirs = _branch_files(repo, tip) if tip is not None else {}
        changed: dict[str, bytes] = {}
        for rel, path in local.items():
            ours_bytes = path.read_bytes()
            if theirs.get(rel) == ours_bytes:
                continue
            ours = parse_bytes(ours_bytes, str(path))
            if rel in theirs:
                stored = parse_bytes(theirs[rel], f"{remote}/{branch}:{rel}")
                merged = merge_documents(stored, ours)
                data = dumps(merged).encode("utf-8")
            else:
                data = ours_bytes
            if theirs.get(rel) != data:
                changed[rel] = data
        if not changed:
            log(f"{remote}/{branch} already has every local baseline: nothing to push")
            return None
        head = os.environ.get("GITHUB_SHA") or repo.head.commit.hexsha
        message = f"infperf baselines: {len(changed)} file(s) from {head[:10]}\n\n" + "\n".join(
            sorted(changed)
        )
        commit = _commit_tree(repo, tip, changed, message)
        try:
            repo.git.push("--quiet", remote, f"{commit}:refs/heads/{branch}")
        except git.GitCommandError as exc:
            err = exc.stderr or ""
            rejected = any(
                s in err
                for s in (
                    "non-fast-forward",
                    "fetch first",
                    "rejected",
                    "stale info",
                    "cannot lock ref",
                )
            )
            if not rejected or attempt == attempts:
                raise GitError(f"pushing to {remote}/{branch} failed: {err.strip()}") from None
            delay = min(8.0, 0.25 * 2**attempt) * (0.5 + random.random())
            log(
                f"{remote}/{branch} moved while merging (attempt {attempt}); retrying in "
                f"{delay:.1f} s"
            )
            time.sleep(delay)
            continue
        log(f"pushed {len(changed)} baseline file(s) to {remote}/{branch} ({commit[:10]})")
        return commit
    return None
