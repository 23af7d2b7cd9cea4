"""Each pytest-xdist worker pinned to one GPU, before any conftest can start CUDA."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from . import gpu as _gpu

#: Set by an xdist run's controller where the run asks for measurement: its workers pin
#: themselves to a GPU each (:func:`pin_worker`); any other run's workers keep every GPU.
PIN_ENV = "INFPERF_PIN_WORKERS"


def cuda_initialised() -> bool:
    """Whether this process already started CUDA through torch (after that, a change to
    CUDA_VISIBLE_DEVICES is ignored)."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:
        return False


def pin_choices(
    visible: str | None, configured: Sequence[str], snap: dict[str, Any] | None
) -> list[str]:
    """The GPUs workers are spread over, as CUDA_VISIBLE_DEVICES entries.

    ``infperf_gpus`` first, else what the user already restricted CUDA_VISIBLE_DEVICES to
    (kept verbatim: indices in CUDA's own numbering, GPU or MIG UUIDs), else every GPU by
    UUID (unambiguous whatever CUDA_DEVICE_ORDER says; NVML indices are not CUDA ordinals).
    An empty or negative CUDA_VISIBLE_DEVICES means the user hid the GPUs: none."""
    if configured:
        return [str(c) for c in configured]
    if visible is not None:
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if not entries or entries[0].startswith("-"):
            return []
        return entries
    if snap is None:
        return []
    return [str(d.get("uuid") or d["index"]) for d in snap["devices"]]


def pin_worker(worker_id: str, configured: Sequence[str]) -> str | None:
    """Pin this xdist worker (``gwK``) to one GPU, before any conftest can start CUDA.
    Returns a warning for the run, or None."""
    digits = worker_id[2:] if worker_id.startswith("gw") else ""
    if not digits.isdigit() or os.environ.get("INFPERF_NO_GPU_PINNING"):
        return None
    choices = pin_choices(os.environ.get("CUDA_VISIBLE_DEVICES"), configured, _gpu.snapshot())
    if not choices:
        return None
    if cuda_initialised():
        # Too late: this process keeps the GPUs it started with, and every worker then
        # shares one timing lock (the lock's name follows CUDA_VISIBLE_DEVICES, unchanged).
        return (
            f"pytest-xdist worker {worker_id}: CUDA was initialised before pytest-infperf "
            "could pin the worker to a GPU (a plugin or an early import called into "
            "torch.cuda): workers share the GPUs and take turns timing"
        )
    os.environ["CUDA_VISIBLE_DEVICES"] = choices[int(digits) % len(choices)]
    return None
