"""The words of a verdict: the failure message a reviewer reads when a benchmark regressed,
and the warnings other verdicts deserve. Pure functions of the typed records; the gate
(:mod:`pytest_infperf.session.gate`) decides which of them a test gets.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence

from ..core.results import METRIC_LABELS, BenchmarkResult, Comparison, Reason, Verdict, WorkDiff
from ..measure import environment
from ..stats.ranks import MEMORY_FLOOR_BYTES
from .fmt import fmt_bytes, fmt_figure, fmt_level, fmt_ratio, fmt_why, short_name, work_line

#: What "same work, slower" can mean: the counts cannot tell these apart, and none of them
#: is more operators or FLOPs.
SAME_WORK = (
    "same operators and FLOPs: a kernel choice, threading, memory layout or the machine "
    "made it slower, not more work"
)


def inconclusive_warning(c: Comparison) -> str:
    """The true reason an estimate past the threshold did not become a verdict."""
    head = (
        f"inconclusive: the estimated ratio {c.ratio:.3f} is beyond the {c.threshold:.0%} threshold"
    )
    if (
        c.reason in (Reason.DRIFT_WITHHELD, Reason.DRIFT_EXPLAINS, Reason.HOLM, Reason.BUDGET)
        and c.note
    ):
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


def work_note(c: Comparison) -> str | None:
    """What the work diff says beside a verdict (None: nothing to say): the work that
    changed, or for a slowdown past the threshold with every count equal, that it was not
    more work."""
    w = c.work
    if w is None:
        return None
    if w.varying:
        return work_line(w)
    if w.same:
        slower = c.verdict is Verdict.REGRESSION or c.estimate_beyond
        return SAME_WORK if slower else None
    return work_line(w)


def more_work_warning(c: Comparison) -> str | None:
    """Work changed, time undecided: a benchmark whose call does more work than its
    baseline's while its time verdict did not fail it. A reviewer must not miss it."""
    w = c.work
    if w is None or w.increase is None or w.increase < 5e-4:
        return None
    if c.verdict in (Verdict.REGRESSION, Verdict.ACCEPTED):
        return None
    return (
        f"does {w.increase:.1%} more work than the baseline ({w.increase_measure}; "
        f"{work_line(w)}), though its time verdict is {c.verdict}: max_work_increase gates "
        "on it"
    )


def work_unchecked(w: WorkDiff) -> str:
    """Why ``max_work_increase`` could not be checked on a work diff without an
    ``increase``: the measures it is held to varied, or were not counted on both sides."""
    held = "FLOPs, operator calls or graph nodes, kernels"
    if w.varying:
        return (
            f"the counts vary from call to call ({', '.join(w.varying)}), and no other "
            f"measure it is held to ({held}) was counted on both sides: varying counts "
            "never fail it, and none was left to check"
        )
    return (
        f"no measure it is held to ({held}) was counted on both this run and its baseline "
        "(zero on the baseline, or a side's pass counted nothing: see the JSON's work.notes)"
    )


def work_failure(key: str, c: Comparison, limit: float) -> str:
    """``max_work_increase``: more work than the limit allows, whatever the time said."""
    assert c.work is not None and c.work.increase is not None
    return (
        f"MORE WORK in {key}: {c.work.increase:+.1%} {c.work.increase_measure}, past "
        f"max_work_increase={limit:g} ({work_line(c.work)}); the time verdict was "
        f"{c.verdict} {fmt_ratio(c)}. A deliberate change is accepted with a Perf-Accept "
        "trailer"
    )


def parts_lines(c: Comparison) -> list[str]:
    """A benchmark judged on several metrics (a generation's TTFT and TPOT, a CUDA
    benchmark's latency and device time): one line per metric, the regressed ones marked."""
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
    for part in (c.parts or {}).values():
        if part.note and part.note.startswith("host-bound"):
            lines.append(f"  {part.note}")
    return lines


def repro_command(nodeid: str, c: Comparison) -> str | None:
    """The command that measures this benchmark again, interleaved against the baseline's
    commit on this machine (run from the rootdir; None: the baseline has no commit)."""
    sha = c.baseline_commit
    if not sha:
        return None
    return f"pytest {shlex.quote(nodeid)} --perf-ab={sha[:12]}"


def _decided_lines(c: Comparison) -> list[str]:
    """How the verdict was reached, when not by the stored pass alone: settled, interleaved
    at once, stood on the GPU's quiet evidence, or left unsettled and why."""
    lines: list[str] = []
    if c.stored_pass is not None:
        first = c.stored_pass
        lines.append(
            f"  settled in this job ({fmt_why(c.settled_because)} against the stored baseline: "
            f"{first.verdict} {fmt_ratio(first)}, {first.source})"
        )
    elif c.settled_because in ("machine-moved", "stored-misread"):
        lines.append(
            "  interleaved at once, with no stored pass: the session-start reference workload "
            "moved by more than half the threshold since the baseline's run"
            if c.settled_because == "machine-moved"
            else "  interleaved at once, with no stored pass: an earlier benchmark's stored "
            "pass and its interleaved run disagreed beyond both their errors"
        )
    elif c.evidence:
        agreed = {"same": "are the same", "grew": "grew", "shrank": "fell"}
        counts = agreed.get(c.evidence.get("counts", ""), "agree")
        lines.append(
            "  decided by the device time (the GPU's clocks held since the baseline's run) and "
            f"the exact work counts, which {counts}, without settling"
        )
    elif c.not_settled:
        lines.append(f"  not settled in this job: {c.not_settled}")
    return lines


def failure_message(key: str, c: Comparison, nodeid: str | None = None) -> str:
    """What a reviewer reads when a benchmark regressed: the numbers and where they come
    from, each labelled with what it is (the metric's figure, the bound's own level), and
    the command that reproduces it."""
    metric = c.metric
    lines = [f"PERFORMANCE REGRESSION in {key}"]
    if c.parts:
        lines += parts_lines(c)
    lines.append(
        f"  {METRIC_LABELS.get(metric, metric)}: now {fmt_figure(metric, c.current)}, "
        f"baseline {fmt_figure(metric, c.baseline)}"
    )
    level = fmt_level(c.bound_level)
    if metric == "memory" and c.ratio is None:
        lines.append(
            f"  memory grew from {fmt_bytes(c.baseline)} to {fmt_bytes(c.current)}, past the "
            f"{fmt_bytes(MEMORY_FLOOR_BYTES)} floor"
        )
    elif metric == "memory":
        lines.append(
            f"  ratio now/baseline {c.ratio:.3f} > 1 + threshold = {1 + c.threshold:.3f} "
            f"(differences under {fmt_bytes(MEMORY_FLOOR_BYTES)} are ignored)"
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
    lines += _decided_lines(c)
    work = work_note(c)
    if work:
        lines.append(f"  work per call: {work}")
    lines.append(f"  baseline: {c.source}")
    repro = repro_command(nodeid, c) if nodeid else None
    if repro:
        lines.append(f"  reproduce (interleaved on this machine, from the rootdir): {repro}")
    return "\n".join(lines)


#: What would let a comparison guard its tolerance (the cannot-guard warnings' advice).
GUARD_HELP = "more sampling time (max_time), --perf-ab, or a quieter runner would help"


def cannot_guard_warning(c: Comparison) -> str:
    assert c.detectable is not None
    return (
        f"this comparison could only have caught a slowdown of {c.detectable:+.0%} or more "
        f"(80% power at this run's noise), so it cannot guard the {c.threshold:.0%} "
        f"tolerance here: {GUARD_HELP}"
    )


@dataclasses.dataclass(frozen=True)
class CannotGuard:
    """The benchmarks of one tolerance whose comparison could not guard it: the warning
    each carries (``cannot_guard_warning``), said once for all of them."""

    threshold: float
    #: The smallest and largest slowdown they could have caught (80% power).
    low: float
    high: float
    #: Their short names, sorted.
    names: tuple[str, ...]

    def line(self, *, names: bool) -> str:
        """One line for the lot; ``names``: list them (else say where they are)."""
        n = len(self.names)
        low, high = f"{self.low:+.0%}", f"{self.high:+.0%}"
        span = low if low == high else f"{low} to {high}"
        caught = "slowdowns" if n != 1 else "a slowdown"
        head = (
            f"{n} benchmark{'s' * (n != 1)} could only have caught {caught} of {span} or "
            f"more (80% power at this run's noise), so {'they' if n != 1 else 'it'} cannot "
            f"guard the {self.threshold * 100:g}% tolerance here: {GUARD_HELP}"
        )
        if names:
            return f"{head}: {', '.join(self.names)}"
        return f"{head} (-v names them, as do the Markdown report and the JSON)"


def cannot_guard_groups(results: Sequence[BenchmarkResult]) -> list[CannotGuard]:
    """The results that carry the cannot-guard warning, one group per tolerance. A result
    is in when its warnings hold exactly the warning its comparison makes (the gate added
    it): the record decides, no message text is parsed."""
    by: dict[float, list[tuple[str, float]]] = {}
    for r in results:
        c = r.comparison
        if c is None or c.detectable is None or cannot_guard_warning(c) not in r.warnings:
            continue
        by.setdefault(c.threshold, []).append((short_name(r), c.detectable))
    return [
        CannotGuard(
            threshold,
            min(d for _, d in members),
            max(d for _, d in members),
            tuple(sorted(name for name, _ in members)),
        )
        for threshold, members in sorted(by.items())
    ]


def ungrouped_warnings(result: BenchmarkResult) -> list[str]:
    """A result's warnings less the one :func:`cannot_guard_groups` says for it."""
    c = result.comparison
    if c is None or c.detectable is None:
        return list(result.warnings)
    said = cannot_guard_warning(c)
    return [w for w in result.warnings if w != said]


def budget_failure(result: BenchmarkResult, budget_ms: float) -> str:
    """A benchmark whose median is surely over its ``max_median_ms`` budget."""
    return (
        f"{result.key}: median {result.stats['median'] * 1e3:.4g} ms (95% CI "
        f"{result.stats['ci_low'] * 1e3:.4g}-{result.stats['ci_high'] * 1e3:.4g} ms) is over "
        f"the budget max_median_ms={budget_ms:g}"
    )


def strict_env_failure(key: str, c: Comparison) -> str:
    return (
        f"{key}: the baseline ({c.source}) comes from a different environment: "
        f"{environment.describe_diff(c.env_diff or {})} (--perf-strict-env)"
    )


def unjudged_failure(key: str, c: Comparison) -> str:
    """``no-baseline`` or ``incomparable`` under ``--perf-require-baseline``."""
    why = fmt_why(c.reason) if c.reason else str(c.verdict)
    return (
        f"{key}: {c.verdict} ({why}{': ' + c.note if c.note else ''}), and "
        "--perf-require-baseline asks every benchmark to be compared"
    )


def gpu_failure(key: str, c: Comparison) -> str:
    """A GPU benchmark that ran throttled or shared, under ``--perf-gpu-throttle=fail``."""
    return f"{key}: {c.note or 'the GPU ran throttled or shared'}"


def accepted_warning(c: Comparison, where: str, pattern: str, reason: str) -> str:
    return f"accepted regression at ratio {fmt_ratio(c)}, by {where} ({pattern}): {reason}"


def warnings_of(c: Comparison) -> list[str]:
    """What a verdict that does not fail its test still says: an estimate past the
    threshold left inconclusive, the base side's error, a test that cannot guard the
    tolerance on this runner."""
    out: list[str] = []
    if (more := more_work_warning(c)) is not None:
        out.append(more)
    if c.verdict is Verdict.INCONCLUSIVE and c.estimate_beyond:
        out.append(inconclusive_warning(c))
    elif c.reason is Reason.BASE_ERROR and c.note:
        out.append(c.note)
    if c.reason is Reason.GPU_THROTTLED and c.note:
        out.append(c.note)
    elif (aside := gpu_set_aside(c)) is not None:
        out.append(aside)
    return out


def gpu_set_aside(c: Comparison) -> str | None:
    """How many GPU blocks an interleaved verdict left out, and why (None: none)."""
    blocks = c.gpu_blocks or {}
    aside = blocks.get("set_aside") or {}
    if not any(aside.values()):
        return None
    total = sum((blocks.get("blocks") or {}).values())
    reasons = ", ".join(f"{k} x{v}" for k, v in sorted((blocks.get("reasons") or {}).items()))
    return (
        f"{sum(aside.values())} of {total} GPU blocks set aside (whole quads with a block "
        f"that ran throttled or beside another process: {reasons}); the verdict is the "
        "other blocks'"
    )
