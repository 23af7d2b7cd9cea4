"""The gate: what a judged result means for its test.

The judge returns verdicts; the gate says which of a result's facts fail its test (a
regression no ``Perf-Accept`` covers, a blown ``max_median_ms`` budget, a baseline from
another environment under ``--perf-strict-env``, an uncompared benchmark under
``--perf-require-baseline``, a benchmark the base side could not run) and which deserve a
warning. :meth:`Gate.consequences` is a pure function of the result; :meth:`Gate.apply`
records them on it (a new comparison record, never an edited one) and returns the
failures, which the mode raises.
"""

from __future__ import annotations

import dataclasses

from ..core.record import Budget, WorkGate
from ..core.results import BenchmarkResult, Comparison, Reason, Verdict
from ..judge.accept import first_match
from ..judge.rules import Policy
from ..judge.work import more_work
from ..report import messages
from ..report.fmt import wrap


@dataclasses.dataclass(frozen=True)
class Consequences:
    """What a judged result means for its test."""

    #: The comparison as the run records it: a regression gets its failure message, an
    #: accepted one becomes ``accepted`` (None: nothing was compared).
    comparison: Comparison | None
    failures: tuple[str, ...]
    warnings: tuple[str, ...]
    #: When the test set a budget.
    budget: Budget | None
    #: When the test set a work limit.
    work_gate: WorkGate | None = None


class Gate:
    """The consequences of verdicts under one session's policy."""

    def __init__(self, policy: Policy, *, verbose: bool = False) -> None:
        self.policy = policy
        #: -v: the statistics behind a regression in its test's failure.
        self.verbose = verbose

    def consequences(self, result: BenchmarkResult) -> Consequences:
        failures: list[str] = []
        warnings: list[str] = []
        budget = None
        budget_ms = result.options.get("max_median_ms")
        if budget_ms is not None and result.samples:
            # The budget fails only when the median is surely over it: its CI's low end.
            passed = result.stats["ci_low"] * 1e3 <= budget_ms
            budget = Budget(max_median_ms=budget_ms, passed=passed)
            if not passed:
                failures.append(messages.budget_failure(result, budget_ms))
        c = result.comparison
        if c is None:
            return Consequences(None, tuple(failures), (), budget)
        if c.verdict is Verdict.INCOMPARABLE and self.policy.strict_env:
            failures.append(messages.strict_env_failure(result.key, c))
        elif c.verdict in (Verdict.NO_BASELINE, Verdict.INCOMPARABLE) and (
            self.policy.require_baseline
        ):
            failures.append(messages.unjudged_failure(result.key, c))
        if c.reason is Reason.GPU_THROTTLED and self.policy.gpu_throttle == "fail":
            failures.append(messages.gpu_failure(result.key, c))
        if c.reason is Reason.BASE_ERROR:
            # The base side could not run it (its test failed, its file could not be
            # collected or imported): nothing was compared, and a pass would say otherwise.
            failures.append(messages.base_failure(result.key, c))
        if c.verdict is Verdict.REGRESSION:
            # The record keeps the plain words; the statistics are its fields.
            c = dataclasses.replace(
                c, message=messages.failure_message(result.key, c, result.nodeid)
            )
            rule = first_match(self.policy.accept, result.key)
            if rule is None:
                failures.append(
                    messages.failure_message(result.key, c, result.nodeid, verbose=True)
                    if self.verbose
                    else c.message or ""
                )
            else:  # said by every report beside its table, not as a warning
                c = dataclasses.replace(c, verdict=Verdict.ACCEPTED, accepted_by=rule.to_json())
        else:
            warnings += messages.warnings_of(c)
        work_gate = self._work_gate(result, c, failures, warnings)
        return Consequences(c, tuple(failures), tuple(warnings), budget, work_gate)

    def _work_gate(
        self, result: BenchmarkResult, c: Comparison, failures: list[str], warnings: list[str]
    ) -> WorkGate | None:
        """``max_work_increase``: more work than the limit fails the test whatever its time
        verdict (a regression fails it already), unless a Perf-Accept rule covers it."""
        limit = result.options.get("max_work_increase")
        if limit is None:
            return None
        if c.work is None:
            if c.verdict not in (Verdict.NO_BASELINE, Verdict.INCOMPARABLE):
                warnings.append(
                    f"max_work_increase={limit:g} not checked: this run and its baseline do "
                    "not both have a work profile (profile off, a baseline saved before the "
                    "profiled pass, or a pass that counted nothing: see the JSON's work.notes)"
                )
            return {"max_work_increase": limit, "change": None, "passed": None}
        if c.work.increase is None:
            # Both sides were profiled, but no measure was counted on both without varying
            # from call to call: the limit cannot be checked, and a pass would claim it was.
            why = messages.work_unchecked(c.work)
            warnings.append(f"max_work_increase={limit:g} not checked: {why}")
            return {"max_work_increase": limit, "change": None, "passed": None, "unchecked": why}
        over = c.verdict is not Verdict.REGRESSION and more_work(c.work, float(limit))
        gate: WorkGate = {
            "max_work_increase": limit,
            "change": c.work.increase,
            "passed": not over,
            "accepted": None,
        }
        if over:
            message = messages.work_failure(result.key, c, float(limit))
            rule = first_match(self.policy.accept, result.key)
            if rule is None:
                failures.append(message)
            else:
                gate["accepted"] = rule.to_json()
                warnings.append(f"{message}; accepted by {rule.where()}: {rule.reason}")
        return gate

    def apply(self, result: BenchmarkResult) -> list[str]:
        """Record ``result``'s consequences on it; the messages that fail its test."""
        out = self.consequences(result)
        if out.budget is not None:
            result.extra["budget"] = out.budget
        if out.work_gate is not None:
            result.extra["work_gate"] = out.work_gate
        result.comparison = out.comparison
        result.warnings.extend(out.warnings)
        # What the test's failure prints, wrapped to the terminal (the record keeps its
        # lines whole: the JSON, JUnit and annotations).
        return [wrap(f) for f in out.failures]
