"""Stored baseline vs same-job A/B, side by side, through the real plugin.

    python benchmarks/ab_quality.py [--reps 3] [--workloads 12]

Same repository and suite as ``decision_quality.py`` (CPU workloads doing
``round(20 * factor)`` units of work). Every pytest run is pinned to one CPU core. Scenarios:

- ``A/A``: identical code;
- ``A/A+drift``: identical code, and halfway through the comparing run a CPU hog pinned to
  the same core starts (a noisy neighbour): the machine gets about 2x slower mid-run;
- ``+10%``, ``+20%``: more work on the branch.

Stored mode: the baseline is saved on ``main`` (quiet), then ``--perf-compare=main`` runs on
the branch. A/B mode: ``--perf-ab=main`` measures both sides in the same run. Prints the
share of benchmarks judged regression per mode and scenario, and how many runs exited 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from decision_quality import ENV, git, make_repo, scenario_branch

SCENARIOS = {"A/A": 1.0, "A/A+drift": 1.0, "+10%": 1.10, "+20%": 1.20}
CORE = int(os.environ.get("INFPERF_BENCH_CORE", "0"))


def pinned(cmd: list[str]) -> list[str]:
    return ["taskset", "-c", str(CORE), *cmd]


def hog_after(delay: float, stop: threading.Event) -> None:
    """Start a busy loop on the benchmark's core after ``delay`` seconds, until ``stop``."""
    if stop.wait(delay):
        return
    proc = subprocess.Popen(pinned([sys.executable, "-c", "while True: pass"]))
    stop.wait()
    proc.kill()
    proc.wait()


def run(
    repo: Path, args: list[str], drift_after: float | None
) -> tuple[dict[str, Any] | None, int, float]:
    out = repo / "out.json"
    if out.exists():
        out.unlink()
    stop = threading.Event()
    hog = None
    if drift_after is not None:
        hog = threading.Thread(target=hog_after, args=(drift_after, stop))
        hog.start()
    started = time.time()
    proc = subprocess.run(
        pinned(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--perf-json={out}",
                *args,
            ]
        ),
        cwd=repo,
        capture_output=True,
        env={**os.environ, **ENV},
        check=False,
    )
    took = time.time() - started
    stop.set()
    if hog is not None:
        hog.join()
    doc = json.loads(out.read_text()) if out.exists() else None
    return doc, proc.returncode, took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--workloads", type=int, default=12)
    parser.add_argument("--json", help="also write the raw verdicts here")
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help="comma-separated subset of: " + ", ".join(SCENARIOS).replace("%", "%%"),
    )  # argparse %-formats help
    parser.add_argument("--modes", default="stored,ab", help="stored, ab or both")
    args = parser.parse_args()
    wanted = {s: f for s, f in SCENARIOS.items() if s in args.scenarios.split(",")}
    verdicts: dict[tuple[str, str], list[str]] = {}
    exits: dict[tuple[str, str], list[int]] = {}
    durations: dict[str, float] = {}
    raw: list[dict[str, Any]] = []
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp), args.workloads)
        for rep in range(args.reps):
            for mode in [m for m in ("stored", "ab") if m in args.modes.split(",")]:
                if mode == "stored":
                    git(repo, "checkout", "-q", "main")
                    run(repo, ["--perf-save"], None)
                for label, factor in wanted.items():
                    scenario_branch(repo, label.replace("+drift", "d"), factor)
                    flag = "--perf-compare=main" if mode == "stored" else "--perf-ab=main"
                    expected = durations.get(mode, 30.0 if mode == "stored" else 45.0)
                    drift = expected / 2 if label.endswith("drift") else None
                    doc, code, took = run(repo, [flag], drift)
                    if drift is None:
                        durations[mode] = took
                    key = (mode, label)
                    exits.setdefault(key, []).append(code)
                    if doc is None:
                        print(f"rep {rep} {mode} {label}: no JSON", file=sys.stderr)
                        continue
                    verdicts.setdefault(key, []).extend(
                        (b.get("comparison") or {}).get("verdict", "none")
                        for b in doc["benchmarks"]
                    )
                    raw.extend(
                        {
                            "mode": mode,
                            "scenario": label,
                            "rep": rep,
                            "key": b["key"],
                            "comparison": {
                                k: v
                                for k, v in (b.get("comparison") or {}).items()
                                if k != "message"
                            },
                        }
                        for b in doc["benchmarks"]
                    )
            print(
                f"rep {rep + 1}/{args.reps} done ({time.time() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    print(
        f"\n{args.reps} repetitions x {args.workloads} workloads, pinned to core {CORE}; "
        f"threshold 5%, alpha 0.05; {time.time() - started:.0f} s"
    )
    print(
        "| scenario | stored: regression | stored: runs exit 1 | stored: withheld by the drift "
        "guard | A/B: regression | A/B: runs exit 1 | A/B: unchanged | A/B: inconclusive |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label in wanted:
        cells = [label]
        for mode in ("stored", "ab"):
            v = verdicts.get((mode, label), [])
            e = exits.get((mode, label), [])
            n = len(v)
            share = (
                f"{v.count('regression')}/{n} ({100 * v.count('regression') / n:.1f}%)"
                if n
                else "-"
            )
            cells += [share, f"{sum(c == 1 for c in e)}/{len(e)}"]
            if mode == "stored":
                # regressions the stored mode would have reported but for the drift guard
                held = sum(
                    "withheld" in str(r["comparison"].get("note") or "")
                    for r in raw
                    if r["mode"] == mode and r["scenario"] == label
                )
                cells.append(f"{held}/{n}" if n else "-")
            if mode == "ab" and n:
                cells += [
                    f"{100 * v.count('unchanged') / n:.0f}%",
                    f"{100 * v.count('inconclusive') / n:.0f}%",
                ]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"verdicts": {f"{m}|{s}": v for (m, s), v in verdicts.items()}, "raw": raw})
        )


if __name__ == "__main__":
    main()
