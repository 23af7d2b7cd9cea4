"""Number formatting shared by the failure message, the terminal, Markdown, HTML and the CLI.

Core layer: pure functions of numbers and typed records, so the judge can write a message
without importing any presentation module.
"""

from __future__ import annotations

import math
import re
import shlex
import shutil
import textwrap
from collections.abc import Mapping
from typing import Any

from ..core.names import Interleaved
from ..core.results import BenchmarkResult, Comparison, WorkDiff, WorkProfile

#: Metrics whose figure is a time (seconds).
TIME_METRICS = ("median", "p90", "p99")


def _rounded(value: float) -> float:
    """``value`` at the three significant digits it is shown with: the unit is chosen for
    what is shown (999.7 us is "1 ms", never "1000 us" or "1e+03 ns")."""
    return float(f"{value:.3g}")


def fmt_time(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    shown = _rounded(seconds)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(shown) >= scale:
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
    shown = _rounded(per_s)
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if shown >= scale:
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


def shown_figures(c: Comparison) -> tuple[float | None, float | None]:
    """(now, before) as a report shows them: the baseline's figure, and the one the ratio
    says this run's is (the ratio is an estimate over blocks or process pairs, not the
    quotient of two medians: shown side by side, the raw medians contradicted it)."""
    if c.baseline is not None and c.ratio is not None and c.metric != "memory":
        return c.baseline * c.ratio, c.baseline
    return c.current, c.baseline


def level_of(c: Comparison) -> float:
    """The confidence every report names: the run's, 1 - 2 alpha (90% at alpha 0.05).
    A stored comparison's interval is at that level; an interleaved one's bounds are taken
    at the alpha its look spent, so the intervals of all its looks hold together at it."""
    return 1.0 - 2.0 * c.alpha


def cannot_guard(c: Comparison) -> bool:
    """What the comparison could catch (80% power) is more than twice the tolerance: its
    noise, not its samples' count, keeps it from guarding the tolerance. (Any test with
    noise needs a slowdown past the tolerance to claim it; twice is where more of the
    same samples stop being the cure.)"""
    return c.detectable is not None and c.detectable > 2.0 * c.threshold


def fmt_catch(c: Comparison | None) -> str:
    """The slowdown the comparison would have caught (80% power), ``>= +7%``; a trailing
    ``!`` when it cannot guard the tolerance (:func:`cannot_guard`)."""
    if c is None or c.detectable is None:
        return "-"
    flag = " !" if cannot_guard(c) else ""
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
    "base-code-differs": "the base side did not run the baseline's code",
    "environment-differs": "environment differs",
    "gpu-throttled": "GPU throttled or shared",
    "regression": "first-pass regression",
    "improvement": "first-pass improvement",
    "inconclusive": "first-pass undecided",
    "unchanged": "re-checked, an earlier stored pass having misread the machine; first pass",
    "no-regression": "re-checked, an earlier stored pass having misread the machine; first pass",
    Interleaved.MACHINE_MOVED: "the machine moved since the baseline's run",
    Interleaved.ENVIRONMENT_CHANGED: "the baseline was measured in another environment",
    Interleaved.STORED_MISREAD: "an earlier settling showed the stored pass misread this machine",
    "multiplicity": "not claimed under the run's multiplicity control",
    "futility": "no decision within reach",
    "run-budget": "the run's time budget (--perf-budget) was spent",
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


# --- work (the profiled passes' counts) -------------------------------------------------


def fmt_count(n: float | None) -> str:
    """An operator or kernel count per call: exact where whole (``72``), else to three
    digits (a mean over calls that differed: ``72.5``); large ones in k and M."""
    if n is None or not math.isfinite(n):
        return "?"
    for unit, scale in (("M", 1e6), ("k", 1e4)):
        if abs(n) >= scale:
            return f"{n / (scale if unit == 'M' else 1e3):.4g}{unit}"
    return f"{n:.0f}" if float(n).is_integer() else f"{n:.3g}"


def fmt_flops(n: float | None) -> str:
    """``22.4 GFLOP``."""
    if n is None or not math.isfinite(n):
        return "?"
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} FLOP"


def _change(a: float | None, b: float | None) -> str:
    return f"{b / a - 1.0:+.1%}" if a and b is not None else "new" if b else "?"


def work_line(w: WorkDiff) -> str:
    """The work diff in one line: the headline figure, the operators (and kernels) whose
    counts changed, and where both sides were profiled ``full`` the operators whose time
    moved: ``FLOPs +8.3% (22.4 -> 24.3 GFLOP); aten::addmm 72 -> 78, aten::softmax 12 ->
    13; kernels 313 -> 339; time movers: aten::addmm +0.61 ms``."""
    if w.varying:
        return f"work varies from call to call ({', '.join(w.varying)}): not compared"
    bits = []
    (fa, fb), (oa, ob), (ka, kb) = w.flops, w.op_calls, w.kernels
    if fa is not None and fb is not None:
        bits.append(f"FLOPs {_change(fa, fb)} ({fmt_flops(fa)} -> {fmt_flops(fb)})")
    if oa is not None and ob is not None and (oa != ob or not bits):
        what = "graph nodes" if w.measure == "graph nodes" else "operator calls"
        bits.append(f"{what} {fmt_count(oa)} -> {fmt_count(ob)}")
    if w.ops:
        bits.append(", ".join(f"{n} {fmt_count(a)} -> {fmt_count(b)}" for n, a, b in w.ops[:4]))
    if ka is not None and kb is not None and ka != kb:
        bits.append(f"kernels {fmt_count(ka)} -> {fmt_count(kb)}")
    if w.kernel_changes:
        bits.append(
            ", ".join(
                f"{n[:40]} {fmt_count(a)} -> {fmt_count(b)}" for n, a, b in w.kernel_changes[:3]
            )
        )
    if w.time_movers:
        movers = ", ".join(
            f"{n[:40]} {'+' if d > 0 else '-'}{fmt_time(abs(d))}" for n, d in w.time_movers[:3]
        )
        bits.append(f"time movers: {movers}")
    return "; ".join(bits) if bits else "no work counted on both sides"


def work_cell(w: WorkDiff | None) -> str:
    """The work column of a table: ``+8.3% FLOPs``, ``same``, ``varies`` or ``-``."""
    if w is None:
        return "-"
    if w.varying:
        return "varies"
    if w.same:
        return "same"
    if w.change is None or w.measure is None:
        return "changed" if w.ops or w.kernel_changes else "-"
    if abs(w.change) < 5e-4:
        return f"same {w.measure}"
    return f"{w.change:+.1%} {w.measure}"


def profile_line(w: WorkProfile) -> str:
    """One benchmark's work per call: ``805 MFLOP, 561 operator calls, 9.9 MiB allocated,
    336 kernels, device 2.84 ms``, and what varied or could not be counted."""
    bits = []
    if w.flops is not None:
        bits.append(fmt_flops(w.flops))
    if w.op_calls is not None:
        what = "graph nodes" if "onnx" in w.source else "operator calls"
        bits.append(f"{fmt_count(w.op_calls)} {what}")
    if w.alloc_bytes:
        bits.append(f"{fmt_bytes(w.alloc_bytes)} allocated")
    if w.kernels is not None:
        bits.append(f"{fmt_count(w.kernels)} kernels")
    if w.gpu_time:
        ordered = sorted(w.gpu_time)
        bits.append(f"device {fmt_time(ordered[len(ordered) // 2])}")
    if w.varying:
        bits.append(f"varies from call to call: {', '.join(w.varying)}")
    bits += w.notes
    return ", ".join(bits) or "nothing counted"


#: The width printed lines fit where the terminal's is not known (CI logs).
TERMINAL_WIDTH = 120
#: What a line's command starts with: moved to a line of its own, never broken (a command
#: split over two lines does not paste).
COMMAND = re.compile(
    r"^(?P<head>.*?:) (?P<command>(?:pytest|infperf|git|pip|(?:\S*/)?python[\d.]* -m) .*)$"
)


#: What a command printed whole never holds (built by shlex, its words are quoted), and a
#: sentence that names one does: the rest of such a line wraps as prose.
PROSE_MARKS = re.compile(r"[,;] | \(|\) | [<>|] ")


def columns() -> int:
    """The width printed lines fit: the terminal's (``COLUMNS``, else the terminal's own),
    :data:`TERMINAL_WIDTH` where there is none (a CI log, a pipe), at least 60."""
    return max(60, shutil.get_terminal_size((TERMINAL_WIDTH, 24)).columns)


def fit(text: str, indent: str = "  ", width: int | None = None, first: int = 0) -> str:
    """``text`` as printed: each line wider than ``width`` (:func:`columns`) wrapped at
    spaces, continuation lines indented by the line's own indent and ``indent``; a
    command after a colon (``reproduce ...: pytest NODE --perf-ab=SHA``) goes to a line of
    its own instead, whole; words, node ids and paths are never broken. ``first``: how
    many columns something printed before the text takes on its first line (pytest's
    ``E   Error: ``). Only where a line is printed: what is stored (the JSON, an
    annotation, JUnit) keeps its lines whole."""
    width = width or columns()
    out: list[str] = []
    for n, line in enumerate(text.splitlines() or [""]):
        room = width - (first if n == 0 else 0)
        if len(line) <= room:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        command = COMMAND.match(line)
        if command is not None and not PROSE_MARKS.search(command["command"]):
            head = command["head"]
            lines = _fill(head, room, lead + indent) if len(head) > room else [head]
            out += [*lines, *_continued(command["command"], lead + indent, width)]
            continue
        out += _fill(line, room, lead + indent, width)
    return "\n".join(out)


def _continued(command: str, hang: str, width: int) -> list[str]:
    """A shell command on lines of ``width``, continued with backslashes between its words
    (it pastes into a shell as it is); a word longer than a line stays whole."""
    if len(hang) + len(command) <= width:
        return [hang + command]
    try:
        words = [shlex.quote(word) for word in shlex.split(command)]
    except ValueError:  # not a shell command after all: whole
        return [hang + command]
    lines, current = [], hang + words[0]
    for word in words[1:]:
        if len(current) + len(word) + 3 > width:
            lines.append(current + " \\")
            current = hang + "    " + word
        else:
            current += " " + word
    return [*lines, current]


def _fill(line: str, room: int, hang: str, width: int | None = None) -> list[str]:
    """``line`` wrapped: its first line to ``room`` columns, the rest to ``width``."""
    pad = (width or room) - room  # what pytest printed before the first line
    lines = textwrap.wrap(
        "\0" * pad + line,
        width=width or room,
        subsequent_indent=hang,
        break_long_words=False,
        break_on_hyphens=False,
        drop_whitespace=True,
    )
    if not lines:
        return [line]
    lines[0] = lines[0][pad:] if pad else lines[0]
    return lines


def wrap(text: str, indent: str = "    ") -> str:
    """A message as printed (a test's failure, an accepted regression): :func:`fit`, its
    lines' continuations indented under their label."""
    return fit(text, indent)
