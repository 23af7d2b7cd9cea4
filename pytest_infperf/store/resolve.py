"""What ``--perf-compare=REF`` (or a CLI argument naming a commit) resolves to: the stored
baseline of the nearest first-parent ancestor of the merge-base that has one, or a JSON file.

One resolver for the plugin and the ``infperf`` command, so both find the same baseline:
the command's arguments go through :func:`document`, which calls :func:`resolve`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from pathlib import Path
from typing import Any

from ..core.names import CompareMode
from ..core.results import Origin
from ..measure import environment
from . import git as gitinfo
from .baselines import BaselineFileError, BaselineStore, Location, iter_entries, read_document
from .git import SHALLOW_FIX, GitError


class CompareError(Exception):
    """``--perf-compare`` cannot be carried out; the message says why and what to do."""


@dataclasses.dataclass
class BaselineSource:
    """What ``--perf-compare=REF`` resolved to."""

    ref: str
    origin: str  # "file", "commit", or "none" (nothing found)
    path: str | None = None
    sha: str | None = None
    distance: int | None = None
    merge_base: str | None = None
    env_key: str | None = None
    env_diff: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    #: The baseline's soft environment fields (they differ without making it incomparable).
    soft: dict[str, Any] = dataclasses.field(default_factory=dict)
    note: str | None = None
    reference: dict[str, Any] | None = None
    #: How long the baseline's run took (``--perf-budget=1.5x`` multiplies it; None: a
    #: baseline saved before it was recorded).
    run_seconds: float | None = None
    entries: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    searched: int = 0
    #: --perf-ab: the head side is a working tree with uncommitted changes.
    head_dirty: bool = False
    #: --perf-ab: the stored baseline of the base commit for this environment, if one was
    #: saved (loaded on first need), whose exact work counts the base side must match.
    witness: dict[str, dict[str, Any]] | None = None
    #: The baseline was saved from a working tree with uncommitted changes: it measured
    #: other code than its commit's, so it witnesses nothing of that commit's code.
    dirty: bool = False

    def describe(self) -> str:
        if self.origin == "ab":
            head = "the working tree (uncommitted changes)" if self.head_dirty else "it"
            return (
                f"the merge-base {str(self.sha)[:10]} of {self.ref} and HEAD, measured "
                f"in this job, interleaved with {head} (A/B)"
            )
        if self.origin == "file":
            return f"file {self.path}"
        if self.origin == "commit" and self.sha:
            n = self.distance or 0
            # REF=HEAD: its merge-base with HEAD is HEAD itself, so say that.
            anchor = (
                "HEAD" if self.ref in ("HEAD", "@") else f"the merge-base of {self.ref} and HEAD"
            )
            back = anchor if n == 0 else f"{n} commit{'s' * (n != 1)} before {anchor}"
            return f"commit {self.sha[:10]} ({back})"
        return f"nothing ({self.note})"

    def as_origin(self) -> Origin:
        """The typed record every comparison against this source carries."""
        mode = CompareMode.AB if self.origin == "ab" else CompareMode.STORED
        return Origin(mode, self.sha, self.distance, self.describe())

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("entries")
        data.pop("witness")
        return data

    def to_worker(self) -> dict[str, Any]:
        """What an xdist worker needs to rebuild this source (it re-reads the file)."""
        return self.to_json()

    @classmethod
    def from_worker(cls, data: dict[str, Any], max_bytes: int) -> BaselineSource:
        source = cls(**{k: v for k, v in data.items() if k != "entries"})
        if source.path:
            doc = BaselineStore(Path(source.path).parent, max_bytes).load(Path(source.path))
            source.entries = dict(iter_entries(doc))
        return source


def _looks_like_file(ref: str) -> bool:
    return ref.endswith(".json")


def resolve(
    ref: str, *, rootdir: Path, store: BaselineStore, env_key: str, hard: dict[str, Any], depth: int
) -> BaselineSource:
    """Turn ``--perf-compare=REF`` into a :class:`BaselineSource`.

    REF is a results/baseline JSON file, or a git ref: then the merge-base of REF and HEAD
    is found and its first-parent ancestors are walked (at most ``depth`` back) to the
    nearest commit with a baseline for this environment.
    """
    as_path = Path(ref).expanduser()
    if _looks_like_file(ref):
        return _from_file(ref, as_path, store, hard)
    try:
        repo = gitinfo.open_repo(rootdir)
    except GitError as exc:
        if as_path.is_file():
            return _from_file(ref, as_path, store, hard)
        raise CompareError(f"--perf-compare={ref}: {exc}") from None
    try:
        head = gitinfo.head_sha(repo)
        target = gitinfo.resolve(repo, ref)
    except GitError as exc:
        if as_path.is_file():
            return _from_file(ref, as_path, store, hard)
        raise CompareError(f"--perf-compare={ref}: {exc}") from None
    if as_path.is_file():
        raise CompareError(
            f"--perf-compare={ref} is ambiguous: it is both a git ref and a file. Write "
            f"./{ref} for the file, or refs/heads/{ref} (or the sha) for the commit"
        )
    try:
        base = gitinfo.merge_base(repo, target, head)
        shas = gitinfo.first_parents(repo, base, depth)
    except GitError as exc:
        raise CompareError(f"--perf-compare={ref}: {exc}") from None
    loc = store.find(shas, env_key)
    source = BaselineSource(
        ref=ref, origin="commit", merge_base=base, env_key=env_key, searched=len(shas)
    )
    if loc is None:
        other = store.find_other_env(shas, env_key)
        if other is None:
            shallow = gitinfo.is_shallow(repo) and len(shas) < depth + 1
            if shallow:
                raise CompareError(
                    f"--perf-compare={ref}: no baseline for this environment in the "
                    f"{len(shas)} commit(s) of history this shallow clone has below "
                    f"{base[:10]}; older baselines cannot be reached. {SHALLOW_FIX}"
                )
            source.origin = "none"
            source.note = (
                f"no baseline for environment {env_key} in {store.root} for the "
                f"{len(shas)} first-parent commit(s) from {base[:10]} (the merge-base of "
                f"{ref} and HEAD); save one on {ref} with --perf-save"
            )
            known = store.stored_env_keys()
            if known:
                source.note += f" (baselines exist for: {', '.join(known)})"
            return source
        loc = other
    _load_into(source, loc, store, hard)
    return source


def document(
    spec: str, *, rootdir: Path, store: BaselineStore, env_key: str, depth: int
) -> tuple[dict[str, Any], str | None]:
    """The results document a command-line argument names: a JSON file, else the baseline
    ``--perf-compare=spec`` would use (:func:`resolve`: merge-base with HEAD, then first
    parents), else the stored commit of ``env_key`` whose sha starts with ``spec``. With it,
    a note when the baseline found is not ``spec``'s own commit. Raises
    :class:`CompareError` saying what ``spec`` is not."""
    path = Path(spec)
    if spec.endswith(".json") or path.is_file():
        return read_document(path), None
    exact = store.path_for(env_key, spec) if len(spec) == 40 else None
    if exact is not None and exact.is_file():
        return store.load(exact), None
    try:
        source = resolve(spec, rootdir=rootdir, store=store, env_key=env_key, hard={}, depth=depth)
    except CompareError as exc:
        problem = str(exc).removeprefix(f"--perf-compare={spec}: ")
        sha = _stored_prefix(spec, store, env_key, problem)
        return store.load(store.path_for(env_key, sha)), None
    if source.path is None:
        raise CompareError(f"{spec}: {source.note}")
    if source.env_key != env_key:
        raise CompareError(
            f"{spec}: no baseline of environment {env_key} within {depth} first-parent "
            f"commits (the nearest is of {source.env_key}; --env {source.env_key} reads it)"
        )
    note = None
    try:
        own = gitinfo.resolve(gitinfo.open_repo(rootdir), spec)
    except GitError:
        own = None
    if source.sha != own:
        note = f"{spec}: the nearest baseline is {source.describe()}"
    return store.load(Path(source.path)), note


def _stored_prefix(spec: str, store: BaselineStore, env_key: str, git_problem: str) -> str:
    matches = [c for c in store.commits(env_key) if c.startswith(spec.lower())]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CompareError(
            f"{spec!r} is neither a JSON file, a git ref with a baseline ({git_problem}), nor "
            f"a stored commit of environment {env_key}"
        )
    raise CompareError(f"{spec!r} matches {len(matches)} stored commits; give more of the sha")


def _from_file(ref: str, path: Path, store: BaselineStore, hard: dict[str, Any]) -> BaselineSource:
    source = BaselineSource(ref=ref, origin="file", path=str(path.resolve()))
    try:
        doc = store.load(path)
    except BaselineFileError as exc:
        raise CompareError(f"--perf-compare: {exc}") from None
    _fill(source, doc, hard)
    commit = doc.get("commit") or {}
    source.sha = commit.get("sha")
    return source


def _load_into(
    source: BaselineSource, loc: Location, store: BaselineStore, hard: dict[str, Any]
) -> None:
    try:
        doc = store.load(loc.path)
    except BaselineFileError as exc:
        raise CompareError(f"--perf-compare={source.ref}: baseline {exc}") from None
    source.path = str(loc.path)
    source.sha = loc.sha
    source.distance = loc.distance
    source.env_key = loc.env_key
    _fill(source, doc, hard)


def _fill(source: BaselineSource, doc: dict[str, Any], hard: dict[str, Any]) -> None:
    source.entries = dict(iter_entries(doc))
    source.dirty = bool((doc.get("commit") or {}).get("dirty"))
    source.env_diff = environment.diff(hard, doc["environment"].get("hard", {}))
    source.soft = dict(doc["environment"].get("soft") or {})
    source.reference = doc.get("reference")
    # A number a person or tool may have edited: only a finite positive one is a run's time.
    seconds = doc.get("run_seconds")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool):
        with contextlib.suppress(OverflowError):  # an integer too large for a float
            source.run_seconds = float(seconds) if 0 < seconds < math.inf else None
