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
import math
import statistics
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any

from . import compare as _cmp
from . import environment
from . import pooled as _pool
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

_NORMAL = NormalDist()

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
    #: The chance that a run in which nothing changed fails at all (--perf-run-alpha).
    run_alpha: float = 0.01


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


@dataclasses.dataclass(frozen=True)
class Design:
    """The interleaved protocol's constants: how many process pairs, how many quads each,
    and how alpha is spent over the looks (docs/COMPARING.md, "Interleaved verdicts")."""

    #: Process pairs at most: the first is this process and the base worker, the others
    #: pairs of worker processes started for it (reused by the session's later benchmarks).
    max_pairs: int = 4
    #: Quads a process pair runs at least (a pair's own standard error needs some), and at
    #: most; a pair also stops after ``pair_seconds`` once it has ``min_quads``.
    min_quads: int = 8
    max_quads: int = 48
    pair_seconds: float = 1.5
    #: The between-process sd assumed at least (log units): one or two pairs cannot show
    #: it. Offsets of 3-4% between two processes of identical code were measured on the
    #: 2-core VM (docs/STATISTICS, "between processes"); 1.5% keeps one pair from ruling
    #: out a regression unless its own estimate is well inside the tolerance.
    tau_floor: float = 0.015
    #: The share of alpha each look spends, for each bound (Bonferroni over the looks: the
    #: shares sum to 1, so each bound's error over the whole run stays at alpha). A look
    #: follows each process pair. Regressions and improvements are claimed only from the
    #: second look on, so what the first look spends on the lower bound is simply unused.
    shares: tuple[float, ...] = (0.4, 0.3, 0.15, 0.15)
    #: Stop for futility when the chance of reaching either decision by the last pair,
    #: if the current estimate were the truth, is under this...
    futility: float = 0.10
    #: ...from this many quads on (32 block pairs) and this many process pairs: one pair that
    #: happened to run in a noisy spell says little about the next (measured: most A/A
    #: verdicts left inconclusive had stopped for futility after one noisy pair).
    futility_quads: int = 16
    futility_pairs: int = 2


@dataclasses.dataclass(frozen=True)
class Look:
    """What the plan concluded after a process pair: stop or go on, each judged metric's
    verdict, its pooled estimate, and the alpha each bound was taken at."""

    stop: bool
    why: str
    verdicts: dict[str, Verdict]
    pooled: dict[str, _pool.Pooled]
    alpha: float
    k: int
    #: Per metric, the one-sided p of "slower by at most the threshold", and of "no slower
    #: at all" (the run-level guard's null).
    p_threshold: dict[str, float]
    p_zero: dict[str, float]
    #: Per metric, why a regression the interval showed was not claimed, if it was not.
    held_back: dict[str, str]


class PairedPlan:
    """The judge's sequential rule for one interleaved comparison. The interleaving code
    measures; it asks :meth:`more_quads` after each quad whether the current process pair
    needs more, and :meth:`look` after each pair whether to stop. Every alpha split and
    stopping decision of an interleaved comparison is made here.

    - A process pair takes quads until it has ``min_quads`` and either its own standard
      error is small next to the between-process floor (more quads would not narrow the
      pooled interval) or its time is up.
    - After pair k the pairs are pooled (random effects, :mod:`.pooled`) and each bound is
      taken at ``alpha x shares[k-1]``.
    - ``regression`` needs two process pairs or more, the lower bound above 1 + d (Holm
      over the metrics of a generation), and the run-level guard: the p of "no slower at
      all" under ``run_alpha / family`` (Bonferroni over the run's collected perf tests),
      so that a run with nothing changed fails with probability at most ``run_alpha``.
    - ``improvement`` also needs two process pairs (the same offsets fake speed-ups).
    - ``unchanged`` / ``no-regression`` may stop the first look: they need each metric's
      upper bound at most 1 + d at full alpha (intersection-union: no split).
    - Futility: when neither decision is within reach (see ``Design.futility``).
    """

    def __init__(
        self,
        threshold: float,
        alpha: float,
        metrics: tuple[str, ...],
        family: int = 1,
        run_alpha: float = 0.01,
        design: Design | None = None,
    ) -> None:
        self.threshold = threshold
        self.alpha = alpha
        self.metrics = metrics
        self.family = max(1, family)
        self.run_alpha = run_alpha
        self.design = design or Design()

    def more_quads(self, quads: Mapping[str, Sequence[float]], seconds: float) -> bool:
        """Whether the current process pair should take another quad."""
        d = self.design
        n = min(len(quads[m]) for m in self.metrics)
        if n < d.min_quads:
            return True
        if n >= d.max_quads or seconds >= d.pair_seconds:
            return False
        own = max(_pool.summarize_pair(quads[m]).se for m in self.metrics)
        return own > d.tau_floor / 2.0

    def look(self, pairs: Mapping[str, Sequence[_pool.PairSummary]]) -> Look:
        """The verdicts after ``k`` process pairs, and whether to stop there."""
        d = self.design
        k = min(len(pairs[m]) for m in self.metrics)
        share = d.shares[min(k, len(d.shares)) - 1]
        alpha = self.alpha * share
        limit = math.log1p(self.threshold)
        pooled = {m: _pool.pool(pairs[m], d.tau_floor) for m in self.metrics}
        p_threshold = {m: pooled[m].p_above(limit) for m in self.metrics}
        p_zero = {m: pooled[m].p_above(0.0) for m in self.metrics}
        claimable = _holm_rejected(p_threshold, alpha)
        verdicts: dict[str, Verdict] = {}
        held: dict[str, str] = {}
        for m in self.metrics:
            est = pooled[m]
            low, high = est.lower(alpha), est.upper(alpha)
            if low > limit:
                why = self._why_not_claimed(m, k, claimable, p_zero[m])
                if why is None:
                    verdicts[m] = Verdict.REGRESSION
                    continue
                held[m] = why
                verdicts[m] = Verdict.INCONCLUSIVE
            elif high < -limit and k >= 2:
                verdicts[m] = Verdict.IMPROVEMENT
            elif high <= limit:
                verdicts[m] = Verdict.UNCHANGED if low >= -limit else Verdict.NO_REGRESSION
            else:
                verdicts[m] = Verdict.INCONCLUSIVE
        stop, why = self._stop(k, verdicts, pooled, pairs)
        return Look(stop, why, verdicts, pooled, alpha, k, p_threshold, p_zero, held)

    def _why_not_claimed(
        self, metric: str, k: int, claimable: set[str], p_zero: float
    ) -> str | None:
        if k < 2:
            return "one process pair: a regression needs two"
        if metric not in claimable:
            return f"not after Holm over {len(self.metrics)} metrics"
        level = self.run_alpha / self.family
        if p_zero > level:
            return (
                f"the run-level guard: p {p_zero:.2g} of 'no slower at all' is above "
                f"run_alpha / {self.family} perf tests = {level:.2g}"
            )
        return None

    def _stop(
        self,
        k: int,
        verdicts: Mapping[str, Verdict],
        pooled: Mapping[str, _pool.Pooled],
        pairs: Mapping[str, Sequence[_pool.PairSummary]],
    ) -> tuple[bool, str]:
        d = self.design
        if k >= d.max_pairs:
            return True, "pairs spent"
        limit = math.log1p(self.threshold)
        regressed = any(v is Verdict.REGRESSION for v in verdicts.values())
        open_: list[str] = []
        for m, v in verdicts.items():
            if v is Verdict.INCONCLUSIVE:
                # Another metric regressed: this one still goes on, so that the message
                # says which of them regressed (the test fails either way).
                open_.append(m)
            elif not regressed and v is not Verdict.IMPROVEMENT and pooled[m].estimate < -limit:
                # It looks faster by more than the tolerance: one more pair may say so
                # (an improvement needs two), where stopping would only say "no regression".
                open_.append(m)
        if not open_:
            return True, "regression" if regressed else "decided"
        quads = min(sum(p.n for p in pairs[m]) for m in self.metrics)
        if (
            quads >= d.futility_quads
            and k >= d.futility_pairs
            and all(self._futile(pooled[m], k) for m in open_)
        ):
            return True, "futility"
        return False, "undecided"

    def _futile(self, est: _pool.Pooled, k: int) -> bool:
        """Neither decision within reach by the last pair, if the estimate were the truth:
        the standard error shrinks about as 1 / sqrt(pairs)."""
        d = self.design
        limit = math.log1p(self.threshold)
        se_end = est.se * math.sqrt(k / d.max_pairs)
        if se_end <= 0:
            return False
        z = _NORMAL.inv_cdf(1.0 - self.alpha * d.shares[-1])
        reach_regression = _NORMAL.cdf((est.estimate - limit) / se_end - z)
        reach_pass = _NORMAL.cdf((limit - est.estimate) / se_end - z)
        return max(reach_regression, reach_pass) < d.futility


def _holm_rejected(p_values: Mapping[str, float], alpha: float) -> set[str]:
    """The metrics whose p survives Holm's step-down at ``alpha``."""
    out: set[str] = set()
    ordered = sorted(p_values.items(), key=lambda kv: kv[1])
    for i, (metric, p) in enumerate(ordered):
        if p > alpha / (len(ordered) - i):
            break
        out.add(metric)
    return out


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

    ``family``: how many perf tests the run collected. A test's verdict is due when the
    test ends, before later tests' p-values exist, so the run's multiplicity is controlled
    against the whole collected family, known from the start (Bonferroni), never against a
    family that grows as the session goes (Holm over the benchmarks flagged so far is not
    valid: simulated family error 11-14% with 5 flagged).
    """

    def __init__(self, policy: Policy | None = None, family: int = 1) -> None:
        self.policy = policy or Policy()
        self.family = max(1, family)

    def plan(self, opts: Mapping[str, Any], metrics: tuple[str, ...]) -> PairedPlan:
        """The sequential rule of one interleaved comparison (see :class:`PairedPlan`)."""
        return PairedPlan(
            opts["threshold"], opts["alpha"], metrics, self.family, self.policy.run_alpha
        )

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
        c = dataclasses.replace(c, decided_by="stored", detectable=_detectable_stored(c))
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
        keys: TTFT, TPOT) by the same rule as a latency, at full alpha, then
        :meth:`combined`. "No regression" and "unchanged" need every metric to say so
        (intersection-union: no alpha is split for them); "either regressed" is the claim
        that needs a split, so a part's regression must survive Holm over the parts."""
        parts: dict[str, Comparison] = {}
        for metric, observation in current.items():
            part_opts = {**opts, "metric": metric}
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
        return self.combined(_holm_parts(parts, opts["alpha"]), opts)

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
        """The verdict on fresh samples after a flagged first pass, which it replaces. The
        first pass only screens; the fresh samples are what is tested, and a regression
        must hold at alpha / (the run's collected perf tests): Bonferroni over the whole
        family, which is known before any test runs."""
        c = dataclasses.replace(last, remeasured=True, first_pass=_summary(first))
        if c.p_value is None:
            return c
        adjusted = min(1.0, c.p_value * self.family)
        c = dataclasses.replace(c, family_size=self.family, holm_p=adjusted)
        if c.verdict is Verdict.REGRESSION and adjusted > c.alpha:
            note = (
                f"regression on fresh samples not confirmed at alpha over the run's "
                f"{self.family} perf tests (Bonferroni-adjusted p {adjusted:.2g})"
            )
            c = dataclasses.replace(
                c, verdict=Verdict.INCONCLUSIVE, reason=Reason.MULTIPLICITY, note=note
            )
        return c

    def interleaved(
        self,
        look: Look,
        head: Mapping[str, Sequence[float]],
        base: Mapping[str, Sequence[float]],
        opts: Mapping[str, Any],
        origin: Origin,
        details: Mapping[str, Any] | None = None,
        env_diff: Mapping[str, list[Any]] | None = None,
    ) -> Comparison:
        """The verdict of an interleaved run, from the plan's last look: per judged metric
        the pooled ratio and its interval (each bound at the look's alpha), and for a
        generation benchmark the worst part decides (:meth:`combined`). ``head``/``base``:
        each metric's samples per side ("median": the time per call). A/B judges the median
        latency whatever ``metric`` says, or a generation's TTFT and TPOT."""
        parts: dict[str, Comparison] = {}
        for metric, verdict in look.verdicts.items():
            blank = dataclasses.replace(_blank(opts, origin), metric=metric)
            current = Observation(head.get(metric, [])).figure(metric)
            baseline = Observation(base.get(metric, [])).figure(metric)
            if env_diff:
                parts[metric] = dataclasses.replace(
                    blank,
                    verdict=Verdict.INCOMPARABLE,
                    reason=Reason.ENVIRONMENT,
                    env_diff=dict(env_diff),
                    current=current,
                    baseline=baseline,
                )
                continue
            est = look.pooled[metric]
            reason, note = None, None
            if verdict is Verdict.INCONCLUSIVE:
                reason = Reason.FUTILITY if look.why == "futility" else Reason.INTERVAL_WIDE
                if metric in look.held_back:
                    reason = Reason.MULTIPLICITY
                    note = f"a regression by its interval, not claimed: {look.held_back[metric]}"
            extra = {
                **(details or {}),
                "samples": [len(head.get(metric, [])), len(base.get(metric, []))],
                "tau": round(est.tau, 5),
                "tau_data": round(est.tau_data, 5),
                "p_no_slower": look.p_zero[metric],
                "alpha_at_look": look.alpha,
                "stopped": look.why,
            }
            parts[metric] = dataclasses.replace(
                blank,
                verdict=verdict,
                ratio=math.exp(est.estimate),
                ci_low=math.exp(est.lower(look.alpha)),
                ci_high=math.exp(est.upper(look.alpha)),
                ci_level=1.0 - 2.0 * look.alpha,
                p_value=look.p_threshold[metric],
                n=look.k,
                n_baseline=look.k,
                unit="process pairs",
                reason=reason,
                note=note,
                current=current,
                baseline=baseline,
                decided_by="ab",
                process_pairs=look.k,
                detectable=_pool.detectable_effect(est.se, opts["threshold"], opts["alpha"]),
                details=extra,
            )
        if len(parts) == 1 and "median" in parts:
            c = parts["median"]
            if opts["metric"] not in ("median",):
                note = (
                    f"A/B judges the median latency; metric={opts['metric']} applies to stored "
                    "comparisons" + (f"; {c.note}" if c.note else "")
                )
                c = dataclasses.replace(c, note=note)
            return c
        return self.combined(parts, opts)

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
        if c.verdict is not Verdict.REGRESSION and cannot_guard(c):
            result.warnings.append(cannot_guard_warning(c))
        return failures


def cannot_guard(c: Comparison) -> bool:
    """The comparison's noise hid slowdowns of more than twice the tolerance: it would
    flag a slowdown with 80% power only from ``c.detectable`` on."""
    return c.detectable is not None and c.detectable > 2.0 * c.threshold


def cannot_guard_warning(c: Comparison) -> str:
    assert c.detectable is not None
    return (
        f"this comparison could only have caught a slowdown of {c.detectable:+.0%} or more "
        f"(80% power at this run's noise), so it cannot guard the {c.threshold:.0%} "
        "tolerance here: more sampling time (max_time), --perf-ab, or a quieter runner "
        "would help"
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


def _detectable_stored(c: Comparison) -> float | None:
    """The stored test's detectable effect, from the standard error its rank interval
    implies (latency and generation metrics; None where the test has no interval)."""
    if c.ci_low is None or c.ci_high is None or c.metric in ("memory", "throughput"):
        return None
    se = _pool.se_from_interval(c.ci_low, c.ci_high, c.alpha)
    value = _pool.detectable_effect(se, c.threshold, c.alpha)
    return value if math.isfinite(value) else None


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
    if c.reason is Reason.MULTIPLICITY and c.note:
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
        f"  ({judged} judged each; a regression of either must survive Holm over them; the "
        "worst verdict decides; its figures follow)"
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
    if c.process_pairs is not None:
        lines.append(
            f"  interleaved in this job over {c.process_pairs} head/base process pairs, "
            "pooled with a between-process variance (random effects)"
        )
    if c.remeasured and c.first_pass is not None:
        first = c.first_pass
        ratio = f"{first.ratio:.3f}" if first.ratio is not None else "-"
        confirm = "  tested on fresh samples"
        confirm += f" (first pass: ratio {ratio}, verdict {first.verdict})"
        if c.family_size is not None:
            confirm += f"; Bonferroni over the run's {c.family_size} perf test(s)"
        lines.append(confirm)
    if c.stored_pass is not None:
        first = c.stored_pass
        lines.append(
            f"  settled in this job ({fmt_why(c.settled_because)} against the stored baseline: "
            f"{first.verdict} {fmt_ratio(first)}, {first.source})"
        )
    elif c.settled_because == "machine-moved":
        lines.append(
            "  interleaved at once, with no stored pass: the session-start reference workload "
            "moved by more than half the threshold since the baseline's run"
        )
    elif c.not_settled:
        lines.append(f"  not settled in this job: {c.not_settled}")
    lines.append(f"  baseline: {c.source}")
    return "\n".join(lines)
