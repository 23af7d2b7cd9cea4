"""Per-session state and the hooks that act on it (registered as ``infperf-session``).

Imports stay light at module level: this module is loaded in ``pytest_configure``, on
every pytest start-up, so numpy and friends are imported inside the methods that need them.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from . import options as _options
from .settings import Settings

if TYPE_CHECKING:
    from .results import BenchmarkResult
    from .timing import Measurement

#: Messages that fail a test once its body has finished (regressions, budgets).
perf_failures_key = pytest.StashKey[list[str]]()


class InfperfSession:
    """Results of this pytest run, and what to do with them at the end."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.bench_layer: dict[str, Any] = settings.bench_layer
        self.results: list[BenchmarkResult] = []
        self.warnings: list[str] = []
        self.is_worker = hasattr(config, "workerinput")
        self.written: list[str] = []

    # --- setup -------------------------------------------------------------------------
    def configure(self) -> None:
        """Resolve what the run needs before any test runs (bad input: exit 4 now)."""

    # --- measuring -----------------------------------------------------------------------
    @contextlib.contextmanager
    def timing_lock(self, key: str) -> Iterator[None]:
        yield

    def judge(self, item: pytest.Item, result: BenchmarkResult,
              remeasure: Callable[[], Measurement]) -> None:  # fmt: skip
        """Absolute budgets now; comparisons against a baseline where one is configured."""
        budget_ms = result.options.get("max_median_ms")
        if budget_ms is not None:
            ci_low_ms = result.stats["ci_low"] * 1e3
            passed = ci_low_ms <= budget_ms
            result.extra["budget"] = {"max_median_ms": budget_ms, "passed": passed}
            if not passed:
                self.fail_item(
                    item,
                    f"{result.key}: median {result.stats['median'] * 1e3:.4g} ms (95% CI "
                    f"{ci_low_ms:.4g}-{result.stats['ci_high'] * 1e3:.4g} ms) is over the "
                    f"budget max_median_ms={budget_ms:g}",
                )

    def fail_item(self, item: pytest.Item, message: str) -> None:
        item.stash.setdefault(perf_failures_key, []).append(message)

    def record(self, item: pytest.Item, result: BenchmarkResult) -> None:
        self.results.append(result)
        prefix = "infperf." if not result.name else f"infperf.{result.name}."
        s = result.stats
        props: list[tuple[str, object]] = [
            ("median_s", s["median"]), ("mean_s", s["mean"]), ("p90_s", s["p90"]),
            ("p99_s", s["p99"]), ("ci_low_s", s["ci_low"]), ("ci_high_s", s["ci_high"]),
            ("cv", s["cv"]), ("n", s["n"]), ("backend", result.backend),
        ]  # fmt: skip
        if result.throughput is not None:
            props.append(("throughput_per_s", result.throughput))
        if result.first_call is not None:
            props.append(("first_call_s", result.first_call))
        if result.comparison is not None:
            props.append(("verdict", result.comparison["verdict"]))
            if result.comparison.get("ratio") is not None:
                props.append(("ratio", result.comparison["ratio"]))
        for key, value in props:
            item.user_properties.append((prefix + key, _prop(value)))

    # --- hooks ---------------------------------------------------------------------------
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # Marker typos are usage errors, reported before anything is measured.
        for item in items:
            if item.get_closest_marker("infperf") is None:
                continue
            try:
                _options.marker_layer(item)
            except _options.OptionError as exc:
                raise pytest.UsageError(str(exc)) from None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        result = yield
        failures = item.stash.get(perf_failures_key, [])
        if failures and not self.settings.warn_only:
            pytest.fail("\n".join(failures), pytrace=False)
        return result

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker:
            workeroutput = getattr(self.config, "workeroutput", None)
            if workeroutput is not None:
                workeroutput["infperf_results"] = json.dumps(
                    [r.to_json() for r in self.results]
                )
            return
        self.finish(exitstatus)

    def finish(self, exitstatus: int) -> None:
        """Controller only: write the artifacts."""
        if not self.results:
            return
        if self.settings.json_path is not None:
            self.write_json(self.settings.json_path)

    def document(self) -> dict[str, Any]:
        from . import environment, gitinfo
        from .results import document

        return document(
            self.results,
            environment.collect(),
            gitinfo.describe(self.settings.rootdir, self.settings.baselines),
            mode="stored" if not self.settings.ab else "ab",
            warnings=self.warnings,
        )

    def write_json(self, path: os.PathLike[str] | str) -> None:
        from pathlib import Path

        from .fsutil import atomic_write_text
        from .results import dumps

        atomic_write_text(Path(path), dumps(self.document()))
        self.written.append(f"results JSON: {path}")

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int,
                                config: pytest.Config) -> None:  # fmt: skip
        if not self.results or self.is_worker:
            return
        from .report import summary_lines, verdict_counts

        verbosity = config.get_verbosity()
        if verbosity < -1:
            return
        counts = verdict_counts(self.results)
        headline = f"infperf: {len(self.results)} benchmark{'s' * (len(self.results) != 1)}"
        if counts:
            headline += " (" + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + ")"
        if verbosity < 0:
            terminalreporter.write_line(headline)
        else:
            terminalreporter.section(headline, sep="-")
            for line in summary_lines(self.results):
                terminalreporter.write_line(line)
            for warning in self.warnings:
                terminalreporter.write_line(f"warning: {warning}", yellow=True)
        for line in self.written:
            terminalreporter.write_line(f"infperf: wrote {line}")


def _prop(value: object) -> object:
    if isinstance(value, float):
        return float(f"{value:.9g}")
    return value
