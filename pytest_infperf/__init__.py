"""pytest-infperf: performance-regression testing of ML model inference in pytest.

Importing the package is cheap: heavy names are resolved on first access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core.results import SCHEMA_VERSION, BenchmarkResult

__version__ = "0.2.0"

__all__ = [
    "SCHEMA_VERSION",
    "BackendError",
    "BenchmarkError",
    "BenchmarkResult",
    "InferBench",
    "OptionError",
    "__version__",
]

_LAZY = {
    "SCHEMA_VERSION": ("core.results", "SCHEMA_VERSION"),
    "BenchmarkResult": ("core.results", "BenchmarkResult"),
    "InferBench": ("session.fixture", "InferBench"),
    "BenchmarkError": ("session.fixture", "BenchmarkError"),
    "BackendError": ("measure.backends", "BackendError"),
    "OptionError": ("core.options", "OptionError"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
