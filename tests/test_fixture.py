"""The infer_bench fixture with plain callables: conventions, names, failures, decisions."""

from __future__ import annotations

import json

import pytest

from .conftest import load_json


def test_calling_conventions(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        calls = []

        def f(*args, **kwargs):
            calls.append((args, kwargs))

        def test_none(infer_bench):
            calls.clear(); infer_bench(f); assert calls[-1] == ((), {})

        def test_mapping(infer_bench):
            calls.clear(); infer_bench(f, {"a": 1}); assert calls[-1] == ((), {"a": 1})

        def test_tuple(infer_bench):
            calls.clear(); infer_bench(f, (1, 2)); assert calls[-1] == ((1, 2), {})

        def test_list(infer_bench):
            calls.clear(); infer_bench(f, [3]); assert calls[-1] == ((3,), {})

        def test_single(infer_bench):
            calls.clear(); infer_bench(f, "x"); assert calls[-1] == (("x",), {})
        """
    )
    ourtester.runpytest().assert_outcomes(passed=5)


def test_result_and_decisions(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        import time

        def busy():
            end = time.perf_counter_ns() + 20_000
            while time.perf_counter_ns() < end:
                pass

        def test_a(infer_bench):
            r = infer_bench(busy, rounds=15, max_rounds=40, min_time=0)
            assert r.backend == "callable"
            assert 15 <= len(r.samples) <= 40 == r.options["max_rounds"]
            assert r.first_call is not None and r.first_call > 0
            assert len(r.warmup_samples) >= 2
            assert r.decisions["stop_reason"] in ("precision", "max_time", "max_rounds")
            assert r.decisions["rounds"] == len(r.samples)
            assert r.decisions["warmup_calls"] >= 2
            assert r["median"] == r.median == r.stats["median"]
            assert 19e-6 < r.median < 60e-6
            assert r.block_size == 1
        """
    )
    ourtester.runpytest().assert_outcomes(passed=1)


def test_fast_calls_are_timed_in_blocks(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        def test_a(infer_bench):
            r = infer_bench(lambda: None)
            assert r.block_size >= 16
            assert r.decisions["block_size"] == r.block_size
            assert r.median < 1e-6
        """
    )
    ourtester.runpytest().assert_outcomes(passed=1)


def test_samples_span_min_time(ourtester: pytest.Pytester) -> None:
    """Machine speed drifts over seconds: sampling must not stop on a tight CI after a few
    milliseconds. Fast calls are grouped so max_rounds samples still span min_time."""
    ourtester.makepyfile(
        """
        def test_a(infer_bench):
            r = infer_bench(lambda: None, min_time=0.3, max_time=1.0, max_rounds=100)
            assert r.decisions["timed_s"] >= 0.3  # whatever ended sampling, it spanned min_time
            assert r.block_size > 1000  # ~6 ms per sample for a ~30 ns call

        def test_min_time_clamped_by_max_time(infer_bench):
            r = infer_bench(lambda: None, min_time=5, max_time=0.1)
            assert r.decisions["timed_s"] < 1.0
        """
    )
    ourtester.runpytest().assert_outcomes(passed=2)


def test_named_measurements(ourtester: pytest.Pytester, tmp_path: object) -> None:
    ourtester.makepyfile(
        """
        import pytest

        def test_a(infer_bench):
            infer_bench(lambda: None)
            infer_bench(lambda: None, name="second")
            infer_bench(lambda: None, name="third")

        def test_dup_name(infer_bench):
            infer_bench(lambda: None, name="x")
            with pytest.raises(ValueError, match="already called with name='x'"):
                infer_bench(lambda: None, name="x")

        def test_dup_unnamed(infer_bench):
            infer_bench(lambda: None)
            with pytest.raises(ValueError, match="already called without a name"):
                infer_bench(lambda: None)
        """
    )
    result = ourtester.runpytest("--perf-json=out.json")
    result.assert_outcomes(passed=3)
    doc = load_json(ourtester.path / "out.json")
    keys = [b["key"] for b in doc["benchmarks"]]
    assert "test_named_measurements.py::test_a" in keys
    assert "test_named_measurements.py::test_a#second" in keys
    assert "test_named_measurements.py::test_a#third" in keys


def test_model_exception_fails_with_its_own_error(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        class ModelBroke(RuntimeError):
            pass

        def broken():
            raise ModelBroke("shape mismatch in layer 3")

        def test_broken(infer_bench):
            infer_bench(broken)

        def test_fine(infer_bench):
            infer_bench(lambda: None)
        """
    )
    result = ourtester.runpytest("--perf-json=out.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["E   *ModelBroke: shape mismatch in layer 3"])
    doc = load_json(ourtester.path / "out.json")
    assert [b["nodeid"].split("::")[1] for b in doc["benchmarks"]] == ["test_fine"]


def test_a_list_of_inputs_that_should_have_been_one_argument_gets_a_hint(
    ourtester: pytest.Pytester,
) -> None:
    ourtester.makepyfile(
        """
        def total(values):
            return sum(values)

        def test_list(infer_bench):
            infer_bench(total, [1.0, 2.0, 3.0])

        def test_tuple(infer_bench):
            infer_bench(total, ([1.0, 2.0, 3.0],))
        """
    )
    result = ourtester.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E *TypeError: total() takes 1 positional argument but 3 were given",
            "E *infer_bench: inputs is a list of 3, which is passed as 3 positional arguments "
            "(total(*inputs)); to pass the list as one argument, wrap it in a tuple: "
            "infer_bench(model, (inputs,))",
        ]
    )


def test_nan_output_fails_the_test(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        import numpy as np

        def test_nan(infer_bench):
            infer_bench(lambda: {"logits": np.array([1.0, np.nan])})

        def test_nan_allowed(infer_bench):
            infer_bench(lambda: float("nan"), check_nan=False)

        def test_ints_are_fine(infer_bench):
            infer_bench(lambda: [np.arange(3)])
        """
    )
    result = ourtester.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["E   *BenchmarkError: the model's output logits contains NaN*"])


def test_throughput_from_batch(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        import numpy as np

        def model(x):
            return x.sum()

        def test_inferred(infer_bench):
            r = infer_bench(model, np.ones((8, 4)))
            assert r.batch_size == 8
            assert r.throughput == 8 / r.median

        def test_explicit(infer_bench):
            r = infer_bench(model, np.ones((8, 4)), batch_size=2)
            assert r.batch_size == 2

        def test_none(infer_bench):
            r = infer_bench(lambda: None)
            assert r.batch_size is None and r.throughput is None
        """
    )
    ourtester.runpytest().assert_outcomes(passed=3)


def test_not_callable_and_bad_paths(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        import pytest
        from pytest_infperf import BackendError

        def test_int(infer_bench):
            with pytest.raises(BackendError, match="cannot benchmark a 'int'"):
                infer_bench(42)

        def test_txt(infer_bench, tmp_path):
            with pytest.raises(BackendError, match="only .onnx files"):
                infer_bench(str(tmp_path / "model.txt"))

        def test_missing(infer_bench, tmp_path):
            with pytest.raises(BackendError, match="does not exist"):
                infer_bench(tmp_path / "model.onnx")

        def test_backend_option_on_callable(infer_bench):
            with pytest.raises(BackendError, match="providers= applies to torch or onnxruntime"):
                infer_bench(lambda: None, providers=["CPUExecutionProvider"])
        """
    )
    ourtester.runpytest().assert_outcomes(passed=4)


def test_budget_fails_after_the_test_body(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        import time

        def sleepy():
            time.sleep(0.002)

        def test_over(infer_bench):
            infer_bench(sleepy, max_median_ms=0.5)
            print("body finished")

        def test_under(infer_bench):
            infer_bench(sleepy, max_median_ms=500)
        """
    )
    result = ourtester.runpytest("-s")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*body finished*", "*is over the budget max_median_ms=0.5*"])
    result = ourtester.runpytest("--perf-warn-only")
    result.assert_outcomes(passed=2)


def test_disable_calls_once_without_timing(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        calls = []

        def test_a(infer_bench):
            r = infer_bench(lambda: calls.append(1))
            assert calls == [1]
            assert r.stats["n"] == 0
        """
    )
    result = ourtester.runpytest("--perf-disable", "--perf-json=out.json")
    result.assert_outcomes(passed=1)
    assert not (ourtester.path / "out.json").exists()


def test_gc_is_off_while_timing(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        import gc

        seen = []

        def test_a(infer_bench):
            # profile="off": the profiled pass calls the model after timing (gc on)
            infer_bench(lambda: seen.append(gc.isenabled()), rounds=10, max_rounds=10,
                        min_sample_time=0, warmup=0, warmup_time=0, profile="off")
            # the first call runs before timing; every timed call saw gc off
            assert seen[0] is True and not any(seen[-10:])
            assert gc.isenabled()

        def test_opt_out(infer_bench):
            seen.clear()
            infer_bench(lambda: seen.append(gc.isenabled()), disable_gc=False)
            assert all(seen)
        """
    )
    ourtester.runpytest().assert_outcomes(passed=2)


def test_params_recorded(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("batch", [1, 4])
        @pytest.mark.parametrize("seq", [16])
        def test_a(infer_bench, batch, seq):
            infer_bench(lambda: None, params={"model": "toy"})
        """
    )
    ourtester.runpytest("--perf-json=out.json").assert_outcomes(passed=2)
    doc = load_json(ourtester.path / "out.json")
    params = [b["params"] for b in doc["benchmarks"]]
    assert {"batch": 1, "seq": 16, "model": "toy"} in params
    assert {"batch": 4, "seq": 16, "model": "toy"} in params
    assert json.dumps(params)  # JSON-safe


def test_timed_calls_sit_at_the_same_stack_depth_whatever_the_caller(
    ourtester: pytest.Pytester,
) -> None:
    """The model runs on the test's thread, below an anchor frame larger than a CPython
    frame chunk (16 KiB): the anchor always starts a chunk of its own, and the model's
    frames sit the same number of frames above it however deep the caller is, so the
    caller cannot put them on a chunk boundary (benchmarks/stack_cliff.py shows the 100x
    cliff)."""
    ourtester.makepyfile(
        """
        import inspect

        above = []

        def model():
            frames = [f.frame.f_code for f in inspect.stack(0)]
            anchor = next(i for i, c in enumerate(frames) if c.co_filename == "<infperf-anchor>")
            assert frames[anchor].co_nlocals * 8 > 16 * 1024
            above.append(anchor)

        def nested(infer_bench, d, name):
            if d == 0:
                return infer_bench(model, name=name, rounds=3, max_rounds=5, min_time=0)
            return nested(infer_bench, d - 1, name)

        def test_depths(infer_bench):
            nested(infer_bench, 0, "shallow")
            shallow = set(above)
            above.clear()
            nested(infer_bench, 150, "deep")
            assert set(above) == shallow and max(shallow) < 20
        """
    )
    ourtester.runpytest().assert_outcomes(passed=1)
