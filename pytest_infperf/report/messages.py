"""The words of a verdict: the failure message a reviewer reads when a benchmark regressed,
and the warnings other verdicts deserve. Pure functions of the typed records; the gate
(:mod:`pytest_infperf.session.gate`) decides which of them a test gets.
"""

from __future__ import annotations

import shlex

from ..core import family as _family
from ..core.names import CompareMode, Interleaved
from ..core.results import METRIC_LABELS, BenchmarkResult, Comparison, Reason, Verdict, WorkDiff
from ..measure import environment
from ..stats.ranks import MEMORY_FLOOR_BYTES
from .fmt import (
    fmt_bytes,
    fmt_figure,
    fmt_level,
    fmt_ratio,
    fmt_why,
    level_of,
    shown_figures,
    work_line,
)

#: What "same work, slower" can mean: the counts cannot tell these apart, and none of them
#: is more operators or FLOPs.
SAME_WORK = (
    "the same operators and FLOPs: a kernel choice, threading, memory layout or the "
    "machine made it slower, not more work"
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
    benchmark's latency and device time): one line per metric, its change and verdict."""
    lines = []
    for metric, part in (c.parts or {}).items():
        now, before = shown_figures(part)
        lines.append(
            f"  {METRIC_LABELS.get(metric, metric)}: now {fmt_figure(metric, now)}, before "
            f"{fmt_figure(metric, before)}, {fmt_change(part)}: {part.verdict}"
        )
    # A host-bound latency says what moved it and what measures the model instead.
    lines += [
        f"  {p.note}" for p in (c.parts or {}).values() if (p.note or "").startswith("host-bound")
    ]
    return lines


def fmt_change(c: Comparison) -> str:
    """``+29.8% [+27.1%, +32.5%]``: the change the ratio says, with its interval (for
    throughput, of the rate: less is slower)."""
    if c.ratio is None:
        return "no ratio"
    text = f"{c.ratio - 1:+.1%}"
    if c.ci_low is not None and c.ci_high is not None and c.ci_low != c.ci_high:
        text += f" [{c.ci_low - 1:+.1%}, {c.ci_high - 1:+.1%}]"
    return text


def label(metric: str) -> str:
    """What a metric's figure is, in words: ``median latency``, ``TTFT``, ``device time``."""
    words = {"median": "median latency", "p90": "p90 latency", "p99": "p99 latency"}
    return METRIC_LABELS.get(metric) or words.get(metric, metric)


def _headline(key: str, c: Comparison) -> str:
    """What regressed and by how much, in plain words."""
    level = fmt_level(level_of(c))
    if c.metric == "memory":
        grown = "" if c.ratio is None else f" by {c.ratio - 1:+.1%}"
        return (
            f"PERFORMANCE REGRESSION in {key}: peak memory grew{grown}, from "
            f"{fmt_bytes(c.baseline)} to {fmt_bytes(c.current)}"
        )
    if c.ratio is None or c.ci_low is None or c.ci_high is None:
        return f"PERFORMANCE REGRESSION in {key}"
    if c.metric == "throughput":  # a rate: slower is lower
        slower, low, high = 1 / c.ratio - 1, 1 / c.ci_high - 1, 1 / c.ci_low - 1
    else:
        slower, low, high = c.ratio - 1, c.ci_low - 1, c.ci_high - 1
    what = label(c.metric)
    return (
        f"PERFORMANCE REGRESSION in {key}: {slower:.1%} slower ({what}; {level} interval "
        f"{low:+.1%} to {high:+.1%}, past the {c.threshold:.0%} threshold)"
    )


def _why(c: Comparison) -> str | None:
    """The work that changed, or that it did not (None: not counted on both sides)."""
    w = c.work
    if w is None:
        return None
    if w.varying:
        return f"why: {work_line(w)}"
    if w.same:
        return f"why: same work, slower ({SAME_WORK})"
    return f"why: more work per call: {work_line(w)}"


def _accept_line(key: str, c: Comparison) -> str:
    return (
        f"accept it: a 'Perf-Accept: {key} <reason>' trailer in the change's commit message "
        f"(or --perf-accept={shlex.quote(key)})"
    )


#: What settling said when the baseline's commit has no such test or call: a command that
#: interleaves with that commit cannot reproduce anything there.
NO_SUCH_TEST = "the baseline's commit has no such test or call"


#: The metrics an interleaved run judges: a reproduce command of another (p90, memory) would
#: measure something else.
_INTERLEAVED = ("median", "ttft", "tpot", "gpu_time")


def repro_command(nodeid: str, c: Comparison) -> str | None:
    """The command that measures this benchmark again, interleaved against the baseline's
    commit on this machine (run from the rootdir); None where it could not: no commit, or
    one that lacks the test (settling found none there)."""
    sha = c.baseline_commit
    if not sha or c.not_settled == NO_SUCH_TEST or c.metric not in _INTERLEAVED:
        return None
    return f"pytest {shlex.quote(nodeid)} --perf-ab={sha[:12]}"


def _decided_line(c: Comparison) -> str:
    """How the verdict was reached, in one line."""
    if c.evidence and c.evidence.get("part") != "gpu_time":
        return (
            "decided by: the exact work counts of one call, which grew past the threshold "
            "(neither run carries a reference of the machine's speed, so the time alone is "
            f"not claimed): {c.verdict} by work counts"
        )
    if c.evidence:
        agreed = {"same": "are the same", "grew": "grew", "shrank": "fell"}
        counts = agreed.get(c.evidence.get("counts", ""), "agree")
        return (
            "decided by: the device time (the GPU's clocks held since the baseline's run) and "
            f"the exact work counts, which {counts}, without settling: {c.verdict} by device "
            "time"
        )
    pairs = f" over {c.process_pairs} process pairs" if c.process_pairs else ""
    if c.stored_pass is not None:
        first = c.stored_pass
        return (
            f"decided by: interleaving in this job{pairs}, settling the stored pass "
            f"({fmt_why(c.settled_because)}: {first.verdict} {fmt_ratio(first)})"
        )
    if c.settled_because == Interleaved.MACHINE_MOVED:
        return (
            f"decided by: interleaving in this job{pairs}, with no stored pass (the machine "
            "moved since the baseline's run)"
        )
    if c.settled_because == Interleaved.ENVIRONMENT_CHANGED:
        return (
            f"decided by: interleaving in this job{pairs}, with no stored pass (the baseline "
            "was measured in another environment)"
        )
    if c.settled_because == Interleaved.STORED_MISREAD:
        return (
            f"decided by: interleaving in this job{pairs}, with no stored pass (an earlier "
            "benchmark showed the stored pass misread this machine)"
        )
    if c.decided_by is CompareMode.AB:
        return f"decided by: interleaving in this job{pairs}"
    held = c.first_pass is not None and c.first_pass.verdict is c.verdict
    confirmed = (", confirmed" if held else ", measured again") + " on fresh samples"
    confirmed = confirmed if c.remeasured else ""
    unsettled = f" (not settled in this job: {c.not_settled})" if c.not_settled else ""
    return f"decided by: the stored baseline{confirmed}{unsettled}"


def _statistics(c: Comparison) -> list[str]:
    """The statistics behind the verdict: under -v (and always in the JSON)."""
    lines = []
    if c.p_value is not None:
        alpha = f"alpha {c.alpha:g}"
        if c.ci_level is not None and abs((1 - c.ci_level) / 2 - c.alpha) > 1e-12:
            alpha = f"alpha {(1 - c.ci_level) / 2:.3g} at this look, {c.alpha:g} overall"
        lines.append(
            f"  p = {c.p_value:.2g} for H0 'slower by at most {c.threshold:.0%}' ({alpha}); "
            f"n = {c.n} now, {c.n_baseline} in the baseline ({c.unit})"
        )
    if c.process_pairs is not None:
        lines.append(
            f"  {c.process_pairs} head/base process pairs, pooled with a between-process "
            "variance (random effects)"
        )
    if c.remeasured and c.family_size is not None:
        lines.append(f"  Bonferroni over the run's {_family.words(c.family_size)}")
    return lines


def failure_message(
    key: str, c: Comparison, nodeid: str | None = None, *, verbose: bool = False
) -> str:
    """What a reviewer reads when a benchmark regressed, first in plain words: which test
    and how much slower (its interval at the run's level), now and before, why as far as
    the work counts know, how it was decided, the command that reproduces it and how to
    accept it. The statistics behind it follow with ``verbose`` (-v); the JSON holds them
    always."""
    now, before = shown_figures(c)
    what = label(c.metric)
    lines = [
        _headline(key, c),
        f"  {what}: now {fmt_figure(c.metric, now)}, before {fmt_figure(c.metric, before)}",
    ]
    why = _why(c)
    if why:
        lines.append(f"  {why}")
    lines.append(f"  {_decided_line(c)}")
    repro = repro_command(nodeid, c) if nodeid else None
    if repro:
        lines.append(f"  reproduce (interleaved on this machine, from the rootdir): {repro}")
    lines.append(f"  {_accept_line(key, c)}")
    if c.parts:
        lines += parts_lines(c)
    if c.metric == "memory":
        lines.append(f"  (differences under {fmt_bytes(MEMORY_FLOOR_BYTES)} are ignored)")
    lines.append(f"  baseline: {c.source}")
    if verbose:
        lines += _statistics(c)
    return "\n".join(lines)


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


def base_failure(key: str, c: Comparison) -> str:
    """The base side of an interleaved run could not run the benchmark (its test failed, or
    its file could not be collected there): nothing was compared."""
    why, _, rest = (c.note or "the base side failed").partition("\n")
    return (
        f"{key}: not compared: the base side could not run it\n  why: {why}\n"
        + (f"{rest}\n" if rest.strip() else "")
        + "  fix what the base commit needs to run it, or compare with another commit"
    )


def gpu_failure(key: str, c: Comparison) -> str:
    """A GPU benchmark that ran throttled or shared, under ``infperf_expert gpu_throttle=fail``."""
    return f"{key}: {c.note or 'the GPU ran throttled or shared'}"


def accepted_line(key: str, c: Comparison) -> str:
    """An accepted regression: how much slower, and who accepted it, why."""
    by = c.accepted_by or {}
    commit = str(by.get("commit") or "")[:10]
    where = f"a Perf-Accept trailer in commit {commit}" if commit else "--perf-accept"
    return (
        f"accepted: {key} at {fmt_change(c)}, by {where} ({by.get('pattern')}): {by.get('reason')}"
    )


def warnings_of(c: Comparison) -> list[str]:
    """What a verdict that does not fail its test still says, where it changes what a
    reader should do: more work with a time that did not fail, a GPU that ran throttled or
    shared (the base side's error fails its test: :func:`base_failure`). An undecided
    verdict, and what a comparison could have caught, are the table's to show, not said
    again."""
    out: list[str] = []
    if (more := more_work_warning(c)) is not None:
        out.append(more)
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
