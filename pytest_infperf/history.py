"""Benchmark histories along a branch's first-parent history, from the stored baselines."""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import gitinfo
from .baseline import BaselineFileError, BaselineStore, iter_entries
from .changepoint import ChangePoint, detect


@dataclasses.dataclass
class Point:
    sha: str
    time: str | None
    subject: str | None
    median: float
    ci_low: float | None
    ci_high: float | None
    n: int
    throughput: float | None
    entry: dict[str, Any]


@dataclasses.dataclass
class Series:
    key: str
    points: list[Point]  # oldest first
    changes: list[ChangePoint] = dataclasses.field(default_factory=list)


def choose_env(store: BaselineStore, wanted: str | None, current: str | None) -> str | None:
    """The environment to read: the one asked for, else this machine's, else the one with
    the most stored commits."""
    keys = store.env_keys()
    if wanted:
        return wanted if wanted in keys else None
    if current and current in keys:
        return current
    return max(keys, key=lambda k: len(store.commits(k)), default=None)


def load_series(
    store: BaselineStore,
    env_key: str,
    shas: Iterable[str],
    pattern: str | None = None,
    problems: list[str] | None = None,
) -> dict[str, Series]:
    """Every benchmark's points over ``shas`` (given newest first, as git lists them)."""
    series: dict[str, Series] = {}
    for sha in reversed(list(shas)):
        path = store.path_for(env_key, sha)
        if not path.is_file():
            continue
        try:
            doc = store.load(path)
        except BaselineFileError as exc:
            if problems is not None:
                problems.append(str(exc))
            continue
        commit = doc.get("commit") or {}
        for key, entry in iter_entries(doc):
            if pattern and not _matches(key, pattern):
                continue
            stats = entry["stats"]
            if not stats.get("median"):
                continue
            point = Point(
                sha,
                commit.get("time"),
                commit.get("subject"),
                stats["median"],
                stats.get("ci_low"),
                stats.get("ci_high"),
                int(stats.get("n", 0)),
                entry.get("throughput"),
                entry,
            )
            series.setdefault(key, Series(key, [])).points.append(point)
    return series


def _matches(key: str, pattern: str) -> bool:
    """``-k``-like matching: a substring, or a glob when it has wildcards."""
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatch(key, pattern)
    return pattern.lower() in key.lower()


def with_changes(
    series: dict[str, Series], p_max: float = 0.001, min_magnitude: float = 0.05
) -> dict[str, Series]:
    for s in series.values():
        s.changes = detect([p.median for p in s.points], p_max, min_magnitude)
    return series


def first_parent_history(root: Path, ref: str, depth: int) -> list[str]:
    repo = gitinfo.open_repo(root)
    sha = gitinfo.resolve(repo, ref)
    return gitinfo.first_parents(repo, sha, depth)
