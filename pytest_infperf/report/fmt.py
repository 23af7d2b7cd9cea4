"""Number formatting shared by the failure message, the terminal, Markdown, HTML and the CLI.

Core layer: pure functions of numbers and typed records, so the judge can write a message
without importing any presentation module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..core.results import BenchmarkResult, Comparison

#: Metrics whose figure is a time (seconds).
TIME_METRICS = ("median", "p90", "p99")


def fmt_time(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            value = seconds / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
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


def fmt_figure(metric: str, value: float | None) -> str:
    """A metric's figure in its own unit: a time, a rate or bytes."""
    if metric == "throughput":
        return fmt_rate(value)
    if metric == "memory":
        return fmt_bytes(value)
    return fmt_time(value)


def fmt_level(level: float | None) -> str:
    """90.0% -> '90%', 97.5% -> '97.5%'."""
    if level is None:
        return "?"
    return f"{level * 100:.1f}".rstrip("0").rstrip(".") + "%"


def fmt_ratio(c: Comparison | None, *, level: bool = False) -> str:
    """``1.234 [1.10, 1.30]``, with the interval's own coverage when ``level`` is set."""
    if c is None or c.ratio is None:
        return "-"
    if c.ci_low is None or c.ci_high is None or c.ci_low == c.ci_high:
        return f"{c.ratio:.3f}"
    text = f"{c.ratio:.3f} [{c.ci_low:.3f}, {c.ci_high:.3f}]"
    if level and c.ci_level is not None:
        text += f" ({fmt_level(c.ci_level)})"
    return text


def fmt_catch(c: Comparison | None) -> str:
    """The slowdown the comparison would have caught (80% power), ``>= +7%``; a trailing
    ``!`` when that is more than twice the tolerance (it cannot guard it)."""
    if c is None or c.detectable is None:
        return "-"
    flag = " !" if c.detectable > 2.0 * c.threshold else ""
    return f">= {c.detectable:+.0%}{flag}"


def fmt_n(c: Comparison) -> str:
    """What the test counted on each side, with the unit: ``20/20 time units``."""
    if c.n is None:
        return "-"
    base = "-" if c.n_baseline is None else str(c.n_baseline)
    return f"{c.n}/{base} {c.unit or 'samples'}"


#: Why a verdict is what it is, in words (``Reason`` values, and "regression" for a
#: stored first pass that was settled because it said so).
WHY = {
    "interval-too-wide": "interval too wide",
    "too-few-samples": "too few samples",
    "no-figure": "no figure to compare",
    "drift-guard": "withheld by the drift guard",
    "drift-explains": "machine drift explains it",
    "holm": "not confirmed after Holm",
    "not-in-baseline": "not in the baseline",
    "base-error": "the base side's test failed",
    "environment-differs": "environment differs",
    "gpu-throttled": "GPU throttled or shared",
    "regression": "first-pass regression",
    "improvement": "first-pass improvement",
    "inconclusive": "first-pass undecided",
    "machine-moved": "the machine moved since the baseline's run",
    "multiplicity": "not claimed under the run's multiplicity control",
    "futility": "no decision within reach",
}


def fmt_why(reason: object) -> str:
    text = str(reason.value if hasattr(reason, "value") else reason)
    return WHY.get(text, text)


def short_name(result: BenchmarkResult | Mapping[str, Any]) -> str:
    nodeid = result.nodeid if isinstance(result, BenchmarkResult) else result["nodeid"]
    name = result.name if isinstance(result, BenchmarkResult) else result.get("name")
    path, _, rest = nodeid.partition("::")
    label = f"{path.rsplit('/', 1)[-1]}::{rest}" if rest else path
    return f"{label}#{name}" if name else label
