"""Why ONNX Runtime at its default threading is so noisy when interleaved (issue 47).

    python benchmarks/ort_alternation.py [--pairs 4] [--quads 16] [--variants fresh,main,...]

On the 2-core VM the second suite's ResNet in ONNX Runtime at default threading (two
intra-op threads, the pool's one pinned by ORT to CPU 1) ended its A/A comparisons
inconclusive after six process pairs, its quad contrasts spreading by 10-30%. This script
takes the plugin out of the loop: two fresh processes of identical code alternate ABBA
blocks (3 samples of 40 runs, as the plugin's blocks are), driven through pipes, per
variant:

- ``fresh``: each block on a new thread, as the plugin times it (``on_fresh_stack``);
- ``main``: each block on the process's main thread;
- ``nospin``: ``session.intra_op.allow_spinning`` off (the idle side's threads sleep at once);
- ``stop``: the idle process held with SIGSTOP while the other times its block;
- ``quiet``: each block starts once the other process's threads stopped using a CPU;
- ``pin0``: the timing thread on CPU 0, the one ORT leaves for its caller;
- ``warm``: each block starts with as many untimed runs as a sample has;
- ``alone``: both "sides" are the first process (the second one idles).

Variants combine with ``-`` (``fresh-nospin``). Prints, per variant, the median sd of the
quad contrasts within a pair and each pair's mean contrast (log units, as percentages).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

CALLS, COUNT = 40, 3
VARIANTS = (
    "fresh",
    "fresh-alone",
    "main",
    "fresh-nospin",
    "fresh-stop",
    "fresh-quiet",
    "fresh-pin0",
)


def export(path: Path) -> None:
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.ResNetConfig(
        depths=[1, 1, 2, 1], hidden_sizes=[32, 64, 128, 256], embedding_size=32
    )
    model = transformers.ResNetModel(cfg).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (torch.randn(1, 3, 96, 96),),
            str(path),
            dynamo=False,
            input_names=["pixel_values"],
        )


def child(path: str, variant: str) -> None:
    """Serve blocks: one line in, one block's median seconds per run out."""
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    if "nospin" in variant:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = {"pixel_values": np.random.default_rng(0).standard_normal((1, 3, 96, 96), np.float32)}
    for _ in range(50):
        session.run(None, feeds)

    def block(out: list[float]) -> None:
        if "pin0" in variant:
            os.sched_setaffinity(0, {0})
        if "warm" in variant:  # untimed runs first: what a switch left cold warms up
            for _ in range(CALLS):
                session.run(None, feeds)
        values = []
        for _ in range(COUNT):
            t0 = time.perf_counter()
            for _ in range(CALLS):
                session.run(None, feeds)
            values.append((time.perf_counter() - t0) / CALLS)
        out.append(statistics.median(values))

    print("ready", flush=True)
    for _ in sys.stdin:
        out: list[float] = []
        if "fresh" in variant:
            thread = threading.Thread(target=block, args=(out,))
            thread.start()
            thread.join()
        else:
            block(out)
        print(out[0], flush=True)


def _cpu_ns(pid: int) -> int:
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except OSError:
            pass
    return total


def _quiet(pid: int) -> None:
    """Wait (50 ms at most) until ``pid`` used under 50 us of CPU in a millisecond."""
    start, last = time.perf_counter(), _cpu_ns(pid)
    while time.perf_counter() - start < 0.05:
        time.sleep(0.001)
        now = _cpu_ns(pid)
        if now - last < 50_000:
            return
        last = now


def pair(path: str, variant: str, quads: int) -> list[float]:
    """One process pair's quad contrasts (log head/base, head = the second process)."""
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", path, variant],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    stop = "stop" in variant
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            if stop:
                os.kill(proc.pid, signal.SIGSTOP)

        def block(i: int) -> float:
            proc = procs[0 if "alone" in variant else i]
            assert proc.stdin is not None and proc.stdout is not None
            if stop:
                os.kill(proc.pid, signal.SIGCONT)
            proc.stdin.write("go\n")
            proc.stdin.flush()
            value = math.log(float(proc.stdout.readline()))
            if stop:
                os.kill(proc.pid, signal.SIGSTOP)
            if "quiet" in variant:
                _quiet(proc.pid)
            return value

        contrasts = []
        for _ in range(quads):
            a1, b1, b2, a2 = block(0), block(1), block(1), block(0)
            contrasts.append((b1 + b2 - a1 - a2) / 2)
        return contrasts
    finally:
        for proc in procs:
            if stop:
                os.kill(proc.pid, signal.SIGCONT)
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--quads", type=int, default=16)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    variants = args.variants.split(",")
    found: dict[str, list[list[float]]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "resnet.onnx"
        export(path)
        for _ in range(args.pairs):
            for variant in random.sample(variants, len(variants)):
                found[variant].append(pair(str(path), variant, args.quads))
    for variant, pairs in found.items():
        sds = [statistics.stdev(c) for c in pairs]
        means = [statistics.fmean(c) for c in pairs]
        rms = math.sqrt(statistics.fmean(m * m for m in means))
        print(
            f"{variant:14s} quad contrasts' sd, median {statistics.median(sds):.1%}; "
            f"pair means {', '.join(f'{m:+.1%}' for m in means)} (rms {rms:.1%})"
        )


if __name__ == "__main__":
    main()
