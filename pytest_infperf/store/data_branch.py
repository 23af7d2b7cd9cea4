"""Baselines kept on a dedicated git branch (e.g. ``infperf-baselines``) instead of main.

Committing baselines to main on every push is noisy, so CI keeps them on an orphan branch
that holds only ``baselines/``:

- ``pull`` fetches the branch and writes into the local baselines folder the files whose
  content differs from the local copy (files only present locally are kept). Baselines
  pruned on purpose (listed in ``<env>/pruned.txt``, by ``infperf prune``) are not brought
  back, and local copies of baselines pruned on the branch are removed.
- ``push`` builds a commit on top of the remote branch whose tree is the remote's files
  merged with the local ones (per file, and per benchmark inside a file that both sides
  have: the newer measurement wins, and of one measurement the compacted copy), less the
  pruned ones, and pushes it. If another job pushed in between, the push is rejected as
  non-fast-forward, and the whole fetch-merge-push is retried.
- ``push --squash`` pushes the same tree as a new root commit, replacing the branch's
  history (a data branch: its old raw samples are then garbage to the remote's git gc, so
  the packed branch stays the size of what it holds). It is pushed with a lease on the tip
  it merged: a job that pushed in between makes it start again, nothing is lost.

Both touch only what changed: files are compared by git blob id (the local ids come from
the store's index, :mod:`.index`), and the remote blobs that are read are read one at a
time through one ``git cat-file`` process, so memory does not grow with the branch. Git
plumbing and a temporary index do the work: the working tree and the checked-out branch
are never touched.
"""

from __future__ import annotations

import dataclasses
import io
import os
import random
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.fsutil import atomic_write_text
from ..core.options import BASELINES_BRANCH
from ..core.results import document, dumps
from .baselines import KEY_RE, PRUNED, SHA_RE, BaselineStore, iter_entries, longest_run
from .compact import dumps_compact, is_compact
from .git import GitError, open_repo
from .index import StoreIndex, blob_id

PREFIX = "baselines"
#: Git's own memory, bounded for every git process a pull or push starts: by default git
#: maps up to 8 GiB of pack files and searches deltas with unbounded windows, so reading
#: or repacking a branch of a year of baselines would grow with the branch.
GIT_LIMITS = {
    "core.packedGitLimit": "128m",
    "core.packedGitWindowSize": "16m",
    "core.deltaBaseCacheLimit": "32m",
    "pack.windowMemory": "64m",
    "pack.deltaCacheSize": "32m",
    "pack.threads": "1",
}


#: Where a token given for the remote reaches git: in its environment only, read by the
#: credential helper below (never on a command line, in a file or in a log).
TOKEN_ENV = "INFPERF_GIT_TOKEN"
#: The helper: GitHub's token as the password of a Basic login (as actions/checkout
#: gives it), answered only when the server asks (an anonymous fetch of a public
#: repository never does) and only for ``get``.
HELPER = (
    '!f() { test "$1" = get || return 0; echo username=x-access-token; '
    f'echo "password=${TOKEN_ENV}"; }}; f'
)


@dataclasses.dataclass(frozen=True)
class Token:
    """A token for the remote (GitHub's ``github.token``, in a workflow): given to git by
    a credential helper for the one server it belongs to, for the commands of one pull or
    push. A checkout with ``persist-credentials: false`` keeps none, so a private
    repository's baselines branch is fetched with it."""

    value: str
    #: The server it is for (``$GITHUB_SERVER_URL``): git asks no other for it.
    server: str = "https://github.com"

    def __repr__(self) -> str:  # never printed whole
        return f"Token(***, server={self.server!r})"


def _limits_env(token: Token | None = None) -> dict[str, str]:
    pairs = list(GIT_LIMITS.items())
    env: dict[str, str] = {}
    if token is not None:
        # An empty helper first: no helper of the machine's answers (a stale one would be
        # asked before ours), then ours, for the token's server alone; no prompt.
        pairs += [("credential.helper", ""), (f"credential.{token.server}.helper", HELPER)]
        env.update({TOKEN_ENV: token.value, "GIT_TERMINAL_PROMPT": "0"})
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def _open(root: Path, token: Token | None = None) -> Any:
    repo = open_repo(root)
    repo.git.update_environment(**_limits_env(token))
    return repo


_REJECTED = ("non-fast-forward", "fetch first", "rejected", "stale info", "cannot lock ref")


def _credentials_hint(said: str) -> str:
    """What to do where the remote asked for credentials git did not have."""
    asked = ("Authentication failed", "could not read Username", "terminal prompts disabled")
    if not any(a in said for a in asked):
        return ""
    return (
        ". The remote asks for credentials (a private repository): in a GitHub workflow the "
        "Action gives git the job's token (github.token, with contents: read) for this "
        "fetch; elsewhere, configure git's credentials for the remote"
    )


def _remote_ref(remote: str, branch: str) -> str:
    return f"refs/remotes/{remote}/{branch}"


def fetch(repo: Any, remote: str, branch: str) -> str | None:
    """Fetch the branch; its tip sha, or None when the remote has no such branch yet."""
    import git  # noqa: PLC0415 (gitpython: ~0.3 s, only when git is asked)

    try:
        out = repo.git.ls_remote("--heads", remote, f"refs/heads/{branch}")
    except git.GitCommandError as exc:
        said = exc.stderr.strip()
        raise GitError(f"cannot reach remote {remote!r}: {said}{_credentials_hint(said)}") from None
    if not out.strip():
        return None
    try:
        repo.git.fetch("--quiet", remote, f"+refs/heads/{branch}:{_remote_ref(remote, branch)}")
    except git.GitCommandError as exc:
        said = exc.stderr.strip()
        raise GitError(f"cannot fetch {remote}/{branch}: {said}{_credentials_hint(said)}") from None
    return str(repo.git.rev_parse(_remote_ref(remote, branch)))


@dataclasses.dataclass
class Listing:
    """What the branch holds at one tip, as blob ids (no content read)."""

    files: dict[str, dict[str, str]]  # env -> sha -> blob
    pruned: dict[str, str]  # env -> blob of its pruned.txt

    def envs(self) -> set[str]:
        return set(self.files) | set(self.pruned)


def _listing(repo: Any, tip: str | None) -> Listing:
    listing = Listing({}, {})
    if tip is None:
        return listing
    out = repo.git.ls_tree("-r", "--full-tree", tip, f"{PREFIX}/")
    for line in out.splitlines():
        meta, _, name = line.partition("\t")
        parts = meta.split()
        if len(parts) != 3 or parts[1] != "blob":
            continue
        rel = name[len(PREFIX) + 1 :].split("/")
        if len(rel) != 2 or not KEY_RE.match(rel[0]):
            continue
        env, file = rel
        if file == PRUNED:
            listing.pruned[env] = parts[2]
        elif file.endswith(".json") and SHA_RE.match(file[:-5]):
            listing.files.setdefault(env, {})[file[:-5]] = parts[2]
    return listing


def _blob(repo: Any, blob: str) -> bytes:
    """One blob's bytes, through GitPython's persistent ``git cat-file --batch``."""
    return bytes(repo.git.get_object_data(blob)[3])


def _pruned_text(shas: set[str]) -> bytes:
    return "".join(f"{sha}\n" for sha in sorted(shas)).encode()


def _their_pruned(repo: Any, listing: Listing, env: str) -> set[str]:
    blob = listing.pruned.get(env)
    if blob is None:
        return set()
    text = _blob(repo, blob).decode("utf-8", "replace")
    return {line.strip() for line in text.splitlines() if SHA_RE.match(line.strip())}


def merge_documents(theirs: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """One file changed on both sides: the union of benchmarks. Per benchmark the newer
    measurement (``saved_at``) wins, ours on a tie; of one measurement, the compacted copy
    (a pruner compacted it on purpose; a stale raw copy must not bring the samples back).
    Top-level fields from ours; ``compacted`` only if every merged entry is compact."""
    merged = dict(iter_entries(theirs))
    for key, entry in iter_entries(ours):
        old = merged.get(key)
        if old is not None:
            if str(old.get("saved_at") or "") > str(entry.get("saved_at") or ""):
                continue
            if old.get("saved_at") == entry.get("saved_at") and is_compact(old):
                continue
        merged[key] = entry
    top = ("schema_version", "created", "environment", "commit", "benchmarks", "compacted")
    extra = {k: v for k, v in ours.items() if k not in top}
    # Shards of a fleet save their groups into one document: the longest run is the plain
    # run a --perf-budget multiple of it stands for.
    extra.update(longest_run(ours, theirs))
    if merged and all(is_compact(e) for e in merged.values()):
        extra["compacted"] = ours.get("compacted") or theirs.get("compacted")
    return document(merged.values(), ours["environment"], ours["commit"], **extra)


def serialize(doc: dict[str, Any]) -> bytes:
    text = dumps_compact(doc) if doc.get("compacted") else dumps(doc)
    return text.encode("utf-8")


def pull(
    root: Path,
    folder: Path,
    remote: str = "origin",
    branch: str = BASELINES_BRANCH,
    log: Callable[[str], None] = print,
    only: set[str] | None = None,
    token: Token | None = None,
) -> int:
    """Write the branch's baselines into ``folder``; returns how many files were written.
    ``only``: the commits whose baselines are wanted (``pull --depth``); others are left
    on the branch. ``token``: for a remote that asks for credentials."""
    repo = _open(root, token)
    tip = fetch(repo, remote, branch)
    if tip is None:
        log(f"{remote}/{branch} does not exist yet: nothing to pull (the first push creates it)")
        return 0
    listing = _listing(repo, tip)
    store = BaselineStore(folder)
    written = skipped = dropped = left = 0
    with StoreIndex.open(store) as index:
        for env in sorted(listing.envs()):
            theirs_pruned = _their_pruned(repo, listing, env)
            ours_pruned = store.pruned(env)
            pruned = theirs_pruned | ours_pruned
            if theirs_pruned - ours_pruned:
                # Pruned by another job: the copies here go too (removed, and remembered).
                dropped += store.remove(env, theirs_pruned - ours_pruned)
            local_blobs = index.blobs(env)
            for sha, blob in sorted(listing.files.get(env, {}).items()):
                if sha in pruned:
                    skipped += 1
                    continue
                if only is not None and sha not in only:
                    left += 1
                    continue
                if local_blobs.get(sha) == blob:
                    continue
                data = _blob(repo, blob)
                # Checked for what the index reads; in full when a run loads it.
                doc = store.parse(data, f"{remote}/{branch}:{PREFIX}/{env}/{sha}.json", False)
                atomic_write_text(store.path_for(env, sha), data.decode("utf-8"))
                index.add(env, sha, doc, data)
                written += 1
    extra = f"; {skipped} pruned on purpose left out" if skipped else ""
    extra += f"; removed {dropped} pruned on the branch" if dropped else ""
    extra += f"; {left} older than --depth left on the branch" if left else ""
    log(
        f"pulled {written} baseline file(s) from {remote}/{branch} ({tip[:10]}) into "
        f"{folder}{extra}"
    )
    return written


@dataclasses.dataclass
class _Change:
    """The tree edit of one push: new blobs (already in the object database) and removals."""

    blobs: dict[str, str] = dataclasses.field(default_factory=dict)  # rel -> blob id
    removed: set[str] = dataclasses.field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.blobs or self.removed)

    def names(self) -> list[str]:
        return sorted(self.blobs) + [f"{rel} (removed)" for rel in sorted(self.removed)]


def _store_blob(repo: Any, data: bytes) -> str:
    """Write ``data`` into the repository's object database (in-process: no subprocess per
    file, nothing kept in memory after)."""
    from gitdb import IStream  # noqa: PLC0415 (gitdb: only for the data branch)

    stream = repo.odb.store(IStream(b"blob", len(data), io.BytesIO(data)))
    return str(stream.hexsha.decode() if isinstance(stream.hexsha, bytes) else stream.hexsha)


def _changes(repo: Any, store: BaselineStore, listing: Listing, where: str) -> _Change:
    change = _Change()
    with StoreIndex.open(store) as index:
        local_envs = set(store.env_keys())
        for env in sorted(local_envs | listing.envs()):
            theirs_pruned = _their_pruned(repo, listing, env)
            pruned = theirs_pruned | store.pruned(env)
            if pruned != theirs_pruned:
                rel = f"{env}/{PRUNED}"
                change.blobs[rel] = _store_blob(repo, _pruned_text(pruned))
            theirs = listing.files.get(env, {})
            change.removed |= {f"{env}/{sha}.json" for sha in theirs if sha in pruned}
            local_blobs = index.blobs(env) if env in local_envs else {}
            for sha, local_blob in sorted(local_blobs.items()):
                their_blob = theirs.get(sha)
                if sha in pruned or local_blob == their_blob:
                    continue
                path = store.path_for(env, sha)
                ours_bytes = path.read_bytes()
                ours = store.parse(ours_bytes, path, full=False)
                if their_blob is not None:
                    stored = store.parse(_blob(repo, their_blob), f"{where}:{env}/{sha}.json")
                    data = serialize(merge_documents(stored, ours))
                else:
                    data = ours_bytes
                if blob_id(data) != their_blob:
                    change.blobs[f"{env}/{sha}.json"] = _store_blob(repo, data)
    return change


def _plumbing(repo: Any, env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    """A git plumbing command on a temporary index (``env``: GIT_INDEX_FILE), which
    gitpython has no call for; a failure is a :class:`GitError` with git's own words."""
    out = subprocess.run(
        ["git", *args],
        cwd=repo.git_dir,
        env=env,
        input=None if stdin is None else stdin.encode(),
        capture_output=True,
        check=False,
    )
    if out.returncode != 0:
        said = out.stderr.decode(errors="replace").strip() or f"exit {out.returncode}"
        raise GitError(f"git {args[0]} failed while writing the baselines branch: {said}")
    return out.stdout.decode().strip()


def _commit_tree(repo: Any, base: str | None, change: _Change, parent: str | None, msg: str) -> str:
    """A commit whose tree is ``base``'s with ``change`` applied (under baselines/), built
    in a temporary index (one ``update-index --index-info`` for all entries) so that
    nothing in the working tree changes."""
    fd, index = tempfile.mkstemp(prefix="infperf-index-")
    os.close(fd)
    os.unlink(index)  # git creates it; an empty existing file would be a corrupt index
    env = {**os.environ, **_limits_env(), "GIT_INDEX_FILE": index}
    try:
        if base is not None:
            _plumbing(repo, env, "read-tree", base)
        lines = [f"100644 {blob}\t{PREFIX}/{rel}\n" for rel, blob in sorted(change.blobs.items())]
        lines += [f"0 {'0' * 40}\t{PREFIX}/{rel}\n" for rel in sorted(change.removed)]
        _plumbing(repo, env, "update-index", "--index-info", stdin="".join(lines))
        tree = _plumbing(repo, env, "write-tree")
        args = [tree, "-m", msg]
        if parent is not None:
            args += ["-p", parent]
        return str(repo.git.commit_tree(*args))
    finally:
        Path(index).unlink(missing_ok=True)


def push(
    root: Path,
    folder: Path,
    remote: str = "origin",
    branch: str = BASELINES_BRANCH,
    attempts: int = 6,
    log: Callable[[str], None] = print,
    squash: bool = False,
    token: Token | None = None,
) -> str | None:
    """Merge the local baselines into the branch and push; retried on a lost race.
    Returns the pushed commit, or None when there was nothing new. ``squash``: push the
    merged tree as a new root commit (with a lease on the merged tip), even when nothing
    changed. ``token``: for a remote that asks for credentials."""
    import git  # noqa: PLC0415 (gitpython: ~0.3 s, only when git is asked)

    repo = _open(root, token)
    store = BaselineStore(folder)
    if not store.env_keys():
        log(f"no baselines in {folder}: nothing to push")
        return None
    where = f"{remote}/{branch}"
    for attempt in range(1, attempts + 1):
        tip = fetch(repo, remote, branch)
        change = _changes(repo, store, _listing(repo, tip), where)
        if not change and not (squash and tip is not None):
            log(f"{where} already has every local baseline: nothing to push")
            return None
        head = os.environ.get("GITHUB_SHA") or repo.head.commit.hexsha
        names = change.names()
        shown = "\n".join(names[:200]) + (
            f"\n... and {len(names) - 200} more" if len(names) > 200 else ""
        )
        if squash:
            msg = f"infperf baselines: squashed ({len(names)} change(s) from {head[:10]})"
            msg += f"\n\nReplaces the history up to {tip}.\n\n{shown}"
        else:
            msg = f"infperf baselines: {len(names)} file(s) from {head[:10]}\n\n{shown}"
        commit = _commit_tree(repo, tip, change, None if squash else tip, msg)
        args = ["--quiet", remote, f"{commit}:refs/heads/{branch}"]
        if squash:
            lease = f"refs/heads/{branch}:{tip or ''}"
            args = ["--quiet", f"--force-with-lease={lease}", remote, args[-1]]
        try:
            repo.git.push(*args)
        except git.GitCommandError as exc:
            err = exc.stderr or ""
            if not any(s in err for s in _REJECTED) or attempt == attempts:
                said = err.strip()
                raise GitError(
                    f"pushing to {where} failed: {said}{_credentials_hint(said)}"
                ) from None
            delay = min(8.0, 0.25 * 2**attempt) * (0.5 + random.random())
            log(f"{where} moved while merging (attempt {attempt}); retrying in {delay:.1f} s")
            time.sleep(delay)
            continue
        files = sum(1 for rel in change.blobs if rel.endswith(".json"))
        what = f"pushed {files} baseline file(s)"
        if change.removed:
            what += f" and removed {len(change.removed)} pruned"
        if squash:
            what += " as one new root commit (history squashed)"
        log(f"{what} to {where} ({commit[:10]})")
        return commit
    return None
