"""CUDA timing paths: exercised on an NVIDIA GPU, skipped cleanly without one."""

from __future__ import annotations

import pytest

from pytest_infperf import environment, gpu

from .conftest import has_cuda, load_json

needs_cuda = pytest.mark.skipif(not has_cuda(), reason="needs an NVIDIA GPU with CUDA")


def test_environment_gpu_section_matches_the_machine() -> None:
    env = environment.collect()
    if gpu.snapshot() is None:
        assert env["gpu"] is None
        assert env["hard"]["gpu_models"] is None
        assert "-cpu-" in env["key"]
    else:
        section = env["gpu"]
        assert section["count"] >= 1 and section["driver_version"]
        device = section["devices"][0]
        for key in (
            "name",
            "uuid",
            "memory_total_bytes",
            "sm_clock_max_mhz",
            "power_limit_w",
            "persistence_mode",
            "mig_mode",
            "state",
        ):
            assert key in device, key
        assert env["hard"]["gpu_models"]


def test_nvml_missing_is_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(gpu, "_nvml", None)
    monkeypatch.setattr(gpu, "_failed", False)
    assert gpu.snapshot() is None
    assert gpu.device_state(0) is None
    monkeypatch.setattr(gpu, "_failed", False)


@needs_cuda
@pytest.mark.gpu
def test_torch_cuda_events(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        import torch

        def test_a(infer_bench):
            model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)])
            r = infer_bench(model.cuda(), (torch.randn(64, 1024),))  # input moved for us
            info = r.backend_info
            assert info["device"].startswith("cuda") and info["inputs_moved_to_device"]
            assert info["cuda_version"] and info["gpu_name"]
            assert "allow_tf32_matmul" in info and "cudnn_benchmark" in info
            extra = r.extra
            assert len(extra["device_samples"]) == len(r.samples)
            assert len(extra["enqueue_samples"]) == len(r.samples)
            assert 0 < extra["host_bound_ratio"] <= 1.5
            # a synchronised sample is never shorter than the GPU's own time for it
            assert r.median >= 0.9 * sorted(extra["device_samples"])[len(r.samples) // 2]
            assert r.memory["cuda_max_allocated_bytes"] > 0
            assert r.block_size == 1

        def test_cuda_graph(infer_bench):
            model = torch.nn.Linear(512, 512).cuda()
            r = infer_bench(model, (torch.randn(8, 512, device="cuda"),), cuda_graph=True)
            assert r.backend_info["cuda_graph"] is True
        """
    )
    ourtester.runpytest_subprocess().assert_outcomes(passed=2)


@needs_cuda
@pytest.mark.gpu
def test_onnxruntime_cuda_iobinding(ourtester: pytest.Pytester) -> None:
    ort = pytest.importorskip("onnxruntime")
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("onnxruntime without CUDA")
    ourtester.makepyfile(
        """
        import warnings
        import numpy as np
        import torch

        def test_a(infer_bench, tmp_path):
            path = tmp_path / "m.onnx"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(torch.nn.Linear(256, 256).eval(), (torch.randn(4, 256),),
                                  str(path), input_names=["x"], dynamic_axes={"x": {0: "b"}},
                                  dynamo=False)
            x = np.ones((32, 256), np.float32)
            cuda = ["CUDAExecutionProvider", "CPUExecutionProvider"]
            bound = infer_bench(path, {"x": x}, providers=cuda)
            assert bound.backend_info["io_binding"] is True
            assert bound.backend_info["copies_in_timed_region"] is False
            numpy_path = infer_bench(path, {"x": x}, providers=cuda, io_binding=False,
                                     name="numpy")
            assert numpy_path.backend_info["copies_in_timed_region"] is True
        """
    )
    result = ourtester.runpytest_subprocess("--perf-json=out.json")
    result.assert_outcomes(passed=1)
    doc = load_json(ourtester.path / "out.json")
    assert doc["environment"]["gpu"] is not None
