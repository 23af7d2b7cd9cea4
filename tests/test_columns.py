"""Every line the plugin and the CLI print fits 120 columns (``COLUMNS`` where narrower):
a plain run and a failing compare, each a real pytest process as a terminal or a CI log
gets it, and ``infperf compare`` of their results; pytest's own lines aside."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import BUSY_HEADER, GIT_ENV, fast_ini, git, infperf, init_repo, stored_file

#: A perf suite as a team writes one: long test names in a tests/perf folder, a benchmark
#: whose samples split between two speeds (its noise is said), one that the branch slows.
SUITE = (
    BUSY_HEADER
    + """
import random

import pytest


def test_tokenizer_and_preprocessing_pipeline_latency(infer_bench):
    infer_bench(lambda: busy(300 * FACTOR))


@pytest.mark.parametrize("batch", [1, 8])
def test_classifier_latency_at_batch_size(infer_bench, batch):
    infer_bench(lambda: busy(40 * batch**0.5), batch_size=batch)


def test_postprocessing_with_a_noisy_runtime(infer_bench):
    infer_bench(lambda: busy(random.choice((30, 90))))
"""
)
#: pytest's own lines: its header, and its summary of failed tests (cut to the terminal).
PYTESTS = ("platform ", "rootdir: ", "configfile: ", "plugins: ", "cachedir: ", "collected ")
PYTESTS_SUMMARY = ("FAILED ", "ERROR ")


def _pytest(repo: Path, *args: str, columns: str = "") -> subprocess.CompletedProcess[str]:
    """A pytest run as a CI log gets it (no terminal: no width but ``COLUMNS``)."""
    env = {k: v for k, v in {**os.environ, **GIT_ENV}.items() if k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/perf", "-p", "no:cacheprovider", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
        env={**env, "COLUMNS": columns} if columns else env,
    )


def _too_wide(out: str, width: int = 120) -> list[str]:
    return [
        f"{len(line)}: {line}"
        for line in out.splitlines()
        if len(line) > width and not line.startswith((*PYTESTS, *PYTESTS_SUMMARY))
    ]


def test_a_plain_run_and_a_failing_compare_fit_120_columns(tmp_path: Path, git_env: None) -> None:
    repo = tmp_path / "repo"
    (repo / "tests" / "perf").mkdir(parents=True)
    (repo / "tests" / "perf" / "test_latency.py").write_text(SUITE)
    (repo / "tests" / "perf" / "factor.txt").write_text("1.0")
    # The noisy benchmark's warning and the drift guard's say what they saw.
    (repo / "pytest.ini").write_text(fast_ini(drift_guard="warn"))
    (repo / ".gitignore").write_text("baselines/\n*.json\n__pycache__/\n")
    init_repo(repo)

    plain = _pytest(repo)
    assert plain.returncode == 0, plain.stdout[-3000:]
    assert not _too_wide(plain.stdout + plain.stderr), "\n".join(_too_wide(plain.stdout))
    assert _pytest(repo, "--perf-save", "-q").returncode == 0

    git(repo, "switch", "-q", "-c", "slower")
    (repo / "tests" / "perf" / "factor.txt").write_text("2.0")
    git(repo, "commit", "-qam", "a slower pipeline")
    compared = _pytest(repo, "--perf-compare=main", "--perf-json=compared.json")
    out = compared.stdout + compared.stderr
    assert compared.returncode == 1, out[-3000:]
    assert "PERFORMANCE REGRESSION in tests/perf/test_latency.py::test_tokenizer" in out
    assert not _too_wide(out), "\n".join(_too_wide(out))
    # The interleaving notice is seen without -s (pytest captures what a test prints),
    # on a line of its own (one per benchmark in a CI service's log, else the first).
    notices = [line for line in out.splitlines() if line.startswith("infperf: interleaving")]
    assert notices and all("with the baseline's" in line for line in notices), notices
    # Commands are never broken: each reproduce command is whole on a line of its own.
    reproduce = [line for line in out.splitlines() if "--perf-ab=" in line]
    assert reproduce and all(line.lstrip().startswith("pytest tests/perf/") for line in reproduce)

    # A narrower terminal: the failure's lines wrap to it, but for what does not break (a
    # command, a word as long as a node id).
    narrow = _pytest(repo, stored_file(repo), columns="90")
    assert narrow.returncode == 1
    failure = narrow.stdout.split("PERFORMANCE REGRESSION", 1)[1].split("\n---", 1)[0]
    whole = [line for line in failure.splitlines() if len(line) > 90]
    assert all(" " not in x.strip() or x.lstrip().startswith("pytest ") for x in whole), whole
    assert len(failure.splitlines()) > 6

    # The CLI: the compare's results against main's baseline, and two plain runs (their
    # verdicts withheld: said, with the command that would settle them).
    cli = infperf(repo, "compare", "main", "compared.json", COLUMNS="120")  # a CI log's
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert not _too_wide(cli.stdout + cli.stderr), "\n".join(_too_wide(cli.stdout))


@pytest.mark.parametrize("columns", [80, 120, 200])
def test_every_line_of_a_message_fits(columns: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The terminal's width (COLUMNS), 120 where it is not known; commands and words whole."""
    from pytest_infperf.report.fmt import fit

    monkeypatch.setenv("COLUMNS", str(columns))
    command = "pytest tests/perf/test_latency.py::test_tokenizer --perf-ab=0123456789ab"
    text = (
        "warning: " + "a sentence of words that runs on " * 8 + "\n"
        f"  reproduce (interleaved on this machine, from the rootdir): {command}"
    )
    lines = fit(text).splitlines()
    assert all(len(line) <= columns for line in lines), lines
    assert all(line.startswith("  ") for line in lines[1:])
    if len(text.splitlines()[-1]) > columns:
        assert lines[-1] == f"    {command}" and lines[-2].endswith("from the rootdir):")
    else:
        assert lines[-1] == text.splitlines()[-1]
    # pytest prints an error's message after "E   module.Error: ": the first line is left
    # the room it takes.
    first = fit("word " * 60, width=100, first=40).splitlines()
    assert len(first[0]) <= 60 and all(len(line) <= 100 for line in first)


def test_a_long_command_is_continued_as_a_shell_takes_it() -> None:
    import shlex

    from pytest_infperf.report.fmt import fit

    nodes = [f"tests/perf/test_latency.py::test_model[batch-{n}]" for n in range(6)]
    command = shlex.join(["pytest", *nodes, "--perf-ab=0123456789ab"])
    lines = fit(f"to settle them: {command}", width=100).splitlines()
    assert lines[0] == "to settle them:" and all(len(line) <= 100 for line in lines)
    assert all(line.endswith(" \\") for line in lines[1:-1])
    pasted = " ".join(line.removesuffix("\\").strip() for line in lines[1:])
    assert shlex.split(pasted) == ["pytest", *nodes, "--perf-ab=0123456789ab"]


def test_a_gpu_runners_compare_fits_120_columns() -> None:
    """The recorded H200 runs through ``infperf compare`` and ``infperf show``: the table
    (device-time cells, the ``by`` column) fits, and each work diff (kernel names of 40
    characters, a dozen counts) wraps under its own line."""
    records = Path(__file__).parent / "data" / "gpu-h200"
    for args in (("compare", "save.json", "reg.json"), ("show", "reg.json")):
        out = infperf(records, *args, COLUMNS="120")
        text = out.stdout + out.stderr
        assert "work per call: " in text, text
        assert not _too_wide(text), "\n".join(_too_wide(text))
