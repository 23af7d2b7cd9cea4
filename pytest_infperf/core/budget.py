"""The run's time budget (``--perf-budget``): how much a comparing run may spend beyond
measuring each benchmark once. Pure (a clock and a number): the session makes one, the
settling and the interleaved runs ask it before they spend more.

A budget is seconds (``120``, ``120s``) or a multiple of the plain run (``1.5x``), which a
comparison knows from its baseline's document (``run_seconds``, recorded by
``--perf-save``). It decides what is measured, never a verdict's rule: a benchmark's own
measurement always runs, and so does everything that might still end in a failing test;
settling a verdict that passes either way, and the process pairs after the first of one,
run only while the budget lasts, and what it left undecided says so.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time


class BudgetError(ValueError):
    """A ``--perf-budget`` value that is neither seconds nor a multiple."""


@dataclasses.dataclass(frozen=True)
class BudgetSpec:
    """``--perf-budget`` as given: seconds, or a multiple of the plain run."""

    seconds: float | None = None
    multiple: float | None = None

    @classmethod
    def parse(cls, text: str) -> BudgetSpec | None:
        """``text`` as a budget; None for ``off`` or ``none`` (a flag that turns off an ini
        key's budget)."""
        value = text.strip().lower()
        if value in ("off", "none"):
            return None
        try:
            if value.endswith("x"):
                multiple = float(value[:-1])
                if not 1.0 <= multiple < math.inf:
                    raise BudgetError
                return cls(multiple=multiple)
            seconds = float(value[:-1] if value.endswith("s") else value)
            if not 0 < seconds < math.inf:
                raise BudgetError
            return cls(seconds=seconds)
        except (ValueError, BudgetError):
            raise BudgetError(
                f"--perf-budget / infperf_budget = {text!r}: expected seconds (120 or 120s), "
                "a multiple of the plain run of at least 1 (1.5x), or off"
            ) from None

    def describe(self) -> str:
        return f"{self.seconds:g} s" if self.seconds is not None else f"{self.multiple:g}x"


@dataclasses.dataclass(frozen=True)
class Spare:
    """What a run's budget has left, as the comparing policy reads it (:meth:`Budget.view`)."""

    #: Seconds left beyond what the benchmarks still to come need for their own measurement.
    seconds: float
    #: One benchmark's share of the plain run (0: unknown).
    share: float = 0.0
    #: Benchmarks on a moved machine sent to the stored pass instead of interleaving at
    #: once, and how many of those still needed settling.
    refused: int = 0
    resettled: int = 0
    #: What a verdict the budget left unsettled says.
    why: str = "the run's budget was spent"


@dataclasses.dataclass
class Budget:
    """A run's budget: ``seconds`` from ``started`` (a ``time.monotonic()`` reading)."""

    seconds: float
    started: float
    #: For people: "1.5x (a plain run of 63 s)" or "120 s".
    text: str = ""
    #: The baseline's plain run (seconds; None when not recorded), and the benchmarks
    #: collected and measured so far: what the rest of the run still needs.
    plain_s: float | None = None
    total: int = 0
    measured: set[str] = dataclasses.field(default_factory=set)
    #: Benchmarks on a moved machine sent to the stored pass instead of interleaving at
    #: once, and how many of those the stored pass could not spare settling.
    unrouted: int = 0
    resettled: int = 0
    #: How many perf tests the baseline's plain run measured (0: not known): its seconds
    #: were theirs, so one test's share is the plain run over them, whatever this run
    #: selected (a ``-k`` subset keeps the share of a full run's test).
    plain_count: int = 0

    def view(self) -> Spare:
        """What the comparing policy reads of it (``judge.policy``)."""
        return Spare(self.spare(), self.share(), self.unrouted, self.resettled, self.why())

    @classmethod
    def of(
        cls,
        spec: BudgetSpec | None,
        plain_s: float | None,
        started: float,
        plain_count: int = 0,
    ) -> tuple[Budget | None, str | None]:
        """The budget of ``spec``, and why there is none when a multiple has no plain run
        to multiply (a baseline saved before ``run_seconds`` was recorded)."""
        if spec is None:
            return None, None
        if spec.seconds is not None:
            budget = cls(spec.seconds, started, spec.describe(), plain_s, plain_count=plain_count)
            return budget, None
        assert spec.multiple is not None
        if not plain_s:
            return None, (
                f"--perf-budget={spec.describe()}: no stored run time to multiply (--perf-ab "
                "stores none; a baseline saved before pytest-infperf recorded it has none); "
                "no budget this run (give seconds instead, or save the baseline again)"
            )
        text = f"{spec.describe()} (a plain run of {plain_s:.0f} s)"
        return cls(spec.multiple * plain_s, started, text, plain_s, plain_count=plain_count), None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self) -> float:
        return self.seconds - self.elapsed()

    @property
    def done(self) -> int:
        return len(self.measured)

    def why(self) -> str:
        """What a verdict the budget cut short says."""
        return f"the run's budget ({self.text}) was spent"

    def share(self) -> float:
        """One benchmark's share of the plain run (0 when either is unknown)."""
        count = self.plain_count or self.total
        return self.plain_s / count if self.plain_s and count else 0.0

    def spare(self) -> float:
        """Seconds left for what is not a benchmark's own measurement: what is left, less
        the share of the plain run the benchmarks still to come need for theirs. So the
        first benchmarks cannot spend what the last ones need."""
        return self.left() - self.share() * max(self.total - self.done, 0)


def process_started() -> float:
    """This process's start as a ``time.monotonic()`` reading, so that pytest's own start-up
    (imports, collection, finding the baseline) counts toward a run's seconds, the
    recorded ``run_seconds`` and a budget alike. From Linux's /proc (no import: this runs
    at start-up); elsewhere, or if it reads oddly, now."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat") as f:
            # Field 22 is the start time in clock ticks after boot; the command name in
            # field 2 may hold spaces, so count from its closing parenthesis.
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return now
    return now - age if 0.0 <= age < 3600.0 else now
