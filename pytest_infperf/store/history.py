"""Benchmark histories along a branch's first-parent history, from the stored baselines."""

from __future__ import annotations

import dataclasses
import fnmatch
import shlex
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..stats.changepoint import LOCATE_WINDOW, MIN_MAGNITUDE, P_MAX, ChangePoint, detect
from . import git as gitinfo
from .baselines import BaselineStore
from .index import StoreIndex


@dataclasses.dataclass(slots=True)
class Point:
    sha: str
    time: str | None
    subject: str | None
    median: float
    ci_low: float | None
    ci_high: float | None
    n: int
    throughput: float | None


@dataclasses.dataclass
class Series:
    key: str
    points: list[Point]  # oldest first
    changes: list[ChangePoint] = dataclasses.field(default_factory=list)


def choose_env(store: BaselineStore, wanted: str | None, current: str | None) -> str | None:
    """The environment to read: the one asked for, else this machine's, else the one with
    the most stored commits."""
    keys = store.stored_env_keys()
    if wanted:
        return wanted if wanted in keys else None
    if current and current in keys:
        return current
    return max(keys, key=lambda k: len(store.commits(k)), default=None)


def iter_series(
    store: BaselineStore,
    env_key: str,
    shas: Iterable[str],
    pattern: str | None = None,
    problems: list[str] | None = None,
) -> Iterator[Series]:
    """Each benchmark's points over ``shas`` (given newest first, as git lists them), one
    benchmark at a time, read from the store's index (:mod:`.index`): memory is bounded by
    one series, and only files changed since the index last looked are read."""
    order = {sha: i for i, sha in enumerate(reversed(list(shas)))}
    with StoreIndex.open(store) as index:
        info = index.commit_info(env_key)
        if problems is not None:
            problems.extend(index.problems(env_key, set(order)))
        for key in sorted(index.keys(env_key)):
            if pattern and not _matches(key, pattern):
                continue
            rows = sorted(
                (r for r in index.points(env_key, key) if r.sha in order),
                key=lambda r: order[r.sha],
            )
            if rows:
                yield Series(
                    key,
                    [
                        Point(
                            r.sha,
                            *info.get(r.sha, (None, None)),
                            r.median,
                            r.ci_low,
                            r.ci_high,
                            r.n,
                            r.throughput,
                        )
                        for r in rows
                    ],
                )


def _matches(key: str, pattern: str) -> bool:
    """``-k``-like matching: a substring, or a glob when it has wildcards."""
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatch(key, pattern)
    return pattern.lower() in key.lower()


def changes(s: Series, p_max: float = P_MAX, min_magnitude: float = MIN_MAGNITUDE) -> Series:
    s.changes = detect([p.median for p in s.points], p_max, min_magnitude)
    return s


def bisect_command(s: Series, c: ChangePoint) -> str | None:
    """For a slowdown, the command that names its commit: ``infperf bisect`` over the window
    the step's place is known to (``LOCATE_WINDOW`` stored commits either side of it)."""
    if c.ratio <= 1 or c.index == 0:
        return None
    good = s.points[max(0, c.index - 1 - LOCATE_WINDOW)].sha[:12]
    bad = s.points[min(len(s.points) - 1, c.index + LOCATE_WINDOW)].sha[:12]
    return f"infperf bisect {good} {bad} {shlex.quote(s.key.split('#', 1)[0])}"


def first_parent_history(root: Path, ref: str, depth: int) -> list[str]:
    repo = gitinfo.open_repo(root)
    sha = gitinfo.resolve(repo, ref)
    return gitinfo.first_parents(repo, sha, depth)
