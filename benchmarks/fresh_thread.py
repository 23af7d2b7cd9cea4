"""A torch model timed on the sampling thread keeps its intra-op thread count.

    python benchmarks/fresh_thread.py [--seconds 2] [--reps 4]

The plugin times on a fresh thread (``measure.timing.on_fresh_stack``). torch keeps part
of ``set_num_threads`` per thread (MKL's count is set with ``mkl_set_num_threads_local``),
so a thread started after ``torch.set_num_threads(1)`` ran MKL's GEMMs on every core while
``torch.get_num_threads()`` said 1. Prints the example torch MLP's time per call at batch
32 (the examples' ``test_mlp_torch[b32]``) at one thread on: the main thread, a bare new
thread (the plugin before the fix), and ``on_fresh_stack`` (now), alone and next to a
process running the same MLP at two threads (median over ``--reps``, and the worst). A
bare thread that is faster than the main thread alone is running more threads.

What this script does not reliably show is the stall that made the fix urgent: two
processes on 2 cores both running MKL at two threads wait on each other's OpenMP
barriers, 40 ms a call instead of 58 us. It happened in 5 of 6 ``pytest examples -k
mlp_torch --perf-ab=HEAD`` runs in a clone of this repository (test_mlp_torch[b32] at 3-8
ms medians, its warmup at 40 ms a call), where both sides warm up at the same time; here
the neighbour and the timed thread seldom meet that way.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import threading
import time
from typing import Any


def mlp(torch: Any) -> Any:
    torch.manual_seed(0)
    layers: list[Any] = []
    for a, b in itertools.pairwise([200, 128, 64, 32, 16, 8, 1]):
        layers += [torch.nn.Linear(a, b), torch.nn.Sigmoid()]
    return torch.nn.Sequential(*layers).eval()


def calls(torch: Any, model: Any, x: Any, seconds: float) -> list[float]:
    """Seconds per call of ``model(x)``, one call after another for ``seconds``."""
    times: list[float] = []
    end = time.time() + seconds
    with torch.inference_mode():
        while time.time() < end:
            t = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - t)
    return times


def run_neighbour(seconds: float) -> None:
    """The other process: the same MLP at two threads, saying when it starts its loop."""
    import torch

    torch.set_num_threads(2)
    model = mlp(torch)
    x = torch.randn(32, 200)
    print("ready", flush=True)
    calls(torch, model, x, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="timing per variant")
    parser.add_argument("--reps", type=int, default=4, help="repetitions per variant")
    parser.add_argument("--neighbour", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.neighbour is not None:
        run_neighbour(args.neighbour)
        return
    import torch

    from pytest_infperf.measure.timing import HostSampler, on_fresh_stack

    torch.set_num_threads(1)
    model, x = mlp(torch), torch.randn(32, 200)

    def timed() -> float:
        return statistics.median(calls(torch, model, x, args.seconds))

    def bare_thread() -> float:
        box: list[float] = []
        thread = threading.Thread(target=lambda: box.append(timed()))
        thread.start()
        thread.join()
        return box[0]

    variants = {
        "main thread": timed,
        "bare new thread (before)": bare_thread,
        "on_fresh_stack (now)": lambda: on_fresh_stack(HostSampler(lambda: None), timed),
    }
    print(f"torch {torch.__version__}, example MLP at batch 32, torch.set_num_threads(1)")
    print("| thread | alone (median, worst) | next to a 2-thread neighbour (median, worst) |")
    print("|---|---|---|")
    for name, run in variants.items():
        alone = [run() for _ in range(args.reps)]
        busy = []
        for _ in range(args.reps):
            other = subprocess.Popen(
                [sys.executable, __file__, "--neighbour", str(args.seconds + 1.0)],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert other.stdout is not None
            # It has imported torch and is about to loop (or it failed: say so).
            if other.stdout.readline().strip() != "ready":
                raise SystemExit("the neighbour process did not start")
            try:
                busy.append(run())
            finally:
                other.wait()
        print(f"| {name} | {_us(alone)} | {_us(busy)} |", flush=True)


def _us(times: list[float]) -> str:
    return f"{statistics.median(times) * 1e6:.0f} us, {max(times) * 1e6:.0f} us"


if __name__ == "__main__":
    main()
