"""The results collector (registered as ``infperf-collector``, on every process).

It keeps the results of this process, puts each result's figures into its test's JUnit
properties (``item.user_properties`` travel with the report, also from xdist workers),
and fails a test whose results carried failures once the test body has finished.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Iterable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest

from ..core import options as _options
from ..core.keys import failures_key, marker_error_key
from .facts import family

if TYPE_CHECKING:
    from ..core.results import BenchmarkResult
    from .context import RunContext


#: Where an xdist worker leaves a usage error its collection found, for the controller.
USAGE_ERROR_KEY = "infperf_usage_error"


def is_perf(item: pytest.Item) -> bool:
    """A perf test: one that uses ``infer_bench``."""
    return "infer_bench" in getattr(item, "fixturenames", ())


def split_deselected(items: Iterable[pytest.Item]) -> list[str]:
    """Which of ``items`` (a ``pytest_deselected`` call's) are perf tests that pytest-split
    left to another shard: called from pytest-split's own hook, not from a
    ``-k``/``-m`` the whole run shares. A shard's verdicts are held to the whole run's
    family, as the unsplit run's are: counting only its own group, a regression that held
    over a shard lost its claim when the merge held it to the whole run."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("pytest_split"):
            return [item.nodeid for item in items if is_perf(item)]
        frame = frame.f_back
    return []


#: The session's collector on ``config.stash``.
collector_key: pytest.StashKey[Collector] = pytest.StashKey()


class Collector:
    def __init__(self, context: RunContext, serving: bool = False) -> None:
        self.context = context
        #: This process is an A/B worker, serving another checkout's tests.
        self.serving = serving
        self.results: list[BenchmarkResult] = []
        #: xdist workers whose results reached this controller.
        self.workers: list[str] = []
        #: How many perf tests the session collected (the judge's family; None until a
        #: process of this session collected), for the results document: a split run's
        #: shards each count their own group, and ``infperf merge`` adds them up.
        self.perf_tests: int | None = None
        #: How many benchmarks they make, as far as the baseline tells (:func:`.facts.family`).
        self.benchmarks: int | None = None
        #: How many more its tests made than the run counted for them (each xdist worker's
        #: own tests: summed).
        self.extra = 0
        #: Their node ids (an xdist controller collects none itself: its workers say).
        self.perf_ids: set[str] = set()

    def add(self, item: pytest.Item, result: BenchmarkResult, failures: Iterable[str]) -> None:
        failures = list(failures)
        if failures:
            item.stash.setdefault(failures_key, []).extend(failures)
        if not result.samples:  # --perf-disable: nothing was measured, nothing to report
            return
        self.results.append(result)
        item.user_properties.extend(junit_properties(result))

    def properties(self, result: BenchmarkResult) -> list[tuple[str, object]]:
        """The JUnit properties a result gave its test (as :meth:`add` gave them)."""
        return junit_properties(result) if result.samples else []

    def regated(
        self,
        item: pytest.Item,
        result: BenchmarkResult,
        props: list[tuple[str, object]],
        was: Sequence[str],
        now: Sequence[str],
    ) -> None:
        """A result judged again at its test's end (its verdict held to what its test
        made): the failures and JUnit properties it gave its test, replaced."""
        held: list[str] = item.stash.get(failures_key, [])
        stashed = list(held)
        for failure in was:
            if failure in stashed:
                stashed.remove(failure)
        item.stash[failures_key] = [*stashed, *now]
        kept = list(item.user_properties)
        for prop in props:
            if prop in kept:
                kept.remove(prop)
        item.user_properties[:] = [*kept, *self.properties(result)]

    def absorb(self, data: dict[str, Any]) -> None:
        """Controller: take in one xdist worker's results."""
        from ..core.results import BenchmarkResult

        self.workers.append(str(data.get("worker")))
        self.results.extend(BenchmarkResult.from_json(r) for r in data.get("results", []))
        if data.get("perf_tests") is not None:  # every worker collects the whole selection
            self.perf_tests = max(self.perf_tests or 0, int(data["perf_tests"]))
        if data.get("benchmarks") is not None:
            self.benchmarks = max(self.benchmarks or 0, int(data["benchmarks"]))
        self.extra += int(data.get("extra") or 0)
        self.perf_ids.update(str(n) for n in data.get("perf_ids") or ())
        for warning in data.get("warnings", []):
            self.context.warn(warning)
        if data.get("refused") and not self.context.refused:
            self.context.refused = str(data["refused"])
        for note in data.get("notes", []):
            self.context.note(note)

    def family_record(self, run_alpha: float) -> dict[str, Any]:
        """The results document's ``family``: what the run's multiplicity counted."""
        counted = self.benchmarks or self.perf_tests
        return {
            "perf_tests": self.perf_tests,
            "benchmarks": None if counted is None else counted + self.extra,
            "run_alpha": run_alpha,
        }

    def payload(self, worker: str) -> dict[str, Any]:
        """Worker: what goes back to the controller at the end of the session."""
        return {
            "worker": worker,
            "results": [r.to_json() for r in self.results],
            "warnings": self.context.warnings,
            "refused": self.context.refused,
            "notes": self.context.notes,
            "perf_tests": self.perf_tests,
            "benchmarks": self.benchmarks,
            "extra": self.extra,
            "perf_ids": sorted(self.perf_ids),
        }

    # --- hooks -------------------------------------------------------------------------
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        perf = [item.nodeid for item in session.items if is_perf(item)]
        self.perf_tests, self.perf_ids = len(perf), set(perf)
        self.benchmarks = family(self.context, perf)
        problems = marker_problems(session.items)
        if not problems:
            return
        if self.serving:
            # An A/B worker runs another commit's tests for its controller: a marker
            # that commit got wrong fails that test's base side, not the head's run.
            for item, problem in problems:
                item.stash[marker_error_key] = problem
            return
        # Like the ini file and the flags, a marker is configuration known before anything
        # is measured: a usage error (exit 4) for the selected tests, not a test error
        # found after the rest of a long perf suite has run.
        message = "\n".join(problem for _, problem in problems)
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:
            # An xdist worker: its own usage error only ends it; the controller raises it.
            workeroutput[USAGE_ERROR_KEY] = message
        raise pytest.UsageError(message)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        problem = item.stash.get(marker_error_key, None)
        if problem is not None:
            pytest.fail(problem, pytrace=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        result = yield
        failures = item.stash.get(failures_key, [])
        if failures and not self.context.settings.warn_only:
            pytest.fail("\n".join(failures), pytrace=False)
        return result


def marker_problems(items: Iterable[pytest.Item]) -> list[tuple[pytest.Item, str]]:
    """Each item whose ``infperf`` markers are wrong, with the problem (file:line first)."""
    problems = []
    for item in items:
        if item.get_closest_marker("infperf") is None:
            continue
        try:
            _options.marker_layer(item)
        except _options.OptionError as exc:
            path, lineno, _ = item.location
            where = f"{path}:{lineno + 1}" if lineno is not None else path
            problems.append((item, f"{where}: {exc}"))
    return problems


def junit_properties(result: BenchmarkResult) -> list[tuple[str, object]]:
    """``infperf.*`` properties of one result (``infperf.<name>.*`` for named ones)."""
    prefix = "infperf." if not result.name else f"infperf.{result.name}."
    s = result.stats
    props: list[tuple[str, object]] = [
        ("median_s", s["median"]),
        ("mean_s", s.get("mean")),
        ("p90_s", s.get("p90")),
        ("p99_s", s.get("p99")),
        ("ci_low_s", s.get("ci_low")),
        ("ci_high_s", s.get("ci_high")),
        ("cv", s.get("cv")),
        ("n", s["n"]),
        ("backend", result.backend),
    ]
    if result.throughput is not None:
        props.append(("throughput_per_s", result.throughput))
    if result.first_call is not None:
        props.append(("first_call_s", result.first_call))
    gen = result.generation or {}
    for key, prop in (("ttft", "ttft_s"), ("tpot", "tpot_s"), ("tokens_per_s", "tokens_per_s")):
        stats = (gen.get(key) or {}).get("stats")
        if stats:
            props.append((prop, stats["median"]))
    c = result.comparison
    if c is not None:
        props.append(("verdict", c.verdict.value))
        if c.ratio is not None:
            props.append(("ratio", c.ratio))
        if c.metric == "median" and c.baseline is not None and c.ratio is not None:
            # The latency the tables show (shown_figures): the progress line reads it here,
            # as an xdist controller has no result until the end.
            props.append(("shown_median_s", c.baseline * c.ratio))
    return [(prefix + key, _prop(value)) for key, value in props]


def _prop(value: object) -> object:
    if isinstance(value, float):
        return float(f"{value:.9g}")
    return value
