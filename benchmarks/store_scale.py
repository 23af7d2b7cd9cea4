"""The baseline store at scale: how long and how much memory what a CI job asks of it takes.

    python benchmarks/store_scale.py [--files 1000] [--benchmarks 200] [--keep-raw 50]
        [--workdir DIR] [--keep]

1. A real run: a project of ``--benchmarks`` benchmarks is saved with ``pytest --perf-save``
   (short budgets, ~150 samples per benchmark): the seed baseline.
2. A repository of ``--files`` commits (git fast-import) and, for each commit, the seed
   cloned with that commit's id and its samples and statistics jittered (1% noise, one step
   of +8% half way). As ``infperf prune --keep-raw K`` leaves a store: the newest
   ``--keep-raw`` files raw (indented, every sample), the older ones compact (``compact.py``).
3. Timed, each in its own process, with the peak memory of that process and its children
   (``ru_maxrss``): ``infperf list`` (the index built from nothing, then up to date),
   ``history`` of one benchmark and of all over every commit, ``report --html`` over every
   commit, finding and loading the ``--perf-compare`` baseline, ``baselines push`` of the
   whole store (the first push), ``push`` and ``pull`` of one new baseline, a fresh
   ``pull`` into an empty folder (all of it, and ``--depth 60`` as a comparing job does),
   ``prune --keep-raw`` of one raw file more, and the packed size of the baselines branch
   after ``push --squash`` and ``git gc``.

Prints a Markdown table. Needs about ``files x 0.5 MB`` of disk, twice (two clones).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_infperf.core.results import dumps
from pytest_infperf.store.compact import compact_document, dumps_compact

TEST_FILE = """
import pytest


@pytest.mark.parametrize("i", range({m}))
def test_model(infer_bench, i):
    infer_bench(lambda: sum(range(20 + i % 7)), name="layer%03d" % i)
"""

INI = """
[pytest]
infperf_max_time = 0.02
infperf_warmup = 2
infperf_rounds = 150
infperf_expert = warmup_time=0.005 max_rounds=150
"""

#: Runs one command and prints its wall time and the peak RSS of it and its children.
MEASURE = r"""
import resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(f"{wall:.3f} {rss} {p.returncode}")
if p.returncode:
    print(p.stderr[-2000:], file=sys.stderr)
"""

GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


def git(cwd: Path, *args: str, **kw: Any) -> str:
    out = subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={**os.environ, **GIT_ENV},
        **kw,
    )
    return out.stdout.decode().strip() if isinstance(out.stdout, bytes) else str(out.stdout)


def seed(work: Path, m: int) -> dict[str, Any]:
    """One real baseline of ``m`` benchmarks, by pytest --perf-save."""
    proj = work / "seed"
    proj.mkdir()
    (proj / "test_seed.py").write_text(TEST_FILE.format(m=m))
    (proj / "pytest.ini").write_text(INI)
    git(proj, "init", "-q", "-b", "main")
    git(proj, "add", ".")
    git(proj, "commit", "-qm", "seed")
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "--perf-save"],
        cwd=proj,
        check=True,
        capture_output=True,
    )
    (path,) = list((proj / "baselines").glob("*/*.json"))
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def make_repo(repo: Path, n: int) -> list[str]:
    """``n`` commits on main (fast-import); their shas, oldest first."""
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    lines = []
    for i in range(1, n + 1):
        msg = f"change {i}\n".encode()
        body = f"version {i}\n".encode()
        lines.append(b"commit refs/heads/main\nmark :%d\n" % i)
        lines.append(b"committer bench <bench@example.com> %d +0000\n" % (1_700_000_000 + i * 60))
        lines.append(b"data %d\n%s" % (len(msg), msg))
        if i > 1:
            lines.append(b"from :%d\n" % (i - 1))
        lines.append(b"M 644 inline src.txt\ndata %d\n%s\n" % (len(body), body))
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=b"".join(lines), check=True)
    git(repo, "checkout", "-q", "main")
    (repo / ".gitignore").write_text("baselines/\n*.html\n")
    return git(repo, "rev-list", "--reverse", "--first-parent", "main").split()


def _scale(stats: dict[str, Any], f: float) -> dict[str, Any]:
    keep = {"n", "cv", "outliers", "noise", "low_sample_percentiles", "ci_level"}
    keep |= {"ci_rel_halfwidth"}
    return {
        k: (v if k in keep or not isinstance(v, (int, float)) else v * f) for k, v in stats.items()
    }


def clone_doc(base: dict[str, Any], sha: str, i: int, n: int, rng: random.Random) -> dict[str, Any]:
    doc = dict(base)
    doc["commit"] = {
        **(base.get("commit") or {}),
        "sha": sha,
        "short": sha[:7],
        "subject": f"change {i + 1}",
        "time": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(1_700_000_000 + i * 60)),
        "dirty": False,
    }
    step = 1.08 if i >= n // 2 else 1.0
    entries = []
    for old in base["benchmarks"]:
        f = step * (1 + rng.gauss(0, 0.01))
        e = dict(old)
        e["samples"] = [s * f for s in e["samples"]]
        e["stats"] = _scale(e["stats"], f)
        entries.append(e)
    doc["benchmarks"] = entries
    return doc


def fill(
    store: Path, env: str, base: dict[str, Any], shas: list[str], keep_raw: int
) -> dict[str, float]:
    rng = random.Random(0)
    compact_base = compact_document(base, "2026-11-23T00:00:00+00:00")
    folder = store / env
    folder.mkdir(parents=True)
    raw_bytes = compact_bytes = 0
    n = len(shas)
    for i, sha in enumerate(shas):
        if i < n - keep_raw:
            text = dumps_compact(clone_doc(compact_base, sha, i, n, rng))
            compact_bytes += len(text)
        else:
            text = dumps(clone_doc(base, sha, i, n, rng))
            raw_bytes += len(text)
        (folder / f"{sha}.json").write_text(text)
    return {
        "raw": raw_bytes / max(1, min(n, keep_raw)),
        "compact": compact_bytes / max(1, n - keep_raw),
    }


def measure(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, *cmd],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV, **(env or {})},
        check=False,
    )
    wall, rss, rc = out.stdout.split()
    if rc != "0":
        print(f"FAILED ({rc}): {' '.join(cmd)}\n{out.stderr}", file=sys.stderr)
    return float(wall), int(rss) / 1024


def infperf(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest_infperf", *args]


LOOKUP = r"""
import sys, time
from pathlib import Path
from pytest_infperf.store.baselines import BaselineStore
from pytest_infperf.store.resolve import resolve
store = BaselineStore(Path("baselines"))
t = time.perf_counter()
src = resolve("main", rootdir=Path("."), store=store, env_key=sys.argv[1], hard={}, depth=50)
store.load(Path(src.path))
print(f"{time.perf_counter() - t:.3f}")
"""


def packed_mb(bare: Path) -> float:
    git(bare, "gc", "-q", "--prune=now", "--aggressive" if False else "--quiet")
    info = dict(
        line.split(": ") for line in git(bare, "count-objects", "-v").splitlines() if ": " in line
    )
    return (int(info["size-pack"]) + int(info["size"])) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--benchmarks", type=int, default=200)
    parser.add_argument("--keep-raw", type=int, default=50)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--keep", action="store_true", help="leave the work folder")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="infperf-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, str, str]] = []

    def row(what: str, wall: float, rss: float | None = None) -> None:
        rows.append((what, f"{wall:.2f} s", f"{rss:.0f} MB" if rss is not None else ""))
        print(
            f"  {what}: {wall:.2f} s" + (f", {rss:.0f} MB" if rss is not None else ""), flush=True
        )

    locks = Path(tempfile.gettempdir()) / f"pytest-infperf-locks-{os.getuid()}"
    locks_before = len(list(locks.glob("*.lock"))) if locks.is_dir() else 0
    try:
        t = time.perf_counter()
        base = seed(work, args.benchmarks)
        env = base["environment"]["key"]
        print(f"seed: {len(base['benchmarks'])} benchmarks in {time.perf_counter() - t:.0f} s")
        repo = work / "repo"
        shas = make_repo(repo, args.files + 1)
        new_sha, shas = shas[-1], shas[:-1]
        t = time.perf_counter()
        sizes = fill(repo / "baselines", env, base, shas, args.keep_raw)
        print(
            f"store: {len(shas)} baselines in {time.perf_counter() - t:.0f} s; "
            f"raw {sizes['raw'] / 1e6:.2f} MB, compact {sizes['compact'] / 1e6:.3f} MB per file"
        )
        cache = {"INFPERF_CACHE_DIR": str(work / "cache")}
        depth = str(len(shas) + 10)
        key = sorted(e["key"] for e in base["benchmarks"])[len(base["benchmarks"]) // 2]
        row("`infperf list`, index built from nothing", *measure(infperf("list"), repo, cache))
        row("`infperf list`", *measure(infperf("list"), repo, cache))
        row(
            "`infperf history` of one benchmark",
            *measure(infperf("history", "--depth", depth, "-k", key), repo, cache),
        )
        row("`infperf history` of all", *measure(infperf("history", "--depth", depth), repo, cache))
        row(
            "`infperf report --html` (all history)",
            *measure(infperf("report", "--html", "r.html", "--depth", depth), repo, cache),
        )
        git(repo, "checkout", "-q", shas[-1])
        lookup = subprocess.run(
            [sys.executable, "-c", LOOKUP, env],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        )
        git(repo, "checkout", "-q", "main")
        row("`--perf-compare=main` lookup (find + load + validate)", float(lookup.stdout))
        # The branch.
        bare = work / "origin.git"
        git(work, "init", "-q", "--bare", "-b", "main", str(bare))
        git(repo, "remote", "add", "origin", str(bare))
        git(repo, "push", "-q", "origin", "main")
        row(
            "`baselines push`, whole store (first push)",
            *measure(infperf("baselines", "push"), repo, cache),
        )
        other = work / "other"
        git(work, "clone", "-q", str(bare), str(other))
        fresh = {"INFPERF_CACHE_DIR": str(work / "cache-other")}
        row(
            "`baselines pull` into an empty folder",
            *measure(infperf("baselines", "pull"), other, fresh),
        )
        recent = work / "recent"
        git(work, "clone", "-q", str(bare), str(recent))
        row(
            "`baselines pull --depth 60` into an empty folder (a comparing job)",
            *measure(
                infperf("baselines", "pull", "--depth", "60"),
                recent,
                {"INFPERF_CACHE_DIR": str(work / "cache-recent")},
            ),
        )
        shutil.rmtree(recent)
        rng = random.Random(1)
        doc = clone_doc(base, new_sha, len(shas), len(shas), rng)
        (repo / "baselines" / env / f"{new_sha}.json").write_text(dumps(doc))
        row(
            "`baselines push` of one new baseline",
            *measure(infperf("baselines", "push"), repo, cache),
        )
        row(
            "`baselines pull` of one new baseline",
            *measure(infperf("baselines", "pull"), other, fresh),
        )
        row(
            "`--perf-compare` lookup after it",
            float(
                subprocess.run(
                    [sys.executable, "-c", LOOKUP, env],
                    cwd=repo,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            ),
        )
        row(
            f"`infperf prune --keep-raw {args.keep_raw}` (compacts one file)",
            *measure(infperf("prune", "--keep-raw", str(args.keep_raw)), repo, cache),
        )
        row(
            "`baselines push` of the compacted file",
            *measure(infperf("baselines", "push"), repo, cache),
        )
        before = packed_mb(bare)
        row(
            "`baselines push --squash`",
            *measure(infperf("baselines", "push", "--squash"), repo, cache),
        )
        after = packed_mb(bare)
        print(f"\npacked repository (main + branch): {before:.0f} MB before the squash, ", end="")
        print(f"{after:.0f} MB after")
        folder_mb = sum(p.stat().st_size for p in (repo / "baselines").rglob("*")) / 1e6
        print(f"baselines folder: {folder_mb:.0f} MB")
        print(f"lock files left in {locks}: {len(list(locks.glob('*.lock'))) - locks_before} new")
        n_bench = len(base["benchmarks"])
        print(f"\n{len(shas)} baselines of {n_bench} benchmarks, ", end="")
        print(f"raw samples for the newest {args.keep_raw}\n")
        print("| operation | time | peak memory |\n|---|---|---|")
        for what, wall_s, rss_s in rows:
            print(f"| {what} | {wall_s} | {rss_s} |")
        what = "baselines branch, packed after `push --squash` and `git gc`"
        print(f"| {what} | {after:.0f} MB (repository) | |")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work folder kept: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
