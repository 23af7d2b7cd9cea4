"""PyTorch backend: eval mode, ``torch.inference_mode()``, and CUDA-correct timing.

On CUDA each sample is one request: a CUDA event pair is recorded around the call and the
end event is synchronised *inside* the sample, so the sample is the latency a caller sees.
The host time to enqueue (until the call returns, before synchronising) is kept too:
``host_bound_ratio`` = median(enqueue) / median(latency) close to 1 means the GPU waits on
Python and framework dispatch (the "framework tax").
"""

from __future__ import annotations

import contextlib
import functools
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ...core.options import BenchOptions
from .. import gpu, tenancy
from ..timing import HostSampler
from . import BackendError, NoDevice, Prepared, WorkTarget, bind_call, infer_batch_size, require


def _map_tensors(value: Any, fn: Callable[[Any], Any], torch: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, Mapping):
        return {k: _map_tensors(v, fn, torch) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_map_tensors(v, fn, torch) for v in value)
    if isinstance(value, list):
        return [_map_tensors(v, fn, torch) for v in value]
    return value


def _tensors(value: Any, torch: Any) -> list[Any]:
    found: list[Any] = []

    def collect(tensor: Any) -> Any:
        found.append(tensor)
        return tensor

    _map_tensors(value, collect, torch)
    return found


def _model_device_dtype(model: Any, torch: Any) -> tuple[Any, Any]:
    if isinstance(model, torch.nn.Module):
        for tensor in list(model.parameters()) + list(model.buffers()):
            dtype = tensor.dtype if tensor.is_floating_point() else None
            return tensor.device, dtype
    return None, None


def _to_host(value: Any, torch: Any) -> Any:
    return _map_tensors(value, lambda t: t.cpu(), torch)


def _dynamo_graphs() -> int | None:
    try:
        from torch._dynamo.utils import counters
    except Exception:  # torch without dynamo
        return None
    return int(counters["stats"].get("unique_graphs", 0))


class RecompileWatch:
    """Counts torch.compile graphs across the timed region: a recompile there means the
    samples include compilation."""

    def __init__(self, compiled: bool) -> None:
        self.compiled = compiled
        self.before: int | None = None

    def start(self) -> None:
        self.before = _dynamo_graphs() if self.compiled else None

    def result(self) -> dict[str, Any]:
        if self.before is None:
            return {}
        now = _dynamo_graphs()
        return {"recompiles": max(0, (now or 0) - self.before)}


def _mode(torch: Any, inference: bool) -> Callable[[], Any]:
    """What each call runs under: torch.inference_mode(), or (``inference_mode=False``) the
    grad mode the test set, as it is."""
    return torch.inference_mode if inference else contextlib.nullcontext


class TorchHostSampler(HostSampler):
    """CPU torch: host timing in blocks, under inference_mode (unless the test opts out)."""

    backend = "torch"

    def __init__(
        self, fn: Callable[[], Any], torch: Any, compiled: bool, inference: bool = True
    ) -> None:
        super().__init__(fn, ctx=_mode(torch, inference))
        self.watch = RecompileWatch(compiled)

    def begin_timed(self) -> None:
        self.watch.start()

    def end_timed(self, samples_ns: list[int]) -> dict[str, Any]:
        return self.watch.result()


class CudaEventSampler:
    """Per-request CUDA latency: event pair around the call, synchronised in the sample."""

    backend = "torch"
    supports_blocks = False

    def __init__(
        self,
        fn: Callable[[], Any],
        torch: Any,
        device: Any,
        compiled: bool,
        after: Callable[[Any], Any] | None = None,
        inference: bool = True,
    ) -> None:
        self.fn = fn
        self.mode = _mode(torch, inference)
        #: Timed after the enqueue timestamp, inside the sample (include_copies).
        self.after = after
        self.torch = torch
        self.device = device
        self.watch = RecompileWatch(compiled)
        self.enqueue_ns: list[int] = []
        self.device_ms: list[float] = []
        self._events: tuple[Any, Any] | None = None
        self.region: Any = None  # tenancy.RegionWatch across the timed region
        #: The stream the model's work is queued on: its device's current stream.
        self._stream: Any = None

    @contextlib.contextmanager
    def context(self) -> Iterator[None]:
        # The test's current device and streams stay as the test set them: the model's
        # kernels go to its device's current stream (a side stream the test entered, say),
        # and the events are recorded on that same stream (see run_blocks). What the test
        # queued before is finished first, untimed.
        with self.mode():
            self.torch.cuda.synchronize(self.device)
            self._stream = self.torch.cuda.current_stream(self.device)
            yield

    def events(self) -> tuple[Any, Any]:
        """One start/end event pair, created once (on the model's device) and reused."""
        if self._events is None:
            cuda = self.torch.cuda
            self._events = (cuda.Event(enable_timing=True), cuda.Event(enable_timing=True))
        return self._events

    def call(self) -> Any:
        out = self.fn()
        if self.after is not None:
            out = self.after(out)
        self.torch.cuda.synchronize(self.device)
        return out

    def run_blocks(self, out: list[int], start: int, stop: int, block: int) -> None:
        fn = self.fn
        pc = time.perf_counter_ns
        start_ev, end_ev = self.events()
        enqueue = self.enqueue_ns
        device_ms = self.device_ms
        after = self.after
        # Event.record() without a stream records on the *current device's* current stream:
        # a model on cuda:1 called while cuda:0 is current would be timed by events that do
        # not wait for its work, and the latency would silently become the enqueue time.
        stream = self._stream or self.torch.cuda.current_stream(self.device)
        for i in range(start, stop):
            t0 = pc()
            start_ev.record(stream)
            out_value = fn()
            t_enq = pc()
            if after is not None:
                after(out_value)
            end_ev.record(stream)
            end_ev.synchronize()
            out[i] = pc() - t0
            # Outside the sample: both events are complete, reading them costs nothing timed.
            enqueue.append(t_enq - t0)
            device_ms.append(start_ev.elapsed_time(end_ev))

    def begin_timed(self) -> None:

        self.enqueue_ns.clear()
        self.device_ms.clear()
        self.torch.cuda.reset_peak_memory_stats(self.device)
        self.watch.start()
        index = getattr(self.device, "index", None)  # a torch.device's CUDA ordinal
        self.region = tenancy.RegionWatch(gpu.nvml_index(index if isinstance(index, int) else 0))
        self.region.start()

    def checkpoint(self) -> None:
        if self.region is not None:
            self.region.check()

    def end_timed(self, samples_ns: list[int]) -> dict[str, Any]:
        torch = self.torch
        n = len(samples_ns)
        # Warmup and calibration also ran through run_blocks: keep the timed tail only.
        enqueue = self.enqueue_ns[-n:] if n else []
        device = self.device_ms[-n:] if n else []
        extra: dict[str, Any] = {
            "cuda_max_allocated_bytes": int(torch.cuda.max_memory_allocated(self.device)),
            "cuda_max_reserved_bytes": int(torch.cuda.max_memory_reserved(self.device)),
            "enqueue_samples": [v / 1e9 for v in enqueue],
            "device_samples": [v / 1e3 for v in device],
        }
        if enqueue and samples_ns:
            srt_e = sorted(enqueue)
            srt_l = sorted(samples_ns)
            extra["host_bound_ratio"] = round(srt_e[len(srt_e) // 2] / srt_l[len(srt_l) // 2], 4)
        extra.update(self.watch.result())
        if self.region is not None:
            region = self.region.result(n)
            if region:
                extra["gpu_region"] = region
        return extra


def _cuda_graph_fn(model: Any, inputs: Any, torch: Any, device: Any) -> Callable[[], Any]:
    """Capture one call in a CUDA graph; replays reuse the static inputs and outputs."""
    with torch.cuda.device(device):  # the side stream and the capture on the model's GPU
        return _capture(model, inputs, torch)


def _capture(model: Any, inputs: Any, torch: Any) -> Callable[[], Any]:
    call = bind_call(model, inputs)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm on a side stream, as the CUDA-graph docs require
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = call()

    def replay() -> Any:
        graph.replay()
        return static_out

    return replay


#: What ``device=`` takes, for the messages that refuse one.
DEVICES_ACCEPTED = (
    "'cpu', 'cuda' (the current GPU) or 'cuda:N' (the N-th visible GPU); also 'mps', 'xpu' "
    "and the other device types torch supports where it was built for them"
)


def _device(torch: Any, text: str) -> Any:
    """``device=``: a device torch knows and can place a tensor on here, else a
    ``BackendError`` naming it (torch's own error lists its internal types, from inside
    this plugin's frames)."""
    try:
        device = torch.device(text)
    except (RuntimeError, TypeError, ValueError):
        raise BackendError(
            f"device={text!r} is not a torch device: expected {DEVICES_ACCEPTED}"
        ) from None
    if device.type == "cuda":
        return device  # target_device says when CUDA is missing or the index is not there
    try:
        torch.empty(0, device=device)
    except Exception:  # torch raises several types for a backend it was not built with
        raise BackendError(
            f"device={text!r}: torch {torch.__version__} cannot place a tensor on "
            f"{device.type!r} on this machine (not built for it, or no such device here): "
            f"expected {DEVICES_ACCEPTED}"
        ) from None
    return device


def cuda_missing(torch: Any, device: Any, asked: bool) -> None:
    """Raise why ``device`` (CUDA) cannot be used here: :class:`NoDevice` (the benchmark
    is skipped) where the machine has no NVIDIA GPU and the ``device`` option asked for
    it; a :class:`BackendError` where a GPU is here but torch cannot use it."""
    build = f"torch {torch.__version__}" + ("" if torch.version.cuda else ", a CPU build")
    if asked and not gpu.nvidia_present():
        message = f"device={str(device)!r}, but this machine has no NVIDIA GPU ({build})"
        raise NoDevice(message, str(device))
    raise BackendError(
        f"the model is set to run on {device}, but torch.cuda.is_available() is False "
        f"({build}): check the NVIDIA driver and that torch was built with CUDA"
    )


def target_device(torch: Any, opts: BenchOptions, model_device: Any, tensors: list[Any]) -> Any:
    """Where the benchmark runs: the ``device`` option, else the model's, else the inputs'."""
    if opts.device:
        device = _device(torch, opts.device)
    elif model_device is not None:
        device = model_device
    elif tensors:
        device = tensors[0].device
    else:
        device = torch.device("cpu")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            cuda_missing(torch, device, asked=bool(opts.device))
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        elif device.index >= (count := torch.cuda.device_count()):
            raise BackendError(
                f"the model is set to run on {device}, but this process sees {count} GPU(s) "
                f"(cuda:0 to cuda:{count - 1}; CUDA_VISIBLE_DEVICES renumbers them)"
            )
    return device


def _describe(
    torch: Any, model: Any, device: Any, dtype: Any, opts: BenchOptions, compiled: bool, moved: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The backend info recorded and the fields of it that enter the environment key."""
    info: dict[str, Any] = {
        "torch_version": torch.__version__,
        "device": str(device),
        "dtype": str(dtype).replace("torch.", "") if dtype is not None else None,
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
        "compiled": compiled,
        "cuda_graph": bool(opts.cuda_graph),
        "include_copies": bool(opts.include_copies),
        "copies": "outputs to host" if opts.include_copies else None,
        "inputs_moved_to_device": moved,
        "model": type(model).__qualname__,
        # What each call ran under (read in the test's context, where prepare runs): the
        # grad mode, and autocast where the test entered it (the weights' dtype is above).
        "grad_mode": "inference" if opts.inference_mode else _grad_mode(torch),
        "autocast": _autocast(torch, device.type),
    }
    env: dict[str, Any] = {
        "backend": "torch",
        "device_type": device.type,
        "dtype": info["dtype"],
        "num_threads": info["num_threads"],
        "compiled": compiled,
        "cuda_graph": info["cuda_graph"],
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            cuda_version=torch.version.cuda,
            cudnn_version=torch.backends.cudnn.version(),
            gpu_name=props.name,
            cudnn_benchmark=bool(torch.backends.cudnn.benchmark),
            **tf32_state(torch),
        )
        env.update(
            cuda_version=info["cuda_version"],
            cudnn_version=info["cudnn_version"],
            allow_tf32_matmul=info["allow_tf32_matmul"],
            allow_tf32_cudnn=info["allow_tf32_cudnn"],
        )
    return info, env


def prepare(model: Any, inputs: Any, opts: BenchOptions) -> Prepared:
    torch = require("torch")
    warnings: list[str] = []
    # Each module's own mode, put back after (a frozen BatchNorm of a model left training
    # stays frozen). inference_mode=False times the model in the modes the test set.
    modes = _modes(model, torch)
    if modes and opts.inference_mode:
        model.eval()
    try:
        return _prepare(torch, model, inputs, opts, warnings, modes)
    except BaseException:
        _restore_modes(modes)
        raise


def _modes(model: Any, torch: Any) -> list[tuple[Any, bool]]:
    """Each submodule and whether it was training (none for a model that is no module)."""
    if not isinstance(model, torch.nn.Module):
        return []
    return [(m, m.training) for m in model.modules()]


def _restore_modes(modes: list[tuple[Any, bool]]) -> None:
    for module, training in modes:
        module.training = training


def _prepare(
    torch: Any,
    model: Any,
    inputs: Any,
    opts: BenchOptions,
    warnings: list[str],
    modes: list[tuple[Any, bool]],
) -> Prepared:
    model_device, dtype = _model_device_dtype(model, torch)
    input_tensors = _tensors(inputs, torch)
    device = target_device(torch, opts, model_device, input_tensors)
    restore: Callable[[], None] | None = None
    if isinstance(model, torch.nn.Module) and model_device is not None and model_device != device:
        # Modules move in place: put the caller's model back where it was afterwards (a
        # session-cached model must not stay on the GPU for the CPU tests that follow).
        model.to(device)
        restore = functools.partial(model.to, model_device)
    # Inputs go to the model's device before timing: a copy per call is not inference.
    moved = [t for t in input_tensors if t.device != device]
    if moved:
        inputs = _map_tensors(inputs, lambda t: t.to(device), torch)
    if dtype is None and input_tensors:
        floats = [t.dtype for t in input_tensors if t.is_floating_point()]
        dtype = floats[0] if floats else None

    restore_threads = set_threads(torch, opts)

    def close() -> None:
        restore_threads()
        if restore is not None:
            restore()
        _restore_modes(modes)

    if opts.cuda_graph:
        if device.type != "cuda":
            raise BackendError("cuda_graph=True needs a model on a CUDA device")
        with _mode(torch, opts.inference_mode)():
            fn = _cuda_graph_fn(model, inputs, torch, device)
    else:
        fn = bind_call(model, inputs)
    # include_copies: the device-to-host copy of the outputs is part of each sample (the
    # inputs are on the device before timing, as with ORT's IOBinding). On CUDA the copy
    # runs after the enqueue timestamp, so host_bound_ratio keeps its meaning (the model's
    # enqueue time over the latency) instead of reading ~1 for any model.
    copy = functools.partial(_to_host, torch=torch) if opts.include_copies else None
    if copy is not None and device.type != "cuda":
        inner = fn

        def fn() -> Any:
            return copy(inner())

    compiled = is_compiled(model)
    sampler: TorchHostSampler | CudaEventSampler
    if device.type == "cuda":
        sampler = CudaEventSampler(fn, torch, device, compiled, copy, opts.inference_mode)
    else:
        sampler = TorchHostSampler(fn, torch, compiled, opts.inference_mode)

    info, env = _describe(torch, model, device, dtype, opts, compiled, bool(moved))
    return Prepared(
        sampler=sampler,
        backend="torch",
        info=info,
        env=env,
        batch_size=infer_batch_size(inputs),
        warnings=warnings,
        close=close,
        work=work_target(model, inputs, device.type == "cuda", compiled, bool(opts.cuda_graph)),
    )


def eager_of(model: Any) -> Any:
    """The eager form of a compiled model (``torch.compile``'s ``_orig_mod``, a compiled
    function's original, a module compiled in place's ``forward``), or None."""
    for attr in ("_orig_mod", "_torchdynamo_orig_callable"):
        inner = getattr(model, attr, None)
        if inner is not None:
            return inner
    if getattr(model, "_compiled_call_impl", None) is not None:
        return getattr(model, "forward", None)
    return None


def work_target(model: Any, inputs: Any, cuda: bool, compiled: bool, graphed: bool) -> WorkTarget:
    """How the profiled pass counts a torch model: the profiler over the sampler's calls,
    and FLOPs over one eager call of the model (a CUDA graph's replay and compiled code
    dispatch no operators one by one; the eager model computes the same)."""
    notes: list[str] = []
    eager: Any = model
    if compiled:
        eager = eager_of(model)
    # FlopCounterMode around compiled code leaves it running eagerly for the rest of the
    # process (torch 2.13, inductor: a compiled MLP took 41 us a call before the count and
    # 227 us after): never count through a model that holds compiled code anywhere.
    if eager is not None and holds_compiled(eager):
        eager = None
    if compiled or eager is None:
        notes.append(
            "torch.compile: the operators and kernels are the compiled code's; the FLOPs "
            "are the eager model's"
            if eager is not None
            else "torch.compile: FLOPs not counted (counting them through compiled code "
            "would make it run eagerly afterwards)"
        )
    if graphed:
        notes.append(
            "CUDA graph: a replay dispatches no operators, so only kernels and the device "
            "time are counted of it; the FLOPs are the eager model's"
        )
    flop_call = None if eager is None else bind_call(eager, inputs)
    return WorkTarget("torch", cuda=cuda, flop_call=flop_call, notes=tuple(notes))


def set_threads(torch: Any, opts: BenchOptions) -> Callable[[], None]:
    """Apply ``intra_op_threads`` (torch.set_num_threads); returns what puts it back."""
    before = torch.get_num_threads()
    if opts.intra_op_threads:
        torch.set_num_threads(int(opts.intra_op_threads))

    def restore() -> None:
        if opts.intra_op_threads:
            torch.set_num_threads(before)

    return restore


def _grad_mode(torch: Any) -> str:
    if torch.is_inference_mode_enabled():
        return "inference"
    return "grad" if torch.is_grad_enabled() else "no_grad"


def _autocast(torch: Any, device_type: str) -> str | None:
    """The autocast the test entered for the model's device, as ``cpu:bfloat16`` (None:
    none)."""
    read = functools.partial(torch.is_autocast_enabled, device_type)
    if not _quiet_read(read):
        return None
    dtype = _quiet_read(functools.partial(torch.get_autocast_dtype, device_type))
    return f"{device_type}:{str(dtype).removeprefix('torch.')}"


def _quiet_read(read: Callable[[], Any]) -> Any:
    """A flag's value, or None when torch refuses to say: recording the environment must
    never fail a benchmark (nor warn, under ``filterwarnings = error``)."""

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return read()
        except (RuntimeError, AttributeError):
            return None


def tf32_state(torch: Any) -> dict[str, Any]:
    """Whether fp32 matmuls and convolutions may run in TF32, read without tripping torch.

    torch >= 2.9 has the ``fp32_precision`` API ("ieee", "tf32", or "none" = inherit);
    once a program sets it, the legacy getters (``allow_tf32``,
    ``get_float32_matmul_precision``) raise "mix of the legacy and new APIs", and reading
    them warns. So: the new API where it exists and says something, else the legacy flag;
    None when neither can be read.
    """
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    state: dict[str, Any] = {}
    for name, backend in (("matmul", matmul), ("cudnn", cudnn)):
        new = _quiet_read(functools.partial(getattr, backend, "fp32_precision"))
        if new is not None:
            new = str(new)
            state[f"fp32_precision_{name}"] = new
        if new in ("tf32", "ieee"):
            state[f"allow_tf32_{name}"] = new == "tf32"
        else:
            legacy = _quiet_read(functools.partial(getattr, backend, "allow_tf32"))
            state[f"allow_tf32_{name}"] = None if legacy is None else bool(legacy)
    state["float32_matmul_precision"] = _quiet_read(torch.get_float32_matmul_precision)
    return state


def holds_compiled(model: Any) -> bool:
    """``model`` or one of its submodules is compiled (``torch.compile``d, or compiled in
    place)."""
    if is_compiled(model):
        return True
    modules = getattr(model, "modules", None)
    return callable(modules) and any(is_compiled(m) for m in modules())


def is_compiled(model: Any) -> bool:
    """torch.compile(model) (an OptimizedModule), a compiled function, or a module compiled
    in place with ``model.compile()`` (which sets ``_compiled_call_impl``)."""
    return (
        type(model).__name__ == "OptimizedModule"
        or hasattr(model, "_torchdynamo_orig_callable")
        or getattr(model, "_compiled_call_impl", None) is not None
    )
