"""Options for the example benchmarks: the sweep size, threads, and which backends run."""

from __future__ import annotations

import pytest

SMALL = {"batch": [1], "seq": [32, 128], "prompt": [32, 256], "new": [16], "gen_batch": [1]}
# The seed sweep: BERT-base and DistilBERT, batch 1/4/8/32 x sequence 64/128/256/384; for
# generation, prompt 32/256/1024 x output 16/128 x batch 1/8.
FULL = {
    "batch": [1, 4, 8, 32],
    "seq": [64, 128, 256, 384],
    "prompt": [32, 256, 1024],
    "new": [16, 128],
    "gen_batch": [1, 8],
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("infperf examples")
    group.addoption(
        "--sweep",
        choices=("small", "full"),
        default="small",
        help="small (default, a few minutes on 2 cores) or the full seed sweep",
    )
    group.addoption(
        "--threads",
        type=int,
        default=1,
        help="intra-op threads for torch and onnxruntime (default 1: least noise)",
    )
    group.addoption(
        "--backends",
        default=None,
        help="comma-separated: torch-eager, torch-compile, torch-cuda, ort-cpu, "
        "ort-cuda (default: eager and ort-cpu, plus torch-compile in the "
        "full sweep, plus the CUDA ones on a GPU machine)",
    )
    group.addoption(
        "--decoding",
        default=None,
        help="generation examples, comma-separated: eager, static-cache, compile (default: "
        "eager and static-cache, plus compile in the full sweep)",
    )


def _backends(config: pytest.Config) -> list[str]:
    chosen = config.getoption("backends")
    if chosen:
        return [b.strip() for b in chosen.split(",") if b.strip()]
    backends = ["torch-eager", "ort-cpu", "torch-cuda", "ort-cuda"]
    if config.getoption("sweep") == "full":
        backends.insert(1, "torch-compile")
    return backends


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    sweep = FULL if metafunc.config.getoption("sweep") == "full" else SMALL
    backends = _backends(metafunc.config)
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", [b for b in backends if b.startswith("torch")])
    if "ort_backend" in metafunc.fixturenames:
        metafunc.parametrize("ort_backend", [b for b in backends if b.startswith("ort")])
    if "batch" in metafunc.fixturenames:
        metafunc.parametrize("batch", sweep["batch"], ids=lambda b: f"b{b}")
    if "seq" in metafunc.fixturenames:
        metafunc.parametrize("seq", sweep["seq"], ids=lambda s: f"s{s}")
    if "gen_device" in metafunc.fixturenames:
        # Generations follow --backends too: torch-eager (or torch-compile) on the CPU,
        # torch-cuda on the GPU (skipped without one), so a GPU runner's
        # --backends=torch-cuda,ort-cuda runs them on the GPU, not on the CPU.
        devices = []
        if {"torch-eager", "torch-compile"} & set(backends):
            devices.append("cpu")
        if "torch-cuda" in backends:
            devices.append("cuda")
        metafunc.parametrize("gen_device", devices)
    if "decoding" in metafunc.fixturenames:
        chosen = metafunc.config.getoption("decoding")
        decodings = ["eager", "static-cache"]
        if metafunc.config.getoption("sweep") == "full":
            decodings.append("compile")
        if chosen:
            decodings = [d.strip() for d in chosen.split(",") if d.strip()]
        metafunc.parametrize("decoding", decodings)
    if "prompt_tokens" in metafunc.fixturenames:
        metafunc.parametrize("prompt_tokens", sweep["prompt"], ids=lambda p: f"p{p}")
    if "new_tokens" in metafunc.fixturenames:
        metafunc.parametrize("new_tokens", sweep["new"], ids=lambda n: f"n{n}")
    if "gen_batch" in metafunc.fixturenames:
        metafunc.parametrize("gen_batch", sweep["gen_batch"], ids=lambda b: f"b{b}")


@pytest.fixture
def threads(request: pytest.FixtureRequest) -> int:
    return int(request.config.getoption("threads"))
