"""The Markdown report (``--perf-markdown``, the GitHub job summary) and GitHub annotations.

Written for a reviewer who opens a pull request: regressions first, each row with the
numbers that justify its verdict, then where the baseline came from and anything that
makes the comparison less trustworthy (environment differences, machine drift).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .report import fmt_rate, fmt_time, short_name
from .results import BenchmarkResult

MARK = {
    "regression": "🔴 regression",
    "inconclusive": "🟡 inconclusive",
    "improvement": "🟢 improvement",
    "unchanged": "✅ unchanged",
    "no-baseline": "🆕 no baseline",
    "incomparable": "⚠️ incomparable",
}
ORDER = ["regression", "inconclusive", "incomparable", "improvement", "unchanged", "no-baseline"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _ratio(c: dict[str, Any]) -> str:
    if c.get("ratio") is None:
        return "–"
    if c.get("ci_low") is None or c.get("ci_high") is None or c["ci_low"] == c["ci_high"]:
        return f"{c['ratio']:.3f}"
    level = round((1 - 2 * c.get("alpha", 0.05)) * 100)
    return f"{c['ratio']:.3f} [{c['ci_low']:.3f}, {c['ci_high']:.3f}] ({level}%)"


def _noise(r: BenchmarkResult) -> str:
    s = r.stats
    if not s.get("median"):
        return ""
    rel = s.get("iqr", 0.0) / s["median"]
    flag = {"high": "⚠️ noisy", "severe": "⚠️ very noisy"}.get(str(s.get("noise")), "")
    return f"{flag} (IQR {rel:.0%})" if flag else f"IQR {rel:.0%}"


def render(
    results: Sequence[BenchmarkResult],
    *,
    source: dict[str, Any] | None = None,
    drift: dict[str, Any] | None = None,
    warnings: Sequence[str] = (),
    environment: dict[str, Any] | None = None,
    mode: str = "stored",
    title: str = "pytest-infperf",
) -> str:
    """The whole report as Markdown."""
    compared = any(r.comparison is not None for r in results)
    counts: dict[str, int] = {}
    for r in results:
        if r.comparison is not None:
            v = str(r.comparison["verdict"])
            counts[v] = counts.get(v, 0) + 1
    n = len(results)
    lines: list[str] = []
    if compared:
        regressions = counts.get("regression", 0)
        head = (
            f"{regressions} regression{'s' * (regressions != 1)}"
            if regressions
            else "no regressions"
        )
        lines.append(f"## {title}: {head} in {n} benchmark{'s' * (n != 1)}")
        summary = ", ".join(f"{counts[v]} {v}" for v in ORDER if counts.get(v))
        lines.append("")
        lines.append(f"**{summary}**")
        if source:
            lines.append("")
            lines.append(_source_line(source, mode, results))
    else:
        lines.append(f"## {title}: {n} benchmark{'s' * (n != 1)}")
    if drift and drift.get("drifted"):
        parts = ", ".join(
            f"{k.replace('_ratio', '')} ×{v:.3f}" for k, v in drift.items() if k.endswith("_ratio")
        )
        lines += [
            "",
            "> [!WARNING]",
            f"> **Machine drift:** the fixed reference workload ran {parts} relative to "
            "the baseline's run (more than "
            f"{drift['limit']:.1%}). Verdicts against a stored baseline are unreliable "
            "now; `--perf-ab` measures both sides in one job.",
        ]
    lines += ["", *(_table(results, compared))]
    failing = [r for r in results if r.verdict == "regression"]
    if failing:
        lines += ["", "### Regressions", ""]
        for r in failing:
            lines.append(_regression_detail(r))
    env_diffs = [
        (r, r.comparison["env_diff"])
        for r in results
        if r.comparison and r.comparison.get("env_diff")
    ]
    if env_diffs:
        lines += [
            "",
            "<details><summary>Environment differences (verdict: incomparable)</summary>",
            "",
            "| benchmark | field | baseline | now |",
            "|---|---|---|---|",
        ]
        seen: set[tuple[str, str]] = set()
        for r, diff in env_diffs:
            for field, (old, new) in sorted(diff.items()):
                if (field, str(new)) in seen and len(env_diffs) > 3:
                    continue
                seen.add((field, str(new)))
                lines.append(
                    f"| `{_cell(short_name(r))}` | `{field}` | `{_cell(str(old))}` | "
                    f"`{_cell(str(new))}` |"
                )
        lines += ["", "</details>"]
    notes = [w for w in warnings if not w.startswith("environment drift")]
    if notes:
        lines += ["", "<details><summary>Warnings</summary>", ""]
        lines += [f"- {_cell(w)}" for w in notes]
        lines += ["", "</details>"]
    if environment:
        lines += ["", _environment_line(environment)]
    return "\n".join(lines) + "\n"


def _source_line(source: dict[str, Any], mode: str, results: Sequence[BenchmarkResult]) -> str:
    first = next((r.comparison for r in results if r.comparison), {}) or {}
    rule = (
        f"threshold {first.get('threshold', 0.05):.0%}, alpha {first.get('alpha', 0.05):g}, "
        f"metric {first.get('metric', 'median')}"
    )
    if mode == "ab":
        base = source.get("sha") or "?"
        return (
            f"Measured in this job against the merge-base `{str(base)[:10]}` of "
            f"`{source.get('ref')}` and HEAD, interleaved (A/B mode) · {rule}"
        )
    if source.get("origin") == "file":
        return f"Compared with `{Path(str(source.get('path'))).name}` · {rule}"
    if source.get("origin") == "commit":
        d = source.get("distance") or 0
        where = "the merge-base" if d == 0 else f"{d} commit{'s' * (d != 1)} before the merge-base"
        return (
            f"Compared with the baseline of `{str(source.get('sha'))[:10]}` ({where} of "
            f"`{source.get('ref')}` and HEAD) · {rule}"
        )
    return f"No baseline found for `{source.get('ref')}`: {source.get('note', '')}"


def _table(results: Sequence[BenchmarkResult], compared: bool) -> list[str]:
    rank = {v: i for i, v in enumerate(ORDER)}
    rows = sorted(results, key=lambda r: (rank.get(str(r.verdict), 99), r.key))
    if compared:
        out = [
            "| verdict | benchmark | median now | baseline | ratio [CI] | n now/base | noise |",
            "|---|---|---:|---:|---|---:|---|",
        ]
        for r in rows:
            c = r.comparison or {}
            n_base = c.get("n_baseline")
            n_now = r.stats.get("n")
            out.append(
                f"| {MARK.get(str(c.get('verdict')), '–')} | `{_cell(short_name(r))}` | "
                f"{fmt_time(r.stats.get('median'))} | {fmt_time(c.get('baseline_median'))} | "
                f"{_ratio(c)} | {n_now}/{n_base if n_base is not None else '–'} | "
                f"{_noise(r)} |"
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


def _regression_detail(r: BenchmarkResult) -> str:
    c = r.comparison or {}
    bits = [
        f"- **`{_cell(r.key)}`**: median {fmt_time(r.stats.get('median'))} vs "
        f"{fmt_time(c.get('baseline_median'))}, ratio {_ratio(c)}"
    ]
    if c.get("p_value") is not None:
        bits.append(f"p = {c['p_value']:.2g} for 'slower by at most {c['threshold']:.0%}'")
    if c.get("remeasured"):
        bits.append("confirmed on fresh samples")
    if r.path:
        bits.append(f"`{r.path}:{r.lineno}`")
    return "; ".join(bits)


def _environment_line(env: dict[str, Any]) -> str:
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
    results: Sequence[BenchmarkResult],
    messages: dict[str, str],
    rootdir: Path,
    workspace: Path | None,
) -> list[str]:
    """``::error`` workflow commands for regressions, pointing at the test function."""
    out = []
    for r in results:
        if r.verdict != "regression":
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
        message = messages.get(r.key) or f"ratio {_ratio(r.comparison or {})}"
        out.append(f"::error {','.join(props)}::{_escape_data(message)}")
    return out
