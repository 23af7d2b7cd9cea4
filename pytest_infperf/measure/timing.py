"""The measurement engine: first call, warmup, block calibration and adaptive sampling.

PYTEST_DONT_REWRITE: no assertion rewriting in timing code.

A backend hands the engine a :class:`Sampler`: something that can make one call and fill
a preallocated list with block timings. The engine decides how many calls make a block,
how long to warm up and when to stop, and records each decision.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import math
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

from ..core.options import BenchOptions
from ..stats.descriptive import ci_rel_halfwidth
from . import cpuwait as _cpuwait
from . import memory as _memory
from . import pinning as _pinning
from .drift import summarize_probes

T = TypeVar("T")

#: Warmup stability is judged on windows of this many samples (medians compared).
STABILITY_WINDOW = 5
#: The largest block a calibration will build: 2**20 calls of a ~1 ns function.
MAX_BLOCK = 1 << 20


class Sampler(Protocol):
    """What a backend provides to the engine."""

    backend: str
    #: True when a sample may group several calls (False for per-request CUDA events).
    supports_blocks: bool

    def context(self) -> contextlib.AbstractContextManager[Any]:
        """Entered around every call the engine makes (e.g. torch.inference_mode)."""

    def call(self) -> Any:
        """One untimed call, returning the model's output."""

    def run_blocks(self, out: list[int], start: int, stop: int, block: int) -> None:
        """Fill ``out[start:stop]`` with the nanoseconds each block of ``block`` calls took."""

    def begin_timed(self) -> None:
        """Called right before the timed region (reset device peak-memory counters...)."""

    def end_timed(self, samples_ns: list[int]) -> dict[str, Any]:
        """Called right after; returns backend measurements (device memory, event times)."""

    def checkpoint(self) -> None:
        """Called between samples at every sampling checkpoint (device state readings)."""


class HostSampler:
    """Times calls with ``time.perf_counter_ns`` on the host: CPU work, or device work whose
    call already blocks until the result is ready (ORT's ``run``, a synced callable)."""

    backend = "callable"
    supports_blocks = True
    #: Its samples are host wall time, from which a run-queue wait may be taken out
    #: (:mod:`~pytest_infperf.measure.cpuwait`); a GPU-event sampler's are not.
    host_clock = True

    def __init__(
        self,
        fn: Callable[[], Any],
        sync: Callable[[], Any] | None = None,
        ctx: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
    ) -> None:
        self.fn = fn
        self.sync = sync
        self._ctx = ctx

    def context(self) -> contextlib.AbstractContextManager[Any]:
        return self._ctx() if self._ctx is not None else contextlib.nullcontext()

    def call(self) -> Any:
        __tracebackhide__ = True
        out = self.fn()
        if self.sync is not None:
            self.sync()
        return out

    def run_blocks(self, out: list[int], start: int, stop: int, block: int) -> None:
        __tracebackhide__ = True
        # The hot loop: locals bound once, one clock pair per block, nothing else inside.
        fn = self.fn
        pc = time.perf_counter_ns
        sync = self.sync
        if sync is not None:
            rng = range(block)
            for i in range(start, stop):
                t0 = pc()
                for _ in rng:
                    fn()
                sync()
                out[i] = pc() - t0
        elif block == 1:
            for i in range(start, stop):
                t0 = pc()
                fn()
                out[i] = pc() - t0
        else:
            rng = range(block)
            for i in range(start, stop):
                t0 = pc()
                for _ in rng:
                    fn()
                out[i] = pc() - t0

    def begin_timed(self) -> None:
        return None

    def end_timed(self, samples_ns: list[int]) -> dict[str, Any]:
        return {}

    def checkpoint(self) -> None:
        return None


@dataclasses.dataclass
class Measurement:
    """Raw results of one measurement, all times in seconds."""

    samples: list[float]
    warmup_samples: list[float]
    first_call: float | None
    block_size: int
    decisions: dict[str, Any]
    memory: dict[str, Any]
    backend_extra: dict[str, Any]
    first_output: Any = None
    #: Machine-speed probes taken during sampling (drift guard), or None.
    reference: dict[str, Any] | None = None
    #: Figures a sampler records per sample besides its time (a generation's TTFT, TPOT...),
    #: aligned with ``samples`` where they are per sample.
    metrics: dict[str, list[float]] = dataclasses.field(default_factory=dict)


def take_metrics(sampler: Sampler) -> dict[str, list[float]]:
    """The per-sample figures ``sampler`` recorded since the last call, when it records any
    (a generation sampler's TTFT and TPOT per generation); ``{}`` for one-time samplers."""
    take = getattr(sampler, "take_metrics", None)
    return dict(take()) if take is not None else {}


#: CPython 3.11+ keeps Python frames in chunks of this many bytes (``DATA_STACK_CHUNK_SIZE``).
_CHUNK_BYTES = 16 * 1024


def _make_anchor() -> Callable[[Callable[[], Any]], Any]:
    """A function whose frame is larger than a frame chunk: see :func:`in_test_context`.
    Four chunks' worth of locals: CPython then gives it a chunk of 128 KiB of its own,
    leaving about 56 KiB for the model's frames above it (a deep ``generate()`` stays
    inside it). The locals are never assigned: their room in the frame is what counts."""
    names = " = ".join(f"_slot{i}" for i in range(4 * _CHUNK_BYTES // 8))
    source = f"def anchor(fn):\n    if fn is None:\n        {names} = None\n    return fn()\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, "<infperf-anchor>", "exec"), namespace)
    anchor: Callable[[Callable[[], Any]], Any] = namespace["anchor"]
    return anchor


_anchor = _make_anchor()


def in_test_context(sampler: Sampler, fn: Callable[[], T]) -> T:
    """Run ``fn`` inside ``sampler.context()`` on the caller's thread, its frames anchored
    at the start of a fresh frame chunk; return what it returns and raise what it raises.

    On the caller's thread: whatever the test set up around ``infer_bench`` holds for every
    call of the model, as it does for the test's own call (with the sampler's own context
    on top: a torch model's inference mode): autocast, the default device, the current
    CUDA device and stream, torch's thread count (partly kept per thread), ``contextvars``,
    a library's ``threading.local``. On a thread
    of its own the plugin would time another model (under bf16 autocast, an fp32 one).

    Anchored: CPython 3.11+ keeps Python frames in 16 KiB chunks and frees a chunk as soon
    as the first frame in it returns. When the model's call frames start a new chunk, every
    call in the timed loop maps and unmaps memory: ``lambda: None`` took 7.6 us instead of
    33 ns at 2 stack depths in 400 (``python benchmarks/stack_cliff.py``). How deep the
    caller's stack is (pytest's hooks, other plugins, an A/B worker) would decide whether a
    benchmark falls off that cliff, so two processes running the same code could differ by
    a constant: exactly the bias an interleaved comparison cannot cancel. The anchor's
    frame is larger than a chunk, so it always starts a chunk of its own, and the frames
    below it sit at the same place in every process and at every call site. (Before 3.11
    frames are separate objects: the anchor is one harmless frame there.)

    Ctrl-C is Python's own: a ``KeyboardInterrupt`` at the model's next Python instruction
    (a call into C, such as an ONNX Runtime run, returns first), and pytest ends the run in
    order."""
    __tracebackhide__ = True
    with sampler.context():
        return _anchor(fn)  # type: ignore[no-any-return]


@contextlib.contextmanager
def _gc_disabled(disable: bool) -> Iterator[None]:
    was_enabled = gc.isenabled()
    if disable:
        gc.disable()
    try:
        yield
    finally:
        if disable and was_enabled:
            gc.enable()


def _time_block(sampler: Sampler, block: int) -> int:
    out = [0]
    sampler.run_blocks(out, 0, 1, block)
    return out[0]


def calibrate(
    sampler: Sampler, min_sample_time: float, per_call_s: float, warm_ns: list[float]
) -> tuple[int, int]:
    """Smallest power-of-two block whose duration reaches ``min_sample_time``.

    Starts from an estimate based on ``per_call_s`` and confirms it by timing blocks, which
    also serve as warmup: their per-call averages are appended to ``warm_ns``. Returns the
    block size and the number of calls spent.
    """
    if not sampler.supports_blocks or min_sample_time <= 0 or per_call_s >= min_sample_time:
        return 1, 0
    block = 1
    if per_call_s > 0:
        block = 1 << max(0, math.ceil(math.log2(min_sample_time / per_call_s)) - 1)
    target_ns = min_sample_time * 1e9
    calls = 0
    while block < MAX_BLOCK:
        took = _time_block(sampler, block)
        calls += block
        warm_ns.append(took / block)
        if took >= target_ns:
            break
        block *= 2
    return min(block, MAX_BLOCK), calls


@dataclasses.dataclass
class Warm:
    """What warming up decided: the block size, and the cold-start and warmup times."""

    block: int
    first_call_s: float | None
    first_output: Any
    warm_ns: list[float]
    decisions: dict[str, Any]
    #: Seconds per call as warmup last saw it (never empty, whatever warmup was allowed).
    per_call_s: float


def warm_up(
    sampler: Sampler,
    opts: BenchOptions,
    *,
    first: bool = True,
    check_output: Callable[[Any], None] | None = None,
    target: float | None = None,
) -> Warm:
    """First call (kept apart), minimum warmup, block calibration, then warmup until stable,
    on an anchored stack. ``target`` overrides the sample duration to calibrate for (default:
    ``min_sample_time``, stretched so half of ``max_rounds`` span ``min_time``).
    """
    __tracebackhide__ = True
    return in_test_context(
        sampler, functools.partial(_warm_up, sampler, opts, first, check_output, target)
    )


def _warm_up(
    sampler: Sampler,
    opts: BenchOptions,
    first: bool,
    check_output: Callable[[Any], None] | None,
    target: float | None,
) -> Warm:
    __tracebackhide__ = True
    pc = time.perf_counter_ns
    # --- cold start: kept apart, never a sample -----------------------------------------
    first_call_s: float | None = None
    first_output: Any = None
    if first:
        t0 = pc()
        first_output = sampler.call()
        first_call_s = (pc() - t0) / 1e9
        if check_output is not None:
            check_output(first_output)

    # --- warmup: a minimum of single calls, then blocks until stable --------------------
    warm_ns: list[float] = []
    min_warm = opts.warmup if first else min(opts.warmup, 3)
    one = [0]
    for _ in range(min_warm):
        sampler.run_blocks(one, 0, 1, 1)
        warm_ns.append(float(one[0]))
    if warm_ns:
        per_call = sorted(warm_ns)[len(warm_ns) // 2] / 1e9
    elif first_call_s is not None:
        per_call = first_call_s
    else:
        per_call = _time_block(sampler, 1) / 1e9
    if target is None:
        min_time = min(opts.min_time, opts.max_time)
        # A sample lasts at least min_sample_time, and long enough that half of max_rounds
        # samples span min_time: the median then averages over the machine's slow drift
        # instead of being a snapshot of a few milliseconds.
        target = max(opts.min_sample_time, 2.0 * min_time / opts.max_rounds)
    block, warm_calls = calibrate(sampler, target, per_call, warm_ns)
    warm_calls += min_warm
    # Stability is judged on values of the final block size only.
    stable_vals = list(warm_ns) if block == 1 else []
    deadline = pc() + int(opts.warmup_time * 1e9)
    stable = False
    tol = opts.warmup_tolerance
    blk = [0]
    while True:
        if is_stable_ns(stable_vals, tol):
            stable = True
            break
        if opts.warmup_time <= 0 or pc() >= deadline:
            break
        sampler.run_blocks(blk, 0, 1, block)
        value = blk[0] / block
        stable_vals.append(value)
        warm_ns.append(value)
        warm_calls += block
    decisions = {"warmup_calls": warm_calls, "warmup_stable": stable, "block_size": block}
    if warm_ns:
        recent = sorted(warm_ns[-STABILITY_WINDOW:])
        per_call = recent[len(recent) // 2] / 1e9
    return Warm(block, first_call_s, first_output, warm_ns, decisions, per_call)


def recalibrate(sampler: Sampler, target: float, per_call_s: float) -> Warm:
    """The block size for samples of ``target`` seconds of a model that is warm already
    (settling right after the stored pass measured it): no first call and no warmup, only
    the calibration blocks, on an anchored stack. Re-warming cost about as much as the
    interleaved run itself and bought nothing: the model had just run for seconds."""
    __tracebackhide__ = True

    def run() -> Warm:
        warm_ns: list[float] = []
        block, calls = calibrate(sampler, target, per_call_s, warm_ns)
        per_call = warm_ns[-1] / 1e9 if warm_ns else per_call_s
        decisions = {"warmup_calls": calls, "warmup_stable": True, "block_size": block}
        return Warm(block, None, None, warm_ns, {**decisions, "rewarmed": False}, per_call)

    return in_test_context(sampler, run)


def take_samples(sampler: Sampler, count: int, block: int, disable_gc: bool = True) -> list[float]:
    """``count`` samples of ``block`` calls each, in seconds per call (A/B blocks), on a
    anchored stack."""
    __tracebackhide__ = True
    return in_test_context(
        sampler, functools.partial(_take_samples, sampler, count, block, disable_gc)
    )


def take_block(
    sampler: Sampler, count: int, block: int, disable_gc: bool = True, cpu: int | None = None
) -> tuple[list[float], dict[str, list[float]]]:
    """:func:`take_samples`, with the per-sample figures the sampler recorded for exactly
    these samples (what warmup or an earlier block left is dropped first). ``cpu``: the
    block runs on that CPU only (:mod:`~pytest_infperf.measure.pinning`)."""
    __tracebackhide__ = True
    take_metrics(sampler)
    waits: dict[str, list[float]] = {}
    sample = functools.partial(_take_samples, sampler, count, block, disable_gc, waits)

    with _pinning.pinned(cpu):
        values = in_test_context(sampler, sample)
    return values, {**take_metrics(sampler), **waits}


def _take_samples(
    sampler: Sampler,
    count: int,
    block: int,
    disable_gc: bool,
    waits: dict[str, list[float]] | None = None,
) -> list[float]:
    """The samples; with ``waits``, also each sample's run-queue wait and the other
    threads' CPU time (:mod:`~pytest_infperf.measure.cpuwait`), read between samples so
    that nothing is added inside the timed calls."""
    __tracebackhide__ = True
    out = [0] * count
    scale = 1e9 * block
    tracking = _cpuwait.tracking() if waits is not None else contextlib.nullcontext()
    with _gc_disabled(disable_gc), tracking as counter:
        if waits is None or counter is None or not getattr(sampler, "host_clock", False):
            sampler.run_blocks(out, 0, count, block)
            return [v / scale for v in out]
        wait, other = waits.setdefault(_cpuwait.WAIT, []), waits.setdefault(_cpuwait.OTHERS, [])
        w0, (c0, p0) = counter.wait_ns(), _cpuwait.cpu_ns()
        for i in range(count):
            sampler.run_blocks(out, i, i + 1, block)
            w1, (c1, p1) = counter.wait_ns(), _cpuwait.cpu_ns()
            # A wait just outside the timed calls is counted too: never more than the wall
            # time the thread did not spend on the CPU.
            wait.append(min(w1 - w0, max(0, out[i] - (c1 - c0))) / scale)
            other.append(max(0, (p1 - p0) - (c1 - c0)) / scale)
            w0, c0, p0 = w1, c1, p1
    return [v / scale for v in out]


def measure(
    sampler: Sampler,
    opts: BenchOptions,
    *,
    first: bool = True,
    check_output: Callable[[Any], None] | None = None,
    probe: Callable[[], tuple[float, float]] | None = None,
) -> Measurement:
    """Warm up, calibrate and sample ``sampler`` as ``opts`` say.

    With ``first=False`` (a re-measurement) the cold first call is skipped and the warmup
    minimum is shortened: the model is already warm, only the timing is fresh. ``probe``,
    when given, is timed at every checkpoint (outside the timed blocks) to record how fast
    the machine itself ran meanwhile (the drift guard). Runs on an anchored stack.
    """
    __tracebackhide__ = True  # a model's exception should point at the model, not here
    return in_test_context(
        sampler, functools.partial(_measure, sampler, opts, first, check_output, probe)
    )


def _stop_reason(
    n: int, elapsed: float, rel: float, opts: BenchOptions, min_time_ns: float
) -> str | None:
    """Why sampling stops after ``n`` samples (None: it goes on)."""
    if n >= opts.max_rounds:
        return "max_rounds"
    if n < opts.rounds:
        return None
    if rel <= opts.precision and elapsed >= min_time_ns:
        return "precision"
    if elapsed >= opts.max_time * 1e9:
        return "max_time"
    return None


def _next_target(n: int, elapsed: float, rel: float, opts: BenchOptions, min_time_ns: float) -> int:
    """The next checkpoint: grow by a quarter, but not past the time budget, and land on
    min_time when precision is already there."""
    rounds, max_time_ns = opts.rounds, opts.max_time * 1e9
    per_sample = elapsed / n
    by_time = int((max_time_ns - elapsed) / per_sample) if per_sample > 0 else n
    step = max(1, min(max(n // 4, 5), by_time)) if n >= rounds else rounds - n
    if n >= rounds and rel <= opts.precision and per_sample > 0:
        step = max(1, min(step, int((min_time_ns - elapsed) / per_sample) + 1))
    return min(opts.max_rounds, n + step)


def _measure(
    sampler: Sampler,
    opts: BenchOptions,
    first: bool,
    check_output: Callable[[Any], None] | None,
    probe: Callable[[], tuple[float, float]] | None,
) -> Measurement:
    __tracebackhide__ = True
    pc = time.perf_counter_ns
    w = _warm_up(sampler, opts, first, check_output, None)
    block, warm_ns, decisions = w.block, w.warm_ns, dict(w.decisions)
    first_call_s, first_output = w.first_call_s, w.first_output
    min_time = min(opts.min_time, opts.max_time)

    # --- timed samples ----------------------------------------------------------------
    rounds, max_rounds = opts.rounds, opts.max_rounds
    min_time_ns = min_time * 1e9
    out = [0] * max_rounds  # preallocated: the loop only stores
    n = 0
    target = rounds
    reason = "max_rounds"
    rel = math.inf
    probes: list[tuple[float, float]] = []
    probe_ns = 0
    if probe is not None:
        probes.append(probe())
    # Run the checkpoint code once outside the memory window: its first-use imports and
    # allocations are the plugin's, not the model's.
    ci_rel_halfwidth([1.0] * 8)
    _memory.before_timed()
    take_metrics(sampler)  # warmup's figures are not samples
    sampler.begin_timed()
    cpu_start = time.process_time()
    start = pc()
    with _gc_disabled(opts.disable_gc):
        while True:
            sampler.run_blocks(out, n, target, block)
            n = target
            elapsed = pc() - start - probe_ns
            t_probe = pc()
            if probe is not None:
                probes.append(probe())
            sampler.checkpoint()
            probe_ns += pc() - t_probe
            if n >= rounds and n < max_rounds:
                rel = ci_rel_halfwidth(out[:n])
            stop = _stop_reason(n, elapsed, rel, opts, min_time_ns)
            if stop is not None:
                reason = stop
                break
            target = _next_target(n, elapsed, rel, opts, min_time_ns)
    wall = pc() - start
    cpu = time.process_time() - cpu_start
    elapsed = wall - probe_ns
    backend_extra = sampler.end_timed(out[:n])
    metrics = take_metrics(sampler)
    mem = _memory.after_timed()
    if n >= rounds and rel == math.inf:
        rel = ci_rel_halfwidth(out[:n])
    decisions.update(
        rounds=n,
        stop_reason=reason,
        timed_s=round(elapsed / 1e9, 6),
        ci_rel_halfwidth=None if rel == math.inf else round(rel, 6),
    )
    scale = 1e9 * block
    return Measurement(
        samples=[v / scale for v in out[:n]],
        warmup_samples=[v / 1e9 for v in warm_ns],
        first_call=first_call_s,
        block_size=block,
        decisions=decisions,
        memory=mem,
        backend_extra=backend_extra,
        first_output=first_output,
        reference=summarize_probes(probes, cpu / (wall / 1e9) if wall > 0 else None),
        metrics=metrics,
    )


def is_stable_ns(values: list[float], tolerance: float) -> bool:
    window = STABILITY_WINDOW
    if len(values) < 2 * window:
        return False
    last = sorted(values[-window:])[window // 2]
    prev = sorted(values[-2 * window : -window])[window // 2]
    if prev <= 0:
        return last <= 0
    return abs(last / prev - 1.0) <= tolerance
