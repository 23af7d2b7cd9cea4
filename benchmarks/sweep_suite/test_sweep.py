"""A suite of the seeds' sweep shape, 100 benchmarks: a tiny BERT and a tiny DistilBERT
(transformers, from configs) over batch x sequence, a small CNN over batch x image size,
torch MLPs over width x depth, and ONNX Runtime MLPs (exported here) over width x batch;
one intra-op thread each. ``slow.json`` beside this file names cells to slow down
(``{"test_transformer[bert-4-32]": 1.2}``: a busy wait after each forward, 0.2 times its own time),
so a branch can change five cells and leave 95 identical. ``benchmarks/suite_sweep.py``
runs it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
SLOW: dict[str, float] = json.loads((Path(__file__).parent / "slow.json").read_text())
BATCH = (1, 2, 4, 8)
SEQ = (8, 16, 32, 64)


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def slowed(request: pytest.FixtureRequest, model: Any) -> Any:
    """``model`` with its forward stretched by this cell's factor in ``slow.json``."""
    factor = SLOW.get(request.node.name, 1.0)
    if factor == 1.0:
        return model
    started = [0.0]

    def before(*_: Any) -> None:
        started[0] = time.perf_counter()

    def after(*_: Any) -> None:
        now = time.perf_counter()
        until = now + (now - started[0]) * (factor - 1.0)
        while time.perf_counter() < until:
            pass

    model.register_forward_pre_hook(before)
    model.register_forward_hook(after)
    return model


def _transformer(kind: str) -> Any:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if kind == "bert":
        config = transformers.BertConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128
        )
        return transformers.BertModel(config).eval()
    config = transformers.DistilBertConfig(dim=64, n_layers=2, n_heads=2, hidden_dim=128)
    return transformers.DistilBertModel(config).eval()


@pytest.mark.parametrize("seq", SEQ)
@pytest.mark.parametrize("batch", BATCH)
@pytest.mark.parametrize("kind", ["bert", "distilbert"])
def test_transformer(infer_bench, request, kind: str, batch: int, seq: int) -> None:
    model = slowed(request, _transformer(kind))
    ids = torch.randint(0, 1000, (batch, seq))
    with torch.inference_mode():
        infer_bench(model, (ids,))


@pytest.mark.parametrize("size", (16, 24, 32, 48))
@pytest.mark.parametrize("batch", BATCH)
def test_cnn(infer_bench, request, batch: int, size: int) -> None:
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, 10),
    ).eval()  # fmt: skip
    with torch.inference_mode():
        infer_bench(slowed(request, model), (torch.randn(batch, 3, size, size),))


def _mlp(width: int, depth: int) -> Any:
    torch.manual_seed(0)
    layers: list[Any] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers).eval()


@pytest.mark.parametrize("depth", (1, 2, 3, 4))
@pytest.mark.parametrize("width", (64, 128, 256, 512, 1024))
def test_mlp(infer_bench, request, width: int, depth: int) -> None:
    with torch.inference_mode():
        infer_bench(slowed(request, _mlp(width, depth)), (torch.randn(8, width),))


@pytest.fixture(scope="module")
def onnx_mlps(tmp_path_factory: pytest.TempPathFactory) -> dict[int, str]:
    pytest.importorskip("onnx")
    paths = {}
    for width in (64, 128, 256, 512):
        path = tmp_path_factory.mktemp("onnx") / f"mlp{width}.onnx"
        torch.onnx.export(
            _mlp(width, 2), (torch.randn(1, width),), str(path), input_names=["x"],
            dynamic_axes={"x": {0: "batch"}}, dynamo=False,
        )  # fmt: skip
        paths[width] = str(path)
    return paths


@pytest.mark.parametrize("batch", (1, 4, 16, 64))
@pytest.mark.parametrize("width", (64, 128, 256, 512))
def test_onnx_mlp(infer_bench, onnx_mlps: dict[int, str], width: int, batch: int) -> None:
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(onnx_mlps[width], options, providers=["CPUExecutionProvider"])
    infer_bench(session, {"x": torch.randn(batch, width).numpy()})


def _tokens(text: str, vocab: dict[str, int]) -> list[int]:
    """A word-piece-like preprocessor in plain Python: lower, split, greedy longest match."""
    out: list[int] = []
    for word in text.lower().split():
        start = 0
        while start < len(word):
            end = len(word)
            while end > start and word[start:end] not in vocab:
                end -= 1
            out.append(vocab.get(word[start:end], 0) if end > start else 0)
            start = max(end, start + 1)
    return out


@pytest.mark.parametrize("words", (16, 64, 256, 1024))
@pytest.mark.parametrize("vocab_size", (100, 1000, 5000, 20000))
def test_preprocess(infer_bench, vocab_size: int, words: int) -> None:
    vocab = {f"w{i}": i for i in range(vocab_size)}
    text = " ".join(f"W{(i * 7919) % (2 * vocab_size)}x" for i in range(words))
    infer_bench(lambda: _tokens(text, vocab))
