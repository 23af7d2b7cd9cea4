"""The object behind the ``infer_bench`` fixture.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pytest

from . import memory as _memory
from . import options as _options
from .backends import BackendError, Prepared, find_nan, prepare, runs_on_gpu
from .results import BenchmarkResult
from .stats import summarize, throughput
from .timing import Measurement, Warm, measure, warm_up

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
        out[key] = (
            value if isinstance(value, (str, int, float, bool)) or value is None else repr(value)
        )
    return out


def _from_warm(samples: list[float], warm: Warm) -> Measurement:
    """A Measurement from block samples taken after ``warm`` (A/B mode)."""
    return Measurement(
        samples=list(samples),
        warmup_samples=[v / 1e9 for v in warm.warm_ns],
        first_call=warm.first_call_s,
        block_size=warm.block,
        decisions={**warm.decisions, "rounds": len(samples), "stop_reason": "ab"},
        memory={},
        backend_extra={},
        first_output=warm.first_output,
    )


def _device_domain(prepared: Prepared) -> str:
    """Which device a measurement occupies, for the timing lock: 'cpu' or 'gpu-<id>'."""
    if not runs_on_gpu(prepared.env):
        return "cpu"
    import os

    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "_") or "all"
    return f"gpu-{visible}"


def _gpu_state(prepared: Prepared) -> dict[str, Any] | None:
    """NVML state of the GPU a benchmark runs on (clocks, temperature, throttling, memory)."""
    from . import gpu

    device = str(prepared.info.get("device") or "cuda:0")
    index = int(device.split(":")[1]) if ":" in device else 0
    return gpu.device_state(gpu.nvml_index(index))


def _record_gpu_state(
    result: BenchmarkResult, before: dict[str, Any], after: dict[str, Any] | None
) -> None:
    result.extra["gpu_state"] = {"before": before, "after": after}
    if (
        after is not None
        and before.get("memory_used_bytes") is not None
        and after.get("memory_used_bytes") is not None
    ):
        result.memory["nvml_used_bytes"] = after["memory_used_bytes"]
        result.memory["nvml_growth_bytes"] = (
            after["memory_used_bytes"] - before["memory_used_bytes"]
        )
    throttled = sorted(
        set(before.get("throttle_reasons") or []) | set((after or {}).get("throttle_reasons") or [])
    )
    if throttled:
        result.warnings.append(
            f"the GPU was throttled around the timed region ({', '.join(throttled)}): "
            "clocks were below their maximum, so latency is higher than the GPU can do; "
            "check cooling, power limits and other jobs on the GPU"
        )


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
        layers = [
            self._session.bench_layer,
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
        try:
            if self._session.settings.disable:
                with prepared.sampler.context():
                    prepared.sampler.call()
                return self._disabled_result(name, prepared, opts)
            if self._session.ab_server is not None:  # the base side of --perf-ab
                return self._session.ab_server.serve(
                    name,
                    prepared,
                    opts,
                    self._check_output(opts),
                    lambda samples, warm: self._result(
                        name, prepared, opts, _from_warm(samples, warm)
                    ),
                )
            if self._session.ab is not None:
                with self._session.timing_lock("cpu"):
                    result = self._measure_ab(name, prepared, opts)
                self._session.record(self._item, result)
                self.results.append(result)
                return result
            domain = _device_domain(prepared)
            with self._session.timing_lock(domain):
                before = _gpu_state(prepared) if domain != "cpu" else None
                result = self._measure(name, prepared, opts)
                if before is not None:
                    _record_gpu_state(result, before, _gpu_state(prepared))
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
                part = "output" if where == "output" else f"output {where}"
                raise BenchmarkError(
                    f"the model's {part} contains NaN: timing a model that computes "
                    "NaN measures nothing useful (check the inputs and weights, or pass "
                    "check_nan=False)"
                )

        return check

    def _measure(
        self, name: str | None, prepared: Prepared, opts: dict[str, Any]
    ) -> BenchmarkResult:
        __tracebackhide__ = True
        m = measure(
            prepared.sampler, opts, check_output=self._check_output(opts), probe=self._session.probe
        )
        return self._result(name, prepared, opts, m)

    def _measure_ab(
        self, name: str | None, prepared: Prepared, opts: dict[str, Any]
    ) -> BenchmarkResult:
        """The head side of --perf-ab: the base is brought to the same call in its own
        process, then blocks alternate (ABBA) until the paired verdict is decided."""
        __tracebackhide__ = True
        from . import environment
        from .ab import AB_SAMPLE_TIME_S, ABError, interleave
        from .compare import INCOMPARABLE, NO_BASELINE, REGRESSION
        from .verdict import failure_message

        session = self._session
        ab = session.ab
        assert ab is not None
        where = {
            "mode": "ab",
            "baseline_commit": ab.base_sha,
            "baseline_distance": None,
            "threshold": opts["threshold"],
            "alpha": opts["alpha"],
            "metric": "median",
        }
        try:
            base = ab.begin(self._item.nodeid, name)
        except ABError as exc:
            raise BenchmarkError(str(exc)) from None
        if base is None:
            result = self._measure(name, prepared, opts)
            result.comparison = {
                "verdict": NO_BASELINE,
                **where,
                "env_diff": None,
                "note": "not in the base commit",
            }
            return result
        env_diff = environment.diff(prepared.env, base.get("env") or {})
        sampler = prepared.sampler
        with sampler.context():
            warm = warm_up(
                sampler,
                opts,
                check_output=self._check_output(opts),
                target=max(opts["min_sample_time"], AB_SAMPLE_TIME_S),
            )
            per_call = sorted(warm.warm_ns[-5:])[len(warm.warm_ns[-5:]) // 2] / 1e9
            _memory.before_timed()
            try:
                data = interleave(ab, sampler, warm.block, per_call * warm.block, opts)
                if data["decision"]["verdict"] == REGRESSION and opts["remeasure"] > 0:
                    # Confirm on fresh pairs, as the stored mode re-measures: a regression
                    # must show in two independent interleaved runs.
                    first = {
                        k: data["decision"].get(k)
                        for k in ("verdict", "ratio", "ci_low", "ci_high", "p_value", "pairs")
                    }
                    again = interleave(ab, sampler, warm.block, per_call * warm.block, opts)
                    again["decision"].update(remeasured=True, first_pass=first)
                    data = {
                        "head": data["head"] + again["head"],
                        "base": data["base"] + again["base"],
                        "ratios": again["ratios"],
                        "decision": again["decision"],
                    }
                base_done = ab.finish_call()
            except ABError as exc:
                raise BenchmarkError(str(exc)) from None
            mem = _memory.after_timed()
        m = _from_warm(data["head"], warm)
        m.memory = mem
        result = self._result(name, prepared, opts, m)
        base_samples = data["base"]
        result.extra.update(base_samples=base_samples, ab_log_ratios=data["ratios"])
        c = data["decision"]
        c.update(where)
        c.update(
            baseline_median=sorted(base_samples)[len(base_samples) // 2],
            n=len(data["head"]),
            n_baseline=len(base_samples),
            env_diff=None,
            base_measured_median=base_done.get("median"),
        )
        if env_diff:
            c.update(verdict=INCOMPARABLE, env_diff=env_diff)
            if session.settings.strict_env:
                session.fail_item(
                    self._item,
                    f"{result.key}: the base side runs in a "
                    "different environment: "
                    f"{environment.describe_diff(env_diff)} (--perf-strict-env)",
                )
        result.comparison = c
        if c["verdict"] == REGRESSION:
            assert session.source is not None
            c["message"] = failure_message(result.key, c, session.source, result.median)
            session.fail_item(self._item, c["message"])
        return result

    def _remeasure(self, prepared: Prepared, opts: dict[str, Any]) -> Measurement:
        return measure(prepared.sampler, opts, first=False, probe=self._session.probe)

    def _result(
        self, name: str | None, prepared: Prepared, opts: dict[str, Any], m: Measurement
    ) -> BenchmarkResult:
        if not m.samples:
            raise BenchmarkError("no timed samples were taken")
        stats = summarize(m.samples)
        batch = opts["batch_size"] or prepared.batch_size
        extra = dict(m.backend_extra)
        memory = dict(m.memory)
        for key in ("cuda_max_allocated_bytes", "cuda_max_reserved_bytes", "nvml_used_bytes"):
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

    def _disabled_result(
        self, name: str | None, prepared: Prepared, opts: dict[str, Any]
    ) -> BenchmarkResult:
        return BenchmarkResult(
            nodeid=self._item.nodeid,
            name=name,
            backend=prepared.backend,
            samples=[],
            stats={"n": 0, "median": math.nan},
            decisions={"disabled": True},
        )


__all__ = ["BackendError", "BenchmarkError", "InferBench"]
