"""pytest-xdist support: measuring stays on under ``-n N``.

- The controller resolves git, baselines and the environment once (the run context) and
  hands it to every worker through ``workerinput``; workers never touch git.
- Each worker sends its results back through ``workeroutput``; only the controller writes
  the JSON, the baseline and the reports.
- Benchmarks never time at the same time: each measurement holds a cross-process lock
  (one for the CPU, one per GPU), so workers interleave their tests but not their timed
  regions.
- On a GPU machine each worker is pinned to one GPU (``CUDA_VISIBLE_DEVICES``) before any
  CUDA initialisation: ``gwK`` gets GPU ``K mod count`` (ini ``infperf_gpus`` chooses them).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import pytest

from .context import WORKER_KEY

if TYPE_CHECKING:
    from .collector import Collector
    from .context import RunContext


class XdistController:
    """Controller-side xdist hooks; registered only when xdist is installed, since pytest
    rejects implementations of unknown hooks."""

    def __init__(self, context: RunContext, collector: Collector) -> None:
        self.context = context
        self.collector = collector

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKER_KEY] = self.context.to_worker()

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        # A crashed worker may have no workeroutput: its tests are already reported failed.
        output = getattr(node, "workeroutput", None) or {}
        data = output.get(WORKER_KEY)
        if data:
            self.collector.absorb(json.loads(data))


class XdistWorker:
    """Worker side: send this worker's results to the controller at the end."""

    def __init__(self, config: pytest.Config, collector: Collector) -> None:
        self.config = config
        self.collector = collector

    def pytest_sessionfinish(self) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            worker = str(getattr(self.config, "workerinput", {}).get("workerid"))
            workeroutput[WORKER_KEY] = json.dumps(self.collector.payload(worker))


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
