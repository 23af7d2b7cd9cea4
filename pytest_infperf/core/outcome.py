"""A run's outcome as its results document records it: whether the run completed, and
what fails it.

A results document (``--perf-json``, ``infperf merge -o``) carries ``run``: ``complete``
(pytest ran every selected test to its end: no interrupt, no ``-x``/``--maxfail`` stop, no
collection error, an exit status of 0, 1 or 5), the exit status, and the tests that
failed. A partial document looks like a whole one benchmark by benchmark, so whatever
reads results to decide (``infperf merge``, ``infperf comment``, the Action's gate) asks
:func:`incomplete` first and believes only a complete run; :func:`failures` is what fails
a complete one, for every reader alike. Pure: reading and writing are the callers'.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .names import FailureKind
from .record import budget_failed, work_failed
from .results import BenchmarkResult, Verdict, verdict_of

#: pytest's exit statuses after which every selected test ran to its end: all passed,
#: some failed, or none was selected (an empty group of a split run).
RAN_THROUGH = (0, 1, 5)
#: How many failed tests a run record names (the count is kept whole).
NAMED_FAILURES = 50
_STATUS = {2: "interrupted", 3: "an internal error", 4: "a usage error"}
#: What a document that has no ``run`` record is, said where it is refused.
UNMARKED = (
    "it does not record whether its run completed (written by a pytest-infperf older than "
    "the `run` record, or not by --perf-json)"
)


def run_record(
    exitstatus: int,
    *,
    stopped: str | None = None,
    collection_errors: int = 0,
    failed: Sequence[str] = (),
    tests_failed: int = 0,
) -> dict[str, Any]:
    """The ``run`` record of a session that ended with ``exitstatus``; ``stopped``: why it
    stopped before its last test (an interrupt, ``-x``), when it did."""
    why = None
    if stopped:
        why = stopped
    elif collection_errors:
        why = (
            f"{collection_errors} collection error{'s' * (collection_errors != 1)}: the "
            "tests of those files never ran"
        )
    elif exitstatus not in RAN_THROUGH:
        what = _STATUS.get(exitstatus, "an unknown outcome")
        why = f"pytest ended with exit status {exitstatus} ({what})"
    record: dict[str, Any] = {
        "complete": why is None,
        "exitstatus": int(exitstatus),
        "tests_failed": max(int(tests_failed), len(failed)),
        "failed": list(dict.fromkeys(failed))[:NAMED_FAILURES],
    }
    if why is not None:
        record["incomplete"] = why
    return record


def incomplete(doc: Mapping[str, Any]) -> str | None:
    """Why ``doc``'s run cannot be taken as complete (None: it completed)."""
    run = doc.get("run")
    if not isinstance(run, Mapping):
        return UNMARKED
    if run.get("complete") is True:
        return None
    return str(run.get("incomplete") or f"pytest ended with exit status {run.get('exitstatus')}")


@dataclasses.dataclass(frozen=True)
class Failure:
    """One thing that fails a run: its kind and the line that says it."""

    kind: FailureKind
    text: str
    #: How many of its kind this line stands for ("3 more failed tests": 3).
    count: int = 1

    def __str__(self) -> str:
        return self.text


#: How the kinds read in a count ("1 regression, 2 budgets exceeded").
KIND_LABELS = {
    FailureKind.REGRESSION: ("regression", "regressions"),
    FailureKind.BUDGET: ("budget exceeded", "budgets exceeded"),
    FailureKind.WORK: ("work limit exceeded", "work limits exceeded"),
    FailureKind.TEST: ("failed test", "failed tests"),
    FailureKind.COMPARED_NOTHING: ("compared nothing", "compared nothing"),
    FailureKind.MEASURED_NOTHING: ("measured nothing", "measured nothing"),
}


def failures(doc: Mapping[str, Any]) -> list[Failure]:
    """What fails the run ``doc`` records: regressions, budgets (``max_median_ms``)
    exceeded, more work than a benchmark's ``max_work_increase`` allows (unless
    accepted), failed tests that none of those explain, a comparison that compared
    nothing, and a perf run that measured nothing."""
    out: list[Failure] = []
    perf_failed: set[str] = set()
    for b in doc.get("benchmarks") or ():
        extra = b.get("extra") or {}
        if verdict_of(b) is Verdict.REGRESSION:
            out.append(Failure(FailureKind.REGRESSION, f"regression: {b['key']}"))
            perf_failed.add(b.get("nodeid"))
        if (budget := budget_failed(extra)) is not None:
            limit_ms = budget.get("max_median_ms")
            out.append(
                Failure(
                    FailureKind.BUDGET, f"budget exceeded: {b['key']} (max_median_ms={limit_ms})"
                )
            )
            perf_failed.add(b.get("nodeid"))
        if (work := work_failed(extra)) is not None:
            change = work.get("change")
            more = f"{change:+.1%}, " if isinstance(change, int | float) else ""
            limit = work.get("max_work_increase")
            out.append(
                Failure(
                    FailureKind.WORK, f"more work: {b['key']} ({more}max_work_increase={limit})"
                )
            )
            perf_failed.add(b.get("nodeid"))
    out += _failed_tests(doc.get("run"), perf_failed)
    if doc.get("compared_nothing"):
        out.append(
            Failure(FailureKind.COMPARED_NOTHING, f"compared nothing: {doc['compared_nothing']}")
        )
    if doc.get("measured_nothing"):
        out.append(
            Failure(FailureKind.MEASURED_NOTHING, f"measured nothing: {doc['measured_nothing']}")
        )
    return out


def fails_session(found: Sequence[Failure], *, warn_only: bool, shard: bool) -> bool:
    """Whether what a session's record holds (``found``: :func:`failures` of its document)
    fails a session pytest would have passed. A benchmark's failures (a regression, a
    budget, more work) failed its test already, and pytest's exit status carries them; the
    whole run's fail it here. ``--perf-warn-only`` fails nothing (its tests do not fail
    either); a shard of a split run records that it measured nothing and leaves the
    failure to ``infperf merge``, which decides over every shard."""
    if warn_only:
        return False
    return any(
        f.kind is FailureKind.COMPARED_NOTHING
        or (f.kind is FailureKind.MEASURED_NOTHING and not shard)
        for f in found
    )


def _failed_tests(run: Any, perf_failed: set[str]) -> list[Failure]:
    """The run's failed tests that no benchmark's failure explains (a test that failed for
    its own reasons fails the run whatever its benchmarks say)."""
    if not isinstance(run, Mapping):
        return []
    named = [n for n in run.get("failed") or () if n not in perf_failed]
    unnamed = int(run.get("tests_failed") or 0) - len(run.get("failed") or ())
    out = [Failure(FailureKind.TEST, f"failed test: {n}") for n in named]
    if unnamed > 0:
        more = f"{unnamed} more failed test{'s' * (unnamed != 1)}"
        out.append(Failure(FailureKind.TEST, more, unnamed))
    return out


def count_line(found: Sequence[Failure]) -> str:
    """``found`` counted by kind: "1 regression, 2 budgets exceeded"."""
    counts: dict[FailureKind, int] = {}
    for f in found:
        counts[f.kind] = counts.get(f.kind, 0) + f.count
    parts = []
    for kind, n in counts.items():
        one, many = KIND_LABELS[kind]
        parts.append(one if kind.whole_run else f"{n} {one if n == 1 else many}")
    return ", ".join(parts)


def compared_nothing(results: Sequence[BenchmarkResult]) -> bool:
    """Every compared benchmark went without a usable baseline (none stored, or only from
    another environment): a gate that compared nothing must not look green."""
    compared = [r.comparison for r in results if r.comparison is not None]
    blind = (Verdict.NO_BASELINE, Verdict.INCOMPARABLE)
    return bool(compared) and all(c.verdict in blind for c in compared)
