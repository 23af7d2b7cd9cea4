"""The judge: every verdict of every mode is made here, and nowhere else.

The stored mode, the A/B mode and ``infperf compare`` hand the judge what was measured and
what it is compared with; the judge picks the metric's test (:mod:`.compare`), applies the
session's policy (drift guard, strict environment, Holm over re-measured benchmarks) and
returns a typed :class:`~pytest_infperf.results.Comparison`. :meth:`Judge.conclude` then
says which of a result's facts fail its test (a regression, a blown budget, a baseline from
another environment under ``--perf-strict-env``), with the message a reviewer reads. A rule
added here holds in every mode.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from . import compare as _cmp
from . import environment
from .accept import AcceptRule, first_match
from .backends import runs_on_gpu
from .compact import summary_note
from .drift import speed_factors
from .fmt import fmt_bytes, fmt_figure, fmt_level, fmt_ratio, fmt_why
from .results import (
    GENERATION_METRICS,
    METRIC_LABELS,
    BenchmarkResult,
    Comparison,
    Origin,
    Reason,
    Verdict,
    memory_figure,
)

#: What the drift guard does: widen intervals by the machine's drift ("adjust"), only report
#: it ("warn"), or take no probes ("off").
DRIFT_GUARDS = ("adjust", "warn", "off")


@dataclasses.dataclass(frozen=True)
class Policy:
    """The session's rules that apply on top of the statistics."""

    drift_guard: str = "adjust"
    drift_limit: float = 0.25
    strict_env: bool = False
    #: Each ``no-baseline`` or ``incomparable`` benchmark fails (--perf-require-baseline).
    require_baseline: bool = False
    #: Regressions the change accepts (Perf-Accept trailers, --perf-accept).
    accept: tuple[AcceptRule, ...] = ()


@dataclasses.dataclass(frozen=True)
class Observation:
    """One side's measurement, as the judge needs it."""

    samples: Sequence[float]
    memory: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    batch_size: int | None = None
    env: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: Machine-speed probes taken while sampling (the drift guard), or None.
    reference: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, source: BenchmarkResult | Mapping[str, Any]) -> Observation:
        """From a result, or from a stored baseline entry (the same fields in JSON)."""
        if isinstance(source, BenchmarkResult):
            return cls(
                source.samples, source.memory, source.batch_size, source.env, source.reference
            )
        return cls(
            source["samples"],
            source.get("memory") or {},
            source.get("batch_size"),
            source.get("env") or {},
            source.get("reference"),
        )

    @classmethod
    def part(cls, source: BenchmarkResult | Mapping[str, Any], metric: str) -> Observation | None:
        """One metric of a generation benchmark (``ttft``, ``tpot``): its samples, with the
        rest of the benchmark's facts; None when ``source`` has no such figures."""
        gen = source.generation if isinstance(source, BenchmarkResult) else source.get("generation")
        samples = ((gen or {}).get(metric) or {}).get("samples")
        if not samples:
            return None
        return dataclasses.replace(cls.of(source), samples=samples)

    def figure(self, metric: str) -> float | None:
        """The metric's own figure: a percentile (s), items/s, or bytes."""
        if metric == "memory":
            return memory_figure(self.memory)
        if not self.samples:
            return None
        if metric == "throughput":
            median = statistics.median(self.samples)
            return (self.batch_size or 1) / median if median > 0 else None
        q = {"median": 50, "p90": 90, "p99": 99, "ttft": 50, "tpot": 50}[metric]
        if q == 50:
            return float(statistics.median(self.samples))
        return float(statistics.quantiles(self.samples, n=100, method="inclusive")[q - 1])


def _estimate(current: Observation, base: Observation, opts: Mapping[str, Any]) -> _cmp.Estimate:
    metric, d, alpha = opts["metric"], opts["threshold"], opts["alpha"]
    if metric in ("median", *GENERATION_METRICS):
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

    Holds the family of benchmarks flagged on a first pass, for Holm: a re-measured
    regression must survive Holm among the benchmarks flagged so far (a test's verdict is
    due when the test ends, before later tests' p-values exist).
    """

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy or Policy()
        self._flagged: list[float] = []

    # --- verdicts ---------------------------------------------------------------------
    def against(
        self,
        current: Observation,
        entry: Mapping[str, Any] | None,
        opts: Mapping[str, Any],
        origin: Origin,
        env_diff: Mapping[str, list[Any]] | None = None,
    ) -> Comparison:
        """A measurement against a stored baseline entry (``None``: the baseline has no such
        benchmark). ``env_diff``: hard environment fields that differ for the whole run."""
        metric = opts["metric"]
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
        c = dataclasses.replace(c, decided_by="stored")
        # The probes measure the CPU: they guard CPU benchmarks, not GPU ones.
        if self.policy.drift_guard == "adjust" and not runs_on_gpu(current.env):
            c = self._drift_guarded(c, current, baseline, opts)
        return c

    def stored(
        self,
        result: BenchmarkResult,
        entry: Mapping[str, Any] | None,
        opts: Mapping[str, Any],
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
        summary = None if entry is None else summary_note(dict(entry))
        if summary is None:
            return c
        # A compacted baseline (prune --keep-raw) is tested through its quantiles: say so.
        return dataclasses.replace(
            c,
            note=f"{c.note}; {summary}" if c.note else summary,
            details={**c.details, "baseline_compact": entry["compact"]},  # type: ignore[index]
        )

    def _stored(
        self,
        result: BenchmarkResult,
        entry: Mapping[str, Any] | None,
        opts: Mapping[str, Any],
        origin: Origin,
        env_diff: Mapping[str, list[Any]] | None,
        fresh: Observation | None,
        fresh_metrics: Mapping[str, list[float]] | None,
    ) -> Comparison:
        current = fresh if fresh is not None else Observation.of(result)
        if result.generation is None:
            if opts["metric"] in GENERATION_METRICS:  # a file compare's --metric: no tokens
                opts = {**opts, "metric": "median"}
            return self.against(current, entry, opts, origin, env_diff)
        parts: dict[str, Observation] = {}
        for metric in generation_metrics(opts):
            if fresh_metrics is not None:
                samples = list(fresh_metrics.get(metric, []))
            else:
                part = Observation.part(result, metric)
                samples = list(part.samples) if part is not None else []
            parts[metric] = dataclasses.replace(current, samples=samples)
        return self.against_each(parts, entry, opts, origin, env_diff)

    def against_each(
        self,
        current: Mapping[str, Observation],
        entry: Mapping[str, Any] | None,
        opts: Mapping[str, Any],
        origin: Origin,
        env_diff: Mapping[str, list[Any]] | None = None,
    ) -> Comparison:
        """A generation benchmark against a stored entry: each judged metric (``current``'s
        keys: TTFT, TPOT) by the same rule as a latency, at alpha split evenly between them
        (Bonferroni: the test's own error rate stays at alpha), then :meth:`combined`."""
        share = opts["alpha"] / max(1, len(current))
        parts: dict[str, Comparison] = {}
        for metric, observation in current.items():
            part_opts = {**opts, "metric": metric, "alpha": share}
            base = None if entry is None else Observation.part(entry, metric)
            if entry is not None and base is None:
                blank = _blank(part_opts, origin)
                parts[metric] = dataclasses.replace(
                    blank,
                    verdict=Verdict.NO_BASELINE,
                    reason=Reason.NOT_IN_BASELINE,
                    current=observation.figure(metric),
                    note=f"the baseline's entry has no {METRIC_LABELS[metric]} (not a generation "
                    "benchmark there)",
                )
                continue
            entry_part = (
                None if base is None or entry is None else {**entry, "samples": base.samples}
            )
            parts[metric] = self.against(observation, entry_part, part_opts, origin, env_diff)
        return self.combined(parts, opts)

    def combined(self, parts: Mapping[str, Comparison], opts: Mapping[str, Any]) -> Comparison:
        """One verdict from the verdicts of a generation benchmark's metrics: the worst one
        decides (a regression of either fails the test) and its figures head the record;
        every part is kept in ``parts``."""
        worst = min(parts.values(), key=lambda c: (_RANK[c.verdict], -(c.ratio or 0.0)))
        return dataclasses.replace(worst, alpha=opts["alpha"], parts=dict(parts))

    def _drift_guarded(
        self, c: Comparison, current: Observation, base: Observation, opts: Mapping[str, Any]
    ) -> Comparison:
        """Raise the bar by how much slower or faster the machine itself ran than during
        the baseline's measurement; beyond the drift limit, withhold a decided verdict."""
        factors = speed_factors(current.reference, base.reference)
        if factors is None or c.metric == "memory" or c.ci_low is None or c.ci_high is None:
            return c
        slower, faster = factors
        low, high = c.ci_low, c.ci_high
        if c.metric == "throughput":  # judge on the latency orientation
            low, high = 1.0 / high, 1.0 / low
        plain = c.verdict
        guarded = _cmp.classify(low, high, c.threshold, slower, faster)
        moved = max(slower, faster)
        limit = self.policy.drift_limit
        speed = {"slower": round(slower, 4), "faster": round(faster, 4)}
        decided = (Verdict.REGRESSION, Verdict.IMPROVEMENT)
        if moved > 1.0 + limit and (plain in decided or guarded in decided):
            way = "slower" if slower >= faster else "faster"
            note = (
                f"{plain} withheld by the drift guard: the machine itself ran x{moved:.2f} "
                f"{way} than during the baseline's measurement (reference probes), beyond "
                f"infperf_drift_limit={limit:g}: a stored baseline cannot be trusted now"
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
                f"x{faster:.3f} faster than at the baseline (reference probes), which "
                "explains the change"
            )
            return dataclasses.replace(
                c, verdict=guarded, reason=Reason.DRIFT_EXPLAINS, note=note, machine_speed=speed
            )
        return dataclasses.replace(c, machine_speed=speed)

    def remeasured(self, first: Comparison, last: Comparison) -> Comparison:
        """The verdict on fresh samples after a flagged first pass, which it replaces; a
        regression must also survive Holm over the benchmarks flagged so far."""
        c = dataclasses.replace(last, remeasured=True, first_pass=_summary(first))
        if c.p_value is None:
            return c
        self._flagged.append(c.p_value)
        adjusted = _cmp.holm(self._flagged)[-1]
        c = dataclasses.replace(c, family_size=len(self._flagged), holm_p=adjusted)
        if c.verdict is Verdict.REGRESSION and adjusted > c.alpha:
            note = (
                f"regression on fresh samples not confirmed after Holm over "
                f"{len(self._flagged)} flagged benchmarks (adjusted p {adjusted:.2g})"
            )
            c = dataclasses.replace(c, verdict=Verdict.INCONCLUSIVE, reason=Reason.HOLM, note=note)
        return c

    def paired(
        self,
        head: Sequence[float],
        base: Sequence[float],
        log_ratios: Sequence[float],
        opts: Mapping[str, Any],
        origin: Origin,
        alpha_used: float,
        details: Mapping[str, Any] | None = None,
        env_diff: Mapping[str, list[Any]] | None = None,
        metric: str = "median",
    ) -> Comparison:
        """An interleaved A/B run: the paired test on the blocks' log-ratios, at the alpha
        the sequential look spent (the interval is labelled with that level, not the
        overall alpha). A/B judges the median latency whatever ``metric`` says, or, for a
        generation benchmark, the ``metric`` (TTFT, TPOT) the ratios were taken of."""
        blank = dataclasses.replace(_blank(opts, origin), metric=metric)
        current = Observation(head).figure(metric)
        baseline = Observation(base).figure(metric)
        if env_diff:
            return dataclasses.replace(
                blank,
                verdict=Verdict.INCOMPARABLE,
                reason=Reason.ENVIRONMENT,
                env_diff=dict(env_diff),
                current=current,
                baseline=baseline,
            )
        estimate = _cmp.compare_paired(log_ratios, opts["threshold"], alpha_used)
        c = _from_estimate(blank, estimate, current, baseline)
        c = dataclasses.replace(c, decided_by="ab")
        note = c.note
        if opts["metric"] not in ("median", metric):
            note = (
                f"A/B judges the median latency; metric={opts['metric']} applies to stored "
                "comparisons" + (f"; {note}" if note else "")
            )
        extra = {"samples": [len(head), len(base)], **(details or {})}
        return dataclasses.replace(c, note=note, details={**c.details, **extra})

    def confirmed(self, first: Comparison, second: Comparison) -> Comparison:
        """An A/B regression confirmed (or not) by a second interleaved run on fresh pairs:
        the second run's verdict stands, with the first recorded."""
        return dataclasses.replace(second, remeasured=True, first_pass=_summary(first))

    def settled(self, stored: Comparison, ab: Comparison) -> Comparison:
        """A stored verdict that was not decisive, settled in this job by an interleaved
        run against the baseline commit's code: the interleaved verdict is the verdict."""
        because = stored.reason.value if stored.reason is not None else stored.verdict.value
        return dataclasses.replace(
            ab, decided_by="ab", stored_pass=_summary(stored), settled_because=because
        )

    def unsettled(self, stored: Comparison, why: str) -> Comparison:
        """The stored verdict stands, because settling could not happen (``why``)."""
        return dataclasses.replace(stored, not_settled=why)

    def no_base_run(
        self, opts: Mapping[str, Any], origin: Origin, current: float | None, error: str | None
    ) -> Comparison:
        """The base side has no such measurement: the test or call is new, or the base test
        failed before reaching it (``error``)."""
        blank = dataclasses.replace(_blank(opts, origin), metric="median", current=current)
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

    # --- consequences -----------------------------------------------------------------
    def conclude(self, result: BenchmarkResult) -> list[str]:
        """What fails ``result``'s test, as messages; sets the comparison's message, records
        the budget check and adds warnings for verdicts that deserve one."""
        failures: list[str] = []
        budget = _budget(result)
        if budget is not None:
            result.extra["budget"] = budget["record"]
            if budget["failure"]:
                failures.append(budget["failure"])
        c = result.comparison
        if c is None:
            return failures
        if c.verdict is Verdict.INCOMPARABLE and self.policy.strict_env:
            failures.append(
                f"{result.key}: the baseline ({c.source}) comes from a different environment: "
                f"{environment.describe_diff(c.env_diff or {})} (--perf-strict-env)"
            )
        elif c.verdict in (Verdict.NO_BASELINE, Verdict.INCOMPARABLE) and (
            self.policy.require_baseline
        ):
            why = fmt_why(c.reason) if c.reason else str(c.verdict)
            failures.append(
                f"{result.key}: {c.verdict} ({why}{': ' + c.note if c.note else ''}), and "
                "--perf-require-baseline asks every benchmark to be compared"
            )
        if c.verdict is Verdict.REGRESSION:
            c.message = failure_message(result.key, c)
            rule = first_match(self.policy.accept, result.key)
            if rule is None:
                failures.append(c.message)
            else:
                c.verdict = Verdict.ACCEPTED
                c.accepted_by = rule.to_json()
                result.warnings.append(
                    f"accepted regression at ratio {fmt_ratio(c)}, by {rule.where()} "
                    f"({rule.pattern}): {rule.reason}"
                )
        elif c.verdict is Verdict.INCONCLUSIVE and c.estimate_beyond:
            result.warnings.append(_inconclusive_warning(c))
        elif c.reason is Reason.BASE_ERROR and c.note:
            result.warnings.append(c.note)
        return failures


#: Which verdict of a generation benchmark's parts decides (lowest first).
_RANK = {
    Verdict.REGRESSION: 0,
    Verdict.ACCEPTED: 0,
    Verdict.INCONCLUSIVE: 1,
    Verdict.INCOMPARABLE: 2,
    Verdict.NO_BASELINE: 3,
    Verdict.IMPROVEMENT: 4,
    Verdict.UNCHANGED: 5,
}


def generation_metrics(opts: Mapping[str, Any]) -> tuple[str, ...]:
    """The metrics a generation benchmark is judged on: ``metric="ttft"`` or ``"tpot"``
    narrows it to one; otherwise both."""
    metric = opts["metric"]
    return (metric,) if metric in GENERATION_METRICS else GENERATION_METRICS


def compared_nothing(results: Sequence[BenchmarkResult]) -> bool:
    """Every compared benchmark went without a usable baseline (none stored, or only from
    another environment): a gate that compared nothing must not look green."""
    compared = [r.comparison for r in results if r.comparison is not None]
    blind = (Verdict.NO_BASELINE, Verdict.INCOMPARABLE)
    return bool(compared) and all(c.verdict in blind for c in compared)


def _blank(opts: Mapping[str, Any], origin: Origin) -> Comparison:
    return Comparison(
        verdict=Verdict.INCONCLUSIVE,
        metric=opts["metric"],
        threshold=opts["threshold"],
        alpha=opts["alpha"],
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


def _budget(result: BenchmarkResult) -> dict[str, Any] | None:
    budget_ms = result.options.get("max_median_ms")
    if budget_ms is None or not result.samples:
        return None
    ci_low_ms = result.stats["ci_low"] * 1e3
    passed = ci_low_ms <= budget_ms
    failure = None
    if not passed:
        failure = (
            f"{result.key}: median {result.stats['median'] * 1e3:.4g} ms (95% CI "
            f"{ci_low_ms:.4g}-{result.stats['ci_high'] * 1e3:.4g} ms) is over the "
            f"budget max_median_ms={budget_ms:g}"
        )
    return {"record": {"max_median_ms": budget_ms, "passed": passed}, "failure": failure}


def _inconclusive_warning(c: Comparison) -> str:
    """The true reason an estimate past the threshold did not become a verdict."""
    head = (
        f"inconclusive: the estimated ratio {c.ratio:.3f} is beyond the {c.threshold:.0%} threshold"
    )
    if c.reason in (Reason.DRIFT_WITHHELD, Reason.DRIFT_EXPLAINS, Reason.HOLM) and c.note:
        return f"{head}, but {c.note}"
    if c.reason is Reason.TOO_FEW and c.note:
        return f"{head}, but {c.note}"
    interval = ""
    if c.ci_low is not None and c.ci_high is not None:
        interval = f" [{c.ci_low:.3f}, {c.ci_high:.3f}] ({fmt_level(c.ci_level)})"
    return (
        f"{head}, but the interval{interval} is too wide to decide; more samples (max_time) or "
        "less noise would settle it"
    )


def _parts_lines(c: Comparison) -> list[str]:
    """A generation benchmark: one line per judged metric, the regressed ones marked."""
    lines = []
    for metric, part in (c.parts or {}).items():
        bound = ""
        if part.ci_low is not None and part.ci_high is not None:
            bound = f" [{part.ci_low:.3f}, {part.ci_high:.3f}] ({fmt_level(part.ci_level)})"
        ratio = "-" if part.ratio is None else f"{part.ratio:.3f}"
        lines.append(
            f"  {METRIC_LABELS.get(metric, metric)}: now {fmt_figure(metric, part.current)}, "
            f"baseline {fmt_figure(metric, part.baseline)}, ratio {ratio}{bound}: {part.verdict}"
        )
    judged = " and ".join(METRIC_LABELS.get(m, m) for m in c.parts or {})
    lines.append(
        f"  ({judged} judged each at alpha {c.alpha / max(1, len(c.parts or {})):g}; the worst "
        f"verdict decides; its figures follow)"
    )
    return lines


def failure_message(key: str, c: Comparison) -> str:
    """What a reviewer reads when a benchmark regressed: the numbers and where they come
    from, each labelled with what it is (the metric's figure, the bound's own level)."""
    metric = c.metric
    lines = [f"PERFORMANCE REGRESSION in {key}"]
    if c.parts:
        lines += _parts_lines(c)
    lines.append(
        f"  {METRIC_LABELS.get(metric, metric)}: now {fmt_figure(metric, c.current)}, "
        f"baseline {fmt_figure(metric, c.baseline)}"
    )
    level = fmt_level(c.bound_level)
    if metric == "memory" and c.ratio is None:
        lines.append(
            f"  memory grew from {fmt_bytes(c.baseline)} to {fmt_bytes(c.current)}, past the "
            f"{fmt_bytes(_cmp.MEMORY_FLOOR_BYTES)} floor"
        )
    elif metric == "memory":
        lines.append(
            f"  ratio now/baseline {c.ratio:.3f} > 1 + threshold = {1 + c.threshold:.3f} "
            f"(differences under {fmt_bytes(_cmp.MEMORY_FLOOR_BYTES)} are ignored)"
        )
    elif metric == "throughput":
        lines.append(
            f"  throughput ratio now/baseline {c.ratio:.3f}, {level} one-sided upper bound "
            f"{c.ci_high:.3f} < 1 / (1 + threshold) = {1 / (1 + c.threshold):.3f}"
        )
    else:
        lines.append(
            f"  ratio now/baseline {c.ratio:.3f}, {level} one-sided confidence bound "
            f"{c.ci_low:.3f} > 1 + threshold = {1 + c.threshold:.3f}"
        )
    if c.p_value is not None:
        alpha = f"alpha {c.alpha:g}"
        if c.ci_level is not None and abs((1 - c.ci_level) / 2 - c.alpha) > 1e-12:
            where = "for this metric" if c.parts and c.mode == "stored" else "at this look"
            alpha = f"alpha {(1 - c.ci_level) / 2:.3g} {where}, {c.alpha:g} overall"
        lines.append(
            f"  p = {c.p_value:.2g} for H0 'slower by at most {c.threshold:.0%}' ({alpha}); "
            f"n = {c.n} now, {c.n_baseline} in the baseline ({c.unit})"
        )
    if c.remeasured and c.first_pass is not None:
        first = c.first_pass
        ratio = f"{first.ratio:.3f}" if first.ratio is not None else "-"
        if c.mode == "ab":
            where = c.details.get("confirmed_in", "the same processes")
            confirm = f"  confirmed by a second interleaved run in {where}"
        else:
            confirm = "  confirmed on fresh samples"
        confirm += f" (first pass: ratio {ratio}, verdict {first.verdict})"
        if c.family_size is not None:
            confirm += f"; Holm over {c.family_size} flagged benchmark(s)"
        lines.append(confirm)
    if c.stored_pass is not None:
        first = c.stored_pass
        lines.append(
            f"  settled in this job ({fmt_why(c.settled_because)} against the stored baseline: "
            f"{first.verdict} {fmt_ratio(first)}, {first.source})"
        )
    elif c.not_settled:
        lines.append(f"  not settled in this job: {c.not_settled}")
    lines.append(f"  baseline: {c.source}")
    return "\n".join(lines)
