"""``infperf report``: one self-contained HTML file of plots (and the same plots as PNGs).

- distributions now vs baseline for each compared benchmark;
- the history of each benchmark along main, with detected change points marked;
- scaling curves of parametrized sweeps: latency vs sequence length and throughput vs
  batch size, per model and backend (the seed report's figures);
- the framework-tax view of batch sweeps: where latency stays flat as the batch grows
  (framework-bound: the time is Python and dispatch, not compute) and where it grows
  (compute-bound), with ``host_bound_ratio`` where the backend recorded it.

matplotlib (extra ``report``) is imported here only; the Agg backend needs no display.
"""

from __future__ import annotations

import dataclasses
import html
import io
import itertools
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.record import interleaved, numbers
from ..core.results import Comparison, Verdict
from ..measure.backends import MissingBackendError
from ..stats.changepoint import ChangePoint
from ..store.baselines import iter_entries
from ..store.history import Point, Series, bisect_command
from .fmt import fmt_ratio, fmt_time
from .plotdata import (
    BATCH_KEYS,
    RATE_UNITS,
    SEQ_KEYS,
    TIME_UNITS,
    Violin,
    generation_groups,
    param,
    sweep_groups,
    tax_regime,
    tick_labels,
    violin,
    violin_range,
)
from .rows import generation_row, result_row


def _plt() -> Any:
    try:
        import matplotlib  # noqa: PLC0415 (matplotlib: only when a report is drawn)
    except ImportError:
        raise MissingBackendError(
            "matplotlib is not installed, and the HTML report needs it. Install it with: "
            "pip install 'pytest-infperf[report]'"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 (matplotlib: only when a report is drawn)

    return plt


@dataclasses.dataclass(frozen=True)
class Plot:
    """One figure: inline SVG for the HTML (hover a point for its details), PNG for --png."""

    svg: str
    png: bytes


def _render(fig: Any, tips: dict[str, str], png: bool, tight: bool = True) -> Plot:
    """``tips`` maps an artist's gid to the text a reader sees on hovering it: the SVG
    gets a ``<title>`` inside that artist's group, which browsers show as a tooltip (no
    script, so the report opens offline and anywhere). ``tight=False``: the figure's own
    margins (a tight bounding box measures every label: most of a small figure's cost).
    ``png``: also render a PNG (only when the report writes PNGs: one costs as much as the
    SVG)."""
    import matplotlib  # noqa: PLC0415 (matplotlib: only when a report is drawn)

    buf = io.StringIO()
    bbox = "tight" if tight else None
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "infperf"}):
        fig.savefig(buf, format="svg", bbox_inches=bbox)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]  # drop the XML prolog and doctype: it is inline
    for gid, tip in tips.items():
        opening = re.search(rf'<g id="{re.escape(gid)}"[^>]*>', svg)
        if opening is not None:
            title = f"<title>{html.escape(tip)}</title>"
            svg = svg[: opening.end()] + title + svg[opening.end() :]
    image = io.BytesIO()
    if png:
        fig.savefig(image, format="png", dpi=110, bbox_inches=bbox)
    _plt().close(fig)
    return Plot(svg, image.getvalue())


def _label(key: str) -> str:
    path, _, rest = key.partition("::")
    return f"{path.rsplit('/', 1)[-1]}::{rest}" if rest else path


# --- figures -----------------------------------------------------------------------------


def distribution_figure(
    key: str,
    now: list[float],
    base: list[float],
    comparison: dict[str, Any] | None,
    base_commit: str | None = None,
    png: bool = False,
    interleaved: bool = False,
) -> Plot:
    """Now vs baseline as two violins on one axis (``interleaved``: both drawn from the
    interleaved run the verdict came from). The axis is shared because the figure
    exists to compare where the two sit (an axis each would make any two shapes look
    alike). It stops at each side's body (Tukey's far fences, plotdata.violin_range): a few
    stalls of one side stretched it until the other's body was a hairline. What it cuts is
    said, not hidden: a note at the edge and the tooltip give how many samples lie past it
    and the farthest, and the medians are of all samples. Each violin is scaled to its own
    peak: the sides hold different numbers of samples, so a shared density scale would
    compare counts, not shapes."""
    import numpy as np  # noqa: PLC0415 (numpy: this module is imported at start-up)

    plt = _plt()
    fig, ax = plt.subplots(figsize=(4.8, 2.6), layout="constrained")
    data = [np.asarray(base, dtype=float), np.asarray(now, dtype=float)]
    lo, hi = violin_range(data)
    tips = {}
    sides = zip(("#7f8c8d", "#c0392b"), ("baseline", "now"), data, strict=True)
    for pos, (color, name, d) in enumerate(sides, start=1):
        v = violin(d, lo, hi)
        half = 0.4 * v.density
        shape = ax.fill_between(v.coords, pos - half, pos + half, color=color, alpha=0.55)
        shape.set_gid(f"violin-{name}")
        median = float(np.median(d))
        ax.plot([median, median], [pos - 0.3, pos + 0.3], color=color, linewidth=2)
        tip = f"{name}: median {fmt_time(median)}, {len(d)} samples"
        if name == "baseline" and base_commit:
            tip += f", commit {base_commit[:10]}"
        if v.tail_note():
            tip += f"\n{v.tail_note()}"
            _tail_marks(ax, v, pos, color)
        if name == "now" and comparison and comparison.get("ratio"):
            tip += f"\n{comparison['verdict']}: ratio {comparison['ratio']:.3f}"
            if comparison.get("ci_low") is not None and comparison.get("ci_high") is not None:
                tip += f" [{comparison['ci_low']:.3f}, {comparison['ci_high']:.3f}]"
        tips[f"violin-{name}"] = tip
    ax.set_yticks([1, 2], labels=["baseline", "now"])
    ax.set_ylim(0.45, 2.8)  # room above each violin for its tail note
    ax.set_xlim(lo, hi)
    _unit_axis(ax.xaxis)
    ax.set_xlabel("latency per call (each violin scaled to its own peak)", fontsize=8)
    title = _label(key)
    if comparison and comparison.get("ratio"):
        title += f"\n{comparison['verdict']}: ratio {comparison['ratio']:.3f}"
        if interleaved:
            title += " (the interleaved run's samples, both sides measured now)"
        elif comparison.get("decided_by") == "ab":
            title += " (decided by the interleaved run, not these samples)"
    ax.set_title(title, fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return _render(fig, tips, png)


def _tail_marks(ax: Any, v: Violin, pos: int, color: str) -> None:
    """A triangle where a violin runs past the axis, and above it how many and how far."""
    ends = ((v.below, 0.0, "<", "left", v.lowest), (v.above, 1.0, ">", "right", v.highest))
    for count, x, marker, ha, farthest in ends:
        if count:
            edge = ax.get_yaxis_transform()  # x in axes fractions, y in data
            ax.plot([x], [pos], marker, color=color, transform=edge, clip_on=False, ms=5)
            note = f"{100 * count / v.n:.2g}% off the axis, to {fmt_time(farthest)}"
            inset = 0.01 if x == 0 else 0.99
            ax.text(inset, pos + 0.42, note, transform=edge, ha=ha, fontsize=7, color=color)


def _unit_axis(axis: Any, units: Sequence[tuple[str, float]] = TIME_UNITS, sep: str = " ") -> None:
    """Tick labels of an axis in one unit chosen for it, ``32.5 us`` (plotdata.tick_labels:
    the units of fmt_time, or of fmt_rate), not ``0.0325 ms``. The data are in seconds (or
    items per second)."""
    from matplotlib.ticker import Formatter  # noqa: PLC0415 (matplotlib: when drawn)

    class UnitFormatter(Formatter):
        def format_ticks(self, values: Sequence[float]) -> list[str]:
            view = tuple(axis.get_view_interval())
            return tick_labels(list(values), units, (view[0], view[1]), sep)

        def __call__(self, x: float, pos: int | None = None) -> str:
            return tick_labels([x], units, None, sep)[0]  # the cursor's readout

    axis.set_major_formatter(UnitFormatter())


#: Points of a history that get a tooltip each (an artist each): the newest ones and the
#: change points. A year of commits as one artist per point made a figure take seconds.
TIPPED_POINTS = 150
#: Points drawn of a longer history (every k-th), besides the tipped ones.
DRAWN_POINTS = 600


def history_figure(series: Series, png: bool = False) -> Plot:
    plt = _plt()
    # Fixed margins, no layout engine: a report draws one of these per benchmark.
    fig, ax = plt.subplots(figsize=(6.4, 2.8))
    fig.subplots_adjust(left=0.16, right=0.98, bottom=0.2, top=0.9)
    xs = list(range(len(series.points)))
    med = [p.median for p in series.points]
    lo = [p.ci_low or p.median for p in series.points]
    hi = [p.ci_high or p.median for p in series.points]
    tipped = set(range(max(0, len(xs) - TIPPED_POINTS), len(xs)))
    tipped |= {c.index for c in series.changes} | {c.index - 1 for c in series.changes}
    # A year of commits is more points than the figure has pixels: the line, band and
    # untipped markers use every k-th point (the tipped ones are all drawn).
    step_k = max(1, len(xs) // DRAWN_POINTS)
    drawn = sorted(set(xs[::step_k]) | tipped)
    ax.fill_between(
        drawn,
        [lo[x] for x in drawn],
        [hi[x] for x in drawn],
        color="#2980b9",
        alpha=0.2,
        linewidth=0,
    )
    ax.plot(drawn, [med[x] for x in drawn], color="#2980b9", linewidth=1)
    rest = [x for x in xs[::step_k] if x not in tipped]
    if rest:
        ax.plot(rest, [med[x] for x in rest], "o", markersize=2, color="#2980b9")
    tips = {}
    for x, p in enumerate(series.points):
        if x not in tipped:
            continue
        # One artist per point, so each has its own tooltip.
        gid = f"point-{x}"
        ax.plot([x], [p.median], "o", markersize=4, color="#2980b9", gid=gid)
        tip = f"{p.sha[:10]} {p.subject or ''}".strip()
        tip += f"\nmedian {fmt_time(p.median)}"
        if p.ci_low is not None and p.ci_high is not None:
            tip += f", CI [{fmt_time(p.ci_low)}, {fmt_time(p.ci_high)}]"
        tips[gid] = tip + f", n={p.n}"
    for change in series.changes:
        ax.axvline(change.index - 0.5, color="#c0392b", linestyle="--", linewidth=1)
        sha = series.points[change.index].sha[:8]
        ax.annotate(
            f"{change.ratio - 1:+.1%} at {sha}",
            (change.index - 0.5, max(med)),
            fontsize=8,
            color="#c0392b",
            ha="left",
            va="top",
        )
    # A few readable, level labels (hover a point for its commit and subject).
    step = max(1, math.ceil(len(xs) / 6))
    ax.set_xticks(xs[::step], labels=[p.sha[:7] for p in series.points][::step], fontsize=8)
    ax.set_xlabel("commit (oldest left)", fontsize=8)
    ax.set_ylabel("median")
    _unit_axis(ax.yaxis)
    ax.set_title(_label(series.key), fontsize=8)
    ax.grid(alpha=0.3)
    return _render(fig, tips, png, tight=False)


#: The series of a figure: shades of blue, so that orange and green mean only the regimes
#: of the framework tax (one colour language across the report).
def _series_colors(n: int) -> list[Any]:
    cmap = _plt().get_cmap("Blues")
    return [cmap(0.45 + 0.5 * i / max(1, n - 1)) for i in range(n)]


REGIME_COLORS = {"framework-bound": "#e67e22", "compute-bound": "#27ae60"}


def _throughput_panel(
    ax2: Any, by_seq: dict[Any, list[tuple[float, float, dict[str, Any]]]], tips: dict[str, str]
) -> None:
    """Throughput against batch size per sequence length, the framework-tax regimes shaded
    and the host-bound ratio written beside each point; hover texts go into ``tips``."""
    # Each step shaded once: lines sharing a step and a regime would stack their shades.
    shaded: set[tuple[float, float, str]] = set()
    series3 = sorted(by_seq.items(), key=lambda kv: float(kv[0] or 0))
    for (seq, pts3), color in zip(series3, _series_colors(len(series3)), strict=True):
        pts3.sort(key=lambda p: p[0])
        ax2.plot(
            [p[0] for p in pts3],
            [p[1] for p in pts3],
            marker="o",
            color=color,
            label=f"seq {seq}" if seq is not None else "throughput",
        )
        for (b0, _, e0), (b1, _, e1) in itertools.pairwise(pts3):
            regime = tax_regime(b0, e0["stats"]["median"], b1, e1["stats"]["median"])
            if regime in REGIME_COLORS and (b0, b1, regime) not in shaded:
                ax2.axvspan(b0, b1, color=REGIME_COLORS[regime], alpha=0.08)
                shaded.add((b0, b1, regime))
        for b, tp, e in pts3:
            ratio = (e.get("extra") or {}).get("host_bound_ratio")
            if ratio is not None:
                ax2.annotate(f"host {ratio:.2f}", (b, tp), fontsize=6)
            gid = f"sweep-{len(tips)}"
            ax2.plot([b], [tp], "o", markersize=6, alpha=0, gid=gid)  # the hover target
            tips[gid] = (
                f"{_label(e['nodeid'])}\nmedian {fmt_time(e['stats']['median'])}, "
                f"{tp:,.0f} items/s" + (f", host-bound ratio {ratio:.2f}" if ratio else "")
            )
    _batch_axis(ax2, [p[0] for pts in by_seq.values() for p in pts])
    regimes = " (shaded orange: framework-bound, green: compute-bound)" if shaded else ""
    ax2.set_xlabel(f"batch size{regimes}")
    ax2.set_ylabel("throughput (items/s)")
    _unit_axis(ax2.yaxis, RATE_UNITS, sep="")
    ax2.set_title("throughput vs batch size", fontsize=8)
    if len(series3) > 1:
        ax2.legend(fontsize=6)
    ax2.grid(alpha=0.3)


def _batch_axis(ax: Any, batches: Iterable[float]) -> None:
    """A log2 batch axis ticked at the sizes measured, written plainly: 1, 8, 64, not
    2^0, 2^3, 2^6 at sizes that were never run."""
    ax.set_xscale("log", base=2)
    ticks = sorted(set(batches))
    ax.set_xticks(ticks, labels=[f"{b:g}" for b in ticks])
    ax.minorticks_off()


def scaling_figure(label: str, entries: list[dict[str, Any]], png: bool = False) -> Plot:
    """Latency against sequence length (or batch size), and throughput against batch size
    with the framework-tax regimes shaded: each panel only where its axis varies (a sweep
    of sequence lengths at batch 1 has no throughput-vs-batch story to tell)."""
    by_batch: dict[Any, list[tuple[float, float]]] = defaultdict(list)
    by_seq: dict[Any, list[tuple[float, float, dict[str, Any]]]] = defaultdict(list)
    for e in entries:
        batch = param(e, BATCH_KEYS) or e.get("batch_size") or 1
        seq = param(e, SEQ_KEYS)
        median = e["stats"]["median"]
        if seq is not None:
            by_batch[batch].append((float(seq), median))
        throughput = e.get("throughput") or float(batch) / median
        by_seq[seq].append((float(batch), throughput, e))
    seqs_vary = any(len({p[0] for p in pts}) > 1 for pts in by_batch.values())
    batches_vary = any(len({p[0] for p in pts}) > 1 for pts in by_seq.values())
    plt = _plt()
    # The latency panel always (vs sequence length when it varies, else vs batch size);
    # the throughput panel only when the batch size varies.
    panels = 2 if batches_vary else 1
    fig, axes = plt.subplots(1, panels, figsize=(4.8 * panels, 3.2), layout="constrained")
    axes = list(axes) if panels == 2 else [axes]
    tips: dict[str, str] = {}
    ax1 = axes[0]
    if seqs_vary:
        series = sorted(by_batch.items(), key=lambda kv: float(kv[0]))
        for (batch, pts), color in zip(series, _series_colors(len(series)), strict=True):
            pts.sort()
            ax1.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                marker="o",
                color=color,
                label=f"batch {batch}",
            )
        ax1.set_xlabel("sequence length")
        ax1.set_title("latency vs sequence length", fontsize=8)
        if len(series) > 1:
            ax1.legend(fontsize=6)
    else:  # no sequence dimension: latency against batch size instead
        pts2 = sorted(
            (float(param(e, BATCH_KEYS) or e.get("batch_size") or 1), e["stats"]["median"])
            for e in entries
        )
        ax1.plot([p[0] for p in pts2], [p[1] for p in pts2], marker="o", color=_series_colors(1)[0])
        _batch_axis(ax1, [p[0] for p in pts2])
        ax1.set_xlabel("batch size")
        ax1.set_title("latency vs batch size", fontsize=8)
    ax1.set_ylabel("median latency")
    _unit_axis(ax1.yaxis)
    ax1.grid(alpha=0.3)
    if batches_vary:
        _throughput_panel(axes[-1], by_seq, tips)
    fig.suptitle(label, fontsize=9)
    return _render(fig, tips, png)


#: How a generation's dimensions are named in legends.
_GEN_DIMS = {"prompt_tokens": "prompt", "new_tokens": "new", "batch_size": "batch"}


def generation_figure(label: str, entries: list[dict[str, Any]], png: bool = False) -> Plot:
    """TTFT against prompt length (prefill), and TPOT against batch size (decode): a TPOT
    that stays flat as the batch grows means each step is host overhead (the framework tax
    of decoding), with the measured host share of a step where the backend recorded it.
    Each line holds the other dimensions fixed; they are named in its legend."""
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.2, 3.2), layout="constrained")
    tips: dict[str, str] = {}

    def dim(e: dict[str, Any], name: str) -> int:
        return int(e["generation"][name])

    def median(e: dict[str, Any], metric: str) -> float:
        return float(e["generation"][metric]["stats"]["median"])

    varying = [d for d in _GEN_DIMS if len({dim(e, d) for e in entries}) > 1]
    # TPOT against what varies: the batch (the framework-tax reading), else the output
    # length, else the prompt length (a longer context makes each step attend to more).
    tpot_x = next((d for d in ("batch_size", "new_tokens") if d in varying), "prompt_tokens")
    panels = (
        (ax1, "ttft", "prompt_tokens", "time to first token vs prompt length (prefill)"),
        (ax2, "tpot", tpot_x, f"time per output token (decode) vs {_GEN_DIMS[tpot_x]}"),
    )
    for ax, metric, x_dim, title in panels:
        others = [d for d in varying if d != x_dim]
        lines: dict[tuple[int, ...], list[dict[str, Any]]] = defaultdict(list)
        spans: set[tuple[float, float, str]] = set()  # each step shaded once, as above
        for e in entries:
            lines[tuple(dim(e, d) for d in others)].append(e)
        for fixed, members in sorted(lines.items()):
            group = sorted(members, key=lambda e: dim(e, x_dim))
            xs = [float(dim(e, x_dim)) for e in group]
            ys = [median(e, metric) for e in group]
            name = ", ".join(f"{_GEN_DIMS[d]} {v}" for d, v in zip(others, fixed, strict=True))
            (line,) = ax.plot(xs, ys, marker="o", label=name or None)
            if metric == "tpot" and x_dim == "batch_size":
                for (x0, y0), (x1, y1) in itertools.pairwise(zip(xs, ys, strict=True)):
                    color = REGIME_COLORS.get(tax_regime(x0, y0, x1, y1))
                    if color and (x0, x1, color) not in spans:
                        ax.axvspan(x0, x1, color=color, alpha=0.08)
                        spans.add((x0, x1, color))
            for x, y, e in zip(xs, ys, group, strict=True):
                g = e["generation"]
                share = g.get("decode_host_bound_ratio")
                if metric == "tpot" and share is not None:
                    ax.annotate(f"host {share:.2f}", (x, y), fontsize=6)
                gid = f"gen-{len(tips)}"
                # The hover target, in the line's colour (an unset colour would take the
                # next one of the cycle, and the lines after it would repeat colours).
                ax.plot([x], [y], "o", markersize=6, alpha=0, gid=gid, color=line.get_color())
                tips[gid] = (
                    f"{_label(e['nodeid'])}\nprompt {g['prompt_tokens']}, new "
                    f"{g['new_tokens']}, batch {g['batch_size']}\nTTFT "
                    f"{fmt_time(median(e, 'ttft'))}, TPOT {fmt_time(median(e, 'tpot'))}, "
                    f"{median(e, 'tokens_per_s'):,.0f} tokens/s"
                    + (f", decode host share {share:.2f}" if share is not None else "")
                )
        if x_dim == "batch_size":
            _batch_axis(ax, [float(dim(e, x_dim)) for e in entries])
        xlabel = {"prompt_tokens": "prompt tokens", "new_tokens": "new tokens"}.get(x_dim)
        if xlabel is None:
            xlabel = "batch size (orange: flat, host-bound decode; green: compute-bound)"
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"{metric.upper()}, median")
        _unit_axis(ax.yaxis)
        ax.set_ylim(bottom=0)
        ax.set_title(title, fontsize=8)
        if others:
            ax.legend(fontsize=6)
        ax.grid(alpha=0.3)
    fig.suptitle(label, fontsize=9)
    return _render(fig, tips, png)


# --- the document ------------------------------------------------------------------------


def build(
    results: dict[str, Any] | None,
    baseline: dict[str, Any] | None,
    history: Mapping[str, Series] | Iterable[Series],
    png_dir: Path | None = None,
    title: str = "pytest-infperf report",
    along: str = "HEAD",
    shown: str | None = None,
    now: str = "now",
) -> tuple[str, int]:
    """The HTML text and how many figures it holds; with ``png_dir``, every figure is also
    written there as a PNG. ``shown``: what the page shows, said under its heading (the
    baseline nearest HEAD when HEAD has none); ``now``: what the results' figures are,
    as the table heads them (a stored baseline shown on its own: its commit)."""
    return _build(results, baseline, history, png_dir, title, along, shown, now)


def _drawn_samples(
    entry: Mapping[str, Any], base: Mapping[str, Any] | None
) -> tuple[list[float], list[float], bool]:
    """The samples the verdict came from: a settled verdict's interleaved run (both sides
    measured in this job), else this run's and the stored baseline's. Drawing the stored
    pass beside an interleaved verdict read as a change the verdict did not claim."""
    extra = entry.get("extra") or {}
    samples = list(entry.get("samples") or [])
    both = interleaved(samples, extra)
    decided = (entry.get("comparison") or {}).get("decided_by")
    if decided == "ab" and both is not None and both["head_samples"]:
        return list(both["head_samples"]), list(both["base_samples"]), True
    before = base["samples"] if base else numbers(extra.get("base_samples"))
    return samples, list(before or []), False


def _build(
    results: dict[str, Any] | None,
    baseline: dict[str, Any] | None,
    history: Mapping[str, Series] | Iterable[Series],
    png_dir: Path | None,
    title: str,
    along: str,
    shown: str | None = None,
    now: str = "now",
) -> tuple[str, int]:
    sections: list[tuple[str, list[tuple[str, Plot]]]] = []
    png = png_dir is not None
    entries = dict(iter_entries(results)) if results else {}
    base_entries = dict(iter_entries(baseline)) if baseline else {}
    base_commit = ((baseline or {}).get("commit") or {}).get("sha")
    dist = []
    for key, e in sorted(entries.items()):
        drawn, before, interleaved = _drawn_samples(e, base_entries.get(key))
        if drawn and before:  # a violin needs samples on both sides
            c = e.get("comparison")
            figure = distribution_figure(key, drawn, before, c, base_commit, png, interleaved)
            dist.append((key, figure))
    if dist:
        sections.append(("Latency now vs baseline", dist))
    # One series at a time (the CLI streams them from the store's index): each becomes its
    # figure and its change-point rows, then is let go, so memory does not grow with the
    # history's length times the number of benchmarks.
    if isinstance(history, Mapping):
        history = [history[k] for k in sorted(history)]
    trends: list[tuple[str, Plot]] = []
    changes: list[tuple[str, ChangePoint, Point, str | None]] = []
    for s in history:
        changes += [(s.key, c, s.points[c.index], bisect_command(s, c)) for c in s.changes]
        if len(s.points) >= 2:
            trends.append((s.key, history_figure(s, png)))
    if trends:
        sections.append((f"History along {along} (dashed: detected change points)", trends))
    groups = sorted(sweep_groups(list(entries.values())).items())
    sweeps = [(label, scaling_figure(label, group, png)) for label, group in groups]
    if sweeps:
        # Name only the dimensions that vary, as the figures draw only those.
        seq = any(len({param(e, SEQ_KEYS) for e in g}) > 1 for _, g in groups)
        batch = any(
            len({param(e, BATCH_KEYS) or e.get("batch_size") or 1 for e in g}) > 1
            for _, g in groups
        )
        if seq and batch:
            what = "latency vs sequence length, throughput vs batch size (framework tax)"
        elif seq:
            what = "latency vs sequence length"
        else:
            what = "latency and throughput vs batch size (framework tax)"
        sections.append((f"Scaling: {what}", sweeps))
    generation = [
        (label, generation_figure(label, group, png))
        for label, group in sorted(generation_groups(list(entries.values())).items())
    ]
    if generation:
        heading = "Generation: TTFT vs prompt length, TPOT vs batch (decode framework tax)"
        sections.append((heading, generation))
    if png_dir is not None:
        png_dir.mkdir(parents=True, exist_ok=True)
        for s_index, (_, figures) in enumerate(sections):
            for f_index, (label, plot) in enumerate(figures):
                safe = "".join(c if c.isalnum() else "_" for c in _label(label))[:80]
                (png_dir / f"{s_index}-{f_index:03d}-{safe}.png").write_bytes(plot.png)
    count = sum(len(figures) for _, figures in sections)
    return _html(title, results, sections, changes, shown, now), count


def _generation_table(results: dict[str, Any]) -> list[str]:
    """Generation benchmarks: TTFT, TPOT, ITL p99, tokens/s, the decode host share, and each
    judged metric's ratio and verdict."""
    gens = [(k, e) for k, e in sorted(iter_entries(results)) if e.get("generation")]
    if not gens:
        return []
    out = [
        "<h2>Generation</h2><table><tr><th>benchmark</th><th>prompt → new × batch</th>"
        "<th>TTFT</th><th>TPOT</th><th>ITL p99</th><th>tokens/s</th>"
        "<th>decode host share</th><th>TTFT ratio</th><th>TPOT ratio</th></tr>"
    ]
    for key, e in gens:
        raw = e.get("comparison")
        gr = generation_row(e["generation"], Comparison.from_json(raw) if raw else None)
        tps, share = gr.tokens_per_s, gr.decode_host_share
        cells = [
            _label(key),
            f"{gr.prompt_tokens} → {gr.new_tokens} × {gr.batch_size}",
            fmt_time(gr.figures["ttft"]),
            fmt_time(gr.figures["tpot"]),
            fmt_time(gr.itl_p99),
            "-" if tps is None else f"{tps:,.0f}",
            "-" if share is None else f"{share:.2f}",
        ]
        row = "".join(f"<td>{html.escape(str(v))}</td>" for v in cells)
        for part in gr.parts.values():
            text = "-" if part is None else f"{fmt_ratio(part)} {part.verdict.value}"
            cls = " class='regression'" if part and part.verdict is Verdict.REGRESSION else ""
            row += f"<td{cls}>{html.escape(text)}</td>"
        out.append(f"<tr>{row}</tr>")
    out.append("</table>")
    return out


def _results_table(results: dict[str, Any], now: str = "now") -> list[str]:
    """The results table's HTML, from the report model's rows (report/rows.py); ``now``:
    what its figures are (a stored baseline shown as it is: its commit, not "now")."""
    parts: list[str] = []
    # The figures a verdict was computed from (Comparison.current/baseline: a settled
    # verdict's come from the interleaved run, not from this run's first pass).
    parts.append(
        f"<table><tr><th>benchmark</th><th>backend</th><th>{html.escape(now)}</th>"
        f"<th>baseline</th><th>ratio [CI]</th><th>n {html.escape(now)}/base</th>"
        "<th>verdict</th><th>by</th><th>would catch</th><th>work per call</th></tr>"
    )
    for key, e in sorted(iter_entries(results)):
        raw = e.get("comparison")
        cmp = Comparison.from_json(raw) if raw else None
        row_ = result_row(_label(key), e["backend"], e["stats"].get("median"), cmp)
        cells = [row_.name, row_.backend, row_.now]
        if cmp is None:
            cells += ["-", "-", "-", "", "-", "-", "-"]
        else:
            cells += [row_.baseline, fmt_ratio(cmp), row_.n]
            cells += [cmp.verdict.value, row_.decided_by, row_.catch]
            cells.append(f"{row_.work}: {row_.work_detail}" if row_.work_detail else row_.work)
        cls = " class='regression'" if cmp is not None and cmp.verdict is Verdict.REGRESSION else ""
        row = "".join(
            f"<td{cls if i == 6 else ''}>{html.escape(str(v))}</td>" for i, v in enumerate(cells)
        )
        parts.append(f"<tr>{row}</tr>")
    parts.append("</table>")
    return parts


def _html(
    title: str,
    results: dict[str, Any] | None,
    sections: list[tuple[str, list[tuple[str, Plot]]]],
    changes: list[tuple[str, ChangePoint, Point, str | None]],
    shown: str | None = None,
    now: str = "now",
) -> str:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}"
        "h1{font-size:20px}h2{font-size:16px;margin-top:28px}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ddd;"
        "padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}"
        ".grid{display:flex;flex-wrap:wrap;gap:16px}.grid figure{margin:0;max-width:100%}"
        ".grid svg{max-width:100%;height:auto;display:block}"
        "table{max-width:100%;display:block;overflow-x:auto}"
        "figcaption{font-size:11px;color:#555;max-width:640px;word-break:break-all}"
        ".regression{color:#c0392b;font-weight:600}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    if shown:  # what the page shows, where a reader looks first (not only in a terminal)
        parts.append(f"<p><strong>{html.escape(shown[0].upper() + shown[1:])}.</strong></p>")
    if results:
        commit = (results.get("commit") or {}).get("sha") or "?"
        env = (results.get("environment") or {}).get("key", "?")
        parts.append(
            f"<p>Commit <code>{html.escape(str(commit)[:10])}</code>, environment "
            f"<code>{html.escape(str(env))}</code>.</p>"
        )
        parts += _results_table(results, now)
        parts += _generation_table(results)
    if changes:
        parts.append(
            "<h2>Change points</h2><table><tr><th>benchmark</th><th>commit</th>"
            "<th>change</th><th>p</th><th>find the commit</th></tr>"
        )
        for key, c, point, command in changes:
            parts.append(
                f"<tr><td>{html.escape(_label(key))}</td><td><code>{point.sha[:10]}"
                f"</code> {html.escape(point.subject or '')}</td><td>"
                f"{c.ratio - 1:+.1%}</td><td>{c.p_value:.1e}</td><td>"
                + (f"<code>{html.escape(command)}</code>" if command else "")
                + "</td></tr>"
            )
        parts.append("</table>")
    for heading, figures in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2><div class='grid'>")
        for label, plot in figures:
            parts.append(
                f"<figure role='img' aria-label='{html.escape(label)}'>{plot.svg}"
                f"<figcaption>{html.escape(label)}</figcaption></figure>"
            )
        parts.append("</div>")
    if not sections:
        parts.append(
            "<p>No figures yet: a distribution needs a baseline to compare with "
            "(<code>--compare REF</code>), a history the baselines of two or more commits, "
            "a scaling plot two or more batch sizes.</p>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)
