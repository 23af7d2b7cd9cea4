"""The profiled pass: what one call of a benchmark does, counted after its timed samples.

PYTEST_DONT_REWRITE

Time is noisy; the work a model does per call is not. One encoder layer more is a known
number of FLOPs and operator calls more, exactly, on any machine, and on a GPU a known
number of kernels more, whose summed durations (the device's busy time) move by a fraction
of a percent between processes where the latency of an eager model moves by a quarter
(docs/MEASURED.md). So every benchmark gets one short profiled pass **after** its timed
samples, in the process that timed them (the A/B workers included), never inside them:

- torch (and a plain callable that turns out to call torch): ``torch.profiler`` (kineto;
  CUPTI on CUDA) over a few calls, each inside a ``record_function`` range the events are
  split by: operator calls by name, bytes the allocators handed out, and on CUDA the kernel
  launches and the device's busy time of each call (kernels, copies and memsets, attributed
  to the call whose host-side launch they correlate with); FLOPs from
  ``torch.utils.flop_counter.FlopCounterMode`` over one eager call;
- ONNX Runtime: the graph's nodes by operator type (read with ``onnx``, once per model and
  process); on CUDA also the kernels, through torch.profiler when torch is installed
  (CUPTI sees every CUDA context of the process); ``full`` adds ONNX Runtime's own per-node
  profile from a second session of the same model.

``full`` adds self time per operator (CPU) and per kernel (CUDA). One record
(:class:`~pytest_infperf.core.results.WorkProfile`) holds it all, with what the pass cost;
the judge compares two of them (:mod:`pytest_infperf.judge.work`) and judges the device
time (``gpu_time``) like any metric. torch and onnx are imported here only when a
benchmark of theirs is profiled.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import mmap
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ..core.results import WorkProfile
from .backends import CapturedStderr, Prepared, WorkTarget
from .timing import Sampler, in_test_context

#: ``--perf-profile``: no pass, counts (the default), or counts with time per operator.
MODES = ("off", "counts", "full")
#: The range each profiled call runs in: the events are split into calls by it.
CALL_MARK = "infperf.call"
#: The profiled calls span about this long: enough calls to see whether the counts vary
#: between calls (two do), and on CUDA enough device-time samples for the judge's test.
#: The examples' plain run spent 14.7% of its time in the pass with 0.1 s and onnx parsing
#: the whole model (benchmarks/profile_cost.py): the calls of slow models are few.
TARGET_S = 0.04
MIN_CALLS = 2
MAX_CALLS = 5
#: CUDA: more calls, each one a sample of the device's busy time, and never fewer than a
#: rank test can decide on (2 and 2 cannot; judge.DEVICE_MIN).
MIN_CUDA_CALLS = 5
MAX_CUDA_CALLS = 24
#: Names kept per table (operators, kernels, FLOPs by operator): the most frequent.
TOP = 48
#: Kineto's activity types (``_KinetoEvent.activity_type()``) of the device's own work.
DEVICE_KINDS = ("kernel", "gpu_memcpy", "gpu_memset")
#: The host-side events a device event correlates with (its launch).
LAUNCH_KINDS = ("cuda_runtime", "cuda_driver")


class Event(NamedTuple):
    """One profiler event, reduced to what the split needs (times in ns). A named tuple:
    a generation's pass reads tens of thousands of them, and a frozen dataclass took three
    times as long to build."""

    name: str
    kind: str
    start: int
    duration: int
    thread: int = 0
    nbytes: int = 0
    correlation: int = 0


@dataclasses.dataclass
class _Call:
    """The counts of one profiled call."""

    ops: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    kernels: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    device_ns: int = 0
    alloc: int = 0
    syncs: int = 0
    op_self: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    kernel_ns: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)


def split(events: Sequence[Event], full: bool = False) -> list[_Call]:
    """The events of each profiled call: every range named :data:`CALL_MARK` is a call;
    host operators on that range's thread and allocations inside it are its own, and a
    device event belongs to the call whose window holds its launch (the runtime event it
    correlates with), or else its own start. Events outside every window (the profiler's
    own start and stop) are dropped."""
    marks = sorted(
        (e for e in events if e.name == CALL_MARK and e.kind == "user_annotation"),
        key=lambda e: e.start,
    )
    if not marks:
        return []
    thread = marks[0].thread
    starts = [m.start for m in marks]
    ends = [m.start + m.duration for m in marks]
    calls = [_Call() for _ in marks]

    def which(t: int) -> int | None:
        i = bisect.bisect_right(starts, t) - 1
        return i if i >= 0 and t <= ends[i] else None

    launched = {e.correlation: e.start for e in events if e.kind in LAUNCH_KINDS and e.correlation}
    host_ops: list[list[Event]] = [[] for _ in marks]
    for e in events:
        if e.kind == "cpu_op" and e.thread == thread:
            i = which(e.start)
            if i is not None:
                calls[i].ops[e.name] += 1
                host_ops[i].append(e)
        elif e.kind in LAUNCH_KINDS and "Synchronize" in e.name:
            i = which(e.start)
            if i is not None:
                calls[i].syncs += 1
        elif e.kind == "cpu_instant_event" and e.name == "[memory]" and e.nbytes > 0:
            i = which(e.start)
            if i is not None:
                calls[i].alloc += e.nbytes
        elif e.kind in DEVICE_KINDS:
            i = which(launched.get(e.correlation, e.start))
            if i is None:
                continue
            calls[i].device_ns += e.duration
            if e.kind == "kernel":
                calls[i].kernels[e.name] += 1
            if full:
                calls[i].kernel_ns[e.name] += e.duration
    if full:
        for call, ops in zip(calls, host_ops, strict=True):
            call.op_self = self_times(ops)
    return calls


def self_times(ops: Sequence[Event]) -> collections.Counter[str]:
    """Each operator's self time (its duration less its children's), summed by name, for
    the operators of one thread (nesting is read from the intervals)."""
    out: collections.Counter[str] = collections.Counter()
    stack: list[list[Any]] = []  # [end, name, own duration, children's duration]
    for e in sorted(ops, key=lambda e: (e.start, -e.duration)):
        while stack and e.start >= stack[-1][0]:
            _, name, own, children = stack.pop()
            out[name] += max(0, own - children)
        if stack:
            stack[-1][3] += e.duration
        stack.append([e.start + e.duration, e.name, e.duration, 0])
    while stack:
        _, name, own, children = stack.pop()
        out[name] += max(0, own - children)
    return out


def _top(counter: Mapping[str, float], per: int, top: int = TOP) -> tuple[dict[str, float], bool]:
    """The ``top`` largest entries divided by ``per`` (per call), and whether any were
    left out."""
    ordered = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    return {k: v / per for k, v in ordered[:top]}, len(ordered) > top


def summarize(calls: Sequence[_Call], mode: str, cuda: bool) -> WorkProfile:
    """One record from the profiled calls: counts per call (the mean over the calls, which
    is the count itself when every call did the same), the device's busy time of each call,
    and what varied between calls."""
    n = len(calls)
    ops: collections.Counter[str] = sum((c.ops for c in calls), collections.Counter())
    kernels: collections.Counter[str] = sum((c.kernels for c in calls), collections.Counter())
    varying = []
    if any(c.ops != calls[0].ops for c in calls):
        varying.append("operators")
    if cuda and any(c.kernels != calls[0].kernels for c in calls):
        varying.append("kernels")
    if cuda and any(c.syncs != calls[0].syncs for c in calls):
        varying.append("syncs")
    op_table, truncated = _top(ops, n)
    kernel_table, _ = _top(kernels, n)
    op_time = kernel_time = None
    if mode == "full":
        op_ns: collections.Counter[str] = sum((c.op_self for c in calls), collections.Counter())
        k_ns: collections.Counter[str] = sum((c.kernel_ns for c in calls), collections.Counter())
        op_time = {k: v / 1e9 for k, v in _top(op_ns, n)[0].items()}
        kernel_time = {k: v / 1e9 for k, v in _top(k_ns, n)[0].items()} if cuda else None
    return WorkProfile(
        mode=mode,
        source="torch.profiler",
        calls=n,
        op_calls=sum(ops.values()) / n,
        ops=op_table,
        ops_truncated=truncated,
        alloc_bytes=float(statistics.median(c.alloc for c in calls)),
        kernels=sum(kernels.values()) / n if cuda else None,
        syncs=sum(c.syncs for c in calls) / n if cuda else None,
        kernel_counts=kernel_table if cuda else {},
        # A call with no device time at all is no sample of it (nothing ran on the GPU).
        gpu_time=[c.device_ns / 1e9 for c in calls if c.device_ns > 0] if cuda else [],
        op_time=op_time,
        kernel_time=kernel_time,
        varying=varying,
    )


def calls_for(per_call_s: float, cuda: bool) -> int:
    """How many calls the pass profiles: about :data:`TARGET_S` of them, within bounds."""
    least, most = (MIN_CUDA_CALLS, MAX_CUDA_CALLS) if cuda else (MIN_CALLS, MAX_CALLS)
    if not per_call_s > 0:
        return least
    return max(least, min(most, math.ceil(TARGET_S / per_call_s)))


def _usdt(line: str) -> bool:
    return line.startswith("USDT:")


_KINETO_READY: list[bool] = []


def _init_kineto() -> None:
    """Start and stop the profiler once on the caller's thread (the one that imported
    torch): kineto initialises on first use, and from another thread it said
    "External init callback must run in same thread as registerClient" on stderr."""
    if _KINETO_READY:
        return
    from torch.autograd.profiler import profile  # noqa: PLC0415 (torch: optional)

    with _quiet(), profile(use_kineto=True):
        pass
    _KINETO_READY.append(True)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Kineto's start/stop chatter off the user's terminal, and the profiler's warnings
    (a CUDA activity without CUPTI, an experimental flag) out of ``filterwarnings =
    error`` projects: what the pass could not count is said in its record instead."""
    with CapturedStderr(drop=_usdt), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _events(prof: Any) -> list[Event]:
    """The raw kineto events (``prof.events()`` would build a tree of every event first:
    ten times slower on a BERT)."""
    raw = list(prof.kineto_results.events())
    events = [
        Event(
            e.name(),
            _kind(e),
            e.start_ns(),
            e.duration_ns(),
            e.start_thread_id(),
            e.nbytes() or 0,
            e.correlation_id() or 0,
        )
        for e in raw
    ]
    if raw and not hasattr(raw[0], "activity_type"):
        # Without the annotation flag, a range's GPU view (a ``record_function`` in the
        # model, torch.compile's "Torch-Compiled Region") has no scope to tell it from a
        # kernel: its host side names it. Counted as a kernel, its span would be summed
        # into the device time over the kernels it holds.
        ranges = {e.name for e in events if e.kind == "user_annotation"}
        events = [
            e._replace(kind="gpu_user_annotation") if e.kind == "kernel" and e.name in ranges else e
            for e in events
        ]
    return events


#: Kineto's own events on the host (its "overhead" activity: CUPTI's overhead kinds and
#: kineto's buffer requests), by the names it gives them: not the model's operators. On a
#: lent H200 "Activity Buffer Request" fell inside one profiled call in ten and made every
#: CUDA benchmark's operator counts "varying".
OVERHEAD_NAMES = frozenset(
    {
        "Activity Buffer Request",
        "Buffer Flush",
        "Instrumentation",
        "Resource",
        "Driver Compiler",
        "Runtime Triggered Module Loading",
        "Lazy Function Loading",
        "Command Buffer Full",
        "UVM Activity Init",
        "Unknown",
    }
)
#: ``RecordScope.USER_SCOPE``: a ``record_function`` range (what ``is_user_annotation()``
#: tells on the torch versions that have it).
USER_SCOPE = 7


def _kind(e: Any) -> str:
    """An event's kineto activity type. ``_KinetoEvent.activity_type()`` is torch 2.13's;
    torch 2.11 has none (a lent H200: the whole pass failed on it), so there the type is
    told from what every version has: the name of the allocator's and kineto's own events,
    the device (a GPU's events are kernels, copies, sets and its view of the annotations),
    the annotation flag (or the record scope, before that flag), and the CUDA API's names
    of the host's launch calls."""
    if hasattr(e, "activity_type"):
        return str(e.activity_type())
    name = e.name()
    # Before the device: a CUDA allocation's event is on the GPU's device (an H200 counted
    # 406 of them as kernels of a BERT), and kineto calls it an instant event of the host.
    if name in ("[memory]", "[OutOfMemory]"):
        return "cpu_instant_event"
    on_device = str(e.device_type()).rsplit(".", 1)[-1] != "CPU"
    annotation = getattr(e, "is_user_annotation", None)
    scope = getattr(e, "scope", None)
    annotated = (
        annotation() if annotation is not None else scope is not None and scope() == USER_SCOPE
    ) or name == CALL_MARK
    if on_device:
        if annotated:
            return "gpu_user_annotation"
        if name.startswith("Memcpy"):
            return "gpu_memcpy"
        if name.startswith("Memset"):
            return "gpu_memset"
        # torch's inductor benchmarker drops "Context Sync" from the kernels it sums.
        return "cuda_sync" if name.endswith(" Sync") or name == "Stream Wait Event" else "kernel"
    if annotated:
        return "user_annotation"
    if name in OVERHEAD_NAMES:
        return "overhead"
    python = getattr(e, "is_python_function", None)
    if python is not None and python():
        return "python_function"
    if "::" not in name and name.startswith("cuda"):
        return "cuda_runtime"
    if "::" not in name and name.startswith("cu") and name[2:3].isupper():
        return "cuda_driver"
    return "cpu_op"


def count_python_calls(fn: Callable[[], Any], calls: int = 2) -> tuple[float, bool]:
    """The Python function calls of one call of ``fn`` (``sys.setprofile``'s "call"
    events: the framework's dispatch in Python, what a host-bound latency follows), and
    whether ``calls`` calls differed (a garbage collection's callbacks, a cache filled
    on the way: then it is no exact count)."""
    counts = []
    for _ in range(calls):
        n = 0

        def count(frame: Any, event: str, arg: Any) -> None:
            nonlocal n
            if event == "call":
                n += 1

        sys.setprofile(count)
        try:
            fn()
        finally:
            sys.setprofile(None)
        counts.append(n)
    return float(counts[0]), len(set(counts)) > 1


def count_flops(fn: Callable[[], Any]) -> tuple[float, dict[str, float]] | None:
    """FLOPs of one call of ``fn`` and by operator (``FlopCounterMode``), or None."""
    from torch.utils.flop_counter import FlopCounterMode  # noqa: PLC0415 (torch: optional)

    with FlopCounterMode(display=False) as counter:
        fn()
    by_op = {str(k): float(v) for k, v in counter.get_flop_counts().get("Global", {}).items()}
    return float(counter.get_total_flops()), _top(by_op, 1)[0]


def _torch_pass(sampler: Sampler, target: WorkTarget, mode: str, calls: int) -> WorkProfile:
    # torch.autograd.profiler, not its torch.profiler wrapper: the wrapper's first start
    # imports torch._inductor (hasattr(torch, "_inductor")), 1.25 s of a process's first
    # pass here; this is the profiler the wrapper drives, kineto and CUPTI the same.
    from torch.autograd.profiler import profile, record_function  # noqa: PLC0415

    device = "cuda" if target.cuda else None
    with _quiet(), profile(use_device=device, profile_memory=True, use_kineto=True) as prof:
        for _ in range(calls):
            with record_function(CALL_MARK):
                sampler.call()
    record = summarize(split(_events(prof), full=mode == "full"), mode, target.cuda)
    notes = list(target.notes)
    if target.cuda and not record.kernels:
        notes.append(
            "no CUDA kernels were seen: the profiler's CUDA activity (CUPTI) is not "
            "available in this torch build or driver, so the device time is not judged"
        )
        record = dataclasses.replace(record, kernels=None, gpu_time=[])
    flops = None
    if target.flop_call is not None:
        with _quiet():
            flops = count_flops(target.flop_call)
    if flops is not None:
        record = dataclasses.replace(record, flops=flops[0], flops_by_op=flops[1])
    return dataclasses.replace(record, notes=notes)


_NODES: dict[str, tuple[dict[str, float], int]] = {}


def onnx_nodes(model: str | bytes) -> tuple[dict[str, float], int]:
    """The graph's nodes by operator type (a custom domain's prefixed: ``com.microsoft::
    Attention``), and how many subgraphs (of If, Loop, Scan) were left uncounted. Read once
    per model and process, by scanning the protobuf's wire format for the graph's nodes:
    ``onnx.load`` parses every weight too, and took 2.0 s for a BERT-base file (1.2 s for
    DistilBERT), more than every other benchmark's pass of the examples together
    (benchmarks/profile_cost.py); the scan skips the weights by their length."""
    if isinstance(model, bytes):
        key = hashlib.sha256(model).hexdigest()
    else:
        st = Path(model).stat()
        key = f"{Path(model).resolve()}:{st.st_mtime_ns}:{st.st_size}"
    if key not in _NODES:
        if isinstance(model, bytes):
            _NODES[key] = _scan_nodes(memoryview(model))
        else:
            with (
                Path(model).open("rb") as f,
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m,
            ):
                _NODES[key] = _scan_nodes(memoryview(m))
    return _NODES[key]


#: Field numbers of onnx.proto3: ModelProto.graph, GraphProto.node, NodeProto.op_type,
#: .domain, .attribute, AttributeProto.g, .graphs.
_GRAPH, _NODE, _OP_TYPE, _DOMAIN, _ATTRIBUTE, _SUBGRAPH, _SUBGRAPHS = 7, 1, 4, 7, 5, 6, 11


def _varint(buf: memoryview, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7


def _fields(buf: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """The length-delimited fields of a message in ``buf[start:end]``: (number, offset,
    length); the other wire types are stepped over."""
    i = start
    while i < end:
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(buf, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            length, i = _varint(buf, i)
            yield number, i, length
            i += length
        else:  # groups (3, 4) are not used by onnx.proto3
            raise ValueError(f"not an ONNX model: protobuf wire type {wire} at byte {i}")


def _scan_nodes(buf: memoryview) -> tuple[dict[str, float], int]:
    counts: collections.Counter[str] = collections.Counter()
    subgraphs = 0
    for number, start, length in _fields(buf, 0, len(buf)):
        if number != _GRAPH:
            continue
        for field, n_start, n_length in _fields(buf, start, start + length):
            if field != _NODE:
                continue
            op_type, domain = "", ""
            for part, p_start, p_length in _fields(buf, n_start, n_start + n_length):
                if part == _OP_TYPE:
                    op_type = bytes(buf[p_start : p_start + p_length]).decode()
                elif part == _DOMAIN:
                    domain = bytes(buf[p_start : p_start + p_length]).decode()
                elif part == _ATTRIBUTE:
                    sub = p_start + p_length
                    subgraphs += sum(
                        1 for a, _, _ in _fields(buf, p_start, sub) if a in (_SUBGRAPH, _SUBGRAPHS)
                    )
            domain = "" if domain in ("", "ai.onnx") else domain
            counts[f"{domain}::{op_type}" if domain else op_type] += 1
    return dict(counts), subgraphs


def ort_node_times(target: WorkTarget, calls: int) -> dict[str, float] | None:
    """``full``: ONNX Runtime's own per-node profile, seconds per call by operator type,
    from a second session of the same model with profiling on (the timed one never runs
    with it); None when the model cannot be loaded again."""
    if target.model is None or target.session is None or target.feeds is None:
        return None
    import onnxruntime as ort  # noqa: PLC0415 (onnxruntime: the optional onnx extra)

    session = target.session
    options = session.get_session_options()
    options.enable_profiling = True
    with tempfile.TemporaryDirectory(prefix="infperf-ort-") as folder:
        options.profile_file_prefix = str(Path(folder) / "profile")
        providers = list(zip(session.get_providers(), _provider_options(session), strict=True))
        second = ort.InferenceSession(target.model, sess_options=options, providers=providers)
        for _ in range(calls + 1):
            second.run(None, dict(target.feeds))
        trace = json.loads(Path(second.end_profiling()).read_text())
    # Node events inside the first run (its allocations, not a call's) are left out.
    runs = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur") or 0))
        for e in trace
        if e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    first_end = runs[0][1] if runs else -1.0
    times: dict[str, float] = collections.defaultdict(float)
    for event in trace:
        name = str(event.get("name", ""))
        if event.get("cat") != "Node" or not name.endswith("_kernel_time"):
            continue
        if float(event.get("ts") or 0) <= first_end:
            continue
        op = str((event.get("args") or {}).get("op_name") or "?")
        times[op] += float(event.get("dur") or 0) * 1e3  # us -> ns
    return {k: v / 1e9 for k, v in _top(times, max(1, len(runs) - 1))[0].items()}


def _provider_options(session: Any) -> list[dict[str, Any]]:
    options = session.get_provider_options()
    return [dict(options.get(name, {})) for name in session.get_providers()]


def _ort_pass(sampler: Sampler, target: WorkTarget, mode: str, calls: int) -> WorkProfile:
    notes = list(target.notes)
    ops: dict[str, float] = {}
    total: float | None = None
    if target.model is None:
        notes.append(
            "the session's model is not reachable (made from a stream?): its nodes are not "
            "counted; pass the .onnx path to infer_bench to count them"
        )
    else:
        try:
            nodes, subgraphs = onnx_nodes(target.model)
        except (OSError, ValueError, IndexError, UnicodeDecodeError) as exc:
            notes.append(f"the model's graph could not be read: {exc}")
        else:
            ops, total = (
                dict(sorted(nodes.items(), key=lambda kv: (-kv[1], kv[0]))),
                float(sum(nodes.values())),
            )
            if subgraphs:
                notes.append(f"{subgraphs} subgraph(s) (If, Loop, Scan) not counted")
    record = WorkProfile(
        mode=mode,
        source="onnx graph",
        calls=0,
        op_calls=total,
        ops=_top(ops, 1)[0],
        ops_truncated=len(ops) > TOP,
    )
    if target.cuda and "torch" in sys.modules:
        # CUPTI sees every CUDA context of the process, ONNX Runtime's too.
        kernels = _torch_pass(sampler, dataclasses.replace(target, flop_call=None), mode, calls)
        record = dataclasses.replace(
            record,
            calls=kernels.calls,
            kernels=kernels.kernels,
            kernel_counts=kernels.kernel_counts,
            gpu_time=kernels.gpu_time,
            kernel_time=kernels.kernel_time,
            varying=[v for v in kernels.varying if v == "kernels"],
            source="onnx graph; torch.profiler (CUDA)",
        )
        notes += kernels.notes
    elif target.cuda:
        notes.append("kernels are counted through torch.profiler: install torch to count them")
    if mode == "full":
        try:
            record = dataclasses.replace(record, op_time=ort_node_times(target, calls))
        except Exception as exc:  # ORT's own error types; the pass never fails a test
            notes.append(f"ONNX Runtime's per-node profile failed: {exc}")
    return dataclasses.replace(record, notes=notes)


def _callable_target(prepared: Prepared) -> WorkTarget | None:
    """A plain callable is profiled when torch is loaded (it may call a torch model). Its
    FLOPs are not counted: it may reach compiled code, which FlopCounterMode would leave
    running eagerly for the rest of the process, and nothing here can see inside it."""
    if "torch" not in sys.modules:
        return None
    return WorkTarget(
        "torch", notes=("a plain callable: its FLOPs are not counted (pass the model itself)",)
    )


def run(prepared: Prepared, mode: str, per_call_s: float) -> WorkProfile | None:
    """The profiled pass of a prepared (and measured, so warm) model: ``mode`` ``counts``
    or ``full`` (``off``: None). Never raises for the profile's sake: a profiler that fails
    leaves a record that says why, and the benchmark's verdict does not depend on it. A
    plain callable is profiled when torch is loaded, and then only if one profiled call of
    it runs a torch operator (a wrapper around a model, ``lambda: model(x)``)."""
    if mode == "off":
        return None
    target = prepared.work if prepared.work is not None else _callable_target(prepared)
    if target is None:
        return None
    sampler = prepared.sampler
    calls = calls_for(per_call_s, target.cuda)
    started = time.perf_counter()
    if target.kind == "torch" or target.cuda:
        _init_kineto()
    pass_ = _ort_pass if target.kind == "onnxruntime" else _torch_pass
    try:
        if prepared.work is None:
            probe = dataclasses.replace(target, flop_call=None)
            found = in_test_context(sampler, functools.partial(pass_, sampler, probe, mode, 1))
            if not found.op_calls:
                return None  # calls no torch operator: nothing to count
        record = in_test_context(sampler, functools.partial(pass_, sampler, target, mode, calls))
        counted = functools.partial(count_python_calls, sampler.call)
        python, varies = in_test_context(sampler, counted)
        record = dataclasses.replace(
            record,
            python_calls=python,
            varying=[*record.varying, "python calls"] if varies else record.varying,
        )
    except Exception as exc:
        record = WorkProfile(mode=mode, notes=[f"the profiled pass failed: {exc!r}"[:500]])
    return dataclasses.replace(record, cost_s=round(time.perf_counter() - started, 6))
