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

NEIGHBOUR = """
import itertools, sys, time, torch
torch.set_num_threads(2)
sizes = [200, 128, 64, 32, 16, 8, 1]
layers = []
for a, b in itertools.pairwise(sizes):
    layers += [torch.nn.Linear(a, b), torch.nn.Sigmoid()]
m = torch.nn.Sequential(*layers).eval()
x = torch.randn(32, 200)
print("ready", flush=True)
end = time.time() + float(sys.argv[1])
times = []
with torch.inference_mode():
    while time.time() < end:
        t = time.perf_counter()
        m(x)
        times.append(time.perf_counter() - t)
"""


def mlp(torch: Any) -> Any:
    torch.manual_seed(0)
    layers: list[Any] = []
    for a, b in itertools.pairwise([200, 128, 64, 32, 16, 8, 1]):
        layers += [torch.nn.Linear(a, b), torch.nn.Sigmoid()]
    return torch.nn.Sequential(*layers).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="timing per variant")
    parser.add_argument("--reps", type=int, default=4, help="repetitions per variant")
    args = parser.parse_args()
    import torch

    from pytest_infperf.measure.timing import HostSampler, on_fresh_stack

    torch.set_num_threads(1)
    model, x = mlp(torch), torch.randn(32, 200)

    def timed() -> float:
        times: list[float] = []
        end = time.time() + args.seconds
        with torch.inference_mode():
            while time.time() < end:
                t = time.perf_counter()
                model(x)
                times.append(time.perf_counter() - t)
        return statistics.median(times)

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
            neighbour = subprocess.Popen(
                [sys.executable, "-c", NEIGHBOUR, str(args.seconds + 1.0)],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert neighbour.stdout is not None
            neighbour.stdout.readline()  # it has imported torch and is about to loop
            try:
                busy.append(run())
            finally:
                neighbour.wait()
        print(f"| {name} | {_us(alone)} | {_us(busy)} |", flush=True)


def _us(times: list[float]) -> str:
    return f"{statistics.median(times) * 1e6:.0f} us, {max(times) * 1e6:.0f} us"


if __name__ == "__main__":
    main()
