"""Timing floor and start-up cost of pytest-infperf, measured through real pytest runs.

    python benchmarks/timing_floor.py [--repeats 5]

Prints:
- the cost of a bare ``time.perf_counter_ns()`` pair on this machine;
- the median infer_bench reports for a no-op callable (target: < 1 us, aim 0.5 us);
- the median it reports for a 50 us busy-wait (target: within 2% of 50 us);
- how much the plugin adds to ``pytest`` start-up (target: < 50 ms), comparing
  ``pytest --co`` with and without ``-p no:infperf``, and which heavy modules were loaded.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

SUITE = """
import time

def noop():
    pass

def busy_50us():
    end = time.perf_counter_ns() + 50_000
    while time.perf_counter_ns() < end:
        pass

def test_noop(infer_bench):
    infer_bench(noop)

def test_busy_50us(infer_bench):
    infer_bench(busy_50us)
"""


def timer_pair_ns(n: int = 200_000) -> float:
    pc = time.perf_counter_ns
    best = []
    for _ in range(5):
        out = [0] * n
        for i in range(n):
            t0 = pc()
            out[i] = pc() - t0
        best.append(statistics.median(out))
    return min(best)


def measured_medians(workdir: Path, repeats: int) -> dict[str, list[float]]:
    (workdir / "test_floor.py").write_text(SUITE)
    got: dict[str, list[float]] = {"noop": [], "busy_50us": []}
    for i in range(repeats):
        out = workdir / f"r{i}.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--perf-json={out}",
                "test_floor.py",
            ],
            cwd=workdir,
            check=True,
            capture_output=True,
        )
        for bench in json.loads(out.read_text())["benchmarks"]:
            name = bench["nodeid"].split("::test_")[1]
            got[name].append(bench["stats"]["median"])
    return got


def startup_ms(workdir: Path, repeats: int) -> tuple[float, float, float, str]:
    """Median ``pytest --co`` wall time with and without the plugin (runs interleaved so
    machine drift hits both), the plugin modules' own import time, and heavy modules seen."""
    (workdir / "test_plain.py").write_text("def test_a():\n    pass\n")
    cmd = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"]
    with_t: list[float] = []
    without_t: list[float] = []
    for _ in range(repeats):
        for extra, sink in (((), with_t), (("-p", "no:infperf"), without_t)):
            t0 = time.perf_counter()
            subprocess.run(
                [*cmd, *extra, "test_plain.py"], cwd=workdir, check=True, capture_output=True
            )
            sink.append(time.perf_counter() - t0)
    imp = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            "import pytest, pytest_infperf.plugin, pytest_infperf.session.modes",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    own_us = sum(
        int(line.split("|")[0].split(":")[1])
        for line in imp.stderr.splitlines()
        if "pytest_infperf" in line and "__editable__" not in line
    )
    probe = textwrap.dedent(
        """
        import sys, pytest
        pytest.main(["--co", "-q", "-p", "no:cacheprovider", "test_plain.py"])
        heavy = {"numpy", "scipy", "torch", "onnxruntime", "transformers", "git"}
        print(sorted(heavy & {m.split(".")[0] for m in sys.modules}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=workdir, capture_output=True, text=True, check=True
    )
    loaded = out.stdout.strip().splitlines()[-1]
    return (
        statistics.median(with_t) * 1e3,
        statistics.median(without_t) * 1e3,
        own_us / 1e3,
        loaded,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pair = timer_pair_ns()
        medians = measured_medians(work, args.repeats)
        with_p, without_p, own_ms, loaded = startup_ms(work, max(args.repeats * 3, 15))
    noop = [m * 1e9 for m in medians["noop"]]
    busy = [m * 1e6 for m in medians["busy_50us"]]
    print(f"python {sys.version.split()[0]}, {args.repeats} pytest runs each")
    print(f"bare perf_counter_ns pair:        {pair:.0f} ns (median of 200k, best of 5)")
    print(
        f"no-op callable, reported median:  {statistics.median(noop):.1f} ns "
        f"(runs: {', '.join(f'{v:.1f}' for v in noop)})"
    )
    errors = [abs(b / 50 - 1) * 100 for b in busy]
    print(
        f"50 us busy-wait, reported median: {statistics.median(busy):.2f} us, error "
        f"{statistics.median(errors):.2f}% (worst {max(errors):.2f}%)"
    )
    print(
        f"pytest --co start-up: {with_p:.0f} ms with the plugin, {without_p:.0f} ms "
        f"with -p no:infperf: plugin adds {with_p - without_p:.1f} ms (interleaved medians)"
    )
    print(f"plugin modules' own import time (-X importtime): {own_ms:.1f} ms")
    print(f"heavy modules loaded at start-up: {loaded}")


if __name__ == "__main__":
    main()
