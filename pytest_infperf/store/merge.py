"""One results document from the shards of a split run (``infperf merge``).

A suite split over several runners (pytest-split's ``--splits N --group i``, one group per
runner) writes one ``--perf-json`` document per shard. Merged, they are what one unsplit
run would have written: every benchmark once, the commit and mode they share, every
warning once, and ``shards`` saying which shard held what. Shards on different machines
may have different environment keys when they hold different benchmarks: each benchmark
then keeps its shard's key in ``environment_key``, and the document's ``environment`` is
the first shard's. The same benchmark measured on two GPU types is two runs' results: merge
each environment's shards on their own. Pure: reading and writing are the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.results import bench_key, document

#: Top-level fields a shard writes for itself; everything else must agree, or is merged.
_OWN = {"schema_version", "created", "benchmarks", "environment", "warnings", "shards"}


class MergeError(Exception):
    """Shards that cannot be one run's results: the message says which and why."""


def _commit(doc: dict[str, Any]) -> str | None:
    commit = doc.get("commit")
    return commit.get("sha") if isinstance(commit, dict) else None


def _twice(key: str, first: str, second: str, keys: dict[str, str], several: bool) -> str:
    if several and keys[first] != keys[second]:
        return (
            f"{key} was measured in two environments ({first}: {keys[first]}, {second}: "
            f"{keys[second]}): one results document holds one measurement of a benchmark; "
            "merge each environment's shards on their own (one `infperf merge` per GPU type)"
        )
    return (
        f"{key} is in two shards ({first} and {second}): the shards overlap; split with "
        "pytest-split's --splits N --group i, each group once"
    )


def merge(shards: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The merged document of ``shards`` (each a name for messages and a validated
    results document)."""
    if not shards:
        raise MergeError("no shards to merge: name the --perf-json files of the shards")
    commits = {name: _commit(doc) for name, doc in shards}
    if len(set(commits.values())) > 1:
        listed = ", ".join(f"{n}: {(s or 'no commit')[:10]}" for n, s in commits.items())
        raise MergeError(
            f"the shards measured different commits ({listed}): merge the shards of one "
            "run (one workflow run's artifacts)"
        )
    modes = {name: doc.get("mode") for name, doc in shards}
    if len(set(modes.values())) > 1:
        listed = ", ".join(f"{n}: {m}" for n, m in modes.items())
        raise MergeError(
            f"the shards ran in different modes ({listed}): every shard of a run takes the "
            "same flags (--perf-compare=REF or --perf-ab=REF)"
        )
    keys = {name: doc["environment"]["key"] for name, doc in shards}
    several = len(set(keys.values())) > 1
    owner: dict[str, str] = {}
    entries: list[dict[str, Any]] = []
    warnings: list[str] = []
    for name, doc in shards:
        for entry in doc["benchmarks"]:
            key = entry.get("key") or bench_key(entry["nodeid"], entry.get("name"))
            if key in owner:
                raise MergeError(_twice(key, owner[key], name, keys, several))
            owner[key] = name
            entries.append({**entry, "environment_key": keys[name]} if several else entry)
        warnings += [w for w in doc.get("warnings") or [] if w not in warnings]
    first = shards[0][1]
    extra = {k: v for k, v in first.items() if k not in _OWN and k not in ("commit",)}
    extra["warnings"] = warnings
    extra["shards"] = [
        {"name": name, "environment_key": keys[name], "benchmarks": len(doc["benchmarks"])}
        for name, doc in shards
    ]
    return document(entries, first["environment"], first.get("commit"), **extra)
