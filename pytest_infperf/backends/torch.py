"""PyTorch backend: eval mode, ``torch.inference_mode()``, and CUDA-correct timing.

On CUDA each sample is one request: a CUDA event pair is recorded around the call and the
end event is synchronised *inside* the sample, so the sample is the latency a caller sees.
The host time to enqueue (until the call returns, before synchronising) is kept too:
``host_bound_ratio`` = median(enqueue) / median(latency) close to 1 means the GPU waits on
Python and framework dispatch (the "framework tax").
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..timing import HostSampler
from . import BackendError, Prepared, bind_call, infer_batch_size, require


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


class _RecompileWatch:
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


class TorchHostSampler(HostSampler):
    """CPU torch: host timing in blocks, under inference_mode."""

    backend = "torch"

    def __init__(self, fn: Callable[[], Any], torch: Any, compiled: bool) -> None:
        super().__init__(fn, ctx=torch.inference_mode)
        self.watch = _RecompileWatch(compiled)

    def begin_timed(self) -> None:
        self.watch.start()

    def end_timed(self, samples_ns: list[int]) -> dict[str, Any]:
        return self.watch.result()


class CudaEventSampler:
    """Per-request CUDA latency: event pair around the call, synchronised in the sample."""

    backend = "torch"
    supports_blocks = False

    def __init__(self, fn: Callable[[], Any], torch: Any, device: Any, compiled: bool) -> None:
        self.fn = fn
        self.torch = torch
        self.device = device
        self.watch = _RecompileWatch(compiled)
        self.enqueue_ns: list[int] = []
        self.device_ms: list[float] = []

    def context(self) -> contextlib.AbstractContextManager[Any]:
        return self.torch.inference_mode()  # type: ignore[no-any-return]

    def call(self) -> Any:
        out = self.fn()
        self.torch.cuda.synchronize(self.device)
        return out

    def run_blocks(self, out: list[int], start: int, stop: int, block: int) -> None:
        torch = self.torch
        fn = self.fn
        pc = time.perf_counter_ns
        start_ev = torch.cuda.Event(enable_timing=True)
        end_ev = torch.cuda.Event(enable_timing=True)
        enqueue = self.enqueue_ns
        device_ms = self.device_ms
        for i in range(start, stop):
            t0 = pc()
            start_ev.record()
            fn()
            t_enq = pc()
            end_ev.record()
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
        return extra


def _cuda_graph_fn(model: Any, inputs: Any, torch: Any) -> Callable[[], Any]:
    """Capture one call in a CUDA graph; replays reuse the static inputs and outputs."""
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


def prepare(model: Any, inputs: Any, opts: dict[str, Any]) -> Prepared:
    torch = require("torch")
    warnings: list[str] = []
    if isinstance(model, torch.nn.Module):
        model.eval()
    model_device, dtype = _model_device_dtype(model, torch)
    input_tensors = _tensors(inputs, torch)
    if opts.get("device"):
        device = torch.device(opts["device"])
    elif model_device is not None:
        device = model_device
    elif input_tensors:
        device = input_tensors[0].device
    else:
        device = torch.device("cpu")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise BackendError(
                f"the model is set to run on {device}, but torch.cuda.is_available() is "
                "False: check the NVIDIA driver and that torch was built with CUDA"
            )
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
    if isinstance(model, torch.nn.Module) and model_device is not None and model_device != device:
        model.to(device)
    # Inputs go to the model's device before timing: a copy per call is not inference.
    moved = [t for t in input_tensors if t.device != device]
    if moved:
        inputs = _map_tensors(inputs, lambda t: t.to(device), torch)
    if dtype is None and input_tensors:
        floats = [t.dtype for t in input_tensors if t.is_floating_point()]
        dtype = floats[0] if floats else None

    threads_before = torch.get_num_threads()
    close: Callable[[], None] | None = None
    if opts.get("intra_op_threads"):
        torch.set_num_threads(int(opts["intra_op_threads"]))

        def close() -> None:
            torch.set_num_threads(threads_before)

    if opts.get("cuda_graph"):
        if device.type != "cuda":
            raise BackendError("cuda_graph=True needs a model on a CUDA device")
        with torch.inference_mode():
            fn = _cuda_graph_fn(model, inputs, torch)
    else:
        fn = bind_call(model, inputs)
    if opts.get("include_copies"):
        inner = fn

        def fn() -> Any:
            return _to_host(inner(), torch)

    compiled = type(model).__name__ == "OptimizedModule" or hasattr(
        model, "_torchdynamo_orig_callable"
    )
    sampler: TorchHostSampler | CudaEventSampler
    if device.type == "cuda":
        sampler = CudaEventSampler(fn, torch, device, compiled)
    else:
        sampler = TorchHostSampler(fn, torch, compiled)

    info: dict[str, Any] = {
        "torch_version": torch.__version__,
        "device": str(device),
        "dtype": str(dtype).replace("torch.", "") if dtype is not None else None,
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
        "compiled": compiled,
        "cuda_graph": bool(opts.get("cuda_graph")),
        "include_copies": bool(opts.get("include_copies")),
        "inputs_moved_to_device": bool(moved),
        "model": type(model).__qualname__,
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
            allow_tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32),
            allow_tf32_cudnn=bool(torch.backends.cudnn.allow_tf32),
            cudnn_benchmark=bool(torch.backends.cudnn.benchmark),
            float32_matmul_precision=torch.get_float32_matmul_precision(),
        )
        env.update(
            cuda_version=info["cuda_version"],
            cudnn_version=info["cudnn_version"],
            allow_tf32_matmul=info["allow_tf32_matmul"],
            allow_tf32_cudnn=info["allow_tf32_cudnn"],
        )
    return Prepared(
        sampler=sampler,
        backend="torch",
        info=info,
        env=env,
        batch_size=infer_batch_size(inputs),
        warnings=warnings,
        close=close,
    )
