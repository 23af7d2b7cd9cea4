"""Does ONNX Runtime's thread spinning disturb an interleaved comparison?

    python benchmarks/ort_spin.py [--reps 3]

ORT's intra-op threads spin-wait after each run by default. In an interleaved run the
other process's next block starts right then, so the spinning threads may steal its CPU:
the first block after a switch pays for it. A temporary git repository holds an ONNX MLP
(6 x MatMul 256 + Relu, built with onnx.helper, batch 1 and 16) at ORT's default threading;
``--perf-ab`` compares identical code (A/A) with ``session.intra_op.allow_spinning`` on
(ORT's default) and off, alternately. Prints, per setting, the median switch penalty (the
log cost of the block right after the other process, from each ABBA quad), the sd of the
quad contrasts, and the verdicts.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
from pathlib import Path

from decision_quality import git, pytest_run

SUITE = """
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

SPIN = os.environ.get("INFPERF_SPIN", "1")


def _model(path):
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(6):
        w = rng.standard_normal((256, 256)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [
            helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]),
            helper.make_node("Relu", [f"m{i}"], [f"r{i}"]),
        ]
        prev = f"r{i}"
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [None, 256]) for n in ("x", prev)]
    graph = helper.make_graph(nodes, "mlp", [io[0]], [io[1]], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


@pytest.mark.parametrize("batch", [1, 16])
def test_ort(infer_bench, tmp_path, batch):
    _model(str(tmp_path / "m.onnx"))
    so = ort.SessionOptions()
    so.add_session_config_entry("session.intra_op.allow_spinning", SPIN)
    sess = ort.InferenceSession(str(tmp_path / "m.onnx"), so, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((batch, 256)).astype(np.float32)
    infer_bench(lambda: sess.run(None, {"x": x}), intra_op_threads=None)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    penalties: dict[str, list[float]] = {"1": [], "0": []}
    quad_sd: dict[str, list[float]] = {"1": [], "0": []}
    verdicts: dict[str, list[str]] = {"1": [], "0": []}
    import os

    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        (repo / "test_ort.py").write_text(SUITE)
        (repo / "pytest.ini").write_text("[pytest]\n")
        (repo / ".gitignore").write_text("out.json\n__pycache__/\n")
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", ".")
        git(repo, "commit", "-qm", "suite")
        git(repo, "checkout", "-q", "-b", "aa")
        git(repo, "commit", "-q", "--allow-empty", "-m", "A/A")
        for _ in range(args.reps):
            for spin in ("1", "0"):
                os.environ["INFPERF_SPIN"] = spin
                doc, _, _ = pytest_run(repo, "--perf-ab=main")
                for b in (doc or {}).get("benchmarks", []):
                    verdicts[spin].append(b["comparison"]["verdict"])
                    for pair in b["extra"]["ab"]["pairs"]:
                        penalties[spin].append(pair["switch_penalty"]["median"])
                        quad_sd[spin].append(statistics.stdev(pair["quads"]["median"]))
    for spin, label in (("1", "spinning on (ORT default)"), ("0", "spinning off")):
        if not penalties[spin]:
            continue
        pen = statistics.median(penalties[spin])
        print(
            f"{label}: switch penalty median {math.expm1(pen):+.1%} over "
            f"{len(penalties[spin])} process pairs, quad contrast sd median "
            f"{statistics.median(quad_sd[spin]):.3f}, verdicts "
            f"{ {v: verdicts[spin].count(v) for v in sorted(set(verdicts[spin]))} }"
        )


if __name__ == "__main__":
    main()
