"""The artifact writer (registered as ``infperf-artifacts``, on the controller only): at the
end of the session it writes the baseline (``--perf-save``, never on an interrupted run),
the results JSON (with its ``run`` record: whether the run completed), the Markdown report
and the GitHub job summary; a perf run that measured no benchmark fails closed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..core.budget import process_started

if TYPE_CHECKING:
    from ..core.results import BenchmarkResult
    from ..core.settings import Settings
    from .collector import Collector
    from .context import RunContext


class RunOutcome:
    """What the session did, for its results' ``run`` record
    (:mod:`pytest_infperf.core.outcome`): its exit status, why it stopped before its last
    test, its collection errors and failed tests; and whether a perf run measured nothing.
    The artifact writer's base: pytest calls these hooks on the writer, on the controller
    (xdist's reports reach it too)."""

    settings: Settings
    collector: Collector
    split: tuple[int, int] | None

    def __init__(self) -> None:
        #: Why a perf run (save, compare, A/B) measured no benchmark: it fails closed.
        self.nothing: str | None = None
        #: The session's exit status as it will end (the writer's own failures included).
        self.exitstatus: int | None = None
        self.stopped: str | None = None
        self.collection_errors = 0
        self.failed: list[str] = []
        self.tests_collected = 0

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        # Ctrl-C, pytest.exit(), and xdist's -x (an Interrupted with pytest's reason).
        said = str(excinfo.value).strip().splitlines()
        self.stopped = f"interrupted ({excinfo.typename}{': ' + said[0] if said else ''})"

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_errors += 1

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # A failure in setup, call or teardown; an xfail that failed is no failure.
        failed = report.failed and not hasattr(report, "wasxfail")
        if failed and report.nodeid not in self.failed:
            self.failed.append(report.nodeid)

    def run_record(self) -> dict[str, Any]:
        from ..core.outcome import run_record

        return run_record(
            int(self.exitstatus if self.exitstatus is not None else 0),
            stopped=self.stopped,
            collection_errors=self.collection_errors,
            failed=self.failed,
        )

    def _check_nothing(self, exitstatus: int) -> int | None:
        """A perf run (--perf-save, --perf-compare, --perf-ab) that measured no benchmark
        is a gate that checked nothing: most likely pointed at the wrong tests. It fails
        closed (--perf-warn-only: it only says so); a shard of a split run records it, for
        `infperf merge` to decide over every shard. A run that stopped early or collected
        no test (pytest's exit 5) is left as pytest reports it."""
        s = self.settings
        if s.disable or not (s.save or s.compare or s.ab) or self.stopped:
            return None
        if exitstatus not in (0, 1, 5) or self.collection_errors:
            return None
        flag = "--perf-save" if s.save else "--perf-ab" if s.ab else "--perf-compare"
        perf, ran = self.collector.perf_tests or 0, self.tests_collected
        tests = f"{ran} test{'s' * (ran != 1)}"
        if not perf:
            what = f"none of the {tests} collected uses the infer_bench fixture"
        else:
            what = (
                f"{perf} of the {tests} collected use infer_bench, but none measured a "
                "benchmark (skipped, or failed before their measurement ended)"
            )
        # Pointing the run elsewhere helps only where no test here uses infer_bench.
        fix = (
            ". Point the run at the perf tests (the test paths, the Action's `tests` input), "
            f"or run without {flag}"
            if not perf
            else ": the test results above say why"
        )
        self.nothing = f"{flag} measured no benchmark: {what}{fix}"
        if self.split is not None or s.warn_only or exitstatus != 0:
            return None
        return int(pytest.ExitCode.TESTS_FAILED)


class ArtifactWriter(RunOutcome):
    def __init__(
        self, context: RunContext, collector: Collector, split: tuple[int, int] | None = None
    ) -> None:
        super().__init__()
        self.context = context
        self.collector = collector
        self.settings = context.settings
        #: pytest-split's (group, splits) when this session is one shard of a split run.
        self.split = split
        #: What was written, and what could not be, for the terminal summary.
        self.written: list[str] = []
        self.errors: list[str] = []
        self.environment: dict[str, Any] | None = None
        self.drift: dict[str, Any] | None = None
        #: Why the session fails closed: a --perf-compare that compared nothing.
        self.gate: str | None = None
        #: When the process began: how long its run took is recorded.
        self.started = process_started()

    @property
    def ab(self) -> bool:
        return bool(self.settings.ab)

    @property
    def mode(self) -> str:
        s = self.settings
        return "ab" if s.ab else "compare" if s.compare else "measure"

    def run_warnings(self) -> list[str]:
        """The run's warnings, as every output says them (``report/notices.py``)."""
        from ..report.notices import run_warnings

        return run_warnings(self.collector.results, self.drift, self.context.warnings, self.ab)

    def run_seconds(self) -> float:
        """Seconds from the process's start to now (its end, when the files are written)."""
        return time.monotonic() - self.started

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if session.shouldfail and not self.stopped:
            self.stopped = f"stopped early: {session.shouldfail} (-x/--maxfail)"
        elif session.shouldstop and not self.stopped:
            self.stopped = f"stopped early: {session.shouldstop}"
        self.tests_collected = session.testscollected
        self.exitstatus = int(exitstatus)
        listing = any(
            session.config.getoption(name, False)
            for name in ("collectonly", "setuponly", "setupplan")
        )
        status = self.finish(exitstatus, listing)
        if status is not None and session.exitstatus == 0:
            session.exitstatus = status
        # The outcome is written: a SIGTERM now lets the teardown end (where this run holds
        # the handler at all: its module is imported only by a run that interleaves).
        sigterm = sys.modules.get("pytest_infperf.ab.sigterm")
        if sigterm is not None:
            sigterm.finishing()

    def finish(self, exitstatus: int, listing: bool = False) -> int | None:
        """Write everything; returns a new exit status when saving failed or a perf run
        measured nothing (``listing``: --collect-only and friends, which measure nothing
        by design)."""
        if not self.collector.results:
            status = None if listing else self._check_nothing(exitstatus)
            if status is not None and exitstatus == 0:
                self.exitstatus = status
            # A shard of a split run that holds no benchmark still writes its (empty)
            # results, so that `infperf merge` of every shard's file needs no exceptions.
            if self.settings.json_path is not None and not self.settings.disable:
                self._collect_environment()
                self.write_json(self.settings.json_path)
            return status
        context = self.context
        self._collect_environment()
        self.drift = context.drift()
        new_status = self._check_gate()
        self._unmatched_accepts()
        selection_differs(self.context, self.collector.results)
        if self.settings.save:
            new_status = self._save(exitstatus) or new_status
        if new_status is not None and exitstatus == 0:
            self.exitstatus = new_status  # what the session will exit with
        if self.settings.json_path is not None:
            self.write_json(self.settings.json_path)
        self._write_markdown()
        return new_status

    def _collect_environment(self) -> None:
        from ..measure import environment

        context = self.context
        self.environment = environment.collect()
        if context.hard is not None:
            # The key was fixed at configure time; store the hard fields it was made from.
            self.environment["hard"] = context.hard
            self.environment["key"] = context.env_key

    def _check_gate(self) -> int | None:
        from ..core.outcome import compared_nothing

        s = self.settings
        if not (s.compare or s.ab) or s.allow_missing:
            return None
        if not compared_nothing(self.collector.results):
            return None
        # --perf-ab against a commit that has none of these benchmarks measured nothing on
        # its side: as blind a gate as a --perf-compare without baselines.
        self.gate = self.context.missing_cause()
        # --perf-warn-only reports it as loudly but, as for regressions, does not fail.
        return None if s.warn_only else int(pytest.ExitCode.TESTS_FAILED)

    def _unmatched_accepts(self) -> None:
        """A Perf-Accept pattern that matches no benchmark is most likely a typo."""
        from ..judge.accept import unmatched

        keys = [r.key for r in self.collector.results]
        for rule in unmatched(self.context.accept, keys):
            self.context.warn(
                f"{rule.where()} accepts {rule.pattern!r}, which matches no benchmark of this "
                "run: check the pattern (a node id or an fnmatch pattern of node ids)"
            )

    def _save(self, exitstatus: int) -> int | None:
        from ..store.baselines import BaselineFileError, BaselineStore

        context = self.context
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            context.warn("not saving the baseline: the run was interrupted")
            return None
        assert context.commit is not None and context.env_key and self.environment is not None
        untracked(context, self.collector.results, context.commit.short)
        store = BaselineStore(self.settings.baselines, self.settings.max_baseline_bytes)
        try:
            path, n, total = store.save(
                context.env_key,
                context.commit.sha,
                [r.to_json() for r in self.collector.results],
                self.environment,
                context.commit.to_json(),
                reference=context.reference,
                # What --perf-budget=1.5x multiplies when a later run compares with it.
                run_seconds=round(self.run_seconds(), 3),
            )
        except (OSError, BaselineFileError) as exc:
            self.errors.append(f"could not save the baseline: {exc}")
            return int(pytest.ExitCode.TESTS_FAILED)
        except Exception as exc:  # filelock.Timeout and friends
            self.errors.append(f"could not save the baseline: {type(exc).__name__}: {exc}")
            return int(pytest.ExitCode.TESTS_FAILED)
        rel = _relative(path, self.settings.rootdir)
        self.written.append(
            f"baseline of {context.commit.short}: {rel} ({n} benchmark{'s' * (n != 1)} saved, "
            f"{total} stored)"
        )
        if lacking := _lacking(self.collector, self.failed, context.commit.short):
            context.warn(lacking)
        return None

    def document(self) -> dict[str, Any]:
        from ..core.results import document
        from ..measure import environment
        from ..store import git as gitinfo

        context = self.context
        env = self.environment or environment.collect()
        # The session's mode, named as its flag is (each comparison's own ``mode`` says how
        # its baseline side was measured: ``ab`` for a verdict settled in this job).
        extra: dict[str, Any] = {"mode": self.mode, "warnings": self.run_warnings()}
        if self.split is not None:
            # Which shard this is: `infperf merge --expect N` names a missing one by it.
            extra["split"] = {"group": self.split[0], "splits": self.split[1]}
        s = self.settings
        if (s.compare or s.ab) and self.collector.perf_tests is not None:
            # The family the run-level guard and Bonferroni counted (its benchmarks, as far
            # as the baseline tells): a merge of shards judges the whole run's, the sum.
            extra["family"] = self.collector.family_record(s.run_alpha)
        if self.gate is not None:
            extra["compared_nothing"] = self.gate
        if self.nothing is not None:
            extra["measured_nothing"] = self.nothing
        # Whether this run completed: merge, comment and the Action believe only one that did.
        extra["run"] = self.run_record()
        if context.reference is not None:
            extra["reference"] = context.reference
        extra["run_seconds"] = round(self.run_seconds(), 3)
        if context.source is not None:
            extra["comparison"] = {**context.source.to_json(), "environment_drift": self.drift}
            if self.settings.ab:
                extra["comparison"]["removed"] = context.removed
                extra["base_commit"] = context.source.sha
        commit = (
            context.commit.to_json()
            if context.commit is not None
            else gitinfo.describe(self.settings.rootdir, self.settings.baselines)
        )
        return document(self.collector.results, env, commit, **extra)

    def write_json(self, path: os.PathLike[str] | str) -> None:
        from ..core.fsutil import atomic_write_text
        from ..core.results import dumps

        doc = self.document()
        atomic_write_text(Path(path), dumps(doc))
        why = doc["run"].get("incomplete")
        marked = f" (marked incomplete: {why})" if why else ""
        self.written.append(f"results JSON: {path}{marked}")

    def markdown(self) -> str:
        from ..report.comment import headed
        from ..report.markdown import render

        source = self.context.source
        text = render(
            self.collector.results,
            source=source.to_json() if source is not None else None,
            drift=self.drift,
            warnings=self.run_warnings(),
            environment=self.environment,
            mode=self.mode,
            gate=self.gate,
        )
        # A run that did not complete, or failed on what the title does not say, is titled
        # so in the job summary too: its title alone would read as a pass.
        facts = {
            "benchmarks": [r.to_json() for r in self.collector.results],
            "run": self.run_record(),
            "compared_nothing": self.gate,
        }
        return headed(text, facts)

    def _write_markdown(self) -> None:
        """--perf-markdown, and the GitHub job summary when running in Actions."""
        from ..core.fsutil import atomic_write_text

        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        want_summary = bool(summary) and self.settings.summary
        if self.settings.markdown is None and not want_summary:
            return
        text = self.markdown()
        if self.settings.markdown is not None:
            atomic_write_text(self.settings.markdown, text)
            self.written.append(f"Markdown report: {self.settings.markdown}")
        if want_summary:
            try:
                with Path(str(summary)).open("a", encoding="utf-8") as fh:
                    fh.write(text)
            except OSError as exc:
                self.context.warn(f"could not append to GITHUB_STEP_SUMMARY: {exc}")


def _lacking(collector: Collector, failed: list[str], commit: str) -> str | None:
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


def _relative(path: Any, root: Any) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


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
