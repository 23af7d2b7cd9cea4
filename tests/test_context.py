"""Timed as the test set it up: every call the plugin makes of the model (first call,
warm-up, timed samples, the profiled pass) runs under the grad mode, autocast state,
default device, thread count, CUDA device and stream, and contextvars of the test's own
call. One row per context a user may enter around ``infer_bench``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import has_cuda

torch = pytest.importorskip("torch")

#: The inner test: ``MODEL`` is "callable" (a function calling a Linear) or "module" (the
#: Linear itself, its state read by a forward hook); ``ENTER`` the contexts, in the test.
INNER = """
import contextlib
import contextvars
import json
import os
from pathlib import Path

import torch

VAR = contextvars.ContextVar("infperf_test_var", default="unset")
SEEN = []
CUDA = torch.cuda.is_available()


@contextlib.contextmanager
def threads(n):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def state(out):
    seen = {
        "grad": torch.is_grad_enabled(),
        "inference": torch.is_inference_mode_enabled(),
        "autocast_cpu": [torch.is_autocast_enabled("cpu"), str(torch.get_autocast_dtype("cpu"))],
        "out_dtype": str(out.dtype),
        "default_device": torch.empty(()).device.type,
        "threads": torch.get_num_threads(),
        "var": VAR.get(),
    }
    if CUDA:
        seen["autocast_cuda"] = [
            torch.is_autocast_enabled("cuda"), str(torch.get_autocast_dtype("cuda"))
        ]
        seen["cuda_device"] = torch.cuda.current_device()
        seen["stream"] = torch.cuda.current_stream().cuda_stream
    return seen


def test_ctx(infer_bench, tmp_path):
    device = os.environ["CTX_DEVICE"]
    lin = torch.nn.Linear(16, 16).to(device)
    x = torch.randn(4, 16, device=device)
    if os.environ["CTX_MODEL"] == "module":
        lin.register_forward_hook(lambda mod, args, out: SEEN.append(state(out)))
        model = lin
    else:
        def model(x):
            out = lin(x)
            SEEN.append(state(out))
            return out
    stream = torch.cuda.Stream() if CUDA else None
    with contextlib.ExitStack() as stack:
        for enter in os.environ["CTX_ENTER"].split(";"):
            stack.enter_context(eval(enter))
        SEEN.clear()
        model(x)  # the test's own call: what every call the plugin makes must see
        expected = SEEN[0]
        SEEN.clear()
        result = infer_bench(model, x, **json.loads(os.environ.get("CTX_KW") or "{}"))
    # A module the test left in training mode is in training mode again after.
    doc = {"expected": expected, "seen": SEEN, "training_after": lin.training}
    doc["info"] = result.backend_info
    Path(os.environ["CTX_OUT"]).write_text(json.dumps(doc))
"""

#: What every call sees whatever the test set: the torch backend's inference mode.
PLUGIN = {"grad": False, "inference": True}
#: The call's keywords that keep the test's own grad mode.
OPT_OUT = {"inference_mode": False}

#: (id, contexts entered around infer_bench, model, device, what the row checks, and the
#: call's keywords: inference_mode=False times the model in the grad mode the test set).
ROWS: list[tuple[Any, ...]] = [
    ("grad-kept-callable", "torch.enable_grad()", "callable", "cpu", {"grad": True}, OPT_OUT),
    ("grad-kept-module", "torch.enable_grad()", "module", "cpu", {"grad": True}, OPT_OUT),
    ("no_grad", "torch.no_grad()", "callable", "cpu", {"grad": False}),
    ("inference_mode", "torch.inference_mode()", "callable", "cpu", {"inference": True}),
    (
        "autocast-bf16-callable",
        "torch.autocast('cpu', dtype=torch.bfloat16)",
        "callable",
        "cpu",
        {"out_dtype": "torch.bfloat16"},
    ),
    (
        "autocast-bf16-module",
        "torch.autocast('cpu', dtype=torch.bfloat16)",
        "module",
        "cpu",
        {"out_dtype": "torch.bfloat16", "autocast_cpu": [True, "torch.bfloat16"]},
    ),
    ("default-device", "torch.device('meta')", "callable", "cpu", {"default_device": "meta"}),
    ("one-thread", "threads(1)", "callable", "cpu", {"threads": 1}),
    (
        "contextvar",
        "contextlib.nullcontext(VAR.set('set by the test'))",
        "callable",
        "cpu",
        {"var": "set by the test"},
    ),
    (
        "no_grad-autocast-module",
        "torch.no_grad();torch.autocast('cpu', dtype=torch.bfloat16)",
        "module",
        "cpu",
        {"grad": False, "out_dtype": "torch.bfloat16"},
    ),
    (
        "autocast-fp16-cuda-module",
        "torch.autocast('cuda', dtype=torch.float16)",
        "module",
        "cuda",
        {"out_dtype": "torch.float16", "autocast_cuda": [True, "torch.float16"]},
    ),
    (
        "autocast-fp16-cuda-callable",
        "torch.autocast('cuda', dtype=torch.float16)",
        "callable",
        "cuda",
        {"out_dtype": "torch.float16"},
    ),
    ("side-stream-cuda-module", "torch.cuda.stream(stream)", "module", "cuda", {}),
    ("side-stream-cuda-callable", "torch.cuda.stream(stream)", "callable", "cuda", {}),
]


@pytest.mark.parametrize(
    ("enter", "model", "device", "checks", "kw"),
    [
        pytest.param(
            *row[1:5],
            row[5] if len(row) > 5 else {},
            id=row[0],
            marks=[pytest.mark.skipif(not has_cuda(), reason="needs CUDA")]
            if row[3] == "cuda"
            else [],
        )
        for row in ROWS
    ],
)
def test_every_call_runs_under_the_tests_context(
    ourtester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    enter: str,
    model: str,
    device: str,
    checks: dict[str, Any],
    kw: dict[str, Any],
) -> None:
    out = ourtester.path / "seen.json"
    for key, value in {
        "CTX_ENTER": enter,
        "CTX_MODEL": model,
        "CTX_DEVICE": device,
        "CTX_OUT": str(out),
        "CTX_KW": json.dumps(kw),
    }.items():
        monkeypatch.setenv(key, value)
    ourtester.makepyfile(test_ctx=INNER)
    # The profiled pass runs the model too: it is turned on here.
    ourtester.runpytest("-o", "infperf_profile=counts").assert_outcomes(passed=1)
    doc = json.loads(Path(out).read_text())
    expected, seen = doc["expected"], doc["seen"]
    for key, value in checks.items():
        assert expected[key] == value, (key, expected)
    # First call, warm-up, the timed samples and the profiled pass: more than a handful.
    assert len(seen) >= 10
    # On top of the test's context, the plugin's own: a torch model is timed under
    # torch.inference_mode() (no autograd), whatever grad mode the test left on, unless
    # the test says inference_mode=False.
    want = {**expected, **PLUGIN} if kw.get("inference_mode", True) else expected
    differ = [s for s in seen if s != want]
    assert not differ, f"{len(differ)} of {len(seen)} calls differ: {differ[0]} != {want}"
    # What was timed is recorded: the grad mode, and autocast where the test entered it.
    info = doc["info"]
    assert info["grad_mode"] == (
        "inference" if want["inference"] else "grad" if want["grad"] else "no_grad"
    )
    autocast = [
        f"{d}:{v[1].removeprefix('torch.')}"
        for d in ("cpu", "cuda")
        if (v := want.get(f"autocast_{d}")) and v[0]
    ]
    assert info["autocast"] == (autocast[0] if autocast else None)
    assert doc["training_after"] is True  # the module's own mode, put back
