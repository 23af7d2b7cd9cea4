"""The object behind the ``infer_bench`` fixture.

PYTEST_DONT_REWRITE

It merges the options, prepares the model through its backend, and asks the session's mode
to measure; it never looks at how the session compares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

from ..core import options as _options
from ..measure.backends import (
    BackendError,
    NoDevice,
    device_error,
    is_ort_session,
    out_of_memory,
    prepare,
    prepare_generation,
    release_cuda_memory,
    takes_device,
)
from ..measure.call import BenchCall, BenchmarkError

if TYPE_CHECKING:
    from ..core.results import BenchmarkResult
    from ..measure.mode import Mode
    from .collector import Collector


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

    def _options(
        self,
        kwargs: dict[str, Any],
        where: str,
        generation: bool,
        model: Any = None,
        inputs: Any = None,
    ) -> _options.BenchOptions:
        defaults = dict(self._defaults)
        marker = _options.marker_layer(self._item)
        call = _options.parse_layer(kwargs, where)
        if is_ort_session(model):
            self._keep_session_settings(defaults, marker, call)
        run_wide = "device" not in marker and "device" not in call
        if run_wide and not generation and not takes_device(model, inputs):
            # The run's device (--perf-device, infperf_device) moves torch models; a plain
            # callable or an ONNX Runtime model runs where the test put it.
            defaults.pop("device", None)
        session_metric = defaults.get("metric", "median")
        explicit = "metric" in marker or "metric" in call
        if not explicit and not _options.metric_applies(session_metric, generation):
            # A session-wide metric (--perf-metric, ini) for the other kind of benchmark
            # (--perf-metric=tpot in a suite that also times single calls): this kind
            # keeps its default. Set on a test or a call, it is an error instead.
            defaults["metric"] = "median"
        return _options.merge(defaults, marker, call, generation=generation)

    def _keep_session_settings(
        self, defaults: dict[str, Any], marker: Mapping[str, Any], call: Mapping[str, Any]
    ) -> None:
        """A session the test built keeps its own settings: a run-wide one (an ini key such
        as the noise advice's infperf_intra_op_threads) does not reach it, and the run says
        once how to set it where the session is made. Set on the call or the marker, it
        stays (and is an error for such a session)."""
        dropped = [
            k for k in _options.SESSION_KEYS if k in defaults and k not in marker and k not in call
        ]
        for key in dropped:
            del defaults[key]
        if not dropped:
            return
        # The same words from every test and xdist worker: said once.
        ini = {"intra_op_threads"}  # the one with an ini key; the rest: infperf_expert's
        named = [f"infperf_{k}" if k in ini else f"infperf_expert's {k}" for k in dropped]
        attrs = [_options.SESSION_KEYS[k] for k in dropped if _options.SESSION_KEYS[k]]
        how = f"set SessionOptions.{', '.join(attrs)}" if attrs else "set it"
        self._collector.context.warn(
            f"{', '.join(named)} does not reach an InferenceSession a test built: {how} "
            "where the test makes it"
        )

    def _no_device(self, exc: NoDevice, kwargs: Mapping[str, Any]) -> None:
        """The device asked for is not on this machine (cuda on a CPU runner): the test is
        skipped, saying why and where the device was asked for, and the run says it once
        (a run whose every benchmark skips measured nothing, and a gate fails it)."""
        __tracebackhide__ = True
        marker = _options.marker_layer(self._item)
        where, short = (
            ("this call's device=", "the call")
            if "device" in kwargs
            else ("the test's infperf marker", "the marker")
            if "device" in marker
            else ("the run's --perf-device or infperf_device", "--perf-device")
        )
        self._collector.context.warn(
            f"benchmarks skipped: {exc}, asked by {where}: a GPU runner measures them, and "
            "without it they run on the CPU"
        )
        # Short: pytest prints it after the test's path (-rs); the run's warning says more.
        pytest.skip(f"infperf: no NVIDIA GPU for device={exc.device!r} ({short})")

    def __call__(self, model: Any, inputs: Any = None, **kwargs: Any) -> BenchmarkResult:
        __tracebackhide__ = True
        try:
            return self._run(model, inputs, kwargs, None)
        except (BackendError, BenchmarkError, _options.OptionError) as exc:
            raise _printed(exc) from None

    def generate(
        self,
        model: Any,
        inputs: Any,
        max_new_tokens: int = 32,
        *,
        generate_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> BenchmarkResult:
        """Measure autoregressive generation: ``model.generate(**inputs)`` of a transformers
        model, greedy, exactly ``max_new_tokens`` new tokens (EOS ignored), so that two runs
        do the same work. Each sample is one whole generation, timed per token: the result
        carries ``generation`` with TTFT, TPOT, ITL, E2E and tokens/s (samples and
        statistics), and a comparison judges TTFT and TPOT (``metric="ttft"`` or ``"tpot"``
        narrows it to one). ``generate_kwargs`` pass through to ``generate`` (e.g.
        ``cache_implementation="static"``); other options are infer_bench's."""
        __tracebackhide__ = True
        spec = (max_new_tokens, generate_kwargs)
        try:
            return self._run(model, inputs, kwargs, spec)
        except (BackendError, BenchmarkError, _options.OptionError) as exc:
            raise _printed(exc) from None

    def _run(
        self,
        model: Any,
        inputs: Any,
        kwargs: dict[str, Any],
        generation: tuple[Any, Mapping[str, Any] | None] | None,
    ) -> BenchmarkResult:
        __tracebackhide__ = True
        where = "infer_bench()" if generation is None else "infer_bench.generate()"
        name = kwargs.pop("name", None)
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError(f"{where}(name={name!r}): a name is a non-empty string")
        if name in self._names:
            how = "without a name" if name is None else f"with name={name!r}"
            raise ValueError(
                f"infer_bench was already called {how} in this test: give each measurement "
                "its own name= (the unnamed one is the test's benchmark)"
            )
        try:
            opts = self._options(kwargs, where, generation is not None, model, inputs)
        except _options.OptionError as exc:
            raise _options.OptionError(str(exc)) from None  # the user's line, not ours
        self._names.add(name)
        try:
            if generation is None:
                prepared = prepare(model, inputs, opts)
            else:
                prepared = prepare_generation(model, inputs, *generation, opts)
        except NoDevice as exc:
            self._no_device(exc, kwargs)
        except BackendError as exc:
            raise exc.with_traceback(None) from None  # point at the user's call
        except RuntimeError as exc:
            _raise_explained(exc)
            raise
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
        except BackendError as exc:
            raise exc.with_traceback(None) from None
        except RuntimeError as exc:
            _raise_explained(exc)
            raise
        finally:
            if prepared.close is not None:
                prepared.close()
        self._collector.add(self._item, result, call.failures)
        self.results.append(result)
        return result


def _printed(exc: Exception) -> Exception:
    """``exc`` with its message fitted to the terminal as pytest prints it: each line after
    ``E   ``, the first after the exception's name too (a refusal ran to 540 columns)."""
    from ..report.fmt import columns, fit

    kind = type(exc)
    name = f"{kind.__module__}.{kind.__qualname__}: "
    exc.args = (fit(str(exc), width=columns() - 4, first=len(name)),)
    return exc.with_traceback(None)


def _raise_explained(exc: RuntimeError) -> None:
    """A GPU error the benchmark caused itself (out of memory, devices mixed up) becomes a
    ``BenchmarkError`` that says what to do; the original's traceback is dropped, so that
    its frames (and the tensors they hold) are freed before the next test runs."""
    message = device_error(exc)
    if message is None:
        return
    exc.__traceback__ = None
    if out_of_memory(exc):
        # The next test must find the GPU as it was: the failed call's tensors are garbage
        # once the frames that held them are (the traceback is gone).
        release_cuda_memory()
    raise BenchmarkError(message) from None


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
