"""pytest-xdist support: measuring stays on under ``-n N``.

- The controller resolves git, baselines and the environment once (the run context) and
  hands it to every worker through ``workerinput``; workers never touch git.
- Each worker sends its results back through ``workeroutput``; only the controller writes
  the JSON, the baseline and the reports.
- Benchmarks never time at the same time: each measurement holds a cross-process lock
  (one for the CPU, one per GPU), so workers interleave their tests but not their timed
  regions.
- On a GPU machine each worker is pinned to one GPU (``CUDA_VISIBLE_DEVICES``, by UUID)
  before its conftests are imported: ``gwK`` gets GPU ``K mod count`` (ini
  ``infperf_gpus`` or the user's own ``CUDA_VISIBLE_DEVICES`` choose them; see
  ``gpupin.pin_worker`` and the plugin's ``pytest_load_initial_conftests``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from .collector import USAGE_ERROR_KEY
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
        if output.get(USAGE_ERROR_KEY):
            # What the worker's collection found wrong (a bad infperf marker) ends the run
            # as it would without xdist: a usage error, not a crashed worker.
            raise pytest.UsageError(str(output[USAGE_ERROR_KEY]))
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
