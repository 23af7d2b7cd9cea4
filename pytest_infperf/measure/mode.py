"""The ``Mode`` protocol a session's measuring mode follows, and the stash key it lives
under. Light (pytest only): ``plugin.py`` imports it at start-up, and the A/B worker
installs itself under the key before the session chooses a mode."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import pytest

if TYPE_CHECKING:
    from ..core.results import BenchmarkResult
    from .call import BenchCall


class Mode(Protocol):
    """How ``infer_bench`` measures in this session (chosen once, at configure time):
    measure only, against a stored baseline, interleaved with a base (A/B head), or as the
    A/B base side. The fixture asks the mode; it never looks at session state itself."""

    name: str

    def measure(self, call: BenchCall) -> BenchmarkResult:
        """Measure ``call`` and return the (judged) result; failures go to ``call.fail``."""
        ...


mode_key: pytest.StashKey[Mode] = pytest.StashKey()
