"""The GPU runner's own noise, on a machine with an NVIDIA GPU (skips without one).

    python benchmarks/gpu_noise.py [--reps 2] [--json OUT.json]

1. The cost of the per-block NVML readings (clock-event reasons, SM clock, the power and
   thermal violation counters, the compute processes) against one interleaved block of
   BERT-base at batch 1, sequence 128 (torch, CUDA).
2. A/A interleaved runs of that benchmark through the real plugin (``pytest --perf-ab=HEAD``
   in a temporary git repository): quiet, and with a *tenant*, a second process running
   bf16 matrix products on the same GPU, started halfway through the run and kept until
   its end. Prints each run's verdict, its blocks (per side: taken, flagged, set aside),
   why they were flagged, and the run's time.

What it should show (issue 28, docs/BACKENDS.md "GPU noise"): with the tenant, never a
regression: the blocks beside it are set aside, and the verdict is decided from the others
or withheld (``gpu-throttled``) when more than a quarter of a side's blocks were; quiet, a
decided verdict; the readings under 1% of a block.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from decision_quality import git

#: The comparing run (the environment as it is: no thread limits, unlike the CPU scripts).
AB_ARGS = ("-q", "-p", "no:cacheprovider", "-p", "no:benchmark", "--perf-ab=HEAD")

TEST = """
def test_bert_base_b1(infer_bench, infperf_hf):
    model = infperf_hf.model("bert-base-uncased")
    infer_bench(model, infperf_hf.inputs("bert-base-uncased", 1, 128), device="cuda")
"""

TENANT = (
    "import torch\n"
    "a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)\n"
    "print('up', flush=True)\n"
    "while True:\n"
    "    a @ a\n"
)


def read_cost() -> dict[str, float]:
    """Median cost of one reading, and of one interleaved block of BERT-base b1."""
    import torch
    from transformers import BertConfig, BertModel

    from pytest_infperf.ab.interleave import BLOCK_S, block_count
    from pytest_infperf.measure import gpu, tenancy

    watch = tenancy.BlockWatch(0, set(), "exclude")
    if not watch.active:
        raise SystemExit("NVML did not answer (pip install nvidia-ml-py)")
    watch.start()
    for i in range(500):
        watch.read(processes=i % 4 == 3)  # as in a run: processes at each quad's end
    read_s = statistics.fmean(watch.tally.read_ns) / 1e9  # per block, amortised
    # Each NVML call alone, the violation counters included (read per region, not per
    # block: they are why a per-block reading leaves them out).
    nv, h = watch.nv, watch.handle
    calls = {
        "clock_event_reasons": lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(h),
        "sm_clock": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
        "compute_processes": lambda: nv.nvmlDeviceGetComputeRunningProcesses(h),
        "process_utilisation": lambda: gpu._try(nv.nvmlDeviceGetProcessUtilization, h, 0),
        "violation_power": lambda: nv.nvmlDeviceGetViolationStatus(h, nv.NVML_PERF_POLICY_POWER),
        "violation_thermal": lambda: nv.nvmlDeviceGetViolationStatus(
            h, nv.NVML_PERF_POLICY_THERMAL
        ),
    }
    each_us = {}
    for name, call in calls.items():
        spent = []
        for _ in range(200):
            t0 = time.perf_counter_ns()
            call()
            spent.append(time.perf_counter_ns() - t0)
        each_us[name] = round(statistics.median(spent) / 1e3, 1)
    model = BertModel(BertConfig()).cuda().eval()
    ids = torch.randint(0, 30000, (1, 128), device="cuda")
    times = []
    with torch.inference_mode():
        for i in range(230):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(ids)
            torch.cuda.synchronize()
            if i >= 30:
                times.append(time.perf_counter() - t0)
    per_call = statistics.median(times)
    block_s = per_call * block_count(per_call)
    return {
        "read_us": read_s * 1e6,
        "bert_b1_ms": per_call * 1e3,
        "block_ms": block_s * 1e3,
        "block_target_ms": BLOCK_S * 1e3,
        "read_share_of_block": read_s / block_s,
        "each_call_us": each_us,
    }


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "bench@example.com")
    git(repo, "config", "user.name", "bench")
    (repo / "test_bert.py").write_text(TEST)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "bert")
    return repo


def tenant_after(delay: float, stop: threading.Event, seen: list[int]) -> None:
    if stop.wait(delay):
        return
    proc = subprocess.Popen([sys.executable, "-c", TENANT], stdout=subprocess.PIPE, text=True)
    seen.append(proc.pid)
    stop.wait()
    proc.kill()
    proc.wait()


def ab_run(repo: Path, tenant_at: float | None) -> dict[str, Any]:
    stop, seen = threading.Event(), []  # type: ignore[var-annotated]
    thread = None
    if tenant_at is not None:
        thread = threading.Thread(target=tenant_after, args=(tenant_at, stop, seen))
        thread.start()
    out = repo / "out.json"
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", *AB_ARGS, f"--perf-json={out}"]
    code = subprocess.run(cmd, cwd=repo, capture_output=True, check=False).returncode
    seconds = time.perf_counter() - t0
    doc = json.loads(out.read_text()) if out.exists() else None
    stop.set()
    if thread is not None:
        thread.join()
    if doc is None:
        raise SystemExit(f"pytest exited {code} without results")
    bench = doc["benchmarks"][0]
    c = bench.get("comparison") or {}
    return {
        "exit": code,
        "seconds": round(seconds, 1),
        "tenant": bool(seen),
        "verdict": c.get("verdict"),
        "reason": c.get("reason"),
        "ratio": c.get("ratio"),
        "pairs": c.get("process_pairs"),
        "gpu_blocks": c.get("gpu_blocks"),
        "note": c.get("note"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument(
        "--only", choices=("quiet", "tenant"), help="run one scenario (default: both)"
    )
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("torch is not installed: nothing to measure")
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure")
        return 0
    figures: dict[str, Any] = {"cost": read_cost(), "runs": []}
    cost = figures["cost"]
    print(
        f"per-block reading: {cost['read_us']:.1f} us on average; BERT-base b1 "
        f"{cost['bert_b1_ms']:.2f} ms a call, a block {cost['block_ms']:.1f} ms: the reading "
        f"is {cost['read_share_of_block']:.3%} of a block"
    )
    print(f"each NVML call, median us: {cost['each_call_us']}")
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp))
        for rep in range(args.reps):
            runs = []
            quiet_s = 90.0  # a quiet run's length when only the tenant's runs (H100)
            if args.only != "tenant":
                runs.append(("quiet", ab_run(repo, None)))
                quiet_s = runs[-1][1]["seconds"]
            if args.only != "quiet":
                # The tenant starts halfway through a run as long as the quiet one.
                runs.append(("tenant", ab_run(repo, quiet_s / 2)))
            for label, run in runs:
                run["scenario"], run["rep"] = label, rep + 1
                figures["runs"].append(run)
                blocks = run["gpu_blocks"] or {}
                ratio = run["ratio"]
                print(
                    f"A/A {label:6} #{rep + 1}: {run['verdict']}"
                    + (f" ({run['reason']})" if run["reason"] else "")
                    + (f" ratio {ratio:.3f}" if ratio else "")
                    + f", {run['pairs']} pairs, {run['seconds']} s, exit {run['exit']}; "
                    f"blocks {blocks.get('blocks')}, flagged {blocks.get('flagged')}, "
                    f"set aside {blocks.get('set_aside')}, reasons {blocks.get('reasons')}, "
                    f"SM clock {blocks.get('sm_clock_mhz')}, "
                    f"readings {blocks.get('read_us_per_block')} us a block"
                )
                if blocks.get("processes_at_start"):
                    print(f"    idle at start: {blocks['processes_at_start']}")
                if run["note"]:
                    print(f"    note: {run['note']}")
    regressions = sum(r["verdict"] == "regression" for r in figures["runs"])
    print(f"\nregressions among {len(figures['runs'])} A/A runs: {regressions}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
