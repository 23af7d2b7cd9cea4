"""The judge: every verdict of every mode is made here, and nowhere else.

The stored mode, the A/B mode and ``infperf compare`` hand the judge what was measured and
what it is compared with; the judge picks the metric's test
(:mod:`~pytest_infperf.stats.ranks`), applies the session's policy (drift guard, the run's
multiplicity) and returns a typed :class:`~pytest_infperf.core.results.Comparison`. An
interleaved comparison follows the judge's :class:`~.plan.PairedPlan`. What a verdict
means for its test (fail, accept, warn) is :mod:`pytest_infperf.session.gate`'s; the words
are :mod:`pytest_infperf.report.messages`'. A rule added here holds in every mode.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any

from ..core import family as _family
from ..core.names import CompareMode, Metric
from ..core.options import GENERATION_METRICS, BenchOptions, generation_metrics
from ..core.results import (
    HOST_SD,
    METRIC_LABELS,
    BenchmarkResult,
    Comparison,
    Origin,
    Reason,
    Verdict,
    WorkDiff,
    WorkProfile,
    memory_figure,
)
from ..measure import environment
from ..measure.backends import runs_on_gpu
from ..measure.drift import speed_factors
from ..stats import pooled as _pool
from ..stats import ranks as _cmp
from ..store.compact import summary_note
from .device import (
    by_device_time,
    device_share,
    enqueue_share,
    gpu_withheld,
    gpu_withholds,
    host_bound_noted,
    reference_kind,
    ungated_part,
    ungated_text,
    work_of,
)
from .observation import Observation
from .plan import PROFILED, Design, Look, PairedPlan, _holm_rejected, ungated
from .policy import PASSES, Decision, counts_relation
from .rules import Policy
from .work import diff as work_diff


def _estimate(current: Observation, base: Observation, opts: BenchOptions) -> _cmp.Estimate:
    metric, d, alpha = opts.metric, opts.threshold, opts.alpha
    if metric in ("median", "gpu_time", *GENERATION_METRICS):
        return _cmp.compare_latency(current.samples, base.samples, d, alpha)
    if metric in ("p90", "p99"):
        return _cmp.compare_tail(current.samples, base.samples, metric, d, alpha)
    if metric == "throughput":
        return _cmp.compare_throughput(
            current.samples, base.samples, current.batch_size or 1, base.batch_size or 1, d, alpha
        )
    return _cmp.compare_memory(memory_figure(current.memory), memory_figure(base.memory), d, alpha)


class Judge:
    """Verdicts for one pytest process (or one ``infperf compare``).

    ``family``: the run's benchmarks (:mod:`~pytest_infperf.core.family`), known before
    any test runs, never one that grows as the session goes (Holm over the benchmarks
    flagged so far: family error 11-14% with 5 flagged). ``spread``: the between-process
    spread its comparisons showed so far; ``host``: that of a GPU benchmark's latency on this
    runner, from the run's own evidence (:class:`~pytest_infperf.stats.pooled.RunnerSpread`:
    the session-start reference, the stored passes of identical work, the pairs)."""

    def __init__(self, policy: Policy | None = None, family: int = 1) -> None:
        self.policy = policy or Policy()
        self.family = max(1, family)
        self.spread = _pool.SuiteSpread()
        self.host = _pool.RunnerSpread()

    def host_moved(self, python_ratio: float | None) -> None:
        """The session-start reference's Python loop now over the baseline's run: a stored
        pair's draw of how far the host moves a latency (None: not measured)."""
        if python_ratio is not None and python_ratio > 0:
            self.host.draw(math.log(python_ratio))

    def plan(self, opts: BenchOptions, metrics: tuple[str, ...], gpu: bool = False) -> PairedPlan:
        """One interleaved comparison's sequential rule, from the suite's spread so far
        (``gpu``: a GPU benchmark, whose latencies are held to this runner's spread)."""
        prior = {m: s for m in metrics if (s := self.spread.of(m)) is not None}
        runner = {m: self.host.of_pairs() for m in metrics if m not in PROFILED} if gpu else {}
        return PairedPlan(
            opts.threshold,
            opts.alpha,
            metrics,
            self.family,
            self.policy.run_alpha,
            prior=prior,
            runner=runner,
        )

    def learn(self, look: Look, gpu: bool = False) -> None:
        """A finished comparison's last look: its pairs join the suite's spread (a GPU
        benchmark's latencies: this runner's)."""
        for metric, est in look.pooled.items():
            if gpu and metric not in PROFILED:
                self.host.pairs(est)
            else:
                self.spread.add(metric, est)

    def host_ungated(self, opts: BenchOptions) -> float | None:
        """This runner's latency spread where the pairs cannot resolve the threshold in it
        (:func:`~.plan.ungated`), else None."""
        return ungated(self.host.of(), opts.threshold, opts.alpha)

    # --- verdicts ---------------------------------------------------------------------
    def against(
        self,
        current: Observation,
        entry: Mapping[str, Any] | None,
        opts: BenchOptions,
        origin: Origin,
        env_diff: Mapping[str, list[Any]] | None = None,
    ) -> Comparison:
        """A measurement against a stored baseline entry (``None``: the baseline has no such
        benchmark). ``env_diff``: hard environment fields that differ for the whole run."""
        metric = opts.metric
        base = _blank(opts, origin)
        if entry is None:
            return dataclasses.replace(
                base,
                verdict=Verdict.NO_BASELINE,
                reason=Reason.NOT_IN_BASELINE,
                current=current.figure(metric),
            )
        baseline = Observation.of(entry)
        diff = {**(env_diff or {}), **environment.diff(dict(current.env), dict(baseline.env))}
        if diff:
            return dataclasses.replace(
                base,
                verdict=Verdict.INCOMPARABLE,
                reason=Reason.ENVIRONMENT,
                env_diff=diff,
                current=current.figure(metric),
                baseline=baseline.figure(metric),
            )
        estimate = _estimate(current, baseline, opts)
        c = _from_estimate(base, estimate, current.figure(metric), baseline.figure(metric))
        if runs_on_gpu(current.env) and metric != "memory":
            # A stored pass is one process pair: on a GPU, its time is held to how far this
            # runner moves it between processes, not to one process's own spread.
            c = between_processes(c, self._between(metric))
        c = dataclasses.replace(c, decided_by=CompareMode.STORED, detectable=_detectable_stored(c))
        if self.policy.drift_guard == "adjust":
            kind = reference_kind(metric, current)
            c = _drift_guarded(c, current, baseline, self.policy, kind)
        return c

    def _between(self, metric: str) -> float | _pool.Spread:
        """How far ``metric`` moves between two processes on a GPU runner: the device time
        by its floor (or the suite's device-time spread, if wider), a latency by this
        runner's measured spread."""
        if metric != "gpu_time":
            return self.host.of()
        floor = Design().device_tau_floor
        learned = self.spread.of("gpu_time")
        return floor if learned is None else max(floor, math.sqrt(learned.var))

    def stored(
        self,
        result: BenchmarkResult,
        entry: Mapping[str, Any] | None,
        opts: BenchOptions,
        origin: Origin,
        env_diff: Mapping[str, list[Any]] | None = None,
        *,
        fresh: Observation | None = None,
        fresh_metrics: Mapping[str, list[float]] | None = None,
    ) -> Comparison:
        """``result`` against a stored entry, whatever kind of benchmark it is: one call's
        metric (:meth:`against`), or a generation's judged metrics (:meth:`against_each`).
        ``fresh`` / ``fresh_metrics``: new samples of the same benchmark (a re-measurement)
        instead of the result's own."""
        c = self._stored(result, entry, opts, origin, env_diff, fresh, fresh_metrics)
        if self.policy.unreferenced and entry is not None:
            c = _counted(c, work_diff(work_of(entry), result.work))
        extra = (entry or {}).get("extra")
        c = _gpu_withheld(c, gpu_withheld(c, result.extra, extra, self.policy.gpu_throttle))
        summary = None if entry is None else summary_note(dict(entry))
        if summary is None:
            return c
        # A compacted baseline (prune --keep-raw) is tested through its quantiles: say so.
        return dataclasses.replace(
            c,
            note=f"{c.note}; {summary}" if c.note else summary,
            details={**c.details, "baseline_compact": entry["compact"]},  # type: ignore[index]
        )

    def learn_stored(self, stored: Comparison, final: Comparison) -> None:
        """A GPU benchmark decided: where its stored pass found the device time and the
        exact work counts the same on both sides, and nothing claimed a change in the end,
        it ran identical work, and its latencies' log-ratios are draws of how far this
        runner's host moves them between processes. Learned after its own verdict (a
        benchmark is not judged by its own draw), never from one that changed."""
        device = (stored.parts or {}).get("gpu_time")
        # Only from a pass: a latency left undecided may be a host-only regression, and
        # learned as the host's spread it would ungate the benchmarks after it.
        if (
            device is None
            or device.verdict is not Verdict.UNCHANGED
            or final.verdict not in _PASSES
        ):
            return
        if counts_relation(stored.work) != "same":
            return
        for metric, part in (stored.parts or {}).items():
            if metric != "gpu_time" and part.ratio and part.ratio > 0:
                slower = 1.0 / part.ratio if part.metric is Metric.THROUGHPUT else part.ratio
                self.host.draw(math.log(slower))

    def _stored(
        self,
        result: BenchmarkResult,
        entry: Mapping[str, Any] | None,
        opts: BenchOptions,
        origin: Origin,
        env_diff: Mapping[str, list[Any]] | None,
        fresh: Observation | None,
        fresh_metrics: Mapping[str, list[float]] | None,
    ) -> Comparison:
        current = fresh if fresh is not None else Observation.of(result)
        if result.generation is None:
            if opts.metric in GENERATION_METRICS:  # a file compare's --metric: no tokens
                opts = opts.replace(metric="median")
            current = dataclasses.replace(current, device_share=device_share(result))
            device = _device_parts(result, current, entry, opts)
            if device is None and opts.metric == "gpu_time":
                return _no_device_time(opts, origin, result, entry)
            if device is None:
                c = self.against(current, entry, opts, origin, env_diff)
                return host_bound_noted(c, None, enqueue_share(result))
            c = self.against_each(device, entry, opts, origin, env_diff)
            return host_bound_noted(c, current.device_share)
        parts: dict[str, Observation] = {}
        for metric in generation_metrics(opts):
            if fresh_metrics is not None:
                samples = list(fresh_metrics.get(metric, []))
            else:
                part = Observation.part(result, metric)
                samples = list(part.samples) if part is not None else []
            parts[metric] = dataclasses.replace(current, samples=samples)
        # A generation's device time is judged beside its TTFT and TPOT, as a call's is
        # beside its latency: the quiet evidence of what the model does on the GPU.
        device = _device_parts(result, current, entry, opts.replace(metric="median"))
        if device is not None:
            parts["gpu_time"] = device["gpu_time"]
        return self.against_each(parts, entry, opts, origin, env_diff)

    def against_each(
        self,
        current: Mapping[str, Observation],
        entry: Mapping[str, Any] | None,
        opts: BenchOptions,
        origin: Origin,
        env_diff: Mapping[str, list[Any]] | None = None,
    ) -> Comparison:
        """A generation benchmark against a stored entry: each judged metric (``current``'s
        keys: TTFT, TPOT) by the same rule as a latency, at full alpha, then
        :meth:`combined`. "No regression" and "unchanged" need every metric to say so
        (intersection-union: no alpha is split for them); "either regressed" is the claim
        that needs a split, so a part's regression must survive Holm over the parts."""
        parts: dict[str, Comparison] = {}
        for metric, observation in current.items():
            part_opts = opts.replace(metric=Metric(metric))
            base = None if entry is None else Observation.part(entry, metric)
            if entry is not None and base is None:
                blank = _blank(part_opts, origin)
                parts[metric] = dataclasses.replace(
                    blank,
                    verdict=Verdict.NO_BASELINE,
                    reason=Reason.NOT_IN_BASELINE,
                    current=observation.figure(metric),
                    note=f"the baseline's entry has no {METRIC_LABELS.get(metric, metric)} "
                    "(not a generation benchmark there)",
                )
                continue
            entry_part = (
                None if base is None or entry is None else {**entry, "samples": base.samples}
            )
            parts[metric] = self.against(observation, entry_part, part_opts, origin, env_diff)
        return self.combined(_holm_parts(parts, opts.alpha), opts)

    def combined(self, parts: Mapping[str, Comparison], opts: BenchOptions) -> Comparison:
        """One verdict from a benchmark's judged parts (a generation's TTFT and TPOT, a CUDA
        benchmark's latency and device time): the worst decides, its figures head the
        record, every part is kept in ``parts``."""
        # A latency this runner cannot resolve, left undecided, heads nothing where another
        # part (the device time) decided.
        heads = [c for c in parts.values() if c.reason is not Reason.HOST_UNGATED]
        worst = min(heads or parts.values(), key=lambda c: (_RANK[c.verdict], -(c.ratio or 0.0)))
        return dataclasses.replace(worst, alpha=opts.alpha, parts=dict(parts))

    def remeasured(self, first: Comparison, last: Comparison) -> Comparison:
        """The verdict on fresh samples after a flagged first pass, which it replaces. The
        first pass only screens; the fresh samples are what is tested, and a claim must
        hold at the run's family level (core/family.py): Bonferroni over the whole
        family, which is known before any test runs (:func:`held_over`)."""
        c = dataclasses.replace(last, remeasured=True, first_pass=_summary(first))
        return held_over(c, self.family, self.policy.run_alpha, "on fresh samples ")

    def interleaved(
        self,
        look: Look,
        head: Mapping[str, Sequence[float]],
        base: Mapping[str, Sequence[float]],
        opts: BenchOptions,
        origin: Origin,
        details: Mapping[str, Any] | None = None,
        env_diff: Mapping[str, list[Any]] | None = None,
    ) -> Comparison:
        """The verdict of an interleaved run, from the plan's last look: per judged metric
        the pooled ratio and its interval (each bound at the look's alpha), and for a
        generation benchmark the worst part decides (:meth:`combined`). ``head``/``base``:
        each metric's samples per side ("median": the time per call). A/B judges the median
        latency whatever ``metric`` says, or a generation's TTFT and TPOT."""
        parts = {
            metric: _interleaved_part(look, metric, head, base, opts, origin, details, env_diff)
            for metric in look.verdicts
        }
        if len(parts) == 1 and "median" in parts:
            c = parts["median"]
            if opts.metric not in ("median",):
                note = (
                    f"A/B judges the median latency; metric={opts.metric} applies to stored "
                    "comparisons" + (f"; {c.note}" if c.note else "")
                )
                c = dataclasses.replace(c, note=note)
            return c
        return self.combined(parts, opts)

    def against_the_work(self, c: Comparison) -> Comparison:
        """An interleaved verdict that passes while the exact work counts grew, where the
        latency was left to the device time (the pairs could not resolve it on this
        runner): no pass, since nothing measured the time of the work that grew."""
        if c.verdict not in PASSES or counts_relation(c.work) != "grew":
            return c
        if not any(p.reason is Reason.HOST_UNGATED for p in (c.parts or {}).values()):
            return c
        return withheld_pass(c, Reason.WORK_GREW, None, "")

    def gpu_checked(self, c: Comparison, blocks: Mapping[str, Any]) -> Comparison:
        """An interleaved GPU verdict with the state of its blocks: withheld when too many
        of a side's blocks ran throttled or shared (:func:`gpu_withholds`)."""
        c = dataclasses.replace(c, gpu_blocks=dict(blocks))
        why = gpu_withholds(blocks, self.policy.gpu_throttle)
        if c.verdict in (Verdict.NO_BASELINE, Verdict.INCOMPARABLE):
            return c
        return _gpu_withheld(c, why)

    def settled(self, stored: Comparison, ab: Comparison, recheck: bool = False) -> Comparison:
        """A stored verdict that was not decisive (``recheck``: one that passed, after a
        misread), settled in this job by interleaving: that verdict is the verdict."""
        reason = None if recheck else stored.reason
        because = reason.value if reason is not None else stored.verdict.value
        return dataclasses.replace(
            ab, decided_by=CompareMode.AB, stored_pass=_summary(stored), settled_because=because
        )

    def stands(self, c: Comparison, d: Decision) -> Comparison:
        """A stored verdict the policy let stand (:attr:`~.policy.Step.STAND`, ``CUT``, or a
        re-measurement or settling that cannot happen): decided by the quiet evidence,
        not a pass after all (``d.withhold``), or as it is, a claim held over the run's
        family."""
        if d.evidence == "gpu_time" and d.counts is not None:
            c = by_device_time(c, d.counts, self.family)
            if c.verdict is Verdict.IMPROVEMENT:  # a claim on one pass, held as any
                c = held_over(c, self.family, self.policy.run_alpha)
            return c if d.ungated is None else ungated_part(c, d.ungated)
        if d.withhold is not None:
            return withheld_pass(c, d.withhold, d.ungated, d.reason)
        return self.unsettled(c, d.reason)

    def unsettled(self, stored: Comparison, why: str | None) -> Comparison:
        """The stored verdict stands (settling could not happen: ``why``), a claim held over
        the run's family as a fresh pass's is."""
        claims = not stored.remeasured and stored.verdict in _CLAIMS  # a fresh pass is held
        c = held_over(stored, self.family, self.policy.run_alpha) if claims else stored
        return dataclasses.replace(c, not_settled=why) if why else c

    def no_base_run(
        self, opts: BenchOptions, origin: Origin, current: float | None, error: str | None
    ) -> Comparison:
        """The base side has no such measurement: the test or call is new, or the base test
        failed before reaching it (``error``)."""
        blank = dataclasses.replace(_blank(opts, origin), metric=Metric.MEDIAN, current=current)
        if error:
            note = f"the base side's test failed before this measurement: {error}"
            return dataclasses.replace(
                blank, verdict=Verdict.NO_BASELINE, reason=Reason.BASE_ERROR, note=note
            )
        return dataclasses.replace(
            blank,
            verdict=Verdict.NO_BASELINE,
            reason=Reason.NOT_IN_BASELINE,
            note="not in the base commit",
        )


def base_code_differs(c: Comparison, differs: str) -> Comparison:
    """An interleaved verdict withheld: the base side counts other work than a stored
    baseline of its commit (``differs``), so it did not run that commit's code."""
    note = f"the base side did not run the baseline's code: {differs}"
    return dataclasses.replace(
        c, verdict=Verdict.INCONCLUSIVE, reason=Reason.BASE_CODE, note=note, parts=None
    )


#: What said the machine moved, for the drift guard's notes, by reference kind.
_BY = {"cpu": "reference probes", "gpu": "the GPU's clocks", "both": "probes and GPU clocks"}
_BY["gpu_or_cpu"] = "the GPU's clocks, else probes"


def _counted(c: Comparison, work: WorkDiff | None) -> Comparison:
    """A regression withheld for want of references (two runs compared offline) stands
    where the exact work grew past the threshold too (FLOPs, operator calls or graph nodes,
    kernels; none varying, none falling): more work is evidence no move of the machine
    makes, as a GPU's quiet evidence is. A refactor's extra Python call is not."""
    withheld = (
        c.reason is Reason.DRIFT_WITHHELD and c.details.get("withheld") == Verdict.REGRESSION.value
    )
    if not withheld or work is None or work.increase is None or work.increase < c.threshold:
        return c
    note = f"regression: the work per call grew {work.increase:+.1%} ({work.increase_measure})"
    evidence = {"part": "work", "counts": "grew"}
    return dataclasses.replace(
        c, verdict=Verdict.REGRESSION, reason=None, note=note, evidence=evidence
    )


#: How far two runs without a reference of the machine's speed can differ on identical
#: code: two plain runs minutes apart on a 2-core VM read x1.74 and x0.54 (docs/MEASURED.md).
#: A change whose whole interval lies beyond this is claimed even so.
UNREFERENCED_MOVE = 2.0


def _within_unknown_drift(c: Comparison) -> bool:
    """A verdict a machine's unknown move could have made: a change within it, or no
    change (a move could as well have hidden one)."""
    low, high = c.ci_low or 0.0, c.ci_high or math.inf
    if c.metric == "throughput":  # the latency's orientation
        low, high = 1.0 / high if high else math.inf, 1.0 / low if low else math.inf
    if c.verdict is Verdict.REGRESSION:
        return low <= UNREFERENCED_MOVE
    if c.verdict is Verdict.IMPROVEMENT:
        return high >= 1.0 / UNREFERENCED_MOVE
    return c.verdict in (Verdict.UNCHANGED, Verdict.NO_REGRESSION)


def _drift_guarded(
    c: Comparison, current: Observation, base: Observation, policy: Policy, kind: str = "cpu"
) -> Comparison:
    """Raise the bar by how much slower or faster the machine itself ran than during
    the baseline's measurement; beyond the drift limit, withhold a decided verdict (and,
    ``policy.unreferenced``, where a side has no reference to say it). ``kind``: which
    reference says how the machine moved: the CPU's probes, or the GPU's clocks while the
    samples ran (:func:`reference_kind`)."""
    factors = speed_factors(current.reference, base.reference, kind)
    if c.metric == "memory" or c.ci_low is None or c.ci_high is None:
        return c
    if factors is None:
        if not policy.unreferenced or not _within_unknown_drift(c):
            return c
        sides = [n for n, o in (("this run", current), ("the baseline's", base)) if not o.reference]
        who = f"{' and '.join(sides)} carr{'y' if len(sides) > 1 else 'ies'}" if sides else "a side"
        note = (
            f"{c.verdict} withheld, cannot tell: {who} no reference of the machine's speed (a "
            "plain run takes none; a GPU's clocks need NVML), and two runs on a machine that "
            f"may have moved between them cannot show a change within x{UNREFERENCED_MOVE:g}"
            " either way, nor its absence"
        )
        details = {**c.details, "withheld": c.verdict.value}
        return dataclasses.replace(
            c,
            verdict=Verdict.INCONCLUSIVE,
            reason=Reason.DRIFT_WITHHELD,
            note=note,
            details=details,
        )
    limit = policy.drift_limit
    slower, faster = factors
    low, high = c.ci_low, c.ci_high
    if c.metric == "throughput":  # judge on the latency orientation
        low, high = 1.0 / high, 1.0 / low
    plain = c.verdict
    guarded = _cmp.classify(low, high, c.threshold, slower, faster)
    speed = {"slower": round(slower, 4), "faster": round(faster, 4)}
    verdicts = (plain, guarded)
    # Withheld only where the machine's move could explain the verdict: a machine that ran
    # faster can only have hidden part of a slowdown, never made one.
    if Verdict.REGRESSION in verdicts and slower > 1.0 + limit:
        moved, way = slower, "slower"
    elif Verdict.IMPROVEMENT in verdicts and faster > 1.0 + limit:
        moved, way = faster, "faster"
    else:
        moved, way = 1.0, ""
    if way:
        note = (
            f"{plain} withheld by the drift guard: the machine itself ran x{moved:.2f} "
            f"{way} than during the baseline's measurement ({_BY[kind]}), beyond "
            f"infperf_expert's drift_limit={limit:g}: a stored baseline cannot be trusted now"
        )
        return dataclasses.replace(
            c,
            verdict=Verdict.INCONCLUSIVE,
            reason=Reason.DRIFT_WITHHELD,
            note=note,
            machine_speed=speed,
        )
    if guarded is not plain:
        note = (
            f"{plain} without the drift guard: the machine ran x{slower:.3f} slower / "
            f"x{faster:.3f} faster than at the baseline ({_BY[kind]}), which "
            "explains the change"
        )
        return dataclasses.replace(
            c, verdict=guarded, reason=Reason.DRIFT_EXPLAINS, note=note, machine_speed=speed
        )
    return dataclasses.replace(c, machine_speed=speed)


def _interleaved_part(
    look: Look,
    metric: str,
    head: Mapping[str, Sequence[float]],
    base: Mapping[str, Sequence[float]],
    opts: BenchOptions,
    origin: Origin,
    details: Mapping[str, Any] | None,
    env_diff: Mapping[str, list[Any]] | None,
) -> Comparison:
    """One judged metric of an interleaved run (see :meth:`Judge.interleaved`)."""
    verdict = look.verdicts[metric]
    blank = dataclasses.replace(_blank(opts, origin), metric=Metric(metric))
    current = Observation(head.get(metric, [])).figure(metric)
    baseline = Observation(base.get(metric, [])).figure(metric)
    if env_diff:
        return dataclasses.replace(
            blank,
            verdict=Verdict.INCOMPARABLE,
            reason=Reason.ENVIRONMENT,
            env_diff=dict(env_diff),
            current=current,
            baseline=baseline,
        )
    est = look.pooled[metric]
    reason, note = None, None
    if verdict is Verdict.INCONCLUSIVE:
        reason = Reason.FUTILITY if look.why == "futility" else Reason.INTERVAL_WIDE
        if metric in look.held_back:
            reason = Reason.MULTIPLICITY
            note = f"a regression by its interval, not claimed: {look.held_back[metric]}"
        elif (
            metric in look.ungated
            and look.low[metric] <= 0.0
            and est.estimate <= math.log1p(opts.threshold)
        ):
            # Ungated only where it does not read slower (as the plan stops on it): a
            # latency read +44% over its pairs is undecided, and heads the verdict.
            reason, note = Reason.HOST_UNGATED, ungated_text(look.ungated[metric])
            details = {**(details or {}), HOST_SD: round(look.ungated[metric], 5)}
    extra = {
        **(details or {}),
        "samples": [len(head.get(metric, [])), len(base.get(metric, []))],
        "tau": round(est.tau, 5),
        "tau_data": round(est.tau_data, 5),
        "p_no_slower": look.p_zero[metric],
        **look.spread_record(metric),
        "alpha_at_look": look.alpha,
        "stopped": look.why,
    }
    return dataclasses.replace(
        blank,
        verdict=verdict,
        ratio=math.exp(est.estimate),
        ci_low=math.exp(look.low[metric]),
        ci_high=math.exp(look.high[metric]),
        ci_level=1.0 - 2.0 * look.alpha,
        p_value=look.p_threshold[metric],
        n=look.k,
        n_baseline=look.k,
        unit="process pairs",
        reason=reason,
        note=note,
        current=current,
        baseline=baseline,
        decided_by=CompareMode.AB,
        process_pairs=look.k,
        detectable=_pool.detectable_effect(
            est.se, opts.threshold, opts.alpha, margin=look.margin.get(metric)
        ),
        details=extra,
    )


def _device_parts(
    result: BenchmarkResult,
    current: Observation,
    entry: Mapping[str, Any] | None,
    opts: BenchOptions,
) -> dict[str, Observation] | None:
    """A CUDA benchmark's judged parts when both sides have device time: its latency and
    its device time (``metric="gpu_time"``: the device time alone). None: judge the
    metric alone (no device time on a side, or another metric asked for)."""
    if opts.metric not in ("median", "gpu_time") or entry is None:
        return None
    now = Observation.part(result, "gpu_time")
    base = Observation.part(entry, "gpu_time")
    # Fewer calls than a rank test can decide on (a benchmark of many seconds a call)
    # would make the part inconclusive every time, and with it the verdict: not judged.
    if now is None or base is None or min(len(now.samples), len(base.samples)) < DEVICE_MIN:
        return None
    now = dataclasses.replace(now, device_share=current.device_share)
    if opts.metric == "gpu_time":
        return {"gpu_time": now}
    return {"median": current, "gpu_time": now}


def _gpu_withheld(c: Comparison, why: str | None) -> Comparison:
    """``c`` withheld for the GPU's state (``why``; None: it stands)."""
    if why is None:
        return c
    return dataclasses.replace(
        c, verdict=Verdict.INCONCLUSIVE, reason=Reason.GPU_THROTTLED, note=why
    )


#: Device-time samples (profiled calls) a side needs for the part to be judged.
DEVICE_MIN = 5


def _no_device_time(
    opts: BenchOptions,
    origin: Origin,
    result: BenchmarkResult,
    entry: Mapping[str, Any] | None,
) -> Comparison:
    """``metric="gpu_time"`` where a side has no device time to judge: said, never a
    verdict on the latency under the device time's name."""
    sides = [
        name
        for name, source in (("this run", result), ("the baseline", entry))
        if source is None or len((work_of(source) or WorkProfile()).gpu_time) < DEVICE_MIN
    ]
    return dataclasses.replace(
        _blank(opts, origin),
        verdict=Verdict.NO_BASELINE,
        reason=Reason.NO_FIGURE,
        note=f"metric=gpu_time, but {' and '.join(sides)} has no device time to judge (at "
        f"least {DEVICE_MIN} profiled CUDA calls: profile on, kernels seen by the profiler)",
    )


def no_clean_blocks(opts: BenchOptions, origin: Origin, details: Mapping[str, Any]) -> Comparison:
    """An interleaved run on a GPU whose every quad was set aside."""
    return dataclasses.replace(
        _blank(opts, origin),
        metric=Metric.MEDIAN,
        verdict=Verdict.INCONCLUSIVE,
        reason=Reason.GPU_THROTTLED,
        decided_by=CompareMode.AB,
        note="every quad of the interleaved run had a block that ran throttled or beside "
        "another process on the GPU",
        details=dict(details),
    )


#: Which verdict of a generation benchmark's parts decides (lowest first).
_RANK = {
    Verdict.REGRESSION: 0,
    Verdict.ACCEPTED: 0,
    Verdict.INCONCLUSIVE: 1,
    Verdict.INCOMPARABLE: 2,
    Verdict.NO_BASELINE: 3,
    Verdict.NO_REGRESSION: 4,
    Verdict.IMPROVEMENT: 5,
    Verdict.UNCHANGED: 6,
}


def _holm_parts(parts: Mapping[str, Comparison], alpha: float) -> dict[str, Comparison]:
    """A generation's parts with each regression kept only if it survives Holm over the
    parts (each part was judged at full alpha)."""
    p_values = {m: c.p_value for m, c in parts.items() if c.p_value is not None}
    kept = _holm_rejected(p_values, alpha)
    out = dict(parts)
    for m, c in parts.items():
        if c.verdict is Verdict.REGRESSION and m not in kept:
            note = f"a regression at alpha {alpha:g}, not after Holm over {len(parts)} metrics"
            out[m] = dataclasses.replace(
                c, verdict=Verdict.INCONCLUSIVE, reason=Reason.MULTIPLICITY, note=note
            )
    return out


def held_over(c: Comparison, family: int, level: float, on: str = "", ways: int = 1) -> Comparison:
    """A claim on stored samples held over the run's ``family`` benchmarks (a part's: and
    ``ways`` metrics) at ``level`` (run_alpha), Bonferroni, as many noisy benchmarks of
    identical code claim something: by the claim's p where the rank test gave one, else
    by its interval there (a tail's p is at least 1 / 2001)."""
    if c.parts and c.verdict in _CLAIMS:  # a withheld headline stays withheld
        parts = {m: held_over(p, family, level, on, len(c.parts)) for m, p in c.parts.items()}
        worst = min(parts.values(), key=lambda p: (_RANK[p.verdict], -(p.ratio or 0.0)))
        return dataclasses.replace(c, **{f: getattr(worst, f) for f in _HEADLINE}, parts=parts)
    n = _family.claims(family, ways)
    if (adjusted := None if c.p_value is None else min(1.0, c.p_value * n)) is not None:
        c = dataclasses.replace(c, family_size=max(1, family), holm_p=adjusted)
    faster = (c.details or {}).get("p_faster") if c.verdict is Verdict.IMPROVEMENT else None
    p = min(1.0, faster * n) if faster is not None else adjusted
    by_p = (faster is not None or c.verdict is Verdict.REGRESSION) and c.metric not in TAILS
    lo, hi = c.ci_low or 0.0, c.ci_high or 0.0
    held = (p is None or p <= level) if by_p else not (lo > 0 and hi > 0)
    if c.verdict not in _CLAIMS or held:
        return c
    if by_p:
        verdict = Verdict.INCONCLUSIVE if faster is None else Verdict.NO_REGRESSION
        why = f"Bonferroni-adjusted p {p:.2g}"
    else:
        z = NormalDist().inv_cdf(1.0 - level / n) * _pool.se_from_interval(lo, hi, c.alpha)
        low, high = (math.exp(math.log(lo * hi) / 2.0 + s * z) for s in (-1, 1))
        # Throughput: higher is better, judged as the latency it inverts.
        latency = (1 / high, 1 / low) if c.metric == "throughput" else (low, high)
        verdict, why = _cmp.classify(*latency, c.threshold), f"[{low:.3f}, {high:.3f}]"
        if verdict is c.verdict:
            return c
    of = _family.words(family, ways)
    note = f"{c.verdict.value} {on}not confirmed at {level:g} over the run's {of} ({why})"
    note += f"; {c.note}" if c.note else ""  # what it said already (a compact baseline's)
    return dataclasses.replace(c, verdict=verdict, reason=Reason.MULTIPLICITY, note=note)


_CLAIMS = {Verdict.REGRESSION, Verdict.IMPROVEMENT}
#: The verdicts that pass a test without a claim.
_PASSES = {Verdict.UNCHANGED, Verdict.NO_REGRESSION}
TAILS = ("p90", "p99")
#: What a combined comparison takes from its worst part (:meth:`Judge.combined`).
_HEADLINE: tuple[str, ...] = ("verdict", "metric", "ratio", "ci_low", "ci_high", "ci_level")
_HEADLINE += ("p_value", "current", "baseline", "n", "n_baseline", "unit", "reason", "note")
_HEADLINE += ("family_size", "holm_p")


def _detectable_stored(c: Comparison) -> float | None:
    """The stored test's detectable effect, from its rank interval (None: none)."""
    if c.ci_low is None or c.ci_high is None or c.metric in ("memory", "throughput"):
        return None
    return _pool.detectable_within(c.ci_low, c.ci_high, c.alpha, c.threshold)


def _blank(opts: BenchOptions, origin: Origin) -> Comparison:
    return Comparison(
        verdict=Verdict.INCONCLUSIVE,
        metric=opts.metric,
        threshold=opts.threshold,
        alpha=opts.alpha,
        mode=origin.mode,
        source=origin.text,
        baseline_commit=origin.commit,
        baseline_distance=origin.distance,
    )


def _from_estimate(
    base: Comparison, e: _cmp.Estimate, current: float | None, baseline: float | None
) -> Comparison:
    return dataclasses.replace(
        base,
        verdict=e.verdict,
        ratio=e.ratio,
        ci_low=e.ci_low,
        ci_high=e.ci_high,
        ci_level=e.ci_level,
        p_value=e.p_value,
        n=e.n,
        n_baseline=e.m,
        unit=e.unit,
        reason=e.reason,
        note=e.note,
        current=current,
        baseline=baseline,
        details=dict(e.details),
    )


def _summary(c: Comparison) -> Comparison:
    """A pass kept for the record: its verdict and numbers, not its own history."""
    return dataclasses.replace(c, first_pass=None, details={}, message=None)


def between_processes(c: Comparison, spread: float | _pool.Spread) -> Comparison:
    """A stored verdict on a GPU as what it is, one process pair (the baseline's run against
    this one): its interval widened from one process's own spread by how far ``spread`` says
    the figure moves between processes (a known sd, normal; or a measured
    :class:`~pytest_infperf.stats.pooled.Spread`, Student's t on its degrees of freedom;
    unmeasured: no bound at all). Its verdict and its p of "slower by at most the threshold"
    follow the widened interval: no claim and no pass on a spread the run did not measure."""
    ratio, low, high = c.ratio, c.ci_low, c.ci_high
    if ratio is None or low is None or high is None or min(ratio, low, high) <= 0:
        return c
    flip = c.metric is Metric.THROUGHPUT  # judged on the latency's orientation
    if flip:
        ratio, low, high = 1.0 / ratio, 1.0 / high, 1.0 / low
    est = math.log(ratio)
    within = _pool.se_from_interval(low, high, c.alpha)
    if isinstance(spread, _pool.Spread):
        var, df = spread.var, spread.df
    else:
        var, df = spread * spread, math.inf
    details = {
        **c.details,
        "between_processes": {
            "sd": round(math.sqrt(var), 6),
            "df": None if math.isinf(df) else round(df, 1),
        },
    }
    details.pop("p_faster", None)
    if df <= 0 or not math.isfinite(within):  # nothing measured the spread: no bound
        return dataclasses.replace(
            c,
            verdict=Verdict.INCONCLUSIVE,
            ci_low=None,
            ci_high=None,
            p_value=None,
            reason=Reason.INTERVAL_WIDE,
            details=details,
        )
    from scipy.special import stdtr, stdtrit  # noqa: PLC0415 (scipy: once judged)

    se = math.sqrt(within * within + var)
    normal = math.isinf(df)
    q = NormalDist().inv_cdf(1.0 - c.alpha) if normal else float(stdtrit(df, 1.0 - c.alpha))

    def above(z: float) -> float:  # one-sided p of a standardised distance
        return NormalDist().cdf(-z) if normal else float(stdtr(df, -z))

    limit = math.log1p(c.threshold)
    lo, hi = math.exp(est - q * se), math.exp(est + q * se)
    verdict = _cmp.classify(lo, hi, c.threshold)
    if verdict is Verdict.IMPROVEMENT:
        details["p_faster"] = above((-limit - est) / se)
    reason = c.reason if verdict is Verdict.INCONCLUSIVE else None
    if verdict is Verdict.INCONCLUSIVE and reason is None:
        reason = Reason.INTERVAL_WIDE
    if flip:
        lo, hi = 1.0 / hi, 1.0 / lo
    return dataclasses.replace(
        c,
        verdict=verdict,
        ci_low=lo,
        ci_high=hi,
        p_value=above((est - limit) / se),
        reason=reason,
        details=details,
    )


def withheld_pass(c: Comparison, why: Reason, sd: float | None, unsettled: str) -> Comparison:
    """A stored verdict that is no pass after all (the policy's ``withhold``): the exact work
    grew where nothing measured the time of it, or nothing quiet decides where the host part
    is ungated (``sd``). ``unsettled``: why it could not be settled, if it could not."""
    said = []
    if why is Reason.WORK_GREW:
        said.append(f"{c.verdict} withheld: the exact work counts grew, and no pass stands on them")
    else:
        said.append(f"{c.verdict} withheld: no device time decides")
    if sd is not None:
        said.append(ungated_text(sd))
    if unsettled:
        said.append(f"not settled: {unsettled}")
    note = "; ".join(said)
    parts = c.parts
    if parts and sd is not None:
        parts = ungated_part(dataclasses.replace(c, note=None), sd).parts
    return dataclasses.replace(
        c,
        verdict=Verdict.INCONCLUSIVE,
        reason=why if sd is None or why is Reason.WORK_GREW else Reason.HOST_UNGATED,
        note=note,
        parts=parts,
        not_settled=unsettled or c.not_settled,
        details={
            **c.details,
            "withheld": c.verdict.value,
            **({} if sd is None else {HOST_SD: round(sd, 5)}),
        },
    )
