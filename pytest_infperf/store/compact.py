"""Compact baselines: what an old baseline keeps once its raw samples are let go.

A verdict needs raw samples only from the newest baselines (the ones a comparison finds);
history, reports and ``infperf show`` need the statistics. ``infperf prune --keep-raw N``
therefore rewrites every baseline older than the newest ``N`` of its environment as a
compact document: every field stays (stats, throughput, memory, options, params,
environment, the generation metrics' stats), and each list of raw samples is replaced by
``SKETCH`` evenly spaced quantiles of it (min and max included). That keeps the shape of
the distribution (the median, the tails and the spread a test sees) in 33 numbers instead
of hundreds, and the entry says so in ``compact``. A comparison against a compact baseline
still works: it tests against the quantiles as if they were 33 samples, which widens the
interval (fewer decisions, never more false ones), and its message says it worked from a
summary. Warmup samples go (nothing reads old ones). Compact documents are written without
indentation and with six significant digits (``DIGITS``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..core.results import clean

#: Quantiles kept of each list of raw samples (0%, 1/32, ..., 100%).
SKETCH = 33


def sketch(values: Sequence[float], size: int = SKETCH) -> list[float]:
    """``size`` evenly spaced order statistics (linear interpolation), min and max
    included; a list of ``size`` or fewer values is kept as it is (sorted)."""
    ordered = sorted(float(v) for v in values)
    if len(ordered) <= size:
        return ordered
    out = []
    last = len(ordered) - 1
    for i in range(size):
        pos = i * last / (size - 1)
        lo = int(pos)
        hi = min(lo + 1, last)
        frac = pos - lo
        out.append(ordered[lo] + (ordered[hi] - ordered[lo]) * frac)
    return out


def is_compact(entry: dict[str, Any]) -> bool:
    return bool(entry.get("compact"))


def compact_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry with each list of raw samples replaced by its sketch (idempotent)."""
    if is_compact(entry):
        return entry
    out = dict(entry)
    samples = list(entry.get("samples") or [])
    out["samples"] = sketch(samples)
    out["warmup_samples"] = []
    out["compact"] = {"samples": len(samples), "sketch": len(out["samples"])}
    gen = entry.get("generation")
    if isinstance(gen, dict):
        gen = dict(gen)
        for metric, series in list(gen.items()):
            if isinstance(series, dict) and isinstance(series.get("samples"), list):
                gen[metric] = {**series, "samples": sketch(series["samples"])}
        out["generation"] = gen
    return out


def compact_document(doc: dict[str, Any], when: str) -> dict[str, Any]:
    """The document with every entry compacted and ``compacted`` set to ``when``."""
    out = dict(doc)
    out["benchmarks"] = [compact_entry(e) for e in doc["benchmarks"]]
    out.setdefault("compacted", when)
    return out


def is_compact_document(doc: dict[str, Any]) -> bool:
    return bool(doc.get("compacted"))


#: Significant digits of a compact document's numbers: a part per million is far below any
#: timing's noise, and half the digits of a raw file's are half its bytes.
DIGITS = 6


def dumps_compact(doc: dict[str, Any]) -> str:
    text = json.dumps(clean(doc, DIGITS), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return text + "\n"


def summary_note(entry: dict[str, Any]) -> str | None:
    """What a comparison against this baseline entry should say about it, if compact."""
    info = entry.get("compact")
    if not info:
        return None
    return (
        f"baseline from a summary: {info.get('sketch')} quantiles of its "
        f"{info.get('samples')} raw samples (compacted by infperf prune --keep-raw)"
    )
