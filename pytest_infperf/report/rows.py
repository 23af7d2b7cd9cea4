"""The report model: what every view shows of a result, computed once.

The terminal, Markdown and HTML each draw a results table and a generation table; before
this module each computed its own cells, and they disagreed (the results table showed
the TPOT the verdict was judged on, from the interleaved run; the generation table the
first pass's). A :class:`ResultRow` and a :class:`GenerationRow` hold the figures once,
the judged ones where a comparison judged them, and each view only lays them out (its
own marks for a verdict, its own markup).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..core.names import Metric
from ..core.options import GENERATION_METRICS
from ..core.results import METRIC_LABELS, Comparison
from .fmt import fmt_catch, fmt_figure, fmt_n, fmt_time, shown_figures, work_cell, work_line

#: Who decided a verdict, as every table says it.
DECIDED_BY = {"stored": "stored", "ab": "A/B"}
#: A verdict that stood on quiet evidence, by the evidence's part: a GPU's device time
#: (its clocks held), or the exact work counts of two runs that carry no reference of the
#: machine's speed (``infperf compare`` of plain runs, CPU ones included).
EVIDENCE = {"gpu_time": "by device time", "work": "by work counts"}
#: The metric a row's figures are of, where it is not the latency, as a cell says it: short,
#: since the ``by`` column beside it names the evidence in full (a table fits 120 columns).
CELL_LABELS = {**METRIC_LABELS, "gpu_time": "device"}


def decided_by(c: Comparison) -> str:
    """Who decided ``c``, as the tables say it: the quiet evidence it stood on, else the
    mode (stored, A/B)."""
    if c.evidence:
        return EVIDENCE.get(str(c.evidence.get("part")), "by work counts")
    return DECIDED_BY.get(c.decided_by or "", "-")


@dataclasses.dataclass(frozen=True)
class ResultRow:
    """One benchmark's row of the results table of a compared run."""

    name: str
    backend: str
    #: None: the benchmark was not compared (its ``now`` is this run's median).
    comparison: Comparison | None
    #: The figures the verdict was computed from (a generation's named: "TPOT 1.2 ms").
    now: str
    baseline: str
    n: str
    decided_by: str
    catch: str
    #: The work diff: a short cell (``+8.3% FLOPs``, ``same``) and its whole line (empty:
    #: none, or nothing changed).
    work: str = "-"
    work_detail: str = ""


def result_row(
    name: str, backend: str, median: float | None, comparison: Comparison | None
) -> ResultRow:
    c = comparison
    if c is None:
        return ResultRow(name, backend, None, fmt_time(median), "-", "-", "-", "-")
    # A generation benchmark's row shows the metric that decided, named.
    named = f"{CELL_LABELS[c.metric]} " if c.parts and c.metric in CELL_LABELS else ""
    now, before = shown_figures(c)
    return ResultRow(
        name=name,
        backend=backend,
        comparison=c,
        now=named + fmt_figure(c.metric, now),
        baseline=named + fmt_figure(c.metric, before),
        n=fmt_n(c),
        # A regression that stood on quiet evidence says which: the latency did not decide.
        decided_by=decided_by(c),
        catch=fmt_catch(c),
        work=work_cell(c.work),
        work_detail=work_line(c.work) if c.work is not None and not c.work.same else "",
    )


@dataclasses.dataclass(frozen=True)
class GenerationRow:
    """One generation benchmark's row: its shape, its figures (seconds; tokens/s), and
    per judged metric the comparison's part (None: not compared)."""

    prompt_tokens: Any
    new_tokens: Any
    batch_size: Any
    #: TTFT and TPOT: the figures the verdict was judged on when the benchmark was
    #: compared (an interleaved run's own), else the medians over this run's generations.
    figures: dict[str, float | None]
    itl_p99: float | None
    tokens_per_s: float | None
    decode_host_share: float | None
    parts: dict[Metric, Comparison | None]

    @property
    def compared(self) -> bool:
        return any(p is not None for p in self.parts.values())


def generation_row(generation: Mapping[str, Any], comparison: Comparison | None) -> GenerationRow:
    def stat(metric: str, name: str) -> float | None:
        value = ((generation.get(metric) or {}).get("stats") or {}).get(name)
        return None if value is None else float(value)

    parts = (comparison.parts if comparison is not None else None) or {}
    judged = {m: parts.get(m) for m in GENERATION_METRICS}
    figures: dict[str, float | None] = {}
    for m in GENERATION_METRICS:
        part = judged[m]
        figures[m] = part.current if part is not None and part.current is not None else None
        if figures[m] is None:
            figures[m] = stat(m, "median")
    share = generation.get("decode_host_bound_ratio")
    return GenerationRow(
        prompt_tokens=generation.get("prompt_tokens"),
        new_tokens=generation.get("new_tokens"),
        batch_size=generation.get("batch_size"),
        figures=figures,
        itl_p99=stat("itl", "p99"),
        tokens_per_s=stat("tokens_per_s", "median"),
        decode_host_share=None if share is None else float(share),
        parts=judged,
    )
