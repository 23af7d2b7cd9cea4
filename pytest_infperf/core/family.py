"""The run's family: how many claims a run makes, over which its chance of failing with
nothing changed is held to ``run_alpha``. Defined here once, for every path that claims:
the interleaved run-level guard, a stored claim on fresh samples, the device-time rule,
a merge of shards and ``infperf compare``.

A claim is one judged part of one benchmark: a perf test counts as many benchmarks as it
makes (``session/facts.family``), and a benchmark as many parts as it judges (a
generation's TTFT and TPOT, a CUDA benchmark's latency and device time). The family is
fixed before any test runs, so each claim is held to Bonferroni's ``run_alpha / claims``
(Holm over the claims flagged so far would be over a family that grows during the run).

What a test makes is known before it runs only where a baseline holds it; elsewhere (a new
test, ``--perf-ab`` without a stored baseline) it counts as one. Each test is allotted its
share of ``run_alpha`` before any test runs, the benchmarks it was counted for over the
family; a test that makes more than that spends its own share over all it made, held at
its end to :func:`of_test` (its claims are not final before: they fail the test after its
body ran). The shares sum to ``run_alpha`` however many benchmarks a test makes.
"""

from __future__ import annotations


def claims(benchmarks: int, parts: int = 1) -> int:
    """How many claims a run of ``benchmarks`` benchmarks of ``parts`` judged parts makes."""
    return max(1, benchmarks) * max(1, parts)


def of_test(benchmarks: int, made: int, counted: int) -> int:
    """The family a test's claims are held to: the run's ``benchmarks`` where the test made
    at most the ``counted`` it was allotted, else that family times ``made / counted`` (its
    share of the run's alpha spread over every benchmark it made), rounded up."""
    counted, benchmarks = max(1, counted), max(1, benchmarks)
    return benchmarks if made <= counted else -(-benchmarks * made // counted)


def level(run_alpha: float, benchmarks: int, parts: int = 1) -> float:
    """The level each claim is held to."""
    return run_alpha / claims(benchmarks, parts)


def words(benchmarks: int, parts: int = 1) -> str:
    """The family, said: "200 benchmarks", "12 benchmarks x 2 parts"."""
    said = f"{max(1, benchmarks)} benchmark{'s' if max(1, benchmarks) != 1 else ''}"
    return said + (f" x {parts} parts" if parts > 1 else "")
