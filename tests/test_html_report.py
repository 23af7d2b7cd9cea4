"""The HTML report draws a figure only where it says something, in one colour language."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("matplotlib")

from pytest_infperf.report import html


def _entry(batch: int, seq: int, median: float) -> dict[str, Any]:
    return {
        "nodeid": f"test_m.py::test_bert[{batch}-{seq}]",
        "params": {"batch": batch, "seq": seq},
        "stats": {"median": median},
        "samples": [median] * 5,
        "throughput": batch / median,
        "backend": "torch",
    }


def test_a_sequence_sweep_at_one_batch_has_no_throughput_panel() -> None:
    entries = [_entry(1, 32, 1e-3), _entry(1, 128, 2e-3)]
    plot = html.scaling_figure("test_bert", entries)
    assert "latency vs sequence length" in plot.svg
    assert "throughput vs batch size" not in plot.svg
    assert plot.png == b""  # no PNG asked for: none rendered


def test_a_batch_sweep_shades_regimes_in_colours_no_series_uses() -> None:
    entries = [_entry(b, 128, 1e-3 * (1 + b / 16)) for b in (1, 2, 4, 8, 16, 32)]
    entries += [_entry(b, 32, 0.5e-3 * (1 + b / 16)) for b in (1, 2, 4, 8, 16, 32)]
    plot = html.scaling_figure("test_bert", entries, png=True)
    assert "throughput vs batch size" in plot.svg and plot.png.startswith(b"\x89PNG")
    # Series are drawn in blues; orange and green appear only as the regimes' faint shading.
    styles = re.findall(r'style="([^"]*)"', plot.svg.lower())
    regime = [s for s in styles if any(c in s for c in html.REGIME_COLORS.values())]
    assert regime and all("opacity: 0.08" in s for s in regime)


def test_a_batch_sweep_without_sequences_gets_both_panels_apart() -> None:
    entries = [_entry(b, 0, 1e-3 * (1 + b / 16)) for b in (1, 32)]
    for e in entries:
        del e["params"]["seq"]
    svg = html.scaling_figure("test_mlp", entries).svg
    assert "latency vs batch size" in svg and "throughput vs batch size" in svg
    assert svg.count('id="axes_') == 2


def test_the_heading_names_only_what_varies() -> None:
    doc = {"benchmarks": [_entry(1, 32, 1e-3), _entry(1, 128, 2e-3)]}
    text, count = html.build(doc, None, [])
    assert count == 1
    assert "Scaling: latency vs sequence length<" in text
    assert "framework tax" not in text


def test_a_row_label_changed_once_shows_in_all_four_renderings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The results table exists once (report/rows.py): the terminal, the Markdown, the HTML
    and the PR comment all take a row's "who decided" label from it."""
    from pytest_infperf.core.names import CompareMode
    from pytest_infperf.core.results import Comparison, Verdict, document
    from pytest_infperf.report import comment, markdown, rows, text

    from .conftest import make_result

    monkeypatch.setitem(rows.DECIDED_BY, "ab", "interleaved-now")
    cmp = Comparison(
        Verdict.REGRESSION,
        ratio=1.2,
        ci_low=1.1,
        ci_high=1.3,
        current=0.0012,
        baseline=0.001,
        decided_by=CompareMode.AB,
    )
    result = make_result([0.0012] * 20, comparison=cmp)
    doc = document([result], {"key": "k"}, None)
    rendered = {
        "terminal": "\n".join(text.summary_lines([result])),
        "markdown": markdown.render([result]),
        "html": html.build(doc, None, [])[0],
        "comment": comment.body(doc)[0],
    }
    assert {k for k, v in rendered.items() if "interleaved-now" not in v} == set()
