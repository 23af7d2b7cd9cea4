"""The Markdown report (``--perf-markdown``, the GitHub job summary) and GitHub annotations.

Written for a reviewer who opens a pull request: regressions first, each row with the
numbers that justify its verdict, then where the baseline came from and anything that
makes the comparison less trustworthy (environment differences, machine drift).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.options import GENERATION_METRICS
from ..core.results import METRIC_LABELS, BenchmarkResult, Comparison, Verdict
from .fmt import (
    fmt_catch,
    fmt_figure,
    fmt_level,
    fmt_rate,
    fmt_ratio,
    fmt_time,
    fmt_why,
    level_of,
    short_name,
    shown_figures,
)
from .messages import fmt_change, more_work_warning, repro_command, work_note
from .notices import HEAD_ENVIRONMENT, drift_warning
from .rows import generation_row, result_row
from .text import settle_summary

MARK = {
    Verdict.REGRESSION: "🔴 regression",
    Verdict.ACCEPTED: "🟠 accepted",
    Verdict.INCONCLUSIVE: "🟡 inconclusive",
    Verdict.IMPROVEMENT: "🟢 improvement",
    Verdict.UNCHANGED: "✅ unchanged",
    Verdict.NO_REGRESSION: "✅ no regression",
    Verdict.NO_BASELINE: "🆕 no-baseline",
    Verdict.INCOMPARABLE: "⚠️ incomparable",
}
ORDER = [
    Verdict.REGRESSION,
    Verdict.ACCEPTED,
    Verdict.INCONCLUSIVE,
    Verdict.INCOMPARABLE,
    Verdict.IMPROVEMENT,
    Verdict.UNCHANGED,
    Verdict.NO_REGRESSION,
    Verdict.NO_BASELINE,
]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(
    results: Sequence[BenchmarkResult],
    *,
    source: Mapping[str, Any] | None = None,
    drift: Mapping[str, Any] | None = None,
    warnings: Sequence[str] = (),
    environment: Mapping[str, Any] | None = None,
    mode: str = "stored",
    title: str = "pytest-infperf",
    gate: str | None = None,
) -> str:
    """The whole report as Markdown. Its first line is a heading that works as the title
    of a pull-request comment; ``gate`` says why a comparison that compared nothing fails."""
    compared = [r.comparison for r in results if r.comparison is not None]
    counts: dict[Verdict, int] = {}
    for c in compared:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    n = len(results)
    lines: list[str] = []
    if gate:
        lines.append(f"## {title}: compared nothing in {n} benchmark{'s' * (n != 1)}")
        lines += [
            "",
            "> [!CAUTION]",
            f"> **No baseline was compared:** {_cell(gate)}. A gate that compared nothing "
            "fails (`--perf-allow-missing` lets a first run pass).",
        ]
    elif compared:
        regressions = counts.get(Verdict.REGRESSION, 0)
        accepted = counts.get(Verdict.ACCEPTED, 0)
        head = (
            f"{regressions} regression{'s' * (regressions != 1)}"
            if regressions
            else "no regressions"
        )
        if accepted:
            head += f", {accepted} accepted"
        lines.append(f"## {title}: {head} in {n} benchmark{'s' * (n != 1)}")
    else:
        lines.append(f"## {title}: {n} benchmark{'s' * (n != 1)}")
    if compared:
        summary = ", ".join(f"{counts[v]} {v}" for v in ORDER if counts.get(v))
        lines += ["", f"**{summary}**"]
        settled = settle_summary(results)
        if settled:
            lines += ["", " · ".join(s[0].upper() + s[1:] for s in settled)]
        if source:
            lines += ["", _source_line(source, mode, compared)]
    # Only where a verdict rests on the stored pass while the machine had moved: the same
    # warning the terminal and the JSON give (report/notices.py), said here as a callout.
    moved = drift_warning(drift, results, mode == "ab")
    if moved:
        lines += ["", "> [!WARNING]", f"> **The machine moved:** {_cell(moved)}."]
    # The base's code ran under HEAD's dependencies: said plainly, not among the warnings.
    unbuilt = next((w for w in warnings if w.startswith(HEAD_ENVIRONMENT)), None)
    if unbuilt:
        lines += ["", "> [!WARNING]", f"> **Not the base's own environment:** {_cell(unbuilt)}."]
    lines += _more_work(results)
    lines += ["", *(_table(results, bool(compared)))]
    lines += _generation_table(results)
    failing = [r for r in results if r.verdict is Verdict.REGRESSION]
    if failing:
        lines += ["", "### Regressions", ""]
        lines += [_regression_detail(r) for r in failing]
    accepted_rows = [r for r in results if r.verdict is Verdict.ACCEPTED]
    if accepted_rows:
        lines += ["", "### Accepted regressions", ""]
        lines += [_accepted_detail(r) for r in accepted_rows]
    lines += _env_diffs(results)
    rest = [w for w in warnings if w not in (moved, unbuilt)]
    if rest:
        lines += ["", "<details><summary>Warnings</summary>", ""]
        lines += [f"- {_cell(w)}" for w in rest]
        lines += ["", "</details>"]
    if environment:
        lines += ["", _environment_line(environment)]
    return "\n".join(lines) + "\n"


def _rule(compared: Sequence[Comparison]) -> str:
    """The run's threshold, alpha and metric, each said once when every benchmark shares
    it ("per benchmark" when markers set different ones). A generation benchmark is judged
    on TTFT and TPOT whatever the run's metric, so a mixed run says both."""
    thresholds = {c.threshold for c in compared}
    alphas = {c.alpha for c in compared}
    threshold = f"{next(iter(thresholds)):.0%}" if len(thresholds) == 1 else "per benchmark"
    alpha = f"{next(iter(alphas)):g}" if len(alphas) == 1 else "per benchmark"
    metrics = sorted({str(c.metric) for c in compared if not c.parts})
    if any(c.parts for c in compared):
        seen = {m for c in compared for m in c.parts or {}}
        judged = [METRIC_LABELS[m] for m in GENERATION_METRICS if m in seen]
        metrics.append(" and ".join(judged) + (" (generation)" if metrics else ""))
    return f"threshold {threshold}, alpha {alpha}, metric {', '.join(metrics)}"


def _source_line(source: Mapping[str, Any], mode: str, compared: Sequence[Comparison]) -> str:
    rule = _rule(compared)
    if mode == "ab":
        base = source.get("sha") or "?"
        return (
            f"Measured in this job against the merge-base `{str(base)[:10]}` of "
            f"`{source.get('ref')}` and HEAD, interleaved (A/B mode)"
            + (", head with uncommitted changes" if source.get("head_dirty") else "")
            + f" · {rule}"
        )
    if source.get("origin") == "file":
        return f"Compared with `{Path(str(source.get('path'))).name}` · {rule}"
    if source.get("origin") == "commit":
        d = source.get("distance") or 0
        ref = str(source.get("ref"))
        # REF=HEAD: its merge-base with HEAD is HEAD itself, so say that.
        anchor = "HEAD" if ref in ("HEAD", "@") else f"the merge-base of `{ref}` and HEAD"
        where = anchor if d == 0 else f"{d} commit{'s' * (d != 1)} before {anchor}"
        return f"Compared with the baseline of `{str(source.get('sha'))[:10]}` ({where}) · {rule}"
    return f"No baseline found for `{source.get('ref')}`: {source.get('note', '')}"


def _table(results: Sequence[BenchmarkResult], compared: bool) -> list[str]:
    rank = {v: i for i, v in enumerate(ORDER)}
    rows = sorted(results, key=lambda r: (rank.get(r.verdict, 99) if r.verdict else 99, r.key))
    if compared:
        levels = {fmt_level(level_of(r.comparison)) for r in rows if r.comparison is not None}
        level = levels.pop() if len(levels) == 1 else "per-benchmark"
        out = [
            f"| verdict | benchmark | now | before | ratio [{level} CI] | by | work |",
            "|---|---|---:|---:|---|---|---|",
        ]
        for r in rows:
            row = result_row(short_name(r), r.backend, r.median, r.comparison)
            c = row.comparison
            if c is None:
                out.append(f"| – | `{_cell(row.name)}` | {row.now} | – | – | – | – |")
                continue
            out.append(
                f"| {_verdict(c)} | `{_cell(row.name)}` | {row.now} | {row.baseline} | "
                f"{fmt_ratio(c)} | {row.decided_by if c.decided_by else '–'} | {row.work} |"
            )
        return out
    out = [
        "| benchmark | backend | median | p90 | 95% CI of median | items/s | n |",
        "|---|---|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        s = r.stats
        out.append(
            f"| `{_cell(short_name(r))}` | {r.backend} | {fmt_time(s.get('median'))} | "
            f"{fmt_time(s.get('p90'))} | {fmt_time(s.get('ci_low'))} – "
            f"{fmt_time(s.get('ci_high'))} | {fmt_rate(r.throughput)} | {s.get('n')} |"
        )
    return out


def _generation_table(results: Sequence[BenchmarkResult]) -> list[str]:
    """Generation benchmarks: TTFT, TPOT, ITL p99 and tokens/s (medians over generations),
    with each judged metric's ratio and verdict where compared."""
    gens = [r for r in sorted(results, key=lambda r: r.key) if r.generation]
    if not gens:
        return []
    compared = any(r.comparison is not None and r.comparison.parts for r in gens)
    head = "| generation | prompt → new × batch | TTFT | TPOT | ITL p99 | tokens/s |"
    rule = "|---|---|---:|---:|---:|---:|"
    if compared:
        head += " TTFT ratio | TPOT ratio |"
        rule += "---|---|"
    out = ["", "### Generation", "", head, rule]
    for r in gens:
        gr = generation_row(r.generation or {}, r.comparison)
        tps = gr.tokens_per_s
        row = (
            f"| `{_cell(short_name(r))}` | {gr.prompt_tokens} → {gr.new_tokens} × "
            f"{gr.batch_size} | {fmt_time(gr.figures['ttft'])} | "
            f"{fmt_time(gr.figures['tpot'])} | {fmt_time(gr.itl_p99)} | "
            f"{'–' if tps is None else f'{tps:.4g}/s'} |"
        )
        if compared:
            for part in gr.parts.values():
                row += " – |" if part is None else f" {fmt_ratio(part)} {MARK[part.verdict]} |"
        out.append(row)
    return out


def _verdict(c: Comparison) -> str:
    """The verdict's mark, with its reason when the verdict is not a decision, and what an
    undecided one could have caught."""
    if c.verdict.decisive or c.reason is None:
        return MARK[c.verdict]
    caught = fmt_catch(c)
    could = (
        f"; could catch {caught.rstrip(' !')}"
        if c.verdict is Verdict.INCONCLUSIVE and caught != "-"
        else ""
    )
    return f"{MARK[c.verdict]} ({fmt_why(c.reason)}{could})"


def _regression_detail(r: BenchmarkResult) -> str:
    """A regression in plain words: how much slower, now and before, why, how to
    reproduce and accept it (the statistics are the JSON's)."""
    c = r.comparison
    assert c is not None
    now, before = shown_figures(c)
    what = METRIC_LABELS.get(c.metric, c.metric)
    bits = [
        f"- **`{_cell(r.key)}`**: {what} {fmt_change(c)} ({fmt_level(level_of(c))} interval), "
        f"now {fmt_figure(c.metric, now)}, before {fmt_figure(c.metric, before)}"
    ]
    if c.parts:  # each judged metric: a generation's TTFT and TPOT, a GPU's device time
        bits.append(
            ", ".join(
                f"{METRIC_LABELS.get(m, m)} {fmt_change(p)} ({p.verdict})"
                for m, p in c.parts.items()
            )
        )
    work = work_note(c)
    if work:
        bits.append(f"work per call: {_cell(work)}")
    repro = repro_command(r.nodeid, c)
    if repro:
        bits.append(f"reproduce: `{repro}`")
    bits.append(f"accept it with a `Perf-Accept: {_cell(r.key)} <reason>` commit trailer")
    return "; ".join(bits)


def _more_work(results: Sequence[BenchmarkResult]) -> list[str]:
    """Work changed, time undecided: the benchmarks whose call does more work than the
    baseline's while their time verdict did not fail them (and those a work limit failed),
    as a callout above the table, where a reviewer cannot miss them."""
    rows = []
    for r in sorted(results, key=lambda r: r.key):
        c = r.comparison
        warning = None if c is None else more_work_warning(c)
        if c is None or warning is None:
            continue
        gate = r.extra.get("work_gate")
        failed = gate is not None and gate.get("passed") is False  # accepted or not
        mark = "🔴 fails `max_work_increase`" if failed else f"time {MARK[c.verdict]}"
        rows.append(f"> - `{_cell(short_name(r))}` ({mark}): {_cell(warning)}")
    if not rows:
        return []
    return ["", "> [!WARNING]", "> **More work per call, time not a regression:**", *rows]


def _accepted_detail(r: BenchmarkResult) -> str:
    c = r.comparison
    assert c is not None and c.accepted_by is not None
    by = c.accepted_by
    where = f"commit `{str(by['commit'])[:10]}`" if by.get("commit") else "`--perf-accept`"
    return (
        f"- **`{_cell(r.key)}`** at {fmt_change(c)}, accepted by {where} "
        f"(`{_cell(str(by['pattern']))}`): {_cell(str(by['reason']))}"
    )


def _env_diffs(results: Sequence[BenchmarkResult]) -> list[str]:
    diffs = [
        (r, r.comparison.env_diff)
        for r in results
        if r.comparison is not None and r.comparison.env_diff
    ]
    if not diffs:
        return []
    lines = [
        "",
        "<details><summary>Environment differences (verdict: incomparable)</summary>",
        "",
        "| benchmark | field | baseline | now |",
        "|---|---|---|---|",
    ]
    seen: set[tuple[str, str]] = set()
    for r, diff in diffs:
        for field, (old, new) in sorted(diff.items()):
            if (field, str(new)) in seen and len(diffs) > 3:
                continue
            seen.add((field, str(new)))
            lines.append(
                f"| `{_cell(short_name(r))}` | `{field}` | `{_cell(str(old))}` | "
                f"`{_cell(str(new))}` |"
            )
    return [*lines, "", "</details>"]


def _environment_line(env: Mapping[str, Any]) -> str:
    cpu = (env.get("cpu") or {}).get("model", "?")
    gpu = env.get("gpu")
    gpus = ", ".join(sorted({d["name"] for d in gpu["devices"]})) if gpu else "no GPU"
    pkgs = env.get("packages") or {}
    versions = ", ".join(
        f"{k} {pkgs[k]}" for k in ("torch", "onnxruntime", "onnxruntime-gpu") if k in pkgs
    )
    return (
        f"<sub>Environment `{env.get('key')}`: {cpu}; {gpus}"
        f"{'; ' + versions if versions else ''}.</sub>"
    )


# --- GitHub workflow commands ----------------------------------------------------------


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(
    results: Sequence[BenchmarkResult], rootdir: Path, workspace: Path | None
) -> list[str]:
    """``::error`` workflow commands for regressions, pointing at the test function."""
    out = []
    for r in results:
        c = r.comparison
        if c is None or c.verdict is not Verdict.REGRESSION:
            continue
        props = [f"title={_escape_property('Performance regression: ' + short_name(r))}"]
        if r.path:
            path = (rootdir / r.path).resolve()
            if workspace is not None:
                try:
                    path = path.relative_to(workspace.resolve())
                except ValueError:
                    pass
            props.insert(0, f"file={_escape_property(str(path))}")
            if r.lineno:
                props.insert(1, f"line={r.lineno}")
        message = c.message or f"ratio {fmt_ratio(c)}"
        out.append(f"::error {','.join(props)}::{_escape_data(message)}")
    return out
