"""Options for the example benchmarks: the sweep size, threads, and which backends run."""

from __future__ import annotations

import pytest

SMALL = {"batch": [1], "seq": [32, 128]}
# The seed sweep: BERT-base and DistilBERT, batch 1/4/8/32 x sequence 64/128/256/384.
FULL = {"batch": [1, 4, 8, 32], "seq": [64, 128, 256, 384]}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("infperf examples")
    group.addoption("--sweep", choices=("small", "full"), default="small",
                    help="small (default, a few minutes on 2 cores) or the full seed sweep")
    group.addoption("--threads", type=int, default=1,
                    help="intra-op threads for torch and onnxruntime (default 1: least noise)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    sweep = FULL if metafunc.config.getoption("sweep") == "full" else SMALL
    if "batch" in metafunc.fixturenames:
        metafunc.parametrize("batch", sweep["batch"], ids=lambda b: f"b{b}")
    if "seq" in metafunc.fixturenames:
        metafunc.parametrize("seq", sweep["seq"], ids=lambda s: f"s{s}")


@pytest.fixture
def threads(request: pytest.FixtureRequest) -> int:
    return int(request.config.getoption("threads"))
