"""False-alarm and detection rates of the gate, through the real plugin, quiet or with a
noisy neighbour.

    python benchmarks/decision_quality.py [--reps 9] [--workloads 12]
        [--mode stored|stored-file|ab] [--neighbour] [--scenarios A/A,+10%,+20%,-30%]
        [--suite cpu|generation]

A temporary git repository holds a perf suite of CPU workloads (Python loops, json, sort,
numpy GEMMs, a torch MLP), each doing ``round(20 * factor)`` units of work, with the factor
in ``factor.txt``. Per repetition: the baseline is saved on ``main`` with ``--perf-save``
(on a quiet machine), then for each scenario a branch changes the factor (A/A: a commit
that changes nothing) and pytest runs in a subprocess; verdicts are read from its JSON.

Modes: ``stored`` is ``--perf-compare=main`` as users run it (undecided verdicts settled in
the job); ``stored-file`` compares with main's stored baseline as a results file (the stored
baseline alone: settling needs a commit); ``ab`` is
``--perf-ab=main``. ``--neighbour`` starts a busy loop on every core for the duration of
each comparing run (never during the baseline save) and stops it afterwards: the noisy
neighbour of a shared runner.

``--suite generation`` measures ``infer_bench.generate`` instead: small decoders (a Llama
with a dynamic and a static KV cache, a GPT-2; hidden 256, prompt 64, 16 new tokens, one
thread) with ``round(10 * factor)`` decoder layers, so +10% is one layer more in ten. A
layer is most of a step but not all of it (generate's own per-step work stays), so the
true slowdown is a little under the factor: the table prints the medians of the TTFT and
TPOT ratios measured.

Prints, per scenario, the share of benchmarks judged regression / improvement / unchanged
/ no-regression / inconclusive, how many runs had any regression (what a user feels: one
false regression fails the PR), who decided (stored baseline or interleaved in the job)
and over how many process pairs, how many runs exited 0 / 1 / other, the median wall time
of a run and per benchmark, the median within-run CV, and the reference drift seen.
``--plain`` also times plain runs of the suite (no comparison) for the cost ratio.

Two checks of the protocol itself, from the same runs: the detectable effect (each
verdict's ``detectable``, the slowdown it would have flagged with 80% power) against the
slowdowns injected (of the benchmarks whose A/A figure is at most half the injected
slowdown, the share caught), and the between-process offsets of identical code (the
spread of each process pair's log-ratio: pair 1, whose head is the pytest process itself,
against the worker pairs, whose head and base start from the same interpreter state).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SUITE = """
import json
from pathlib import Path

import numpy as np
import pytest

FACTOR = float((Path(__file__).parent / "factor.txt").read_text())
UNITS = round(20 * FACTOR)


def pyloop(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


A32 = np.random.default_rng(0).standard_normal((32, 32))
A64 = np.random.default_rng(1).standard_normal((64, 64))
DOC = {"k%d" % i: list(range(10)) for i in range(10)}


def units(fn):
    def work():
        for _ in range(UNITS):
            fn()
    return work


WORKLOADS = {
    "pyloop_50": units(lambda: pyloop(50)),
    "pyloop_500": units(lambda: pyloop(500)),
    "pyloop_5000": units(lambda: pyloop(5000)),
    "json": units(lambda: json.dumps(DOC)),
    "sort": units(lambda: sorted(range(300, 0, -1))),
    "gemm32": units(lambda: A32 @ A32),
    "gemm64": units(lambda: A64 @ A64),
    "strjoin": units(lambda: ",".join(str(i) for i in range(100))),
    "dictbuild": units(lambda: {i: i * 2 for i in range(200)}),
    "listcomp": units(lambda: [i * i for i in range(1000)]),
}


@pytest.mark.parametrize("name", list(WORKLOADS)[:NWORK])
def test_workload(infer_bench, name):
    infer_bench(WORKLOADS[name], intra_op_threads=None)


@pytest.mark.skipif(NWORK <= len(WORKLOADS), reason="workload count")
def test_torch_mlp(infer_bench):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    sizes = [200, 128, 64, 32, 16, 8, 1]
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.Sigmoid()]
    mlp = torch.nn.Sequential(*layers).eval()
    x = torch.randn(1, 200)

    def work():
        for _ in range(UNITS):
            mlp(x)

    with torch.inference_mode():
        infer_bench(work)


@pytest.mark.skipif(NWORK <= len(WORKLOADS) + 1, reason="workload count")
def test_numpy_conv(infer_bench):
    img = np.random.default_rng(2).standard_normal(4096)
    k = np.ones(31) / 31
    infer_bench(units(lambda: np.convolve(img, k, mode="same")))
"""

GENERATION_SUITE = """
from pathlib import Path

import pytest
from pytest_infperf import hf

FACTOR = float((Path(__file__).parent / "factor.txt").read_text())
LAYERS = round(10 * FACTOR)
MODELS = {
    "llama": ("tiny-llama", "num_hidden_layers", {}),
    "llama-static": ("tiny-llama", "num_hidden_layers", {"cache_implementation": "static"}),
    "gpt2": ("tiny-gpt2", "n_layer", {}),
}


@pytest.mark.parametrize("which", list(MODELS)[:NWORK])
def test_generation(infer_bench, which):
    name, layers, kwargs = MODELS[which]
    model = hf.build_causal_lm(name, **{layers: LAYERS})
    infer_bench.generate(
        model, hf.prompt(model, 1, 64), max_new_tokens=16, generate_kwargs=kwargs,
        intra_op_threads=1,
    )
"""
SUITES = {"cpu": SUITE, "generation": GENERATION_SUITE}

SCENARIOS = {"A/A": 1.0, "+5%": 1.05, "+10%": 1.10, "+20%": 1.20, "+30%": 1.30, "-30%": 0.70}
ENV = {
    "GIT_AUTHOR_NAME": "dq",
    "GIT_AUTHOR_EMAIL": "dq@invalid",
    "GIT_COMMITTER_NAME": "dq",
    "GIT_COMMITTER_EMAIL": "dq@invalid",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}


def process_pairs(bench: dict[str, Any]) -> list[dict[str, Any]]:
    """A benchmark's interleaved process pairs in the results JSON (``extra.ab.pairs`` for
    ``--perf-ab``, ``extra.settle.pairs`` for a settled ``--perf-compare``)."""
    extra = bench.get("extra") or {}
    return list((extra.get("ab") or extra.get("settle") or {}).get("pairs") or [])


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, env={**os.environ, **ENV}
    )


class Neighbour:
    """A busy loop on every core while the ``with`` block runs."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Neighbour:
        if self.on:
            code = "while True: pass"
            self.procs = [
                subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 1)
            ]
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
        self.procs = []


def pytest_run(
    repo: Path, *args: str, log: Path | None = None
) -> tuple[dict[str, Any] | None, int, float]:
    """The run's JSON, exit code and wall time; its output and JSON kept under ``log`` (a
    name without suffix) when given: on a lent machine they are all there is to read."""
    out = repo / "out.json"
    if out.exists():
        out.unlink()
    started = time.time()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--perf-json={out}",
            *args,
        ],
        cwd=repo,
        capture_output=True,
        check=False,
        env={**os.environ, **ENV},
    )
    took = time.time() - started
    if log is not None:
        log.with_suffix(".log").write_bytes(proc.stdout + proc.stderr)
        if out.exists():
            log.with_suffix(".json").write_bytes(out.read_bytes())
    return (json.loads(out.read_text()) if out.exists() else None), proc.returncode, took


def make_repo(root: Path, nwork: int, suite: str = "cpu") -> Path:
    repo = root / "repo"
    repo.mkdir()
    (repo / "test_dq.py").write_text(SUITES[suite].replace("NWORK", str(nwork)))
    (repo / "factor.txt").write_text("1.0")
    (repo / "pytest.ini").write_text("[pytest]\n")
    commit_repo(repo, "suite")
    return repo


def commit_repo(repo: Path, message: str) -> None:
    """``repo``'s files committed on ``main`` of a new repository; what the runs write
    (baselines, their JSON, caches) ignored."""
    (repo / ".gitignore").write_text("baselines/\nout.json\n__pycache__/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", message)


def scenario_branch(repo: Path, label: str, factor: float) -> str:
    branch = "s-" + label.replace("/", "").replace("%", "").replace("+", "p").replace("-", "m")
    git(repo, "checkout", "-q", "-B", branch, "main")
    (repo / "factor.txt").write_text(str(factor))
    git(repo, "commit", "-q", "--allow-empty", "-am", f"factor {factor}")
    return branch


MODES = {
    "stored": ["--perf-compare=main"],
    "stored-file": ["--perf-compare={file}"],
    "ab": ["--perf-ab=main"],
}


def stored_file(repo: Path) -> str:
    """The repository's one stored baseline (main's), as a results file."""
    (path,) = sorted((repo / "baselines").glob("*/*.json"))
    return str(path)


def _detectable_check(raw: list[dict[str, Any]], wanted: list[str]) -> None:
    """Of each workload's A/A detectable figures, the median; then per slowdown scenario,
    the benchmarks whose slowdown is at least 1x / 2x that figure, and the share caught."""
    aa: dict[str, list[float]] = {}
    for r in raw:
        d = r["comparison"].get("detectable")
        if r["scenario"] == "A/A" and d is not None:
            aa.setdefault(r["key"], []).append(d)
    if not aa:
        return
    typical = {k: statistics.median(v) for k, v in aa.items()}
    print(
        "detectable effect on A/A (80% power): median "
        f"{statistics.median(typical.values()):+.1%}, range {min(typical.values()):+.1%} to "
        f"{max(typical.values()):+.1%}"
    )
    for label in wanted:
        factor = SCENARIOS[label] - 1.0
        if factor <= 0:
            continue
        for mult in (1, 2):
            hits = [
                r["comparison"].get("verdict") == "regression"
                for r in raw
                if r["scenario"] == label
                and r["key"] in typical
                and factor >= mult * typical[r["key"]]
            ]
            if hits:
                print(
                    f"  {label}: of {len(hits)} benchmarks with slowdown >= {mult}x their "
                    f"detectable effect, {sum(hits)} caught ({sum(hits) / len(hits):.0%})"
                )


def _offsets(raw: list[dict[str, Any]]) -> None:
    """Between-process offsets on identical code: the sd of process pairs' log-ratios,
    for pair 1 (head: this pytest process) and for worker pairs (same hash seed)."""
    first: list[float] = []
    workers: list[float] = []
    penalties: list[float] = []
    for r in raw:
        if r["scenario"] != "A/A":
            continue
        for pr in r["pairs"]:
            s = pr["summary"].get("median")
            if s is None:
                continue
            (first if pr["head_process"] == "this process" else workers).append(s["log_ratio"])
            if pr["switch_penalty"].get("median") is not None:
                penalties.append(pr["switch_penalty"]["median"])
    for name, values in (("pair 1 (head: this process)", first), ("worker pairs", workers)):
        if len(values) >= 2:
            print(
                f"A/A process-pair log-ratios, {name}: n {len(values)}, sd "
                f"{statistics.stdev(values):.4f}, median |x| "
                f"{statistics.median(abs(v) for v in values):.4f}"
            )
    if penalties:
        print(f"switch penalty (log), median over pairs: {statistics.median(penalties):+.4f}")
    _waits(raw)


def _waits(raw: list[dict[str, Any]]) -> None:
    """How many quads were judged net of the CPU another task held, and the share of the
    sampled time the timing threads waited for it (measure/cpuwait.py)."""
    net = total = 0
    shares: list[float] = []
    for r in raw:
        for pr in r["pairs"]:
            for metric, count in (pr.get("net_of_waits_quads") or {}).items():
                net += count
                total += pr["summary"][metric]["quads"]
            shares += [v for v in (pr.get("cpu_wait_share") or {}).values() if v is not None]
    if total:
        print(
            f"quads judged net of CPU waits: {net}/{total} ({net / total:.0%}); share of the "
            f"sampled time spent waiting for a CPU, per side and pair: median "
            f"{statistics.median(shares):.1%}, max {max(shares):.1%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="repetitions (9 gives >= 100 A/A)")
    parser.add_argument("--workloads", type=int, default=12)
    parser.add_argument("--mode", choices=tuple(MODES), default="stored")
    parser.add_argument("--neighbour", action="store_true", help="busy loops on every core")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--json", help="also write the raw verdicts here")
    parser.add_argument("--suite", choices=tuple(SUITES), default="cpu")
    parser.add_argument("--plain", action="store_true", help="also time plain runs (cost)")
    args = parser.parse_args()
    wanted = [s for s in args.scenarios.split(",") if s in SCENARIOS]
    verdicts: dict[str, list[str]] = {s: [] for s in wanted}
    deciders: dict[str, list[str]] = {s: [] for s in wanted}
    ratios: dict[str, list[float]] = {s: [] for s in wanted}
    # Generation: each judged metric's ratio (TTFT, TPOT).
    part_ratios: dict[str, dict[str, list[float]]] = {s: {} for s in wanted}
    cvs: dict[str, list[float]] = {s: [] for s in wanted}
    exits: dict[str, list[int]] = {s: [] for s in wanted}
    walls: dict[str, list[float]] = {s: [] for s in wanted}
    drift: list[float] = []
    raw: list[dict[str, Any]] = []
    plain_walls: list[float] = []
    runs_with_regression: dict[str, int] = dict.fromkeys(wanted, 0)
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp), args.workloads, args.suite)
        for rep in range(args.reps):
            if args.mode != "ab":
                git(repo, "checkout", "-q", "main")
                pytest_run(repo, "--perf-save")  # quiet: the neighbour is off
            for label in wanted:
                scenario_branch(repo, label, SCENARIOS[label])
                if args.plain:
                    with Neighbour(args.neighbour):
                        plain_walls.append(pytest_run(repo)[2])
                with Neighbour(args.neighbour):
                    mode = [a.replace("{file}", stored_file(repo)) for a in MODES[args.mode]]
                    doc, code, took = pytest_run(repo, *mode)
                exits[label].append(code)
                walls[label].append(took)
                if doc is None:
                    print(f"rep {rep} {label}: no JSON (pytest crashed?)", file=sys.stderr)
                    continue
                if any(
                    (b.get("comparison") or {}).get("verdict") == "regression"
                    for b in doc["benchmarks"]
                ):
                    runs_with_regression[label] += 1
                for b in doc["benchmarks"]:
                    c = b.get("comparison") or {}
                    pairs = process_pairs(b)
                    raw.append(
                        {
                            "scenario": label,
                            "rep": rep,
                            "key": b["key"],
                            "comparison": c,
                            "reference": b.get("reference"),
                            "cv": b["stats"]["cv"],
                            "pairs": [
                                {
                                    "head_process": pr["head_process"],
                                    "summary": pr["summary"],
                                    "switch_penalty": pr["switch_penalty"],
                                    "net_of_waits_quads": pr.get("net_of_waits_quads") or {},
                                    "cpu_wait_share": pr.get("cpu_wait_share") or {},
                                }
                                for pr in pairs
                            ],
                        }
                    )
                    verdicts[label].append(c.get("verdict", "none"))
                    deciders[label].append(str(c.get("decided_by") or "-"))
                    if c.get("ratio"):
                        ratios[label].append(c["ratio"])
                    for metric, part in (c.get("parts") or {}).items():
                        if part.get("ratio"):
                            part_ratios[label].setdefault(metric, []).append(part["ratio"])
                    cvs[label].append(b["stats"]["cv"])
                d = (doc.get("comparison") or {}).get("environment_drift") or {}
                if d.get("python_ratio"):
                    drift.append(d["python_ratio"])
            print(
                f"rep {rep + 1}/{args.reps} done ({time.time() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    names = ("regression", "improvement", "unchanged", "no-regression", "inconclusive")
    neighbour = "busy loop on every core" if args.neighbour else "quiet"
    print(
        f"\nmode {args.mode} ({' '.join(MODES[args.mode])}), {neighbour}; {args.reps} "
        f"repetitions x {args.workloads} workloads ({args.suite}); threshold 5%, alpha 0.05; "
        f"{time.time() - started:.0f} s"
    )
    print(
        f"| scenario | n | {' | '.join(names)} | runs with a regression | decided by A/B | "
        "process pairs (median, max) | exit 0/1/other | median run | per benchmark | "
        "median ratio | median CV |"
    )
    print("|---|---|" + "---|" * (len(names) + 9))
    for label in wanted:
        v = verdicts[label]
        n = len(v)
        if not n:
            continue
        shares = " | ".join(f"{v.count(k)} ({100 * v.count(k) / n:.1f}%)" for k in names)
        by_ab = deciders[label].count("ab")
        e = exits[label]
        codes = f"{e.count(0)}/{e.count(1)}/{len(e) - e.count(0) - e.count(1)}"
        wall = statistics.median(walls[label])
        med_ratio = statistics.median(ratios[label]) if ratios[label] else float("nan")
        med_cv = statistics.median(cvs[label]) if cvs[label] else float("nan")
        pp = [
            int(r["comparison"].get("process_pairs") or 0)
            for r in raw
            if r["scenario"] == label and r["comparison"].get("process_pairs")
        ]
        pairs_text = f"{statistics.median(pp):g}, {max(pp)}" if pp else "-"
        per_bench = wall / args.workloads
        print(
            f"| {label} | {n} | {shares} | {runs_with_regression[label]}/{len(e)} | {by_ab} | "
            f"{pairs_text} | {codes} | {wall:.0f} s | {per_bench:.1f} s | {med_ratio:.3f} | "
            f"{med_cv:.1%} |"
        )
    if plain_walls:
        plain = statistics.median(plain_walls)
        print(f"plain run (no comparison): median {plain:.0f} s; cost ratio per scenario:")
        for label in wanted:
            if walls[label]:
                print(f"  {label}: {statistics.median(walls[label]) / plain:.2f}x")
    _detectable_check(raw, wanted)
    _offsets(raw)
    for label in wanted:
        for metric, values in sorted(part_ratios[label].items()):
            print(
                f"{label}: {metric.upper()} ratio median {statistics.median(values):.3f}, "
                f"range {min(values):.3f}-{max(values):.3f} ({len(values)} benchmarks)"
            )
    if drift:
        print(
            f"reference drift (python part, current/baseline): median "
            f"{statistics.median(drift):.3f}, range {min(drift):.3f}-{max(drift):.3f}"
        )
    if args.json:
        data = {"verdicts": verdicts, "ratios": ratios, "walls": walls, "exits": exits, "raw": raw}
        Path(args.json).write_text(json.dumps(data))


if __name__ == "__main__":
    main()
