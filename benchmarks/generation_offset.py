"""Where does a generation's process offset come from? Identical code in several processes,
and what shrinks the spread between them.

    python benchmarks/generation_offset.py --pairs 16 [--quads 8] --variants plain,plain-core0
    python benchmarks/generation_offset.py [--processes 4] [--rounds 60] [--model tiny-llama]
        [--prompt 32] [--cache static] [--variants plain,fresh-inputs,gc-off]
    python benchmarks/generation_offset.py --prompt 256 --variants plain,big-free,heap-steady

Every worker builds the same decoder from its config (seed 0, one intra-op thread) and
warms it with 10 greedy generations of 16 tokens. Variants (the worker changes only this):

- ``plain``: as the plugin's sampler does (the same input tensors every generation);
- ``fresh-inputs``: a fresh copy of the input tensors for every generation (is the offset
  in where the prompt lies in memory?);
- ``gc-off``: the cyclic garbage collector frozen and off while generating;
- ``big-free``: first allocates and frees tensors of 4, 16 and 30 MiB, as a larger model
  run before in the process would: glibc raises its mmap threshold to the size of a freed
  mmapped block, so later requests of that size reuse heap pages instead of fresh ones;
- ``heap-steady``: glibc's thresholds fixed as the expert ``heap=steady`` (the plugin's
  default) fixes them, 32 MiB and 64 MiB; ``heap-start``: fixed at its start values
  (128 KiB), every large request fresh pages; names combine (``big-free-heap-steady``);
- a name ending in ``-core0``: that variant with its workers on CPU 0 only (``taskset -c 0``).

With ``--pairs``: process pairs as an interleaved comparison runs them, the variants taking
turns pair by pair: two fresh workers, ``--quads`` ABBA quads of one generation a block,
each pair's figure the mean quad contrast (log B - log A) and its own standard error.
Prints per variant the sd of the pair means against the pairs' own errors (their root mean
square): the excess is what pooling process pairs has to average out. ``plain,plain-core0``
is the experiment behind the expert ``pin`` (docs/MEASURED.md, "One CPU for both sides");
``plain,big-free,heap-start,heap-steady`` the one behind the expert ``heap`` ("The same heap in
every process").

Without ``--pairs``: ``--processes`` workers per variant, all started at once, then asked in
turn, in a new random order each round, for one generation: one runs at a time and all see
the same spells of the machine. Prints per variant the sd between workers of the log median
TTFT and TPOT against the sd that sampling alone gives (the medians' bootstrap errors): an
sd well above it is a process offset.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import statistics
import subprocess
import sys
import time
from typing import Any

NEW_TOKENS = 16


def worker(args: argparse.Namespace) -> None:
    import torch
    import transformers

    from pytest_infperf import hf
    from pytest_infperf.measure import heap
    from pytest_infperf.measure.backends.generate import TokenClock

    torch.set_num_threads(1)
    model = hf.build_causal_lm(args.model)
    inputs = hf.prompt(model, 1, args.prompt)
    clock = TokenClock(torch, torch.device("cpu"))
    kwargs: dict[str, Any] = {
        "max_new_tokens": NEW_TOKENS,
        "min_new_tokens": NEW_TOKENS,
        "do_sample": False,
        "stopping_criteria": transformers.StoppingCriteriaList([clock]),
    }
    if args.cache == "static":
        kwargs["cache_implementation"] = "static"
    fresh = args.worker == "fresh-inputs"
    if args.worker == "gc-off":
        gc.collect()
        gc.freeze()
        gc.disable()
    if "heap-start" in args.worker:
        # glibc's start values, fixed: every large request gets fresh pages.
        heap.set_thresholds(128 * 1024, 128 * 1024)
    if "heap-steady" in args.worker:
        heap.settle("steady")  # what heap=steady (the default) does
    if "big-free" in args.worker:
        # What a larger model run before leaves behind: glibc raises its mmap threshold to
        # the size of a freed mmapped chunk (up to 32 MiB), so later allocations of that size
        # come from the heap instead of fresh, zero-filled pages.
        for mib in (4, 16, 30):
            torch.ones(mib * 2**18).sum()

    def one() -> tuple[float, float]:
        feed = {k: v.clone() for k, v in inputs.items()} if fresh else inputs
        clock.reset()
        t0 = time.perf_counter_ns()
        with torch.inference_mode():
            model.generate(**feed, **kwargs)
        s = clock.stamps
        return (s[0] - t0) / 1e9, (s[-1] - s[0]) / 1e9 / (len(s) - 1)

    for _ in range(10):
        one()
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        print(json.dumps(one()), flush=True)


def _start(base: list[str], variant: str) -> subprocess.Popen[str]:
    # "...-core0": the worker runs on CPU 0 only (both sides of a pair on one core).
    pin = ["taskset", "-c", "0"] if variant.endswith("-core0") else []
    p = subprocess.Popen(
        [*pin, *base, "--worker", variant.removesuffix("-core0")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    return p


def _ask(p: subprocess.Popen[str]) -> tuple[float, float]:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write("go\n")
    p.stdin.flush()
    ttft, tpot = json.loads(p.stdout.readline())
    return ttft, tpot


def _stop(p: subprocess.Popen[str]) -> None:
    assert p.stdin is not None
    p.stdin.close()
    p.wait()


def pairs(args: argparse.Namespace, base: list[str], variants: list[str]) -> None:
    """Process pairs as the plugin runs them: two fresh workers, ABBA quads of one
    generation a block, a pair's figure the mean quad contrast and its own error."""
    print(
        f"{args.model}, prompt {args.prompt}, {args.cache} cache, {args.pairs} process pairs a "
        f"variant, {args.quads} quads each"
    )
    print(
        "| variant | TTFT: sd of pair means | TTFT: pairs' own se (rms) | TPOT: sd of pair "
        "means | TPOT: pairs' own se (rms) | TTFT pair means (%) |"
    )
    print("|---|---|---|---|---|---|")
    results: dict[str, list[list[tuple[float, float]]]] = {v: [] for v in variants}
    for _ in range(args.pairs):
        for v in variants:  # the variants take turns, pair by pair
            a, b = _start(base, v), _start(base, v)
            for p in (a, b):
                assert p.stdout is not None and p.stdout.readline().strip() == "ready"
            quads = []
            for _ in range(args.quads):
                a1, b1, b2, a2 = _ask(a), _ask(b), _ask(b), _ask(a)
                quads.append(
                    tuple(
                        (math.log(b1[k]) + math.log(b2[k]) - math.log(a1[k]) - math.log(a2[k])) / 2
                        for k in (0, 1)
                    )
                )
            _stop(a)
            _stop(b)
            results[v].append(quads)  # type: ignore[arg-type]
    for v in variants:
        cells = []
        for k in (0, 1):
            means = [statistics.fmean(q[k] for q in qs) for qs in results[v]]
            ses = [statistics.stdev(q[k] for q in qs) / math.sqrt(len(qs)) for qs in results[v]]
            rms = math.sqrt(statistics.fmean(se * se for se in ses))
            cells += [f"{statistics.stdev(means):.3f}", f"{rms:.3f}"]
            if k == 0:
                shown = ", ".join(f"{m * 100:+.1f}" for m in means)
        print(f"| {v} | " + " | ".join(cells) + f" | {shown} |")


def _boot_se_log_median(xs: list[float], rng: random.Random, n: int = 400) -> float:
    meds = [math.log(statistics.median(rng.choices(xs, k=len(xs)))) for _ in range(n)]
    return statistics.stdev(meds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--model", default="tiny-llama")
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--cache", choices=("dynamic", "static"), default="static")
    parser.add_argument("--variants", default="plain,fresh-inputs,gc-off")
    parser.add_argument("--pairs", type=int, default=0, help="process pairs a variant")
    parser.add_argument("--quads", type=int, default=8, help="ABBA quads a process pair")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return

    variants = args.variants.split(",")
    base = [sys.executable, __file__, "--model", args.model, "--prompt", str(args.prompt)]
    base += ["--cache", args.cache]
    if args.pairs:
        pairs(args, base, variants)
        return
    procs = [(v, _start(base, v)) for v in variants for _ in range(args.processes)]
    for _, p in procs:  # started together; wait until each has warmed up
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    rng = random.Random(0)
    samples: list[list[tuple[float, float]]] = [[] for _ in procs]
    t_start = time.monotonic()
    for _ in range(args.rounds):
        order = list(range(len(procs)))
        rng.shuffle(order)
        for i in order:
            samples[i].append(_ask(procs[i][1]))
    for _, p in procs:
        _stop(p)
    print(
        f"{args.model}, prompt {args.prompt}, {args.cache} cache, {args.processes} processes a "
        f"variant, {args.rounds} rounds, {time.monotonic() - t_start:.0f} s"
    )
    print(
        "| variant | TTFT: sd between processes | TTFT: sampling sd | TPOT: sd between "
        "processes | TPOT: sampling sd | TTFT medians (ms) |"
    )
    print("|---|---|---|---|---|---|")
    for v in variants:
        rows = [s for (name, _), s in zip(procs, samples, strict=True) if name == v]
        cells = []
        for k in (0, 1):
            logs = [math.log(statistics.median(x[k] for x in s)) for s in rows]
            se = statistics.fmean(_boot_se_log_median([x[k] for x in s], rng) for s in rows)
            cells += [f"{statistics.stdev(logs):.3f}", f"{se:.3f}"]
        meds = ", ".join(f"{statistics.median(x[0] for x in s) * 1e3:.2f}" for s in rows)
        print(f"| {v} | " + " | ".join(cells) + f" | {meds} |")


if __name__ == "__main__":
    main()
