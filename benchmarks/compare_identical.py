"""`infperf compare` of two plain runs of identical code, minutes apart, on this machine.

    python benchmarks/compare_identical.py [--tries 3]

Four small torch MLPs (one intra-op thread each), run twice with ``pytest --perf-json``
(a plain run: no probes of the machine's speed), then ``infperf compare a.json b.json``.
Identical code: the command must claim no change (no regression, no improvement) and exit
0, whatever the machine did between the runs. Prints each try's output and exit code, and
the raw ratios the two runs read.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SUITE = """
import pytest
import torch


@pytest.mark.parametrize("width", [64, 128, 256, 512])
def test_mlp(infer_bench, width):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width)
    ).eval()
    infer_bench(model, (torch.randn(8, width),))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=3)
    args = parser.parse_args()
    claimed = 0
    for attempt in range(1, args.tries + 1):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "test_mlps.py").write_text(SUITE)
            (root / "pytest.ini").write_text("[pytest]\n")
            for name in ("a", "b"):
                subprocess.run(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                     f"--perf-json={name}.json"],
                    cwd=root, check=True, capture_output=True,
                )  # fmt: skip
            out = subprocess.run(
                [sys.executable, "-m", "pytest_infperf", "compare", "a.json", "b.json"],
                cwd=root, capture_output=True, text=True, check=False,
            )  # fmt: skip
            a, b = (json.loads((root / f"{n}.json").read_text()) for n in ("a", "b"))
            raw = [
                y["stats"]["median"] / x["stats"]["median"]
                for x, y in zip(a["benchmarks"], b["benchmarks"], strict=True)
            ]
            said = out.stdout
            bad = ("REGRESSION" in said) or ("regression(s)" in said) or " improvement " in said
            claimed += bad or out.returncode != 0
            print(f"--- try {attempt}: exit {out.returncode}; raw median ratios b/a: "
                  + ", ".join(f"{r:.3f}" for r in raw))  # fmt: skip
            print(said.rstrip())
    print(f"\n{args.tries} tries, {claimed} claimed a change or exited non-zero")


if __name__ == "__main__":
    main()
