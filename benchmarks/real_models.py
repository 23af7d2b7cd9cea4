"""Identical code on real models, through the real plugin: verdicts and what a compare costs.

    python benchmarks/real_models.py [--reps 5] [--mode stored|ab] [--neighbour] [--threads N]

The suite is this project's ``examples/`` (the main job's benchmarks: a torch and an ONNX
Runtime MLP at batch 1 and 32, DistilBERT and BERT-base in torch and ONNX Runtime at
sequence 32 and 128, and tiny Llama and GPT-2 ``generate()`` with eager and static cache at
prompt 32 and 256; models built from configs, no network), copied into a temporary git
repository. Stored mode saves the baseline on ``main`` once per repetition; each repetition
then runs, on a branch with an empty commit (identical code, A/A), a plain ``pytest`` and
the comparing run (``--perf-compare=main`` or ``--perf-ab=main``), one after the other.
``--threads 0`` runs torch and ONNX Runtime at their default threading (the examples' own
default is one intra-op thread, the least noisy). Prints the verdicts, who decided them,
the process pairs and the comparing run's wall time against the plain run's of the same
repetition (the issue's "<= 2.5x a plain run").
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from decision_quality import MODES, Neighbour, commit_repo, git, process_pairs, pytest_run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NAMES = ("regression", "improvement", "unchanged", "no-regression", "inconclusive")


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    shutil.copytree(EXAMPLES, repo / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "pytest.ini").write_text("[pytest]\ntestpaths = examples\n")
    commit_repo(repo, "examples")
    return repo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--mode", choices=("stored", "ab"), default="stored")
    parser.add_argument("--neighbour", action="store_true", help="busy loops on every core")
    parser.add_argument("--keep", type=Path, help="copy each comparing run's JSON into this folder")
    parser.add_argument(
        "--threads", type=int, help="the examples' --threads (0: the libraries' default)"
    )
    args = parser.parse_args()
    # The examples' own options need their folder named (its conftest.py then loads first).
    extra = [] if args.threads is None else ["examples", f"--threads={args.threads}"]
    verdicts: collections.Counter[str] = collections.Counter()
    deciders: collections.Counter[str] = collections.Counter()
    # Why each interleaved verdict was interleaved: the session was routed at once
    # ("machine-moved"), or the stored pass's verdict that was settled.
    because: collections.Counter[str] = collections.Counter()
    moved: list[str] = []
    ab_seconds: dict[str, list[float]] = collections.defaultdict(list)
    # Seconds a worker process pair took to be ready for a benchmark (not its quads): with
    # workers started for it, or reused from an earlier benchmark.
    ready: dict[str, list[float]] = collections.defaultdict(list)
    undecided: list[str] = []
    regressed: list[str] = []
    pairs: list[int] = []
    detectable: list[float] = []
    ratios: list[float] = []
    runs_with_regression = 0
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp))
        for rep in range(args.reps):
            git(repo, "checkout", "-q", "main")
            if args.mode == "stored":
                pytest_run(repo, "--perf-save", *extra)  # quiet: the neighbour is off
            git(repo, "checkout", "-q", "-B", "aa", "main")
            git(repo, "commit", "-q", "--allow-empty", "-m", "A/A")
            with Neighbour(args.neighbour):
                _, _, plain = pytest_run(repo, *extra)
            with Neighbour(args.neighbour):
                doc, code, took = pytest_run(repo, "--perf-warn-only", *MODES[args.mode], *extra)
            ratios.append(took / plain)
            if args.keep is not None and doc is not None:
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / f"compare-{rep + 1}.json").write_text(json.dumps(doc))
            if doc is None:
                print(f"rep {rep + 1}: no JSON (exit {code})", file=sys.stderr)
                continue
            found: list[dict[str, Any]] = [b.get("comparison") or {} for b in doc["benchmarks"]]
            drift = (doc.get("comparison") or {}).get("environment_drift") or {}
            moved.append("moved" if drift.get("drifted") else "still" if drift else "no reference")
            if any(c.get("verdict") == "regression" for c in found):
                runs_with_regression += 1
            for b, c in zip(doc["benchmarks"], found, strict=True):
                verdicts[str(c.get("verdict", "none"))] += 1
                deciders[str(c.get("decided_by") or "-")] += 1
                because[str(c.get("settled_because") or "-")] += 1
                for p in process_pairs(b):
                    if p.get("head_process") != "this process" and "ready_seconds" in p:
                        kind = "new workers" if p.get("started_workers") else "reused workers"
                        ready[kind].append(float(p["ready_seconds"]))
                spent = (c.get("details") or {}).get("ab_seconds")
                if spent is not None:
                    ab_seconds[b["key"].split("::")[-1].split("[")[0]].append(float(spent))
                if c.get("process_pairs"):
                    pairs.append(int(c["process_pairs"]))
                if c.get("detectable") is not None:
                    detectable.append(float(c["detectable"]))
                if c.get("verdict") == "inconclusive":
                    undecided.append(f"{b['key'].split('::')[-1]} (rep {rep + 1})")
                if c.get("verdict") == "regression":
                    logs = (c.get("details") or {}).get("pair_log_ratios")
                    regressed.append(
                        f"{b['key'].split('::')[-1]} (rep {rep + 1}): x{c.get('ratio', 0):.3f} "
                        f"[{c.get('ci_low', 0):.3f}, {c.get('ci_high', 0):.3f}], "
                        f"{c.get('settled_because')}, pair log-ratios {logs}"
                    )
            print(
                f"rep {rep + 1}/{args.reps}: plain {plain:.0f} s, compare {took:.0f} s "
                f"({took / plain:.2f}x), exit {code} ({time.time() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    n = sum(verdicts.values())
    neighbour = "busy loop on every core" if args.neighbour else "quiet"
    print(
        f"\nreal models (examples/), A/A, mode {args.mode} ({' '.join(MODES[args.mode])}), "
        f"{neighbour}; {args.reps} repetitions; {time.time() - started:.0f} s"
        + ("" if args.threads is None else f"; --threads={args.threads}")
    )
    print(f"| benchmarks | {' | '.join(NAMES)} | runs with a regression | compare / plain |")
    print("|---|" + "---|" * (len(NAMES) + 2))
    shares = " | ".join(f"{verdicts[k]} ({100 * verdicts[k] / max(n, 1):.1f}%)" for k in NAMES)
    cost = f"median {statistics.median(ratios):.2f}x, max {max(ratios):.2f}x" if ratios else "-"
    print(f"| {n} | {shares} | {runs_with_regression}/{args.reps} | {cost} |")
    print(f"decided by: {dict(deciders)}; interleaved because: {dict(because)}")
    print(f"session-start reference against the baseline's: {dict(collections.Counter(moved))}")
    for test, spent in sorted(ab_seconds.items()):
        print(
            f"interleaved seconds, {test}: {len(spent)} verdicts, median "
            f"{statistics.median(spent):.1f} s, total {sum(spent):.0f} s"
        )
    if pairs:
        print(f"process pairs: median {statistics.median(pairs):g}, max {max(pairs)}")
    for kind, took in sorted(ready.items()):
        print(
            f"worker pairs ready, {kind}: {len(took)}, median {statistics.median(took):.2f} s, "
            f"range {min(took):.2f}-{max(took):.2f} s"
        )
    if detectable:
        print(
            f"detectable effect: median +{statistics.median(detectable):.1%}, "
            f"range +{min(detectable):.1%} to +{max(detectable):.1%}"
        )
    if undecided:
        print("inconclusive: " + ", ".join(undecided))
    for line in regressed:
        print("regression: " + line)


if __name__ == "__main__":
    main()
