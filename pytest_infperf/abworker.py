"""``python -m pytest_infperf.abworker``: the A/B worker's entry point, kept at this path.

The controller starts the worker by this module name, and runs it with the checkout's
folder as the working directory: in a repository that holds pytest_infperf itself (this
project's own main job), ``python -m`` finds the checkout's copy first, so a base commit
from before the package had folders must still answer to this name. The worker itself
is :mod:`pytest_infperf.ab.worker`.
"""

from __future__ import annotations

from .ab.worker import main

if __name__ == "__main__":
    raise SystemExit(main())
