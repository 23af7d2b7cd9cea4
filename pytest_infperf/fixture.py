"""The object behind the ``infer_bench`` fixture.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pytest

from . import options as _options
from .backends import BackendError, Prepared, find_nan, prepare
from .results import BenchmarkResult
from .stats import summarize, throughput
from .timing import Measurement, measure

if TYPE_CHECKING:
    from .session import InfperfSession


class BenchmarkError(Exception):
    """The model ran but its result cannot be used (NaN output, no samples...)."""


def _params(item: pytest.Item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return {}
    out: dict[str, Any] = {}
    for key, value in callspec.params.items():
        out[key] = value if isinstance(value, (str, int, float, bool)) or value is None \
            else repr(value)  # fmt: skip
    return out


def _device_domain(prepared: Prepared) -> str:
    """Which device a measurement occupies, for the timing lock: 'cpu' or 'gpu-<id>'."""
    env = prepared.env
    on_gpu = env.get("device_type") == "cuda" or "CUDA" in str(env.get("provider", "")) \
        or "Tensorrt" in str(env.get("provider", ""))  # fmt: skip
    if not on_gpu:
        return "cpu"
    import os

    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "_") or "all"
    return f"gpu-{visible}"


class InferBench:
    """Measure inference: ``infer_bench(model, inputs=None, **options) -> BenchmarkResult``.

    ``model`` is a callable (called as ``model()``, ``model(**inputs)``, ``model(*inputs)``
    or ``model(inputs)`` depending on ``inputs``), a ``torch.nn.Module``, an
    ``onnxruntime.InferenceSession`` or a path to an ``.onnx`` file. Options override the
    ``infperf`` marker, which overrides ini settings; see the README for the list. Call it
    several times in one test with ``name=`` to record several measurements; the first
    unnamed one is the test's benchmark.
    """

    def __init__(self, item: pytest.Item, session: InfperfSession) -> None:
        self._item = item
        self._session = session
        self._names: set[str | None] = set()
        self.results: list[BenchmarkResult] = []

    def __repr__(self) -> str:
        return f"<InferBench {self._item.nodeid} measurements={len(self.results)}>"

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        layers = [self._session.bench_layer, _options.marker_layer(self._item),
                  _options.parse_layer(kwargs, "infer_bench()")]  # fmt: skip
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
        try:
            if self._session.settings.disable:
                with prepared.sampler.context():
                    prepared.sampler.call()
                return self._disabled_result(name, prepared, opts)
            with self._session.timing_lock(_device_domain(prepared)):
                result = self._measure(name, prepared, opts)
                self._session.judge(self._item, result, lambda: self._remeasure(prepared, opts))
        finally:
            if prepared.close is not None:
                prepared.close()
        self._session.record(self._item, result)
        self.results.append(result)
        return result

    def _check_output(self, opts: dict[str, Any]) -> Any:
        def check(output: Any) -> None:
            if not opts["check_nan"]:
                return
            where = find_nan(output)
            if where is not None:
                raise BenchmarkError(
                    f"the model's output {where} contains NaN: timing a model that computes "
                    "NaN measures nothing useful (check the inputs and weights, or pass "
                    "check_nan=False)"
                )

        return check

    def _measure(self, name: str | None, prepared: Prepared,
                 opts: dict[str, Any]) -> BenchmarkResult:  # fmt: skip
        __tracebackhide__ = True
        m = measure(prepared.sampler, opts, check_output=self._check_output(opts),
                    probe=self._session.probe)  # fmt: skip
        return self._result(name, prepared, opts, m)

    def _remeasure(self, prepared: Prepared, opts: dict[str, Any]) -> Measurement:
        return measure(prepared.sampler, opts, first=False, probe=self._session.probe)

    def _result(self, name: str | None, prepared: Prepared, opts: dict[str, Any],
                m: Measurement) -> BenchmarkResult:  # fmt: skip
        if not m.samples:
            raise BenchmarkError("no timed samples were taken")
        stats = summarize(m.samples)
        batch = opts["batch_size"] or prepared.batch_size
        extra = dict(m.backend_extra)
        memory = dict(m.memory)
        for key in ("cuda_max_allocated_bytes", "cuda_max_reserved_bytes",
                    "nvml_used_bytes"):  # fmt: skip
            if key in extra:
                memory[key] = extra.pop(key)
        warnings = list(prepared.warnings)
        if extra.get("recompiles"):
            warnings.append(
                f"torch.compile recompiled {extra['recompiles']} time(s) during the timed "
                "region, so samples include compilation: use fixed shapes, mark dynamic "
                "dimensions (torch._dynamo.mark_dynamic), or warm up with every shape"
            )
        path, lineno, _ = self._item.location
        params = _params(self._item)
        if opts.get("params"):
            params.update(opts["params"])
        return BenchmarkResult(
            nodeid=self._item.nodeid,
            name=name,
            backend=prepared.backend,
            samples=m.samples,
            stats=stats,
            params=params,
            options=_options.recorded({k: v for k, v in opts.items() if k != "params"}),
            warmup_samples=m.warmup_samples,
            first_call=m.first_call,
            block_size=m.block_size,
            batch_size=batch,
            throughput=throughput(batch, stats["median"]),
            memory=memory,
            decisions=m.decisions,
            backend_info=prepared.info,
            env=prepared.env,
            extra=extra,
            warnings=warnings,
            reference=m.reference,
            path=path,
            lineno=(lineno + 1) if lineno is not None else None,
        )

    def _disabled_result(self, name: str | None, prepared: Prepared,
                         opts: dict[str, Any]) -> BenchmarkResult:  # fmt: skip
        return BenchmarkResult(
            nodeid=self._item.nodeid, name=name, backend=prepared.backend, samples=[],
            stats={"n": 0, "median": math.nan}, decisions={"disabled": True},
        )  # fmt: skip


__all__ = ["BackendError", "BenchmarkError", "InferBench"]
