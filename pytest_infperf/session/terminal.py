"""The terminal report (registered as ``infperf-terminal``, on the controller only):
progress lines as benchmarks complete, the summary table, warnings, and GitHub workflow
annotations when running in Actions.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..core.settings import Settings
    from .artifacts import ArtifactWriter
    from .collector import Collector
    from .context import RunContext


class TerminalReport:
    def __init__(
        self,
        config: pytest.Config,
        context: RunContext,
        collector: Collector,
        artifacts: ArtifactWriter,
    ) -> None:
        self.config = config
        self.context = context
        self.collector = collector
        self.artifacts = artifacts
        #: Progress lines: perf tests collected and finished (skipped ones count as
        #: finished, or a run with skips would end at [12/20]).
        self.perf_tests: set[str] = set()
        self.done = 0

    # --- progress ----------------------------------------------------------------------
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # After -k/-m deselection: only the perf tests that will run count.
        self.perf_tests = {
            i.nodeid for i in session.items if "infer_bench" in getattr(i, "fixturenames", ())
        }

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """One line per benchmark as it completes, after pytest's own status."""
        props = dict(report.user_properties)
        names = sorted({k.rsplit(".", 1)[0] for k in props if str(k).endswith("median_s")})
        if self.perf_tests:
            finished = report.when == "call" or (report.when == "setup" and not report.passed)
            if not finished or report.nodeid not in self.perf_tests:
                return
            self.done += 1
        elif report.when == "call" and names:
            # Under xdist the controller collects nothing: count what reports back.
            self.done += 1
        if report.when != "call" or not names or not self._progress():
            return
        from ..report.fmt import fit, fmt_time

        total = len(self.perf_tests) or "?"
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is None:
            return
        for prefix in names:
            label = report.nodeid + ("" if prefix == "infperf" else "#" + prefix[8:])
            # The figure the table and the JSON show: after interleaving, not this run's
            # stored-pass median.
            shown = props.get(prefix + ".shown_median_s", props[prefix + ".median_s"])
            line = f"infperf [{self.done}/{total}] {label}: median {fmt_time(_float(shown))}"
            line += f" (n={props.get(prefix + '.n')})"
            verdict = props.get(prefix + ".verdict")
            if verdict:
                line += f", {verdict}"
                if props.get(prefix + ".ratio") is not None:
                    line += f" x{_float(props[prefix + '.ratio']):.3f}"
            tr.write_line(fit(line))

    def _progress(self) -> bool:
        return progress_shown(self.config, self.context.settings.progress)

    # --- summary -------------------------------------------------------------------------
    def pytest_terminal_summary(
        self, terminalreporter: Any, exitstatus: int, config: pytest.Config
    ) -> None:
        results = self.collector.results
        if not results:
            self._measured_nothing(terminalreporter)
            return
        from ..report.fmt import fit
        from ..report.notices import accepted_lines, summary
        from ..report.text import generation_lines, settle_summary, summary_lines

        verbosity = config.get_verbosity()
        if verbosity < -1:
            return
        tr = terminalreporter
        ending = self.artifacts.ending
        headline = f"infperf: {summary(results)}"
        gate = ending.compared_nothing
        if verbosity < 0:
            tr.write_line(fit(headline))
            if gate:
                said = fit(f"infperf: FAILED: compared nothing: {gate}")
                tr.write_line(said, red=True, bold=True)
        else:
            tr.section(headline, sep="-")
            if gate and self.context.settings.warn_only:
                tr.write_line(
                    fit(
                        f"WARNING: this comparison compared nothing: {gate} (--perf-warn-only: "
                        "the session does not fail)"
                    ),
                    red=True,
                    bold=True,
                )
            elif gate:
                tr.write_line(
                    fit(
                        f"FAILED: this comparison compared nothing: {gate}. The session fails "
                        "so that a gate without baselines does not look green; "
                        "--perf-allow-missing lets a first run pass"
                    ),
                    red=True,
                    bold=True,
                )
            if self.context.source is not None:
                tr.write_line(fit(f"compared with {self.context.source.describe()}"))
            if self.collector.workers:
                tr.write_line(
                    fit(
                        f"measured on {len(self.collector.workers)} xdist workers; timing "
                        "serialised by a cross-process lock, so no two benchmarks timed at once"
                    )
                )
            verbose = verbosity > 0
            generation = generation_lines(results, verbose=verbose)
            for line in summary_lines(results, verbose=verbose) + generation:
                tr.write_line(line)
            for line in settle_summary(results, verbose=verbose) + accepted_lines(results):
                tr.write_line(fit(line))
            for note in self.context.notes:
                tr.write_line(fit(f"infperf: {note}"))
        # The same warnings as the JSON's and the Markdown report's (report/notices.py).
        # The run's warnings as its files say them, then any said after they were written
        # (a fixture's teardown after -x or an interrupt).
        late = [w for w in dict.fromkeys(self.context.warnings) if w not in ending.warnings]
        for warning in [*ending.warnings, *late]:
            tr.write_line(fit(f"warning: {warning}"), yellow=True)
        for error in ending.errors:
            tr.write_line(fit(f"error: {error}"), red=True)
        for line in ending.written:
            tr.write_line(fit(f"infperf: wrote {line}"))
        if os.environ.get("GITHUB_ACTIONS") == "true":
            self._annotate(tr)

    def _measured_nothing(self, tr: Any) -> None:
        """A perf run that measured no benchmark: said in red, as compared nothing is (a
        shard of a split run only records it: the merge decides over every shard; pytest's
        "no tests ran", exit 5, is left to say itself)."""
        from ..report.fmt import fit

        ending = self.artifacts.ending
        nothing = ending.measured_nothing
        # What the run said though it measured nothing (every benchmark skipped for want of
        # a GPU): warnings, as a run that measured says them.
        for warning in dict.fromkeys([*ending.warnings, *self.context.warnings]):
            tr.write_line(fit(f"warning: {warning}"), yellow=True)
        if not nothing or ending.shard or ending.exitstatus == 5:
            return
        if self.context.settings.warn_only:
            tr.write_line(
                fit(f"infperf: WARNING: {nothing} (--perf-warn-only: the session does not fail)"),
                red=True,
                bold=True,
            )
        else:
            tr.write_line(fit(f"infperf: FAILED: {nothing}"), red=True, bold=True)
        for line in ending.written:
            tr.write_line(fit(f"infperf: wrote {line}"))

    def _annotate(self, tr: Any) -> None:
        """GitHub workflow commands: regressions become error annotations on the test."""
        from ..report.markdown import github_annotations

        workspace = os.environ.get("GITHUB_WORKSPACE")
        root = self.context.settings.rootdir
        for line in github_annotations(
            self.collector.results, root, Path(workspace) if workspace else None
        ):
            tr.write_line(line)
        from ..report.notices import drift_warning

        ending = self.artifacts.ending
        moved = drift_warning(ending.drift, self.collector.results, bool(self.context.settings.ab))
        if moved:
            tr.write_line(f"::warning title=pytest-infperf machine drift::{moved}")


def _float(value: object) -> float:
    """A JUnit property (a float in-process, maybe a string after xdist) as a float."""
    return float(str(value))


def progress_shown(config: pytest.Config, mode: str) -> bool:
    """Whether a line per benchmark is written as the run goes (expert ``progress``):
    ``lines``; ``auto`` in a CI service's log (where no live status shows what runs) or
    with ``-v``; never with ``off`` or ``-q -q``."""
    if mode == "off" or config.get_verbosity() < 0:
        return False
    if mode == "lines":
        return True
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    return ci or config.get_verbosity() > 0


def announce(
    config: pytest.Config | None, settings: Settings, nodeid: str, why: str, announced: bool
) -> bool:
    """Say, as it starts, that a benchmark is interleaved with the baseline's commit and
    why: a compare that takes several times a plain run is never silent. Each one where
    progress lines are shown (CI logs, -v), else the first, once. Whether it was said."""
    tr = None if config is None else config.pluginmanager.get_plugin("terminalreporter")
    if config is None or tr is None or settings.progress == "off" or config.get_verbosity() < 0:
        return announced
    if progress_shown(config, settings.progress):
        line = f"infperf: interleaving {nodeid} with the baseline's commit ({why})"
    elif not announced:
        line = (
            "infperf: interleaving benchmarks with the baseline's commit as they run (the "
            f"first, {nodeid}: {why}); each takes several times its plain run, -v names each"
        )
    else:
        return True
    say_now(config, tr, line, nodeid)
    return True


def say_now(config: pytest.Config, tr: Any, line: str, nodeid: str) -> None:
    """A line written while ``nodeid`` runs, past pytest's output capture (as its live
    log is written): seen without ``-s``, on lines of its own; pytest's progress goes on
    after it, under the test file's name again (its status under -v), so that the
    test's letter does not land alone on a line."""
    from ..report.fmt import fit

    capture = config.pluginmanager.get_plugin("capturemanager")
    held = capture.global_and_fixture_disabled() if capture is not None else nullcontext()
    with held:
        tr.ensure_newline()
        tr.write(fit(line))  # pytest ends the line as it writes its own next
        if config.get_verbosity() == 0 and tr.showfspath:
            tr.write_fspath_result(nodeid, "")
