"""The session's outcome: what pytest did, and the :class:`Ending` every output renders.

:class:`RunOutcome` (the artifact writer's base) hears pytest's hooks on the controller
(xdist's reports reach it too): an interrupt, collection errors, failed tests. At the
session's end the writer decides once what the run came to, an :class:`Ending`: why a
comparison compared nothing, why a perf run measured nothing, the run's warnings, and
whether the session fails (:func:`~pytest_infperf.core.outcome.fails_session`, the one
rule over :func:`~pytest_infperf.core.outcome.failures`). The JSON, the Markdown report,
the job summary and the terminal render that record; none decides again.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..core.settings import Settings
    from ..store.baselines import BaselineStore
    from .collector import Collector
    from .context import RunContext


@dataclasses.dataclass
class Ending:
    """What the run came to, decided once at the session's end."""

    #: Why a comparison (--perf-compare, --perf-ab) compared nothing: it fails closed.
    compared_nothing: str | None = None
    #: Why a perf run (save, compare, A/B) measured no benchmark: it fails closed.
    measured_nothing: str | None = None
    #: The run's warnings, as every output says them (``report/notices.py``).
    warnings: tuple[str, ...] = ()
    #: The environment's drift over the run (the drift guard's record), when compared.
    drift: dict[str, Any] | None = None
    #: The exit status the session ends with (the fail-closed checks included).
    exitstatus: int = 0
    #: One shard of a split run: measuring nothing is recorded, for the merge to decide.
    shard: bool = False
    #: What was written, and what could not be, in the order it happened.
    written: list[str] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)


class RunOutcome:
    """What the session did, for its results' ``run`` record
    (:mod:`pytest_infperf.core.outcome`): its exit status, why it stopped before its last
    test, its collection errors and failed tests."""

    settings: Settings
    collector: Collector
    split: tuple[int, int] | None

    def __init__(self) -> None:
        #: The session's exit status as it will end (the writer's own failures included).
        self.exitstatus: int | None = None
        self.stopped: str | None = None
        self.collection_errors = 0
        self.failed: list[str] = []
        self.tests_collected = 0
        self.ending = Ending()

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

    def measured_nothing(self, exitstatus: int) -> str | None:
        """Why a perf run (--perf-save, --perf-compare, --perf-ab) that measured no
        benchmark is a gate that checked nothing (most likely pointed at the wrong tests);
        None where that is not this run. A run that stopped early or collected no test
        (pytest's exit 5) is left as pytest reports it."""
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
        return f"{flag} measured no benchmark: {what}{fix}"


def compared_nothing_cause(context: RunContext) -> str:
    """Why a --perf-compare (or --perf-ab) compared nothing, as precisely as the store
    (or the base commit) can tell."""
    from ..measure import environment
    from ..store.baselines import BaselineStore

    s, source = context.settings, context.source
    if s.ab and not s.compare:  # both sides measured here: the base commit lacks them
        return (
            f"the commit {s.ab} has none of the benchmarks this run measured (new tests, "
            "renamed ones, or another selection?); --perf-allow-missing passes such a run"
        )
    store = BaselineStore(s.baselines, s.max_baseline_bytes)
    keys = store.stored_env_keys()
    ref = source.ref if source is not None else "the base branch"
    if source is not None and source.origin == "file":
        if source.env_diff:
            return (
                f"the file {source.path} was measured in another environment: "
                f"{environment.describe_diff(source.env_diff)}"
            )
        return f"the file {source.path} has none of the benchmarks this run measured"
    if not keys:
        return (
            f"the baselines folder {s.baselines} holds no baselines: pull the stored "
            f"baselines first (`infperf baselines pull`), or save one on {ref} with "
            "--perf-save"
        )
    if source is not None and source.env_diff:
        return (
            f"the nearest baseline ({source.describe()}) was measured in another "
            f"environment: {environment.describe_diff(source.env_diff)}"
        )
    if context.env_key not in keys:
        return _nearest_environment(store, keys, context.env_key, context.hard or {}, ref)
    if source is not None and source.origin == "none":
        return str(source.note)
    if source is not None and source.sha:
        return (
            f"the baseline of commit {source.sha[:10]} has none of the benchmarks this "
            "run measured (renamed tests, or another selection?)"
        )
    return "every benchmark's baseline came from another environment"


def _nearest_environment(
    store: BaselineStore, keys: list[str], env_key: str | None, hard: dict[str, Any], ref: str
) -> str:
    """Why this machine's environment has no baseline: the stored environment whose newest
    baseline differs from ``hard`` in the fewest hard fields, and that difference."""
    from ..measure import environment
    from ..store.baselines import BaselineFileError

    best, best_diff = "", dict[str, list[Any]]()
    for key in keys:
        commits = store.commits(key)
        try:
            doc = store.load(store.path_for(key, commits[-1])) if commits else None
        except BaselineFileError:
            doc = None
        if doc is None:
            continue
        diff = environment.diff(hard, doc["environment"].get("hard", {}))
        if not best or len(diff) < len(best_diff):
            best, best_diff = key, diff
    if not best:
        return (
            f"no baseline for this machine's environment {env_key}, and no baseline of "
            f"another environment in {store.root} could be read ({', '.join(keys)}): save "
            f"one on {ref} with --perf-save"
        )
    return (
        f"no baseline for this machine's environment {env_key}; the nearest environment "
        f"with baselines is {best} ({len(store.commits(best))} commits), which differs in: "
        f"{environment.describe_diff(best_diff)}"
    )
