"""How ``infer_bench`` measures in this session: one mode object, chosen in
``pytest_configure`` by :func:`choose` (the pytest-codspeed ``instruments`` pattern).

- :class:`Disabled` (``--perf-disable``): one untimed call;
- :class:`Plain`: measure, check budgets (no baseline to compare with);
- :class:`Stored` (``--perf-compare``): measure, judge against the stored baseline,
  re-measure what was flagged;
- :class:`ABHead` (``--perf-ab``): interleave with the base commit's worker;
- the base side of an interleaved run is :class:`~pytest_infperf.abworker.ABWorkerPlugin`,
  installed by the worker process itself.

Every mode measures inside the machine-wide timing lock and hands the result to the one
judge; the fixture only asks ``mode.measure(call)``. This module is loaded at pytest
start-up, so the measuring code (numpy, scipy) is imported inside the methods.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .context import RunContext
from .keys import mode_key

if TYPE_CHECKING:
    from .ab import ABController, Interleaved
    from .bench import BenchCall, Mode
    from .judge import Judge
    from .results import BenchmarkResult, Comparison
    from .timing import Measurement


class Disabled:
    """``--perf-disable``: call each model once, untimed, so perf tests run as plain tests."""

    name = "disabled"

    def measure(self, call: BenchCall) -> BenchmarkResult:
        sampler = call.prepared.sampler
        with sampler.context():
            sampler.call()
        return call.disabled_result()


class Plain:
    """Measure and check budgets; the base of the comparing modes."""

    name = "measure"

    def __init__(self, context: RunContext) -> None:
        self.context = context

    @functools.cached_property
    def judge(self) -> Judge:
        # Imported on first measurement, not at start-up: the judge brings numpy.
        from .judge import Judge, Policy

        s = self.context.settings
        return Judge(Policy(s.drift_guard, s.drift_limit, s.strict_env))

    def measure(self, call: BenchCall) -> BenchmarkResult:
        __tracebackhide__ = True
        from .bench import gpu_state, record_gpu_state, timing_lock

        domain = call.domain
        with timing_lock(domain, self.context.warn):
            before = gpu_state(call.prepared) if domain != "cpu" else None
            m = call.measure(probe=self.context.probe())
            result = call.result(m)
            if before is not None:
                record_gpu_state(result, before, gpu_state(call.prepared))
            result.comparison = self.compare(call, result)
        for failure in self.judge.conclude(result):
            call.fail(failure)
        return result

    def compare(self, call: BenchCall, result: BenchmarkResult) -> Comparison | None:
        return None


class Stored(Plain):
    """``--perf-compare``: judged against the stored baseline; a regression or an
    inconclusive first pass is re-measured on fresh samples before it counts."""

    name = "stored"

    def compare(self, call: BenchCall, result: BenchmarkResult) -> Comparison | None:
        from .judge import Observation
        from .results import Verdict

        source = self.context.source
        assert source is not None
        judge, opts, origin = self.judge, call.opts, source.as_origin()
        entry = source.entries.get(result.key)
        c = judge.against(Observation.of(result), entry, opts, origin, source.env_diff)
        flagged = (Verdict.REGRESSION, Verdict.INCONCLUSIVE)
        if c.verdict not in flagged or opts["remeasure"] == 0 or opts["metric"] == "memory":
            return c
        first = c
        fresh: Measurement | None = None
        for _ in range(opts["remeasure"]):
            fresh = call.measure(first=False, probe=self.context.probe())
            again = Observation(
                fresh.samples, fresh.memory, result.batch_size, result.env, fresh.reference
            )
            c = judge.against(again, entry, opts, origin, source.env_diff)
            if c.verdict not in flagged:
                break
        if fresh is not None:
            result.extra["remeasured_samples"] = fresh.samples
        return judge.remeasured(first, c)


class ABHead(Plain):
    """``--perf-ab``: each benchmark interleaved, block by block, with the same test run by
    a worker process in the base commit's worktree. Also a plugin: it lists the base's
    tests after collection and lets the base finish each test with the head's."""

    name = "ab"

    def __init__(self, context: RunContext, controller: ABController) -> None:
        super().__init__(context)
        self.controller = controller

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from .ab import ABError

        head = {i.nodeid for i in session.items if "infer_bench" in getattr(i, "fixturenames", ())}
        try:
            base = self.controller.base_tests()
        except ABError as exc:
            self.context.warn(str(exc))
            return
        removed = self.context.removed = sorted(base - head)
        if removed:
            shown = ", ".join(removed[:10]) + (" ..." if len(removed) > 10 else "")
            self.context.warn(f"{len(removed)} perf test(s) of the base are gone in HEAD: {shown}")

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        from .ab import ABError

        try:
            self.controller.end_test(nodeid)
        except ABError as exc:
            self.context.warn(str(exc))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.controller.close()

    def measure(self, call: BenchCall) -> BenchmarkResult:
        __tracebackhide__ = True
        from .bench import timing_lock

        with timing_lock("cpu", self.context.warn):
            result = self._interleaved(call)
        for failure in self.judge.conclude(result):
            call.fail(failure)
        return result

    def _interleaved(self, call: BenchCall) -> BenchmarkResult:
        """The base is brought to the same call in its own process, both sides warm up,
        then blocks alternate (ABBA) until the paired verdict is decided; a regression is
        confirmed by a second interleaved run on fresh pairs."""
        __tracebackhide__ = True
        from . import environment, protocol
        from . import memory as _memory
        from .ab import ABError, LocalSide, interleave
        from .bench import BenchmarkError, from_warm
        from .results import Verdict

        source = self.context.source
        assert source is not None
        origin, opts, judge = source.as_origin(), call.opts, self.judge
        base_side = self.controller.base
        try:
            base = base_side.begin(call.nodeid, call.name)
        except ABError as exc:
            raise BenchmarkError(str(exc)) from None
        if not base.ready:
            result = call.result(call.measure())
            result.comparison = judge.no_base_run(opts, origin, result.median, base.error or None)
            return result
        env_diff = environment.diff(call.prepared.env, base.env)
        sampler = call.prepared.sampler
        with sampler.context():
            warm = call.warm(max(opts["min_sample_time"], protocol.SAMPLE_TIME_S))
            head_side = LocalSide(sampler, opts["disable_gc"])
            per_sample = warm.per_call_s * warm.block
            _memory.before_timed()

            def judged(run: Interleaved) -> Comparison:
                return judge.paired(
                    run.head,
                    run.base,
                    run.ratios,
                    opts,
                    origin,
                    run.alpha_used,
                    run.details(),
                    env_diff,
                )

            try:
                run = interleave(base_side, head_side, warm.block, per_sample, opts)
                c = judged(run)
                if c.verdict is Verdict.REGRESSION and opts["remeasure"] > 0:
                    # A regression must show in two independent interleaved runs.
                    again = interleave(base_side, head_side, warm.block, per_sample, opts)
                    c = judge.confirmed(c, judged(again))
                    run = run + again
                base_side.finish_call()
            except ABError as exc:
                raise BenchmarkError(str(exc)) from None
            memory = _memory.after_timed()
        m = from_warm(run.head, warm)
        m.memory = memory
        result = call.result(m)
        result.extra.update(base_samples=run.base, ab_log_ratios=run.ratios)
        result.comparison = c
        return result


def choose(config: pytest.Config, context: RunContext) -> Mode:
    """The session's mode. A mode already on the stash (the A/B worker installs itself
    before this runs) is kept."""
    existing = config.stash.get(mode_key, None)
    if existing is not None:
        return existing
    s = context.settings
    if s.disable:
        return Disabled()
    if s.ab:
        return _ab_head(config, context)
    if context.source is not None:
        return Stored(context)
    return Plain(context)


def _ab_head(config: pytest.Config, context: RunContext) -> ABHead:
    from .ab import ABController, Selection
    from .gitinfo import GitError

    s = context.settings
    assert context.source is not None and context.source.sha and context.toplevel
    selection = Selection(
        rootdir=s.rootdir,
        args=tuple(str(Path(config.invocation_params.dir) / a) for a in config.args),
        pythonpath=s.ab_pythonpath,
        keyword=str(config.getoption("keyword", "") or ""),
        markexpr=str(config.getoption("markexpr", "") or ""),
    )
    controller = ABController(context.source.sha, context.toplevel, selection)
    try:
        controller.setup()
    except GitError as exc:
        raise pytest.UsageError(f"--perf-ab={s.ab}: {exc}") from None
    return ABHead(context, controller)
