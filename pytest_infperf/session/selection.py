"""What the run's selection of tests says about its results, said as warnings at the
session's end: a Perf-Accept pattern that matches nothing, a selection that differs from
the baseline's, benchmarks from untracked files, a saved baseline lacking failed tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.results import BenchmarkResult
    from .collector import Collector
    from .context import RunContext


def unmatched_accepts(context: RunContext, results: list[BenchmarkResult]) -> None:
    """A Perf-Accept pattern that matches no benchmark is most likely a typo."""
    from ..judge.accept import unmatched

    keys = [r.key for r in results]
    for rule in unmatched(context.accept, keys):
        context.warn(
            f"{rule.where()} accepts {rule.pattern!r}, which matches no benchmark of this "
            "run: check the pattern (a node id or an fnmatch pattern of node ids)"
        )


def lacking(collector: Collector, failed: list[str], commit: str) -> str | None:
    """A saved baseline that lacks perf tests which failed before measuring, said (a later
    comparison of them finds no baseline): None where it lacks none."""
    measured = {r.nodeid for r in collector.results}
    lacking = [n for n in failed if n in collector.perf_ids and n not in measured]
    if not lacking:
        return None
    shown = ", ".join(lacking[:5]) + (" ..." if len(lacking) > 5 else "")
    return (
        f"the baseline of {commit} lacks {len(lacking)} perf test(s) that failed before "
        f"measuring: {shown}; a comparison of them finds no baseline until they pass and the "
        "baseline is saved again"
    )


def selection_differs(context: RunContext, results: list[BenchmarkResult]) -> None:
    """A benchmark's speed depends on what ran before it in the process (measured here:
    a numpy test at 262 us in the full suite, 1.1-1.5 ms alone), so a stored verdict
    from another selection of tests is less comparable than it looks: say so."""
    from ..report.notices import on_stored_pass

    source = context.source
    if context.settings.ab or source is None or not source.entries:
        return
    if not on_stored_pass(results):  # every verdict measured both sides
        return
    now = {r.key for r in results}
    base = set(source.entries)
    if not now or now == base:
        return
    left_out, added = len(base - now), len(now - base)
    parts = []
    if left_out:
        parts.append(f"{left_out} of the baseline's {len(base)} benchmarks did not run")
    if added:
        parts.append(f"{added} {'benchmarks are' if added != 1 else 'benchmark is'} new")
    context.warn(
        f"this run's selection of tests differs from the baseline's run ({'; '.join(parts)})"
        ": a benchmark's speed depends on what ran before it in the process, so compare "
        "the same selection (settling and --perf-ab measure both sides in this run's order)"
    )


def untracked(context: RunContext, results: list[BenchmarkResult], commit: str) -> None:
    """Benchmarks from files git does not track: the baseline is saved for a commit
    that lacks them, so a later compare settles nothing against it and a reproduce
    command at that commit finds no such test."""
    from ..store import git as gitinfo

    files = sorted({Path(r.path) for r in results if r.path})
    try:
        repo = gitinfo.open_repo(context.settings.rootdir)
    except gitinfo.GitError:
        return
    lacking = gitinfo.untracked(repo, [context.settings.rootdir / f for f in files])
    if lacking:
        shown = ", ".join(lacking[:5]) + (
            f" and {len(lacking) - 5} more" if len(lacking) > 5 else ""
        )
        context.warn(
            f"benchmarks come from files git does not track ({shown}): the baseline is "
            f"saved for commit {commit}, which lacks them; commit them, then save again"
        )
