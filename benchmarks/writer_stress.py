"""Concurrent baseline writers and writers killed mid-save: is anything lost or corrupted?

    python benchmarks/writer_stress.py [--trials 100] [--kills 20] [--writers 4]

Concurrent trials: ``--writers`` processes save disjoint benchmark sets into the baseline
of the same commit at the same moment (a barrier file releases them together), through
``BaselineStore.save`` exactly as ``pytest --perf-save`` does. Every trial checks that the
file holds the union of all entries and is valid.

Kill trials: a writer saves a large baseline (~2.5 MB) in a loop while another process
keeps merging into it; the first is SIGKILLed at a random moment. The file must stay a
valid document holding every entry saved before, and no temp file may remain once the next
save has run.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHA = "b" * 40
KEY = "linux-x86-64-cpu-py3.11-0123456789"

WRITER = r"""
import os, sys, time
from pathlib import Path
from pytest_infperf.store.baselines import BaselineStore
from pytest_infperf.core.results import BenchmarkResult
from pytest_infperf.stats.descriptive import summarize

root, names, barrier = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
size, loop = int(sys.argv[4]), sys.argv[5] == "1"
samples = [1e-3 * (1 + (i % 7) * 0.01) for i in range(size)]
stats = summarize(samples)
entries = [BenchmarkResult(nodeid=f"test_s.py::{n}", name=None, backend="callable",
                           samples=samples, stats=stats).to_json() for n in names]
while not os.path.exists(barrier):
    time.sleep(0.0005)
store = BaselineStore(Path(root))
env = {"key": "KEY", "hard": {}, "soft": {}}
while True:
    store.save("KEY", "SHA", entries, env, {"sha": "SHA"})
    if not loop:
        break
""".replace("KEY", KEY).replace("SHA", SHA)


def spawn(
    root: Path, names: list[str], barrier: Path, size: int = 50, loop: bool = False
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER,
            str(root),
            ",".join(names),
            str(barrier),
            str(size),
            "1" if loop else "0",
        ]
    )


def check(root: Path, expected: set[str]) -> tuple[bool, str]:
    from pytest_infperf.core.fsutil import TEMP_PREFIX
    from pytest_infperf.store.baselines import BaselineFileError, read_document

    path = root / KEY / f"{SHA}.json"
    try:
        doc = read_document(path)
    except BaselineFileError as exc:
        return False, f"corrupt: {exc}"
    keys = {b["nodeid"].split("::")[1] for b in doc["benchmarks"]}
    if not expected <= keys:
        return False, f"lost {sorted(expected - keys)}"
    temps = [p.name for p in path.parent.iterdir() if p.name.startswith(TEMP_PREFIX)]
    if temps:
        return False, f"stray temp files {temps}"
    return True, f"{len(keys)} entries"


def concurrent_trials(trials: int, writers: int) -> tuple[int, float]:
    ok = 0
    started = time.time()
    for t in range(trials):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "baselines"
            barrier = Path(tmp) / "go"
            expected: set[str] = set()
            procs = []
            for w in range(writers):
                names = [f"test_t{t}_w{w}_{i}" for i in range(5)]
                expected |= set(names)
                procs.append(spawn(root, names, barrier))
            time.sleep(0.3)  # let them all reach the barrier
            barrier.touch()
            codes = [p.wait(timeout=120) for p in procs]
            good, detail = check(root, expected)
            ok += good and codes == [0] * writers
            if not good or codes != [0] * writers:
                print(f"  trial {t}: FAILED {detail} exit codes {codes}", file=sys.stderr)
    return ok, time.time() - started


def kill_trials(kills: int) -> tuple[int, int, int]:
    from pytest_infperf.core.fsutil import TEMP_PREFIX
    from pytest_infperf.core.results import BenchmarkResult
    from pytest_infperf.stats.descriptive import summarize
    from pytest_infperf.store.baselines import BaselineStore

    ok = 0
    mid_write = 0
    after_save = 0
    for k in range(kills):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "baselines"
            barrier = Path(tmp) / "go"
            barrier.touch()
            # The victim rewrites a ~20 MB baseline in a loop; a bystander keeps merging
            # small entries into the same file.
            victim = spawn(root, [f"test_big_{i}" for i in range(20)], barrier, 5_000, True)
            bystander = spawn(root, ["test_small"], barrier, 20, True)
            time.sleep(random.uniform(0.5, 4.0))
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait()
            folder = root / KEY
            stray = (
                [p for p in folder.iterdir() if p.name.startswith(f"{TEMP_PREFIX}{victim.pid}-")]
                if folder.is_dir()
                else []
            )
            mid_write += bool(stray)
            time.sleep(0.2)
            bystander.terminate()
            bystander.wait()
            # The next ordinary save cleans up after the dead writer.
            samples = [1e-3] * 5
            entry = BenchmarkResult(
                nodeid="test_s.py::test_after",
                name=None,
                backend="callable",
                samples=samples,
                stats=summarize(samples),
            ).to_json()
            BaselineStore(root).save(
                KEY, SHA, [entry], {"key": KEY, "hard": {}, "soft": {}}, {"sha": SHA}
            )
            good, detail = check(root, {"test_small", "test_after"})
            ok += good
            after_save += "test_big_0" in _keys(root)
            if not good:
                print(f"  kill {k}: FAILED {detail}", file=sys.stderr)
    return ok, mid_write, after_save


def _keys(root: Path) -> set[str]:
    from pytest_infperf.store.baselines import read_document

    doc = read_document(root / KEY / f"{SHA}.json")
    return {b["nodeid"].split("::")[1] for b in doc["benchmarks"]}


RAW_WRITER = r"""
import sys
from pathlib import Path
from pytest_infperf.core.fsutil import atomic_write_text
path, i = Path(sys.argv[1]), 0
while True:
    i += 1
    atomic_write_text(path, '{"gen": %d, "pad": "%s"}' % (i, "x" * 3_000_000))
"""


def raw_kill_trials(kills: int) -> tuple[int, int]:
    """SIGKILL a process that does nothing but atomic 3 MB writes: most kills land while
    the temp file is being written. The target must always parse, old or new."""
    import json

    from pytest_infperf.core.fsutil import TEMP_PREFIX, atomic_write_text, clean_stale_temps

    ok = mid = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "doc.json"
        atomic_write_text(path, '{"gen": 0}')
        for _ in range(kills):
            proc = subprocess.Popen([sys.executable, "-c", RAW_WRITER, str(path)])
            time.sleep(random.uniform(0.2, 1.0))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            mid += any(p.name.startswith(TEMP_PREFIX) for p in Path(tmp).iterdir())
            try:
                json.loads(path.read_text())
                good = True
            except ValueError:
                good = False
            clean_stale_temps(Path(tmp))
            ok += good and [p.name for p in Path(tmp).iterdir()] == ["doc.json"]
    return ok, mid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--raw-kills", type=int, default=20)
    args = parser.parse_args()
    ok, took = concurrent_trials(args.trials, args.writers)
    print(
        f"concurrent savers: {ok}/{args.trials} trials complete and valid "
        f"({args.writers} writers x 5 entries each, same file; {took:.0f} s)"
    )
    ok_k, mid_write, after_save = kill_trials(args.kills)
    print(
        f"SIGKILL mid-save: {ok_k}/{args.kills} trials left a valid file holding every entry "
        f"saved before the kill, and no temp file after the next save; {mid_write} kills "
        f"landed while the victim's temp file was half-written, and in {after_save} the "
        "victim had completed at least one ~2.5 MB save before it was killed"
    )
    ok_r, mid_r = raw_kill_trials(args.raw_kills)
    print(
        f"SIGKILL of a raw atomic writer (3 MB documents): {ok_r}/{args.raw_kills} left "
        f"the previous or the new complete file and no temp file after cleanup; {mid_r} "
        "kills landed mid-write"
    )


if __name__ == "__main__":
    main()
