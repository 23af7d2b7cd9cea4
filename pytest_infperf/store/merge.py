"""One results document from the shards of a split run (``infperf merge``).

A suite split over several runners (pytest-split's ``--splits N --group i``, one group per
runner) writes one ``--perf-json`` document per shard, and each records which group it ran
(``split``). Merged, they are what one unsplit run would have written: every benchmark
once, the commit and mode they share, every warning once, and ``shards`` saying which
shard held what. The shards are put in order of their group (then name) first, so the
merged document does not depend on the order they are named in. ``expect=N`` fails closed:
every group 1..N must be there, once, or the merge names the missing ones.

Shards on different machines may have different environment keys when they hold different
benchmarks: each benchmark then keeps its shard's key in ``environment_key``, and the
document's ``environment`` is the first shard's. The same benchmark measured on two GPU
types is two runs' results: merge each environment's shards on their own.

The run-level facts are the merged run's, not a shard's: ``family`` (the benchmarks the
run's multiplicity control counts) is the sum of the shards'; ``compared_nothing`` is kept
as the first shard's cause, for :mod:`pytest_infperf.judge.merged` to decide over all the
benchmarks (with the verdicts held to the whole family); ``measured_nothing`` holds only
where no shard measured a benchmark; ``run`` is complete, with every shard's failed tests.
A shard whose run did not complete (interrupted, stopped by ``-x``) is refused: merged, it
would pass for its whole group. Pure: reading and writing are the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.outcome import UNMARKED, incomplete, run_record
from ..core.results import bench_key, document

#: Top-level fields a shard writes for itself; everything else must agree, or is merged.
_OWN = {
    "schema_version",
    "created",
    "benchmarks",
    "environment",
    "warnings",
    "shards",
    "commit",
    "split",
    "family",
    "compared_nothing",
    "measured_nothing",
    "run",
}


class MergeError(Exception):
    """Shards that cannot be one run's results: the message says which and why."""


def _commit(doc: dict[str, Any]) -> str | None:
    commit = doc.get("commit")
    return commit.get("sha") if isinstance(commit, dict) else None


def _group(doc: dict[str, Any]) -> tuple[int, int] | None:
    split = doc.get("split")
    if isinstance(split, dict) and split.get("group") and split.get("splits"):
        return int(split["group"]), int(split["splits"])
    return None


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


def ordered(shards: Sequence[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """The shards by group, then name (shards without a group last): one order for any
    order of the arguments."""

    def key(shard: tuple[str, dict[str, Any]]) -> tuple[int, str]:
        group = _group(shard[1])
        return (group[0] if group else 1 << 30, shard[0])

    return sorted(shards, key=key)


def check_groups(shards: Sequence[tuple[str, dict[str, Any]]], expect: int | None) -> None:
    """Each group once, of one split; with ``expect``, exactly groups 1..expect."""
    groups = {name: _group(doc) for name, doc in shards}
    held: dict[int, str] = {}
    for name, group in groups.items():
        if group is None:
            continue
        if group[0] in held:
            raise MergeError(
                f"{held[group[0]]} and {name} are both group {group[0]}: the same shard twice "
                "(merge one workflow run's artifacts, each shard once)"
            )
        held[group[0]] = name
    splits = {g[1] for g in groups.values() if g is not None}
    if len(splits) > 1:
        listed = ", ".join(f"{n}: {g[0]} of {g[1]}" for n, g in groups.items() if g)
        raise MergeError(
            f"the shards come from splits into different numbers of groups ({listed}): "
            "merge the shards of one run"
        )
    if expect is None:
        return
    if expect < 1:
        raise MergeError(f"--expect must be at least 1 (got {expect})")
    unsplit = [name for name, group in groups.items() if group is None]
    if unsplit:
        raise MergeError(
            f"--expect {expect}: {', '.join(unsplit)} records no pytest-split group (written "
            "without --splits/--group, or by an older pytest-infperf): run every shard with "
            "--splits N --group i, or merge without --expect"
        )
    if splits and splits != {expect}:
        raise MergeError(
            f"--expect {expect}, but the shards were split into {splits.pop()} groups: "
            "pass the matrix's number of groups"
        )
    _missing(held, expect, f"--expect {expect}")


def _missing(held: Mapping[int, str], expect: int, said: str) -> None:
    missing = sorted(set(range(1, expect + 1)) - set(held))
    if missing:
        raise MergeError(
            f"{len(missing)} of {expect} shards missing ({said}): group(s) "
            f"{', '.join(map(str, missing))} of {expect} sent no results (a shard that failed "
            "or was cancelled before writing them, or whose artifact did not arrive); the run "
            "is not judged on fewer shards than it has"
        )


def check_complete(shards: Sequence[tuple[str, dict[str, Any]]], expect: int | None) -> None:
    """Every shard's run completed: a shard interrupted or stopped early (``-x``) holds
    part of its group's benchmarks, and merged it would pass for the whole group. A shard
    that does not record it (an older writer) is refused where the run is held to its
    groups (``expect``), and otherwise leaves the merged run's completeness unknown."""
    for name, doc in shards:
        if doc.get("run") is None and expect is None:
            continue
        why = incomplete(doc)
        if why == UNMARKED:
            raise MergeError(
                f"--expect {expect}: {name}: {why}; a shard is merged only when it is "
                "known to have run its whole group: run every shard with this "
                "pytest-infperf, or merge without --expect"
            )
        if why is not None:
            raise MergeError(
                f"{name}'s run did not complete ({why}): it holds only the benchmarks "
                "measured before it stopped, and merged it would pass for its whole group; "
                "run that shard again to its end, then merge"
            )


def _run(shards: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any] | None:
    """The merged run's record: complete (every shard's was), exit status 1 where a
    shard's tests failed, every shard's failed tests (None: a shard records none)."""
    runs = [doc.get("run") for _, doc in shards]
    if not runs or any(not isinstance(r, dict) for r in runs):
        return None
    statuses = {int(r.get("exitstatus", 0)) for r in runs if r}
    status = 1 if 1 in statuses else 0 if 0 in statuses else 5
    failed = [n for r in runs if r for n in r.get("failed") or ()]
    count = sum(int(r.get("tests_failed") or 0) for r in runs if r)
    return run_record(status, failed=failed, tests_failed=count)


def _family(shards: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any] | None:
    """The whole run's family: the sum of the shards' (None where one did not record it:
    its verdicts then keep their shard's family)."""
    families = [doc.get("family") for _, doc in shards]
    if not any(families):
        return None
    lacking = [name for name, doc in shards if not doc.get("family")]
    if lacking:
        raise MergeError(
            f"{', '.join(lacking)} records no family (the benchmarks its run-level guard "
            "counted) while the other shards do: merge the shards of one run, written by "
            "one pytest-infperf version"
        )
    alphas = {float(f["run_alpha"]) for f in families if f}
    if len(alphas) > 1:
        raise MergeError(
            f"the shards ran with different run_alpha ({', '.join(map(str, sorted(alphas)))}):"
            " every shard of a run takes the same --perf-run-alpha"
        )
    out = {
        "perf_tests": sum(int(f["perf_tests"]) for f in families if f),
        "run_alpha": alphas.pop(),
    }
    if all(f.get("benchmarks") is not None for f in families if f):
        out["benchmarks"] = sum(int(f["benchmarks"]) for f in families if f)
    return out


def merge(
    shards: Sequence[tuple[str, dict[str, Any]]], expect: int | None = None
) -> dict[str, Any]:
    """The merged document of ``shards`` (each a name for messages and a validated
    results document); ``expect``: the number of groups the run was split into."""
    if not shards:
        raise MergeError("no shards to merge: name the --perf-json files of the shards")
    shards = ordered(shards)
    check_groups(shards, expect)
    check_complete(shards, expect)
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
    if expect is None:
        # The split the shards record: a fleet merged without one of its shards would judge
        # the run on what the others measured, and pass. (Last: a mix-up the checks above
        # name is the better message.)
        groups = [g for g in (_group(doc) for _, doc in shards) if g is not None]
        if groups:
            _missing({g[0]: "" for g in groups}, groups[0][1], "the shards' own --splits")
    # A run-level field from the first shard (in group order) that has it: a shard that
    # found no baseline has no `comparison`, and must not erase the others'.
    extra: dict[str, Any] = {}
    for _, doc in shards:
        for k, v in doc.items():
            if k not in _OWN and v is not None and k not in extra:
                extra[k] = v
    extra["warnings"] = warnings
    extra["shards"] = [_listed(name, doc, keys[name]) for name, doc in shards]
    family = _family(shards)
    if family is not None:
        extra["family"] = family
    causes = [doc["compared_nothing"] for _, doc in shards if doc.get("compared_nothing")]
    if causes:
        extra["compared_nothing"] = causes[0]
    # A perf run measured nothing only where no shard measured anything.
    nothing = [doc["measured_nothing"] for _, doc in shards if doc.get("measured_nothing")]
    if nothing and not entries:
        extra["measured_nothing"] = nothing[0]
    run = _run(shards)
    if run is not None:
        extra["run"] = run
    first = shards[0][1]
    merged = document(entries, first["environment"], first.get("commit"), **extra)
    # The merged run was done when its last shard was: the same document for the same shards.
    merged["created"] = max(str(doc.get("created") or "") for _, doc in shards)
    return merged


def _listed(name: str, doc: dict[str, Any], env_key: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "environment_key": env_key,
        "benchmarks": len(doc["benchmarks"]),
    }
    group = _group(doc)
    if group is not None:
        out["group"], out["splits"] = group
    return out
