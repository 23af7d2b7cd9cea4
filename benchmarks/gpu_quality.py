"""The gate on a GPU: A/A and one layer more, stored and interleaved, quiet and beside a
GPU tenant, through the real plugin in real git repositories. Run it first on any GPU
machine.

    python benchmarks/gpu_quality.py [--reps 3] [--modes compare,ab]
        [--scenarios A/A,+1layer] [--tenant] [--device cuda|cpu] [--small]
        [-k EXPR] [--pytest-args='ARGS'] [--log-dir DIR] [--deadline SECONDS]

The suite (random weights, built from configs: offline):

- ``bert_b1``: BERT-base, batch 1, sequence 128, fp32, eager (host-bound on an H100);
- ``bert_b32_fp16``: BERT-base, batch 32, fp16, eager;
- ``bert_b32_graph``: the same in a CUDA graph (``cuda_graph=True``);
- ``resnet50_b16``: ResNet-50 (transformers' ResNet, depths 3-4-6-3), batch 16, 224x224;
- ``gpt2_generate``: GPT-2 (12 layers) ``generate()`` of 24 new tokens after 64;
- ``bert_ort``: BERT-base exported to ONNX here, ONNX Runtime's CUDA provider, IOBinding
  (skipped where onnxruntime-gpu is not installed).

"+1layer" adds one encoder/decoder layer (one block to ResNet's third stage): about +8%
of the work. Per repetition the baseline is saved on ``main``, then each scenario's branch
is compared (``--perf-compare=main`` and ``--perf-ab=main``). ``--tenant`` starts a second
process doing matmuls on the same GPU for the first half of each comparing run (a GPU
runner's noisy neighbour), and stops it.

Prints per scenario and mode: the verdicts (and those of the latency and device-time parts),
how many were caught and whether the device or the host moved, the GPU blocks flagged
(``other_process``, throttling) and set aside, the profiled pass's cost, and run times
against a plain run. ``--device cpu --small`` runs the same suite, tiny, on the CPU: a
check of the script and the plumbing, not of the GPU figures.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from decision_quality import commit_repo, git, pytest_run

SUITE = """
import os
from pathlib import Path

import pytest
import torch

from pytest_infperf import hf

EXTRA = int((Path(__file__).parent / "layers.txt").read_text())
DEVICE = os.environ.get("GQ_DEVICE", "cuda")
SMALL = os.environ.get("GQ_SMALL") == "1"
HIDDEN, LAYERS, SEQ = (64, 2, 32) if SMALL else (768, 12, 128)


def _bert(dtype):
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    heads = 4 if SMALL else 12
    cfg = BertConfig(hidden_size=HIDDEN, num_hidden_layers=LAYERS + EXTRA,
                     num_attention_heads=heads, intermediate_size=4 * HIDDEN)
    return BertModel(cfg).eval().to(DEVICE, dtype)


def _ids(batch):
    return {"input_ids": torch.randint(0, 1000, (batch, SEQ), device=DEVICE)}


def test_bert_b1(infer_bench):
    infer_bench(_bert(torch.float32), _ids(1))


def test_bert_b32_fp16(infer_bench):
    dtype = torch.float16 if DEVICE == "cuda" else torch.float32
    infer_bench(_bert(dtype), _ids(4 if SMALL else 32))


def test_bert_b32_graph(infer_bench):
    if DEVICE != "cuda":
        pytest.skip("CUDA graphs need a GPU")
    infer_bench(_bert(torch.float16), _ids(32), cuda_graph=True)


def test_resnet50_b16(infer_bench):
    from transformers import ResNetConfig, ResNetModel

    torch.manual_seed(0)
    depths = [1, 1, 1 + EXTRA, 1] if SMALL else [3, 4, 6 + EXTRA, 3]
    cfg = ResNetConfig(depths=depths, layer_type="bottleneck",
                       hidden_sizes=[64, 128, 256, 512] if SMALL else [256, 512, 1024, 2048])
    model = ResNetModel(cfg).eval().to(DEVICE)
    side = 64 if SMALL else 224
    infer_bench(model, (torch.randn(2 if SMALL else 16, 3, side, side, device=DEVICE),))


def test_gpt2_generate(infer_bench):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_embd=HIDDEN, n_layer=LAYERS + EXTRA, n_head=4 if SMALL else 12)
    model = GPT2LMHeadModel(cfg).eval().to(DEVICE)
    infer_bench.generate(model, hf.prompt(model, 1, 64), max_new_tokens=24)


def test_bert_ort(infer_bench, tmp_path_factory):
    ort = pytest.importorskip("onnxruntime")
    provider = "CUDAExecutionProvider" if DEVICE == "cuda" else "CPUExecutionProvider"
    if provider not in ort.get_available_providers():
        pytest.skip("onnxruntime without CUDA (install onnxruntime-gpu)")
    model = _bert(torch.float32).cpu()
    path = hf.export_onnx(model, tmp_path_factory.mktemp("onnx") / "bert.onnx")
    ids = _ids(1)["input_ids"].cpu().numpy()
    feeds = {"input_ids": ids, "attention_mask": ids * 0 + 1, "token_type_ids": ids * 0}
    names = hf.input_names(model)
    infer_bench(str(path), {k: v for k, v in feeds.items() if k in names}, providers=[provider])
"""

SCENARIOS = {"A/A": 0, "+1layer": 1}
MODES = {"compare": ["--perf-compare=main"], "ab": ["--perf-ab=main"]}
ENV_EXTRA = {"GQ_DEVICE": "cuda", "GQ_SMALL": "0"}


class Tenant:
    """Matmuls on the GPU in another process, for the first ``seconds`` of a run."""

    def __init__(self, on: bool, seconds: float) -> None:
        self.on, self.seconds = on, seconds
        self.proc: subprocess.Popen[bytes] | None = None
        self.timer: threading.Timer | None = None

    def __enter__(self) -> Tenant:
        if self.on:
            code = (
                "import torch\na = torch.randn(4096, 4096, device='cuda', dtype=torch.float16)\n"
                "while True:\n    a @ a\n    torch.cuda.synchronize()\n"
            )
            self.proc = subprocess.Popen([sys.executable, "-c", code])
            self.timer = threading.Timer(self.seconds, self._stop)
            self.timer.start()
        return self

    def _stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __exit__(self, *exc: object) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self._stop()


def _row(doc: dict[str, Any] | None) -> list[dict[str, Any]]:
    out = []
    for b in (doc or {}).get("benchmarks") or []:
        c = b.get("comparison") or {}
        parts = c.get("parts") or {}
        blocks = c.get("gpu_blocks") or {}
        stored = c.get("stored_pass") or {}
        out.append(
            {
                "name": b["nodeid"].split("::")[-1],
                "verdict": c.get("verdict"),
                "ratio": c.get("ratio"),
                "latency": (parts.get("median") or {}).get("verdict"),
                "device": (parts.get("gpu_time") or {}).get("verdict"),
                "device_ratio": (parts.get("gpu_time") or {}).get("ratio"),
                "flagged": sum((blocks.get("flagged") or {}).values()),
                "set_aside": sum((blocks.get("set_aside") or {}).values()),
                "others": blocks.get("other_processes") or [],
                "profile_s": (b.get("work") or {}).get("cost_s"),
                "work": (c.get("work") or {}).get("change"),
                "pairs": c.get("process_pairs"),
                # Why it was interleaved, and what the stored pass said (the H200's first
                # run: the GPU reference withheld every stored verdict it guarded).
                "settled": c.get("settled_because"),
                "stored": (stored.get("verdict"), stored.get("reason")),
                "speed": c.get("machine_speed") or stored.get("machine_speed"),
            }
        )
    return out


def _summary(
    rows: dict[tuple[str, str], list[dict[str, Any]]],
    times: dict[tuple[str, str], list[float]],
    plain: list[float],
    args: argparse.Namespace,
) -> None:
    base = statistics.median(plain) if plain else float("nan")
    print(f"\nplain run: median {base:.0f} s; device {args.device}; tenant {args.tenant}")
    for (label, mode), found in sorted(rows.items()):
        verdicts = collections.Counter(r["verdict"] for r in found)
        moved = collections.Counter(
            "device"
            if r["device"] == "regression"
            else "host"
            if r["latency"] == "regression"
            else "-"
            for r in found
            if r["verdict"] == "regression"
        )
        flagged = sum(r["flagged"] for r in found)
        aside = sum(r["set_aside"] for r in found)
        took = statistics.median(times[(label, mode)])
        print(
            f"\n{label} {mode}: {dict(verdicts)}; regressions moved by {dict(moved)}; "
            f"GPU blocks flagged {flagged}, set aside {aside}; run {took:.0f} s "
            f"({took / base:.2f}x plain)"
        )
        for r in found:
            _print_row(r)


def _print_row(r: dict[str, Any]) -> None:
    print(
        f"  {r['name']:<18} {r['verdict']!s:<14} ratio {r['ratio'] or 0:.3f} "
        f"latency {r['latency']!s:<13} device {r['device']!s:<13} "
        f"(x{r['device_ratio'] or 0:.3f}) work {r['work']} pairs {r['pairs']} "
        f"flagged {r['flagged']} others {r['others'][:3]} profile {r['profile_s']} "
        f"settled {r['settled']} stored {r['stored']} speed {r['speed']}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--modes", default="compare,ab")
    ap.add_argument("--scenarios", default="A/A,+1layer")
    ap.add_argument("--tenant", action="store_true")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--small", action="store_true")
    ap.add_argument("-k", default="", help="pytest -k expression for the suite")
    ap.add_argument(
        "--pytest-args",
        default="",
        help="more pytest arguments for every run, given with '=' "
        "(--pytest-args='--perf-profile=off': the pass's after-effects, if any)",
    )
    ap.add_argument(
        "--log-dir", type=Path, default=None, help="keep every run's output and JSON here"
    )
    ap.add_argument(
        "--deadline",
        type=float,
        default=0.0,
        help="seconds: start no run after this (a lent machine's time is short); 0 = none",
    )
    args = ap.parse_args()
    ENV_EXTRA.update(GQ_DEVICE=args.device, GQ_SMALL="1" if args.small else "0")
    import decision_quality

    decision_quality.ENV.update(ENV_EXTRA)
    extra = (["-k", args.k] if args.k else []) + args.pytest_args.split()
    rows: dict[tuple[str, str], list[dict[str, Any]]] = collections.defaultdict(list)
    times: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    plain: list[float] = []
    started = time.time()
    n = 0

    def run(repo: Path, *run_args: str) -> tuple[dict[str, Any] | None, int, float]:
        nonlocal n
        n += 1
        log = args.log_dir / f"run{n:02d}" if args.log_dir else None
        doc, code, took = pytest_run(repo, *run_args, *extra, log=log)
        if code not in (0, 1) or doc is None:
            tail = log.with_suffix(".log").read_text()[-1500:] if log else ""
            print(f"  run {n} ({' '.join(run_args)}): exit {code}\n{tail}", flush=True)
        return doc, code, took

    def late() -> bool:
        return bool(args.deadline) and time.time() - started > args.deadline

    if args.log_dir:
        args.log_dir.mkdir(parents=True, exist_ok=True)
    for rep in range(args.reps):
        if late():
            break
        with tempfile.TemporaryDirectory(prefix="gq-") as tmp:
            repo = Path(tmp) / "repo"
            repo.mkdir()
            (repo / "test_gpu_suite.py").write_text(SUITE)
            (repo / "layers.txt").write_text("0")
            (repo / "pytest.ini").write_text("[pytest]\n")
            commit_repo(repo, "suite")
            _, code, took = run(repo)
            plain.append(took)
            _, code, _ = run(repo, "--perf-save")
            print(f"rep {rep + 1}: plain {took:.0f} s; baseline saved (exit {code})", flush=True)
            # Mode by mode, each scenario in turn: a deadline cuts a mode, not a scenario.
            for mode in args.modes.split(","):
                for label in args.scenarios.split(","):
                    if late():
                        break
                    git(repo, "checkout", "-q", "-B", f"s{SCENARIOS[label]}", "main")
                    (repo / "layers.txt").write_text(str(SCENARIOS[label]))
                    git(repo, "commit", "-q", "--allow-empty", "-am", label)
                    with Tenant(args.tenant, seconds=max(10.0, statistics.median(plain))):
                        doc, code, took = run(repo, *MODES[mode])
                    rows[(label, mode)] += _row(doc)
                    times[(label, mode)].append(took)
                    print(f"  {label} {mode}: exit {code}, {took:.0f} s", flush=True)
                    for r in _row(doc):
                        _print_row(r)
    _summary(rows, times, plain, args)


if __name__ == "__main__":
    started = time.time()
    main()
    print(f"\n(took {time.time() - started:.0f} s)")
