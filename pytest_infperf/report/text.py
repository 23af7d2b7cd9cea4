"""The terminal summary table (and the lines the terminal prints beside it)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.options import GENERATION_METRICS
from ..core.results import BenchmarkResult, memory_figure
from .fmt import (
    fmt_bytes,
    fmt_level,
    fmt_rate,
    fmt_ratio,
    fmt_time,
    fmt_why,
    profile_line,
    short_name,
)
from .messages import work_note
from .rows import generation_row, result_row


def _table(rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(row)
        ]
        out.append("  ".join(cells).rstrip())
    return out


def _noise(s: Mapping[str, Any]) -> tuple[str, str | None]:
    flag = {"high": " !", "severe": " !!"}.get(s.get("noise", "ok"), "")
    cv = s.get("cv")
    text = f"{cv:.1%}{flag}" if cv is not None and math.isfinite(cv) else "-"
    return text, "! IQR/median >= 10% (noisy), !! >= 25% (very noisy)" if flag else None


def summary_lines(results: Sequence[BenchmarkResult]) -> list[str]:
    """The summary table. Compared runs show, per benchmark, the figures the verdict was
    computed from (``now``, ``baseline``, the ratio with its interval and level, and how
    many units each side had), then the verdict by its name."""
    compared = any(r.comparison is not None for r in results)
    metrics = {r.comparison.metric for r in results if r.comparison is not None}
    label = f" ({metrics.pop()})" if len(metrics) == 1 else ""
    worked = any(r.comparison is not None and r.comparison.work for r in results)
    if compared:
        header = ["benchmark", "backend", f"now{label}", "baseline", "ratio [CI]", "n now/base"]
        header += ["verdict", "by", "catches", "CV", "items/s", "mem"]
        header += ["work"] if worked else []
        right = {2, 3, 8, 9, 10, 11}
    else:
        header = ["benchmark", "backend", "median", "p90", "95% CI of median", "CV", "items/s"]
        header += ["n", "mem"]
        right = {2, 3, 5, 6, 7, 8}
    rows = [header]
    notes: set[str] = set()
    levels: set[tuple[str, str]] = set()
    for r in sorted(results, key=lambda r: r.key):
        s = r.stats
        cv, note = _noise(s)
        if note:
            notes.add(note)
        mem = fmt_bytes(memory_figure(r.memory), signed=True)
        if compared:
            rr = result_row(short_name(r), r.backend, s.get("median"), r.comparison)
            c = rr.comparison
            if c is None:
                rows.append([rr.name, rr.backend, rr.now, "-", "-", "-"])
                rows[-1] += ["-", "-", "-", cv, fmt_rate(r.throughput), mem]
                rows[-1] += ["-"] if worked else []
                continue
            if c.ci_level is not None and c.bound_level is not None and c.ci_low != c.ci_high:
                levels.add((fmt_level(c.ci_level), fmt_level(c.bound_level)))
            cells = [rr.name, rr.backend, rr.now, rr.baseline, fmt_ratio(c), rr.n]
            cells += [c.verdict.value, rr.decided_by]
            if rr.catch != "-":
                notes.add(
                    "catches: the slowdown this comparison would have flagged with 80% power "
                    "at this run's noise (! : more than twice the threshold, it cannot guard it)"
                )
            rows.append([*cells, rr.catch, cv, fmt_rate(r.throughput), mem])
            rows[-1] += [rr.work] if worked else []
            continue
        p90 = fmt_time(s.get("p90"))
        if "p90" in s.get("low_sample_percentiles", []):
            p90 += "*"
            notes.add("* p90 from fewer than 64 samples (MLPerf's minimum): indicative only")
        ci = f"{fmt_time(s.get('ci_low'))} - {fmt_time(s.get('ci_high'))}"
        row = [short_name(r), r.backend, fmt_time(s.get("median")), p90, ci, cv]
        rows.append([*row, fmt_rate(r.throughput), str(s.get("n", 0)), mem])
    lines = _table(rows, right=right)
    lines.insert(1, "-" * max(len(line) for line in lines))
    for two, one in sorted(levels):
        notes.add(f"ratio [CI]: now/baseline, {two} interval (each bound alone {one} one-sided)")
    return lines + sorted(notes)


def generation_lines(results: Sequence[BenchmarkResult]) -> list[str]:
    """The generation benchmarks' own table: TTFT, TPOT, the ITL tail and tokens/s (medians
    over generations), and each judged metric's ratio and verdict where compared."""
    gens = [r for r in sorted(results, key=lambda r: r.key) if r.generation]
    if not gens:
        return []
    compared = any(r.comparison is not None and r.comparison.parts for r in gens)
    header = ["generation", "prompt", "new", "batch", "TTFT", "TPOT", "ITL p99", "tokens/s"]
    if compared:
        header += ["TTFT ratio", "TPOT ratio"]
    rows = [header]
    for r in gens:
        gr = generation_row(r.generation or {}, r.comparison)
        row = [short_name(r), str(gr.prompt_tokens), str(gr.new_tokens), str(gr.batch_size)]
        row += [fmt_time(gr.figures[m]) for m in GENERATION_METRICS]
        row += [fmt_time(gr.itl_p99)]
        row.append("-" if gr.tokens_per_s is None else f"{gr.tokens_per_s:.4g}/s")
        if compared:
            for part in gr.parts.values():
                row.append("-" if part is None else f"{fmt_ratio(part)} {part.verdict.value}")
        rows.append(row)
    lines = _table(rows, right={1, 2, 3, 4, 5, 6, 7})
    lines.insert(1, "-" * max(len(line) for line in lines))
    return ["", *lines]


def work_lines(results: Sequence[BenchmarkResult]) -> list[str]:
    """Per compared benchmark, what its work diff says (the work that changed, or that a
    slowdown was not more work): the table's ``work`` cell in full."""
    lines = []
    for r in sorted(results, key=lambda r: r.key):
        note = None if r.comparison is None else work_note(r.comparison)
        if note:
            lines.append(f"work per call: {short_name(r)}: {note}")
    return lines


def profile_lines(results: Sequence[BenchmarkResult]) -> list[str]:
    """Per benchmark with a profiled pass, what one call does."""
    return [
        f"work per call: {short_name(r)}: {profile_line(r.work)}"
        for r in sorted(results, key=lambda r: r.key)
        if r.work is not None
    ]


def settle_summary(results: Sequence[BenchmarkResult]) -> list[str]:
    """How many stored verdicts were settled in this job and why, and how many could not be
    (with why): one line each, none when nothing was undecided."""
    compared = [r.comparison for r in results if r.comparison is not None]
    # Settling a budget cut short (--perf-budget) counts as not settled, once.
    settled = [c for c in compared if c.settled_because and not c.not_settled]
    unsettled = [c for c in compared if c.not_settled]
    lines = []
    if settled:
        lines.append(
            f"settled in this job: {len(settled)} of {len(compared)} "
            f"({_tally(fmt_why(c.settled_because) for c in settled)})"
        )
    if unsettled:
        lines.append(
            f"not settled in this job: {len(unsettled)} "
            f"({_tally(str(c.not_settled) for c in unsettled)})"
        )
    return lines


def _tally(items: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return ", ".join(f"{n} {what}" for what, n in sorted(counts.items(), key=lambda x: -x[1]))


def verdict_counts(results: Sequence[BenchmarkResult]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in results:
        if r.comparison is not None:
            v = r.comparison.verdict.value
            counts[v] = counts.get(v, 0) + 1
    return counts


def drift_warning(drift: Mapping[str, Any] | None) -> str | None:
    """The drift guard's session-level warning, when the reference workload moved."""
    if not drift or not drift.get("drifted"):
        return None
    parts = ", ".join(
        f"{k.replace('_ratio', '')} x{v:.3f}" for k, v in drift.items() if k.endswith("_ratio")
    )
    return (
        f"environment drift: the fixed reference workload runs {parts} relative to the "
        f"baseline's run (more than {drift['limit']:.1%}): this machine is not in the state "
        "the baseline was measured in, so verdicts against the stored baseline are "
        "unreliable; --perf-ab measures both sides in one job"
    )
