"""Identical code on real models, through the real plugin: verdicts and what a compare costs.

    python benchmarks/real_models.py [--reps 5] [--mode stored|ab] [--neighbour] [--threads N]
        [--suite examples|second] [--slowdown F] [-k EXPR] [--variants='ARGS;ARGS'] [--keep DIR]

The suite is this project's ``examples/`` (the main job's benchmarks: a torch and an ONNX
Runtime MLP at batch 1 and 32, DistilBERT and BERT-base in torch and ONNX Runtime at
sequence 32 and 128, and tiny Llama and GPT-2 ``generate()`` with eager and static cache at
prompt 32 and 256; models built from configs, no network), copied into a temporary git
repository. Stored mode saves the baseline on ``main`` once per repetition; each repetition
then runs, on a branch with an empty commit (identical code, A/A), a plain ``pytest`` and
the comparing run (``--perf-compare=main`` or ``--perf-ab=main``), one after the other.
``--slowdown 1.10`` makes that branch slower instead: every model call takes 1.10 times its
own time (``benchmarks/slowdown_conftest.py``, a busy wait after each call), so every
verdict should be a regression.
``--threads 0`` runs torch and ONNX Runtime at their default threading (the examples' own
default is one intra-op thread, the least noisy). ``-k`` narrows the examples (``-k
generation``); ``--variants`` runs each repetition once per set of pytest arguments, in
turn, and reports each apart (``--variants='-o infperf_expert=heap=steady;-o
infperf_expert=heap=system'``: the comparison behind the expert ``heap`` setting). Prints
the verdicts, who decided them, the process pairs and the spread of their log-ratios (the
first pair apart from the later ones), whether the two sides are exchangeable (intervals
wholly above or below 1.0 against what their level allows, the pair-index slope, the
first-pair offset: an A/A ``--mode ab`` run's calibration), and the comparing run's wall
time against the plain run's of the same repetition.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from decision_quality import MODES, Neighbour, commit_repo, git, process_pairs, pytest_run

from pytest_infperf.report.notices import UNGATED

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SLOWDOWN = Path(__file__).resolve().parent / "slowdown_conftest.py"
NAMES = ("regression", "improvement", "unchanged", "no-regression", "inconclusive")


#: The suites: this project's examples, and a second of the families they lack (issue 47).
SUITES = {"examples": EXAMPLES, "second": Path(__file__).resolve().parent / "second_suite"}


def make_repo(root: Path, suite: str = "examples", slowdown: bool = False) -> Path:
    repo = root / "repo"
    source = SUITES[suite]
    shutil.copytree(source, repo / source.name, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "pytest.ini").write_text(f"[pytest]\ntestpaths = {source.name}\n")
    if slowdown:  # the hooks on both sides, the factor 1.0 on main
        shutil.copy(SLOWDOWN, repo / "conftest.py")
        (repo / "slowdown.txt").write_text("1.0")
    commit_repo(repo, suite)
    return repo


class Tally:
    """What one variant's comparing runs found."""

    def __init__(self) -> None:
        self.verdicts: collections.Counter[str] = collections.Counter()
        self.deciders: collections.Counter[str] = collections.Counter()
        # Why each interleaved verdict was interleaved: the session was routed at once
        # ("machine-moved"), or the stored pass's verdict that was settled.
        self.because: collections.Counter[str] = collections.Counter()
        self.moved: list[str] = []
        self.ab_seconds: dict[str, list[float]] = collections.defaultdict(list)
        # Seconds a worker process pair took to be ready for a benchmark (not its quads):
        # with workers started for it, or reused from an earlier benchmark.
        self.ready: dict[str, list[float]] = collections.defaultdict(list)
        self.undecided: list[str] = []
        self.regressed: list[str] = []
        self.pairs: list[int] = []
        self.detectable: list[float] = []
        self.ratios: list[float] = []
        # Root mean square of the process pairs' log-ratios, per metric (A/A: the spread
        # between processes that pooling has to average out).
        self.pair_logs: dict[str, list[float]] = collections.defaultdict(list)
        # The first process pair (this process as the head, a worker as the base) apart from
        # the later ones (two workers): both sides of a pair must compete for the CPU alike.
        self.first_pairs: dict[str, list[float]] = collections.defaultdict(list)
        self.later_pairs: dict[str, list[float]] = collections.defaultdict(list)
        self.runs = 0
        self.runs_with_regression = 0
        # Exchangeability of the two sides (identical code): per interleaved verdict, which
        # side of 1.0 its interval lies wholly on ("above", "below", "" for neither) and its
        # level; per verdict of three or more process pairs, the slope of its pair
        # log-ratios over the pair's index.
        self.sides: list[tuple[str, float]] = []
        self.slopes: list[float] = []

    def add(self, doc: dict[str, Any], rep: int) -> None:
        self.runs += 1
        found: list[dict[str, Any]] = [b.get("comparison") or {} for b in doc["benchmarks"]]
        drift = (doc.get("comparison") or {}).get("environment_drift") or {}
        self.moved.append("moved" if drift.get("drifted") else "still" if drift else "no reference")
        if any(c.get("verdict") == "regression" for c in found):
            self.runs_with_regression += 1
        for b, c in zip(doc["benchmarks"], found, strict=True):
            self.verdicts[str(c.get("verdict", "none"))] += 1
            self.deciders[str(c.get("decided_by") or "-")] += 1
            self.because[str(c.get("settled_because") or "-")] += 1
            for p in process_pairs(b):
                if p.get("head_process") != "this process" and "ready_seconds" in p:
                    kind = "new workers" if p.get("started_workers") else "reused workers"
                    self.ready[kind].append(float(p["ready_seconds"]))
            details = c.get("details") or {}
            spent = details.get("ab_seconds")
            if spent is not None:
                self.ab_seconds[b["key"].split("::")[-1].split("[")[0]].append(float(spent))
            logs = details.get("pair_log_ratios") or {}
            if c.get("decided_by") == "ab" and c.get("ci_low") and c.get("ci_high"):
                low, high = float(c["ci_low"]), float(c["ci_high"])
                side = "above" if low > 1.0 else "below" if high < 1.0 else ""
                self.sides.append((side, float(c.get("ci_level") or 0.9)))
            for values in logs.values():
                if len(values) >= 3:
                    self.slopes.append(_slope([float(v) for v in values]))
            for metric, values in logs.items():
                self.pair_logs[metric] += [float(v) for v in values]
                if values:
                    self.first_pairs[metric].append(float(values[0]))
                    self.later_pairs[metric] += [float(v) for v in values[1:]]
            if c.get("process_pairs"):
                self.pairs.append(int(c["process_pairs"]))
            if c.get("detectable") is not None:
                self.detectable.append(float(c["detectable"]))
            if c.get("verdict") == "inconclusive":
                self.undecided.append(f"{b['key'].split('::')[-1]} (rep {rep})")
            if c.get("verdict") == "regression":
                self.regressed.append(
                    f"{b['key'].split('::')[-1]} (rep {rep}): x{c.get('ratio', 0):.3f} "
                    f"[{c.get('ci_low', 0):.3f}, {c.get('ci_high', 0):.3f}], "
                    f"{c.get('settled_because')}, pair log-ratios {logs}"
                )

    def report(self, title: str) -> None:
        n = sum(self.verdicts.values())
        print(f"\n{title}")
        print(f"| benchmarks | {' | '.join(NAMES)} | runs with a regression | compare / plain |")
        print("|---|" + "---|" * (len(NAMES) + 2))
        shares = " | ".join(
            f"{self.verdicts[k]} ({100 * self.verdicts[k] / max(n, 1):.1f}%)" for k in NAMES
        )
        ratios = self.ratios
        cost = f"median {statistics.median(ratios):.2f}x, max {max(ratios):.2f}x" if ratios else "-"
        print(f"| {n} | {shares} | {self.runs_with_regression}/{self.runs} | {cost} |")
        if ratios:
            print("compare / plain per run: " + ", ".join(f"{r:.2f}x" for r in ratios))
        print(f"decided by: {dict(self.deciders)}; interleaved because: {dict(self.because)}")
        moved = dict(collections.Counter(self.moved))
        print(f"session-start reference against the baseline's: {moved}")
        for test, spent in sorted(self.ab_seconds.items()):
            print(
                f"interleaved seconds, {test}: {len(spent)} verdicts, median "
                f"{statistics.median(spent):.1f} s, total {sum(spent):.0f} s"
            )
        if self.pairs:
            print(f"process pairs: median {statistics.median(self.pairs):g}, max {max(self.pairs)}")
        for metric, logs in sorted(self.pair_logs.items()):
            rms = math.sqrt(statistics.fmean(v * v for v in logs))
            print(f"pair log-ratios, {metric}: rms {rms:.2%} (n {len(logs)})")
        for metric in sorted(self.first_pairs):
            first, later = self.first_pairs[metric], self.later_pairs[metric]
            line = f"first pairs, {metric}: mean {statistics.fmean(first):+.3f}"
            line += f", rms {_rms(first):.2%} (n {len(first)})"
            if later:
                line += f"; later pairs: mean {statistics.fmean(later):+.3f}"
                line += f", rms {_rms(later):.2%} (n {len(later)})"
            print(line)
        self._exchangeable()
        for kind, took in sorted(self.ready.items()):
            print(
                f"worker pairs ready, {kind}: {len(took)}, median "
                f"{statistics.median(took):.2f} s, range {min(took):.2f}-{max(took):.2f} s"
            )
        if self.detectable:
            d = self.detectable
            print(
                f"detectable effect: median +{statistics.median(d):.1%}, "
                f"range +{min(d):.1%} to +{max(d):.1%}"
            )
        if self.undecided:
            print("inconclusive: " + ", ".join(self.undecided))
        for line in self.regressed:
            print("regression: " + line)

    def _exchangeable(self) -> None:
        """Whether the two sides of an interleaving are exchangeable, as identical code must
        make them: how often an interval excludes 1.0 on each side against what its level
        allows, the trend of the pair log-ratios over the pairs of a verdict, and the first
        pair (this process as the head) against the later ones (two workers)."""
        if self.sides:
            n = len(self.sides)
            level = statistics.fmean(lv for _, lv in self.sides)
            allowed = n * (1 - level) / 2
            above = sum(1 for side, _ in self.sides if side == "above")
            below = sum(1 for side, _ in self.sides if side == "below")
            print(
                f"exchangeable sides: {n} interleaved verdicts at a {level:.0%} level; the "
                f"interval wholly above 1.0: {above}, wholly below: {below} (each side "
                f"allows {allowed:.1f} by chance)"
            )
        if len(self.slopes) >= 2:
            mean, se = statistics.fmean(self.slopes), _se(self.slopes)
            print(
                f"pair-index slope of the log-ratios: mean {mean:+.4f} a pair, se {se:.4f} "
                f"(t {mean / se if se else 0:+.2f}, {len(self.slopes)} verdicts of 3+ pairs)"
            )
        for metric in sorted(self.first_pairs):
            first, later = self.first_pairs[metric], self.later_pairs[metric]
            if len(first) >= 2 and len(later) >= 2:
                offset = statistics.fmean(first) - statistics.fmean(later)
                se = math.hypot(_se(first), _se(later))
                print(
                    f"first-pair offset, {metric}: {offset:+.4f} (se {se:.4f}, "
                    f"t {offset / se if se else 0:+.2f})"
                )


def _slope(values: list[float]) -> float:
    """The least-squares slope of ``values`` over their index."""
    n = len(values)
    mx, my = (n - 1) / 2, statistics.fmean(values)
    sxx = sum((i - mx) ** 2 for i in range(n))
    return sum((i - mx) * (v - my) for i, v in enumerate(values)) / sxx


def _se(values: list[float]) -> float:
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) >= 2 else 0.0


def _rms(values: list[float]) -> float:
    return math.sqrt(statistics.fmean(v * v for v in values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--mode", choices=("stored", "ab"), default="stored")
    parser.add_argument(
        "--suite",
        choices=tuple(SUITES),
        default="examples",
        help="examples (the main job's) or second (benchmarks/second_suite: an audio "
        "encoder, a seq2seq generate(), a compiled model, ONNX Runtime at default "
        "threading, a CNN)",
    )
    parser.add_argument("--neighbour", action="store_true", help="busy loops on every core")
    parser.add_argument("--keep", type=Path, help="copy each comparing run's JSON into this folder")
    parser.add_argument(
        "--threads", type=int, help="the examples' --threads (0: the libraries' default)"
    )
    parser.add_argument(
        "--slowdown",
        type=float,
        help="a factor (1.10: +10%%): the branch under test makes every model call that "
        "much slower (benchmarks/slowdown_conftest.py) instead of changing nothing",
    )
    parser.add_argument("-k", dest="keyword", help="only the examples matching this -k expression")
    parser.add_argument(
        "--variants",
        default="",
        help="';'-separated pytest arguments, given with '=' "
        "(--variants='-o infperf_expert=heap=system;...'): each repetition runs every "
        "variant in turn (its save, plain run and compare), and each is reported apart",
    )
    args = parser.parse_args()
    # The examples' own options need their folder named (its conftest.py then loads first).
    if args.threads is not None and args.suite != "examples":
        parser.error("--threads is the examples' option; the second suite runs at defaults")
    extra = [] if args.threads is None else ["examples", f"--threads={args.threads}"]
    if args.keyword:
        extra += ["-k", args.keyword]
    variants = [v.strip() for v in args.variants.split(";")] if args.variants else [""]
    scenario = "A/A" if args.slowdown is None else f"x{args.slowdown:g}"
    tallies = {v: Tally() for v in variants}
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp), args.suite, args.slowdown is not None)
        for rep in range(1, args.reps + 1):
            for variant in variants:
                tally, own = tallies[variant], [*extra, *variant.split()]
                git(repo, "checkout", "-q", "main")
                if args.mode == "stored":
                    pytest_run(repo, "--perf-save", *own)  # quiet: the neighbour is off
                git(repo, "checkout", "-q", "-B", "aa", "main")
                if args.slowdown is not None:
                    (repo / "slowdown.txt").write_text(str(args.slowdown))
                git(repo, "commit", "-q", "--allow-empty", "-am", scenario)
                with Neighbour(args.neighbour):
                    _, _, plain = pytest_run(repo, *own)
                with Neighbour(args.neighbour):
                    doc, code, took = pytest_run(repo, "--perf-warn-only", *MODES[args.mode], *own)
                tally.ratios.append(took / plain)
                name = f"compare-{rep}" + (f"-{variants.index(variant) + 1}" if variant else "")
                if args.keep is not None and doc is not None:
                    args.keep.mkdir(parents=True, exist_ok=True)
                    (args.keep / f"{name}.json").write_text(json.dumps(doc))
                if doc is None:
                    print(f"rep {rep} {variant}: no JSON (exit {code})", file=sys.stderr)
                    continue
                tally.add(doc, rep)
                # What the run said of the benchmarks its noise left ungated (once, or not).
                for line in doc.get("warnings") or []:
                    if line.startswith(UNGATED):
                        print(f"rep {rep} {variant}: said: {line}", file=sys.stderr)
                print(
                    f"rep {rep}/{args.reps} {variant}: plain {plain:.0f} s, compare {took:.0f} s "
                    f"({took / plain:.2f}x), exit {code} ({time.time() - started:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    neighbour = "busy loop on every core" if args.neighbour else "quiet"
    head = (
        f"real models ({args.suite}), {scenario}, mode {args.mode} ({' '.join(MODES[args.mode])}), "
        f"{neighbour}; {args.reps} repetitions; {time.time() - started:.0f} s"
        + ("" if args.threads is None else f"; --threads={args.threads}")
        + ("" if not args.keyword else f"; -k {args.keyword!r}")
    )
    for variant, tally in tallies.items():
        tally.report(head + (f"; {variant}" if variant else ""))


if __name__ == "__main__":
    main()
