"""Turning what the user passed to ``infer_bench`` into a :class:`~pytest_infperf.timing.Sampler`.

torch and onnxruntime are never imported here: a torch model can only exist if torch was
already imported by the user's code (so ``sys.modules`` is checked), and an ORT session is
recognised by its type's module name. Each backend module is imported on first use.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...core.options import BenchOptions
from ..timing import HostSampler, Sampler


class BackendError(Exception):
    """A model or its inputs cannot be benchmarked as given; the message says how to fix it."""


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


def _is_ort_session(model: Any) -> bool:
    return type(model).__module__.startswith("onnxruntime") and hasattr(model, "get_providers")


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
    if _is_ort_session(model):
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
