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

import dataclasses
import functools
import json
import textwrap
from collections import Counter
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..core.budget import Budget, process_started
from ..core.cmdline import Forwarded
from ..core.keys import forwarded_key
from ..core.names import CompareMode
from ..core.record import ResultExtra
from ..core.settings import Settings
from ..judge import policy
from ..judge.policy import Watch
from ..measure.mode import mode_key
from . import early
from .collector import is_perf, split_deselected
from .context import RunContext
from .facts import (
    base_call_reason,
    comparable,
    counted,
    env_reason,
    family,
    session_facts,
    witness,
)
from .terminal import announce

if TYPE_CHECKING:
    from ..ab.checkout import Selection
    from ..ab.controller import ABController
    from ..ab.interleave import PairedRun
    from ..ab.proof import Head
    from ..ab.workers import BaseCall
    from ..core.results import BenchmarkResult, Comparison, Origin
    from ..judge.judge import Judge
    from ..measure.call import BenchCall
    from ..measure.mode import Mode
    from .gate import Gate


class Disabled:
    """``--perf-disable``: call each model once, untimed, so perf tests run as plain tests."""

    name = "disabled"

    def measure(self, call: BenchCall) -> BenchmarkResult:
        sampler = call.prepared.sampler
        with sampler.context():
            sampler.call()
        return call.disabled_result()


class HeadProof:
    """The head process's proof, asked before every measurement of every mode that
    measures (:class:`~pytest_infperf.ab.proof.Head`): a project module imported from a
    stale or foreign installed copy fails the test, and the run stores nothing."""

    def __init__(self, context: RunContext) -> None:
        self.context = context

    @functools.cached_property
    def _head(self) -> Head:
        from ..ab.proof import Head

        rootdir = self.context.settings.rootdir
        top = self.context.toplevel or next(
            (p for p in (rootdir, *rootdir.parents) if (p / ".git").exists()), rootdir
        )
        return Head(top)

    def prove(self) -> None:
        __tracebackhide__ = True
        from ..measure.call import BenchmarkError

        doing = "compare" if self.context.compares else "measure"
        refusal = self._head.refusal(doing)
        if refusal is not None:
            self.context.refused = self.context.refused or refusal
            # Paths are never broken: a line is as long as its longest path.
            raise BenchmarkError(
                textwrap.fill(refusal, 110, break_long_words=False, break_on_hyphens=False)
            )


class Counting:
    """``--perf-count``: no timing; each model called once and its work counted (the
    profiled pass), for ``infperf bisect``'s search on the counts before any timing."""

    name = "count"

    def __init__(self, context: RunContext) -> None:
        self.proof = HeadProof(context)

    def measure(self, call: BenchCall) -> BenchmarkResult:
        __tracebackhide__ = True
        self.proof.prove()
        return call.counted()


class Plain:
    """Measure and check budgets; the base of the comparing modes."""

    name = "measure"

    def __init__(self, context: RunContext) -> None:
        self.context = context
        #: How many benchmarks this session's perf tests make (:func:`.facts.family`): the
        #: family the run's multiplicity is controlled over (known before any test runs,
        #: unlike the flagged ones).
        self.family = 1
        #: Perf tests pytest-split left to the other shards of this run.
        self._other_shards: list[str] = []
        #: The files of the perf tests, in collection order: what interleaving's process
        #: pairs collect (``ABController.collected``).
        self.perf_files: list[str] = []
        self.proof = HeadProof(context)
        #: How many benchmarks the run counted for each test (the baseline's; one where it
        #: holds none), and what each test has made so far, with its failures.
        self._counted: Counter[str] = Counter()
        self._made: dict[str, list[tuple[BenchmarkResult, list[str]]]] = {}
        #: --perf-budget, from the session's start (None: none, or nothing to compare).
        source = context.source
        self.budget, why = Budget.of(
            context.settings.budget if source is not None else None,
            source.run_seconds if source is not None else None,
            process_started(),
            len({e.get("nodeid") for e in source.entries.values()}) if source is not None else 0,
        )
        if why:
            context.warn(why)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self._other_shards += split_deselected(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        perf = [item for item in session.items if is_perf(item)]
        # A shard of a split run judges over the whole run's benchmarks, as the unsplit
        # run does: its own tests', and those pytest-split left to the other shards.
        self.family = max(1, family(self.context, [i.nodeid for i in perf] + self._other_shards))
        self._counted = counted(self.context)
        self.perf_files = [str(item.path) for item in perf]
        if self.budget is not None:
            # Under xdist each worker collects every test and measures its share of them.
            workers = int(getattr(session.config, "workerinput", {}).get("workercount", 1))
            self.budget.total = -(-len(perf) // max(workers, 1))

    @functools.cached_property
    def judge(self) -> Judge:
        # Imported on first measurement, not at start-up: the judge brings numpy.
        from ..judge.judge import Judge
        from ..judge.rules import Policy

        s = self.context.settings
        policy = Policy(
            s.drift_guard,
            s.drift_limit,
            s.strict_env,
            require_baseline=s.require_baseline,
            accept=tuple(self.context.accept),
            run_alpha=s.run_alpha,
            gpu_throttle=s.gpu_throttle,
        )
        judge = Judge(policy, family=self.family)
        # How far the host moved since the baseline's run: a draw of this runner's spread.
        judge.host_moved((self.context.drift() or {}).get("python_ratio"))
        return judge

    @functools.cached_property
    def gate(self) -> Gate:
        from .gate import Gate

        return Gate(self.judge.policy, verbose=self.context.settings.verbose)

    def measure(self, call: BenchCall) -> BenchmarkResult:
        __tracebackhide__ = True
        from ..measure.call import gpu_clocks, gpu_state, record_gpu_state, timing_lock

        self.proof.prove()
        domain = call.domain
        with timing_lock(domain, self.context.warn):
            before = gpu_state(call.prepared) if domain != "cpu" else None
            probe = self.context.probe()
            m = call.measure(probe=probe)
            result = call.result(m)
            # After the timed samples, outside them: what one call does.
            result.work = call.profile(result.median)
            if before is not None:
                after, clocks = gpu_state(call.prepared), gpu_clocks(call.prepared)
                for warning in record_gpu_state(result, before, after, clocks):
                    self.context.warn(warning)
                if probe is not None:  # the drift guard's GPU reference, beside the CPU's
                    result.reference = _references(result.reference, result.extra)
            result.comparison = self.compare(call, result)
        self.gated(call, result)
        return result

    def compare(self, call: BenchCall, result: BenchmarkResult) -> Comparison | None:
        return None

    def gated(self, call: BenchCall, result: BenchmarkResult) -> None:
        """What ``result``'s verdict means for its test (the gate), kept with the test's
        other benchmarks until its end (:meth:`pytest_runtest_call_held`)."""
        failures = self.gate.apply(result)
        for failure in failures:
            call.fail(failure)
        self._made.setdefault(call.nodeid, []).append((result, failures))

    @pytest.hookimpl(wrapper=True, trylast=True, specname="pytest_runtest_call")
    def pytest_runtest_call_held(self, item: pytest.Item) -> Generator[None, object, object]:
        """Once a test's body ran, before its failures are raised (the collector's wrapper,
        outside this one): a test that made more benchmarks than the run counted for it
        holds each of its claims to its share of the run's alpha spread over all it made
        (:func:`~pytest_infperf.core.family.of_test`), and is gated again where one lost
        its claim."""
        try:
            return (yield)
        finally:
            made = self._made.pop(item.nodeid, [])
            if len(made) > max(1, self._counted[item.nodeid]):
                self._hold(item, made)

    def _hold(self, item: pytest.Item, made: list[tuple[BenchmarkResult, list[str]]]) -> None:
        from ..core import family as _family
        from ..judge.merged import rejudge
        from .collector import collector_key

        counted = max(1, self._counted[item.nodeid])
        size = _family.of_test(self.family, len(made), counted)
        collector = item.config.stash.get(collector_key, None)
        if collector is not None:
            collector.extra += len(made) - counted  # the JSON's family, a merge's sum
        for result, failures in made:
            c = result.comparison
            again = None if c is None else rejudge(c, size, self.judge.policy.run_alpha)
            if again is None or again == c:
                continue
            before = list(result.warnings)
            props = None if collector is None else collector.properties(result)
            result.comparison = again
            now = self.gate.apply(result)
            result.warnings[:] = list(dict.fromkeys([*before, *result.warnings]))
            if collector is not None and props is not None:
                collector.regated(item, result, props, failures, now)


def _references(reference: dict[str, Any] | None, extra: ResultExtra) -> dict[str, Any]:
    """A measurement's drift references: its CPU probes and, on a GPU, the clocks its
    region watch read while the samples ran (``extra["gpu_region"]``). One place for the
    first measurement and a re-measurement alike."""
    from ..measure.drift import gpu_reference

    return {**(reference or {}), **gpu_reference(extra.get("gpu_region"), extra.get("gpu_state"))}


class Stored(Plain):
    """``--perf-compare``: judged against the stored baseline. What happens to each
    benchmark (its stored pass stands, it is interleaved at once or settled by
    interleaving against the code of the baseline's commit, re-checked, re-measured on
    fresh samples, or left as it is for the budget) is :mod:`~pytest_infperf.judge.policy`'s
    decision; this class gathers the facts it needs and acts on its answer. Also a
    plugin: it removes its worktree at the end."""

    name = "stored"

    def __init__(self, context: RunContext, selection: Selection) -> None:
        super().__init__(context)
        self.selection = selection
        self._controller: ABController | None = None
        #: Why no controller could be set up (then nothing is settled in this session).
        self._broken: str | None = None
        #: Why the benchmark being measured could not be interleaved at once (then it is
        #: not settled either), or None.
        self._fell_back: str | None = None
        #: Why the budget sent the benchmark being measured to the stored pass, or "".
        self._refused = ""
        #: The misread rule's state in this process (the first misread, what stood before).
        self._misread = Watch()
        self._config: pytest.Config | None = None
        self._announced = False  # said that it interleaves (once, without -v or CI)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._controller is not None:
            self._controller.close()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from ..measure import gpu

        super().pytest_collection_finish(session)
        config, source = session.config, self.context.source
        self._config = config
        if not (
            self.context.settings.prestart
            and source is not None
            and not hasattr(config, "workerinput")
            and not config.option.collectonly
            and any(item.nodeid in source.entries for item in session.items)
        ):
            return
        # As far as is known before any test runs: a CPU benchmark the baseline can judge.
        domain = "gpu" if gpu.any_visible() else "cpu"
        facts = dataclasses.replace(self._session_facts(), domain=domain)
        if policy.routes_all(facts) and (controller := self._controller_or_none()) is not None:
            controller.prestart()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        if self._controller is not None:  # a rerun of a test a side still serves
            early.end_test(self._controller, item.nodeid)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        if self._controller is not None:  # its sides end the test with the head's
            early.end_test(self._controller, nodeid)

    def _session_facts(self) -> policy.Facts:
        unsettled = self._broken if self._fell_back is None else self._fell_back
        budget = None if self.budget is None else self.budget.view()
        return session_facts(
            self.context, unsettled, bool(self._misread.found), budget, self.family
        )

    def _facts(self, call: BenchCall, **after: Any) -> policy.Facts:
        """The facts of one benchmark (``after``: those known after its stored pass)."""
        judged, moved = comparable(self.context, call)
        return dataclasses.replace(
            self._session_facts(),
            # The timing lock's domain names the devices ("gpu-0,1"); the policy asks only
            # whether it is a GPU. (Compared with "gpu" as is, no real GPU benchmark ever
            # stood on its quiet evidence: seen on a lent H100.)
            domain="cpu" if call.domain == "cpu" else "gpu",
            metric=str(call.opts.metric),
            remeasure=call.opts.remeasure,
            comparable=judged,
            env_changed=moved,
            refused=self._refused,
            **after,
        )

    def _tally(self, d: policy.Decision) -> None:
        if self.budget is not None and d.tally == "refused":
            self.budget.unrouted += 1
        elif self.budget is not None and d.tally == "resettled":
            self.budget.resettled += 1

    def measure(self, call: BenchCall) -> BenchmarkResult:
        __tracebackhide__ = True
        self.proof.prove()
        if self.budget is not None:
            self.budget.measured.add(call.nodeid)
        d = policy.route(self._facts(call))
        self._tally(d)
        # Read by the judging inside the measurement (Plain.measure compares).
        self._refused = d.reason if d.step is policy.Step.STORED else ""
        self._fell_back = None
        if d.step is policy.Step.INTERLEAVE:
            from ..measure.call import timing_lock

            with timing_lock("cpu", self.context.warn):
                result = self._interleave_at_once(call, d)
            if not isinstance(result, str):
                self.gated(call, result)
                return result
            # Why it could not be interleaved is a fact of its stored pass: settling it
            # would meet the same (a base test that fails would run a second time).
            self._fell_back = result
        if self._controller is not None:  # nothing of ours runs beside a stored pass
            early.quiet_workers(self._controller)
        return super().measure(call)

    def _interleave_at_once(self, call: BenchCall, d: policy.Decision) -> BenchmarkResult | str:
        """The benchmark measured only interleaved with the baseline commit's code; or why
        that cannot happen for it (then the stored pass runs as usual)."""
        from ..ab.workers import ABError, BaseCall
        from ..measure.call import from_warm
        from ..report.fmt import fmt_why

        controller = self._controller_or_none()
        if controller is None:
            return str(self._broken)
        self._announced = announce(
            self._config, self.context.settings, call.nodeid, fmt_why(d.reason), self._announced
        )
        try:
            budget = self.budget if d.budget_may_cut else None
            paired = _with_base(self.context, self.judge, controller, call, budget)
        except ABError as exc:
            self.context.warn(f"{call.nodeid}: {exc}; judged against the stored baseline")
            return f"the baseline commit's worker failed: {exc}"
        if isinstance(paired, BaseCall):
            return base_call_reason(paired)
        if paired.comparison.env_diff:
            return env_reason(paired.comparison.env_diff)
        m = from_warm(paired.head, paired.warm)
        m.memory = paired.memory
        m.metrics = paired.metrics("head")
        result = call.result(m)
        result.work = paired.work
        # The samples the verdict came from, as a settling's: a report draws them.
        result.extra["settle"] = {
            **paired.record(),
            "head_samples": paired.head,
            "base_samples": paired.base,
        }
        result.comparison = dataclasses.replace(paired.comparison, settled_because=d.reason)
        return result

    def compare(self, call: BenchCall, result: BenchmarkResult) -> Comparison | None:
        from ..judge import work as _work
        from ..judge.device import work_of

        source = self.context.source
        assert source is not None
        entry = source.entries.get(result.key)
        c = self._judged(call, result)
        return _work.attach(c, result.work, None if entry is None else work_of(entry))

    def _judged(self, call: BenchCall, result: BenchmarkResult) -> Comparison:
        """The stored verdict, and what the policy makes of it; on a GPU, what it showed of
        this runner's host joins the judge's spread (:meth:`Judge.learn_stored`)."""
        from ..judge import work as _work
        from ..judge.device import work_of

        source = self.context.source
        assert source is not None
        entry = source.entries.get(result.key)
        c = self.judge.stored(result, entry, call.opts, source.as_origin(), source.env_diff)
        # The work diff is part of the quiet evidence the policy reads.
        c = _work.attach(c, result.work, None if entry is None else work_of(entry))
        final = self._decided(call, result, c)
        if call.domain != "cpu":
            self.judge.learn_stored(c, final)
        return final

    def _decided(self, call: BenchCall, result: BenchmarkResult, c: Comparison) -> Comparison:
        """What the policy makes of the stored verdict ``c``."""
        from ..judge.device import clocks_held

        source = self.context.source
        assert source is not None
        judge = self.judge
        entry = source.entries.get(result.key)
        facts = self._facts(
            call,
            stored=c,
            timed_s=float(result.decisions.get("timed_s") or 0.0),
            clocks_held=clocks_held(result, entry),
            host_ungated=None if call.domain == "cpu" else judge.host_ungated(call.opts),
        )
        self._refused = ""
        d = policy.after_stored(facts)
        self._misread.note(result.key, facts, d)
        self._tally(d)
        if d.step in (policy.Step.SETTLE, policy.Step.RECHECK):
            settled = self._settle(call, result, c, d)
            if not isinstance(settled, str):
                return settled
            d = policy.after_stored(dataclasses.replace(facts, unsettled=settled))
        if d.step is policy.Step.REMEASURE:
            if self._controller is not None:  # settling's workers rest while it re-measures
                early.quiet_workers(self._controller)
            c = _remeasure(judge, self.context, call, result, c)
            return judge.unsettled(c, d.reason)
        return judge.stands(c, d)

    def _settle(
        self, call: BenchCall, result: BenchmarkResult, stored: Comparison, d: policy.Decision
    ) -> Comparison | str:
        """The interleaved verdict, or why there is none."""
        from ..ab.workers import ABError, BaseCall
        from ..report.fmt import fmt_ratio

        controller = self._controller_or_none()
        if controller is None:
            return str(self._broken)
        why = f"its stored pass: {stored.verdict} {fmt_ratio(stored)}"
        self._announced = announce(
            self._config, self.context.settings, call.nodeid, why, self._announced
        )
        try:
            budget = self.budget if d.budget_may_cut else None
            paired = _with_base(self.context, self.judge, controller, call, budget, result)
        except ABError as exc:
            return f"the baseline commit's worker failed: {exc}"
        if isinstance(paired, BaseCall):
            return base_call_reason(paired)
        c = paired.comparison
        if c.env_diff:
            return env_reason(c.env_diff)
        result.extra["settle"] = {
            **paired.record(),
            "head_samples": paired.head,
            "base_samples": paired.base,
        }
        if call.domain == "cpu" and (warning := self._misread.check(call.nodeid, stored, c)):
            self.context.warn(warning)
        return self.judge.settled(stored, c, recheck=d.step is policy.Step.RECHECK)

    def _controller_or_none(self) -> ABController | None:
        """The baseline commit's worktree and worker, set up on first need and reused."""
        if self._controller is None and self._broken is None:
            opened = _open_controller(self.context, self.selection, self.perf_files)
            if isinstance(opened, str):
                self._broken = opened
                self.context.warn(f"settling is off for this session: {opened}")
            else:
                self._controller = opened
        return self._controller


def _remeasure(
    judge: Judge, context: RunContext, call: BenchCall, result: BenchmarkResult, first: Comparison
) -> Comparison:
    """Fresh samples against the stored baseline, until the verdict is neither a
    regression nor inconclusive or the ``remeasure`` budget is spent; the judge holds a
    claim on them over the run's family (:meth:`Judge.remeasured`)."""
    from statistics import median

    from ..core.results import Verdict
    from ..judge.observation import Observation
    from ..measure.call import figures_of

    source = context.source
    assert source is not None
    opts = call.opts
    entry = source.entries.get(result.key)
    flagged = (Verdict.REGRESSION, Verdict.INCONCLUSIVE)
    c, fresh = first, None
    for _ in range(opts.remeasure):
        fresh = call.measure(first=False, probe=context.probe())
        refs = _references(fresh.reference, figures_of(fresh)[0]) or None
        again = Observation(fresh.samples, fresh.memory, result.batch_size, result.env, refs)
        # A device time is judged from a profiled pass: the fresh samples' own, not the
        # first pass's (the same figures would fail the test "on fresh samples").
        judged = result
        device = result.generation is None and opts.metric in ("median", "gpu_time")
        if device and result.work is not None and result.work.gpu_time:
            judged = dataclasses.replace(result, work=call.profile(median(fresh.samples)))
        c = judge.stored(
            judged,
            entry,
            opts,
            source.as_origin(),
            source.env_diff,
            fresh=again,
            fresh_metrics=fresh.metrics if result.generation is not None else None,
        )
        if c.verdict not in flagged:
            break
    if fresh is not None:
        result.extra["remeasured_samples"] = fresh.samples
    return judge.remeasured(first, c)


def _with_base(
    context: RunContext,
    judge: Judge,
    controller: ABController,
    call: BenchCall,
    budget: Budget | None,
    stored: BenchmarkResult | None = None,
) -> PairedRun | BaseCall:
    """``call`` interleaved with the code of the stored baseline's commit (``stored``: its
    stored pass, which has just warmed and profiled the model: only calibrated again). A
    side that imported the project's code from elsewhere fails the test; any other worker
    failure is the caller's ABError."""
    from ..ab.interleave import run_paired
    from ..ab.workers import ForeignCode
    from ..measure.call import BenchmarkError

    warm_s, work = (None, None) if stored is None else (stored.median, stored.work)
    try:
        origin = _settle_origin(context)
        return run_paired(
            call, controller, judge, origin, warm_s, work, budget, witness(context, call)
        )
    except ForeignCode as exc:
        raise BenchmarkError(str(exc)) from None


def _settle_origin(context: RunContext) -> Origin:
    source = context.source
    assert source is not None and source.sha
    return dataclasses.replace(
        source.as_origin(),
        mode=CompareMode.AB,
        text=(
            f"commit {source.sha[:10]} (the stored baseline's commit), measured in this "
            "job, interleaved with it"
        ),
    )


def _open_controller(
    context: RunContext, selection: Selection, perf_files: list[str]
) -> ABController | str:
    """The baseline commit checked out and its worker started, or why it cannot be."""
    from ..ab.controller import ABController
    from ..store import git as gitinfo

    source = context.source
    assert source is not None and source.sha
    try:
        toplevel = Path(gitinfo.open_repo(context.settings.rootdir).working_tree_dir)
        controller = ABController(
            source.sha,
            toplevel.resolve(),
            selection,
            title="baseline commit",
            warn=context.warn,
            pin_cpu=context.settings.pin_cpu,
            info=context.note,
        )
        controller.setup()  # closes itself when it fails
        try:
            controller.collected(perf_files)
        except BaseException:
            controller.close()
            raise
    except gitinfo.GitError as exc:
        return f"the baseline's commit cannot be checked out: {exc}"
    return controller


class ABHead(Plain):
    """``--perf-ab``: each benchmark interleaved, block by block, with the same test run by
    a worker process in the base commit's worktree. Also a plugin: it lists the base's
    tests after collection and lets the base finish each test with the head's."""

    name = "ab"

    def __init__(self, context: RunContext, controller: ABController) -> None:
        super().__init__(context)
        self.controller = controller

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from ..ab.workers import ABError

        super().pytest_collection_finish(session)
        self.controller.collected(self.perf_files)
        head = {i.nodeid for i in session.items if is_perf(i)}
        try:
            base = self.controller.base_tests()
        except ABError as exc:
            self.context.warn(str(exc))
            return
        removed = self.context.removed = sorted(base - head)
        if removed:
            shown = ", ".join(removed[:10]) + (" ..." if len(removed) > 10 else "")
            self.context.warn(f"{len(removed)} perf test(s) of the base are gone in HEAD: {shown}")
        config = session.config
        prestart = self.context.settings.prestart and bool(head & base)
        if prestart and not hasattr(config, "workerinput") and not config.option.collectonly:
            self.controller.prestart()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        early.end_test(self.controller, item.nodeid)  # a rerun of a test a side still serves

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        from ..ab.workers import ABError

        try:
            self.controller.end_test(nodeid)
        except ABError as exc:
            self.context.warn(str(exc))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.controller.close()

    def measure(self, call: BenchCall) -> BenchmarkResult:
        __tracebackhide__ = True
        from ..measure.call import timing_lock

        self.proof.prove()
        with timing_lock("cpu", self.context.warn):
            result = self._interleaved(call)
        self.gated(call, result)
        return result

    def _interleaved(self, call: BenchCall) -> BenchmarkResult:
        """The base is brought to the same call in its own process, both sides warm up,
        then blocks alternate (ABBA) in as many process pairs as the judge's plan asks."""
        __tracebackhide__ = True
        from ..ab.interleave import run_paired
        from ..ab.workers import ABError, BaseCall
        from ..measure.call import BenchmarkError, from_warm

        source = self.context.source
        assert source is not None
        origin = source.as_origin()
        try:
            paired = run_paired(
                call,
                self.controller,
                self.judge,
                origin,
                budget=self.budget,
                witness=witness(self.context, call),
            )
        except ABError as exc:
            raise BenchmarkError(str(exc)) from None
        if isinstance(paired, BaseCall):  # the base has no such call, or failed first
            early.quiet_workers(self.controller)
            result = call.result(call.measure())
            result.work = call.profile(result.median)
            error = paired.error or None
            result.comparison = self.judge.no_base_run(call.opts, origin, result.median, error)
            return result
        m = from_warm(paired.head, paired.warm)
        m.memory = paired.memory
        m.metrics = paired.metrics("head")
        result = call.result(m)
        result.work = paired.work
        result.extra["base_samples"] = paired.base
        result.extra["ab"] = paired.record()
        result.comparison = paired.comparison
        return result


def selection(config: pytest.Config, settings: Settings) -> Selection:
    """The tests an interleaving worker collects: this session's own selection."""
    from ..ab.checkout import Selection

    return Selection(
        rootdir=settings.rootdir,
        args=tuple(str(Path(config.invocation_params.dir) / a) for a in config.args),
        pythonpath=settings.ab_pythonpath,
        keyword=str(config.getoption("keyword", "") or ""),
        markexpr=str(config.getoption("markexpr", "") or ""),
        forwarded=config.stash.get(forwarded_key, Forwarded()),
        inifile=str(config.inipath) if config.option.inifilename and config.inipath else "",
        invocation_dir=Path(config.invocation_params.dir),
        heap=settings.heap,
        layer=json.dumps(settings.bench_layer),
        timeout=settings.worker_timeout,
    )


def choose(config: pytest.Config, context: RunContext) -> Mode:
    """The session's mode. A mode already on the stash (the A/B worker installs itself
    before this runs) is kept."""
    existing = config.stash.get(mode_key, None)
    if existing is not None:
        return existing
    s = context.settings
    if s.disable:
        return Disabled()
    if s.count:
        return Counting(context)
    if s.ab:
        return _ab_head(config, context)
    if context.source is not None:
        return Stored(context, selection(config, s))
    return Plain(context)


def _ab_head(config: pytest.Config, context: RunContext) -> ABHead:
    from ..ab.controller import ABController
    from ..store.git import GitError

    s = context.settings
    assert context.source is not None and context.source.sha and context.toplevel
    controller = ABController(
        context.source.sha,
        context.toplevel,
        selection(config, s),
        warn=context.warn,
        pin_cpu=s.pin_cpu,
        info=context.note,
    )
    try:
        controller.setup()
    except GitError as exc:
        raise pytest.UsageError(f"--perf-ab={s.ab}: {exc}") from None
    return ABHead(context, controller)
