"""CUDA timing paths: exercised on an NVIDIA GPU, skipped cleanly without one."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pytest_infperf.measure import environment, gpu, gpupin, tenancy

from .conftest import has_cuda, load_json

needs_cuda = pytest.mark.skipif(not has_cuda(), reason="needs an NVIDIA GPU with CUDA")


def test_environment_gpu_section_matches_the_machine() -> None:
    env = environment.collect()
    if gpu.snapshot() is None:
        assert env["gpu"] is None
        assert env["hard"]["gpu_models"] is None
        assert "-cpu-" in env["key"]
    elif env["gpu"]["source"] == "nvidia-smi":  # a GPU, but no nvidia-ml-py
        assert env["gpu"]["devices"][0]["name"] and env["hard"]["gpu_models"]
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

    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(gpu, "_nvml", None)
    monkeypatch.setattr(gpu, "_failed", False)
    monkeypatch.setenv("PATH", "")  # no nvidia-smi either
    assert gpu.snapshot() is None
    assert gpu.device_state(0) is None
    monkeypatch.setattr(gpu, "_failed", False)


FAKE_SMI = """#!/bin/sh
# Stands in for the driver's nvidia-smi (this machine has no GPU): the real one's output
# for --query-gpu=index,name,uuid,driver_version,memory.total,compute_cap.
echo "0, NVIDIA H100 80GB HBM3, GPU-2f1c8b4e-0000-1111-2222-333344445555, 570.86.15, 81559, 9.0"
echo "1, NVIDIA H100 80GB HBM3, GPU-9a8b7c6d-0000-1111-2222-333344445555, 570.86.15, 81559, 9.0"
"""


def test_gpu_is_named_without_nvml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without nvidia-ml-py the GPU still gets a name in the environment key (from
    nvidia-smi), so an A100's and an H100's baselines never share a "-cpu-" key."""

    smi = tmp_path / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(gpu, "_nvml", None)
    monkeypatch.setattr(gpu, "_failed", False)
    monkeypatch.setenv("PATH", str(tmp_path))
    snap = gpu.snapshot()
    assert snap is not None and snap["source"] == "nvidia-smi" and snap["count"] == 2
    assert snap["devices"][0]["compute_capability"] == "9.0"
    assert snap["devices"][1]["uuid"].startswith("GPU-9a8b")
    hard = environment.hard_fields(snap)
    assert hard["gpu_models"] == ["NVIDIA H100 80GB HBM3"] and hard["gpu_driver_major"] == "570"
    assert "-nvidia-h100-80gb-hbm3-" in environment.env_key(hard)
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
    # The profiled pass (the ourtester ini turns it off): kernels and the device's busy
    # time of each profiled call, its operators exact. On a lent H200 (torch 2.11) it first
    # failed on a missing kineto method, then counted CUDA allocations as kernels and
    # kineto's own "Activity Buffer Request" as an operator that varied from call to call.
    result = ourtester.runpytest_subprocess("--perf-json=out.json", "--perf-profile=counts")
    result.assert_outcomes(passed=2)
    bench = next(
        b for b in load_json(ourtester.path / "out.json")["benchmarks"] if "test_a" in b["nodeid"]
    )
    work = bench["work"]
    assert not [n for n in work["notes"] if "fail" in n or "no CUDA" in n], work
    assert work["varying"] == [] and "[memory]" not in work["kernel_counts"], work
    assert 8 <= work["kernels"] < 40 and work["kernels"] == int(work["kernels"]), work
    assert len(work["gpu_time"]) >= 5 and 0 < min(work["gpu_time"]) <= bench["stats"]["median"]


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


GPU_SMOKE = """
import os
import warnings

import numpy as np
import pytest
import torch


def mlp(n=16):
    return torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(n)]).eval()


def inputs(b):
    return (torch.randn(b, 2048),)


def test_sync_units_nvml(infer_bench):
    r = infer_bench(mlp().cuda(), inputs(1024))
    dev = sorted(r.extra["device_samples"])[len(r.samples) // 2]
    assert 0.5 * r.median < dev <= 1.05 * r.median and r.extra["host_bound_ratio"] < 0.5
    assert r.memory["cuda_max_allocated_bytes"] > 16 * 2048 * 2048 * 4


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_second_gpu(infer_bench):
    r = infer_bench(mlp(), inputs(1024), device="cuda:1")
    assert r.extra["host_bound_ratio"] < 0.5, "events not on cuda:1's stream"


def test_cuda_graph_beats_eager(infer_bench):
    m, x = mlp().cuda(), torch.randn(8, 2048, device="cuda")
    e = infer_bench(m, (x,), name="eager")
    g = infer_bench(m, (x,), cuda_graph=True, name="graph")
    assert g.median < e.median


def test_include_copies_keeps_the_ratio(infer_bench):
    r = infer_bench(mlp().cuda(), inputs(1024), include_copies=True)
    assert r.extra["host_bound_ratio"] < 0.5  # compute-bound, copies or not


def test_new_tf32_api(infer_bench):
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    try:
        r = infer_bench(mlp(2).cuda(), inputs(8))
        assert r.backend_info["allow_tf32_matmul"] is True
    finally:
        torch.backends.cuda.matmul.fp32_precision = "ieee"


def test_ort_graph_with_options(infer_bench, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("onnxruntime without CUDA")
    p = str(tmp_path / "m.onnx")
    with warnings.catch_warnings():  # the legacy exporter warns that it is legacy
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(torch.nn.Linear(256, 256), (torch.randn(4, 256),), p,
                          input_names=["x"], dynamo=False)
    r = infer_bench(p, {"x": np.ones((4, 256), np.float32)}, cuda_graph=True,
                    provider_options={"device_id": "0"})
    opts = r.backend_info["provider_options"]["CUDAExecutionProvider"]
    assert opts.get("enable_cuda_graph") == "1" and r.backend_info["cuda_graph"] is True
    assert r.env["cuda_graph"] is True
"""


@needs_cuda
@pytest.mark.gpu
def test_gpu_smoke_cases(ourtester: pytest.Pytester) -> None:
    """The cases of the shared GPU smoke check (../shared/gpu/gpu_smoke.py), under the
    project's own settings: events on the model's GPU, CUDA graphs, copies, the new TF32
    API, ORT graphs with provider options."""
    ourtester.makepyfile(test_smoke=GPU_SMOKE)
    # -W error: a warning from the timing code (e.g. cuBLAS finding no current CUDA
    # context) fails the run as it would under a project's filterwarnings = error.
    result = ourtester.runpytest_subprocess("-W", "error", "-rs")
    outcomes = result.parseoutcomes()
    # The ORT case skips without onnxruntime-gpu, the second-GPU case with one GPU.
    assert outcomes.get("failed", 0) == 0 and outcomes.get("passed", 0) >= 4, result.stdout.str()


# --- GPU readiness that runs on a CPU machine (the CPU build of torch has the same flags) ---


TF32_SCRIPT = """
import json, sys, warnings
warnings.simplefilter("error")  # as under pytest's filterwarnings = error
import torch
from pytest_infperf.measure.backends.torch import tf32_state
if sys.argv[1] == "new":
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    torch.backends.cudnn.fp32_precision = "ieee"
elif sys.argv[1] == "legacy":
    torch.backends.cuda.matmul.allow_tf32 = True
print(json.dumps(tf32_state(torch)))
"""


@pytest.mark.parametrize("how", ["new", "legacy", "default"])
def test_reading_tf32_flags_never_fails(how: str) -> None:
    """Once a program uses torch's fp32_precision API, the legacy getters raise "mix of the
    legacy and new APIs" (and warn): recording the environment must neither."""
    import json
    import subprocess

    pytest.importorskip("torch")
    out = subprocess.run(
        [sys.executable, "-c", TF32_SCRIPT, how], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    state = json.loads(out.stdout)
    if how == "new":
        assert state["allow_tf32_matmul"] is True and state["allow_tf32_cudnn"] is False
        assert state["fp32_precision_matmul"] == "tf32"
    elif how == "legacy":
        assert state["allow_tf32_matmul"] is True
    else:  # torch's defaults: matmul TF32 off, cuDNN TF32 on
        assert state["allow_tf32_matmul"] is False and state["allow_tf32_cudnn"] is True
    assert "float32_matmul_precision" in state


class _FakeEvent:
    def __init__(self, log: list[object]) -> None:
        self.log = log

    def record(self, stream: object = None) -> None:
        self.log.append(stream)

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, end: object) -> float:
        return 1.0


class _FakeCuda:
    """Stands in for torch.cuda where a GPU is needed: a current device, and a current
    stream per device. (A fake, because without a GPU there is no second device; the same
    path runs for real in test_torch_cuda_events and tests/test_context.py on a GPU.)"""

    def __init__(self) -> None:
        self.device_now = "cuda:0"
        self.recorded: list[object] = []

    def current_stream(self, device: object = None) -> object:
        return f"stream of {device or self.device_now}"

    def synchronize(self, device: object = None) -> None:
        return None

    def Event(self, enable_timing: bool = False) -> _FakeEvent:
        return _FakeEvent(self.recorded)


def test_cuda_timing_runs_on_the_models_device() -> None:
    """Event.record() without a stream records on the current device's stream: a model on
    cuda:1 called while cuda:0 is current would be timed by events that do not wait for
    it. The events go to the model's device's current stream, and the test's current device
    is left as it was."""
    import contextlib
    import types

    from pytest_infperf.measure.backends.torch import CudaEventSampler
    from pytest_infperf.measure.timing import in_test_context

    cuda = _FakeCuda()
    fake_torch = types.SimpleNamespace(cuda=cuda, inference_mode=contextlib.nullcontext)
    sampler = CudaEventSampler(lambda: None, fake_torch, "cuda:1", compiled=False)
    out = [0]
    in_test_context(sampler, lambda: sampler.run_blocks(out, 0, 1, 1))  # type: ignore[arg-type]
    assert cuda.recorded == ["stream of cuda:1", "stream of cuda:1"]
    assert cuda.device_now == "cuda:0"


def test_module_compile_in_place_is_detected() -> None:
    torch = pytest.importorskip("torch")
    from pytest_infperf.measure.backends.torch import is_compiled

    model = torch.nn.Linear(2, 2)
    assert not is_compiled(model)
    model.compile()  # compiles lazily, on the first call: nothing is compiled here
    assert is_compiled(model)
    assert is_compiled(torch.compile(torch.nn.Linear(2, 2)))


@needs_cuda
def test_a_model_moved_for_the_benchmark_is_put_back(ourtester: pytest.Pytester) -> None:
    ourtester.makepyfile(
        """
        import torch

        def test_moved(infer_bench):
            model = torch.nn.Linear(8, 8)
            infer_bench(model, (torch.randn(2, 8),), device="cuda")
            assert next(model.parameters()).device.type == "cpu"
        """
    )
    ourtester.runpytest().assert_outcomes(passed=1)


CUDA_EP = "CUDAExecutionProvider"


def test_ort_cuda_graph_and_provider_options_merge() -> None:
    """cuda_graph=True used to be dropped whenever provider_options or (name, options)
    tuples were given, while backend_info said True."""
    from pytest_infperf.measure.backends.onnxruntime import merge_provider_options

    cpu = "CPUExecutionProvider"
    assert merge_provider_options([CUDA_EP, cpu], {"device_id": 1}, True) == [
        (CUDA_EP, {"device_id": "1", "enable_cuda_graph": "1"}),
        cpu,
    ]
    given = [(CUDA_EP, {"arena_extend_strategy": "kSameAsRequested"}), cpu]
    assert merge_provider_options(given, None, True) == [
        (CUDA_EP, {"arena_extend_strategy": "kSameAsRequested", "enable_cuda_graph": "1"}),
        cpu,
    ]
    assert merge_provider_options([cpu], None, True) == [cpu]
    assert merge_provider_options([cpu], {"x": 1}, False) == [(cpu, {"x": "1"})]


def test_ort_fallback_quotes_orts_own_reason() -> None:
    from pytest_infperf.measure.backends import BackendError
    from pytest_infperf.measure.backends.onnxruntime import _check_providers, _ort_reason

    # The shape of ORT's message when the CUDA EP fails to come up (inference_session.py).
    log = (
        "2026-11-22 10:00:00 [W:onnxruntime:Default] some other line\n"
        "EP Error CUDA failure 2: out of memory when using ['CUDAExecutionProvider']\n"
        "Falling back to ['CPUExecutionProvider'] and retrying.\n"
    )
    reason = _ort_reason(log)
    assert reason is not None and "out of memory" in reason
    with pytest.raises(BackendError) as info:
        _check_providers([CUDA_EP], ["CPUExecutionProvider"], False, "onnxruntime", reason)
    assert "onnxruntime said: EP Error CUDA failure 2: out of memory" in str(info.value)
    assert "cuDNN libraries" not in str(info.value)  # no guessing when ORT said why


def test_ort_log_is_captured_and_still_shown(capfd: pytest.CaptureFixture[str]) -> None:
    import os

    from pytest_infperf.measure.backends import CapturedStderr

    with CapturedStderr() as log:
        os.write(2, b"EP Error something broke\n")
    assert "EP Error something broke" in log.text
    assert "EP Error something broke" in capfd.readouterr().err
    # the profiler's start/stop chatter is kept in the copy, not written back
    with CapturedStderr(drop=lambda line: line.startswith("USDT:")) as log:
        os.write(2, b"USDT: profiler_start\nkept\n")
    assert "USDT" in log.text and capfd.readouterr().err == "kept\n"


def test_include_copies_keeps_the_host_bound_ratio_meaning() -> None:
    """The output copy is timed inside the sample but after the enqueue timestamp, so a
    slow copy does not make a compute-bound model look host-bound. (Fake CUDA: the event
    and synchronize calls need a GPU; the ordering logic is what is tested.)"""
    import contextlib
    import time
    import types

    from pytest_infperf.measure.backends.torch import CudaEventSampler

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            pass

        def record(self, stream: object = None) -> None:
            pass

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, other: object) -> float:
            return 0.0

    cuda = types.SimpleNamespace(
        Event=Event,
        current_stream=lambda d=None: None,
        synchronize=lambda d: None,
        reset_peak_memory_stats=lambda d: None,
        max_memory_allocated=lambda d: 0,
        max_memory_reserved=lambda d: 0,
    )
    fake_torch = types.SimpleNamespace(cuda=cuda, inference_mode=contextlib.nullcontext)
    copied = []

    def copy(out: object) -> object:
        time.sleep(0.002)  # a slow device-to-host copy
        copied.append(out)
        return out

    sampler = CudaEventSampler(lambda: "out", fake_torch, "cuda:0", False, after=copy)
    sampler.begin_timed()
    samples = [0] * 5
    sampler.run_blocks(samples, 0, 5, 1)
    extra = sampler.end_timed(samples)
    assert copied == ["out"] * 5
    assert min(samples) >= 2_000_000  # the copy is in the sample
    assert extra["host_bound_ratio"] < 0.2  # but not in the enqueue time


def test_throttle_reasons_unknown_is_not_not_throttled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing NVML call reads "unknown" (None), not "not throttled" ([]); the clock-event
    call is preferred over the deprecated throttle-reasons one. (A fake NVML module: the
    real calls need a GPU.)"""
    import types

    def fail(*args: object) -> object:
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    calls: list[str] = []

    def events(handle: object) -> int:
        calls.append("events")
        return 0x4  # SW power cap

    fake = types.SimpleNamespace(
        nvmlDeviceGetHandleByIndex=lambda i: object(),
        nvmlDeviceGetCurrentClocksEventReasons=events,
        nvmlDeviceGetCurrentClocksThrottleReasons=fail,
        nvmlDeviceGetMemoryInfo=fail,
        nvmlDeviceGetClockInfo=fail,
        nvmlDeviceGetTemperature=fail,
        nvmlDeviceGetPowerUsage=fail,
        NVML_CLOCK_SM=0,
        NVML_CLOCK_MEM=1,
        NVML_TEMPERATURE_GPU=0,
    )
    monkeypatch.setattr(gpu, "_init", lambda: fake)
    state = gpu.device_state(0)
    assert state is not None and calls == ["events"] and state["throttle_reasons"]
    fake.nvmlDeviceGetCurrentClocksEventReasons = fail
    state = gpu.device_state(0)
    assert state is not None and state["throttle_reasons"] is None


def test_pin_choices_respect_what_the_user_restricted() -> None:
    snap = {
        "devices": [
            {"index": 0, "uuid": "GPU-aaa"},
            {"index": 1, "uuid": "GPU-bbb"},
        ]
    }
    assert gpupin.pin_choices(None, [], snap) == ["GPU-aaa", "GPU-bbb"]  # by UUID
    assert gpupin.pin_choices("1", [], snap) == ["1"]  # the user's own restriction, verbatim
    assert gpupin.pin_choices("MIG-x/1/0,MIG-y/2/0", [], snap) == ["MIG-x/1/0", "MIG-y/2/0"]
    assert gpupin.pin_choices("", [], snap) == []  # GPUs hidden on purpose
    assert gpupin.pin_choices("-1", [], snap) == []
    assert gpupin.pin_choices(None, ["1", "0"], snap) == ["1", "0"]  # ini infperf_gpus
    assert gpupin.pin_choices(None, [], None) == []


@pytest.mark.parametrize(
    ("args", "pinned"),
    [
        (["--perf-json=out.json"], True),  # the run asks for measurement
        (["-o", "infperf_gpus=1,0"], True),  # the GPUs are named
        ([], False),  # a suite with no perf option (multi-GPU tests) keeps every GPU
        (["--perf-disable", "--perf-json=out.json"], False),  # nothing is measured
    ],
    ids=["perf-option", "infperf_gpus", "no-perf-option", "perf-disable"],
)
def test_xdist_workers_are_pinned_before_conftest(
    pytester: pytest.Pytester, tmp_path: Path, args: list[str], pinned: bool
) -> None:
    """Each worker gets its own GPU, by UUID, before its conftest runs (a conftest that
    starts CUDA would make the pin too late), where the run asks for measurement; else the
    plugin leaves the environment alone. nvidia-smi is a stand-in here: no GPU."""
    import importlib.util

    pytest.importorskip("xdist")
    if importlib.util.find_spec("pynvml") is not None:
        pytest.skip("nvidia-ml-py is installed: workers would read the real GPUs through it")
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    pytester.makeconftest("import os\nSEEN_AT_CONFTEST = os.environ.get('CUDA_VISIBLE_DEVICES')\n")
    pytester.makepyfile(
        """
        import os
        from pathlib import Path

        import conftest

        def test_a():
            worker = os.environ["PYTEST_XDIST_WORKER"]
            Path(f"pin-{worker}.txt").write_text(str(conftest.SEEN_AT_CONFTEST))
            Path(f"root-{worker}.txt").write_text(os.environ.get("INFPERF_RUN_ROOT", "-"))

        def test_b():
            test_a()
        """
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
        mp.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        mp.delenv("INFPERF_RUN_ROOT", raising=False)
        result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", *args)
    result.assert_outcomes(passed=2)
    pins = {p.stem: p.read_text() for p in pytester.path.glob("pin-gw*.txt")}
    assert pins, result.stdout.str()
    uuids = {
        "pin-gw0": "GPU-2f1c8b4e-0000-1111-2222-333344445555",
        "pin-gw1": "GPU-9a8b7c6d-0000-1111-2222-333344445555",
    }
    if args[:2] == ["-o", "infperf_gpus=1,0"]:
        uuids = {"pin-gw0": "1", "pin-gw1": "0"}
    if pinned:
        assert all(pins[w] == uuids[w] for w in pins), pins
    else:  # untouched: no pin, no run root exported
        assert set(pins.values()) == {"None"}, pins
        roots = {p.read_text() for p in pytester.path.glob("root-gw*.txt")}
        assert roots == {"-"}, roots


def test_region_watch_energy_tenants_and_throttling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Energy per call, other processes and throttle reasons across the timed region, read
    at its checkpoints while the GPU is busy. (A fake NVML module: the counters need a GPU;
    test_gpu_smoke_cases runs the real path.)"""
    import types

    energy = iter([10_000, 14_000])  # mJ at start and end
    reasons = iter([0, 0x4, 0])  # start, one checkpoint under power cap, end
    procs = iter([[], [types.SimpleNamespace(pid=os.getpid()), types.SimpleNamespace(pid=4242)]])
    violation = iter(
        [types.SimpleNamespace(violationTime=0)] * 1
        + [types.SimpleNamespace(violationTime=250_000_000)]
    )
    fake = types.SimpleNamespace(
        nvmlDeviceGetHandleByIndex=lambda i: "h",
        nvmlDeviceGetTotalEnergyConsumption=lambda h: next(energy),
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: next(reasons),
        nvmlDeviceGetComputeRunningProcesses=lambda h: next(procs, []),
        nvmlDeviceGetViolationStatus=lambda h, policy: next(violation),
        NVML_PERF_POLICY_POWER=0,
    )
    monkeypatch.setattr(gpu, "_init", lambda: fake)
    monkeypatch.setattr(tenancy, "unseen", lambda pid: False)  # the fake's PIDs: visible
    watch = tenancy.RegionWatch(0)
    watch.start()
    watch.check()
    region = watch.result(calls=400)
    assert region["energy_mj_per_call"] == 10.0
    assert region["other_processes"] == [4242]  # not this process
    assert region["throttle_reasons"] == ["sw_power_cap"]  # seen mid-region, gone at the end
    assert region["power_violation_s"] == 0.25
    monkeypatch.setattr(gpu, "_init", lambda: None)
    assert tenancy.RegionWatch(0).result(10) == {}  # no NVML: nothing, and no error


def test_region_watch_reads_the_clocks_while_the_gpu_is_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The drift guard's GPU reference: the median SM and memory clocks of the region's
    readings, leaving out those at which the GPU was idle (an idle H200 read 345 MHz); a
    clock is read, not timed (the timed kernel it replaces moved x1.10-x1.39 on a quiet
    H200)."""
    import types

    from pytest_infperf.measure.drift import gpu_reference

    # (reasons, SM clock) at each reading: idle at the start, then busy (once power-capped)
    readings = iter([(0x1, 345), (0, 1980), (0x4, 1755), (0, 1980)])
    now = [0, 0]

    def reasons(h: object) -> int:
        now[:] = next(readings)
        return now[0]

    fake = types.SimpleNamespace(
        nvmlDeviceGetHandleByIndex=lambda i: "h",
        nvmlDeviceGetCurrentClocksEventReasons=reasons,
        nvmlDeviceGetClockInfo=lambda h, kind: now[1] if kind == 1 else 3201,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [],
        nvmlDeviceGetTotalEnergyConsumption=lambda h: 0,
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
    )
    monkeypatch.setattr(gpu, "_init", lambda: fake)
    watch = tenancy.RegionWatch(0)
    watch.start()
    watch.check()
    watch.check()
    region = watch.result(calls=10)
    assert region["sm_clock_mhz"] == 1980 and region["mem_clock_mhz"] == 3201
    assert gpu_reference(region) == {"gpu_sm_mhz": 1980.0, "gpu_mem_mhz": 3201.0}
    old = types.SimpleNamespace(**{k: v for k, v in vars(fake).items() if "Clock" not in k})
    monkeypatch.setattr(gpu, "_init", lambda: old)  # bindings without the clock getter
    assert "sm_clock_mhz" not in tenancy.RegionWatch(0).result(calls=1)


@needs_cuda
def test_block_watch_sees_a_gpu_tenant_on_the_real_nvml() -> None:
    """The real NVML path of the per-block readings: a second process computing on the GPU
    (started here) flags the quad's last block as ``other_process``; a reading costs well
    under a millisecond."""
    import contextlib
    import signal
    import subprocess
    import time

    import psutil

    if gpu.snapshot() is None or gpu.snapshot()["source"] != "nvml":  # type: ignore[index]
        pytest.skip("needs nvidia-ml-py")
    import torch

    torch.zeros(1, device="cuda")  # this process computes on the GPU too: not a tenant
    watch = tenancy.BlockWatch(gpu.nvml_index(0), set(), "exclude")  # cuda:0 in NVML terms
    watch.start()
    assert tenancy.OTHER_PROCESS not in watch.block_done("head", quad_end=True)
    # The tenant must not descend from this run (its own processes are never tenants: a
    # child started here was taken for ours on a lent H200): a shell starts it in the
    # background and exits, so it is re-parented away from this process tree. A background
    # job ignores Ctrl-C, so it ends by itself within a minute whatever happens here.
    code = (
        "import os,time,torch\na=torch.randn(4096,4096,device='cuda')\n"
        "print(os.getpid(),flush=True)\nend=time.time()+60\nwhile time.time()<end: a@a"
    )
    pid: int | None = None
    shell = subprocess.Popen(
        ["sh", "-c", '"$0" -c "$1" &', sys.executable, code], stdout=subprocess.PIPE, text=True
    )
    try:
        assert shell.stdout is not None
        pid = int(shell.stdout.readline())
        shell.wait(timeout=30)
        assert not tenancy.descends(pid, watch.ours.root)
        time.sleep(0.5)
        flags = watch.block_done("base", quad_end=True)
    finally:
        shell.kill()
        if shell.stdout is not None:
            shell.stdout.close()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).wait(10)
    assert tenancy.OTHER_PROCESS in flags
    record = watch.tally.to_json()
    assert pid in record["other_processes"]
    assert record["read_us_per_block"] < 1000
