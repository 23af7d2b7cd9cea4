"""What a result's ``extra`` may carry: every key declared and typed once, here.

A result's ``extra`` is a :class:`ResultExtra` (a ``TypedDict``), so mypy refuses a write
or read of a key not declared here, and the results schema's ``$defs/extra`` is generated
from these types (:func:`extra_schema`; ``python -m pytest_infperf.core.record`` rewrites
it, a test checks the file matches). The JSON keeps the keys as they have always been
written, so the documents of earlier versions load as they are. Readers that take a
document's raw dicts (the HTML report, ``infperf merge``) go through the typed readers at
the end of this module, never through a key spelled again.
"""

from __future__ import annotations

import json
import math
import sys
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict, Union


class Budget(TypedDict):
    """``max_median_ms``: the budget, and whether the median's CI low end kept under it."""

    max_median_ms: float
    passed: bool


class _WorkLimit(TypedDict):
    max_work_increase: float
    change: float | None
    passed: bool | None


class WorkGate(_WorkLimit, total=False):
    """``max_work_increase``: the limit, the work change the comparison found (None: not
    checked), whether it kept to the limit and the Perf-Accept rule that took it, if any."""

    accepted: dict[str, Any] | None
    #: Why the limit could not be checked though both sides were profiled.
    unchecked: str


class PairedRecord(TypedDict, total=False):
    """``--perf-ab``'s ``ab``: per process pair its quads, and which code each side ran."""

    pairs: list[dict[str, Any]]
    #: Which code each side imported (the proof), per side.
    origins: dict[str, Any]
    #: The base's environment where it was not HEAD's as is.
    base_environment: dict[str, Any]
    #: On a GPU runner: the NUMA node both sides' workers started bound to, or why none.
    numa: dict[str, Any]


class _Sides(TypedDict):
    head_samples: list[float]
    base_samples: list[float]


class Interleaved(_Sides, PairedRecord, total=False):
    """Both sides' samples of an interleaved measurement, and per process pair its quads
    (:meth:`~pytest_infperf.ab.interleave.PairedRun.record`): a settling's ``settle``, or
    read from ``--perf-ab``'s ``base_samples`` and ``ab`` by :func:`interleaved`."""


class _Seen(TypedDict):
    throttle_reasons: list[str] | None
    other_processes: list[int]
    unseen_processes: list[int]


class GpuRegion(_Seen, total=False):
    """What NVML saw while the samples ran (``tenancy.RegionWatch``)."""

    sm_clock_mhz: float
    mem_clock_mhz: float
    energy_mj_per_call: float
    power_violation_s: float


class GpuState(TypedDict):
    """The GPU's state read just before and after the timed region."""

    before: dict[str, Any]
    after: dict[str, Any] | None


class ResultExtra(TypedDict, total=False):
    """Every key a result's ``extra`` may hold."""

    #: The gates' records (session/gate.py).
    budget: Budget
    work_gate: WorkGate
    #: A settling's interleaved samples; ``--perf-ab``'s are ``base_samples`` and ``ab``.
    settle: Interleaved
    base_samples: list[float]
    ab: PairedRecord
    #: A re-measure's fresh samples (the verdict's second look).
    remeasured_samples: list[float]
    #: CUDA: the GPU around and during the timed region.
    gpu_state: GpuState
    gpu_clocks: dict[str, Any]
    gpu_region: GpuRegion
    #: CUDA torch: the host's enqueue time over the latency (near 1: host-bound), and the
    #: per-sample enqueue and device times (seconds).
    host_bound_ratio: float
    enqueue_samples: list[float]
    device_samples: list[float]
    #: torch.compile: graphs compiled during the timed region.
    recompiles: int


def declared(figures: Mapping[str, Any]) -> ResultExtra:
    """A backend's figures as a result's ``extra``: a key not declared in
    :class:`ResultExtra` is a programming error, refused here rather than written."""
    unknown = sorted(set(figures) - ResultExtra.__optional_keys__ - ResultExtra.__required_keys__)
    if unknown:
        raise KeyError(f"undeclared extra keys {unknown}: declare them in core/record.py")
    return typing.cast(ResultExtra, dict(figures))


def numbers(value: Any) -> list[float]:
    """A stored sample array's finite numbers (a hand-made or hostile document's other
    items left out): the loader checks these arrays' type, not each item."""
    if not isinstance(value, list):
        return []
    return [
        float(v)
        for v in value
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    ]


def interleaved(samples: list[float], extra: Mapping[str, Any]) -> Interleaved | None:
    """A result's interleaved measurement in one shape, whichever way it was recorded (a
    settling's ``settle``; ``--perf-ab``'s ``base_samples`` beside the result's own
    ``samples``); None when it was not interleaved. Takes a document's raw dicts too."""
    settle = extra.get("settle")
    if isinstance(settle, Mapping) and numbers(settle.get("base_samples")):
        head, base = numbers(settle.get("head_samples")), numbers(settle.get("base_samples"))
        return typing.cast(Interleaved, {**settle, "head_samples": head, "base_samples": base})
    if base := numbers(extra.get("base_samples")):
        ab = extra.get("ab")
        rest = dict(ab) if isinstance(ab, Mapping) else {}
        return typing.cast(
            Interleaved, {**rest, "head_samples": numbers(samples), "base_samples": base}
        )
    return None


def budget_failed(extra: Mapping[str, Any]) -> Budget | None:
    """The budget record when the median was surely over it (else None)."""
    budget = extra.get("budget")
    if isinstance(budget, Mapping) and budget.get("passed") is False:
        return typing.cast(Budget, budget)
    return None


def work_failed(extra: Mapping[str, Any]) -> WorkGate | None:
    """The work gate's record when the work grew past its limit and no rule accepted it."""
    gate = extra.get("work_gate")
    if isinstance(gate, Mapping) and gate.get("passed") is False and not gate.get("accepted"):
        return typing.cast(WorkGate, gate)
    return None


# -- the schema, generated from the types above ------------------------------------------

_SCALARS: dict[Any, dict[str, Any]] = {
    float: {"type": "number"},
    int: {"type": "integer"},
    bool: {"type": "boolean"},
    str: {"type": "string"},
    type(None): {"type": "null"},
}


def _schema_of(tp: Any) -> dict[str, Any]:
    """The JSON Schema of one annotation (the types this module uses, no more)."""
    if tp is Any:
        return {}
    if tp in _SCALARS:
        return dict(_SCALARS[tp])
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        options = [_schema_of(a) for a in typing.get_args(tp)]
        if all(set(o) == {"type"} for o in options):
            return {"type": [o["type"] for o in options]}
        return {"anyOf": options}
    if origin is list:
        return {"type": "array", "items": _schema_of(typing.get_args(tp)[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema_of(typing.get_args(tp)[1])}
    if typing.is_typeddict(tp):
        return _record_schema(tp)
    raise TypeError(f"no JSON Schema for {tp!r}: declare it with the types record.py knows")


def _record_schema(record: Any) -> dict[str, Any]:
    hints = typing.get_type_hints(record)
    out: dict[str, Any] = {"type": "object", "description": " ".join(record.__doc__.split())}
    # No key is required: a key's type is checked where it is present, and earlier versions
    # wrote fewer keys (a settling's record without its samples, a GPU region without
    # unseen_processes) in documents that must still load.
    out["properties"] = {name: _schema_of(tp) for name, tp in hints.items()}
    return out


def extra_schema() -> dict[str, Any]:
    """``$defs/extra`` of the results schema. Keys not declared here are allowed (a newer
    version's keys load in an older one); a declared key, where present, must have its
    declared type (none is required: see :func:`_record_schema`)."""
    return _record_schema(ResultExtra)


SCHEMA_FILE = Path(__file__).parents[1] / "schema" / "results-v1.schema.json"


def write_schema(path: Path = SCHEMA_FILE) -> bool:
    """Rewrite ``$defs/extra`` of the schema file from the types; True if it changed."""
    text = path.read_text(encoding="utf-8")
    schema = json.loads(text)
    schema["$defs"]["extra"] = extra_schema()
    new = json.dumps(schema, indent=2) + "\n"
    if new == text:
        return False
    path.write_text(new, encoding="utf-8")
    return True


if __name__ == "__main__":
    sys.stdout.write("schema rewritten\n" if write_schema() else "schema up to date\n")
