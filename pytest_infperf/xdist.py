"""pytest-xdist support: measuring stays on under ``-n N``.

- The controller resolves git, baselines and the environment once and hands the result to
  every worker through ``workerinput``; workers never touch git.
- Each worker sends its results back through ``workeroutput``; only the controller writes
  the JSON, the baseline and the reports.
- Benchmarks never time at the same time: the fixture holds a cross-process lock around
  each measurement (one lock for the CPU, one per GPU), so workers interleave their tests
  but not their timed regions.
- On a GPU machine each worker is pinned to one GPU (``CUDA_VISIBLE_DEVICES``) before any
  CUDA initialisation: ``gwK`` gets GPU ``K mod count`` (ini ``infperf_gpus`` chooses them).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .session import InfperfSession

WORKER_KEY = "infperf"


class XdistHooks:
    """Controller-side xdist hooks; registered only when xdist is installed, since pytest
    rejects implementations of unknown hooks."""

    def __init__(self, session: InfperfSession) -> None:
        self.session = session

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKER_KEY] = json.dumps(self.session.worker_payload())

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        # A crashed worker may have no workeroutput: its tests are already reported failed.
        output = getattr(node, "workeroutput", None) or {}
        data = output.get(WORKER_KEY)
        if data:
            self.session.absorb(json.loads(data))


def worker_index(config: Any) -> int | None:
    workerinput = getattr(config, "workerinput", None)
    if not workerinput:
        return None
    worker_id = str(workerinput.get("workerid", ""))
    digits = worker_id[2:] if worker_id.startswith("gw") else ""
    return int(digits) if digits.isdigit() else None


def pin_gpu(config: Any, gpus: list[int] | None) -> int | None:
    """Pin this worker to one GPU before CUDA starts; returns the GPU index or None."""
    index = worker_index(config)
    if index is None or not gpus:
        return None
    if os.environ.get("INFPERF_NO_GPU_PINNING"):
        return None
    gpu = gpus[index % len(gpus)]
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    return gpu


def decode(payload: Any) -> dict[str, Any] | None:
    if payload is None:
        return None
    return dict(json.loads(payload)) if isinstance(payload, str) else dict(payload)
