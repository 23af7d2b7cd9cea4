"""ONNX Runtime backend.

Two facts shape it. ``onnxruntime-gpu`` without its CUDA libraries quietly runs a session on
the CPU when CUDA is requested (``get_available_providers()`` still lists CUDA;
``session.get_providers()`` tells the truth), so requested and used providers are compared
and a mismatch is an error unless ``allow_fallback=True``. And ``session.run`` with numpy
feeds copies inputs to the device and outputs back on every call, so on CUDA the default is
IOBinding with inputs and outputs resident on the device; the numpy path stays available
(``io_binding=False``) and is labelled ``copies_in_timed_region``.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...core.options import SESSION_KEYS, BenchOptions
from .. import gpu, tenancy
from ..timing import HostSampler
from . import BackendError, CapturedStderr, Prepared, WorkTarget, infer_batch_size, require

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"

_OPT_LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}

# ONNX tensor element types as ORT names them -> numpy dtype names.
_ONNX_TO_NUMPY = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(bool)": "bool",
}


def ort_distribution() -> str | None:
    """Which wheel provides the ``onnxruntime`` module: they differ in what they can run."""
    for name in ("onnxruntime-gpu", "onnxruntime", "onnxruntime-directml", "onnxruntime-openvino"):
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        return name
    return None


def _provider_names(providers: list[Any]) -> list[str]:
    return [p if isinstance(p, str) else p[0] for p in providers]


def default_providers(ort: Any) -> list[str]:
    """CUDA then CPU where this onnxruntime build offers CUDA, else CPU.

    TensorRT is never picked implicitly: its engine builds take minutes and change what is
    measured. Ask for it with ``providers=[...]``.
    """
    available = ort.get_available_providers()
    return [CUDA, CPU] if CUDA in available else [CPU]


def _check_providers(
    requested: list[str],
    used: list[str],
    allow_fallback: bool,
    where: str,
    reason: str | None = None,
) -> list[str]:
    missing = [p for p in requested if p not in used]
    if not missing:
        return []
    message = (
        f"{where}: requested execution providers {requested} but the session runs on {used}; "
        f"{', '.join(missing)} could not be initialised."
    )
    if reason:
        # ORT said why (out of memory, a graph not fully on CUDA for CUDA graphs, a
        # library path...): quote it rather than guess.
        message += f" onnxruntime said: {reason}"
    elif CUDA in missing:
        message += (
            " For CUDA this usually means the CUDA or cuDNN libraries that onnxruntime-gpu "
            "needs are missing or of the wrong version (see ORT's log above, e.g. "
            "libcublasLt.so or libcudnn.so not found). Install the matching CUDA/cuDNN, or"
            " pass providers=['CPUExecutionProvider'] to benchmark on the CPU on purpose."
        )
    if allow_fallback:
        return [message + " Timing what the session actually uses (allow_fallback=True)."]
    raise BackendError(message + " Pass allow_fallback=True to accept the fallback.")


def _session_options(ort: Any, opts: BenchOptions) -> Any:
    so = opts.session_options
    if so is None:
        so = ort.SessionOptions()
    elif not isinstance(so, ort.SessionOptions):
        raise BackendError(
            f"session_options must be an onnxruntime.SessionOptions, got {type(so).__name__}"
        )
    if opts.intra_op_threads is not None:
        so.intra_op_num_threads = int(opts.intra_op_threads)
    if opts.inter_op_threads is not None:
        so.inter_op_num_threads = int(opts.inter_op_threads)
    if opts.graph_optimization_level:
        so.graph_optimization_level = getattr(
            ort.GraphOptimizationLevel, _OPT_LEVELS[opts.graph_optimization_level]
        )
    return so


def prepare_path(path: Path, inputs: Any, opts: BenchOptions) -> Prepared:
    ort = require("onnxruntime")
    so = _session_options(ort, opts)
    requested = merge_provider_options(
        list(opts.providers) if opts.providers else default_providers(ort),
        opts.provider_options,
        bool(opts.cuda_graph),
    )
    warnings: list[str] = []
    requested, warnings = _drop_unavailable(ort, requested, bool(opts.allow_fallback))
    with CapturedStderr() as ort_log:
        try:
            session = ort.InferenceSession(str(path), sess_options=so, providers=requested)
        except Exception as exc:  # ORT raises its own Fail/InvalidGraph types
            raise BackendError(f"onnxruntime could not load {str(path)!r}: {exc}") from exc
    prepared = _prepare(
        session,
        inputs,
        opts,
        ort,
        requested=_provider_names(requested),
        source=str(path),
        ort_log=ort_log.text,
    )
    prepared.warnings[:0] = warnings
    return prepared


def merge_provider_options(
    providers: list[Any], provider_options: Mapping[str, Any] | None, cuda_graph: bool
) -> list[Any]:
    """The providers to ask for, with ``provider_options`` merged into the first one's
    options and ``enable_cuda_graph`` into CUDA's, whatever form each was given in (a name
    or a ``(name, options)`` tuple). Values are strings, as ORT's own options are."""
    out: list[Any] = []
    for i, provider in enumerate(providers):
        name, options = (provider, {}) if isinstance(provider, str) else provider
        merged = {str(k): str(v) for k, v in dict(options).items()}
        if i == 0 and provider_options:
            merged.update({str(k): str(v) for k, v in provider_options.items()})
        if cuda_graph and name == CUDA:
            merged["enable_cuda_graph"] = "1"
        out.append((name, merged) if merged else name)
    return out


def _ort_reason(log: str) -> str | None:
    """ORT's own words on why a provider failed, from its log."""
    for line in log.splitlines():
        if "EP Error" in line or "Falling back" in line or "Failed to create" in line:
            return line.strip()[:500]
    return None


def _drop_unavailable(
    ort: Any, requested: list[Any], allow_fallback: bool
) -> tuple[list[Any], list[str]]:
    """Providers this onnxruntime build does not have at all: an error naming the build and
    the fix, or (``allow_fallback=True``) dropped with a warning."""
    available = ort.get_available_providers()
    missing = [p for p in _provider_names(requested) if p not in available]
    if not missing:
        return requested, []
    build = ort_distribution() or "onnxruntime"
    message = (
        f"onnxruntime: {', '.join(missing)} is not available in this onnxruntime build "
        f"({build} {ort.__version__}, providers: {', '.join(available)})."
    )
    if CUDA in missing:
        message += (
            " For CUDA install onnxruntime-gpu instead of onnxruntime (uninstall onnxruntime "
            "first: both provide the same module), e.g. pip install 'pytest-infperf[onnx-gpu]'."
        )
    kept = [p for p in requested if (p if isinstance(p, str) else p[0]) in available]
    if not allow_fallback or not kept:
        raise BackendError(
            message + " Or pass providers=['CPUExecutionProvider'] to benchmark"
            " on the CPU on purpose, or allow_fallback=True."
        )
    return kept, [message + " Timing on the remaining providers (allow_fallback=True)."]


def prepare_session(session: Any, inputs: Any, opts: BenchOptions) -> Prepared:
    ort = require("onnxruntime")
    for key in SESSION_KEYS:
        if getattr(opts, key) is not None:
            raise BackendError(
                f"option {key}= only applies when infer_bench creates the session from an "
                ".onnx path; this session already exists, so set it when you create it"
            )
    requested = _provider_names(opts.providers) if opts.providers else None
    return _prepare(session, inputs, opts, ort, requested=requested, source="session")


def _feeds(session: Any, inputs: Any) -> dict[str, Any]:
    """Map the user's inputs onto the session's input names, checking names, dtypes and
    ranks up front so a mistake gets a message naming the input instead of an ORT trace."""
    import numpy as np

    expected = session.get_inputs()
    names = [i.name for i in expected]
    spec = ", ".join(f"{i.name} ({_ONNX_TO_NUMPY.get(i.type, i.type)} {i.shape})" for i in expected)
    if inputs is None:
        if expected:
            raise BackendError(f"this ONNX model needs inputs: {spec}; pass inputs={{...}}")
        return {}
    if isinstance(inputs, Mapping):
        feeds = dict(inputs)
    elif isinstance(inputs, (tuple, list)):
        if len(inputs) != len(names):
            raise BackendError(
                f"got {len(inputs)} positional inputs, but the ONNX model takes {len(names)}: "
                f"{spec}"
            )
        feeds = dict(zip(names, inputs, strict=True))
    elif len(names) == 1:
        feeds = {names[0]: inputs}
    else:
        raise BackendError(f"the ONNX model takes several inputs ({spec}); pass a dict")
    missing = [n for n in names if n not in feeds]
    extra = [n for n in feeds if n not in names]
    if missing or extra:
        detail = []
        if missing:
            detail.append(f"missing {missing}")
        if extra:
            detail.append(f"unknown {extra}")
        raise BackendError(
            f"inputs do not match the ONNX model ({'; '.join(detail)}); it expects: {spec}"
        )
    out: dict[str, Any] = {}
    for info in expected:
        value = feeds[info.name]
        if type(value).__module__.startswith("torch"):
            value = value.detach().cpu().numpy()
        arr = np.asarray(value)
        want = _ONNX_TO_NUMPY.get(info.type)
        if want is not None and arr.dtype != np.dtype(want):
            raise BackendError(
                f"input {info.name!r} has dtype {arr.dtype}, the ONNX model expects {want}: "
                f"convert it with .astype(np.{want})"
            )
        if info.shape is not None and len(info.shape) != arr.ndim:
            raise BackendError(
                f"input {info.name!r} has shape {tuple(arr.shape)} ({arr.ndim} dims), the "
                f"ONNX model expects {len(info.shape)} dims {info.shape}"
            )
        # Static dimensions (ints; symbolic ones are strings or None) must match exactly,
        # or onnxruntime fails inside the timed loop with its own trace.
        wrong = [
            (axis, want_dim, int(got))
            for axis, (want_dim, got) in enumerate(zip(info.shape or (), arr.shape, strict=False))
            if isinstance(want_dim, int) and want_dim > 0 and want_dim != int(got)
        ]
        if wrong:
            where = ", ".join(f"axis {a} is {g}, the model fixes it at {w}" for a, w, g in wrong)
            raise BackendError(
                f"input {info.name!r} has shape {tuple(arr.shape)}, the ONNX model expects "
                f"{info.shape}: {where}. Export with dynamic axes (torch.onnx.export("
                "dynamic_axes=... / dynamic_shapes=...) to vary them"
            )
        out[info.name] = arr
    return out


def _sampler(
    session: Any, feeds: dict[str, Any], ort: Any, io_binding: bool, device_id: int | None
) -> _OrtSampler:
    """The timed call: bound device buffers (IOBinding) or numpy feeds. ``device_id``: the
    GPU the CUDA provider runs on (None: the CPU)."""
    if io_binding:
        device = "cuda" if device_id is not None else "cpu"
        binding = session.io_binding()
        # Inputs copied to the device once, here; outputs allocated on the device by ORT,
        # on the GPU the provider runs on (device_id), not always GPU 0.
        keep = []
        for name, arr in feeds.items():
            value = ort.OrtValue.ortvalue_from_numpy(arr, device, device_id or 0)
            keep.append(value)
            binding.bind_ortvalue_input(name, value)
        for output in session.get_outputs():
            binding.bind_output(output.name, device, device_id or 0)
        run_with = session.run_with_iobinding

        def fn() -> Any:
            run_with(binding)
            return binding

        def call() -> Any:
            run_with(binding)
            return binding.get_outputs()

        return _OrtSampler(fn, call, keep, device_id)
    else:
        run = session.run

        def fn() -> Any:
            return run(None, feeds)

        return _OrtSampler(fn, fn, [], device_id)


def _check_cuda_graph(on_cuda: bool, cuda_opts: dict[str, Any], io_binding: bool) -> None:
    """cuda_graph=True is refused where the session cannot replay graphs."""
    if on_cuda and str(cuda_opts.get("enable_cuda_graph", "0")) != "1":
        raise BackendError(
            "cuda_graph=True, but the CUDA execution provider reports enable_cuda_graph="
            f"{cuda_opts.get('enable_cuda_graph')!r}: for a session you created, pass "
            "providers=[('CUDAExecutionProvider', {'enable_cuda_graph': '1'})] yourself"
        )
    if not io_binding:
        raise BackendError("ORT CUDA graphs need io_binding=True (fixed device buffers)")


def _prepare(
    session: Any,
    inputs: Any,
    opts: BenchOptions,
    ort: Any,
    requested: list[str] | None,
    source: str,
    ort_log: str = "",
) -> Prepared:
    warnings: list[str] = []
    used = list(session.get_providers())
    if requested is not None:
        warnings += _check_providers(
            requested,
            used,
            bool(opts.allow_fallback),
            "onnxruntime",
            _ort_reason(ort_log),
        )
    provider_options = {k: dict(v) for k, v in session.get_provider_options().items()}
    feeds = _feeds(session, inputs)
    primary = used[0] if used else CPU
    on_cuda = primary in (CUDA, "TensorrtExecutionProvider")
    io_binding = opts.io_binding
    if io_binding is None:
        io_binding = on_cuda
    # What the session really does, from ORT itself (not from what was asked for).
    cuda_opts = provider_options.get(CUDA, {}) if on_cuda else {}
    cuda_graph = str(cuda_opts.get("enable_cuda_graph", "0")) == "1"
    device_id = int(cuda_opts.get("device_id", 0) or 0)
    if opts.cuda_graph:
        _check_cuda_graph(on_cuda, cuda_opts, bool(io_binding))

    sampler = _sampler(session, feeds, ort, bool(io_binding), device_id if on_cuda else None)

    so = session.get_session_options()
    info: dict[str, Any] = {
        "onnxruntime_version": ort.__version__,
        "onnxruntime_build": ort_distribution(),
        "source": source,
        "providers_requested": requested,
        "providers": used,
        "provider_options": provider_options,
        "io_binding": bool(io_binding),
        "copies_in_timed_region": bool(on_cuda and not io_binding),
        "cuda_graph": cuda_graph,
        "intra_op_threads": int(so.intra_op_num_threads),
        "inter_op_threads": int(so.inter_op_num_threads),
        "graph_optimization_level": str(so.graph_optimization_level).split(".")[-1],
        "execution_mode": str(so.execution_mode).split(".")[-1],
        "inputs": {n: [str(a.dtype), list(a.shape)] for n, a in feeds.items()},
    }
    if on_cuda:
        # ORT's CUDA EP enables TF32 by default, unlike torch's fp32 matmul: record it.
        info["use_tf32"] = cuda_opts.get("use_tf32")
        info["device_id"] = device_id
    env = {
        "backend": "onnxruntime",
        "provider": primary,
        "intra_op_threads": info["intra_op_threads"],
        "inter_op_threads": info["inter_op_threads"],
        "graph_optimization_level": info["graph_optimization_level"],
        "io_binding": info["io_binding"],
        "onnxruntime_build": info["onnxruntime_build"],
    }
    if cuda_graph:
        # With and without graphs are different programs: never compared as equal. Only
        # recorded when on, so baselines saved before this field existed still compare.
        env["cuda_graph"] = True
    return Prepared(
        sampler=sampler,
        backend="onnxruntime",
        info=info,
        env=env,
        batch_size=infer_batch_size(feeds),
        warnings=warnings,
        work=WorkTarget("onnxruntime", on_cuda, None, session, _model_of(session, source), feeds),
    )


def _model_of(session: Any, source: str) -> str | bytes | None:
    """The session's model, for the profiled pass to count its nodes: the path it was made
    from, else what ``InferenceSession`` kept of it (a path or the serialized bytes)."""
    if source != "session":
        return source
    for attr in ("_model_path", "_model_bytes"):  # InferenceSession's own, not public
        value = getattr(session, attr, None)
        if isinstance(value, str | bytes) and value:
            return bytes(value) if isinstance(value, bytes) else str(value)
        if isinstance(value, os.PathLike):
            return str(os.fspath(value))
    return None


class _OrtSampler(HostSampler):
    """ORT's run blocks until outputs are ready (the CUDA EP synchronises at the end of a
    run by default), so host timing is the request latency."""

    backend = "onnxruntime"

    def __init__(self, fn: Any, call: Any, keep: list[Any], device_id: int | None = None) -> None:
        super().__init__(fn)
        self._call = call
        self._keep = keep  # device buffers must outlive the binding
        #: The CUDA device the session runs on (None: CPU): NVML readings across the
        #: timed region, as the torch CUDA sampler takes them.
        self.device_id = device_id
        self.region: Any = None
        self.block_calls = 1

    def run_blocks(self, out: list[int], start: int, stop: int, block: int) -> None:
        self.block_calls = block  # calls per sample, for energy per call
        super().run_blocks(out, start, stop, block)

    def begin_timed(self) -> None:
        if self.device_id is not None:
            self.region = tenancy.RegionWatch(gpu.nvml_index(self.device_id))
            self.region.start()

    def checkpoint(self) -> None:
        if self.region is not None:
            self.region.check()

    def end_timed(self, samples_ns: list[int]) -> dict[str, Any]:
        if self.region is None:
            return {}
        region = self.region.result(len(samples_ns) * self.block_calls)
        return {"gpu_region": region} if region else {}

    def call(self) -> Any:
        return self._call()
