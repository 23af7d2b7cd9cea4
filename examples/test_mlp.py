"""The seed's 200-128-64-32-16-8-1 sigmoid MLP, in torch and in onnxruntime.

At batch 1 this model is all framework overhead: torch eager pays ~60 us of Python and
dispatch for a few thousand FLOPs, ORT ~10 us (the "framework tax").
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

SIZES = [200, 128, 64, 32, 16, 8, 1]


def make_mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for fan_in, fan_out in itertools.pairwise(SIZES):
        layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.Sigmoid()]
    return torch.nn.Sequential(*layers).eval()


@pytest.fixture(scope="module")
def mlp_onnx(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("onnx")
    path = tmp_path_factory.mktemp("mlp") / "mlp.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates the TorchScript exporter
        torch.onnx.export(
            make_mlp(),
            (torch.randn(1, 200),),
            str(path),
            input_names=["x"],
            output_names=["y"],
            dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    return str(path)


@pytest.mark.parametrize("mlp_batch", [1, 32], ids=lambda b: f"b{b}")
def test_mlp_torch(infer_bench, mlp_batch: int, threads: int) -> None:
    infer_bench(make_mlp(), (torch.randn(mlp_batch, 200),), intra_op_threads=threads)


@pytest.mark.parametrize("mlp_batch", [1, 32], ids=lambda b: f"b{b}")
def test_mlp_onnxruntime(infer_bench, mlp_onnx: str, mlp_batch: int, threads: int) -> None:
    pytest.importorskip("onnxruntime")
    x = np.random.default_rng(0).standard_normal((mlp_batch, 200)).astype(np.float32)
    infer_bench(
        mlp_onnx,
        {"x": x},
        providers=["CPUExecutionProvider"],
        intra_op_threads=threads,
        inter_op_threads=1,
    )
