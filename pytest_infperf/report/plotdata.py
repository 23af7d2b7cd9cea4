"""What the HTML report's figures show, apart from drawing them (no matplotlib here, so
it is tested without it): which benchmarks make one figure, the framework tax's regimes,
tick labels in one unit per axis, and each violin's axis range, density and tails.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .fmt import fmt_time

BATCH_KEYS = ("batch", "batch_size", "bs", "mlp_batch")
SEQ_KEYS = ("seq", "seq_len", "sequence_length", "seqlen", "length")
#: Parameters a generation sweep varies along (its figures come from the record itself);
#: any other parameter (model, decoding setup) makes a separate figure.
GENERATION_SWEEP_KEYS = (
    *BATCH_KEYS,
    *SEQ_KEYS,
    "gen_batch",
    "prompt",
    "prompt_tokens",
    "prompt_len",
    "new",
    "new_tokens",
    "max_new_tokens",
    "output_tokens",
)
#: Scaling exponent of latency in batch size below which a step is framework-bound (flat)
#: and above which it is compute-bound.
FLAT_EXPONENT = 0.3
COMPUTE_EXPONENT = 0.7

#: The units of a time axis, largest first: the same choice as ``fmt.fmt_time``, the
#: largest unit in which the figure is at least 1.
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))
#: The units of a rate axis (items or tokens per second): ``fmt.fmt_rate``'s.
RATE_UNITS = (("M", 1e6), ("k", 1e3), ("", 1.0))
#: Tukey's far-out fences: a side's body runs from q1 - 3 IQR to q3 + 3 IQR (within its
#: samples); what lies past them is its tail.
FENCE_IQR = 3.0
#: A violin's density is evaluated at most at this many points (a finer grid than the
#: bandwidth would add nothing a reader sees).
MAX_POINTS = 2000


def tick_labels(
    ticks: Sequence[float],
    units: Sequence[tuple[str, float]] = TIME_UNITS,
    within: tuple[float, float] | None = None,
    sep: str = " ",
) -> list[str]:
    """Labels for an axis's ticks, all in one unit: the one ``fmt_time`` (or ``fmt_rate``)
    gives the largest tick shown (``within``: the view; the locator also places ticks just
    outside it, which are not drawn), with the fewest decimals that still write every tick
    exactly, so that neighbours never read alike: ``30.0 us, 32.5 us, 35.0 us``."""
    if not ticks:
        return []
    shown = list(ticks)
    if within is not None:
        lo, hi = min(within), max(within)
        slack = (hi - lo) * 1e-9
        shown = [t for t in ticks if lo - slack <= t <= hi + slack] or shown
    top = max(abs(t) for t in shown)
    unit, scale = next(((u, s) for u, s in units if top >= s), units[-1])
    values = [t / scale for t in ticks]
    gaps = [b - a for a, b in itertools.pairwise(sorted(values)) if b > a]
    step = min(gaps) if gaps else max(abs(v) for v in values) or 1.0
    decimals = next(
        (d for d in range(7) if all(abs(v - round(v, d)) <= step * 1e-3 for v in values)), 6
    )
    # Zero needs no unit ("0k" reads oddly), and a tick a rounding error away from it
    # would print as "-0".
    return [
        "0" if abs(v) < step * 1e-6 else f"{v:.{decimals}f}{sep}{unit}".rstrip() for v in values
    ]


def body(samples: npt.ArrayLike) -> tuple[float, float]:
    """Where a side's samples are not its tail: Tukey's far-out fences, cut to its samples
    (a tight body stops at its own extremes; a bimodal one keeps both modes)."""
    s = np.asarray(samples, dtype=float)
    q1, q3 = np.percentile(s, [25, 75])
    iqr = q3 - q1
    return max(float(s.min()), q1 - FENCE_IQR * iqr), min(float(s.max()), q3 + FENCE_IQR * iqr)


def violin_range(sides: Sequence[npt.ArrayLike]) -> tuple[float, float]:
    """One x range for all the sides of a figure: every side's body, padded by 5%. A few
    stalls of one side no longer stretch the axis until another's body is a hairline."""
    bodies = [body(s) for s in sides if np.size(s)]
    lo, hi = min(b[0] for b in bodies), max(b[1] for b in bodies)
    pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1e-9
    # Latencies are not negative: the axis starts at 0 at the lowest.
    return (max(0.0, lo - pad) if lo >= 0 else lo - pad), hi + pad


@dataclasses.dataclass(frozen=True, eq=False)  # arrays: no meaningful ==
class Violin:
    """One side's violin over an axis range: ``density`` at ``coords`` (within the range and
    the side's samples), scaled to a peak of 1; ``below``/``above`` count the samples past
    the range's ends, ``lowest``/``highest`` are the farthest."""

    coords: npt.NDArray[np.float64]
    density: npt.NDArray[np.float64]
    n: int
    below: int
    above: int
    lowest: float
    highest: float

    def tail_note(self) -> str:
        """The samples the axis does not show, in words ("" when it shows them all)."""
        notes = []
        for count, where, value in (
            (self.below, "below", self.lowest),
            (self.above, "above", self.highest),
        ):
            if count:
                share = f"{100 * count / self.n:.2g}%"
                notes.append(f"{count} samples ({share}) {where} the axis, to {fmt_time(value)}")
        return "; ".join(notes)


def violin(samples: npt.ArrayLike, lo: float, hi: float) -> Violin:
    """A side's kernel density over ``[lo, hi]``. matplotlib's violins take the bandwidth
    from the standard deviation, which a few stalls inflate (a body 4 us wide came out
    90 us wide), and evaluate 100 points between the extremes (coarser than a narrow body
    beside a long tail: a line). Here the bandwidth is Silverman's robust rule (the IQR's
    spread where it is the smaller) and the grid is finer than it. Binned: the cost does
    not grow with the number of samples."""
    s = np.sort(np.asarray(samples, dtype=float))
    n = len(s)
    q1, q3 = np.percentile(s, [25, 75])
    spread = min(float(s.std()), (q3 - q1) / 1.349) or float(s.std())
    a, b = max(lo, float(s[0])), min(hi, float(s[-1]))
    width = b - a
    h = 0.9 * spread * n**-0.2 or width / 100 or abs(a) * 1e-3 or 1e-12
    grid = max(h / 3, width / MAX_POINTS)
    h = max(h, 3 * grid)  # a grid capped at MAX_POINTS: a smoother density, still resolved
    start = a - 4 * h
    m = math.ceil((b + 4 * h - start) / grid) + 1
    centers = start + grid * np.arange(m)
    counts, _ = np.histogram(s, bins=np.append(centers - grid / 2, centers[-1] + grid / 2))
    k = math.ceil(4 * h / grid)
    taps = np.exp(-0.5 * (np.arange(-k, k + 1) * grid / h) ** 2)
    density = np.convolve(counts.astype(float), taps, mode="same")
    keep = (centers >= a - grid / 2) & (centers <= b + grid / 2)
    coords, density = np.clip(centers[keep], a, b), density[keep]
    if not len(coords) or density.max() <= 0:
        coords, density = np.array([a, b]), np.ones(2)
    density = density / density.max()
    # The SVG holds every point: drop those on a straight stretch (a flat tail), keeping
    # every 8th, so that what is dropped is never off by more than 0.1% of the peak.
    kept = np.arange(len(density)) % 8 == 0
    kept[1:-1] |= np.abs(np.diff(density, 2)) > 1e-4
    kept[-1] = True
    return Violin(
        coords=coords[kept],
        density=density[kept],
        n=n,
        below=int(np.count_nonzero(s < lo)),
        above=int(np.count_nonzero(s > hi)),
        lowest=float(s[0]),
        highest=float(s[-1]),
    )


def param(entry: dict[str, Any], names: Sequence[str]) -> Any:
    params = entry.get("params") or {}
    for name in names:
        if name in params:
            return params[name]
    return None


def sweep_groups(entries: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Benchmarks of one parametrized sweep: same test function and same parameters apart
    from batch and sequence length."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in entries:
        params = e.get("params") or {}
        if e.get("generation") or (param(e, BATCH_KEYS) is None and param(e, SEQ_KEYS) is None):
            continue  # a generation sweep has its own view (generation_figure)
        others = {k: v for k, v in sorted(params.items()) if k not in BATCH_KEYS + SEQ_KEYS}
        func = e["nodeid"].split("[")[0]
        label = func.rsplit("::", 1)[-1] + "".join(f" {v}" for v in others.values())
        if e.get("name"):
            label += f" #{e['name']}"
        groups[label].append(e)
    return {k: v for k, v in groups.items() if len(v) >= 2}


def generation_groups(entries: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Generation benchmarks of one sweep: same test function, any prompt length, output
    length or batch (read from the ``generation`` record itself, not from parameter names)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in entries:
        if not e.get("generation"):
            continue
        params = e.get("params") or {}
        others = [v for k, v in sorted(params.items()) if k not in GENERATION_SWEEP_KEYS]
        label = e["nodeid"].split("[")[0].rsplit("::", 1)[-1]
        label += "".join(f" {v}" for v in others)
        groups[label + (f" #{e['name']}" if e.get("name") else "")].append(e)
    return {k: v for k, v in groups.items() if len(v) >= 2}


def tax_regime(b0: float, lat0: float, b1: float, lat1: float) -> str:
    """How latency grows from batch b0 to b1: exponent e of lat ~ batch^e. Near 0 (flat) the
    call is framework-bound; near 1 it is compute-bound."""
    if b1 <= b0 or lat0 <= 0 or lat1 <= 0:
        return "unknown"
    exponent = math.log(lat1 / lat0) / math.log(b1 / b0)
    if exponent < FLAT_EXPONENT:
        return "framework-bound"
    if exponent > COMPUTE_EXPONENT:
        return "compute-bound"
    return "transition"
