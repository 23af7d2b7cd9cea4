"""The object behind the ``infer_bench`` fixture.

PYTEST_DONT_REWRITE

It merges the options, prepares the model through its backend, and asks the session's mode
to measure; it never looks at how the session compares.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from . import options as _options
from .backends import BackendError, prepare
from .bench import BenchCall, BenchmarkError

if TYPE_CHECKING:
    from .bench import Mode
    from .collector import Collector
    from .results import BenchmarkResult


def _params(item: pytest.Item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return {}
    out: dict[str, Any] = {}
    for key, value in callspec.params.items():
        plain = isinstance(value, (str, int, float, bool)) or value is None
        out[key] = value if plain else repr(value)
    return out


class InferBench:
    """Measure inference: ``infer_bench(model, inputs=None, **options) -> BenchmarkResult``.

    ``model`` is a callable (called as ``model()``, ``model(**inputs)``, ``model(*inputs)``
    or ``model(inputs)`` depending on ``inputs``), a ``torch.nn.Module``, an
    ``onnxruntime.InferenceSession`` or a path to an ``.onnx`` file. Options override the
    ``infperf`` marker, which overrides ini settings; see the README for the list. Call it
    several times in one test with ``name=`` to record several measurements; the first
    unnamed one is the test's benchmark.
    """

    def __init__(
        self, item: pytest.Item, mode: Mode, collector: Collector, defaults: dict[str, Any]
    ) -> None:
        self._item = item
        self._mode = mode
        self._collector = collector
        self._defaults = defaults
        self._names: set[str | None] = set()
        self.results: list[BenchmarkResult] = []

    def __repr__(self) -> str:
        return f"<InferBench {self._item.nodeid} measurements={len(self.results)}>"

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        layers = [
            self._defaults,
            _options.marker_layer(self._item),
            _options.parse_layer(kwargs, "infer_bench()"),
        ]
        return _options.merge(*layers)

    def __call__(self, model: Any, inputs: Any = None, **kwargs: Any) -> BenchmarkResult:
        __tracebackhide__ = True
        name = kwargs.pop("name", None)
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError(f"infer_bench(name={name!r}): a name is a non-empty string")
        if name in self._names:
            how = "without a name" if name is None else f"with name={name!r}"
            raise ValueError(
                f"infer_bench was already called {how} in this test: give each measurement "
                "its own name= (the unnamed one is the test's benchmark)"
            )
        try:
            opts = self._options(kwargs)
        except _options.OptionError as exc:
            raise _options.OptionError(str(exc)) from None  # the user's line, not ours
        self._names.add(name)
        try:
            prepared = prepare(model, inputs, opts)
        except BackendError as exc:
            raise exc.with_traceback(None) from None  # point at the user's call
        path, lineno, _ = self._item.location
        call = BenchCall(
            nodeid=self._item.nodeid,
            name=name,
            prepared=prepared,
            opts=opts,
            params=_params(self._item),
            path=path,
            lineno=(lineno + 1) if lineno is not None else None,
        )
        try:
            result = self._mode.measure(call)
        except TypeError as exc:
            _hint_unpacked_list(exc, model, inputs)
            raise
        finally:
            if prepared.close is not None:
                prepared.close()
        self._collector.add(self._item, result, call.failures)
        self.results.append(result)
        return result


def _hint_unpacked_list(exc: TypeError, model: Any, inputs: Any) -> None:
    """A list as ``inputs`` is unpacked into positional arguments (``model(*inputs)``), like
    a tuple; a model that takes the list itself then fails with a TypeError about
    positional arguments. Say so beside Python's own message."""
    add_note = getattr(exc, "add_note", None)  # Python 3.11+
    if add_note is not None and isinstance(inputs, list) and "positional argument" in str(exc):
        name = getattr(model, "__name__", type(model).__name__)
        add_note(
            f"infer_bench: inputs is a list of {len(inputs)}, which is passed as "
            f"{len(inputs)} positional arguments ({name}(*inputs)); to pass the list as one "
            "argument, wrap it in a tuple: infer_bench(model, (inputs,))"
        )


__all__ = ["BackendError", "BenchmarkError", "InferBench"]
