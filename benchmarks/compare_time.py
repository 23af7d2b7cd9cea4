"""Where a comparing run's time went, from its results JSON alone.

``python benchmarks/compare_time.py RUN.json ...`` (the JSON ``real_models.py --keep DIR``
copies, or any ``--perf-compare``/``--perf-ab`` run's ``--perf-json``). For each run, its
session's seconds split into:

- quads: the process pairs' interleaved blocks, both sides timed in turn;
- pairs' readiness, new workers: a process pair started for the first time (two worker
  processes import the libraries and collect the tests), then brought to the call;
- pairs' readiness, reused workers: both sides' test bodies run to the call, one after the
  other (the first pair's base side in the controller's worker);
- the rest of the interleaving: profiled passes, calibration, finishing each pair's call;
- the head's own: collection, this process's test bodies (model builds, warm-up), stored
  passes, the session-start reference, and the workers' exit.

What a compare costs over a plain run is most of the first four: a plain run has only the
last (``real_models.py`` prints their ratio).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from decision_quality import process_pairs

PARTS = (
    "quads",
    "readiness, new workers",
    "readiness, reused workers",
    "rest of the interleaving",
    "the head's own",
)


def split(doc: dict[str, Any]) -> tuple[dict[str, float], int, int, list[float]]:
    """The run's seconds by part, its interleaved verdicts, process pairs, and the
    readiness of each pair that started workers."""
    total = float(doc.get("run_seconds") or 0.0)
    parts = dict.fromkeys(PARTS, 0.0)
    verdicts = pairs = 0
    started: list[float] = []
    for bench in doc.get("benchmarks") or []:
        ran = process_pairs(bench)
        details = (bench.get("comparison") or {}).get("details") or {}
        if not ran or details.get("ab_seconds") is None:
            continue
        verdicts += 1
        pairs += len(ran)
        interleaving = float(details["ab_seconds"])
        for k, pair in enumerate(ran):
            ready = float(pair.get("ready_seconds") or 0.0)
            new = bool(pair.get("started_workers"))
            started += [ready] if new else []
            parts["quads"] += float(pair.get("seconds") or 0.0)
            parts["readiness, new workers" if new else "readiness, reused workers"] += ready
            if k == 0:  # pair 1 is made ready before its interleaving's clock starts
                interleaving += ready
        parts["rest of the interleaving"] += interleaving - sum(
            float(p.get("seconds") or 0.0) + float(p.get("ready_seconds") or 0.0) for p in ran
        )
    parts["the head's own"] = total - sum(parts.values())
    return parts, verdicts, pairs, started


def report(paths: Sequence[Path]) -> None:
    totals = dict.fromkeys(PARTS, 0.0)
    starts: list[float] = []
    print("| run | seconds | interleaved | pairs (started) | " + " | ".join(PARTS) + " |")
    print("|---|---|---|---|" + "---|" * len(PARTS))
    for path in paths:
        doc = json.loads(path.read_text())
        parts, verdicts, pairs, started = split(doc)
        starts += started
        total = sum(parts.values())
        for key in PARTS:
            totals[key] += parts[key]
        shares = " | ".join(f"{parts[k]:.0f} s ({parts[k] / total:.0%})" for k in PARTS)
        print(
            f"| {path.parent.name}/{path.name} | {total:.0f} | {verdicts} | "
            f"{pairs} ({len(started)}) | {shares} |"
        )
    whole = sum(totals.values())
    if len(paths) > 1 and whole > 0:
        shares = " | ".join(f"{totals[k]:.0f} s ({totals[k] / whole:.0%})" for k in PARTS)
        print(f"| all {len(paths)} | {whole:.0f} | | | {shares} |")
    if starts:
        print(
            f"pairs that started workers: {len(starts)}, ready in a median "
            f"{statistics.median(starts):.1f} s, {min(starts):.1f}-{max(starts):.1f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="comparing runs' results JSON")
    report(parser.parse_args().runs)


if __name__ == "__main__":
    main()
