"""How many generations an interleaved block should hold: the standard error each block size
buys per second of measuring, on identical code.

    python benchmarks/generation_blocks.py [--model tiny-llama] [--prompt 32] [--rounds 6]

Two copies of one small decoder (random weights, one thread) in this process, A and B,
timed in ABBA quads of blocks of 1, 2 or 3 greedy generations of 16 tokens; a block's
figure is the median TTFT and TPOT of its generations (the token timestamps of the plugin's
own ``TokenClock``), a quad's contrast (log b1 + log b2 - log a1 - log a2) / 2, as
``ab/interleave.py`` takes them. The block sizes take turns, 4 s each per round, so that
each sees the same spells of the machine. Prints per block size the quads, their sd, the
standard error of their mean, and that error times the square root of the seconds spent:
the smaller, the more a second of interleaving tells (the plugin's choice of one
generation a block, docs/MEASURED.md). One process: the switch between two processes of a
real run is not in it.
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import time
from typing import Any

SIZES = (1, 2, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny-llama")
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()

    import torch
    import transformers

    from pytest_infperf import hf
    from pytest_infperf.measure.backends.generate import TokenClock

    torch.set_num_threads(1)
    a = hf.build_causal_lm(args.model)
    b = copy.deepcopy(a)
    inputs = hf.prompt(a, 1, args.prompt)
    clock = TokenClock(torch, torch.device("cpu"))
    kwargs = {
        "max_new_tokens": 16,
        "min_new_tokens": 16,
        "do_sample": False,
        "stopping_criteria": transformers.StoppingCriteriaList([clock]),
    }

    def generation(model: Any) -> tuple[float, float]:
        clock.reset()
        t0 = time.perf_counter_ns()
        with torch.inference_mode():
            model.generate(**inputs, **kwargs)
        s = clock.stamps
        return (s[0] - t0) / 1e9, (s[-1] - s[0]) / (len(s) - 1) / 1e9

    def block(model: Any, size: int) -> tuple[float, float]:
        got = [generation(model) for _ in range(size)]
        return (
            math.log(statistics.median(g[0] for g in got)),
            math.log(statistics.median(g[1] for g in got)),
        )

    for _ in range(10):
        generation(a)
        generation(b)
    quads: dict[int, dict[str, list[float]]] = {s: {"ttft": [], "tpot": []} for s in SIZES}
    seconds = dict.fromkeys(SIZES, 0.0)
    for _ in range(args.rounds):
        for size in SIZES:
            started = time.perf_counter()
            while time.perf_counter() - started < 4.0:
                a1, b1, b2, a2 = block(a, size), block(b, size), block(b, size), block(a, size)
                for i, metric in enumerate(("ttft", "tpot")):
                    quads[size][metric].append((b1[i] + b2[i] - a1[i] - a2[i]) / 2)
            seconds[size] += time.perf_counter() - started
    print(f"{args.model}, prompt {args.prompt}, 16 new tokens, A/A in one process")
    print("| generations a block | seconds | metric | quads | quad sd | se | se x sqrt(s) |")
    print("|---|---|---|---|---|---|---|")
    for size in SIZES:
        for metric, values in quads[size].items():
            sd = statistics.stdev(values)
            se = sd / math.sqrt(len(values))
            print(
                f"| {size} | {seconds[size]:.0f} | {metric} | {len(values)} | {sd:.3f} | "
                f"{se:.4f} | {se * math.sqrt(seconds[size]):.4f} |"
            )


if __name__ == "__main__":
    main()
