"""The pull-request comment: one per pull request, found again by a hidden marker and
updated in place on every run (``infperf comment results.json``; see
``.github/workflows/perf.yml``).

The body is the Markdown report, whose first line is the comment's title. It is posted
when the report has something a reviewer should see (a regression, an accepted
regression, an improvement, a benchmark left undecided, one that does more work, or a
comparison that compared nothing) and otherwise updated to say that nothing changed. A
run that did not complete (its results' ``run`` record), or that failed on what the
report's title does not say (a budget, more work, a failed test, nothing measured), is
titled so and always posted: an interrupted run's partial results never read as "no
changes", nor replace an earlier comment's regression with a pass. It
always fits GitHub's 65,536-character limit: the table collapses into ``<details>`` first,
then loses its last rows (unchanged ones sort last), with a line saying where the full
report is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.names import FailureKind
from ..core.outcome import UNMARKED, Failure, count_line, failures, incomplete
from ..core.results import BenchmarkResult, Verdict
from .markdown import render
from .messages import more_work_warning
from .notices import HEAD_ENVIRONMENT

MARKER = "<!-- pytest-infperf:comment -->"
#: GitHub's limit on a comment body, in characters.
LIMIT = 65_536
#: Verdicts a reviewer should see in the pull request.
NOTABLE = (Verdict.REGRESSION, Verdict.ACCEPTED, Verdict.IMPROVEMENT, Verdict.INCONCLUSIVE)
FULL_REPORT = "the job summary and the uploaded perf-results artifact"


#: The run warnings that name a verdict nobody checked (a settling that could not happen,
#: stored verdicts a misread put in doubt): a run that has one never says "no changes".
UNCHECKED = (
    "judged against the stored baseline",
    "settling is off for this session",
    "were not re-checked: ",
    HEAD_ENVIRONMENT,
)


def _names_unchecked(warning: str) -> bool:
    return any(phrase in warning for phrase in UNCHECKED)


def notable(results: list[BenchmarkResult], doc: Mapping[str, Any]) -> bool:
    if doc.get("compared_nothing"):
        return True
    if any(_names_unchecked(str(w)) for w in doc.get("warnings") or ()):
        return True
    for r in results:
        c = r.comparison
        if c is None:
            continue
        # Every judged part: a latency that moved beside a device time that did not (or
        # the other way round) is a change a reviewer must see, whatever the headline.
        judged = (c, *(c.parts or {}).values())
        if any(p.verdict in NOTABLE or p.not_settled for p in judged):
            return True
        if more_work_warning(c) is not None:
            return True  # work changed, time undecided: a reviewer must see it
    return False


#: Failures the report's own title and callouts say (the others need the run's headline).
_REPORTED = (FailureKind.REGRESSION, FailureKind.COMPARED_NOTHING)


def body(doc: Mapping[str, Any], limit: int = LIMIT) -> tuple[str, bool]:
    """The comment for a results document, and whether it is worth posting. A run that
    did not complete, or failed on something the report's title does not say (a budget,
    more work, a failed test, nothing measured), leads with that: never "no changes"."""
    results = [BenchmarkResult.from_json(b) for b in doc["benchmarks"]]
    why = incomplete(doc)
    found = failures(doc)
    unsaid = [f for f in found if f.kind not in _REPORTED]
    worth = notable(results, doc) or why is not None or bool(unsaid)
    comparison = doc.get("comparison") or {}
    n = len(results)
    if not worth:
        text = (
            f"## pytest-infperf: no changes in {n} benchmark{'s' * (n != 1)}\n\n"
            "No regression, improvement or undecided benchmark in the latest run; details "
            f"in {FULL_REPORT}.\n"
        )
    else:
        text = render(
            results,
            source=comparison or None,
            drift=comparison.get("environment_drift"),
            warnings=doc.get("warnings") or (),
            environment=doc.get("environment"),
            mode=str(doc.get("mode") or "stored"),
            gate=doc.get("compared_nothing"),
        )
        if why is not None or unsaid:
            text = _failed(text, n, why, found)
    return fit(f"{MARKER}\n{text}", limit), worth


def headed(report: str, doc: Mapping[str, Any]) -> str:
    """The Markdown ``report`` of ``doc``'s run, its title and a callout saying the run did
    not complete or failed on what the report's title does not say (the job summary's, as
    the comment's); unchanged for a complete run that the title tells whole."""
    why = incomplete(doc)
    found = failures(doc)
    if why is None and not [f for f in found if f.kind not in _REPORTED]:
        return report
    return _failed(report, len(doc.get("benchmarks") or ()), why, found)


def _failed(report: str, n: int, why: str | None, found: list[Failure]) -> str:
    """``report`` under a title and callout that say the run did not complete, or failed,
    and on what (the report's own title would read as a pass)."""
    benchmarks = f"{n} benchmark{'s' * (n != 1)}"
    if why == UNMARKED:
        title = f"## pytest-infperf: {benchmarks}, run not known to have completed"
        lead = (
            f"> **These results do not say whether their run completed** ({why}), so they "
            "are not read as a pass: write them with this pytest-infperf's --perf-json."
        )
    elif why is not None:
        title = f"## pytest-infperf: incomplete run, {benchmarks} measured"
        lead = (
            f"> **The run did not complete:** {_line(why)}. Only the benchmarks it measured "
            "before it stopped are below; the others have no verdict, so this is no pass. "
            "Run it again to the end."
        )
    else:
        title = f"## pytest-infperf: run failed: {count_line(found)} in {benchmarks}"
        lead = "> **The run failed:**"
    lines = [title, "", "> [!CAUTION]", lead]
    if found:
        lines += [">", *(f"> - {_line(f.text)}" for f in found)]
    rest = report.split("\n", 1)[1] if "\n" in report else ""
    return "\n".join(lines) + "\n" + rest


def _line(text: str) -> str:
    return " ".join(text.split())


def fit(text: str, limit: int = LIMIT) -> str:
    """``text`` within ``limit`` characters: the table collapsed, then shortened."""
    if len(text) <= limit:
        return text
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("| ")), None)
    if start is None:
        return _cut(text, limit)
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    rows = lines[start:end]
    head, table, tail = lines[:start], rows, lines[end:]
    summary = f"<details><summary>All {len(rows) - 2} benchmarks</summary>"
    while True:
        shown = len(table) - 2
        more = len(rows) - len(table)
        note = ["", f"… {more} more rows in {FULL_REPORT}."] if more else []
        candidate = "\n".join([*head, summary, "", *table, *note, "", "</details>", *tail])
        if len(candidate) <= limit or shown <= 1:
            return candidate if len(candidate) <= limit else _cut(candidate, limit)
        table = table[: 2 + max(1, shown - max(1, shown // 10))]


def _cut(text: str, limit: int) -> str:
    note = f"\n\n… cut to fit a comment: the full report is in {FULL_REPORT}.\n"
    return text[: limit - len(note)] + note
