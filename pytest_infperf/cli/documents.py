"""The documents the ``infperf`` commands read: a results or baseline JSON file, or the
baseline of a commit found as ``--perf-compare`` finds it, and where they live."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..store.baselines import BaselineStore
from ..store.git import GitError


class CLIError(Exception):
    """A problem with the command's arguments; printed, exit code 2."""


def root(args: argparse.Namespace) -> Path:
    return Path(args.repo).resolve()


def store(args: argparse.Namespace) -> BaselineStore:
    folder = Path(args.dir)
    return BaselineStore(folder if folder.is_absolute() else root(args) / folder)


def current_env() -> str:
    from ..measure import environment, gpu

    return environment.env_key(environment.hard_fields(gpu.snapshot()))


def load(spec: str, args: argparse.Namespace) -> dict[str, Any]:
    """A document from a JSON path, or the baseline of a commit (sha, prefix or ref), found
    by the store's resolver, as ``--perf-compare`` finds it."""
    from ..store.resolve import CompareError, document

    where = store(args)
    # A file needs no environment; a commit is read in --env's, else this machine's.
    env = "" if is_file(spec) else (args.env or pick_env(where))
    try:
        doc, note = document(
            spec, rootdir=root(args), store=where, env_key=env, depth=search_depth()
        )
    except CompareError as exc:
        raise CLIError(str(exc)) from None
    if note:
        from ..report.fmt import fit

        print(fit(note), file=sys.stderr)
    return doc


def is_file(spec: str) -> bool:
    return spec.endswith(".json") or Path(spec).is_file()


def branch_name(ref: str, args: argparse.Namespace) -> str:
    """What a heading should call ``ref``: HEAD's branch when it is on one."""
    from ..store import git as gitinfo

    if ref not in ("HEAD", "@"):
        return ref
    try:
        branch = gitinfo.head(gitinfo.open_repo(root(args))).branch
    except GitError:
        return ref
    return f"{branch} (HEAD)" if branch else ref


def search_depth() -> int:
    """The plugin's default ``search_depth``: the CLI walks as far as it does."""
    from ..core.options import SESSION_SPECS

    return int(SESSION_SPECS["search_depth"].default)


def pick_env(store: BaselineStore) -> str:
    """The environment to read when ``--env`` is not given: this machine's, else the only
    one stored (:func:`~pytest_infperf.store.history.choose_env`)."""
    from ..store.history import choose_env

    env = choose_env(store, None, current_env())
    if env is None:
        raise CLIError(f"no baselines in {store.root}")
    return env


def results(doc: dict[str, Any]) -> list[Any]:
    from ..core.results import BenchmarkResult

    return [BenchmarkResult.from_json(e) for e in doc["benchmarks"]]
