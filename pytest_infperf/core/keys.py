"""Stash keys of the core layer's types: the settings, the per-test failures on
``item.stash``, and what is set before configure. A key whose value is a higher layer's
type lives beside that type (``measure.call.mode_key``, ``session.context.context_key``,
``session.collector.collector_key``): a lower layer never names a higher one, not even
for the type checker."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .cmdline import Forwarded
    from .settings import Settings

settings_key: pytest.StashKey[Settings] = pytest.StashKey()
#: Messages that fail a test once its body has finished (regressions, budgets).
failures_key: pytest.StashKey[list[str]] = pytest.StashKey()
#: Per item: what is wrong with its ``infperf`` marker (reported as that test's error).
marker_error_key: pytest.StashKey[str] = pytest.StashKey()
#: An xdist worker that could not be pinned to a GPU says why (set before configure).
pin_warning_key: pytest.StashKey[str] = pytest.StashKey()
#: What an interleaving worker is given of this session's command line (set before the
#: initial conftests load, completed after).
forwarded_key: pytest.StashKey[Forwarded] = pytest.StashKey()
