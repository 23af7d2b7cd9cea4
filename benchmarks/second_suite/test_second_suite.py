"""A second real suite, for figures only (issue 47, item 5): the model families the
examples lack, each at the size and threading a user brings, random weights from configs
(offline). ``benchmarks/real_models.py --suite second`` copies it into a temporary git
repository; the project's own test suite never collects it (testpaths = tests).

- ``test_whisper_encoder``: an audio encoder (Whisper, 4 layers, 256 wide, 750 frames);
- ``test_bart_generate``: a seq2seq ``generate()`` (BART, 2+2 layers, 16 new tokens);
- ``test_bert_compiled``: a small BERT under ``torch.compile`` (each process compiles it);
- ``test_cnn_ort_default_threads``: a ResNet exported to ONNX, ONNX Runtime at its default
  threading (one intra-op thread per core, spinning);
- ``test_resnet_torch``: the same ResNet in torch, batch 4.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _resnet() -> Any:
    torch.manual_seed(0)
    cfg = transformers.ResNetConfig(
        depths=[1, 1, 2, 1], hidden_sizes=[32, 64, 128, 256], embedding_size=32
    )
    return transformers.ResNetModel(cfg).eval()


def test_whisper_encoder(infer_bench: Any) -> None:
    torch.manual_seed(0)
    cfg = transformers.WhisperConfig(
        d_model=256,
        encoder_layers=4,
        encoder_attention_heads=4,
        encoder_ffn_dim=1024,
        decoder_layers=1,
        decoder_attention_heads=4,
        num_mel_bins=80,
        max_source_positions=375,
    )
    encoder = transformers.WhisperModel(cfg).eval().get_encoder()
    infer_bench(encoder, (torch.randn(1, 80, 750),))


def test_bart_generate(infer_bench: Any) -> None:
    torch.manual_seed(0)
    cfg = transformers.BartConfig(
        vocab_size=1000,
        d_model=128,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=256,
        decoder_ffn_dim=256,
        max_position_embeddings=128,
    )
    model = transformers.BartForConditionalGeneration(cfg).eval()
    ids = torch.randint(4, 1000, (1, 32))
    infer_bench.generate(
        model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, max_new_tokens=16
    )


def test_bert_compiled(infer_bench: Any) -> None:
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512
    )
    model = torch.compile(transformers.BertModel(cfg).eval())
    infer_bench(model, {"input_ids": torch.randint(0, 1000, (1, 64))})


def test_cnn_ort_default_threads(
    infer_bench: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    pytest.importorskip("onnxruntime")
    path = Path(tmp_path_factory.mktemp("onnx")) / "resnet.onnx"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _resnet(),
            (torch.randn(1, 3, 96, 96),),
            str(path),
            dynamo=False,
            input_names=["pixel_values"],
        )
    import numpy as np

    feeds = {"pixel_values": np.random.default_rng(0).standard_normal((1, 3, 96, 96), np.float32)}
    infer_bench(str(path), feeds, providers=["CPUExecutionProvider"])


def test_resnet_torch(infer_bench: Any) -> None:
    infer_bench(_resnet(), (torch.randn(4, 3, 96, 96),))
