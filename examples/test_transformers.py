"""BERT-base and DistilBERT latency sweeps over batch size and sequence length, built from
their configurations with random weights (no hub download, same latency as the pretrained
models), on each backend:

- ``torch-eager`` and ``ort-cpu``: always;
- ``torch-compile``: with ``--sweep=full`` or ``--backends=...,torch-compile`` (its first
  call compiles, ~20 s for BERT-base on 2 cores, and is kept apart as ``first_call``);
- ``torch-cuda`` and ``ort-cuda``: on a machine with an NVIDIA GPU (skipped otherwise);
  ORT on CUDA uses IOBinding, inputs and outputs resident on the GPU.

    pytest examples                      # small sweep: batch 1, sequence 32 and 128
    pytest examples --sweep=full         # batch 1/4/8/32 x sequence 64/128/256/384
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

MODELS = ["distilbert-base-uncased", "bert-base-uncased"]


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def test_model_sweep_is_offline(infperf_hf) -> None:
    """The configurations are built in: nothing is downloaded."""
    for name in MODELS:
        assert infperf_hf.model(name).config.model_type in ("bert", "distilbert")


@pytest.mark.parametrize("model_name", MODELS)
def test_torch(
    infer_bench, infperf_hf, model_name: str, backend: str, batch: int, seq: int, threads: int
) -> None:
    import torch

    if backend == "torch-cuda" and not _cuda():
        pytest.skip("no CUDA GPU")
    model = infperf_hf.model(model_name)
    inputs = infperf_hf.inputs(model_name, batch, seq)
    options = {"intra_op_threads": threads}
    if backend == "torch-compile":
        model = torch.compile(model)
    if backend == "torch-cuda":
        options = {"device": "cuda"}
    infer_bench(model, inputs, batch_size=batch, **options)


@pytest.mark.parametrize("model_name", MODELS)
def test_onnxruntime(
    infer_bench, infperf_hf, model_name: str, ort_backend: str, batch: int, seq: int, threads: int
) -> None:
    ort = pytest.importorskip("onnxruntime")
    path = infperf_hf.onnx(model_name)
    inputs = infperf_hf.inputs(model_name, batch, seq, framework="np")
    if ort_backend == "ort-cuda":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            pytest.skip("onnxruntime without CUDA (install onnxruntime-gpu)")
        infer_bench(path, inputs, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
        return
    infer_bench(
        path,
        inputs,
        providers=["CPUExecutionProvider"],
        intra_op_threads=threads,
        inter_op_threads=1,
    )
