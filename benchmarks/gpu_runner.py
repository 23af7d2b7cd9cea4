"""A GPU runner's gate, simulated at the spreads a real one showed: whole --perf-compare runs
through the plugin's own decisions (``Judge.stored``, ``policy.after_stored``,
``Judge.stands``; where the policy settles, ``Judge.plan`` / ``PairedPlan.look`` over
synthetic process pairs, ``Judge.interleaved``, ``Judge.settled``, ``Judge.learn``).

    python benchmarks/gpu_runner.py [--runs 400] [--sizes 4,24] [--hosts 0.02,0.2,0.4,0.6]
        [--device 0.003] [--seed N]

What a recorded H200 runner showed (docs/MEASURED.md, "A GPU runner's host"): the device's
time of identical code within +-0.5% between processes, the host's latency medians -59% to
+59%; a process is fast or slow for all its models at once. Here each run has two
processes (the baseline's ``--perf-save`` and the compare's); a latency's log-ratio between
them is a shift common to the run (70% of ``--hosts``' variance) plus its own (30%), the
session-start reference's Python loop follows the common shift, and the device time moves
by ``--device`` (sd of log) between processes. Within a process a latency has a 5% CV over
its samples, the device time 0.05% over 8 profiled calls. An interleaved process pair reads
the latency's log-ratio with sd ``--hosts`` and the device time's with ``--device``.

Each run's benchmarks are all identical code (A/A), or one is changed (the rest identical):
``+5% device`` and ``+8% device`` (a layer more: the device time and the exact counts grow,
the latency by as much of it as the device bounds), ``host +50%, counts grew`` (Python work
added in forward: more Python calls, kernels the same) and ``host +50%, same counts`` (a
slower host path that calls nothing more). Printed per host spread, suite size and case:
runs with any claim on identical code (a regression or improvement: target <= 1 in 100), the
changed benchmark failed, and not passed (failed, or left undecided: never a silent pass),
the mean process pairs a run spent, and the run's cost against a plain run (a stored pass
3 s a benchmark, a process pair 8 s: the recorded H200's figures).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_infperf.core.names import CompareMode
from pytest_infperf.core.options import BenchOptions
from pytest_infperf.core.results import BenchmarkResult, Origin, Verdict, WorkProfile
from pytest_infperf.judge import policy, work
from pytest_infperf.judge.device import clocks_held, work_of
from pytest_infperf.judge.judge import Judge
from pytest_infperf.judge.rules import Policy
from pytest_infperf.stats.descriptive import summarize
from pytest_infperf.stats.pooled import PairSummary

STORED_S, PAIR_S = 3.0, 8.0
ENV = {"backend": "torch", "device_type": "cuda", "dtype": "float32", "num_threads": 16}
CLOCKS = {"gpu_sm_mhz": 1980.0, "gpu_mem_mhz": 3201.0}
CASES: dict[str, dict[str, float]] = {
    "A/A": {},
    "+5% device": {"device": 0.05, "counts": 1.0},
    "+8% device": {"device": 0.08, "counts": 1.0},
    "host +50% more calls": {"host": 0.50, "python": 1.0},
    "host +50% same calls": {"host": 0.50},
}
PASSES = (Verdict.UNCHANGED, Verdict.NO_REGRESSION, Verdict.IMPROVEMENT)
CLAIMS = (Verdict.REGRESSION, Verdict.IMPROVEMENT)


@dataclasses.dataclass
class Cell:
    runs: int = 0
    aa_claimed: int = 0
    failed: int = 0
    not_passed: int = 0
    pairs: int = 0
    cost: float = 0.0


def profile(device_s: float, grown: float, python: float, rng: np.random.Generator) -> WorkProfile:
    calls = rng.normal(device_s, device_s * 5e-4, 8).clip(min=1e-9)
    return WorkProfile(
        calls=8,
        flops=1e10 * (1 + 0.08 * grown),
        op_calls=1000 * (1 + 0.08 * grown),
        kernels=300 * (1 + 0.08 * grown),
        python_calls=900 * (1 + 0.3 * python),
        gpu_time=[float(v) for v in calls],
    )


def side(
    i: int,
    latency: float,
    device: float,
    change: dict[str, float],
    rng: np.random.Generator,
) -> BenchmarkResult:
    samples = latency * np.exp(rng.normal(0.0, 0.05, 150))
    work_ = profile(device, change.get("counts", 0.0), change.get("python", 0.0), rng)
    reference = {"python_s": 9e-5, "gemm_s": 1.1e-5, "cpu_share": 1.0, **CLOCKS}
    return BenchmarkResult(
        nodeid=f"tests/perf/test_models.py::test_{i}",
        name=None,
        backend="torch",
        samples=[float(v) for v in samples],
        stats=summarize([float(v) for v in samples]),
        env=dict(ENV),
        reference=reference,
        work=work_,
    )


def settle(
    judge: Judge,
    stored: Any,
    effect_lat: float,
    effect_dev: float,
    host: float,
    device_sd: float,
    opts: BenchOptions,
    origin: Origin,
    rng: np.random.Generator,
) -> tuple[Any, int]:
    """The interleaved comparison the policy asked for, over synthetic process pairs."""
    metrics = ("median", "gpu_time")
    plan = judge.plan(opts, metrics, gpu=True)
    pairs: dict[str, list[PairSummary]] = {m: [] for m in metrics}
    while True:
        own = 0.01 * rng.uniform(0.5, 1.5)
        lat = effect_lat + rng.normal(0.0, host) + rng.normal(0.0, own)
        dev = effect_dev + rng.normal(0.0, device_sd) + rng.normal(0.0, 2e-4)
        pairs["median"].append(PairSummary(lat, own, 16, 0.0, False))
        pairs["gpu_time"].append(PairSummary(dev, 2e-4, 8, 0.0, False))
        look = plan.look(pairs)
        if look.stop:
            break
    k = look.k
    figures = {"median": [1.0], "gpu_time": [1.0]}
    ab = judge.interleaved(look, figures, figures, opts, origin)
    ab = judge.against_the_work(dataclasses.replace(ab, work=stored.work))
    judge.learn(look, gpu=True)
    return judge.settled(stored, ab), k


def one_run(
    cell: Cell, n: int, host: float, device_sd: float, case: str, rng: np.random.Generator
) -> None:
    opts = BenchOptions()
    origin = Origin(CompareMode.STORED, "base", 1, "a baseline")
    settle_origin = Origin(CompareMode.AB, "base", 1, "interleaved")
    judge = Judge(Policy(), family=n)
    common = rng.normal(0.0, host * math.sqrt(0.7))
    judge.host_moved(math.exp(common + rng.normal(0.0, 0.02)))
    changed = int(rng.integers(n)) if CASES[case] else -1
    pairs, verdicts = 0, []
    for i in range(n):
        change = CASES[case] if i == changed else {}
        latency, device = 0.005, 0.002 * rng.uniform(0.6, 1.2)
        dev_effect = math.log1p(change.get("device", 0.0))
        # The latency grows by the device's share of it where the device grew, by the host's
        # change where the host's did.
        lat_effect = math.log1p(change.get("host", 0.0) + change.get("device", 0.0) * 0.4)
        own = rng.normal(0.0, host * math.sqrt(0.3))
        base = side(i, latency, device * math.exp(rng.normal(0.0, device_sd)), {}, rng)
        now = side(
            i,
            latency * math.exp(lat_effect + common + own),
            device * math.exp(dev_effect + rng.normal(0.0, device_sd)),
            change,
            rng,
        )
        entry = base.to_json()
        c = judge.stored(now, entry, opts, origin)
        c = work.attach(c, now.work, work_of(entry))
        facts = policy.Facts(
            domain="gpu",
            family=n,
            stored=c,
            clocks_held=clocks_held(now, entry),
            host_ungated=judge.host_ungated(opts),
        )
        d = policy.after_stored(facts)
        if d.step in (policy.Step.SETTLE, policy.Step.RECHECK):
            sd = host if host > 0 else 1e-4
            v, k = settle(judge, c, lat_effect, dev_effect, sd, device_sd, opts, settle_origin, rng)
            pairs += k
        elif d.step is policy.Step.REMEASURE:
            v = judge.unsettled(c, d.reason)
        else:
            v = judge.stands(c, d)
        judge.learn_stored(c, v)
        verdicts.append(v.verdict)
    cell.runs += 1
    cell.pairs += pairs
    cell.cost += (n * STORED_S + pairs * PAIR_S) / (n * STORED_S)
    same = [v for i, v in enumerate(verdicts) if i != changed]
    cell.aa_claimed += any(v in CLAIMS for v in same)
    if changed >= 0:
        cell.failed += verdicts[changed] is Verdict.REGRESSION
        cell.not_passed += verdicts[changed] not in PASSES


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--sizes", default="4,24")
    ap.add_argument("--hosts", default="0.02,0.2,0.4,0.6", help="sd of the host's log-ratio")
    ap.add_argument("--device", type=float, default=0.003, help="sd of the device's log-ratio")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(
        f"{args.runs} runs a cell; device time sd {args.device:.1%} between processes; "
        f"a stored pass {STORED_S:g} s, a process pair {PAIR_S:g} s"
    )
    header = f"{'host sd':>8} {'size':>4}  {'case':<24} {'A/A claimed':>11} {'failed':>7}"
    print(header + f" {'not passed':>10} {'pairs/run':>9} {'cost':>5}")
    for host in (float(h) for h in args.hosts.split(",")):
        for n in (int(s) for s in args.sizes.split(",")):
            for case in args.cases.split(","):
                cell = Cell()
                for _ in range(args.runs):
                    one_run(cell, n, host, args.device, case, rng)
                runs = cell.runs
                changed = case != "A/A"
                failed = f"{cell.failed / runs:.1%}" if changed else "-"
                open_ = f"{cell.not_passed / runs:.1%}" if changed else "-"
                print(
                    f"{host:>8.0%} {n:>4}  {case:<24} {cell.aa_claimed / runs:>11.1%} "
                    f"{failed:>7} {open_:>10} {cell.pairs / runs:>9.1f} {cell.cost / runs:>4.2f}x"
                )


if __name__ == "__main__":
    main()
