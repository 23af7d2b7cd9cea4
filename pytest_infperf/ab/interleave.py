"""Interleaved measurement: one benchmark timed on two code versions in the same job.

A stored baseline was measured at another time, maybe on another runner; a few percent of
machine drift then looks like a regression and no statistic can tell the two apart. Here
both sides run now, in alternating blocks (ABBA), and each verdict is decided on the
ratios of neighbouring blocks, in which drift common to both cancels.

The pieces (the checkouts and worker processes are :mod:`~pytest_infperf.ab.workers`):

- :class:`LocalSide`: a side for the model already prepared in this process (a worker
  side, :class:`~pytest_infperf.ab.workers.WorkerSide`, times the same in its process);
- :func:`interleave`: one process pair's blocks, alternating ABBA, taken until the judge's
  plan says the pair has enough;
- :func:`run_paired`: the process pairs of one comparison: this process with the base
  worker first, then pairs of worker processes (a head worker in the working tree and a
  base worker in the base checkout, started once and reused by later benchmarks) until the
  plan stops. The judge (:class:`~pytest_infperf.judge.PairedPlan`) decides everything:
  how many quads, how many pairs, every alpha split; this module only measures.

A crashed worker fails the test it was serving with its error and is restarted for the
next one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from statistics import median
from typing import Any, Protocol

from ..core.budget import Budget
from ..core.options import generation_metrics
from ..core.record import PairedRecord
from ..core.results import Comparison, Origin, WorkProfile
from ..judge import work as _work
from ..judge.device import gpu_withholds, host_bound_noted
from ..judge.judge import Judge, base_code_differs, no_clean_blocks
from ..judge.plan import PROFILED, Look, PairedPlan, net_of_waits
from ..judge.policy import budget_stopped, next_pair
from ..measure import cpuwait as _cpuwait
from ..measure import environment
from ..measure import memory as _memory
from ..measure import pinning as _pinning
from ..measure import tenancy as _tenancy
from ..measure.call import BenchCall, gpu_index
from ..measure.timing import Warm, take_block
from ..stats import pooled as _pool
from . import protocol
from .controller import ABController
from .workers import ABError, BaseCall, Block

#: Target duration of one block of an interleaved run, on each side. A quad (A B B A) is
#: four of them; the process pair, not the block, is the unit the verdict replicates, so
#: blocks are short and pairs many (half the 50 ms blocks of before).
#: A generation's block follows the same rule: one generation when it takes 25 ms or more.
#: It once held at least three, their median the block's figure (against the penalty of
#: the first generation after a switch). But this VM's speed moves for tens to
#: hundreds of milliseconds at a time, on the CPU (no run-queue wait to subtract), and the
#: median of three neighbouring generations does not remove that; a shorter quad cancels
#: more of it. ``python benchmarks/generation_blocks.py`` (A/A, a tiny Llama in one
#: process): the standard error times the square root of the seconds spent was 0.046
#: (TTFT) and 0.044 (TPOT) with one generation a block, 0.086 and 0.082 with three, so the
#: same error in about a third of the time (docs/MEASURED.md, "One generation a block").
BLOCK_S = 0.025


class Side(Protocol):
    """One side of an interleaved run: something that times blocks of calls on demand."""

    def block(self, count: int, calls: int, cpu: int | None = None) -> Block:
        """``count`` samples of ``calls`` calls each, in seconds per call, and what the
        sampler recorded per sample besides; ``cpu``: timed on that CPU only."""
        ...


class LocalSide:
    """The model prepared in this process (the head of ``--perf-ab``)."""

    def __init__(self, sampler: Any, disable_gc: bool) -> None:
        self.sampler = sampler
        self.disable_gc = disable_gc

    def block(self, count: int, calls: int, cpu: int | None = None) -> Block:
        return take_block(self.sampler, count, calls, self.disable_gc, cpu)


@dataclasses.dataclass
class PairRun:
    """One process pair's interleaved measurement: each side's samples, every per-sample
    figure the sides recorded, and per judged metric the quads' contrasts and switch
    penalties (log units)."""

    head: list[float]
    base: list[float]
    head_metrics: dict[str, list[float]]
    base_metrics: dict[str, list[float]]
    quads: dict[str, list[float]]
    penalties: dict[str, list[float]]
    seconds: float
    #: Which processes: "this process" for the first pair's head, else a worker's label.
    head_process: str
    #: On a GPU: each block's state, and the quads set aside (None: not a GPU benchmark).
    gpu: _tenancy.BlockTally | None = None
    #: Seconds from asking the pair's sides for the call to both being warm (not timed
    #: samples: what the pair cost besides its quads), and whether a worker process was
    #: started for it then.
    ready_s: float = 0.0
    started: bool = False
    #: Per judged metric, the quads whose contrast was taken net of run-queue waits
    #: (:func:`~pytest_infperf.judge.plan.net_of_waits`); the rest on wall time.
    net_quads: dict[str, int] = dataclasses.field(default_factory=dict)
    #: A CUDA benchmark: each side's device time per call from its profiled pass in this
    #: pair, (head, base) (None: the device time is not judged).
    device: tuple[list[float], list[float]] | None = None
    #: Whether the head led each quad (BAAB) instead of the base (ABBA).
    head_first: bool = False

    def wait_share(self, side: str) -> float | None:
        """The share of a side's sampled time its timing thread waited for a CPU that
        another task held (None where it was not recorded)."""
        figures = self.head_metrics if side == "head" else self.base_metrics
        waits = figures.get(_cpuwait.WAIT)
        total = sum(self.head if side == "head" else self.base)
        return None if not waits or total <= 0 else sum(waits) / total

    def summary(self, metric: str) -> _pool.PairSummary:
        if metric in PROFILED:
            head, base = self.device or ([], [])
            return _pool.summarize_samples(head, base)
        return _pool.summarize_pair(self.quads[metric])

    def judged(self, metric: str) -> bool:
        """Whether this pair measured ``metric`` (not every quad set aside; a profiled
        metric: both sides profiled)."""
        return bool(self.device) if metric in PROFILED else bool(self.quads.get(metric))


def interleave(
    base: Side,
    head: Side,
    calls: int,
    per_sample_s: float,
    plan: PairedPlan,
    head_process: str = "this process",
    watch: _tenancy.BlockWatch | None = None,
    cpu: int | None = None,
    head_first: bool = False,
) -> PairRun:
    """One process pair: base (A) and head (B) blocks in ABBA quads, until the plan says
    the pair has enough; ``head_first``: in BAAB quads, the head leading (every other
    process pair, so that whatever goes with leading a quad falls on each side alike).
    Each judged metric gets a quad contrast per quad: "median" is the
    time per call; a generation's metrics ("ttft", "tpot") are the figures its sampler
    recorded per generation. The first block after a switch pays a penalty (the other
    process's threads still spinning, cold caches: TTFT 27 ms against 17-21 ms back to back,
    measured with a tiny Llama on 2 cores); the quad contrast cancels its mean.

    ``watch``: on a GPU, NVML is read between blocks (never inside one); a quad with a
    throttled block, or one beside another process on the GPU, is set aside whole (its
    contrast needs all four), unless the policy keeps such blocks. ``cpu``: both sides time
    their blocks on that CPU (:mod:`~pytest_infperf.measure.pinning`)."""
    metrics = plan.quad_metrics
    count = block_count(per_sample_s)
    a_all: list[float] = []
    b_all: list[float] = []
    a_met: dict[str, list[float]] = {}
    b_met: dict[str, list[float]] = {}
    quads: dict[str, list[float]] = {m: [] for m in metrics}
    penalties: dict[str, list[float]] = {m: [] for m in metrics}
    net_quads = dict.fromkeys(metrics, 0)
    start = time.perf_counter()
    if watch is not None:
        watch.start()
    while True:
        blocks, flagged = _quad(base, head, head_first, (count, calls, cpu), watch)
        # Every block stays in the sides' samples (the record of what was measured); a set
        # aside quad only leaves the contrasts the verdict is computed from.
        a_all += blocks[0][0] + blocks[3][0]
        b_all += blocks[1][0] + blocks[2][0]
        if watch is not None and flagged and watch.tally.policy != "keep":
            watch.tally.set_aside.update({"base": 2, "head": 2})
            if not plan.more_quads(quads, time.perf_counter() - start, _gpu_progress(watch)):
                break
            continue
        for side, got in ((a_met, (blocks[0], blocks[3])), (b_met, (blocks[1], blocks[2]))):
            for _, block_metrics in got:
                for key, values in block_metrics.items():
                    side.setdefault(key, []).extend(values)
        for m in metrics:
            net = net_of_waits(m, blocks)
            net_quads[m] += net
            logs = [math.log(median(_figures(block, m, net))) for block in blocks]
            a1, b1, b2, a2 = ([v] for v in logs)
            quads[m] += _pool.quad_contrasts(a1, b1, b2, a2)
            # The penalty of running after the other process, whichever side paid it: the
            # leader's blocks in the order they ran.
            lead_first = (b1, a1, a2, b2) if head_first else (a1, b1, b2, a2)
            penalties[m] += _pool.switch_penalties(*lead_first)
        if not plan.more_quads(quads, time.perf_counter() - start, _gpu_progress(watch)):
            break
    return PairRun(
        b_all,
        a_all,
        b_met,
        a_met,
        quads,
        penalties,
        time.perf_counter() - start,
        head_process,
        None if watch is None else watch.tally,
        net_quads=net_quads,
        head_first=head_first,
    )


def _quad(
    base: Side,
    head: Side,
    head_first: bool,
    block: tuple[int, int, int | None],
    watch: _tenancy.BlockWatch | None,
) -> tuple[list[Block], bool]:
    """One quad's blocks as a1 b1 b2 a2 (base, head, head, base), whichever side led (the
    leader's blocks are the first and last it ran), and whether the watch flagged one."""
    lead, follow = (
        ((head, "head"), (base, "base")) if head_first else ((base, "base"), (head, "head"))
    )
    ran: list[Block] = []
    flagged = False
    for i, (who, label) in enumerate((lead, follow, follow, lead)):
        ran.append(who.block(*block))
        if watch is not None:
            flagged = bool(watch.block_done(label, quad_end=i == 3)) or flagged
    return ([ran[1], ran[0], ran[3], ran[2]] if head_first else ran), flagged


def _gpu_progress(watch: _tenancy.BlockWatch | None) -> tuple[int, float] | None:
    """What the plan needs of a pair's GPU blocks: the fewer blocks of a side, and the
    larger share set aside or flagged."""
    if watch is None:
        return None
    tally = watch.tally
    return min(tally.blocks.values(), default=0), tally.share()


def block_count(per_sample_s: float) -> int:
    """Samples per block: about ``BLOCK_S`` of them, at least one."""
    return max(1, min(256, math.ceil(BLOCK_S / max(per_sample_s, 1e-9))))


def _side_values(runs: Sequence[PairRun], side: str) -> dict[str, list[float]]:
    """One side's values over all process pairs: ``"median"`` its samples (time per call),
    every per-sample figure its sampler recorded, and a CUDA benchmark's device time per
    call from its profiled passes (``"gpu_time"``)."""
    out: dict[str, list[float]] = {"median": []}
    for run in runs:
        out["median"].extend(run.head if side == "head" else run.base)
        if run.device is not None:
            out.setdefault("gpu_time", []).extend(run.device[0 if side == "head" else 1])
        for key, values in (run.head_metrics if side == "head" else run.base_metrics).items():
            if key not in _cpuwait.KEYS:  # the judge's, not a figure of the benchmark
                out.setdefault(key, []).extend(values)
    return out


def _figures(block: Block, metric: str, net: bool = False) -> list[float]:
    """A block's values of ``metric``: its samples' times, or a figure its sampler recorded;
    ``net``: less the run-queue wait recorded with each (the judge said they may be)."""
    values, metrics = block
    got = values if metric == "median" else metrics.get(metric)
    if not got:
        raise ABError(
            f"a side recorded no {metric} figures for its block: is the same call a "
            "generation benchmark (infer_bench.generate) on both sides?"
        )
    if not net:
        return got
    waits = metrics[_cpuwait.WAIT_OF[metric]]
    # What the wait leaves is at least the part of the sample spent on the CPU (positive).
    return [max(v - w, v * 1e-3) for v, w in zip(got, waits, strict=True)]


@dataclasses.dataclass
class PairedRun:
    """An interleaved comparison of one call: the verdict, each process pair's run, the
    head's warmup, and the head process's memory over its own pair."""

    comparison: Comparison
    runs: list[PairRun]
    warm: Warm
    memory: dict[str, Any]
    #: The head's work profile (this process's profiled pass; None: not profiled).
    work: WorkProfile | None = None
    #: Where each side's project modules came from, and the base's environment where it
    #: was not HEAD's as is (:meth:`ABController.proof`).
    proof: PairedRecord = dataclasses.field(default_factory=PairedRecord)

    @property
    def head(self) -> list[float]:
        return _side_values(self.runs, "head")["median"]

    @property
    def base(self) -> list[float]:
        return _side_values(self.runs, "base")["median"]

    def metrics(self, side: str) -> dict[str, list[float]]:
        """The per-sample figures the side's sampler recorded (a generation's TTFT...)."""
        out = _side_values(self.runs, side)
        del out["median"]
        return out

    def record(self) -> PairedRecord:
        """What the JSON keeps of it: per process pair its quads and summary."""
        return {
            **self.proof,
            "pairs": [
                {
                    "head_process": run.head_process,
                    "head_first": run.head_first,
                    "seconds": round(run.seconds, 3),
                    "quads": {m: [round(q, 6) for q in qs] for m, qs in run.quads.items()},
                    "switch_penalty": {
                        m: round(median(ps), 6) for m, ps in run.penalties.items() if ps
                    },
                    "ready_seconds": round(run.ready_s, 3),
                    "started_workers": run.started,
                    "net_of_waits_quads": run.net_quads,
                    "cpu_wait_share": {
                        side: None if share is None else round(share, 4)
                        for side in ("head", "base")
                        for share in (run.wait_share(side),)
                    },
                    "summary": {
                        m: run.summary(m).to_json()
                        for m in (*run.quads, *(PROFILED if run.device else ()))
                    },
                }
                for run in self.runs
            ],
        }


def run_paired(
    call: BenchCall,
    controller: ABController,
    judge: Judge,
    origin: Origin,
    warm_per_call_s: float | None = None,
    head_work: WorkProfile | None = None,
    budget: Budget | None = None,
    witness: WorkProfile | None = None,
) -> PairedRun | BaseCall:
    """``call`` interleaved with the same call of the base commit, over as many process
    pairs as the judge's plan asks for: first this process (the head, its model prepared
    here) with the controller's base worker, then pairs of worker processes. Returns the
    base side's answer instead when it is not ready (no such test or call, or its test
    failed first). ``warm_per_call_s``: the head has just been measured (settling after a
    stored pass, at this many seconds per call): only its block size is calibrated again;
    ``head_work``: its profiled pass then, reused. ``budget``: a process pair after the
    first starts only while the run's budget lasts (--perf-budget). Raises
    :class:`ABError` when the base worker crashes, and its :class:`ForeignCode` when a side
    imported the project from somewhere other than its checkout; a worker pair that fails
    ends the replication there, and says why. ``witness``: the work profile a stored
    baseline of the base commit recorded for this call, which the base side's exact counts
    must match. On any error the base worker's call is ended, never left waiting
    mid-call."""
    asked = time.perf_counter()
    fresh = controller.base.launch()
    try:
        ready = _both_ready(call, controller, warm_per_call_s)
        if isinstance(ready, BaseCall):
            return ready
        elapsed = time.perf_counter() - asked
        return _paired(
            call, controller, judge, origin, ready, elapsed, fresh, head_work, budget, witness
        )
    except BaseException:
        # The head's model raised, or Ctrl-C: the base worker is inside the same call,
        # waiting for blocks. End its test so that the next benchmark finds it idle.
        with contextlib.suppress(Exception):
            controller.end_test(call.nodeid)
        raise


def _paired(
    call: BenchCall,
    controller: ABController,
    judge: Judge,
    origin: Origin,
    ready: tuple[tuple[Warm, dict[str, str]], BaseCall],
    ready_s: float,
    fresh: bool,
    head_work: WorkProfile | None,
    budget: Budget | None,
    witness: WorkProfile | None,
) -> PairedRun:
    """:func:`run_paired` once both sides are ready."""
    (warm, here), base = ready
    opts = call.opts
    env_diff = environment.diff(call.prepared.env, base.env)
    gpu_at = gpu_index(call.prepared)
    metrics = generation_metrics(opts) if call.prepared.generation is not None else ("median",)
    on_gpu = gpu_at is not None
    plan = judge.plan(opts, metrics, gpu=on_gpu)
    local = LocalSide(call.prepared.sampler, opts.disable_gc)
    cpu = pinned_cpu(call.prepared.env, gpu_at, controller.pin_cpu)
    per_sample = warm.per_call_s * warm.block
    watch = _watcher(gpu_at, controller, judge.policy.gpu_throttle)
    started = time.perf_counter()
    _memory.before_timed()
    plan.pair_ready(ready_s)  # a first benchmark's includes the base worker's start
    runs = [
        interleave(controller.base, local, warm.block, per_sample, plan, watch=watch(), cpu=cpu)
    ]
    memory = _memory.after_timed()
    head_work, base_work = _profiles(call, controller, warm, head_work)
    device = _device_times(gpu_at, head_work, base_work)
    if device is not None:  # judged beside the quads' metrics, from the passes (no look yet)
        metrics = (*metrics, "gpu_time")
        plan = judge.plan(opts, metrics, gpu=on_gpu)
        plan.pair_ready(ready_s)
    runs[0].ready_s, runs[0].started, runs[0].device = ready_s, fresh, device
    controller.base.finish_call()
    summaries: dict[str, list[_pool.PairSummary]] = {m: [] for m in metrics}
    _add_summaries(summaries, runs[0])
    gpu = _gpu_blocks(runs)
    look = plan.look(summaries) if summaries[metrics[0]] else None
    spent = ""
    while look is not None and not look.stop:
        if gpu is not None and gpu_withholds(gpu, judge.policy.gpu_throttle):
            break
        k = len(runs)
        if spent := _budget_spent(budget, runs[-1], k, look, opts.threshold):
            break
        try:
            run = _worker_pair(controller, k, call, warm, per_sample, plan, watch(), cpu)
        except ABError as exc:  # fails as pair 1's would: the pairs so far did not decide
            raise ABError(f"process pair {k + 1} could not measure: {exc}") from exc
        runs.append(run)
        _add_summaries(summaries, run)
        gpu = _gpu_blocks(runs)
        look = plan.look(summaries)
    details: dict[str, Any] = {
        "quads": sum(len(run.quads[metrics[0]]) for run in runs),
        "block_samples": block_count(per_sample),
        "ab_seconds": round(time.perf_counter() - started, 3),
        "pair_log_ratios": {m: [round(sm.mean, 6) for sm in summaries[m]] for m in metrics},
        "pinned_cpu": cpu,
        **({"replication_stopped": spent} if spent else {}),
    }
    head, base_values = _side_values(runs, "head"), _side_values(runs, "base")
    if look is None:  # every quad was set aside: nothing to judge
        c = no_clean_blocks(opts, origin, details)
    else:
        c = budget_stopped(
            judge.interleaved(look, head, base_values, opts, origin, details, env_diff), spent
        )
    if gpu is not None:
        c = judge.gpu_checked(c, gpu)
    if look is not None and _learnable(env_diff, gpu, judge.policy.gpu_throttle):
        judge.learn(look, gpu=on_gpu)
    c = judge.against_the_work(_work.attach(c, head_work, base_work))
    c = host_bound_noted(c, _share(head))
    if differs := _work.not_the_code_of(witness, base_work):
        c = base_code_differs(c, differs)
    return PairedRun(c, runs, warm, memory, head_work, controller.proof(len(runs), here))


def _learnable(env_diff: Mapping[str, Any], gpu: Mapping[str, Any] | None, policy: str) -> bool:
    """Whether a comparison's pairs may join the suite's spread: not where the sides' own
    environments differ, nor where a GPU's state set the verdict aside."""
    return not env_diff and (gpu is None or not gpu_withholds(gpu, policy))


def _profiles(
    call: BenchCall, controller: ABController, warm: Warm, head_work: WorkProfile | None
) -> tuple[WorkProfile | None, WorkProfile | None]:
    """Each side's profiled pass, after pair 1's blocks, warm (a pass must not change what
    they time); the head's reused where it was just taken (``head_work``)."""
    if head_work is None and call.opts.profile != "off":
        head_work = call.profile(warm.per_call_s)
    return head_work, controller.base.profile(call.opts.profile, warm.per_call_s)


def _budget_spent(
    budget: Budget | None, last: PairRun, k: int, look: Look, threshold: float
) -> str:
    """Why process pair ``k + 1`` does not start for the run's budget (the policy's
    :func:`~pytest_infperf.judge.policy.next_pair`), or ""."""
    # The pooled upper bound, not a pass's moderated one: a suite's spread of few degrees
    # of freedom would keep every pair's bound past the threshold, and no pair would be cut.
    uppers = [p.upper(look.alpha) for p in look.pooled.values()]
    view = None if budget is None else budget.view()
    why = next_pair(view, last.seconds + last.ready_s, uppers, threshold)
    return f"{why} before process pair {k + 1}" if why else ""


def _device_times(
    gpu_at: int | None, head: WorkProfile | None, base: WorkProfile | None
) -> tuple[list[float], list[float]] | None:
    """Both sides' device time per call, where the benchmark runs on a GPU and both
    profiled passes saw its kernels (None: the device time is not judged)."""
    if gpu_at is None or head is None or base is None or not head.gpu_time or not base.gpu_time:
        return None
    return list(head.gpu_time), list(base.gpu_time)


def _share(head: Mapping[str, Sequence[float]]) -> float | None:
    """The head's device busy time over its latency (None: no device time)."""
    device, latency = head.get("gpu_time"), head.get("median")
    if not device or not latency:
        return None
    return median(device) / median(latency)


def _worker_pair(
    controller: ABController,
    k: int,
    call: BenchCall,
    warm: Warm,
    per_sample_s: float,
    plan: PairedPlan,
    watch: _tenancy.BlockWatch | None,
    cpu: int | None,
) -> PairRun:
    """Process pair ``k + 1``, of worker processes: both sides brought to the call (timed
    apart, as the pair's cost besides its quads), interleaved as :func:`interleave`, then
    profiled when the device time is judged."""
    pair = controller.process_pair(k)
    asked = time.perf_counter()
    started = pair.begin(call.nodeid, call.name)
    ready_s = time.perf_counter() - asked
    plan.pair_ready(ready_s)
    device = None
    try:
        # Every other pair has the head lead its quads: pair 1 (this process) the base.
        run = interleave(
            pair.base,
            pair.head,
            warm.block,
            per_sample_s,
            plan,
            pair.head.label,
            watch,
            cpu,
            head_first=k % 2 == 1,
        )
        if any(m in PROFILED for m in plan.metrics):  # after the blocks, as pair 1's
            mode = call.opts.profile
            device = _device_times(
                0,
                pair.head.profile(mode, warm.per_call_s),
                pair.base.profile(mode, warm.per_call_s),
            )
            if device is None:
                raise ABError(f"process pair {k + 1} did not measure the device time")
    finally:
        pair.finish(park=sys.exc_info()[0] is None)  # Ctrl-C, an error: no wait for a park
    run.ready_s, run.started, run.device = ready_s, started, device
    return run


def pinned_cpu(env: Mapping[str, Any], gpu_at: int | None, cpu: int | None) -> int | None:
    """The CPU both sides time this benchmark's blocks on: the session's (expert ``pin``)
    for a benchmark that runs on one thread on the CPU; None (the scheduler's choice) for one
    that runs on several threads, which would share that one CPU, and for one on a GPU,
    whose xdist workers time at once, one per GPU, and would share it too."""
    if cpu is None or gpu_at is not None:
        return None
    return cpu if _pinning.single_threaded(env) else None


def _both_ready(
    call: BenchCall, controller: ABController, warm_per_call_s: float | None
) -> tuple[tuple[Warm, dict[str, str]], BaseCall] | BaseCall:
    """The head warmed (or only re-calibrated) here and the base worker's call ready, or the
    base side's answer when it has none. The base worker builds and warms its model while
    this process warms the head's, as a worker pair's two sides do (neither is timed): one
    model preparation less to wait for per benchmark."""
    if not controller.base.request(call.nodeid):
        return controller.base.absent(call.nodeid)
    target = max(call.opts.min_sample_time, protocol.SAMPLE_TIME_S)
    if warm_per_call_s is None:
        warm = call.warm(target)
    else:
        warm = call.recalibrate(target, warm_per_call_s)
    base = controller.base.await_ready(call.name)
    controller.quiet()  # no worker of the session still collecting once blocks are timed
    # This process's model is built: where its project modules came from is known now.
    return ((warm, controller.vouch_here()), base) if base.ready else base


def _watcher(
    index: int | None, controller: ABController, policy: str
) -> Callable[[], _tenancy.BlockWatch | None]:
    """A new watch of the benchmark's GPU for each process pair (None: not on a GPU, or no
    NVML); the session's own workers are not tenants."""

    def watch() -> _tenancy.BlockWatch | None:
        if index is None:
            return None
        w = _tenancy.BlockWatch(index, controller.pids(), policy, controller.gpu_before)
        return w if w.active else None

    return watch


def _add_summaries(summaries: dict[str, list[_pool.PairSummary]], run: PairRun) -> None:
    """A process pair's summary per metric, unless it did not measure it (all its quads
    set aside)."""
    for m, values in summaries.items():
        if run.judged(m):
            values.append(run.summary(m))


def _gpu_blocks(runs: Sequence[PairRun]) -> dict[str, Any] | None:
    """The GPU blocks of every process pair so far, as one record (None: not on a GPU)."""
    tallies = [run.gpu for run in runs if run.gpu is not None]
    if not tallies:
        return None
    total = _tenancy.BlockTally(tallies[0].policy)
    for tally in tallies:
        total.merge(tally)
    return total.to_json()
