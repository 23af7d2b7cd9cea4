"""What a run says besides its table: its summary line and its warnings, computed once for
the terminal, the JSON (``warnings``) and the Markdown report (hence the PR comment), so
that all three say the same.

A warning is said only where it changes what a reader should do or believe: the machine
drift warning only where a verdict rests on the stored pass alone while the machine had
moved (a verdict interleaved in this job measured both sides now, whatever the drift), and
it never suggests the mode already running. What the table shows per benchmark (an
inconclusive verdict, what each comparison could have caught) is not said again per
benchmark; what it means for the run is said once: the benchmarks this runner's noise left
ungated at the threshold, with what it could catch and what would help.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.names import CompareMode
from ..core.results import HOST_SD, BenchmarkResult, Comparison, Reason, Verdict
from ..measure import environment
from .fmt import cannot_guard, fmt_level, short_name, wrap
from .messages import accepted_line

#: The order verdicts are counted in, in every summary.
ORDER = (
    Verdict.REGRESSION,
    Verdict.ACCEPTED,
    Verdict.INCONCLUSIVE,
    Verdict.IMPROVEMENT,
    Verdict.NO_REGRESSION,
    Verdict.UNCHANGED,
    Verdict.NO_BASELINE,
    Verdict.INCOMPARABLE,
)

#: Up to this many benchmarks are named in a run-level warning; more are counted.
NAMED = 5


def counts(results: Sequence[BenchmarkResult]) -> dict[Verdict, int]:
    out: dict[Verdict, int] = {}
    for r in results:
        if r.comparison is not None:
            out[r.comparison.verdict] = out.get(r.comparison.verdict, 0) + 1
    return out


def summary(results: Sequence[BenchmarkResult]) -> str:
    """``2 benchmarks: no regressions (1 unchanged, 1 inconclusive)``."""
    n = len(results)
    head = f"{n} benchmark{'s' * (n != 1)}"
    tally = counts(results)
    if not tally:
        return head
    regressions = tally.pop(Verdict.REGRESSION, 0)
    verdict = f"{regressions} regression{'s' * (regressions != 1)}" if regressions else ""
    verdict = verdict or "no regressions"
    detail = ", ".join(f"{tally[v]} {v}" for v in ORDER if tally.get(v))
    return f"{head}: {verdict}" + (f" ({detail})" if detail else "")


def on_stored_pass(results: Sequence[BenchmarkResult]) -> list[str]:
    """The benchmarks whose verdict rests on a stored pass alone (neither settled nor
    interleaved in this job): what a machine that moved can have misled."""
    return [
        short_name(r)
        for r in sorted(results, key=lambda r: r.key)
        if r.comparison is not None
        and r.comparison.decided_by is CompareMode.STORED
        and r.comparison.verdict not in (Verdict.NO_BASELINE, Verdict.INCOMPARABLE)
    ]


#: How a run says the base side's code ran under HEAD's dependencies, its own environment
#: not built (``ab/baseenv.py``): the Markdown's callout and the PR comment look for it.
HEAD_ENVIRONMENT = "the base's code ran under HEAD's environment"


def drift_warning(
    drift: Mapping[str, Any] | None, results: Sequence[BenchmarkResult], ab: bool = False
) -> str | None:
    """The machine moved since the baseline's run, and verdicts rest on the stored pass
    alone: said, naming them (None: it did not move, or nothing rests on the stored pass)."""
    if not drift or not drift.get("drifted") or ab:
        return None
    stored = on_stored_pass(results)
    if not stored:
        return None
    parts = ", ".join(
        f"{k.replace('_ratio', '')} x{v:.3f}"
        for k, v in drift.items()
        if k.endswith("_ratio") and _sane(v)
    )
    more = len(stored) - NAMED
    shown = ", ".join(stored[:NAMED]) + (f" and {more} more" if more > 0 else "")
    n = len(stored)
    return (
        f"the machine moved since the baseline's run (reference workload {parts}), and "
        f"{n} verdict{'s rest' if n != 1 else ' rests'} on the stored pass alone: {shown}. "
        f"Interleaved with the baseline's commit (--perf-ab), {'they' if n != 1 else 'it'} "
        "would not depend on it"
    )


def no_baseline(results: Sequence[BenchmarkResult]) -> str | None:
    """The benchmarks the baseline lacks, in one line: they pass ungated."""
    lacking = [
        r
        for r in sorted(results, key=lambda r: r.key)
        if r.comparison is not None
        and r.comparison.verdict is Verdict.NO_BASELINE
        # the base's side failed: its own line says why, not "new tests"
        and r.comparison.reason is not Reason.BASE_ERROR
    ]
    if not lacking:
        return None
    names = [short_name(r) for r in lacking]
    more = len(names) - NAMED
    shown = ", ".join(names[:NAMED]) + (f" and {more} more" if more > 0 else "")
    c = lacking[0].comparison
    assert c is not None
    where = c.source or "the baseline"
    n = len(names)
    return (
        f"{n} benchmark{'s' * (n != 1)} not in {where}, so not gated: {shown} (new tests, or "
        "tests that were not committed when that baseline was saved)"
    )


#: The reasons an undecided comparison gives when its noise kept it from a decision (not
#: a multiplicity control, a drift guard or a throttled GPU, which say their own).
NOISE = (Reason.INTERVAL_WIDE, Reason.FUTILITY, Reason.BUDGET)

#: How :func:`undetectable`'s line starts: whether to act on it (not on this change: it
#: fails nothing, in a run that failed for other tests too); a split run's shards each say
#: their own, and the merge says the run's once (:func:`merged_warnings`).
UNGATED = "not a failure, but "


def undetectable(results: Sequence[BenchmarkResult]) -> str | None:
    """The benchmarks left ``inconclusive`` by their noise, which could not guard their
    tolerance (:func:`~pytest_infperf.report.fmt.cannot_guard`), in one line: that they went
    ungated, the smallest slowdown each could catch, and what would let this runner see
    the tolerance. None where every undecided comparison could have (more of the same
    samples would decide it: nothing about the runner to change)."""
    blind = [
        (r, c)
        for r in sorted(results, key=lambda r: r.key)
        if (c := r.comparison) is not None
        and c.verdict is Verdict.INCONCLUSIVE
        and c.reason in NOISE
        and cannot_guard(c)
        and math.isfinite(c.detectable or 0.0)
    ]
    if not blind:
        return None
    n = len(blind)
    tolerances = {c.threshold for _, c in blind}
    one = len(tolerances) == 1

    def caught(r: BenchmarkResult, c: Comparison) -> str:
        own = "" if one else f" (tolerance {fmt_level(c.threshold)})"
        return f"{short_name(r)}{own} >= {c.detectable or 0.0:+.0%}"

    more = n - NAMED
    shown = ", ".join(caught(r, c) for r, c in blind[:NAMED]) + (
        f" and {more} more" if more > 0 else ""
    )
    them = "them" if n != 1 else "it"
    help_ = []
    if any(_threaded_cpu(r) for r, _ in blind):
        # Multi-threaded kernels wait on each other whenever another task takes a core.
        # The count is part of the benchmark's environment: a new baseline goes with it.
        help_.append(
            "one intra-op thread where a CPU model runs on several (infperf_intra_op_threads"
            " = 1, then save a new baseline)"
        )
    help_.append("a runner with no other jobs on its CPUs")
    k = sum(c.reason is Reason.BUDGET for _, c in blind)
    if k:
        help_.append(f"a larger --perf-budget ({k} of {n} were still measuring when it ran out)")
    tolerance = f"a {fmt_level(tolerances.pop())} change" if one else "a change of its tolerance"
    return (
        f"{UNGATED}{n} benchmark{'s' * (n != 1)} went ungated: this runner's noise hides "
        f"{tolerance} in {them} (the smallest slowdown {'each' if n != 1 else 'it'} could "
        f"catch: {shown}). To gate {them}: {'; or '.join(help_)}"
    )


def host_ungated(results: Sequence[BenchmarkResult]) -> str | None:
    """The GPU benchmarks whose latency this runner's host left ungated, in one line: how
    far it moved them (as the run measured it), that the device time and the exact counts
    decided, and what would gate it. None where none was."""
    seen = []
    for r in sorted(results, key=lambda r: r.key):
        c = r.comparison
        if c is None:
            continue
        sds = [p.details.get(HOST_SD) for p in (c, *(c.parts or {}).values())]
        found = [float(sd) for sd in sds if isinstance(sd, int | float)]
        if found:
            seen.append((r, max(found)))
    if not seen:
        return None
    n, spread = len(seen), max(sd for _, sd in seen)
    more = n - NAMED
    shown = ", ".join(short_name(r) for r, _ in seen[:NAMED]) + (
        f" and {more} more" if more > 0 else ""
    )
    them = "their" if n != 1 else "its"
    return (
        f"{UNGATED}the host part of {n} GPU benchmark{'s' * (n != 1)} went ungated: this "
        f"runner moved {them} latency by up to +-{math.expm1(spread):.0%} between processes "
        "(as this run measured it), more than the process pairs can resolve the threshold "
        f"in; {them} device time and exact work counts decided ({shown}). To gate it: "
        "cuda_graph=True or torch.compile(mode='reduce-overhead'), or a runner whose host "
        "runs nothing else"
    )


def merged_warnings(warnings: Sequence[str], results: Sequence[BenchmarkResult]) -> list[str]:
    """A split run's warnings: the shards' own, less their lines of what their runner
    could not see, and that line once for the whole run."""
    out = [w for w in warnings if not w.startswith(UNGATED)]
    return out + [line for line in (undetectable(results), host_ungated(results)) if line]


def _threaded_cpu(r: BenchmarkResult) -> bool:
    """A model on the CPU whose library ran it on several intra-op threads (0: the
    library's default, one per core) and whose count the plugin can set (an ONNX Runtime
    session the test built keeps its own options)."""
    env = r.env
    cpu = env.get("device_type") == "cpu" or env.get("provider") == "CPUExecutionProvider"
    threads = environment.intra_op_threads(env)
    own_session = r.backend_info.get("source") == "session"
    return cpu and threads is not None and threads != 1 and not own_session


def accepted_lines(results: Sequence[BenchmarkResult]) -> list[str]:
    """Each accepted regression, who accepted it and why (the terminal's; the Markdown
    report has its own section)."""
    return [
        wrap(accepted_line(r.key, r.comparison))
        for r in sorted(results, key=lambda r: r.key)
        if r.comparison is not None and r.comparison.verdict is Verdict.ACCEPTED
    ]


def _sane(ratio: Any) -> bool:
    """A reference ratio worth printing: a probe that ran while the process was descheduled
    once read x312, another x91; no machine moves tenfold and still runs the suite."""
    return isinstance(ratio, int | float) and 0.1 < ratio < 10


def run_warnings(
    results: Sequence[BenchmarkResult],
    drift: Mapping[str, Any] | None,
    session: Sequence[str] = (),
    ab: bool = False,
) -> list[str]:
    """Every warning of the run, in the order every output says them: the drift warning
    where it applies, the session's own (settling that could not happen, a misread, a
    worker's notice...), then each benchmark's, named."""
    out = []
    moved = drift_warning(drift, results, ab)
    if moved:
        out.append(moved)
    out += list(dict.fromkeys(session))
    for line in (no_baseline(results), undetectable(results), host_ungated(results)):
        if line:
            out.append(line)
    for r in sorted(results, key=lambda r: r.key):
        out += [f"{short_name(r)}: {w}" for w in dict.fromkeys(r.warnings)]
    return out
