"""The store at scale, in small: compaction (`infperf prune --keep-raw`), the index that
`list`/`history` read, and locks that do not leak. Real `pytest --perf-save` runs in a real
git repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pytest_infperf.store.baselines import BaselineStore, lock_path
from pytest_infperf.store.compact import SKETCH, compact_entry, sketch

from .conftest import FAST_INI, GIT_ENV, git, infperf

TESTS = """
def test_fast(infer_bench):
    infer_bench(lambda: sum(range(30)))


def test_slow(infer_bench):
    infer_bench(lambda: sum(range(300)))
"""


@pytest.fixture(scope="module")
def project_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A repository of four commits, each with its baseline saved by pytest --perf-save:
    built once (four pytest runs) and copied for each test."""
    repo = tmp_path_factory.mktemp("store") / "proj"
    repo.mkdir()
    (repo / "test_perf.py").write_text(TESTS)
    (repo / "pytest.ini").write_text(FAST_INI.replace("infperf_rounds = 10", "infperf_rounds = 60"))
    (repo / ".gitignore").write_text("baselines/\n")
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(4):
        (repo / "version.txt").write_text(f"{i}\n")
        git(repo, "add", ".")
        git(repo, "commit", "-qm", f"change {i}")
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "--perf-save"],
            cwd=repo,
            capture_output=True,
            text=True,
            env={**os.environ, **GIT_ENV},
            check=False,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        shas.append(git(repo, "rev-parse", "HEAD"))
    return repo, shas


@pytest.fixture
def project(
    project_template: tuple[Path, list[str]], tmp_path: Path, git_env: None
) -> tuple[Path, list[str]]:
    template, shas = project_template
    repo = tmp_path / "proj"
    shutil.copytree(template, repo)
    return repo, shas


def _files(repo: Path) -> dict[str, Path]:
    return {p.stem: p for p in (repo / "baselines").glob("*/*.json")}


@pytest.mark.slow
def test_prune_keep_raw_compacts_old_baselines_and_they_stay_usable(
    project: tuple[Path, list[str]],
) -> None:
    repo, shas = project
    before = {sha: json.loads(p.read_text()) for sha, p in _files(repo).items()}
    sizes = {sha: p.stat().st_size for sha, p in _files(repo).items()}
    out = infperf(repo, "prune", "--keep-raw", "2")
    assert out.returncode == 0, out.stderr
    assert "2 compacted" in out.stdout and "raw samples kept for the newest 2" in out.stdout
    after = {sha: json.loads(p.read_text()) for sha, p in _files(repo).items()}
    for sha in shas[:2]:  # the oldest two: compact, every statistic kept
        assert after[sha]["compacted"]
        assert _files(repo)[sha].stat().st_size < sizes[sha]
        for old, new in zip(before[sha]["benchmarks"], after[sha]["benchmarks"], strict=True):
            assert new["compact"] == {"samples": len(old["samples"]), "sketch": SKETCH}
            assert new["stats"]["median"] == pytest.approx(old["stats"]["median"], rel=1e-5)
            assert new["samples"][0] == pytest.approx(min(old["samples"]), rel=1e-5)
            assert new["samples"][-1] == pytest.approx(max(old["samples"]), rel=1e-5)
            assert new["options"] == old["options"] and new["nodeid"] == old["nodeid"]
    for sha in shas[2:]:
        assert after[sha] == before[sha]
    # idempotent: nothing left to compact
    again = infperf(repo, "prune", "--keep-raw", "2")
    assert "0 compacted" in again.stdout
    # list marks them, show and compare say they work from a summary
    listing = infperf(repo, "list").stdout
    assert "4 commit(s), 2 compacted" in listing
    assert listing.count("[summary]") == 2
    show = infperf(repo, "show", shas[0])
    assert show.returncode == 0, show.stderr
    assert "working from a summary: 2 of 2 benchmarks" in show.stdout
    compare = infperf(repo, "compare", shas[0], shas[3])
    assert compare.returncode in (0, 1), compare.stderr
    assert f"baseline {shas[0]}: working from a summary" in compare.stdout
    history = infperf(repo, "history")
    assert history.returncode == 0 and history.stdout.count(shas[0][:10]) == 2


def test_a_comparison_against_a_compact_baseline_says_so(
    project: tuple[Path, list[str]],
) -> None:
    repo, shas = project
    assert infperf(repo, "prune", "--keep-raw", "1").returncode == 0
    base = _files(repo)[shas[1]]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            f"--perf-compare={base}",
            "--perf-json=out.json",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode in (0, 1), out.stdout + out.stderr
    doc = json.loads((repo / "out.json").read_text())
    for entry in doc["benchmarks"]:
        c = entry["comparison"]
        assert "baseline from a summary: 33 quantiles of its" in c["note"]
        assert c["details"]["baseline_compact"]["sketch"] == SKETCH


def test_prune_keep_removes_and_usage_errors(project: tuple[Path, list[str]]) -> None:
    repo, shas = project
    bad = infperf(repo, "prune")
    assert bad.returncode == 2 and "prune needs --keep N" in bad.stderr
    assert "must be at least 1" in infperf(repo, "prune", "--keep-raw", "0").stderr
    out = infperf(repo, "prune", "--keep", "3", "--keep-raw", "1")
    assert out.returncode == 0, out.stderr
    assert set(_files(repo)) == set(shas[1:])
    store = BaselineStore(next((repo / "baselines").iterdir()).parent)
    (env,) = store.env_keys()
    assert store.pruned(env) == {shas[0]}
    assert "2 compacted" in out.stdout


def test_the_index_follows_the_files(project: tuple[Path, list[str]]) -> None:
    repo, shas = project
    assert "4 commit(s)" in infperf(repo, "list").stdout
    files = _files(repo)
    files[shas[0]].unlink()
    files[shas[1]].write_text('{"schema_version": 1, "benchm')
    listing = infperf(repo, "list").stdout
    assert "3 commit(s)" in listing
    assert f"{shas[1][:10]}  DAMAGED: is not valid JSON" in listing
    history = infperf(repo, "history")
    assert history.returncode == 0
    assert f"skipped {files[shas[1]]}: is not valid JSON" in history.stderr
    assert shas[2][:10] in history.stdout and shas[0][:10] not in history.stdout
    # a damaged cache is rebuilt, not an error
    for cache in Path(os.environ["INFPERF_CACHE_DIR"]).glob("index-*.sqlite"):
        cache.write_bytes(b"not a database")
    assert "3 commit(s)" in infperf(repo, "list").stdout


def test_one_lock_file_per_environment(
    project_template: tuple[Path, list[str]], project: tuple[Path, list[str]]
) -> None:
    template, shas = project_template
    # The savers locked the template's folder (the lock is named after the folder's path).
    saved = next((template / "baselines").iterdir())
    assert lock_path(saved).exists()
    for sha in shas:
        assert not lock_path(saved / f"{sha}.json").exists()
    repo, _ = project
    folder = next((repo / "baselines").iterdir())
    assert infperf(repo, "prune", "--keep", "1", "--keep-raw", "1").returncode == 0
    for sha in shas:
        assert not lock_path(folder / f"{sha}.json").exists()
    assert Path(tempfile.gettempdir()) in lock_path(folder).parents


def test_sketch_keeps_the_extremes_and_is_idempotent() -> None:
    values = [float(v) for v in range(1, 1001)]
    s = sketch(values)
    assert len(s) == SKETCH and s[0] == 1.0 and s[-1] == 1000.0
    assert s[16] == pytest.approx(500.5)
    assert sketch([3.0, 1.0]) == [1.0, 3.0]
    entry = {"samples": values, "warmup_samples": [1.0], "stats": {}}
    once = compact_entry(entry)
    assert compact_entry(once) is once and once["warmup_samples"] == []
