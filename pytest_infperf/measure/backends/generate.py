"""Autoregressive generation: one sample is one whole ``model.generate(...)`` call, with a
timestamp per generated token.

The timestamps come from a ``StoppingCriteria`` that transformers calls once per decoding
step, right after the step's token is chosen and appended; it never asks to stop. Greedy
decoding with ``min_new_tokens == max_new_tokens`` makes every generation produce the same
number of tokens (EOS is suppressed until the last one), so two runs do the same work.

From the timestamps ``t_1 .. t_N`` of one generation started at ``t_0`` and returned at
``t_end``: TTFT = ``t_1 - t_0`` (prefill plus generate's setup: what a caller waits for the
first token), TPOT = ``(t_N - t_1) / (N - 1)`` (the mean gap between later tokens), ITL = every
gap ``t_{i+1} - t_i``, E2E = ``t_end - t_0``.

On CUDA a decoding step ends with a host sync in transformers' loop (the "unfinished
sequences" check converts a tensor to a bool), but that sync comes *after* the stopping
criteria are called; the timestamp would be the time the host finished enqueuing the step.
So on CUDA the criterion synchronises the device first (``torch.cuda.synchronize``), and
records the host time spent before it (the enqueue) too: their ratio per step is the decode
"framework tax" (``decode_host_bound_ratio``). The extra sync costs nothing the loop does
not pay a moment later anyway. The method used is recorded with every result.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ...core.options import BenchOptions
from .. import cpuwait as _cpuwait
from .. import gpu, tenancy
from . import BackendError, Prepared, WorkTarget, require
from .torch import RecompileWatch, is_compiled, set_threads, target_device, tf32_state

#: How each timestamp was taken, recorded in the result (``generation.timing_method``).
METHOD_CPU = "stopping-criteria callback per step (host clock)"
METHOD_CUDA = "stopping-criteria callback per step, after torch.cuda.synchronize (host clock)"


class TokenClock:
    """A ``transformers.StoppingCriteria`` that timestamps every decoding step and never
    stops. (Duck-typed: transformers calls it; subclassing would import transformers.)"""

    def __init__(self, torch: Any, device: Any) -> None:
        self.torch = torch
        self.cuda = device.type == "cuda"
        self.device = device
        self.stamps: list[int] = []
        #: CUDA: host time when the criterion was called, before the sync.
        self.enqueued: list[int] = []
        #: The thread's run-queue wait at each stamp, read before it (interleaved blocks
        #: only: :func:`~pytest_infperf.measure.cpuwait.wait_ns` is None elsewhere).
        self.waits: list[int] = []

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        if self.cuda:
            self.enqueued.append(time.perf_counter_ns())
            self.torch.cuda.synchronize(self.device)
        wait = _cpuwait.wait_ns()
        if wait is not None:
            self.waits.append(wait)
        self.stamps.append(time.perf_counter_ns())
        return self.torch.zeros(input_ids.shape[0], dtype=self.torch.bool, device=input_ids.device)

    def reset(self) -> None:
        self.stamps.clear()
        self.enqueued.clear()
        self.waits.clear()


class GenerationSampler:
    """Times whole generations; keeps each one's per-token figures for :meth:`take_metrics`."""

    backend = "torch"
    #: A sample is one generation: never grouped, each has its own token timestamps.
    supports_blocks = False
    #: Host wall time (:mod:`~pytest_infperf.measure.cpuwait`).
    host_clock = True

    def __init__(
        self,
        model: Any,
        inputs: Mapping[str, Any],
        kwargs: dict[str, Any],
        torch: Any,
        device: Any,
        new_tokens: int,
        compiled: bool = False,
    ) -> None:
        #: torch.compile graphs made during the timed region (samples then include them).
        self.watch = RecompileWatch(compiled)
        self.model = model
        self.inputs = dict(inputs)
        self.torch = torch
        self.device = device
        self.new_tokens = new_tokens
        self.clock = TokenClock(torch, device)
        stopping = require("transformers").StoppingCriteriaList([self.clock])
        self.kwargs = {**kwargs, "stopping_criteria": stopping}
        self._metrics: dict[str, list[float]] = _empty()
        self.region: Any = None  # tenancy.RegionWatch across the timed region

    @contextlib.contextmanager
    def context(self) -> Iterator[None]:
        with self.torch.inference_mode():
            if self.device.type == "cuda":
                self.torch.cuda.synchronize(self.device)  # what the test queued, untimed
            yield

    def _one(self) -> tuple[int, Any]:
        clock = self.clock
        clock.reset()
        pc = time.perf_counter_ns
        t0 = pc()
        wait0 = _cpuwait.wait_ns()
        out = self.model.generate(**self.inputs, **self.kwargs)
        if clock.cuda:
            self.torch.cuda.synchronize(self.device)
        t_end = pc()
        self._record(t0, t_end)
        if wait0 is not None and len(clock.waits) == len(clock.stamps):
            self._record_waits(t0, wait0)
        return t_end - t0, out

    def _record_waits(self, t0: int, wait0: int) -> None:
        """Each generation's run-queue wait during its first token and per later token
        (read inside the stamps' windows, so never more than they span)."""
        stamps, waits, m = self.clock.stamps, self.clock.waits, self._metrics
        ttft = stamps[0] - t0
        m[_cpuwait.TTFT_WAIT].append(min(waits[0] - wait0, ttft) / 1e9)
        span = stamps[-1] - stamps[0]
        m[_cpuwait.TPOT_WAIT].append(min(waits[-1] - waits[0], span) / 1e9 / (len(stamps) - 1))

    def _record(self, t0: int, t_end: int) -> None:
        stamps = self.clock.stamps
        if len(stamps) != self.new_tokens:
            raise BackendError(
                f"generate() produced {len(stamps)} token(s) where {self.new_tokens} were asked "
                "for: something stopped it early (max_time, stop_strings or max_length in "
                "generate_kwargs or the model's generation_config); pass generate_kwargs "
                "that let it run to max_new_tokens"
            )
        m = self._metrics
        m["ttft"].append((stamps[0] - t0) / 1e9)
        gaps = [(b - a) / 1e9 for a, b in itertools.pairwise(stamps)]
        m["tpot"].append((stamps[-1] - stamps[0]) / 1e9 / (len(stamps) - 1))
        m["itl"].extend(gaps)
        m["e2e"].append((t_end - t0) / 1e9)
        enq = self.clock.enqueued
        if enq:
            # Host share of each decode step: enqueue time since the previous step's token
            # over the step's whole time. Near 1: the GPU waits on Python (framework tax).
            for i in range(1, len(stamps)):
                step = stamps[i] - stamps[i - 1]
                if step > 0:
                    m["host_share"].append((enq[i] - stamps[i - 1]) / step)

    def call(self) -> Any:
        return self._one()[1]

    def run_blocks(self, out: list[int], start: int, stop: int, block: int) -> None:
        for i in range(start, stop):
            out[i] = sum(self._one()[0] for _ in range(block))

    def begin_timed(self) -> None:
        self.watch.start()
        if self.device.type == "cuda":
            self.torch.cuda.reset_peak_memory_stats(self.device)
            # The GPU's clocks while the generations ran, as a call's region is watched:
            # the device time's drift reference (measure/drift.py).
            index = getattr(self.device, "index", None)
            at = gpu.nvml_index(index if isinstance(index, int) else 0)
            self.region = tenancy.RegionWatch(at)
            self.region.start()

    def end_timed(self, samples_ns: list[int]) -> dict[str, Any]:
        extra = self.watch.result()
        if self.device.type == "cuda":
            torch = self.torch
            extra["cuda_max_allocated_bytes"] = int(torch.cuda.max_memory_allocated(self.device))
            extra["cuda_max_reserved_bytes"] = int(torch.cuda.max_memory_reserved(self.device))
        if self.region is not None:
            region = self.region.result(len(samples_ns))
            if region:
                extra["gpu_region"] = region
        return extra

    def checkpoint(self) -> None:
        if self.region is not None:
            self.region.check()

    def take_metrics(self) -> dict[str, list[float]]:
        """The per-generation figures recorded since the last call (and forget them)."""
        taken, self._metrics = self._metrics, _empty()
        return {k: v for k, v in taken.items() if v}


def _empty() -> dict[str, list[float]]:
    keys = ("ttft", "tpot", "itl", "e2e", "host_share", _cpuwait.TTFT_WAIT, _cpuwait.TPOT_WAIT)
    return {key: [] for key in keys}


def _input_ids(inputs: Any, torch: Any) -> Any:
    if isinstance(inputs, torch.Tensor):
        return inputs
    if isinstance(inputs, Mapping) and isinstance(inputs.get("input_ids"), torch.Tensor):
        return inputs["input_ids"]
    raise BackendError(
        "infer_bench.generate() needs the prompt as a tensor of token ids or a mapping with "
        "'input_ids' (and 'attention_mask'), e.g. hf.prompt(model, batch_size=1, "
        f"prompt_tokens=64); got {type(inputs).__name__}"
    )


def _check_arguments(model: Any, max_new_tokens: Any, extra: dict[str, Any], torch: Any) -> None:
    """A clear error for what cannot be a generation benchmark."""
    if not callable(getattr(model, "generate", None)) or not isinstance(model, torch.nn.Module):
        raise BackendError(
            f"infer_bench.generate() needs a transformers model with .generate() (a "
            f"torch.nn.Module such as LlamaForCausalLM); got {type(model).__name__}. For one "
            "forward pass, use infer_bench(model, inputs)"
        )
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise BackendError(f"max_new_tokens={max_new_tokens!r}: expected an integer >= 2")
    if max_new_tokens < 2:
        raise BackendError(
            f"max_new_tokens={max_new_tokens}: at least 2 tokens are needed, since time per "
            "output token is measured between tokens"
        )
    fixed = {"max_new_tokens", "min_new_tokens", "do_sample", "num_beams", "stopping_criteria"}
    clash = sorted(fixed & set(extra))
    if clash:
        raise BackendError(
            f"generate_kwargs may not set {', '.join(clash)}: a generation benchmark is greedy "
            "with a fixed output length (max_new_tokens=) so that two runs do the same work"
        )


def _generate_kwargs(model: Any, max_new_tokens: int, extra: dict[str, Any]) -> dict[str, Any]:
    """Greedy decoding of exactly ``max_new_tokens``, plus the caller's own arguments (a
    pad token is set in ``extra`` where the model has none)."""
    kwargs: dict[str, Any] = {
        "max_new_tokens": max_new_tokens,
        "min_new_tokens": max_new_tokens,
        "do_sample": False,
        "num_beams": 1,
    }
    config = getattr(model, "generation_config", None)
    if getattr(config, "pad_token_id", None) is None and "pad_token_id" not in extra:
        # Without one, generate() warns on every call that it sets pad = eos.
        eos = getattr(config, "eos_token_id", None)
        eos = eos[0] if isinstance(eos, (list, tuple)) and eos else eos
        extra["pad_token_id"] = eos if isinstance(eos, int) else 0
    kwargs.update(extra)
    return kwargs


def prepare(
    model: Any,
    inputs: Any,
    max_new_tokens: Any,
    generate_kwargs: Mapping[str, Any] | None,
    opts: BenchOptions,
) -> Prepared:
    """A generation benchmark of ``model.generate`` on ``inputs``."""
    torch = require("torch")
    require("transformers")
    extra = dict(generate_kwargs or {})
    _check_arguments(model, max_new_tokens, extra, torch)
    ids = _input_ids(inputs, torch)
    if ids.dim() != 2:
        raise BackendError(
            f"input_ids has shape {tuple(ids.shape)}: expected (batch, prompt_tokens)"
        )
    model.eval()
    first = next(iter(model.parameters()), None)
    device = first.device if first is not None else torch.device("cpu")
    restore: Callable[[], Any] | None = None
    if opts.device:  # the model and the prompt go there, the model back after
        device = target_device(torch, opts, device, [])
        if first is not None and first.device != device:
            model.to(device)
            restore = functools.partial(model.to, first.device)
    dtype = first.dtype if first is not None else None
    feed: dict[str, Any] = dict(inputs) if isinstance(inputs, Mapping) else {"input_ids": ids}
    feed = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in feed.items()}
    if "attention_mask" not in feed:
        feed["attention_mask"] = torch.ones_like(feed["input_ids"])
    kwargs = _generate_kwargs(model, max_new_tokens, extra)
    restore_threads = set_threads(torch, opts)

    def close() -> None:
        restore_threads()
        if restore is not None:
            restore()

    # torch.compile(model), model.compile(), or the common model.forward = torch.compile(...)
    compiled = is_compiled(model) or is_compiled(getattr(model, "forward", None))
    sampler = GenerationSampler(model, feed, kwargs, torch, device, max_new_tokens, compiled)

    batch, prompt = int(ids.shape[0]), int(ids.shape[1])
    cache = extra.get("cache_implementation") or "dynamic"
    info: dict[str, Any] = {
        "torch_version": torch.__version__,
        "transformers_version": require("transformers").__version__,
        "device": str(device),
        "dtype": None if dtype is None else str(dtype).replace("torch.", ""),
        "num_threads": torch.get_num_threads(),
        "compiled": compiled,
        "model": type(model).__qualname__,
        "generate_kwargs": {
            k: v if isinstance(v, (str, int, float, bool)) else repr(v)
            for k, v in sorted(extra.items())
        },
    }
    env: dict[str, Any] = {
        "backend": "torch",
        "task": "generate",
        "device_type": device.type,
        "dtype": info["dtype"],
        "num_threads": info["num_threads"],
        "compiled": info["compiled"],
        "cache_implementation": str(cache),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(cuda_version=torch.version.cuda, gpu_name=props.name, **tf32_state(torch))
        env.update(cuda_version=info["cuda_version"])
    meta = {
        "prompt_tokens": prompt,
        "new_tokens": max_new_tokens,
        "batch_size": batch,
        "timing_method": METHOD_CUDA if device.type == "cuda" else METHOD_CPU,
        "cache_implementation": str(cache),
    }
    return Prepared(
        sampler=sampler,
        backend="torch",
        info=info,
        env=env,
        batch_size=batch,
        generation=meta,
        close=close,
        work=_work_target(sampler, device.type == "cuda", compiled),
    )


def _work_target(sampler: GenerationSampler, cuda: bool, compiled: bool) -> WorkTarget:
    """A generation's work is that of the whole generate() call: every forward pass.
    Compiled code's FLOPs are not counted: a dispatch mode around it recompiles it."""
    return WorkTarget(
        "torch",
        cuda=cuda,
        flop_call=None if compiled else sampler.call,
        notes=("torch.compile: FLOPs not counted",) if compiled else (),
    )
