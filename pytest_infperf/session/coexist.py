"""Living beside other plugins: a run another plugin would stop before any test is stopped
here instead, with a message that names the cause and the fix.

pytest-benchmark (installed in many ML images, whether a project uses it or not) warns
under pytest-xdist that it disables its own benchmarks there. Releases before 5.3.0 warn
from their ``pytest_configure``, whatever the tests are; a project whose ``filterwarnings``
makes warnings errors then stops at start-up with an internal error and a traceback,
before a single benchmark runs (5.3.0 warns only once its own ``benchmark`` fixture is
used under xdist). ``plugin.py`` asks :func:`benchmark_stops_the_run` before any plugin's
``pytest_configure`` (hooks that pytest calls "historic", as ``pytest_configure``, take no
wrapper, so the error cannot be caught as it happens): the same conditions pytest-benchmark
tests, and the action the project's warning filters, live at that point, give that
warning. The run is stopped with a usage error rather than let through: the project asked
that warnings fail it, and the fix is one flag.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from typing import Any

import pytest

#: The fix a run needs first: pytest-infperf needs nothing of pytest-benchmark.
WITHOUT = "-p no:benchmark"
#: What the project can add to ``filterwarnings`` instead, keeping pytest-benchmark loaded.
IGNORE = "ignore::pytest_benchmark.logger.PytestBenchmarkWarning"
#: The warning, as pytest-benchmark 4.0 to 5.2 words it (``session.py``).
XDIST_WARNING = (
    "Benchmarks are automatically disabled because xdist plugin is active."
    "Benchmarks cannot be performed reliably in a parallelized environment."
)
#: The first release that no longer warns at start-up.
DEFERRED_FROM = (5, 3)


def _release(version: str) -> tuple[int, ...]:
    """``"5.2.3"`` as ``(5, 2, 3)``; the leading numbers of anything else."""
    parts = []
    for part in version.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def would_be_an_error(category: type[Warning], message: str, module: str) -> bool:
    """The action the warning filters in force give this warning is ``error``: the first
    matching filter decides, as :func:`warnings.warn_explicit` does it, without emitting
    anything (a probe would leave its mark in ``once`` registries)."""
    for action, text, kind, where, line in warnings.filters:
        if (
            (text is None or text.match(message))
            and issubclass(category, kind)
            and (where is None or where.match(module))
            and line == 0
        ):
            return bool(action == "error")
    return bool(warnings.defaultaction == "error")  # type: ignore[attr-defined]


def benchmark_stops_the_run(config: pytest.Config) -> str | None:
    """The usage error to stop with when pytest-benchmark would stop this run at start-up
    on its xdist warning (None: it will not, or it is not loaded)."""
    if config.pluginmanager.get_plugin("benchmark") is None:
        return None
    logger: Any = sys.modules.get("pytest_benchmark.logger")
    category = getattr(logger, "PytestBenchmarkWarning", None)
    version = str(getattr(sys.modules.get("pytest_benchmark"), "__version__", ""))
    if not isinstance(category, type) or not issubclass(category, Warning):
        return None
    if not version or _release(version) >= DEFERRED_FROM:
        return None
    # pytest-benchmark's own conditions (session.py, 4.0 to 5.2).
    xdist = str(config.getoption("dist", "no") or "no") != "no" or bool(
        os.environ.get("PYTEST_XDIST_WORKER")
    )
    skip = bool(config.getoption("benchmark_skip", False))
    disabled = bool(config.getoption("benchmark_disable", False)) and not bool(
        config.getoption("benchmark_enable", False)
    )
    if not xdist or skip or disabled:
        return None
    if not would_be_an_error(category, XDIST_WARNING, "pytest_benchmark.logger"):
        return None
    return (
        f"pytest-benchmark {version} is installed, and under pytest-xdist it warns at "
        "start-up that it disables its own benchmarks; this project's warning filters "
        "(filterwarnings = error, or -W error) make that warning an error that would stop "
        "the run before any test. pytest-infperf does not need pytest-benchmark: run with "
        f"{WITHOUT} (or put it in addopts), or upgrade pytest-benchmark to 5.3.0 or later "
        "(which warns only when its own benchmark fixture runs under xdist), or add "
        f"{IGNORE!r} to filterwarnings"
    )
