"""Stash keys: where each per-session object lives on ``config.stash`` (and the per-test
failures on ``item.stash``). Core layer: the types are named for type checking only."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..measure.call import Mode
    from ..session.collector import Collector
    from ..session.context import RunContext
    from .cmdline import Forwarded
    from .settings import Settings

settings_key: pytest.StashKey[Settings] = pytest.StashKey()
context_key: pytest.StashKey[RunContext] = pytest.StashKey()
mode_key: pytest.StashKey[Mode] = pytest.StashKey()
collector_key: pytest.StashKey[Collector] = pytest.StashKey()
#: Messages that fail a test once its body has finished (regressions, budgets).
failures_key: pytest.StashKey[list[str]] = pytest.StashKey()
#: Per item: what is wrong with its ``infperf`` marker (reported as that test's error).
marker_error_key: pytest.StashKey[str] = pytest.StashKey()
#: An xdist worker that could not be pinned to a GPU says why (set before configure).
pin_warning_key: pytest.StashKey[str] = pytest.StashKey()
#: What an interleaving worker is given of this session's command line (set before the
#: initial conftests load, completed after).
forwarded_key: pytest.StashKey[Forwarded] = pytest.StashKey()
