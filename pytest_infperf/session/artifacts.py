"""The artifact writer (registered as ``infperf-artifacts``, on the controller only): at the
end of the session it writes the baseline (``--perf-save``), the results JSON, the Markdown
report and the GitHub job summary.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..core.budget import process_started

if TYPE_CHECKING:
    from .collector import Collector
    from .context import RunContext


class ArtifactWriter:
    def __init__(
        self, context: RunContext, collector: Collector, split: tuple[int, int] | None = None
    ) -> None:
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

    def run_seconds(self) -> float:
        """Seconds from the process's start to now (its end, when the files are written)."""
        return time.monotonic() - self.started

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        status = self.finish(exitstatus)
        if status is not None and session.exitstatus == 0:
            session.exitstatus = status

    def finish(self, exitstatus: int) -> int | None:
        """Write everything; returns a new exit status when saving failed."""
        if not self.collector.results:
            # A shard of a split run that holds no benchmark still writes its (empty)
            # results, so that `infperf merge` of every shard's file needs no exceptions.
            if self.settings.json_path is not None and not self.settings.disable:
                self._collect_environment()
                self.write_json(self.settings.json_path)
            return None
        context = self.context
        self._collect_environment()
        self.drift = context.drift()
        new_status = self._check_gate()
        self._unmatched_accepts()
        self._selection_differs()
        if self.settings.save:
            new_status = self._save(exitstatus) or new_status
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
        from ..judge.judge import compared_nothing

        s = self.settings
        if not s.compare or s.allow_missing or not compared_nothing(self.collector.results):
            return None
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

    def _selection_differs(self) -> None:
        """A benchmark's speed depends on what ran before it in the process (measured here:
        a numpy test at 262 us in the full suite, 1.1-1.5 ms alone), so a stored verdict
        from another selection of tests is less comparable than it looks: say so."""
        source = self.context.source
        if self.settings.ab or source is None or not source.entries:
            return
        now = {r.key for r in self.collector.results}
        base = set(source.entries)
        if not now or now == base:
            return
        left_out, added = len(base - now), len(now - base)
        parts = []
        if left_out:
            parts.append(f"{left_out} of the baseline's {len(base)} benchmarks did not run")
        if added:
            parts.append(f"{added} {'benchmarks are' if added != 1 else 'benchmark is'} new")
        self.context.warn(
            f"this run's selection of tests differs from the baseline's run ({'; '.join(parts)})"
            ": a benchmark's speed depends on what ran before it in the process, so compare "
            "the same selection (settling and --perf-ab measure both sides in this run's order)"
        )

    def _save(self, exitstatus: int) -> int | None:
        from ..store.baselines import BaselineFileError, BaselineStore

        context = self.context
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            context.warn("not saving the baseline: the run was interrupted")
            return None
        assert context.commit is not None and context.env_key and self.environment is not None
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
        return None

    def document(self) -> dict[str, Any]:
        from ..core.results import document
        from ..measure import environment
        from ..store import git as gitinfo

        context = self.context
        env = self.environment or environment.collect()
        mode = "ab" if self.settings.ab else "stored"
        extra: dict[str, Any] = {"mode": mode, "warnings": context.warnings}
        if self.split is not None:
            # Which shard this is: `infperf merge --expect N` names a missing one by it.
            extra["split"] = {"group": self.split[0], "splits": self.split[1]}
        s = self.settings
        if (s.compare or s.ab) and self.collector.perf_tests is not None:
            # The family the run-level guard and Bonferroni counted: a merge of shards
            # judges the whole run's family, the sum of its shards'.
            extra["family"] = {"perf_tests": self.collector.perf_tests, "run_alpha": s.run_alpha}
        if self.gate is not None:
            extra["compared_nothing"] = self.gate
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

        atomic_write_text(Path(path), dumps(self.document()))
        self.written.append(f"results JSON: {path}")

    def markdown(self) -> str:
        from ..report.markdown import render

        source = self.context.source
        return render(
            self.collector.results,
            source=source.to_json() if source is not None else None,
            drift=self.drift,
            warnings=self.context.warnings,
            environment=self.environment,
            mode="ab" if self.settings.ab else "stored",
            gate=self.gate,
        )

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


def _relative(path: Any, root: Any) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)
