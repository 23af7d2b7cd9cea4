"""``infperf merge`` and ``infperf comment``: the CI fan-in of a split run and its
pull-request comment (see ``.github/workflows/perf.yml`` and ``perf-comment.yml``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from . import post


class CIError(Exception):
    """A problem with the command's inputs; printed, exit code 2 (main's)."""


def merged(paths: list[str], expect: int | None) -> tuple[dict[str, Any], str]:
    """The merged results document of a split run's shards (their verdicts held to the
    whole run) and its Markdown report; :class:`CIError` names what keeps them apart."""
    from ..core.results import BenchmarkResult
    from ..judge.merged import rejudged
    from ..report.markdown import render
    from ..report.notices import merged_warnings
    from ..store.merge import MergeError, merge

    shards = [(str(path), read(str(path), "merge")) for path in paths]
    try:
        doc = _messages(rejudged(merge(shards, expect=expect)))
    except MergeError as exc:
        raise CIError(str(exc)) from None
    results = [BenchmarkResult.from_json(b) for b in doc["benchmarks"]]
    doc["warnings"] = merged_warnings(doc.get("warnings") or (), results)
    text = render(
        results,
        source=doc.get("comparison"),
        warnings=doc.get("warnings") or (),
        environment=doc["environment"],
        mode=doc.get("mode") or "stored",
        gate=doc.get("compared_nothing"),
    )
    return doc, text


def _merge(args: argparse.Namespace) -> int:
    """One results document from the shards of a split run, its verdicts held to the whole
    run; nothing is written unless every shard reads and they merge."""
    from ..core.fsutil import atomic_write_text
    from ..core.results import dumps
    from ..report.fmt import fit

    doc, text = merged(args.shards, args.expect)
    atomic_write_text(Path(args.output), dumps(doc))
    if args.markdown:
        atomic_write_text(Path(args.markdown), text)
    n = len(doc["benchmarks"])
    print(f"merged {len(args.shards)} shards, {n} benchmark{'s' * (n != 1)}, into {args.output}")
    failed = failures(doc)
    for line in failed:
        print(fit(line))
    # The run's one verdict, as one unsplit run's exit status would have said it.
    return 1 if args.fail_on_regression and failed else 0


def failures(doc: dict[str, Any]) -> list[str]:
    """What fails the merged run (:func:`pytest_infperf.core.outcome.failures`):
    regressions (held to the run's family), budgets exceeded, more work than a benchmark's
    max_work_increase allows (unless accepted), the shards' failed tests, a comparison
    that compared nothing (decided over every shard's benchmarks), and a perf run that
    measured nothing."""
    from ..core.outcome import failures as found

    return [str(f) for f in found(doc)]


def read(path: str, command: str) -> dict[str, Any]:
    """A results document for ``command``; a file that is not one is named with what the
    command reads (the store's own message points at --perf-compare, for baselines)."""
    from ..store.baselines import BaselineFileError, read_document

    try:
        return read_document(Path(path))
    except BaselineFileError as exc:
        raise CIError(
            f"{path}: {exc.problem}. infperf {command} reads the results JSON a pytest run "
            "wrote with --perf-json (or infperf merge -o): pass that file"
        ) from None


def _messages(doc: dict[str, Any]) -> dict[str, Any]:
    """A regression's failure message names the family it was held to: the run's now."""
    from ..core.results import Comparison, Verdict, verdict_of
    from ..report.messages import failure_message

    for entry in doc["benchmarks"]:
        data = entry.get("comparison") or {}
        if verdict_of(entry) is Verdict.REGRESSION and data.get("message"):
            c = Comparison.from_json(data)
            entry["comparison"] = {
                **data,
                "message": failure_message(entry["key"], c, entry["nodeid"]),
            }
    return doc


def _comment(args: argparse.Namespace) -> int:
    """The pull-request comment body for a results JSON (see .github/workflows/perf.yml)."""
    from ..report.comment import body

    text, worth = body(read(args.results, "comment"))
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output} ({len(text)} characters; notable: {str(worth).lower()})")
    else:
        sys.stdout.write(text)
    if args.github_output:
        target = os.environ.get("GITHUB_OUTPUT")
        if not target:
            raise CIError("--github-output: GITHUB_OUTPUT is not set (not in GitHub Actions?)")
        with Path(target).open("a", encoding="utf-8") as fh:
            fh.write(f"notable={str(worth).lower()}\n")
    return 0


def _expect(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: a split run has at least 1 group")
    return value


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """infperf merge and comment."""
    merge = sub.add_parser(
        "merge", help="one results document from the --perf-json files of a split run's shards"
    )
    merge.add_argument("shards", nargs="+", help="the shards' --perf-json files")
    merge.add_argument("-o", "--output", required=True, help="the merged results JSON")
    merge.add_argument("--markdown", default=None, help="also write the run's Markdown here")
    merge.add_argument(
        "--expect",
        type=_expect,
        default=None,
        metavar="N",
        help="the number of groups the run was split into (the matrix's; default: the split "
        "the shards record): a group missing, twice or of another split is an error naming "
        "it, and nothing is written",
    )
    merge.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a benchmark regressed (held to the whole run's family), exceeded "
        "its budget or its max_work_increase, a shard's test failed, or a comparing run "
        "compared nothing (or measured nothing): the fan-in job's one verdict for a split "
        "run, as the unsplit run's exit status would have said it",
    )
    merge.set_defaults(func=_merge)
    com = sub.add_parser("comment", help="the pull-request comment for a --perf-json results file")
    com.add_argument("results", help="a --perf-json results file of a comparing run")
    com.add_argument("-o", "--output", default=None, help="write the body here (default stdout)")
    com.add_argument(
        "--github-output",
        action="store_true",
        help="also append notable=true|false to $GITHUB_OUTPUT (post a new comment only then)",
    )
    com.set_defaults(func=_comment)
    poster = sub.add_parser(
        "post-comment",
        help="post or update the comment on the workflow_run's own pull request "
        "(perf-comment.yml; the pull request is looked up from the run, never read from "
        "the artifact)",
        description=post.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    post.add_arguments(poster).set_defaults(func=post.run)
