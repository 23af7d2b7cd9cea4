"""An injected slowdown for real models (``benchmarks/real_models.py --slowdown F``),
copied into the temporary repository as its root ``conftest.py``: every call of a model
given to ``infer_bench`` (a torch module's forward, each step of a ``generate()``, an ONNX
Runtime session's run, with or without IOBinding) is followed by a busy wait of ``F - 1``
times that call's own time (in a ``generate()``, the time since the previous step ended),
so the model's latency, and a generation's TTFT and TPOT, grow by the factor ``F`` written
in ``slowdown.txt`` (1.0 on main, ``F`` on the branch under test). Both sides run the same
hooks; only the factor differs. For the CPU: on a GPU the wait stretches the host's
launches, not the device's time.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: What the plugin calls to time an ONNX Runtime session (numpy feeds; IOBinding).
RUNS = ("run", "run_with_iobinding")
FACTOR = float((Path(__file__).parent / "slowdown.txt").read_text())


def _stretch(started: float) -> None:
    """Busy-wait until the call that began at ``started`` took ``FACTOR`` times as long."""
    now = time.perf_counter()
    until = now + (now - started) * (FACTOR - 1.0)
    while time.perf_counter() < until:
        pass


def _hooked(model: Any) -> Any:
    """Hooks on a torch module's forward; in a ``generate()``, each forward is stretched
    with everything since the previous one ended (the step's own overhead) or since
    ``generate()`` began (TTFT), so both TTFT and TPOT grow by the factor."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(model, torch.nn.Module):
        return model
    if getattr(model, "_slowdown_hooked", False):
        # A model a fixture caches for several tests (the examples' infperf_hf) is hooked
        # once: hooks added per test would stack, and the factor with them.
        return model
    model._slowdown_hooked = True
    since = [0.0]
    generating = [False]

    def before(*_: Any) -> None:
        if not generating[0]:
            since[0] = time.perf_counter()

    def after(*_: Any) -> None:
        _stretch(since[0])
        since[0] = time.perf_counter()

    model.register_forward_pre_hook(before)
    model.register_forward_hook(after)
    original = getattr(model, "generate", None)
    if original is not None:

        def generate(*args: Any, **kwargs: Any) -> Any:
            generating[0], since[0] = True, time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                generating[0] = False

        model.generate = generate
    return model


class _Slowed:
    """The plugin's fixture, with the model hooked first."""

    def __init__(self, bench: Any) -> None:
        self._bench = bench

    def __call__(self, model: Any, *args: Any, **kwargs: Any) -> Any:
        return self._bench(_hooked(model), *args, **kwargs)

    def generate(self, model: Any, *args: Any, **kwargs: Any) -> Any:
        return self._bench.generate(_hooked(model), *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bench, name)


@pytest.fixture(autouse=True, scope="session")
def _slowed_sessions() -> Iterator[None]:
    """ONNX Runtime sessions the plugin builds from a path: their run, stretched."""
    try:
        import onnxruntime as ort
    except ImportError:
        yield
        return
    originals = {name: getattr(ort.InferenceSession, name) for name in RUNS}

    def stretched(original: Any) -> Any:
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            out = original(self, *args, **kwargs)
            _stretch(started)
            return out

        return run

    for name, original in originals.items():
        setattr(ort.InferenceSession, name, stretched(original))
    yield
    for name, original in originals.items():
        setattr(ort.InferenceSession, name, original)


@pytest.fixture
def infer_bench(infer_bench: Any) -> Any:
    return _Slowed(infer_bench)
