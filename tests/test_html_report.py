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
    # Two lines over the same five steps: each step shaded once, not darker where lines agree.
    assert len(regime) <= 5


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


def test_tick_labels_take_one_unit_per_axis_in_few_digits() -> None:
    """Ticks read like the tables (fmt_time's units), not ``0.0325 ms``."""
    from pytest_infperf.report.fmt import fmt_time
    from pytest_infperf.report.plotdata import RATE_UNITS, tick_labels

    assert tick_labels([30e-6, 32.5e-6, 35e-6]) == ["30.0 us", "32.5 us", "35.0 us"]
    assert tick_labels([0, 5e-3, 10e-3, 20e-3]) == ["0", "5 ms", "10 ms", "20 ms"]
    ticks = [i * 0.1e-3 for i in range(3, 10)]  # float steps: 0.30000000000000004e-3
    assert tick_labels(ticks) == [f"{i}00 us" for i in range(3, 10)]
    assert tick_labels([0.0325e-3]) == [fmt_time(0.0325e-3)] == ["32.5 us"]
    # The locator's ticks past the view (not drawn) do not choose the unit.
    shown = tick_labels([0.2e-3, 0.6e-3, 1.0e-3], within=(0.25e-3, 0.9e-3))
    assert shown == ["200 us", "600 us", "1000 us"]
    # Neighbours never read alike; zero needs no unit, and is never "-0".
    assert tick_labels([300e-6, 300.5e-6, 301e-6]) == ["300.0 us", "300.5 us", "301.0 us"]
    assert tick_labels([-1e-20, 1e-9, 2e-9]) == ["0", "1 ns", "2 ns"]
    assert tick_labels([0, 4e4, 1.2e5], RATE_UNITS, sep="") == ["0", "40k", "120k"]


def _tight_beside_stalls() -> tuple[Any, Any]:
    """A tight baseline, and a slower "now" with 20 stalls of up to 1.2 ms: the user's
    report drew the baseline as a line."""
    import numpy as np

    rng = np.random.default_rng(0)
    base = 300e-6 + rng.normal(0, 0.5e-6, 400)
    stalls = rng.uniform(0.6e-3, 1.2e-3, 20)
    now = np.concatenate([390e-6 + rng.normal(0, 1.5e-6, 150), stalls])
    return base, now


def test_a_tight_violin_beside_a_long_tail_keeps_its_shape() -> None:
    import numpy as np

    from pytest_infperf.report.plotdata import violin, violin_range

    base, now = _tight_beside_stalls()
    lo, hi = violin_range([base, now])
    # The axis holds both bodies, not the stalls.
    assert lo < base.min() and np.percentile(now, 75) < hi < 0.45e-3
    for samples, sigma in ((base, 0.5e-6), (now, 1.5e-6)):
        v = violin(samples, lo, hi)
        assert v.density.max() == 1.0  # each violin scaled to its own peak
        # The peak is resolved and as wide as the body (a normal's FWHM is 2.355 sigma):
        # matplotlib's bandwidth, from the stalls' standard deviation, made now's 88 us.
        top = v.coords[v.density > 0.5]
        assert len(top) >= 5
        assert 0.6 < (top.max() - top.min()) / (2.355 * sigma) < 1.6
    tail = violin(now, lo, hi)
    assert (tail.below, tail.above, tail.highest) == (0, 20, now.max())
    assert tail.tail_note().startswith("20 samples (12%) above the axis, to ")
    assert violin(base, lo, hi).tail_note() == ""
    # Identical samples (a coarse clock) are a point, not an error.
    assert violin([1e-3] * 5, *violin_range([[1e-3] * 5, [2e-3]])).density.max() == 1.0


def test_a_distribution_says_what_its_axis_cuts_and_ticks_in_one_unit() -> None:
    base, now = _tight_beside_stalls()
    svg = html.distribution_figure("test_m.py::test_m", list(now), list(base), None).svg
    texts = re.findall(r">([^<>]+)</text>", svg)
    ticks = [t for t in texts if t.endswith(" us")]
    assert ticks and all(re.fullmatch(r"\d{3} us", t) for t in ticks), texts
    assert any(t.startswith("12% off the axis, to 1.") for t in texts), texts
    tip = re.search(r'<g id="violin-now"[^>]*><title>([^<]*)</title>', svg)
    assert tip and "20 samples (12%) above the axis" in tip.group(1)


def test_a_batch_axis_is_ticked_at_the_sizes_measured() -> None:
    entries = [_entry(b, 0, 1e-4 * (1 + b / 16)) for b in (1, 8, 64)]
    for e in entries:
        del e["params"]["seq"]
    texts = re.findall(r">([^<>]+)</text>", html.scaling_figure("test_mlp", entries).svg)
    assert texts.count("64") == 2 and "100 us" in texts  # both panels; latency in us
    assert not any("^" in t or "mathdefault" in t for t in texts)


def test_the_violins_are_of_the_samples_the_verdict_came_from() -> None:
    """A settled verdict's picture is its interleaved run, not the stored pass beside a
    baseline measured another time (which read as a 30% speed-up of an unchanged model)."""
    from pytest_infperf.report import html

    stored = [1.38e-3] * 5
    settled = {
        "samples": stored,
        "comparison": {"verdict": "unchanged", "ratio": 1.0, "decided_by": "ab"},
        "extra": {"settle": {"head_samples": [9.6e-4] * 5, "base_samples": [9.7e-4] * 5}},
    }
    now, before, interleaved = html._drawn_samples(settled, {"samples": stored})
    assert (now, before, interleaved) == ([9.6e-4] * 5, [9.7e-4] * 5, True)
    plain = {"samples": stored, "comparison": {"verdict": "unchanged", "decided_by": "stored"}}
    assert html._drawn_samples(plain, {"samples": [1e-3] * 5}) == (stored, [1e-3] * 5, False)
    ab = {"samples": stored, "comparison": {"decided_by": "ab"}, "extra": {"base_samples": [2e-3]}}
    assert html._drawn_samples(ab, None) == (stored, [2e-3], True)
    svg = html.distribution_figure("t.py::t", now, before, settled["comparison"], interleaved=True)
    assert "the interleaved run" in svg.svg
