"""Per-session state and the hooks that act on it (registered as ``infperf-session``).

Imports stay light at module level: this module is loaded in ``pytest_configure``, on
every pytest start-up, so numpy and friends are imported inside the methods that need them.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from . import options as _options
from .settings import Settings

if TYPE_CHECKING:
    from .ab import ABController
    from .abworker import ABWorkerPlugin
    from .baseline import BaselineStore
    from .gitinfo import CommitInfo
    from .results import BenchmarkResult
    from .timing import Measurement
    from .verdict import BaselineSource

#: Messages that fail a test once its body has finished (regressions, budgets).
perf_failures_key = pytest.StashKey[list[str]]()
#: How long a measurement waits for another one to finish timing on the same device.
LOCK_WAIT_S = 900.0


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
        self.errors: list[str] = []
        self.hard: dict[str, Any] | None = None
        self.env_key: str | None = None
        self.commit: CommitInfo | None = None
        self.store: BaselineStore | None = None
        self.source: BaselineSource | None = None
        self.reference: dict[str, Any] | None = None
        #: (benchmark key, re-measured p-value) of every benchmark flagged on first pass.
        self.flagged: list[tuple[str, float]] = []
        #: Machine-speed probe run at sampling checkpoints when saving or comparing.
        self.probe: Callable[[], tuple[float, float]] | None = None
        #: xdist workers whose results reached this controller.
        self.workers: list[str] = []
        self.gpu_pinned: int | None = None
        #: --perf-ab: the base side's controller (head process), or the worker's server.
        self.ab: ABController | None = None
        self.ab_server: ABWorkerPlugin | None = None
        self.removed: list[str] = []
        #: Filled at the end of the session (controller).
        self.environment: dict[str, Any] | None = None
        self.drift: dict[str, Any] | None = None
        #: Progress lines: perf tests collected and finished.
        self.perf_total = 0
        self.perf_done = 0

    # --- setup -------------------------------------------------------------------------
    def configure(self) -> None:
        """Resolve what the run needs before any test runs (bad input: exit 4 now)."""
        settings = self.settings
        if settings.ab:
            self._configure_ab()
        if not (settings.save or settings.compare):
            return
        from . import environment, gitinfo
        from . import gpu as _gpu
        from .baseline import BaselineFileError, BaselineStore
        from .verdict import CompareError, resolve

        self.store = BaselineStore(settings.baselines, settings.max_baseline_bytes)
        self.hard = environment.hard_fields(_gpu.snapshot())
        self.env_key = environment.env_key(self.hard)
        if settings.drift_guard != "off":
            from .drift import probe

            self.probe = probe
        if self.is_worker:
            self._configure_worker()
            return
        if settings.save:
            try:
                repo = gitinfo.open_repo(settings.rootdir)
                self.commit = gitinfo.head(repo, settings.baselines)
                self.store.check_writable(self.env_key, self.commit.sha)
            except gitinfo.GitError as exc:
                raise pytest.UsageError(f"--perf-save: {exc}") from None
            except BaselineFileError as exc:
                raise pytest.UsageError(
                    f"--perf-save would replace a damaged baseline: {exc}"
                ) from None
            if self.commit.dirty:
                self.warnings.append(
                    f"the working tree has uncommitted changes: the baseline is saved for "
                    f"{self.commit.short} (marked dirty: true) but measures code that differs "
                    "from that commit"
                )
        if settings.compare:
            try:
                self.source = resolve(
                    settings.compare,
                    rootdir=settings.rootdir,
                    store=self.store,
                    env_key=self.env_key,
                    hard=self.hard,
                    depth=settings.search_depth,
                )
            except CompareError as exc:
                raise pytest.UsageError(str(exc)) from None
            if self.source.origin == "none" and self.source.note:
                self.warnings.append(self.source.note)
            if self.source.env_diff:
                fields = ", ".join(sorted(self.source.env_diff))
                self.warnings.append(
                    f"the baseline ({self.source.describe()}) was measured in a different "
                    f"environment ({fields} differ): verdicts are 'incomparable'"
                    + (" and fail (--perf-strict-env)" if settings.strict_env else "")
                )
        # The drift guard's reference workload, timed once at session start.
        from .drift import measure_reference

        self.reference = measure_reference()

    def _configure_ab(self) -> None:
        from .ab import ABController
        from .gitinfo import GitError
        from .verdict import BaselineSource

        if self.is_worker or self.config.getoption("numprocesses", None):
            raise pytest.UsageError(
                "--perf-ab measures one benchmark at a time, interleaved with its base: run "
                "it without pytest-xdist's -n"
            )
        config = self.config
        controller = ABController(
            self.settings.ab or "",
            self.settings.rootdir,
            [str(Path(config.invocation_params.dir) / a) for a in config.args],
            self.settings.ab_pythonpath,
            keyword=str(config.getoption("keyword", "") or ""),
            markexpr=str(config.getoption("markexpr", "") or ""),
        )
        try:
            controller.setup()
        except GitError as exc:
            raise pytest.UsageError(f"--perf-ab={self.settings.ab}: {exc}") from None
        self.ab = controller
        self.source = BaselineSource(
            ref=self.settings.ab or "",
            origin="ab",
            sha=controller.base_sha,
            merge_base=controller.base_sha,
        )

    def unconfigure(self) -> None:
        if self.ab is not None:
            self.ab.close()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.ab is None:
            return
        from .ab import ABError

        head = {i.nodeid for i in session.items if "infer_bench" in getattr(i, "fixturenames", ())}
        try:
            base = self.ab.base_tests()
        except ABError as exc:
            self.warnings.append(str(exc))
            return
        self.removed = sorted(base - head)
        if self.removed:
            self.warnings.append(
                f"{len(self.removed)} perf test(s) of the base are gone in HEAD: "
                + ", ".join(self.removed[:10])
                + (" ..." if len(self.removed) > 10 else "")
            )

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        if self.ab is not None and self.ab.current == nodeid:
            from .ab import ABError

            try:
                self.ab.end_test()
            except ABError as exc:
                self.warnings.append(str(exc))

    def worker_payload(self) -> dict[str, Any]:
        """What each xdist worker needs from the controller (JSON-safe)."""
        from . import gpu as _gpu

        gpus = list(self.settings.gpus) if self.settings.gpus else None
        if gpus is None:
            snap = _gpu.snapshot()
            if snap is not None:
                gpus = snap["visible"] or list(range(snap["count"]))
        return {
            "env_key": self.env_key,
            "hard": self.hard,
            "source": self.source.to_worker() if self.source is not None else None,
            "reference": self.reference,
            "warnings": self.warnings,
            "gpus": gpus,
        }

    def _configure_worker(self) -> None:
        from .xdist import WORKER_KEY, decode, pin_gpu

        payload = decode(getattr(self.config, "workerinput", {}).get(WORKER_KEY))
        if payload is None:
            return
        self.gpu_pinned = pin_gpu(self.config, payload.get("gpus"))
        if not (self.settings.save or self.settings.compare):
            return
        from .verdict import BaselineSource

        self.env_key = payload["env_key"]
        self.hard = payload["hard"]
        self.reference = payload["reference"]
        if payload.get("source") is not None:
            self.source = BaselineSource.from_worker(
                payload["source"], self.settings.max_baseline_bytes
            )

    def absorb(self, data: dict[str, Any]) -> None:
        """Controller: take in one xdist worker's results."""
        from .results import BenchmarkResult

        self.workers.append(str(data.get("worker")))
        self.results.extend(BenchmarkResult.from_json(r) for r in data.get("results", []))
        for warning in data.get("warnings", []):
            if warning not in self.warnings:
                self.warnings.append(warning)
        self.flagged.extend((str(k), float(p)) for k, p in data.get("flagged", []))

    # --- measuring -----------------------------------------------------------------------
    @contextlib.contextmanager
    def timing_lock(self, domain: str) -> Iterator[None]:
        """Machine-wide lock around a measurement: no two benchmarks (xdist workers, or two
        pytest runs on one runner) time at once on the same CPU or GPU."""
        from filelock import FileLock, Timeout

        from .baseline import lock_dir

        lock = FileLock(str(lock_dir() / f"timing-{domain}.lock"))
        try:
            lock.acquire(timeout=LOCK_WAIT_S)
        except Timeout:
            self.warnings.append(
                f"waited {LOCK_WAIT_S:.0f} s for another benchmark to finish timing on "
                f"{domain}; measured anyway, so results may be disturbed"
            )
            yield
            return
        try:
            yield
        finally:
            lock.release()

    def judge(
        self, item: pytest.Item, result: BenchmarkResult, remeasure: Callable[[], Measurement]
    ) -> None:
        """Absolute budgets, then the comparison against the baseline where one is set."""
        self._check_budget(item, result)
        if self.source is not None:
            self._compare(item, result, remeasure)

    def _check_budget(self, item: pytest.Item, result: BenchmarkResult) -> None:
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

    def _compare(
        self, item: pytest.Item, result: BenchmarkResult, remeasure: Callable[[], Measurement]
    ) -> None:
        from . import compare as _cmp
        from . import environment
        from .verdict import decide, failure_message

        source = self.source
        assert source is not None
        opts = result.options
        where: dict[str, Any] = {
            "baseline_commit": source.sha,
            "baseline_distance": source.distance,
            "threshold": opts["threshold"],
            "alpha": opts["alpha"],
            "metric": opts["metric"],
        }
        entry = source.entries.get(result.key)
        if entry is None:
            result.comparison = {"verdict": _cmp.NO_BASELINE, **where, "env_diff": None}
            return
        env_diff = dict(source.env_diff)
        env_diff.update(environment.diff(result.env, entry.get("env") or {}))
        if env_diff:
            result.comparison = {
                "verdict": _cmp.INCOMPARABLE,
                **where,
                "env_diff": env_diff,
                "baseline_median": entry["stats"].get("median"),
            }
            if self.settings.strict_env:
                self.fail_item(
                    item,
                    f"{result.key}: the baseline ({source.describe()}) comes "
                    "from a different environment: "
                    f"{environment.describe_diff(env_diff)} (--perf-strict-env)",
                )
            return
        from .backends import runs_on_gpu

        # The probes measure the CPU: they guard CPU benchmarks, not GPU ones.
        adjust = self.settings.drift_guard == "adjust" and not runs_on_gpu(result.env)
        limit = self.settings.drift_limit
        c = decide(
            result.samples,
            result.memory,
            result.batch_size,
            entry,
            opts,
            result.reference if adjust else None,
            limit,
        )
        flagged = c["verdict"] in (_cmp.REGRESSION, _cmp.INCONCLUSIVE)
        if flagged and opts["remeasure"] > 0 and opts["metric"] != "memory":
            first = {k: c.get(k) for k in ("verdict", "ratio", "ci_low", "ci_high", "p_value")}
            fresh: list[float] = []
            for _ in range(opts["remeasure"]):
                m = remeasure()
                fresh = m.samples
                c = decide(
                    m.samples,
                    m.memory,
                    result.batch_size,
                    entry,
                    opts,
                    m.reference if adjust else None,
                    limit,
                )
                if c["verdict"] not in (_cmp.REGRESSION, _cmp.INCONCLUSIVE):
                    break
            c.update(remeasured=True, first_pass=first)
            result.extra["remeasured_samples"] = fresh
            self._holm(result.key, c)
        c.update(where)
        c["env_diff"] = None
        result.comparison = c
        if c["verdict"] == _cmp.REGRESSION:
            c["message"] = failure_message(result.key, c, source, result.median)
            self.fail_item(item, c["message"])
        elif c["verdict"] == _cmp.INCONCLUSIVE and c.get("estimate_beyond"):
            result.warnings.append(
                f"inconclusive: the estimated ratio {c['ratio']:.3f} is beyond the "
                f"{opts['threshold']:.0%} threshold, but the interval [{c['ci_low']:.3f}, "
                f"{c['ci_high']:.3f}] is too wide to decide; more samples (max_time) or less "
                "noise would settle it"
            )

    def _holm(self, key: str, c: dict[str, Any]) -> None:
        """Holm over the benchmarks flagged on first pass, decided as they come: a regression
        must survive Holm within the family flagged so far (see README)."""
        from . import compare as _cmp

        p = c.get("p_value")
        if p is None:
            return
        self.flagged.append((key, float(p)))
        adjusted = _cmp.holm([q for _, q in self.flagged])[-1]
        c.update(family_size=len(self.flagged), holm_p=adjusted)
        if c["verdict"] == _cmp.REGRESSION and adjusted > c["alpha"]:
            c["verdict"] = _cmp.INCONCLUSIVE
            c["note"] = (
                f"regression on fresh samples not confirmed after Holm over "
                f"{len(self.flagged)} flagged benchmarks (adjusted p {adjusted:.2g})"
            )

    def fail_item(self, item: pytest.Item, message: str) -> None:
        item.stash.setdefault(perf_failures_key, []).append(message)

    def record(self, item: pytest.Item, result: BenchmarkResult) -> None:
        self.results.append(result)
        prefix = "infperf." if not result.name else f"infperf.{result.name}."
        s = result.stats
        props: list[tuple[str, object]] = [
            ("median_s", s["median"]),
            ("mean_s", s["mean"]),
            ("p90_s", s["p90"]),
            ("p99_s", s["p99"]),
            ("ci_low_s", s["ci_low"]),
            ("ci_high_s", s["ci_high"]),
            ("cv", s["cv"]),
            ("n", s["n"]),
            ("backend", result.backend),
        ]
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
        self._count_perf_items(items)
        # Marker typos are usage errors, reported before anything is measured.
        for item in items:
            if item.get_closest_marker("infperf") is None:
                continue
            try:
                _options.marker_layer(item)
            except _options.OptionError as exc:
                raise pytest.UsageError(str(exc)) from None

    def _count_perf_items(self, items: list[pytest.Item]) -> None:
        self.perf_total = sum("infer_bench" in getattr(i, "fixturenames", ()) for i in items)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Progress: one line per benchmark as it completes, after pytest's own status."""
        if report.when != "call" or self.is_worker or not self._progress():
            return
        props = dict(report.user_properties)
        names = sorted({k.rsplit(".", 1)[0] for k in props if str(k).endswith("median_s")})
        if not names:
            return
        from .report import fmt_time

        self.perf_done += 1
        total = self.perf_total or "?"
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is None:
            return
        for prefix in names:
            label = report.nodeid + ("" if prefix == "infperf" else "#" + prefix[8:])
            line = (
                f"infperf [{self.perf_done}/{total}] {label}: median "
                f"{fmt_time(float(props[prefix + '.median_s']))} "  # type: ignore[arg-type]
                f"(n={props.get(prefix + '.n')})"
            )
            verdict = props.get(prefix + ".verdict")
            if verdict:
                line += f", {verdict}"
                if props.get(prefix + ".ratio") is not None:
                    line += f" x{float(props[prefix + '.ratio']):.3f}"  # type: ignore[arg-type]
            tr.write_line(line)

    def _progress(self) -> bool:
        mode = self.config.getoption("perf_progress")
        if mode == "off" or self.config.get_verbosity() < 0:
            return False
        if mode == "lines":
            return True
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        tty = bool(getattr(tr, "isatty", False)) if tr is not None else False
        return not tty or self.config.get_verbosity() > 0

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        result = yield
        failures = item.stash.get(perf_failures_key, [])
        if failures and not self.settings.warn_only:
            pytest.fail("\n".join(failures), pytrace=False)
        return result

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker:
            from .xdist import WORKER_KEY

            workeroutput = getattr(self.config, "workeroutput", None)
            if workeroutput is not None:
                workeroutput[WORKER_KEY] = json.dumps(
                    {
                        "worker": self.config.workerinput.get("workerid"),  # type: ignore[attr-defined]
                        "results": [r.to_json() for r in self.results],
                        "warnings": self.warnings,
                        "flagged": self.flagged,
                    }
                )
            return
        status = self.finish(exitstatus)
        if status is not None and session.exitstatus == 0:
            session.exitstatus = status

    def finish(self, exitstatus: int) -> int | None:
        """Controller only: write the artifacts and the baseline. Returns a new exit status
        when saving failed."""
        if not self.results:
            return None
        from . import environment

        self.environment = environment.collect()
        if self.hard is not None:
            # The key was fixed at configure time; store the hard fields it was made from.
            self.environment["hard"] = self.hard
            self.environment["key"] = self.env_key
        self._drift()
        new_status = None
        if self.settings.save:
            new_status = self._save(exitstatus)
        if self.settings.json_path is not None:
            self.write_json(self.settings.json_path)
        self._write_markdown()
        return new_status

    def markdown(self) -> str:
        from .markdown import render

        return render(
            self.results,
            source=self.source.to_json() if self.source is not None else None,
            drift=self.drift,
            warnings=self.warnings,
            environment=self.environment,
            mode="ab" if self.settings.ab else "stored",
        )

    def _write_markdown(self) -> None:
        """--perf-markdown, and the GitHub job summary when running in Actions."""
        from .fsutil import atomic_write_text

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
                self.warnings.append(f"could not append to GITHUB_STEP_SUMMARY: {exc}")

    def _drift(self) -> None:
        from .drift import drift

        if self.source is None:
            return
        threshold = self.bench_layer.get("threshold", _options.DEFAULTS["threshold"])
        self.drift = drift(self.reference, self.source.reference, threshold)
        if self.drift and self.drift["drifted"]:
            parts = ", ".join(
                f"{k.replace('_ratio', '')} x{v:.3f}"
                for k, v in self.drift.items()
                if k.endswith("_ratio")
            )
            self.warnings.append(
                f"environment drift: the fixed reference workload runs {parts} relative to "
                f"the baseline's run (more than {self.drift['limit']:.1%}): this machine is "
                "not in the state the baseline was measured in, so verdicts against the stored"
                " baseline are unreliable; --perf-ab measures both sides in one job"
            )

    def _save(self, exitstatus: int) -> int | None:
        from .baseline import BaselineFileError

        if exitstatus == pytest.ExitCode.INTERRUPTED:
            self.warnings.append("not saving the baseline: the run was interrupted")
            return None
        assert self.store is not None and self.commit is not None and self.env_key
        assert self.environment is not None
        try:
            path, n, total = self.store.save(
                self.env_key,
                self.commit.sha,
                [r.to_json() for r in self.results],
                self.environment,
                self.commit.to_json(),
                reference=self.reference,
            )
        except (OSError, BaselineFileError) as exc:
            self.errors.append(f"could not save the baseline: {exc}")
            return int(pytest.ExitCode.TESTS_FAILED)
        except Exception as exc:  # filelock.Timeout and friends
            self.errors.append(f"could not save the baseline: {type(exc).__name__}: {exc}")
            return int(pytest.ExitCode.TESTS_FAILED)
        rel = _relative(path, self.settings.rootdir)
        self.written.append(
            f"baseline of {self.commit.short}: {rel} ({n} benchmark{'s' * (n != 1)} saved, "
            f"{total} stored)"
        )
        return None

    def document(self) -> dict[str, Any]:
        from . import environment, gitinfo
        from .results import document

        env = self.environment or environment.collect()
        extra: dict[str, Any] = {
            "mode": "stored" if not self.settings.ab else "ab",
            "warnings": self.warnings,
        }
        if self.reference is not None:
            extra["reference"] = self.reference
        if self.source is not None:
            extra["comparison"] = {**self.source.to_json(), "environment_drift": self.drift}
        if self.ab is not None:
            extra["comparison"]["removed"] = self.removed
            extra["base_commit"] = self.ab.base_sha
        commit = (
            self.commit.to_json()
            if self.commit is not None
            else gitinfo.describe(self.settings.rootdir, self.settings.baselines)
        )
        return document(self.results, env, commit, **extra)

    def write_json(self, path: os.PathLike[str] | str) -> None:
        from .fsutil import atomic_write_text
        from .results import dumps

        atomic_write_text(Path(path), dumps(self.document()))
        self.written.append(f"results JSON: {path}")

    def pytest_terminal_summary(
        self, terminalreporter: Any, exitstatus: int, config: pytest.Config
    ) -> None:
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
            if self.source is not None:
                terminalreporter.write_line(f"compared with {self.source.describe()}")
            if self.workers:
                terminalreporter.write_line(
                    f"measured on {len(self.workers)} xdist workers; timing serialised by a "
                    "cross-process lock, so no two benchmarks timed at once"
                )
            for line in summary_lines(self.results):
                terminalreporter.write_line(line)
            for r in self.results:
                for warning in r.warnings:
                    terminalreporter.write_line(f"warning: {r.key}: {warning}", yellow=True)
        for warning in self.warnings:
            terminalreporter.write_line(f"warning: {warning}", yellow=True)
        for error in self.errors:
            terminalreporter.write_line(f"error: {error}", red=True)
        for line in self.written:
            terminalreporter.write_line(f"infperf: wrote {line}")
        if os.environ.get("GITHUB_ACTIONS") == "true":
            self._annotate(terminalreporter)

    def _annotate(self, terminalreporter: Any) -> None:
        """GitHub workflow commands: regressions become error annotations on the test."""
        from .markdown import github_annotations

        workspace = os.environ.get("GITHUB_WORKSPACE")
        messages = {
            r.key: str(r.comparison.get("message", "")) for r in self.results if r.comparison
        }
        for line in github_annotations(
            self.results, messages, self.settings.rootdir, Path(workspace) if workspace else None
        ):
            terminalreporter.write_line(line)
        if self.drift and self.drift.get("drifted"):
            terminalreporter.write_line(
                "::warning title=pytest-infperf machine drift::The reference workload moved "
                "by more than half the threshold since the baseline's run: verdicts against "
                "the stored baseline are unreliable."
            )


def _relative(path: Any, root: Any) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


def _prop(value: object) -> object:
    if isinstance(value, float):
        return float(f"{value:.9g}")
    return value
