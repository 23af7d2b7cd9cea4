"""Human-readable output: the terminal summary table and number formatting."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .results import BenchmarkResult

VERDICT_MARK = {
    "regression": "REGRESSION",
    "improvement": "improved",
    "unchanged": "ok",
    "inconclusive": "inconclusive",
    "no-baseline": "no baseline",
    "incomparable": "incomparable",
}


def fmt_time(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return (
                f"{seconds / scale:.3g} {unit}"
                if seconds / scale < 100
                else f"{seconds / scale:.0f} {unit}"
            )
    return f"{seconds / 1e-9:.3g} ns"


def fmt_bytes(n: float | None, signed: bool = False) -> str:
    if n is None:
        return "-"
    sign = "+" if signed and n > 0 else ""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{sign}{n / scale:.1f} {unit}"
    return f"{sign}{int(n)} B"


def fmt_rate(per_s: float | None) -> str:
    if per_s is None or not math.isfinite(per_s):
        return "-"
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if per_s >= scale:
            return f"{per_s / scale:.3g}{unit}/s"
    return f"{per_s:.3g}/s"


def fmt_ratio(comparison: dict[str, Any] | None) -> str:
    if not comparison or comparison.get("ratio") is None:
        return "-"
    ratio = comparison["ratio"]
    lo, hi = comparison.get("ci_low"), comparison.get("ci_high")
    if lo is None or hi is None or lo == hi:
        return f"{ratio:.3f}"
    return f"{ratio:.3f} [{lo:.3f}, {hi:.3f}]"


def short_name(result: BenchmarkResult | dict[str, Any]) -> str:
    nodeid = result.nodeid if isinstance(result, BenchmarkResult) else result["nodeid"]
    name = result.name if isinstance(result, BenchmarkResult) else result.get("name")
    path, _, rest = nodeid.partition("::")
    label = f"{path.rsplit('/', 1)[-1]}::{rest}" if rest else path
    return f"{label}#{name}" if name else label


def memory_figure(memory: dict[str, Any]) -> float | None:
    """The memory number a row shows and a memory comparison uses: CUDA peak allocated when
    the model ran on a GPU, else RSS growth over the timed region."""
    if memory.get("cuda_max_allocated_bytes") is not None:
        return float(memory["cuda_max_allocated_bytes"])
    if memory.get("rss_growth_bytes") is not None:
        return float(memory["rss_growth_bytes"])
    return None


def _table(rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(row)
        ]
        out.append("  ".join(cells).rstrip())
    return out


def summary_lines(results: Sequence[BenchmarkResult]) -> list[str]:
    """The summary table; comparison columns appear when any result was compared."""
    compared = any(r.comparison is not None for r in results)
    header = [
        "benchmark",
        "backend",
        "median",
        "p90",
        "95% CI of median",
        "CV",
        "items/s",
        "n",
        "mem",
    ]
    if compared:
        header += ["baseline", "ratio [CI]", "verdict"]
    rows = [header]
    notes: set[str] = set()
    for r in sorted(results, key=lambda r: r.key):
        s = r.stats
        p90 = fmt_time(s.get("p90"))
        if "p90" in s.get("low_sample_percentiles", []):
            p90 += "*"
            notes.add("* p90 from fewer than 64 samples (MLPerf's minimum): indicative only")
        noise = {"high": " !", "severe": " !!"}.get(s.get("noise", "ok"), "")
        if noise:
            notes.add("! IQR/median >= 10% (noisy), !! >= 25% (very noisy)")
        row = [
            short_name(r),
            r.backend,
            fmt_time(s.get("median")),
            p90,
            f"{fmt_time(s.get('ci_low'))} - {fmt_time(s.get('ci_high'))}",
            f"{s['cv']:.1%}{noise}" if s.get("cv") is not None and math.isfinite(s["cv"]) else "-",
            fmt_rate(r.throughput),
            str(s.get("n", 0)),
            fmt_bytes(memory_figure(r.memory), signed=True),
        ]
        if compared:
            c = r.comparison or {}
            row += [
                fmt_time(c.get("baseline_median")),
                fmt_ratio(c),
                VERDICT_MARK.get(str(c.get("verdict")), "-"),
            ]
        rows.append(row)
    lines = _table(rows, right={2, 3, 5, 6, 7, 8})
    lines.insert(1, "-" * max(len(line) for line in lines))
    return lines + sorted(notes)


def verdict_counts(results: Sequence[BenchmarkResult]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in results:
        if r.comparison is not None:
            v = str(r.comparison["verdict"])
            counts[v] = counts.get(v, 0) + 1
    return counts
