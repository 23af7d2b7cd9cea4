"""How long a side's intra-op threads keep a CPU busy after its block of calls ends.

    python benchmarks/idle_spin.py [--blocks 40] [--threads 0] [--rest 0.3]
    python benchmarks/idle_spin.py --interleave [--pairs 8] [--quads 40] [--threads 0]

In an interleaved run, the side that just timed its block goes idle while the other side
times its own. If the idle side's intra-op threads spin-wait for more work (ONNX Runtime's
``allow_spinning``, on by default; OpenMP's spin before it sleeps), they take a core from
the timed side for as long as they spin. This measures that directly, on the real
libraries at the threading users run them with: each model (an ONNX Runtime MLP and a
torch MLP, at the libraries' default thread counts unless ``--threads``) runs a 25 ms block
of calls, as an interleaved block does; then the process's CPU time (all its threads) is
read as it idles, 0.5 to 250 ms after the block's last call returned (each model in a
process of its own, which imports only its library; between blocks the process rests
``--rest`` seconds, past Intel OpenMP's 200 ms ``KMP_BLOCKTIME``, so that every block starts
with its threads parked). CPU time the process
spends after its last call is its threads spinning: what a gap before the next side's
block would have to wait out. Prints, per model, the median CPU milliseconds burnt in each
window after the block (and the block's own CPU time per wall second, its threads' load).

``--interleave`` measures what that spinning does to an interleaving: identical code on
both sides (two processes of the same model, A/A), blocks of 25 ms in ABBA quads, fresh
process pairs, the variants in turn pair by pair: ``none`` starts each block as soon as the
other side's block returned (as the plugin does); ``park`` first waits (at most 100 ms)
until none of the other process's threads runs (state R in ``/proc/PID/task/TID/stat``).
Prints per variant and model the sd of the quad contrasts within a pair (log), the sd of
the pairs' mean log-ratios (between processes, the unit the verdict replicates), the switch
penalty (first block after a switch against the block before, log), and the seconds a quad
took.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The windows after a block, in ms: the CPU burnt from the block's end to each.
WINDOWS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 250.0)
BLOCK_S = 0.025


def _torch_model(threads: int, path: Path) -> Callable[[], Any]:
    import torch

    if threads:
        torch.set_num_threads(threads)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)
    ).eval()
    x = torch.randn(32, 512)

    def call() -> Any:
        with torch.inference_mode():
            return model(x)

    return call


def _export(path: Path) -> None:
    """The ONNX file, written by a process of its own (torch's threads stay out of the
    ONNX Runtime process's CPU time)."""
    import torch

    model = torch.nn.Sequential(
        torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)
    ).eval()
    torch.onnx.export(model, (torch.randn(32, 512),), str(path), dynamo=False)


def _ort_model(threads: int, path: Path) -> Callable[[], Any]:
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: np.random.rand(32, 512).astype(np.float32)}
    return lambda: session.run(None, feed)


def measure(
    call: Callable[[], Any], blocks: int, rest: float
) -> tuple[list[list[float]], list[float]]:
    """Per block: the CPU ms burnt by each window's end after the block; and the block's
    CPU seconds per wall second."""
    for _ in range(20):
        call()
    after: list[list[float]] = []
    load: list[float] = []
    for _ in range(blocks):
        time.sleep(rest)  # every thread parked, as a side that waited out the other's block
        # Every thread's own schedstat, in ns: process_time() moved in 4 ms ticks here.
        cpu0, wall0 = _cpu_ns(os.getpid()), time.perf_counter()
        while time.perf_counter() - wall0 < BLOCK_S:
            call()
        cpu1, wall1 = _cpu_ns(os.getpid()), time.perf_counter()
        load.append((cpu1 - cpu0) / 1e9 / (wall1 - wall0))
        row = []
        for ms in WINDOWS:
            # Sleep to the window's end, then read: the reading thread's own CPU is nil.
            time.sleep(max(0.0, wall1 + ms / 1e3 - time.perf_counter()))
            row.append((_cpu_ns(os.getpid()) - cpu1) / 1e6)
        after.append(row)
    return after, load


MODELS = {"onnxruntime": _ort_model, "torch": _torch_model}


def _child(name: str, threads: int, blocks: int, rest: float, path: str) -> None:
    """One model's figures, printed as a line of JSON by its own process."""
    after, load = measure(MODELS[name](threads, Path(path)), blocks, rest)
    print(json.dumps({"after": after, "load": load}))


def _cpu_ns(pid: int) -> int:
    """Every thread's CPU time in the process, in ns (schedstat: exact, not in ticks)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended
    return total


def _running(pid: int) -> int:
    """How many of the process's threads are running or runnable now (state R). A thread's
    state is current; its schedstat CPU time is brought up to date only at a scheduler
    tick (4 ms here) while it runs, so a spinning thread can look idle over a short window."""
    n = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                n += f.read().rsplit(")", 1)[1].split()[0] == "R"
        except (OSError, IndexError):
            continue  # a thread that ended
    return n


def park(pid: int, limit_s: float = 0.1, poll_s: float = 0.0005) -> float:
    """Wait until none of ``pid``'s threads runs (its spinning threads parked), at most
    ``limit_s``; the seconds waited."""
    start = time.perf_counter()
    while _running(pid) and time.perf_counter() - start < limit_s:
        time.sleep(poll_s)
    return time.perf_counter() - start


def _side(name: str, threads: int, path: str) -> None:
    """A worker: takes "n" on stdin, times a block of about 25 ms, answers its median."""
    call = MODELS[name](threads, Path(path))
    for _ in range(20):
        call()
    per_call = []
    for _ in range(11):
        t0 = time.perf_counter()
        call()
        per_call.append(time.perf_counter() - t0)
    n = max(1, round(BLOCK_S / statistics.median(per_call)))
    print("ready", flush=True)
    for line in sys.stdin:
        if not line.strip():
            break
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        print(statistics.median(times), flush=True)


def _pair(name: str, threads: int, path: str, quads: int, variant: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--threads", str(threads), "--side", name, path]
    procs: list[subprocess.Popen[str]] = []
    try:
        # One after the other: two multi-threaded warm-ups at once oversubscribe the CPUs,
        # and the calls a side times to size its blocks would be several times too slow.
        for _ in range(2):
            p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            procs.append(p)
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        contrasts, penalties, waited = [], [], 0.0
        previous = 1
        start = time.perf_counter()
        for _ in range(quads):
            logs = []
            for side in (0, 1, 1, 0):
                if variant == "park" and side != previous:
                    waited += park(procs[previous].pid)
                p = procs[side]
                assert p.stdin is not None and p.stdout is not None
                p.stdin.write("b\n")
                p.stdin.flush()
                logs.append(math.log(float(p.stdout.readline())))
                previous = side
            a1, b1, b2, a2 = logs
            contrasts.append((b1 + b2 - a1 - a2) / 2)
            penalties.append(b1 - b2)  # B's first block after a switch against its second
        seconds = (time.perf_counter() - start) / quads
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
            p.wait(timeout=30)
    return {
        "mean": statistics.fmean(contrasts),
        "within": statistics.stdev(contrasts),
        "penalty": statistics.median(penalties),
        "quad_s": seconds,
        "waited": waited / quads,
    }


def interleave(args: argparse.Namespace, path: Path) -> None:
    variants = ("none", "park")
    print(
        f"{os.cpu_count()} CPUs; threads {args.threads or 'default'}; A/A; {args.pairs} pairs "
        f"a variant of {args.quads} quads (blocks of {BLOCK_S * 1e3:g} ms), variants in turn"
    )
    print(
        f"{'model':<12} {'variant':<7} {'within sd':>9} {'between sd':>10} {'se k=1':>7} "
        f"{'penalty':>8} {'quad s':>7} {'waited':>7}"
    )
    for name in MODELS:
        got: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        for _ in range(args.pairs):
            for v in variants:
                got[v].append(_pair(name, args.threads, str(path), args.quads, v))
        for v in variants:
            rows = got[v]
            within = statistics.median(r["within"] for r in rows)
            between = statistics.stdev(r["mean"] for r in rows)
            print(
                f"{name:<12} {v:<7} {within:9.4f} {between:10.4f} "
                f"{within / math.sqrt(args.quads):7.4f} "
                f"{statistics.median(r['penalty'] for r in rows):+8.4f} "
                f"{statistics.median(r['quad_s'] for r in rows):7.3f} "
                f"{statistics.median(r['waited'] for r in rows):7.3f}"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=40)
    ap.add_argument("--threads", type=int, default=0, help="0: the libraries' defaults")
    ap.add_argument("--rest", type=float, default=0.3, help="seconds between blocks")
    ap.add_argument("--interleave", action="store_true", help="the A/A interleaving figures")
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--quads", type=int, default=40)
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "ONNX"), help=argparse.SUPPRESS)
    ap.add_argument("--side", nargs=2, metavar=("MODEL", "ONNX"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.blocks < 1 or args.pairs < 2 or args.quads < 2:
        ap.error("--blocks must be at least 1, --pairs and --quads at least 2")
    if args.child:
        _child(args.child[0], args.threads, args.blocks, args.rest, args.child[1])
        return 0
    if args.side:
        _side(args.side[0], args.threads, args.side[1])
        return 0
    if args.interleave:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "mlp.onnx"
            _export(path)
            interleave(args, path)
        return 0
    waits = {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "KMP_BLOCKTIME", "GOMP_SPINCOUNT")}
    print(
        f"{os.cpu_count()} CPUs; threads {args.threads or 'default'}; {args.blocks} blocks of "
        f"{BLOCK_S * 1e3:g} ms, {args.rest:g} s apart; {waits}"
    )
    header = "  ".join(f"{w:>6g}" for w in WINDOWS)
    print(f"{'model':<12} {'load':>5}  {'':<6}  CPU ms burnt by ms after the block: {header}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mlp.onnx"
        _export(path)
        for name in MODELS:
            out = subprocess.run(
                [sys.executable, __file__, "--blocks", str(args.blocks), "--threads",
                 str(args.threads), "--rest", str(args.rest), "--child", name, str(path)],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            got = json.loads(out.stdout.splitlines()[-1])
            after, load = got["after"], got["load"]
            cells = [sorted(r[i] for r in after) for i in range(len(WINDOWS))]
            median = "  ".join(f"{statistics.median(c):6.2f}" for c in cells)
            p90 = "  ".join(f"{c[int(0.9 * (len(c) - 1))]:6.2f}" for c in cells)
            pad = " " * 36
            print(f"{name:<12} {statistics.median(load):5.2f}  median  {pad}{median}")
            print(f"{'':<12} {'':>5}  90th    {pad}{p90}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
