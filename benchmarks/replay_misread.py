"""Replay the stored-pass misread rule (``pytest_infperf.judge.policy.misread``) on kept runs.

    python benchmarks/replay_misread.py DIR [DIR ...]

Each DIR holds comparing runs' JSON (``real_models.py --keep DIR``). For every run whose
stored pass ran, in the benchmarks' order: the settled verdicts whose stored pass and
interleaved run the rule calls a misread, the first of them, and which stored-only
verdicts came after it (those the session now interleaves or settles instead). A run
whose reference moved has no stored pass and is skipped. The negative control: on A/A
runs the rule should fire only where the stored pass flagged what interleaving cleared.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pytest_infperf.core.names import CompareMode
from pytest_infperf.core.results import Comparison, Verdict
from pytest_infperf.judge.policy import misread


def _comparison(c: dict[str, Any]) -> Comparison:
    decided = c.get("decided_by")
    return Comparison(
        verdict=Verdict(c["verdict"]),
        threshold=float(c.get("threshold") or 0.05),
        ratio=c.get("ratio"),
        ci_low=c.get("ci_low"),
        ci_high=c.get("ci_high"),
        decided_by=CompareMode(decided) if decided else None,
    )


def replay(path: Path) -> str | None:
    doc = json.loads(path.read_text())
    first: str | None = None
    fired: list[str] = []
    after: list[str] = []
    stored_pass = False
    for bench in doc["benchmarks"]:
        c = bench.get("comparison") or {}
        name = bench["key"].split("::")[-1]
        if c.get("decided_by") == "stored":
            stored_pass = True
            if first is not None:
                after.append(f"{name} ({c['verdict']} x{c.get('ratio') or 0:.3f})")
        elif isinstance(c.get("stored_pass"), dict):
            stored_pass = True
            ratio = misread(_comparison(c["stored_pass"]), _comparison(c))
            if ratio is not None:
                fired.append(f"{name} (x{ratio:.3f})")
                first = first or name
    if not stored_pass:
        return None
    return (
        f"{path}: fires on {len(fired)}: {', '.join(fired) or 'none'}; "
        f"stored-only verdicts after the first: {', '.join(after) or 'none'}"
    )


def main() -> None:
    runs = sorted(p for d in sys.argv[1:] for p in Path(d).glob("*.json"))
    lines = [line for line in map(replay, runs) if line]
    print("\n".join(lines))
    print(f"{len(lines)} of {len(runs)} runs took a stored pass")


if __name__ == "__main__":
    main()
