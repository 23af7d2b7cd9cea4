"""Generation latency of small decoders (a Llama and a GPT-2, built from configurations with
random weights: offline, and the same work per token as trained weights): time to first
token (TTFT, the prefill) and time per output token (TPOT, the decode loop), over prompt
length, output length and batch, on each decoding setup:

- ``eager``: ``generate()`` with the dynamic KV cache, as most code calls it;
- ``static-cache``: ``cache_implementation="static"`` (a preallocated KV cache);
- ``compile``: static cache and a ``torch.compile``d forward (with ``--sweep=full`` or
  ``--decoding=compile``; its warmup compiles, ~20 s on 2 cores).

    pytest examples -k generation                   # small: prompt 32 and 256, 16 new tokens
    pytest examples -k generation --sweep=full      # prompt 32/256/1024 x new 16/128 x batch 1/8

Each runs on the devices ``--backends`` names: ``torch-eager`` on the CPU, ``torch-cuda`` on
a GPU (skipped without one). A comparison judges TTFT and TPOT each (``metric="ttft"`` or
``"tpot"`` narrows it to one).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

MODELS = ["tiny-llama", "tiny-gpt2"]


@pytest.mark.parametrize("model_name", MODELS)
def test_generation(
    infer_bench,
    infperf_hf,
    model_name: str,
    gen_device: str,
    decoding: str,
    prompt_tokens: int,
    new_tokens: int,
    gen_batch: int,
    threads: int,
) -> None:
    import torch

    from pytest_infperf import hf

    if gen_device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    model = infperf_hf.causal_lm(model_name)
    if gen_device == "cuda":
        # A fresh model: moving the session's cached one would move it for later tests.
        model = hf.build_causal_lm(model_name).to("cuda")
    kwargs = {}
    if decoding in ("static-cache", "compile"):
        kwargs["cache_implementation"] = "static"
    if decoding == "compile":
        # A fresh model: compiling the session's cached one would change it for later tests.
        model = hf.build_causal_lm(model_name).to(gen_device)
        model.forward = torch.compile(model.forward, dynamic=False)
    inputs = hf.prompt(model, gen_batch, prompt_tokens)
    infer_bench.generate(
        model,
        inputs,
        max_new_tokens=new_tokens,
        generate_kwargs=kwargs,
        intra_op_threads=threads,
    )
