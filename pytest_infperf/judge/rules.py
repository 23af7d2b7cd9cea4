"""The judge's rules on top of the statistics: what a session's options ask of every
verdict (the drift guard, the run's alpha, accepted regressions, a throttled GPU, runs
without a reference of the machine's speed). The judge (:mod:`.judge`) applies them; the
comparing policy (:mod:`.policy`) decides steps, not verdicts."""

from __future__ import annotations

import dataclasses

from .accept import AcceptRule

#: What the drift guard does: widen intervals by the machine's drift ("adjust"), only report
#: it ("warn"), or take no probes ("off").
DRIFT_GUARDS = ("adjust", "warn", "off")


@dataclasses.dataclass(frozen=True)
class Policy:
    """The session's rules that apply on top of the statistics."""

    drift_guard: str = "adjust"
    drift_limit: float = 0.25
    strict_env: bool = False
    #: Each ``no-baseline`` or ``incomparable`` benchmark fails (--perf-require-baseline).
    require_baseline: bool = False
    #: Regressions the change accepts (Perf-Accept trailers, --perf-accept).
    accept: tuple[AcceptRule, ...] = ()
    #: The chance that a run in which nothing changed fails at all (--perf-run-alpha).
    run_alpha: float = 0.01
    #: What a throttled or shared GPU block does (infperf_expert's gpu_throttle).
    gpu_throttle: str = "exclude"
    #: A side that carries no reference of the machine's speed withholds a decided verdict
    #: (two stored runs compared offline: a plain run takes none, and the machine may have
    #: moved between them).
    unreferenced: bool = False
