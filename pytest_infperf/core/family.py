"""The run's family: how many claims a run makes, over which its chance of failing with
nothing changed is held to ``run_alpha``. Defined here once, for every path that claims:
the interleaved run-level guard, a stored claim on fresh samples, the device-time rule,
a merge of shards and ``infperf compare``.

A claim is one judged part of one benchmark: a perf test counts as many benchmarks as it
makes (``session/facts.family``), and a benchmark as many parts as it judges (a
generation's TTFT and TPOT, a CUDA benchmark's latency and device time). The family is
known before any test runs, so each claim is held to Bonferroni's ``run_alpha / claims``
(Holm over the claims flagged so far would be over a family that grows during the run).
"""

from __future__ import annotations


def claims(benchmarks: int, parts: int = 1) -> int:
    """How many claims a run of ``benchmarks`` benchmarks of ``parts`` judged parts makes."""
    return max(1, benchmarks) * max(1, parts)


def level(run_alpha: float, benchmarks: int, parts: int = 1) -> float:
    """The level each claim is held to."""
    return run_alpha / claims(benchmarks, parts)


def words(benchmarks: int, parts: int = 1) -> str:
    """The family, said: "200 benchmarks", "12 benchmarks x 2 parts"."""
    said = f"{max(1, benchmarks)} benchmark{'s' if max(1, benchmarks) != 1 else ''}"
    return said + (f" x {parts} parts" if parts > 1 else "")
