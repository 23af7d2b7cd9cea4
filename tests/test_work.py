"""What one call does, and what changed: the profiled pass, the work diff and its gate, in a
real git repository with real torch, transformers and ONNX Runtime models.

One repository serves the module: its baseline is saved once on ``main``; each branch is
compared once (against the stored baseline as a results file: the work diff is the subject,
not the time). The
FLOPs expected are counted here, independently, with ``FlopCounterMode`` on the same
models: an oracle, not a copy of the plugin's arithmetic.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .conftest import GIT_ENV, git, init_repo, load_json, stored_file

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")

SUITE = textwrap.dedent(
    """
    import time
    import warnings
    from pathlib import Path

    import numpy as np
    import pytest
    import torch
    from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

    torch.set_num_threads(1)  # the wrapped call's model too: no OpenMP pool to contend
    HERE = Path(__file__).parent
    LAYERS = int((HERE / "layers.txt").read_text())
    PYTHON_WORK = (HERE / "python.txt").read_text().strip() == "1"


    def encoder(layers=LAYERS):
        torch.manual_seed(0)
        cfg = BertConfig(hidden_size=32, num_hidden_layers=layers, num_attention_heads=2,
                         intermediate_size=64, vocab_size=100, max_position_embeddings=64)
        return BertModel(cfg).eval()


    IDS = {"input_ids": torch.arange(16).reshape(1, 16) % 90 + 5}


    def test_encoder(infer_bench):
        infer_bench(encoder(), IDS, intra_op_threads=1)


    def test_wrapped(infer_bench):
        model = encoder(2)  # the model never changes here: only the Python around it

        def call():
            if PYTHON_WORK:  # Python work inside the benchmarked callable, no operator
                end = time.perf_counter_ns() + 4_000_000
                while time.perf_counter_ns() < end:
                    pass
            with torch.inference_mode():
                return model(**IDS)

        # The stored pass alone judges it: samples enough that a loaded machine (the
        # suite's other xdist worker) does not leave x5 undecided, as 0.05 s did.
        infer_bench(call, intra_op_threads=1, max_time=0.5)


    @pytest.mark.infperf(rounds=2, max_rounds=2, max_time=0.001, remeasure=0)
    def test_undecided(infer_bench):
        # two samples a side: the time cannot decide anything, the work can
        infer_bench(encoder(), IDS, intra_op_threads=1)


    def test_generate(infer_bench):
        torch.manual_seed(0)
        cfg = GPT2Config(n_embd=32, n_layer=LAYERS, n_head=2, vocab_size=100, n_positions=64)
        model = GPT2LMHeadModel(cfg).eval()
        infer_bench.generate(model, {"input_ids": IDS["input_ids"][:, :8]}, max_new_tokens=4,
                             intra_op_threads=1)


    def test_onnx(infer_bench, tmp_path):
        from pytest_infperf import hf

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            path = hf.export_onnx(encoder(), tmp_path / "encoder.onnx")
        ids = IDS["input_ids"].numpy()
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                 "token_type_ids": np.zeros_like(ids)}
        infer_bench(path, {k: v for k, v in feeds.items() if k in hf.input_names(encoder())},
                    providers=["CPUExecutionProvider"], intra_op_threads=1)
    """
)

INI = textwrap.dedent(
    """
    [pytest]
    infperf_max_time = 0.05
    infperf_warmup = 2
    infperf_rounds = 10
    infperf_expert = warmup_time=0.01 drift_guard=off
    infperf_max_work_increase = 0.05
    filterwarnings =
        ignore::DeprecationWarning
        ignore::FutureWarning
        ignore::UserWarning
    """
)


def _run(repo: Path, *args: str) -> tuple[dict[str, Any], str, int]:
    out = repo / "out.json"
    md = repo / "out.md"
    for f in (out, md):
        f.unlink(missing_ok=True)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            f"--perf-json={out}",
            f"--perf-markdown={md}",
            "--perf-no-summary",
            *args,
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
        env={**__import__("os").environ, **GIT_ENV},
    )
    text = proc.stdout + proc.stderr
    assert out.exists(), text
    return load_json(out), md.read_text() + "\n" + text, proc.returncode


def _branch(repo: Path, name: str, layers: int, python: bool) -> None:
    git(repo, "checkout", "-q", "-B", name, "main")
    (repo / "layers.txt").write_text(str(layers))
    (repo / "python.txt").write_text("1" if python else "0")
    git(repo, "commit", "-q", "--allow-empty", "-am", name)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Any], str, int]]:
    """The suite saved on main (2 layers), then compared on two branches: one layer more,
    and Python work added around an unchanged model (every other benchmark unchanged
    there: the A/A of the work diff)."""
    repo = tmp_path_factory.mktemp("work")
    (repo / "test_suite.py").write_text(SUITE)
    (repo / "pytest.ini").write_text(INI)
    (repo / "layers.txt").write_text("2")
    (repo / "python.txt").write_text("0")
    (repo / ".gitignore").write_text("baselines/\nout.*\n__pycache__/\n")
    init_repo(repo, "suite")
    doc, text, code = _run(repo, "--perf-save")
    assert code == 0, text
    out = {"save": (doc, text, code)}
    for name, layers, python in (("layer", 3, False), ("python", 2, True)):
        _branch(repo, name, layers, python)
        out[name] = _run(repo, stored_file(repo))
    return out


def _bench(doc: dict[str, Any], test: str) -> dict[str, Any]:
    return next(b for b in doc["benchmarks"] if b["nodeid"].endswith(f"::{test}"))


def _flops(layers: int) -> float:
    """The encoder's FLOPs per call, counted here with FlopCounterMode (the oracle)."""
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=100,
        max_position_embeddings=64,
    )
    model = BertModel(cfg).eval()
    ids = torch.arange(16).reshape(1, 16) % 90 + 5
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids)
    return float(counter.get_total_flops())


@pytest.mark.slow
def test_every_benchmark_is_profiled_and_stored(runs: Any, validate: Any) -> None:
    doc, _, _ = runs["save"]
    validate(doc)
    for test in ("test_encoder", "test_wrapped", "test_generate", "test_onnx"):
        work = _bench(doc, test)["work"]
        assert work is not None and work["op_calls"] > 0, test
        assert work["varying"] == [], test  # every profiled call did the same
        assert 0 < work["cost_s"] < 30, test
    encoder = _bench(doc, "test_encoder")["work"]
    assert encoder["flops"] == _flops(2)
    assert encoder["ops"]["aten::addmm"] == 2 * 6 + 1  # 6 linears a layer, the pooler
    assert _bench(doc, "test_onnx")["work"]["source"] == "onnx graph"


@pytest.mark.slow
def test_nothing_changed_shows_no_work_diff(runs: Any) -> None:
    doc, text, _ = runs["python"]  # only test_wrapped's Python changed there
    for b in doc["benchmarks"]:
        work = b["comparison"]["work"]
        assert work["same"] and work["change"] == 0.0 and work["ops"] == [], b["nodeid"]
        assert b["extra"]["work_gate"]["passed"] is True, b["nodeid"]
    # max_work_increase never fails identical work, and nothing is flagged as more work
    assert "More work per call" not in text and "MORE WORK" not in text


@pytest.mark.slow
def test_one_layer_more_shows_the_exact_flops_and_operators(runs: Any) -> None:
    doc, _, _ = runs["layer"]
    work = _bench(doc, "test_encoder")["comparison"]["work"]
    assert work["flops"] == [_flops(2), _flops(3)]
    assert work["change"] == pytest.approx(_flops(3) / _flops(2) - 1, rel=1e-12)
    assert ["aten::addmm", 13.0, 19.0] in work["ops"]
    assert not work["same"]
    # ONNX Runtime: the graph's nodes; the generation: every forward pass's FLOPs
    onnx = _bench(doc, "test_onnx")["comparison"]["work"]
    assert onnx["measure"] == "graph nodes" and onnx["change"] > 0
    assert any(name == "MatMul" for name, *_ in onnx["ops"])
    assert _bench(doc, "test_generate")["comparison"]["work"]["change"] > 0.05


@pytest.mark.slow
def test_the_markdown_of_a_real_change_carries_the_work_diff(runs: Any) -> None:
    doc, text, _ = runs["layer"]
    change = _bench(doc, "test_encoder")["comparison"]["work"]["change"]
    # the table's row (its time verdict varies on a noisy machine: when undecided, the
    # benchmark is also named in the callout above the table)
    row = next(
        line
        for line in text.splitlines()
        if line.startswith("|") and "`test_suite.py::test_encoder`" in line
    )
    assert f"{change:+.1%} FLOPs" in row  # the table's work column
    # the undecided one is flagged above the table, with the diff
    callout = text.split("**More work per call, time not a regression:**", 1)[1]
    line = next(line for line in callout.splitlines() if "test_undecided" in line)
    assert "fails `max_work_increase`" in line
    assert re.search(r"FLOPs \+\d+\.\d% \(\S+ \S+ -> \S+ \S+\)", line)
    assert "aten::addmm 13 -> 19" in line


@pytest.mark.slow
def test_more_work_fails_where_the_time_is_undecided(runs: Any) -> None:
    doc, text, code = runs["layer"]
    assert code == 1
    undecided = _bench(doc, "test_undecided")
    assert undecided["comparison"]["verdict"] == "inconclusive"
    assert undecided["extra"]["work_gate"]["passed"] is False
    assert "MORE WORK in test_suite.py::test_undecided" in text


@pytest.mark.slow
def test_python_work_around_the_model_is_the_same_work_slower(runs: Any) -> None:
    from pytest_infperf.report.messages import SAME_WORK

    doc, text, _ = runs["python"]
    wrapped = _bench(doc, "test_wrapped")["comparison"]
    assert wrapped["work"]["same"] and wrapped["work"]["change"] == 0.0
    assert wrapped["verdict"] == "regression"  # 4 ms of busy-wait around a ~1 ms model
    assert SAME_WORK in text
    # the model the others time did not change
    assert all(
        b["comparison"]["work"]["same"] for b in doc["benchmarks"] if "wrapped" not in b["nodeid"]
    )


@pytest.mark.slow
def test_a_baseline_without_a_profile_still_compares(runs: Any, tmp_path: Path) -> None:
    """A baseline saved before the profiled pass existed: no work diff, the verdict as
    before (infperf compare on the two documents, with ``work`` dropped from the base)."""
    from .conftest import infperf

    base, _, _ = runs["save"]
    head, _, _ = runs["layer"]
    for b in base["benchmarks"]:
        b.pop("work")
    (tmp_path / "a.json").write_text(__import__("json").dumps(base))
    (tmp_path / "b.json").write_text(__import__("json").dumps(head))
    out = infperf(tmp_path, "compare", "a.json", "b.json")
    assert "Traceback" not in out.stderr, out.stderr
    assert "work per call" not in out.stdout
    assert "test_encoder" in out.stdout
