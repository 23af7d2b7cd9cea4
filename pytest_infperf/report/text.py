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
    level_of,
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


#: The default table's width: a terminal of 120 columns shows it whole; -v adds columns.
WIDTH = 120


def _fit(rows: list[list[str]], width: int) -> None:
    """Shorten the first column (the benchmark's name) until the table fits ``width``,
    cutting what a name shares with its own test's other parametrizations (and the file's
    path) before what tells them apart (the test's name and the differing ids), and never
    making two rows alike: a name that cannot be cut without that stays whole."""
    others = sum(max(len(r[i]) for r in rows) + 2 for i in range(1, len(rows[0])))
    room = max(20, width - others)
    names = [row[0] for row in rows[1:]]
    if not names or max(len(n) for n in names) <= room:
        return
    # What a name shares is measured against its own test's other parametrizations: across
    # files nothing but "test_" is shared, and a cut there keeps none of the ids.
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(n.split("[", 1)[0], []).append(n)
    cut = []
    for n in names:
        group = groups[n.split("[", 1)[0]]
        prefix = _shared(group) if len(group) > 1 else 0
        suffix = _shared([m[::-1] for m in group]) if len(group) > 1 else 0
        suffix = min(suffix, min(len(m) for m in group) - prefix)
        cuts = _cuts(n, prefix, suffix, room)
        cuts.insert(2, _ids_that_differ(n, group))
        cut.append(next((c for c in cuts if len(c) <= room), n))
    # A test's parametrizations read alike: where one is cut, all are, to their ids.
    for group in groups.values():
        ids = [_ids_that_differ(m, group) for m in group]
        was = dict(zip(names, cut, strict=True))
        if any(was[m] != m for m in group) and all(len(i) <= room for i in ids):
            for m, i in zip(group, ids, strict=True):
                cut[names.index(m)] = i
    alike: dict[str, list[str]] = {}
    for name, c in zip(names, cut, strict=True):
        alike.setdefault(c, []).append(name)
    # Names a cut made alike (they differ in the middle): cut around where they differ.
    apart: dict[str, str] = {}
    for group in (g for g in alike.values() if len(g) > 1):
        apart.update(zip(group, _tell_apart(group, room) or group, strict=True))
    for row, name, short in zip(rows[1:], names, cut, strict=True):
        row[0] = apart.get(name, short)


def _tell_apart(names: list[str], room: int) -> list[str] | None:
    """Names a cut made alike, each cut instead to the part where they differ and what
    surrounds it, within ``room``; None where that part alone is too long."""
    prefix = _shared(names)
    suffix = min(_shared([n[::-1] for n in names]), min(len(n) for n in names) - prefix)
    out = []
    for n in names:
        spare = room - (len(n) - suffix - prefix) - 2
        if spare < 0:
            return None
        start = max(0, prefix - spare // 2)
        end = min(len(n), len(n) - suffix + spare - (prefix - start))
        out.append(("…" if start else "") + n[start:end] + ("…" if end < len(n) else ""))
    return out if len(set(out)) == len(out) and all(len(o) <= room for o in out) else None


def _shared(texts: list[str]) -> int:
    """How many leading characters all ``texts`` share."""
    first, last = min(texts), max(texts)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return n


def _ids_that_differ(name: str, group: list[str]) -> str:
    """``test_x[…a-b]``: the test's name and only the ids of its parametrization that its
    other parametrizations do not all share (``cpu``, ``n16`` and ``b1`` in every one of
    them say nothing about which this is)."""

    def ids(n: str) -> list[str]:
        return n[n.index("[") + 1 : -1].split("-") if "[" in n and n.endswith("]") else []

    mine = ids(name)
    if len(group) < 2 or not mine:
        return name
    common = set.intersection(*(set(ids(m)) for m in group))
    kept = [i for i in mine if i not in common]
    test = name.partition("::")[2] or name
    return f"{test[: test.index('[')]}[…{'-'.join(kept)}]" if kept else name


def _cuts(name: str, prefix: int, suffix: int, room: int) -> list[str]:
    """``name`` shorter and shorter, the parts that tell it apart kept longest: without
    the file's path; then without what its parametrizations share after the test's name
    (``test_x[…distinct]``), then also before the shared end (``test_x[…distinct…end]``);
    then cut in the middle."""
    _, sep, rest = name.partition("::")
    short = rest if sep else name
    out = [name, short]
    if 0 <= name.find("[") < prefix:
        test = short[: short.index("[") + 1]
        out.append(f"{test}…{name[prefix:]}")
        end = len(name) - suffix
        if suffix > 1 and end > prefix:
            tail = max(1, room - len(test) - (end - prefix) - 2)
            out.append(f"{test}…{name[prefix:end]}…{name[len(name) - min(tail, suffix) :]}")
    keep = room - 1
    out.append(name[: keep // 2] + "…" + name[len(name) - (keep - keep // 2) :])
    return out


def spread(s: Mapping[str, Any]) -> str:
    """The spread of the samples as IQR / median, the figure its flag is defined by (``!``
    noisy, ``!!`` very noisy)."""
    median, iqr = s.get("median"), s.get("iqr")
    if not median or iqr is None or not math.isfinite(iqr):
        return "-"
    flag = {"high": " !", "severe": " !!"}.get(str(s.get("noise", "ok")), "")
    return f"{iqr / median:.0%}{flag}"


SPREAD_NOTE = "spread: IQR/median of the samples (! >= 10%: noisy, !! >= 25%: very noisy)"


def summary_lines(results: Sequence[BenchmarkResult], *, verbose: bool = False) -> list[str]:
    """The summary table. A compared run shows per benchmark the figures its verdict
    compares (before, and now as the ratio says), the ratio with its interval at the run's
    level, the verdict, who decided it and the work that changed, in 120 columns; ``verbose``
    adds the backend, the units each side had, what the comparison could have caught, the
    spread, items/s and memory."""
    compared = any(r.comparison is not None for r in results)
    if not compared:
        return _measured_lines(results, verbose=verbose)
    levels = {fmt_level(level_of(r.comparison)) for r in results if r.comparison is not None}
    level = levels.pop() if len(levels) == 1 else "per-benchmark"
    header = ["benchmark", "now", "before", f"ratio [{level} CI]", "verdict", "by", "work"]
    if verbose:
        header[1:1] = ["backend"]
        header += ["n now/before", "catches", "spread", "items/s", "mem"]
    rows = [header]
    for r in sorted(results, key=lambda r: r.key):
        rr = result_row(short_name(r), r.backend, r.stats.get("median"), r.comparison)
        c = rr.comparison
        cells = [rr.name, rr.now, rr.baseline, fmt_ratio(c), "-", rr.decided_by, rr.work]
        if c is not None:
            cells[4] = c.verdict.value
        if verbose:
            cells[1:1] = [rr.backend]
            mem = fmt_bytes(memory_figure(r.memory), signed=True)
            cells += [rr.n, rr.catch, spread(r.stats), fmt_rate(r.throughput), mem]
        rows.append(cells)
    if not verbose:
        _fit(rows, WIDTH)
    right = {1, 2} if not verbose else {2, 3, 9, 10, 11, 12}
    lines = _table(rows, right=right)
    lines.insert(1, "-" * max(len(line) for line in lines))
    if verbose:
        lines.append(SPREAD_NOTE)
        lines.append(
            "catches: the slowdown each comparison would have flagged with 80% power at its "
            "noise (!: more than twice its threshold)"
        )
    return lines


def _measured_lines(results: Sequence[BenchmarkResult], *, verbose: bool = False) -> list[str]:
    """A run that compared nothing: each benchmark's own figures, in 120 columns
    (``verbose``: names whole)."""
    # The interval of the median with -v: 120 columns keep the name, the figures and the
    # spread that says how far to trust them.
    header = ["benchmark", "backend", "median", "p90"]
    header += ["95% CI of median"] if verbose else []
    header += ["spread", "items/s", "n", "mem"]
    rows = [header]
    notes = []
    for r in sorted(results, key=lambda r: r.key):
        s = r.stats
        p90 = fmt_time(s.get("p90"))
        if "p90" in s.get("low_sample_percentiles", []):
            p90 += "*"
            notes.append("* p90 from fewer than 64 samples (MLPerf's minimum): indicative only")
        ci = f"{fmt_time(s.get('ci_low'))} - {fmt_time(s.get('ci_high'))}"
        mem = fmt_bytes(memory_figure(r.memory), signed=True)
        row = [short_name(r), r.backend, fmt_time(s.get("median")), p90]
        row += [ci] if verbose else []
        rows.append([*row, spread(s), fmt_rate(r.throughput), str(s.get("n", 0)), mem])
    if not verbose:
        _fit(rows, WIDTH)
    lines = _table(rows, right={2, 3, 5, 6, 7, 8} if verbose else {2, 3, 4, 5, 6, 7})
    lines.insert(1, "-" * max(len(line) for line in lines))
    return lines + sorted(set(notes)) + [SPREAD_NOTE]


def generation_lines(results: Sequence[BenchmarkResult], *, verbose: bool = False) -> list[str]:
    """The generation benchmarks' own table: TTFT, TPOT, the ITL tail and tokens/s (medians
    over generations), and each judged metric's ratio and verdict where compared, in 120
    columns (``verbose``: each ratio's interval, names whole)."""
    gens = [r for r in sorted(results, key=lambda r: r.key) if r.generation]
    if not gens:
        return []
    compared = any(r.comparison is not None and r.comparison.parts for r in gens)
    # Compared, in 120 columns: the ratios take the place of the ITL tail and tokens/s.
    extra = not compared or verbose
    header = ["generation", "prompt", "new", "batch", "TTFT", "TPOT"]
    header += ["ITL p99", "tokens/s"] if extra else []
    if compared:
        header += ["TTFT ratio", "TPOT ratio"]
    rows = [header]
    for r in gens:
        gr = generation_row(r.generation or {}, r.comparison)
        row = [short_name(r), str(gr.prompt_tokens), str(gr.new_tokens), str(gr.batch_size)]
        row += [fmt_time(gr.figures[m]) for m in GENERATION_METRICS]
        if extra:
            row += [fmt_time(gr.itl_p99)]
            row.append("-" if gr.tokens_per_s is None else f"{gr.tokens_per_s:.4g}/s")
        if compared:
            for part in gr.parts.values():
                if part is None:
                    row.append("-")
                    continue
                short = "-" if part.ratio is None else f"{part.ratio:.3f}"
                row.append(f"{fmt_ratio(part) if verbose else short} {part.verdict.value}")
        rows.append(row)
    if not verbose:
        _fit(rows, WIDTH)
    lines = _table(rows, right={1, 2, 3, 4, 5, *({6, 7} if extra else set())})
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


def settle_summary(results: Sequence[BenchmarkResult], *, verbose: bool = True) -> list[str]:
    """How many stored verdicts were settled in this job and why (``verbose``: the table's
    ``by`` column says it per benchmark), and how many could not be, with why: one line
    each, none when nothing was undecided."""
    compared = [r.comparison for r in results if r.comparison is not None]
    # Settling a budget cut short (--perf-budget) counts as not settled, once.
    settled = [c for c in compared if c.settled_because and not c.not_settled]
    unsettled = [c for c in compared if c.not_settled]
    lines = []
    if settled and verbose:
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
