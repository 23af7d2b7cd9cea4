"""Turning what the user passed to ``infer_bench`` into a :class:`~pytest_infperf.timing.Sampler`.

torch and onnxruntime are never imported here: a torch model can only exist if torch was
already imported by the user's code (so ``sys.modules`` is checked), and an ORT session is
recognised by its type's module name. Each backend module is imported on first use.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...core.options import BenchOptions
from ..timing import HostSampler, Sampler


class BackendError(Exception):
    """A model or its inputs cannot be benchmarked as given; the message says how to fix it."""


class NoDevice(BackendError):
    """The device a benchmark asks for is not on this machine at all (``cuda`` where there
    is no NVIDIA GPU): the benchmark is skipped, saying why, as a test that needs a GPU
    is on a CPU runner. A GPU torch cannot use is an error instead (a broken driver, a CPU
    build of torch on a GPU runner): skipping it would pass a gate that measured nothing."""

    def __init__(self, message: str, device: str) -> None:
        super().__init__(message)
        #: The device asked for (``cuda``, ``cuda:1``).
        self.device = device


class MissingBackendError(BackendError):
    """An optional framework (torch, onnxruntime, transformers) is not installed."""


EXTRAS = {"torch": "torch", "onnxruntime": "onnx", "transformers": "hf"}


def require(module: str) -> Any:
    """Import an optional framework or explain which extra to install."""
    try:
        return __import__(module)
    except ImportError as exc:
        extra = EXTRAS.get(module, module)
        raise MissingBackendError(
            f"{module} is not installed, and this benchmark needs it ({exc}). "
            f"Install it with: pip install 'pytest-infperf[{extra}]'"
        ) from None


class CapturedStderr:
    """A copy of what C++ code writes to file descriptor 2 inside the block (Python's own
    ``sys.stderr`` is flushed first). ORT's logger writes "EP Error ... Falling back to
    ['CPUExecutionProvider']" there while a session is built: kept, to quote ORT's own
    reason when a requested provider did not come up. Everything is written back after the
    block (not swallowed: the user still sees it) but the lines ``drop`` names: kineto's
    ``USDT: ... profiler_start`` chatter at every start and stop of ``torch.profiler``."""

    def __init__(self, drop: Callable[[str], bool] | None = None) -> None:
        self.text = ""
        self.drop = drop

    def __enter__(self) -> CapturedStderr:
        sys.stderr.flush()
        self._file = tempfile.TemporaryFile(mode="w+b")
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        data = self._file.read().decode("utf-8", "replace")
        self._file.close()
        self.text = data
        if self.drop is not None:
            data = "".join(line for line in data.splitlines(True) if not self.drop(line))
        if data:
            sys.stderr.write(data)


@dataclasses.dataclass(frozen=True)
class WorkTarget:
    """What a backend hands the profiled pass (:mod:`~pytest_infperf.measure.profile`)
    besides the sampler: how to count the work of one call."""

    #: ``torch`` (torch.profiler over the sampler's calls) or ``onnxruntime`` (the graph).
    kind: str
    #: Whether the call runs CUDA work (kernels and the device's busy time are counted).
    cuda: bool = False
    #: The eager call FLOPs are counted on: the model itself, not its CUDA graph replay or
    #: its torch.compile'd form, whose operators are not dispatched one by one (None: none).
    flop_call: Callable[[], Any] | None = None
    #: ONNX Runtime: the session, its model (a path or the serialized bytes) and its feeds.
    session: Any = None
    model: str | bytes | None = None
    feeds: Mapping[str, Any] | None = None
    #: What this benchmark's profile cannot count, said in its record.
    notes: tuple[str, ...] = ()


@dataclasses.dataclass
class Prepared:
    """A model ready to be measured."""

    sampler: Sampler
    backend: str
    info: dict[str, Any]
    #: Per-benchmark fields that must match a baseline's for a comparison to be valid.
    env: dict[str, Any]
    batch_size: int | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)
    close: Callable[[], None] | None = None
    #: A generation benchmark's fixed figures (prompt and new tokens, batch, timing method);
    #: None for one call per sample.
    generation: dict[str, Any] | None = None
    #: How the profiled pass counts its work (None: a plain callable, profiled only when
    #: it turns out to call torch).
    work: WorkTarget | None = None


def out_of_memory(exc: BaseException) -> bool:
    return type(exc).__name__ == "OutOfMemoryError" or "CUDA out of memory" in str(exc)


def device_error(exc: BaseException) -> str | None:
    """What a framework error on a GPU means, and the fix, for the errors a benchmark can
    cause by itself (None: another error, raised as it is)."""
    text = str(exc)
    if out_of_memory(exc):
        first = text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__
        return (
            f"the GPU ran out of memory in this benchmark ({first}): lower the batch size or "
            "the sequence length, or free what earlier tests hold (a session-scoped fixture's "
            "models); what this benchmark allocated is released and the next test runs"
        )
    if "Expected all tensors to be on the same device" in text:
        return (
            f"the model and its inputs are on different devices ({text.strip()[:300]}): "
            "infer_bench moves the inputs to the model's device (or to device=), so a model "
            "whose parameters or buffers sit on several devices is the likely cause; move "
            "it whole with model.to(...), or pass device='cuda:0'"
        )
    return None


def release_cuda_memory() -> None:
    """Free what CUDA's caching allocator holds for nothing (after an out-of-memory error:
    the failed call's tensors are garbage once its frames are gone)."""
    import gc

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):
            if torch.cuda.is_initialized():
                torch.cuda.empty_cache()


def runs_on_gpu(env: Mapping[str, Any]) -> bool:
    """Whether a benchmark's per-benchmark environment says it runs on an NVIDIA GPU."""
    provider = str(env.get("provider", ""))
    return env.get("device_type") == "cuda" or "CUDA" in provider or "Tensorrt" in provider


def bind_call(model: Callable[..., Any], inputs: Any) -> Callable[[], Any]:
    """The calling convention: ``model()``, ``model(**inputs)``, ``model(*inputs)`` or
    ``model(inputs)``. ``functools.partial`` keeps the per-call overhead in C."""
    if inputs is None:
        return model
    if isinstance(inputs, Mapping):
        return functools.partial(model, **inputs)
    if isinstance(inputs, (tuple, list)):
        return functools.partial(model, *inputs)
    return functools.partial(model, inputs)


def first_input(inputs: Any) -> Any:
    if isinstance(inputs, Mapping):
        return next(iter(inputs.values()), None)
    if isinstance(inputs, (tuple, list)):
        return inputs[0] if inputs else None
    return inputs


def infer_batch_size(inputs: Any) -> int | None:
    """First dimension of the first array or tensor input, if it has one."""
    shape = getattr(first_input(inputs), "shape", None)
    try:
        if shape is not None and len(shape) >= 1:
            dim = int(shape[0])
            return dim if dim >= 1 else None
    except (TypeError, ValueError):
        return None
    return None


def find_nan(output: Any, _depth: int = 0) -> str | None:
    """Where the first NaN in a model output is ('output[0]', 'logits', ...), or None.

    Understands numpy arrays, torch tensors, ORT values, floats, and nested tuples, lists and
    mappings (transformers' ModelOutput is a mapping)."""
    if _depth > 6 or output is None:
        return None
    if isinstance(output, float):
        return "output" if math.isnan(output) else None
    if isinstance(output, Mapping):
        for key, value in output.items():
            where = find_nan(value, _depth + 1)
            if where is not None:
                return f"{key}" if where == "output" else f"{key}.{where}"
        return None
    if isinstance(output, (tuple, list)):
        for index, value in enumerate(output):
            where = find_nan(value, _depth + 1)
            if where is not None:
                return f"[{index}]" if where == "output" else f"[{index}].{where}"
        return None
    module = type(output).__module__
    if module.startswith("torch"):
        if output.is_floating_point() or output.is_complex():
            return "output" if bool(output.isnan().any()) else None
        return None
    if module.startswith("onnxruntime") and hasattr(output, "numpy"):
        return find_nan(output.numpy(), _depth + 1)
    if module.startswith("numpy"):
        import numpy as np

        arr = np.asarray(output)
        if arr.dtype.kind in "fc" and bool(np.isnan(arr).any()):
            return "output"
    return None


def is_ort_session(model: Any) -> bool:
    """An ONNX Runtime session the test built (told by its type, without importing ORT)."""
    return type(model).__module__.startswith("onnxruntime") and hasattr(model, "get_providers")


def takes_device(model: Any, inputs: Any) -> bool:
    """Whether a benchmark of ``model`` on ``inputs`` runs through torch, where the
    ``device`` option applies (a module, or torch tensors among the inputs)."""
    return not isinstance(model, (str, os.PathLike)) and _uses_torch(model, inputs)


def _uses_torch(model: Any, inputs: Any) -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    if isinstance(model, torch.nn.Module):
        return True
    values: list[Any]
    if isinstance(inputs, Mapping):
        values = list(inputs.values())
    elif isinstance(inputs, (tuple, list)):
        values = list(inputs)
    else:
        values = [inputs]
    return any(isinstance(v, torch.Tensor) for v in values)


def prepare(model: Any, inputs: Any, opts: BenchOptions) -> Prepared:
    """Pick the backend for ``model`` and build its sampler."""
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if path.suffix.lower() != ".onnx":
            raise BackendError(
                f"infer_bench got the path {str(path)!r}, but only .onnx files can be "
                "loaded from a path; pass a callable or a model object instead"
            )
        if not path.is_file():
            raise BackendError(f"ONNX model file {str(path)!r} does not exist")
        from . import onnxruntime as ort_backend

        return ort_backend.prepare_path(path, inputs, opts)
    if is_ort_session(model):
        from . import onnxruntime as ort_backend

        return ort_backend.prepare_session(model, inputs, opts)
    if _uses_torch(model, inputs):
        from . import torch as torch_backend

        return torch_backend.prepare(model, inputs, opts)
    if not callable(model):
        raise BackendError(
            f"infer_bench cannot benchmark a {type(model).__name__!r}: pass a callable, a "
            "torch.nn.Module, an onnxruntime.InferenceSession, or a path to an .onnx file"
        )
    for key in (
        "providers",
        "session_options",
        "io_binding",
        "graph_optimization_level",
        "inter_op_threads",
        "device",
        "cuda_graph",
        "include_copies",
    ):
        if getattr(opts, key) not in (None, False):
            raise BackendError(
                f"option {key}= applies to torch or onnxruntime models, but this model is a "
                f"plain callable ({type(model).__name__})"
            )
    return Prepared(
        sampler=HostSampler(bind_call(model, inputs)),
        backend="callable",
        info={"callable": getattr(model, "__qualname__", type(model).__qualname__)},
        env={"backend": "callable"},
        batch_size=infer_batch_size(inputs),
    )


def prepare_generation(
    model: Any,
    inputs: Any,
    max_new_tokens: Any,
    generate_kwargs: Mapping[str, Any] | None,
    opts: BenchOptions,
) -> Prepared:
    """A generation benchmark of ``model.generate`` (``infer_bench.generate``)."""
    from . import generate

    return generate.prepare(model, inputs, max_new_tokens, generate_kwargs, opts)
