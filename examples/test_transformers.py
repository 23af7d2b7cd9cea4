"""BERT-base and DistilBERT latency sweeps over batch size and sequence length, in torch
eager and onnxruntime (CPU; CUDA where a GPU is present), built from their configurations
with random weights: no hub download, same latency as the pretrained models.

    pytest examples                      # small sweep: batch 1, sequence 32 and 128
    pytest examples --sweep=full         # batch 1/4/8/32 x sequence 64/128/256/384
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

MODELS = ["distilbert-base-uncased", "bert-base-uncased"]


@pytest.mark.parametrize("model_name", MODELS)
def test_torch_eager(infer_bench, infperf_hf, model_name: str, batch: int, seq: int,
                     threads: int) -> None:
    model = infperf_hf.model(model_name)
    inputs = infperf_hf.inputs(model_name, batch, seq)
    infer_bench(model, inputs, intra_op_threads=threads, batch_size=batch,
                params={"model": model_name, "backend": "torch-eager"})


@pytest.mark.parametrize("model_name", MODELS)
def test_onnxruntime_cpu(infer_bench, infperf_hf, model_name: str, batch: int, seq: int,
                         threads: int) -> None:
    pytest.importorskip("onnxruntime")
    path = infperf_hf.onnx(model_name)
    inputs = infperf_hf.inputs(model_name, batch, seq, framework="np")
    infer_bench(path, inputs, providers=["CPUExecutionProvider"], intra_op_threads=threads,
                inter_op_threads=1, params={"model": model_name, "backend": "ort-cpu"})
