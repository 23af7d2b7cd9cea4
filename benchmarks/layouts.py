"""Which code each side ran, on real projects: every layout and install mode of the test
table, compared with ``--perf-ab=main``, the head's model half as deep again (+50% FLOPs)
beside an untouched benchmark.

    python benchmarks/layouts.py [--cells src:editable,src:wheel] [--same]

Each cell is a fresh git repository and virtual environment (tests/layouts.py): the base on
``main``, the head on ``feature``, the project installed from the head by pip as a CI job
installs it. Prints per cell the changed and the untouched benchmark's ratio and verdict,
where the base side's model module came from (its JSON origins), and the run's seconds.
``--same``: the head changes only its README (identical code on both sides). One run at a
time: nothing else should run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.layouts import compiled_project, project  # noqa: E402

CELLS = [
    "beside:none",
    "flat:editable",
    "flat:editable-strict",
    "flat:wheel",
    "flat:hatch-exact",
    "src:editable",
    "src:editable-strict",
    "src:wheel",
    "src:hatch-editable",
    "src:hatch-exact",
    "several:editable",
    "several:wheel",
    "namespace:editable",
    "namespace:wheel",
    "nested:editable",
    "nested:wheel",
    "moved:editable",
    "child:editable",
    "child:wheel",
    "conftest:none",
    "pythonpath:none",
    "compiled:editable",
]
ARGS = ("tests/perf", "--perf-ab=main", "--perf-json=results/ab.json", "-p", "no:cacheprovider")


def cell(folder: Path, layout: str, install: str, change: str) -> str:
    if layout == "compiled":
        proj = compiled_project(folder, change=change)
    else:
        proj = project(folder, layout, install, change=change)
    started = time.perf_counter()
    done = proj.pytest(*ARGS)
    seconds = time.perf_counter() - started
    try:
        doc = json.loads((proj.root / "results" / "ab.json").read_text())
    except (OSError, ValueError):
        return f"{layout:10} {install:16} no results (exit {done.returncode})"
    rows = {b["nodeid"].split("::")[-1]: b for b in doc["benchmarks"]}
    changed = rows.get("test_mlp_latency") or rows.get("test_extension") or {}
    same = rows.get("test_untouched") or {}

    def fmt(b: dict) -> str:
        c = b.get("comparison") or {}
        ratio = c.get("ratio")
        return f"{ratio:.3f} {c.get('verdict')}" if ratio else str(c.get("verdict"))

    origins = ((changed.get("extra") or {}).get("ab") or {}).get("origins") or {}
    model = {
        "namespace": "acme.tinymodels",
        "nested": "acme.vision.tinymodels",
        "several": "tinylayers",
        "compiled": "fastext",
    }
    module = model.get(layout, "tinymodels")
    where = ",".join(k for k, mods in (origins.get("base") or {}).items() if module in mods)
    return (
        f"{layout:10} {install:16} {fmt(changed):24} {fmt(same):24} "
        f"{where or '-':18} {seconds:5.0f} s  exit {done.returncode}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default=",".join(CELLS))
    parser.add_argument("--same", action="store_true", help="identical code on both sides")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    change = "same" if args.same else "slower"
    print(f"pytest-infperf {commit}: --perf-ab=main, head change: {change}")
    print(f"{'layout':10} {'install':16} {'changed':24} {'untouched':24} {'base model from':18}")
    for spec in args.cells.split(","):
        layout, install = spec.split(":")
        with tempfile.TemporaryDirectory(prefix="infperf-layout-") as tmp:
            print(cell(Path(tmp), layout, install, change), flush=True)


if __name__ == "__main__":
    main()
