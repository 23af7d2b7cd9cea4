"""torch and onnxruntime backends on the CPU, for real."""

from __future__ import annotations

import pytest

from pytest_infperf.measure import gpu as _gpu

from .conftest import FAST_INI, glob_escape, init_repo, load_json

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

ONNX_MODEL = """
import warnings
import numpy as np
import pytest
import torch

@pytest.fixture(scope="session")
def onnx_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "lin.onnx"
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(2, 8),), str(path), input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "b"}, "y": {0: "b"}},
                          dynamo=False)
    return str(path)
"""


def test_torch_module(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        import torch

        seen = {}

        class Probe(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 2)
                self.drop = torch.nn.Dropout(0.5)

            def forward(self, x):
                seen["training"] = self.training
                seen["inference_mode"] = torch.is_inference_mode_enabled()
                return self.drop(self.lin(x))

        def test_a(infer_bench):
            model = Probe().train()
            r = infer_bench(model, (torch.randn(3, 4),))
            assert seen == {"training": False, "inference_mode": True}
            assert r.backend == "torch"
            assert r.batch_size == 3
            info = r.backend_info
            assert info["device"] == "cpu" and info["dtype"] == "float32"
            assert info["num_threads"] == torch.get_num_threads()
            assert r.env["backend"] == "torch" and r.env["device_type"] == "cpu"

        def test_threads_set_and_restored(infer_bench):
            before = torch.get_num_threads()
            r = infer_bench(torch.nn.Linear(4, 2), (torch.randn(1, 4),), intra_op_threads=1)
            assert r.backend_info["num_threads"] == 1
            assert torch.get_num_threads() == before

        def test_torch_callable(infer_bench):
            r = infer_bench(torch.matmul, (torch.randn(16, 16), torch.randn(16, 16)))
            assert r.backend == "torch"

        def test_mapping_inputs(infer_bench):
            model = torch.nn.Bilinear(3, 3, 1)
            r = infer_bench(model, {"input1": torch.randn(2, 3), "input2": torch.randn(2, 3)})
            assert r.batch_size == 2
        """
    )
    ourtester.runpytest().assert_outcomes(passed=4)


def test_torch_wrong_shape_fails_with_torch_error(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        import torch

        def test_a(infer_bench):
            infer_bench(torch.nn.Linear(4, 2), (torch.randn(3, 5),))
        """
    )
    result = ourtester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["E * RuntimeError: mat1 and mat2 shapes cannot be multiplied*"])
    assert "pytest_infperf/measure/timing.py" not in result.stdout.str()


#: A suite as the README's quick start writes it, a plain callable and a generation beside
#: the torch model: none of them names a device.
DEVICE_SUITE = """
import torch
from pytest_infperf import hf

def test_mlp(infer_bench):
    r = infer_bench(torch.nn.Sequential(torch.nn.Linear(64, 64)), (torch.randn(8, 64),))
    print("device:", r.backend_info["device"])

def test_preprocessing(infer_bench):
    infer_bench(lambda: sorted(range(1000)))

def test_generation(infer_bench):
    model = hf.build_causal_lm("tiny-llama", num_hidden_layers=1)
    r = infer_bench.generate(model, hf.prompt(model, 1, 8), max_new_tokens=2, rounds=2)
    print("device:", r.backend_info["device"])

def test_asked_here(infer_bench):
    infer_bench(torch.nn.Linear(4, 2), (torch.randn(1, 4),), device="cuda")
"""


def test_one_setting_says_the_device_of_the_run(ourtester: pytest.Pytester) -> None:
    """--perf-device (ini infperf_device) moves every torch model and generate()'s model
    and prompt, no test edited; a plain callable runs as it is. cuda on a machine without
    an NVIDIA GPU skips those benchmarks, saying why and where cuda was asked for; the
    others are measured."""
    from pytest_infperf.measure import gpu

    pytest.importorskip("transformers")
    if gpu.nvidia_present():
        pytest.skip("this machine has an NVIDIA GPU")
    ourtester.makepyfile(test_device=DEVICE_SUITE)
    cpu = ourtester.runpytest("--perf-device=cpu", "-s", "-k", "not asked_here")
    cpu.assert_outcomes(passed=3)
    assert cpu.stdout.str().count("device: cpu") == 2
    for how in (["--perf-device=cuda"], ["-o", "infperf_device=cuda"]):
        result = ourtester.runpytest(*how, "-rs", "--perf-json=out.json")
        result.assert_outcomes(passed=1, skipped=3)
        out = result.stdout.str()
        assert "infperf: no NVIDIA GPU for device='cuda' (--perf-device)" in out
        assert "infperf: no NVIDIA GPU for device='cuda' (the call)" in out
        assert "device='cuda', but this machine has no NVIDIA GPU (torch " in out
        assert "asked by the run's --perf-device or infperf_device: a GPU runner" in out
        # Said once in the run's summary, as its warnings are (the JSON keeps it).
        warned = [w for w in load_json(ourtester.path / "out.json")["warnings"] if "NVIDIA" in w]
        assert len(warned) == 2 and all(w.startswith("benchmarks skipped: ") for w in warned)
        assert "warning: benchmarks skipped: device='cuda'" in out
    # A gate whose every benchmark skipped measured nothing, and fails, saying why.
    init_repo(ourtester.path)
    nothing = ourtester.runpytest("--perf-device=cuda", "--perf-save", "-k", "mlp or asked")
    assert nothing.ret == pytest.ExitCode.TESTS_FAILED
    assert "measured no benchmark" in nothing.stdout.str()
    assert "warning: benchmarks skipped: device='cuda'" in nothing.stdout.str()


def test_cuda_torch_cannot_use_on_a_gpu_machine_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the machine has an NVIDIA GPU that torch cannot use (a CPU build of torch on a
    GPU runner, a broken driver), cuda is an error, never a skip: a gate whose benchmarks
    all skipped would have measured nothing it meant to."""
    from pytest_infperf.measure import gpu
    from pytest_infperf.measure.backends import BackendError, NoDevice
    from pytest_infperf.measure.backends.torch import cuda_missing

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    monkeypatch.setattr(gpu, "nvidia_present", lambda: True)
    with pytest.raises(BackendError, match=r"torch.cuda.is_available\(\) is False") as info:
        cuda_missing(torch, torch.device("cuda"), asked=True)
    assert not isinstance(info.value, NoDevice)
    monkeypatch.setattr(gpu, "nvidia_present", lambda: False)
    with pytest.raises(NoDevice, match="no NVIDIA GPU"):
        cuda_missing(torch, torch.device("cuda"), asked=True)
    # A model put on the GPU by the test itself is no option of ours: an error, said.
    with pytest.raises(BackendError, match="check the NVIDIA driver") as info:
        cuda_missing(torch, torch.device("cuda"), asked=False)
    assert not isinstance(info.value, NoDevice)


@pytest.mark.parametrize(
    ("device", "message"),
    [
        (
            "tpu",
            "device='tpu' is not a torch device: expected 'cpu', 'cuda' (the current GPU) "
            "or 'cuda:N' (the N-th visible GPU)*",
        ),
        ("cuda:x", "device='cuda:x' is not a torch device: expected 'cpu', 'cuda'*"),
        # Where this machine has no NVIDIA GPU it is skipped, saying so (above).
        pytest.param(
            "cuda:99",
            "the model is set to run on cuda:99, but this process sees * GPU(s)*"
            if torch.cuda.is_available()
            else "the model is set to run on cuda:99, but torch.cuda.is_available() is False*",
            marks=pytest.mark.skipif(
                not _gpu.nvidia_present(), reason="no NVIDIA GPU here: skipped, not an error"
            ),
        ),
    ],
    ids=["unknown-type", "bad-index", "absent-gpu"],
)
def test_an_unknown_torch_device_is_named(
    ourtester: pytest.Pytester, device: str, message: str
) -> None:
    """A device torch does not know (or that is not there) is named with what is accepted,
    from the user's line: not torch's list of its internal device types, raised through
    the plugin's frames."""
    ourtester.makepyfile(
        f"""
        import torch

        def test_a(infer_bench):
            infer_bench(torch.nn.Linear(4, 2), (torch.randn(1, 4),), device={device!r})
        """
    )
    result = ourtester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"E   *BackendError: {glob_escape(message)}"])
    out = result.stdout.str()
    assert "pytest_infperf/measure/backends" not in out and "privateuseone" not in out


@pytest.mark.slow
def test_torch_compile_first_call_is_compile_time(
    ourtester: pytest.Pytester, tmp_path: object
) -> None:
    ourtester.makepyfile(
        """
        import torch

        def test_compiled(infer_bench):
            # The "eager" backend: dynamo still traces in the first call, which is what the
            # plugin detects and keeps out of the samples; inductor's C++ build took 15 s of
            # the test suite on 2 cores and checks nothing more here.
            model = torch.compile(
                torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()), backend="eager"
            )
            r = infer_bench(model, (torch.randn(4, 16),))
            assert r.backend_info["compiled"] is True
            # compilation happens in the first call, which is kept out of the samples
            assert r.first_call > 20 * r.median
            assert r.extra.get("recompiles", 0) == 0
        """
    )
    ourtester.runpytest_subprocess().assert_outcomes(passed=1)


def test_onnxruntime_session_and_path(ourtester: pytest.Pytester) -> None:
    ourtester.makeconftest(ONNX_MODEL)
    ourtester.makepyfile(
        """
        import numpy as np
        import onnxruntime as ort

        X = np.ones((2, 8), dtype=np.float32)

        def test_path(infer_bench, onnx_path):
            r = infer_bench(onnx_path, {"x": X}, intra_op_threads=1, inter_op_threads=1,
                            graph_optimization_level="basic")
            assert r.backend == "onnxruntime"
            info = r.backend_info
            assert info["providers"] == ["CPUExecutionProvider"]
            assert info["providers_requested"] == ["CPUExecutionProvider"]
            assert info["intra_op_threads"] == 1
            assert info["graph_optimization_level"] == "ORT_ENABLE_BASIC"
            assert info["io_binding"] is False
            assert info["copies_in_timed_region"] is False
            assert info["onnxruntime_build"] == "onnxruntime"
            assert r.batch_size == 2

        def test_session(infer_bench, onnx_path):
            sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
            r = infer_bench(sess, {"x": X})
            assert r.backend_info["source"] == "session"
            assert r.backend_info["providers"] == ["CPUExecutionProvider"]

        def test_positional_and_single(infer_bench, onnx_path):
            infer_bench(onnx_path, (X,))
            infer_bench(onnx_path, X, name="single")

        def test_io_binding_on_cpu(infer_bench, onnx_path):
            r = infer_bench(onnx_path, {"x": X}, io_binding=True)
            assert r.backend_info["io_binding"] is True
        """
    )
    ourtester.runpytest().assert_outcomes(passed=4)


def test_the_noise_advice_is_safe_to_follow_as_written(ourtester: pytest.Pytester) -> None:
    """The runner-noise advice says `infperf_intra_op_threads = 1`. As an ini key it applies
    where the plugin builds the session (an .onnx path) or sets torch's threads; a session
    the test built keeps its own, and the run says once how to set them: no test fails for
    a suite-wide setting. Set on the call itself, it is still an error for such a session."""
    ourtester.makeconftest(ONNX_MODEL)
    ourtester.makefile(".ini", pytest=FAST_INI + "infperf_intra_op_threads = 1\n")
    ourtester.makepyfile(
        """
        import numpy as np
        import onnxruntime as ort
        import pytest

        X = np.ones((2, 8), dtype=np.float32)

        def test_path(infer_bench, onnx_path):
            r = infer_bench(onnx_path, {"x": X})
            assert r.backend_info["intra_op_threads"] == 1

        @pytest.mark.parametrize("i", range(2))
        def test_session(infer_bench, onnx_path, i):
            sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
            infer_bench(sess, {"x": X})

        def test_session_asked(infer_bench, onnx_path):
            sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
            infer_bench(sess, {"x": X}, intra_op_threads=1)
        """
    )
    result = ourtester.runpytest()
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        ["*infer_bench(sess*intra_op_threads=1)", "*BackendError: option intra_op_threads= only*"]
    )
    said = (
        "*infperf_intra_op_threads does not reach an InferenceSession a test built: set "
        "SessionOptions.intra_op_num_threads where the test makes it*"
    )
    result.stdout.fnmatch_lines([said])
    assert result.stdout.str().count("does not reach an InferenceSession") == 1


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ("None", "this ONNX model needs inputs: x (float32 ['b', 8])*"),
        ("{'y': X}", "inputs do not match the ONNX model (missing ['x']; unknown ['y'])*"),
        (
            "{'x': X.astype(np.float64)}",
            "input 'x' has dtype float64, the ONNX model expects "
            "float32: convert it with .astype(np.float32)",
        ),
        ("{'x': X[0]}", "input 'x' has shape (8,) (1 dims), the ONNX model expects 2 dims*"),
        ("(X, X)", "got 2 positional inputs, but the ONNX model takes 1*"),
        (
            "{'x': np.ones((2, 5), dtype=np.float32)}",
            "input 'x' has shape (2, 5), the ONNX model expects ['b', 8]: axis 1 is 5, the "
            "model fixes it at 8. Export with dynamic axes*",
        ),
    ],
)
def test_onnxruntime_bad_inputs(ourtester: pytest.Pytester, inputs: str, message: str) -> None:
    ourtester.makeconftest(ONNX_MODEL)
    ourtester.makepyfile(
        f"""
        import numpy as np

        X = np.ones((2, 8), dtype=np.float32)

        def test_a(infer_bench, onnx_path):
            infer_bench(onnx_path, {inputs})
        """
    )
    result = ourtester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"E   *BackendError: {glob_escape(message)}"])


def test_cuda_missing_from_the_build_is_an_error(ourtester: pytest.Pytester) -> None:
    """CPU-only onnxruntime: CUDA is not even offered."""
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has CUDA")
    ourtester.makeconftest(ONNX_MODEL)
    ourtester.makepyfile(
        """
        import numpy as np
        X = np.ones((2, 8), dtype=np.float32)
        CUDA_FIRST = ["CUDAExecutionProvider", "CPUExecutionProvider"]

        def test_strict(infer_bench, onnx_path):
            infer_bench(onnx_path, {"x": X}, providers=CUDA_FIRST)

        def test_fallback_allowed(infer_bench, onnx_path):
            r = infer_bench(onnx_path, {"x": X}, allow_fallback=True, providers=CUDA_FIRST)
            assert r.backend_info["providers"] == ["CPUExecutionProvider"]
            assert any("not available in this onnxruntime build" in w for w in r.warnings)
        """
    )
    result = ourtester.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E   *BackendError: onnxruntime: CUDAExecutionProvider is not available in this "
            "onnxruntime build (onnxruntime *). For CUDA install onnxruntime-gpu instead of "
            "onnxruntime*Or pass providers=*CPUExecutionProvider* to benchmark on the CPU on "
            "purpose, or allow_fallback=True."
        ]
    )


def test_silent_cpu_fallback_is_detected() -> None:
    """onnxruntime-gpu without CUDA libraries: CUDA is offered, the session runs on the CPU
    anyway. The comparison of requested and used providers catches it."""
    from pytest_infperf.measure.backends import BackendError
    from pytest_infperf.measure.backends.onnxruntime import _check_providers

    requested = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    with pytest.raises(
        BackendError,
        match=r"but the session runs on \['CPUExecutionProvider'\]; "
        r"CUDAExecutionProvider could not be initialised.*cuDNN",
    ):
        _check_providers(requested, ["CPUExecutionProvider"], False, "onnxruntime")
    warnings = _check_providers(requested, ["CPUExecutionProvider"], True, "onnxruntime")
    assert "allow_fallback=True" in warnings[0]
    assert _check_providers(requested, requested, False, "onnxruntime") == []


def test_session_options_only_for_paths(ourtester: pytest.Pytester) -> None:
    ourtester.makeconftest(ONNX_MODEL)
    ourtester.makepyfile(
        """
        import numpy as np, onnxruntime as ort, pytest
        from pytest_infperf import BackendError

        def test_a(infer_bench, onnx_path):
            sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
            with pytest.raises(BackendError, match="only applies when infer_bench creates"):
                infer_bench(sess, {"x": np.ones((1, 8), np.float32)}, intra_op_threads=1)
        """
    )
    ourtester.runpytest().assert_outcomes(passed=1)


@pytest.mark.slow
def test_end_to_end_tiny_transformer(ourtester: pytest.Pytester, validate: object) -> None:
    """A real (tiny) BERT from a transformers config, in torch and in onnxruntime."""
    pytest.importorskip("transformers")
    ourtester.makepyfile(
        """
        import numpy as np
        import pytest
        from pytest_infperf import hf

        @pytest.mark.parametrize("name", ["bert-test", "distilbert-test"])
        @pytest.mark.parametrize("batch,seq", [(1, 16), (4, 32)])
        def test_torch(infer_bench, infperf_hf, name, batch, seq):
            model = infperf_hf.model(name)
            r = infer_bench(model, infperf_hf.inputs(name, batch, seq))
            assert r.backend == "torch" and r.batch_size == batch

        @pytest.mark.parametrize("name", ["bert-test", "distilbert-test"])
        @pytest.mark.parametrize("batch,seq", [(1, 16), (4, 32)])
        def test_ort(infer_bench, infperf_hf, name, batch, seq):
            path = infperf_hf.onnx(name)
            inputs = infperf_hf.inputs(name, batch, seq, framework="np")
            r = infer_bench(path, inputs, providers=["CPUExecutionProvider"])
            assert r.backend == "onnxruntime" and r.batch_size == batch
            assert set(r.backend_info["inputs"]) == set(inputs)

        def test_outputs_match(infperf_hf):
            import onnxruntime as ort, torch
            model = infperf_hf.model("bert-test")
            sess = ort.InferenceSession(str(infperf_hf.onnx("bert-test")),
                                        providers=["CPUExecutionProvider"])
            inputs = infperf_hf.inputs("bert-test", 3, 24, framework="np", padding=4)
            got = sess.run(None, inputs)[0]
            with torch.inference_mode():
                want = model(**{k: torch.from_numpy(v) for k, v in inputs.items()})[0]
            assert np.abs(got - want.numpy()).max() < 1e-4
        """
    )
    result = ourtester.runpytest_subprocess("--perf-json=e2e.json")
    result.assert_outcomes(passed=9)
    doc = load_json(ourtester.path / "e2e.json")
    validate(doc)  # type: ignore[operator]
    assert {b["backend"] for b in doc["benchmarks"]} == {"torch", "onnxruntime"}


@pytest.mark.parametrize(
    ("env", "noise", "asked", "hint"),
    [
        ({"backend": "torch", "num_threads": 2}, "severe", None, True),
        ({"backend": "onnxruntime", "intra_op_threads": 0}, "severe", None, True),
        ({"backend": "torch", "num_threads": 1}, "severe", None, False),  # one already
        ({"backend": "torch", "num_threads": 2}, "high", None, False),  # noisy, not very
        ({"backend": "torch", "num_threads": 2}, "severe", 2, False),  # the user chose it
        ({"backend": "torch", "num_threads": 2, "device_type": "cuda"}, "severe", None, False),
        ({"backend": "callable"}, "severe", None, False),  # no thread count known
    ],
)
def test_a_very_noisy_multithreaded_cpu_model_is_told_about_one_thread(
    env: dict[str, object], noise: str, asked: int | None, hint: bool
) -> None:
    from pytest_infperf.measure.call import _threads_hint

    said = _threads_hint(env, {"noise": noise, "median": 1e-3, "iqr": 4e-4}, asked)
    assert (said is not None) is hint
    if said:
        assert "IQR 40% of the median" in said and "infperf_intra_op_threads = 1" in said


def test_a_modules_own_modes_are_put_back() -> None:
    """The plugin times a module in eval mode and puts each submodule's mode back after (a
    frozen BatchNorm of a model left training stays frozen), also when preparing fails;
    inference_mode=False times it in the modes the test set."""
    torch = pytest.importorskip("torch")
    from pytest_infperf.core.options import merge
    from pytest_infperf.measure.backends import BackendError
    from pytest_infperf.measure.backends.torch import prepare

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8))
    model.train()
    model[1].eval()  # frozen by the test
    x = torch.randn(4, 8)
    prepared = prepare(model, (x,), merge({}))
    assert not model.training and not model[0].training  # timed in eval mode
    prepared.close()
    assert model.training and model[0].training and not model[1].training
    kept = prepare(model, (x,), merge({"inference_mode": False}))
    assert model.training and not model[1].training  # as the test set them
    kept.close()
    with pytest.raises(BackendError):
        prepare(model, (x,), merge({"cuda_graph": True}))  # no CUDA here: fails after eval()
    assert model.training and model[0].training and not model[1].training
