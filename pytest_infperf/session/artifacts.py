"""The artifact writer (registered as ``infperf-artifacts``, on the controller only): at the
end of the session it decides the run's :class:`~.outcome.Ending` once, then writes the
baseline (``--perf-save``, never on an interrupted run), the results JSON (with its ``run``
record: whether the run completed), the Markdown report and the GitHub job summary from it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..core.budget import process_started
from .outcome import RunOutcome

if TYPE_CHECKING:
    from .collector import Collector
    from .context import RunContext


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
        self.environment: dict[str, Any] | None = None
        #: When the process began: how long its run took is recorded.
        self.started = process_started()
        #: The results in the JSON's shape, made once at the session's end.
        self.entries: list[dict[str, Any]] = []

    @property
    def ab(self) -> bool:
        return bool(self.settings.ab)

    @property
    def mode(self) -> str:
        s = self.settings
        return "ab" if s.ab else "compare" if s.compare else "measure"

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
        """Decide the run's ending, then write everything; returns a new exit status when
        saving failed or the run fails closed (compared nothing, measured nothing).
        ``listing``: --collect-only and friends, which measure nothing by design."""
        from ..core.outcome import fails_session, failures

        results = self.collector.results
        ending = self.ending
        # The results as the JSON, the baseline, the report's title and the run's failures
        # read them: written out once (a large run's samples are most of its cost).
        self.entries = [r.to_json() for r in results]
        if results:
            from . import selection

            self._collect_environment()
            ending.drift = self.context.drift()
            ending.compared_nothing = self._compared_nothing()
            selection.unmatched_accepts(self.context, results)
            selection.selection_differs(self.context, results)
        elif not listing:
            ending.measured_nothing = self.measured_nothing(exitstatus)
        saved = self._save(exitstatus) if results and self.settings.save else None
        if results:
            from ..report.notices import run_warnings  # numpy: only once something was measured

            said = run_warnings(results, ending.drift, self.context.warnings, self.ab)
        else:  # what run_warnings says of no benchmark, without importing the report layer
            said = list(dict.fromkeys(self.context.warnings))
        ending.warnings = tuple(said)
        # Only a session pytest would pass is failed here: one that failed already keeps
        # its own status (a run of failed tests, pytest's "no tests ran").
        fails = exitstatus == 0 and fails_session(
            failures(self.facts()), warn_only=self.settings.warn_only, shard=self.split is not None
        )
        status = (
            saved if saved is not None else int(pytest.ExitCode.TESTS_FAILED) if fails else None
        )
        if status is not None and exitstatus == 0:
            self.exitstatus = status  # what the session will exit with
        ending.shard = self.split is not None
        ending.exitstatus = int(self.exitstatus if self.exitstatus is not None else exitstatus)
        # A shard of a split run that holds no benchmark still writes its (empty)
        # results, so that `infperf merge` of every shard's file needs no exceptions.
        if self.settings.json_path is not None and not (self.settings.disable and not results):
            if not results:
                self._collect_environment()
            self.write_json(self.settings.json_path)
        if results:
            self._write_markdown()
        return status

    def _collect_environment(self) -> None:
        from ..measure import environment

        context = self.context
        self.environment = environment.collect()
        if context.hard is not None:
            # The key was fixed at configure time; store the hard fields it was made from.
            self.environment["hard"] = context.hard
            self.environment["key"] = context.env_key

    def _compared_nothing(self) -> str | None:
        """Why a comparison compared nothing (every compared benchmark went without a usable
        baseline): a gate that compared nothing must not look green. None where it compared
        something, or is not a comparison, or --perf-allow-missing lets a first run pass."""
        from ..core.outcome import compared_nothing

        s = self.settings
        if not (s.compare or s.ab) or s.allow_missing:
            return None
        if not compared_nothing(self.collector.results):
            return None
        # --perf-ab against a commit that has none of these benchmarks measured nothing on
        # its side: as blind a gate as a --perf-compare without baselines.
        from .outcome import compared_nothing_cause

        # Never empty: an empty cause would read as "compared something" and pass.
        return compared_nothing_cause(self.context) or (
            "every compared benchmark went without a usable baseline"
        )

    def _save(self, exitstatus: int) -> int | None:
        from ..store.baselines import BaselineFileError, BaselineStore
        from . import selection

        context = self.context
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            context.warn("not saving the baseline: the run was interrupted")
            return None
        if context.refused is not None:  # what it measured is not this commit's code
            self.ending.errors.append(
                "not saving the baseline: the run imported the project from an installed copy "
                "that is not the working tree's (its failed tests name it)"
            )
            return int(pytest.ExitCode.TESTS_FAILED)
        assert context.commit is not None and context.env_key and self.environment is not None
        selection.untracked(context, self.collector.results, context.commit.short)
        store = BaselineStore(self.settings.baselines, self.settings.max_baseline_bytes)
        try:
            path, n, total = store.save(
                context.env_key,
                context.commit.sha,
                self.entries,
                self.environment,
                context.commit.to_json(),
                reference=context.reference,
                # What --perf-budget=1.5x multiplies when a later run compares with it.
                run_seconds=round(self.run_seconds(), 3),
            )
        except (OSError, BaselineFileError) as exc:
            self.ending.errors.append(f"could not save the baseline: {exc}")
            return int(pytest.ExitCode.TESTS_FAILED)
        except Exception as exc:  # filelock.Timeout and friends
            self.ending.errors.append(f"could not save the baseline: {type(exc).__name__}: {exc}")
            return int(pytest.ExitCode.TESTS_FAILED)
        rel = _relative(path, self.settings.rootdir)
        self.ending.written.append(
            f"baseline of {context.commit.short}: {rel} ({n} benchmark{'s' * (n != 1)} saved, "
            f"{total} stored)"
        )
        if lacking := selection.lacking(self.collector, self.failed, context.commit.short):
            context.warn(lacking)
        return None

    def facts(self) -> dict[str, Any]:
        """What decides the run's failures (:func:`~pytest_infperf.core.outcome.failures`),
        in the results document's shape: the benchmarks, the run record, the whole run's."""
        ending = self.ending
        return {
            "benchmarks": self.entries,
            "run": self.run_record(),
            "compared_nothing": ending.compared_nothing,
            "measured_nothing": ending.measured_nothing,
        }

    def document(self) -> dict[str, Any]:
        from ..core.results import document
        from ..measure import environment
        from ..store import git as gitinfo

        context, ending = self.context, self.ending
        env = self.environment or environment.collect()
        # The session's mode, named as its flag is (each comparison's own ``mode`` says how
        # its baseline side was measured: ``ab`` for a verdict settled in this job).
        extra: dict[str, Any] = {"mode": self.mode, "warnings": list(ending.warnings)}
        if self.split is not None:
            # Which shard this is: `infperf merge --expect N` names a missing one by it.
            extra["split"] = {"group": self.split[0], "splits": self.split[1]}
        s = self.settings
        if (s.compare or s.ab) and self.collector.perf_tests is not None:
            # The family the run-level guard and Bonferroni counted (its benchmarks, as far
            # as the baseline tells): a merge of shards judges the whole run's, the sum.
            extra["family"] = self.collector.family_record(s.run_alpha)
        if ending.compared_nothing is not None:
            extra["compared_nothing"] = ending.compared_nothing
        if ending.measured_nothing is not None:
            extra["measured_nothing"] = ending.measured_nothing
        # Whether this run completed: merge, comment and the Action believe only one that did.
        extra["run"] = self.run_record()
        if context.reference is not None:
            extra["reference"] = context.reference
        extra["run_seconds"] = round(self.run_seconds(), 3)
        if context.source is not None:
            extra["comparison"] = {
                **context.source.to_json(),
                "environment_drift": ending.drift,
            }
            if self.settings.ab:
                extra["comparison"]["removed"] = context.removed
                extra["base_commit"] = context.source.sha
        commit = (
            context.commit.to_json()
            if context.commit is not None
            else gitinfo.describe(self.settings.rootdir, self.settings.baselines)
        )
        return document(self.entries, env, commit, **extra)

    def write_json(self, path: os.PathLike[str] | str) -> None:
        from ..core.fsutil import atomic_write_text
        from ..core.results import dumps

        doc = self.document()
        atomic_write_text(Path(path), dumps(doc))
        why = doc["run"].get("incomplete")
        marked = f" (marked incomplete: {why})" if why else ""
        self.ending.written.append(f"results JSON: {path}{marked}")

    def markdown(self) -> str:
        from ..report.comment import headed
        from ..report.markdown import render

        source = self.context.source
        ending = self.ending
        text = render(
            self.collector.results,
            source=source.to_json() if source is not None else None,
            drift=ending.drift,
            warnings=ending.warnings,
            environment=self.environment,
            mode=self.mode,
            gate=ending.compared_nothing,
        )
        # A run that did not complete, or failed on what the title does not say, is titled
        # so in the job summary too: its title alone would read as a pass.
        return headed(text, self.facts())

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
            self.ending.written.append(f"Markdown report: {self.settings.markdown}")
        if want_summary:
            try:
                with Path(str(summary)).open("a", encoding="utf-8") as fh:
                    fh.write(text)
            except OSError as exc:  # after the files: the terminal's warnings still say it
                said = f"could not append to GITHUB_STEP_SUMMARY: {exc}"
                self.ending.warnings = (*self.ending.warnings, said)


def _relative(path: Any, root: Any) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)
