"""The CPython frame-chunk cliff, and what measuring on an anchored stack does about it.

    python benchmarks/stack_cliff.py [--depths 400]

CPython 3.11 keeps Python frames in 16 KiB chunks and frees a chunk as soon as the first
frame in it returns. A timed loop whose calls start a new chunk maps and unmaps memory on
every call. This times ``lambda: None`` in a loop called from every recursion depth up to
``--depths``, once directly and once through the plugin's ``timing.take_samples`` (on
the caller's thread, below an anchor frame that starts a chunk of its own:
``measure.timing.in_test_context``), and prints the depths where a call cost more than 3x
the median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from pytest_infperf.measure.timing import HostSampler, take_samples

CALLS = 20_000


def f() -> None:
    return None


def direct() -> float:
    pc = time.perf_counter_ns
    t0 = pc()
    for _ in range(CALLS):
        f()
    return (pc() - t0) / CALLS


def plugin() -> float:
    return min(take_samples(HostSampler(f), 3, CALLS)) * 1e9


def at(depth: int, how: str) -> float:
    if depth == 0:
        return direct() if how == "direct" else plugin()
    return at(depth - 1, how)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", type=int, default=400)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}; lambda: None, {CALLS} calls per depth")
    for how in ("direct", "plugin"):
        ns = [at(d, how) for d in range(args.depths)]
        med = statistics.median(ns)
        slow = {d: round(v) for d, v in enumerate(ns) if v > 3 * med}
        print(
            f"{how:>6}: median {med:.0f} ns/call; {len(slow)} of {args.depths} depths slower "
            f"than 3x the median: {slow or 'none'}"
        )


if __name__ == "__main__":
    main()
