"""The ``infperf`` command (also ``python -m pytest_infperf``): the top layer beside the
plugin. Its sub-commands (list, compare, history, report, comment, baselines, prune...)
read the store, ask the judge and write reports; each loads numpy, scipy or matplotlib only
when it runs.
"""

from __future__ import annotations

from .main import main

__all__ = ["main"]
