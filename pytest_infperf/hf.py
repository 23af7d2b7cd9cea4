"""transformers helpers: models from configs (random weights, offline), synthetic tokenized
inputs, and ONNX export with dynamic batch and sequence axes, cached.

Latency does not depend on weight values, so a model built from its configuration with
random weights measures the same as the pretrained one, and needs no hub download. The
well-known configurations are built in (``PRESETS``); any other name is looked up in the
local transformers cache only (``local_files_only=True``), never on the network.

    from pytest_infperf import hf

    model = hf.build_model("distilbert-base-uncased")
    inputs = hf.synthetic_inputs(model, batch_size=8, seq_len=128)
    onnx_path = hf.export_onnx("distilbert-base-uncased")   # cached by config and seed

    llm = hf.build_causal_lm("tiny-llama")                   # a decoder, for generate()
    result = infer_bench.generate(llm, hf.prompt(llm, prompt_tokens=64), max_new_tokens=16)
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .core.fsutil import atomic_path
from .measure.backends import BackendError, require

#: Built-in configurations: name -> (model_type, overrides of that type's defaults).
#: The defaults of BertConfig and DistilBertConfig *are* bert-base and distilbert-base.
PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "bert-base-uncased": ("bert", {}),
    "bert-base-cased": ("bert", {"vocab_size": 28996}),
    "bert-large-uncased": (
        "bert",
        {
            "hidden_size": 1024,
            "num_hidden_layers": 24,
            "num_attention_heads": 16,
            "intermediate_size": 4096,
        },
    ),
    "distilbert-base-uncased": ("distilbert", {}),
    "roberta-base": (
        "roberta",
        {
            "vocab_size": 50265,
            "max_position_embeddings": 514,
            "type_vocab_size": 1,
            "pad_token_id": 1,
        },
    ),
    "all-minilm-l6-v2": (
        "bert",
        {
            "hidden_size": 384,
            "num_hidden_layers": 6,
            "num_attention_heads": 12,
            "intermediate_size": 1536,
        },
    ),
    # Small models for tests: same code paths, milliseconds per call.
    "bert-tiny": (
        "bert",
        {
            "hidden_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 512,
        },
    ),
    "bert-test": (
        "bert",
        {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "vocab_size": 1000,
            "max_position_embeddings": 512,
        },
    ),
    "distilbert-test": (
        "distilbert",
        {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64, "vocab_size": 1000},
    ),
    # Decoders for generation benchmarks (build_causal_lm): small enough for a CPU test,
    # with the real code paths (KV cache, rotary/learned positions, GQA for Llama).
    "tiny-llama": (
        "llama",
        {
            "vocab_size": 1000,
            "hidden_size": 256,
            "intermediate_size": 1024,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 1024,
        },
    ),
    "tiny-gpt2": (
        "gpt2",
        {
            "vocab_size": 1000,
            "n_embd": 256,
            "n_layer": 2,
            "n_head": 4,
            "n_positions": 1024,
            "bos_token_id": 0,
            "eos_token_id": 0,
        },
    ),
}
ALIASES = {
    "bert-base": "bert-base-uncased",
    "distilbert": "distilbert-base-uncased",
    "distilbert-base": "distilbert-base-uncased",
    "bert-large": "bert-large-uncased",
    "google-bert/bert-base-uncased": "bert-base-uncased",
    "distilbert/distilbert-base-uncased": "distilbert-base-uncased",
    "sentence-transformers/all-minilm-l6-v2": "all-minilm-l6-v2",
}

TOKEN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def make_config(name_or_config: Any, **overrides: Any) -> Any:
    """A ``PretrainedConfig`` from a preset name, a local cache entry, or a config object."""
    transformers = require("transformers")
    if isinstance(name_or_config, transformers.PretrainedConfig):
        config = name_or_config.__class__.from_dict(name_or_config.to_dict())
        for key, value in overrides.items():
            setattr(config, key, value)
        return config
    if not isinstance(name_or_config, str):
        raise TypeError(
            f"expected a model name or a transformers config, got {type(name_or_config).__name__}"
        )
    name = ALIASES.get(name_or_config.lower(), name_or_config.lower())
    if name in PRESETS:
        model_type, preset = PRESETS[name]
        return transformers.AutoConfig.for_model(model_type, **{**preset, **overrides})
    try:
        return transformers.AutoConfig.from_pretrained(
            name_or_config, local_files_only=True, **overrides
        )
    except (OSError, ValueError) as exc:
        raise BackendError(
            f"no built-in configuration named {name_or_config!r}, and it is not in the local "
            f"transformers cache ({type(exc).__name__}). Built in: {', '.join(sorted(PRESETS))}."
            " Or pass a config object, e.g. transformers.BertConfig(num_hidden_layers=4)"
        ) from None


def build_model(
    name_or_config: Any, *, seed: int = 0, dtype: Any = None, device: Any = None, **overrides: Any
) -> Any:
    """A transformers model with random weights from a configuration, in eval mode."""
    return _from_config("AutoModel", name_or_config, seed, dtype, device, overrides)


def _from_config(
    auto: str, name_or_config: Any, seed: int, dtype: Any, device: Any, overrides: dict[str, Any]
) -> Any:
    """``transformers.<auto>.from_config`` with a seeded init, in eval mode, moved."""
    torch = require("torch")
    transformers = require("transformers")
    config = make_config(name_or_config, **overrides)
    torch.manual_seed(seed)
    model = getattr(transformers, auto).from_config(config)
    model.eval()
    if dtype is not None:
        model.to(dtype=dtype)
    if device is not None:
        model.to(device)
    return model


def build_causal_lm(
    name_or_config: Any, *, seed: int = 0, dtype: Any = None, device: Any = None, **overrides: Any
) -> Any:
    """A decoder with its language-model head (``AutoModelForCausalLM``), random weights,
    eval mode: what ``infer_bench.generate`` measures. ``overrides`` change the config, e.g.
    ``build_causal_lm("tiny-llama", num_hidden_layers=4)``."""
    return _from_config("AutoModelForCausalLM", name_or_config, seed, dtype, device, overrides)


def prompt(
    model_or_config: Any,
    batch_size: int = 1,
    prompt_tokens: int = 64,
    *,
    seed: int = 0,
    device: Any = None,
) -> dict[str, Any]:
    """A tokenized prompt for ``generate``: random ``input_ids`` (``batch_size`` x
    ``prompt_tokens``, avoiding the special tokens) and an all-ones ``attention_mask``."""
    import numpy as np

    torch = require("torch")
    if batch_size < 1 or prompt_tokens < 1:
        raise ValueError("batch_size and prompt_tokens must be >= 1")
    config = _config_of(model_or_config)
    vocab = int(getattr(config, "vocab_size", 1000))
    special = {
        int(t)
        for t in (
            getattr(config, n, None) for n in ("bos_token_id", "eos_token_id", "pad_token_id")
        )
        if isinstance(t, int)
    }
    rng = np.random.default_rng(seed)
    low = max(special, default=-1) + 1
    shape = (batch_size, prompt_tokens)
    if low < vocab:  # the special ids sit low (Llama's 1 and 2): the ids above them
        ids = rng.integers(low, vocab, size=shape)
    else:
        # ...or at the top (GPT-2's 50256 of 50257): every id that is not special
        plain = np.setdiff1d(np.arange(vocab), np.fromiter(special, dtype=np.int64))
        if plain.size == 0:
            raise ValueError(f"every id of the vocabulary ({vocab}) is a special token")
        ids = plain[rng.integers(0, plain.size, size=shape)]
    out = {"input_ids": torch.from_numpy(ids.astype(np.int64))}
    out["attention_mask"] = torch.ones_like(out["input_ids"])
    if device is not None:
        out = {k: v.to(device) for k, v in out.items()}
    return out


def input_names(model_or_config: Any) -> list[str]:
    """The tokenizer outputs a model's ``forward`` accepts, in ``TOKEN_INPUTS`` order."""
    forward = getattr(model_or_config, "forward", None)
    if forward is None:  # a config: look at its model class without building one
        transformers = require("transformers")
        forward = transformers.MODEL_MAPPING[type(model_or_config)].forward
    params = inspect.signature(forward).parameters
    return [n for n in TOKEN_INPUTS if n in params]


def _config_of(model_or_config: Any) -> Any:
    return getattr(model_or_config, "config", model_or_config)


def synthetic_inputs(
    model_or_config: Any,
    batch_size: int,
    seq_len: int,
    *,
    framework: str = "pt",
    seed: int = 0,
    padding: int = 0,
    names: list[str] | None = None,
) -> dict[str, Any]:
    """Random token ids with an attention mask (the last ``padding`` positions masked) and
    zero token types, as a tokenizer would return for ``batch_size`` x ``seq_len``.

    ``framework`` is ``"pt"`` (torch tensors) or ``"np"`` (int64 arrays, for onnxruntime).
    """
    import numpy as np

    if batch_size < 1 or seq_len < 1:
        raise ValueError("batch_size and seq_len must be >= 1")
    config = _config_of(model_or_config)
    limit = getattr(config, "max_position_embeddings", None)
    if limit is not None and seq_len > limit:
        raise ValueError(f"seq_len={seq_len} exceeds the model's max_position_embeddings={limit}")
    wanted = names or input_names(model_or_config)
    rng = np.random.default_rng(seed)
    vocab = int(getattr(config, "vocab_size", 30522))
    ids = rng.integers(
        1000 if vocab > 2000 else 1, vocab, size=(batch_size, seq_len), dtype=np.int64
    )
    mask = np.ones_like(ids)
    if padding:
        mask[:, seq_len - min(padding, seq_len - 1) :] = 0
    arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    out = {k: arrays[k] for k in wanted if k in arrays}
    if framework == "np":
        return out
    if framework != "pt":
        raise ValueError(f"framework={framework!r}: expected 'pt' or 'np'")
    torch = require("torch")
    return {k: torch.from_numpy(v) for k, v in out.items()}


def default_cache_dir() -> Path:
    base = os.environ.get("INFPERF_CACHE_DIR") or os.path.join(
        tempfile.gettempdir(), f"pytest-infperf-{os.getuid() if hasattr(os, 'getuid') else 'u'}"
    )
    return Path(base) / "onnx"


def _export(model: Any, path: Path, names: list[str], opset: int) -> None:
    torch = require("torch")

    class _Positional(torch.nn.Module):  # type: ignore[misc,name-defined]
        """ONNX export wants positional inputs and tuple outputs."""

        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(names, args, strict=True)), return_dict=False)

    # eval() matters: a fresh Module is in training mode and would export active dropout.
    wrapper = _Positional(model).eval()
    example = synthetic_inputs(model, 2, 16, names=names)
    first = model(**example, return_dict=True)
    outputs = list(first.keys())
    dynamic = {n: {0: "batch", 1: "sequence"} for n in names}
    for out_name in outputs:
        dims = first[out_name].dim()
        dynamic[out_name] = {0: "batch", 1: "sequence"} if dims >= 3 else {0: "batch"}
    with atomic_path(path, ".onnx") as tmp, warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")  # the TorchScript exporter is chatty
        torch.onnx.export(
            wrapper,
            tuple(example[n] for n in names),
            str(tmp),
            input_names=names,
            output_names=outputs,
            dynamic_axes=dynamic,
            opset_version=opset,
            dynamo=False,
        )


def export_onnx(
    model_or_name: Any,
    path: str | os.PathLike[str] | None = None,
    *,
    seed: int = 0,
    opset: int = 17,
    cache_dir: str | os.PathLike[str] | None = None,
    **overrides: Any,
) -> Path:
    """Export a transformers model to ONNX with dynamic ``batch`` and ``sequence`` axes.

    Given a name or config, the model is built with ``seed`` and the file is cached under
    ``cache_dir`` by a hash of the configuration, seed and opset, so a parametrized sweep
    exports once. Given a model object, it is exported to ``path`` (or a temp file) as is.
    Uses the TorchScript exporter (``dynamo=False``): 4 s for BERT-base here, against 12 s.
    """
    require("onnx")
    if hasattr(model_or_name, "forward"):
        model = model_or_name
        target = (
            Path(path)
            if path is not None
            else Path(tempfile.mkstemp(prefix="infperf-", suffix=".onnx")[1])
        )
        _export(model, target, input_names(model), opset)
        return target
    config = make_config(model_or_name, **overrides)
    key_src = json.dumps(
        {"config": config.to_dict(), "seed": seed, "opset": opset}, sort_keys=True, default=str
    )
    digest = hashlib.sha256(key_src.encode()).hexdigest()[:16]
    label = str(getattr(config, "model_type", "model"))
    target = (
        Path(path)
        if path is not None
        else Path(cache_dir or default_cache_dir()) / (f"{label}-{digest}.onnx")
    )
    if target.is_file() and target.stat().st_size > 0:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    model = build_model(config, seed=seed)
    _export(model, target, input_names(model), opset)
    return target


class HFModels:
    """Session-wide cache behind the ``infperf_hf`` fixture: each configuration is built
    and exported once per test session, however many parametrized tests use it."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir
        self._models: dict[str, Any] = {}
        self._onnx: dict[str, Path] = {}

    @staticmethod
    def _key(name_or_config: Any, kwargs: Mapping[str, Any]) -> str:
        base = (
            name_or_config
            if isinstance(name_or_config, str)
            else json.dumps(name_or_config.to_dict(), sort_keys=True, default=str)
        )
        return json.dumps([base, dict(kwargs)], sort_keys=True, default=str)

    def model(self, name_or_config: Any, **kwargs: Any) -> Any:
        """A torch model (random weights, eval mode), built once per session."""
        key = self._key(name_or_config, kwargs)
        if key not in self._models:
            self._models[key] = build_model(name_or_config, **kwargs)
        return self._models[key]

    def causal_lm(self, name_or_config: Any, **kwargs: Any) -> Any:
        """A decoder with its LM head (:func:`build_causal_lm`), built once per session."""
        key = "causal:" + self._key(name_or_config, kwargs)
        if key not in self._models:
            self._models[key] = build_causal_lm(name_or_config, **kwargs)
        return self._models[key]

    def onnx(self, name_or_config: Any, **kwargs: Any) -> Path:
        """The ONNX export of ``model(name_or_config, **kwargs)``, exported once."""
        key = self._key(name_or_config, kwargs)
        if key not in self._onnx:
            self._onnx[key] = export_onnx(name_or_config, cache_dir=self.cache_dir, **kwargs)
        return self._onnx[key]

    def inputs(
        self,
        name_or_config: Any,
        batch_size: int,
        seq_len: int,
        framework: str = "pt",
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Synthetic tokenized inputs matching the model's ``forward``."""
        return synthetic_inputs(
            make_config(name_or_config), batch_size, seq_len, framework=framework, **kwargs
        )
