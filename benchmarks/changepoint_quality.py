"""Change points on synthetic histories: false steps on flat ones, hits on real steps.

    python benchmarks/changepoint_quality.py [--histories 100] [--points 200] [--cv 0.05]

Each history is ``--points`` per-commit medians with lognormal noise of ``--cv`` (5%: what
a benchmark's median moves between runs minutes apart on the 2-core development machine,
docs/MEASURED.md). Flat histories count how many report any step (a false step); stepped
ones (a 3% and a 5% step at a random commit between the 20th and the 180th) count how
many report a step within 5 commits of the true one. Both for ``stats.changepoint.detect``
(permutation test of the best split) and for what it did before (a Welch test of the best
split as if it had been chosen in advance), at the minimum magnitudes 5% and 2% (the
default). Last, how well a 5% step is placed, apart from testing it: the single best split
against the centre of the 11-commit window with the most posterior mass (what ``detect``
names).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pytest_infperf.stats import changepoint as cp


def welch_detect(values: np.ndarray, p_max: float, min_magnitude: float) -> list[int]:
    """The former rule: the best split, kept when Welch's p <= p_max (selection ignored)."""
    arr = np.log(values)
    found: list[int] = []

    def visit(lo: int, hi: int) -> None:
        seg = arr[lo:hi]
        split = cp._best_split(seg)
        if split is None:
            return
        a, b = seg[:split], seg[split:]
        p = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
        if p <= p_max and abs(math.exp(float(b.mean() - a.mean())) - 1) >= min_magnitude:
            found.append(lo + split)
            visit(lo, lo + split)
            visit(lo + split, hi)

    visit(0, len(arr))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", type=int, default=100)
    parser.add_argument("--points", type=int, default=200)
    parser.add_argument("--cv", type=float, default=0.05)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    n, sigma = args.points, math.sqrt(math.log(1 + args.cv**2))
    flat = [np.exp(rng.normal(0, sigma, n)) for _ in range(args.histories)]
    stepped = {}
    for step in (0.03, 0.05):
        series = []
        for _ in range(args.histories):
            at = int(rng.integers(20, 181))
            x = np.exp(rng.normal(0, sigma, n))
            x[at:] *= 1 + step
            series.append((at, x))
        stepped[step] = series
    print(f"{args.histories} histories of {n} points, CV {args.cv:.0%}")
    for min_mag, p_max in ((0.05, 0.001), (0.02, 0.001), (0.02, 0.01), (0.02, 0.005)):
        for name, detect in (
            (
                f"permutation p {p_max:g}",
                lambda x, m=min_mag, p=p_max: [c.index for c in cp.detect(x, p, m)],
            ),
            (f"Welch p {p_max:g} (before)", lambda x, m=min_mag, p=p_max: welch_detect(x, p, m)),
        ):
            false = sum(bool(detect(x)) for x in flat)
            hits = {
                s: sum(any(abs(i - at) <= 5 for i in detect(x)) for at, x in series)
                for s, series in stepped.items()
            }
            print(
                f"min step {min_mag:.0%}, {name:26}: flat histories with a step "
                f"{false}/{args.histories}; 3% steps found {hits[0.03]}/{args.histories}, "
                f"5% steps found {hits[0.05]}/{args.histories}"
            )
    # Placing a step, apart from testing it: the single best split against the centre of
    # the window with the most posterior mass (what detect() names), on 1000 histories.
    best = window = 0
    for _ in range(1000):
        at = int(rng.integers(20, 181))
        x = np.log(np.exp(rng.normal(0, sigma, n)) * np.where(np.arange(n) >= at, 1.05, 1.0))
        best += abs(cp._best_split(x) - at) <= 5  # type: ignore[operator]
        window += abs(cp._locate(x) - at) <= 5  # type: ignore[operator]
    print(
        f"placing a 5% step (1000 histories): the best split within 5 commits {best}/1000, "
        f"the window's centre {window}/1000"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
