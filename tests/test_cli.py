"""The `infperf` command on real baselines made by the plugin in temp git repositories."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_infperf.stats.changepoint import detect

from .conftest import BUSY_HEADER, FAST_INI, GIT_ENV, expert, fast_ini, git, infperf, init_repo

SUITE = (
    BUSY_HEADER
    + """
import pytest

def test_slowed(infer_bench):
    infer_bench(lambda: busy(200 * FACTOR))

@pytest.mark.parametrize("batch", [1, 4, 16])
@pytest.mark.parametrize("seq", [32, 64])
def test_sweep(infer_bench, batch, seq):
    infer_bench(lambda: busy(20 + 0.5 * batch * seq / 16), batch_size=batch)
"""
)


@pytest.fixture(scope="module")
def repo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """main with a saved baseline; HEAD one commit later, 30% slower, also saved. Built once
    (two pytest runs) and copied for each test: prune and report write into their copy."""
    root = tmp_path_factory.mktemp("cli")
    (root / "pytest.ini").write_text(fast_ini(drift_guard="warn"))
    (root / "test_suite.py").write_text(SUITE)
    (root / "factor.txt").write_text("1.0")
    (root / ".gitignore").write_text("baselines/\n*.json\n__pycache__/\n")
    init_repo(root, "suite")

    def save(json_name: str) -> None:
        run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--perf-save"]
        env = {**os.environ, **GIT_ENV}
        done = subprocess.run(
            [*run, f"--perf-json={json_name}"], cwd=root, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]

    save("old.json")
    (root / "factor.txt").write_text("1.3")
    git(root, "commit", "-qam", "slower")
    save("new.json")
    # The command's verdicts and exit codes are under test here, not this machine's noise
    # between two runs (benchmarks/ measures that): the unchanged benchmarks of HEAD keep
    # the samples HEAD~1 measured, only test_slowed differs.
    old = json.loads((root / "old.json").read_text())
    unchanged = {b["key"]: b for b in old["benchmarks"] if not b["key"].endswith("test_slowed")}
    for path in [root / "new.json", *sorted((root / "baselines").glob("*/*"))]:
        doc = json.loads(path.read_text())
        if doc["commit"]["sha"] != git(root, "rev-parse", "HEAD"):
            continue
        doc["benchmarks"] = [unchanged.get(b["key"], b) for b in doc["benchmarks"]]
        # The two runs' probes alike: the drift guard of `compare` reads how the machine
        # moved between them, which is this machine's noise, not the command's logic.
        probes = {b["key"]: b.get("reference") for b in old["benchmarks"]}
        for b in doc["benchmarks"]:
            b["reference"] = probes.get(b["key"], b.get("reference"))
        path.write_text(json.dumps(doc))
    return root


@pytest.fixture
def repo(pytester: pytest.Pytester, git_env: None, repo_template: Path) -> Path:
    shutil.copytree(repo_template, pytester.path, dirs_exist_ok=True)
    return pytester.path


def test_list_and_show(repo: Path) -> None:
    out = infperf(repo, "list")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].endswith("(this machine): 2 commit(s)")
    assert sum("   7 benchmarks" in line for line in lines) == 2
    head = git(repo, "rev-parse", "HEAD")
    out = infperf(repo, "show", head[:8])
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"commit {head}")
    assert "test_suite.py::test_slowed" in out.stdout
    out = infperf(repo, "show", "HEAD~1")
    assert out.returncode == 0 and "test_sweep[32-4]" in out.stdout
    # The reader of the output goes away first (`infperf list | head`): no traceback.
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_infperf", "show", head],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141 and b"Traceback" not in err, err.decode()


def test_cli_finds_the_baseline_the_plugin_finds(pytester: pytest.Pytester, git_env: None) -> None:
    """Baselines committed as the README suggests land in the commit after the one they
    measured: `--perf-compare=main` walks back one commit to find them, and so does the
    CLI (one resolver)."""
    pytester.makefile(".ini", pytest=fast_ini(drift_guard="warn"))
    pytester.makepyfile(test_suite=SUITE)
    (pytester.path / "factor.txt").write_text("1.0")
    (pytester.path / ".gitignore").write_text("*.json\n")
    init_repo(pytester.path, "suite")
    measured = git(pytester.path, "rev-parse", "HEAD")
    pytester.runpytest("--perf-save").assert_outcomes(passed=7)
    git(pytester.path, "add", "-A", "-f", "baselines")
    git(pytester.path, "commit", "-qm", "add baselines")
    git(pytester.path, "checkout", "-q", "-b", "feature")
    (pytester.path / "notes.txt").write_text("x")
    git(pytester.path, "add", "notes.txt")
    git(pytester.path, "commit", "-qm", "unrelated")
    result = pytester.runpytest("--perf-compare=main", "--perf-json=r.json")
    result.stdout.fnmatch_lines([f"compared with commit {measured[:10]} (1 commit before*"])

    out = infperf(pytester.path, "show", "main")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"commit {measured}")
    assert f"the nearest baseline is commit {measured[:10]}" in out.stderr
    out = infperf(pytester.path, "compare", "main", "HEAD")
    assert out.returncode == 0, out.stderr
    assert "unchanged" in out.stdout
    pytest.importorskip("matplotlib")
    out = infperf(pytester.path, "report", "--compare", "main", "--results", "r.json")
    assert out.returncode == 0, out.stderr
    # Nothing named: HEAD's nearest baseline, not an empty page.
    out = infperf(pytester.path, "report", "--html", "plain.html")
    assert out.returncode == 0, out.stderr
    text = (pytester.path / "plain.html").read_text()
    assert "No figures" not in text and f"<code>{measured[:10]}</code>" in text
    assert "test_suite.py::test_slowed" in text


def test_compare_exit_codes(repo: Path) -> None:
    out = infperf(repo, "compare", "HEAD~1", "HEAD")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 regression(s): test_suite.py::test_slowed" in out.stdout
    assert "REGRESSION" in out.stdout
    out = infperf(repo, "compare", "HEAD", "HEAD~1")  # the other way round: faster
    assert out.returncode == 0 and "improvement" in out.stdout
    out = infperf(repo, "compare", "old.json", "HEAD", "--markdown", "cmp.md")  # a mix
    assert out.returncode == 1
    assert (repo / "cmp.md").read_text().startswith("## pytest-infperf: 1 regression in 7")
    # A gate on `compare` fails closed: a run that stopped part-way, or the wrong file.
    stopped = json.loads((repo / "new.json").read_text())
    stopped["run"] = {"complete": False, "exitstatus": 2, "incomplete": "interrupted (Ctrl-C)"}
    (repo / "stopped.json").write_text(json.dumps(stopped))
    out = infperf(repo, "compare", "HEAD", "stopped.json")
    assert out.returncode == 1 and "did not complete (interrupted (Ctrl-C))" in out.stdout
    renamed = json.loads((repo / "new.json").read_text())
    for entry in renamed["benchmarks"]:
        entry["nodeid"] = entry["nodeid"].replace("test_suite.py", "test_renamed.py")
        entry.pop("key", None)
    (repo / "renamed.json").write_text(json.dumps(renamed))
    out = infperf(repo, "compare", "old.json", "renamed.json")
    assert out.returncode == 1 and "compared nothing" in out.stdout, out.stdout + out.stderr
    out = infperf(repo, "compare", "nope", "HEAD")
    assert out.returncode == 2
    assert out.stderr.startswith("infperf: error: 'nope' is neither a JSON file, a git ref")


def test_compare_of_runs_without_a_reference_claims_no_change(repo: Path) -> None:
    """Two plain runs (no probes of the machine's speed) minutes apart on a machine that
    may have moved: `compare` names no regression or improvement it cannot stand behind,
    nor says `unchanged` or `no-regression` (a move may as well have hidden a change), says
    why once with the command that would settle it, and exits 0. A regression whose exact
    work counts grew is claimed: more work per call is no move of the machine."""
    for name in ("old", "new"):
        doc = json.loads((repo / f"{name}.json").read_text())
        for b in doc["benchmarks"]:
            b["reference"] = None
        (repo / f"{name}-plain.json").write_text(json.dumps(doc))
    out = infperf(repo, "compare", "old-plain.json", "new-plain.json")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "regression(s)" not in out.stdout and "REGRESSION" not in out.stdout
    assert " unchanged " not in out.stdout and "no-regression" not in out.stdout
    sha = json.loads((repo / "old.json").read_text())["commit"]["sha"]
    said = [x for x in out.stdout.splitlines() if "withheld, cannot tell" in x]
    assert len(said) == 1 and "test_suite.py::test_slowed" in said[0], out.stdout
    (command,) = [x for x in out.stdout.splitlines() if f"--perf-ab={sha[:12]}" in x]
    assert "test_suite.py::test_slowed" in command
    assert "in a checkout of the second run's code" in out.stdout
    out = infperf(repo, "compare", "new-plain.json", "old-plain.json")  # faster: not claimed
    assert out.returncode == 0 and "improvement" not in out.stdout.split("cannot tell")[0]
    # The slowed benchmark's work grew by half (a layer more): claimed, and the gate fails.
    for name, flops in (("old", 8.39e6), ("new", 1.258e7)):
        doc = json.loads((repo / f"{name}-plain.json").read_text())
        for b in doc["benchmarks"]:
            if b["nodeid"].endswith("test_slowed"):
                b["work"] = {
                    "mode": "counts",
                    "source": "torch.profiler",
                    "calls": 5,
                    "flops": flops,
                }
        (repo / f"{name}-work.json").write_text(json.dumps(doc))
    out = infperf(repo, "compare", "old-work.json", "new-work.json", "--markdown", "work.md")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 regression(s): test_suite.py::test_slowed" in out.stdout
    # Said as what decided it: the work counts of two CPU runs, never a GPU's device time.
    assert "by work counts" in out.stdout and "device time" not in out.stdout, out.stdout
    assert "decided by: the exact work counts of one call, which grew" in out.stdout
    markdown = (repo / "work.md").read_text()
    assert "by work counts" in markdown and "device time" not in markdown


def test_compare_says_once_what_a_noisy_run_could_not_see(repo: Path) -> None:
    """A benchmark whose time units split between two speeds cannot resolve the tolerance:
    `compare` leaves it inconclusive and says so once, naming what it could catch."""
    doc = json.loads((repo / "new.json").read_text())
    noisy = next(b for b in doc["benchmarks"] if "test_sweep" in b["key"])
    # Its time units split between two speeds: half of them 40% faster, half 40% slower.
    half = len(noisy["samples"]) // 2
    noisy["samples"] = [s * (0.6 if i < half else 1.4) for i, s in enumerate(noisy["samples"])]
    (repo / "noisy.json").write_text(json.dumps(doc))
    out = infperf(repo, "compare", "new.json", "noisy.json", "--markdown", "noisy.md")
    assert out.returncode == 0, out.stdout + out.stderr
    said = [x for x in out.stdout.splitlines() if x.startswith("not a failure, but ")]
    assert len(said) == 1, out.stdout
    line = said[0]
    assert f"{noisy['key'].split('::')[-1]} >= +" in line and "went ungated" in line
    assert line in (repo / "noisy.md").read_text()


def test_export_formats(repo: Path) -> None:
    out = infperf(repo, "export", "new.json", "--format", "github-action-benchmark")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    slowed = next(d for d in data if d["name"].endswith("test_slowed"))
    assert slowed["unit"] == "ms" and 0.2 < slowed["value"] < 0.4
    assert set(slowed) == {"name", "unit", "value", "range", "extra"}
    out = infperf(repo, "export", "HEAD", "--format", "bencher", "-o", "bmf.json")
    assert out.returncode == 0, out.stderr
    bmf = json.loads((repo / "bmf.json").read_text())
    sweep = bmf["test_suite.py::test_sweep[32-4]"]
    assert (
        sweep["latency"]["lower_value"]
        <= sweep["latency"]["value"]
        <= sweep["latency"]["upper_value"]
    )
    assert sweep["throughput"]["value"] > 0


def test_report_html_and_png(repo: Path) -> None:
    pytest.importorskip("matplotlib")
    out = infperf(
        repo,
        "report",
        "--html",
        "r.html",
        "--png",
        "figs",
        "--results",
        "new.json",
        "--compare",
        "old.json",
    )
    assert out.returncode == 0, out.stderr
    assert " PNG(s) to figs" in out.stdout  # counts what this call wrote
    text = (repo / "r.html").read_text()
    assert text.startswith("<!doctype html>") and "<svg" in text
    assert "<?xml" not in text and "<!DOCTYPE svg" not in text  # inline, not documents
    assert "Latency now vs baseline" in text and "Scaling" in text
    assert "History along main (HEAD)" in text  # two saved commits: a two-point history
    # Hovering a point or violin shows its details (SVG <title>, no script needed).
    head = git(repo, "rev-parse", "HEAD")
    assert f"<title>{head[:10]} slower\nmedian " in text
    assert "<title>now: median " in text and "<title>baseline: median " in text
    assert "<script" not in text
    # The table shows the figures each verdict was computed from, and who decided it.
    assert "<th>now</th><th>baseline</th><th>ratio [CI]</th>" in text
    assert "<th>by</th>" in text
    # new.json is a saving run's (no verdicts of its own): each benchmark is judged against
    # what --compare names, as `infperf compare new.json old.json` judges it, and the
    # baseline's violin names that commit.
    old = json.loads((repo / "old.json").read_text())["commit"]["sha"]
    assert "judged against old.json (commit " in out.stderr and old[:10] in out.stderr
    (slowed,) = re.findall(r"<tr><td>test_suite.py::test_slowed</td>.*?</tr>", text)
    assert "<td class='regression'>regression</td><td>stored</td>" in slowed
    assert re.search(r"</td><td>1\.\d+ \[1\.\d+, 1\.\d+\]</td>", slowed), slowed
    assert "<title>baseline: median " in text and f", commit {old[:10]}" in text
    # --compare with nothing to judge against it: refused, not a page without verdicts.
    out = infperf(repo, "report", "--compare", "old.json")
    assert out.returncode == 2 and "give --results FILE too" in out.stderr
    pngs = sorted((repo / "figs").glob("*.png"))
    assert len(pngs) >= 7 + 1  # one distribution per benchmark, one sweep, history
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    # Nothing named, HEAD one commit past its nearest baseline: the page says so under its
    # heading, as the terminal does.
    git(repo, "commit", "-q", "--allow-empty", "-m", "no baseline here")
    out = infperf(repo, "report", "--html", "plain.html", "--no-history")
    assert out.returncode == 0, out.stderr
    said = f"has no baseline of its own here: shown is the nearest, commit {head[:10]}"
    plain = (repo / "plain.html").read_text()
    assert said in out.stderr and said in plain
    # Its figures are that commit's, headed so: not "now" (this branch ran nothing).
    assert f"<th>commit {head[:10]}</th><th>baseline</th>" in plain and "<th>now</th>" not in plain


def test_prune_keeps_the_newest(repo: Path) -> None:
    out = infperf(repo, "prune", "--keep", "1", "--dry-run")
    assert out.returncode == 0 and "would remove" in out.stdout
    assert len(list((repo / "baselines").glob("*/*.json"))) == 2
    out = infperf(repo, "prune", "--keep", "1")
    assert out.returncode == 0, out.stderr
    (left,) = (repo / "baselines").glob("*/*.json")
    assert left.stem == git(repo, "rev-parse", "HEAD")


# --- history and change points (history_repo: conftest) --------------------------------


def test_history_names_the_commit_of_a_step(history_repo: tuple[Path, list[str]]) -> None:
    repo, shas = history_repo
    out = infperf(repo, "history", "-k", "step")
    assert out.returncode == 0, out.stderr
    marked = [line for line in out.stdout.splitlines() if "<-- change" in line]
    assert len(marked) == 1, out.stdout
    assert marked[0].strip().startswith(shas[17][:10])
    assert "+10." in marked[0] or "+9." in marked[0]
    # ...and how to find the commit: bisect over five stored commits either side of it.
    assert f"find it: infperf bisect {shas[11][:12]} {shas[22][:12]} " in out.stdout
    out = infperf(repo, "history", "-k", "flat")
    assert "<-- change" not in out.stdout


def test_history_offers_no_folder_without_baselines(tmp_path: Path) -> None:
    """A stray subfolder of the baselines folder is not an environment to show."""
    (tmp_path / "README").write_text("x\n")
    init_repo(tmp_path)
    (tmp_path / "baselines" / "stray").mkdir(parents=True)
    out = infperf(tmp_path, "history")
    assert out.returncode == 2, out.stdout
    assert f"no baselines in {tmp_path / 'baselines'}" in out.stderr
    assert "stray" not in out.stdout + out.stderr


def test_change_point_detection_unit() -> None:
    rng = np.random.default_rng(3)
    flat = list(np.exp(rng.normal(0, 0.01, 40)))
    assert detect(flat) == []
    step = flat[:25] + [v * 1.1 for v in flat[25:]]
    (change,) = detect(step)
    assert change.index == 25 and change.ratio == pytest.approx(1.1, rel=0.02)
    assert change.p_value <= 0.001  # no shuffle of 999 scored as high
    quiet = list(np.exp(rng.normal(0, 0.005, 40)))
    small = quiet[:20] + [v * 1.03 for v in quiet[20:]]
    assert detect(small, min_magnitude=0.05) == []  # infperf history --min-change 0.05
    (found,) = detect(small)  # the default minimum is 2%
    assert found.index == 20 and found.ratio == pytest.approx(1.03, rel=0.01)
    assert detect(small) == detect(small)  # a fixed seed: the same answer every time
    two = flat[:15] + [v * 1.2 for v in flat[15:30]] + [v * 0.9 for v in flat[30:]]
    assert [c.index for c in detect(two)] == [15, 30]


def test_report_with_history_marks_change_points(history_repo: tuple[Path, list[str]]) -> None:
    pytest.importorskip("matplotlib")
    repo, shas = history_repo
    out = infperf(repo, "report", "--html", "h.html")
    assert out.returncode == 0, out.stderr
    text = (repo / "h.html").read_text()
    assert "Change points" in text and shas[17][:10] in text
    assert (
        f"<code>infperf bisect {shas[11][:12]} {shas[22][:12]} test_h.py::test_step</code>" in text
    )


def test_progress_lines(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, git_env: None
) -> None:
    pytester.makefile(".ini", pytest=FAST_INI)
    pytester.makepyfile(
        "import pytest\n"
        "def test_a(infer_bench):\n    infer_bench(lambda: None)\n"
        "@pytest.mark.skip(reason='no GPU')\n"
        "def test_skipped(infer_bench):\n    infer_bench(lambda: None)\n"
        "def test_b(infer_bench):\n    infer_bench(lambda: None)\n"
        "    infer_bench(lambda: None, name='again')\n"
    )
    result = pytester.runpytest("-o", f"infperf_expert={expert(progress='lines')}")
    # A skipped perf test counts as finished: the last line reads [3/3], not [2/3].
    result.stdout.fnmatch_lines(
        [
            "infperf [[]1/3[]] test_progress_lines.py::test_a: median * (n=*)",
            "infperf [[]3/3[]] test_progress_lines.py::test_b: median * (n=*)",
            "infperf [[]3/3[]] test_progress_lines.py::test_b#again: median * (n=*)",
        ]
    )
    result = pytester.runpytest("-o", f"infperf_expert={expert(progress='off')}")
    assert "infperf [" not in result.stdout.str()
    # auto: in a CI service's log, or with -v; not in a plain local run, piped or not.
    monkeypatch.delenv("CI", raising=False)
    assert "infperf [" not in pytester.runpytest().stdout.str()
    assert "infperf [1/3]" in pytester.runpytest("-v").stdout.str()
    monkeypatch.setenv("CI", "true")
    assert "infperf [1/3]" in pytester.runpytest().stdout.str()
    # One figure per benchmark in one run: the line shows what the table shows.
    init_repo(pytester.path)
    pytester.runpytest("--perf-save").assert_outcomes(passed=2, skipped=1)
    out = pytester.runpytest("--perf-compare=HEAD").stdout.str()
    line = re.search(r"infperf \[1/3\] test_progress_lines.py::test_a: median (.+?) \(n=", out)
    row = re.search(r"^test_progress_lines.py::test_a +(\S+ \S+) ", out, re.M)
    assert line and row and line.group(1) == row.group(1), out


def _options(parser: Any, path: tuple[str, ...] = ("infperf",)) -> Any:
    """Every option and positional of the ``infperf`` command and its sub-commands."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            yield " ".join(path), "/".join(action.option_strings) or action.dest, action.help


def test_every_option_says_what_it_does_in_plain_text() -> None:
    """`infperf ... --help` lists every option with its help, and none carries Markdown
    (backticks, bold) that a terminal prints raw."""
    from pytest_infperf.cli.main import build_parser

    found = list(_options(build_parser()))
    assert len(found) > 50
    missing = [f"{cmd} {name}" for cmd, name, text in found if not (text or "").strip("() ")]
    assert missing == []
    marked = [f"{cmd} {name}" for cmd, name, text in found if "`" in text or "**" in text]
    assert marked == []
    # The command's help names no pytest flag as if it were its own (a file a flag wrote,
    # --perf-json's, is named as that file).
    flags = [f"{c} {n}" for c, n, t in found if "--perf-" in (t or "").replace("--perf-json", "")]
    assert flags == []


def test_version() -> None:
    import pytest_infperf

    out = subprocess.run(
        [sys.executable, "-m", "pytest_infperf", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == f"pytest-infperf {pytest_infperf.__version__}"


def test_a_negative_work_count_is_refused_by_the_schema(tmp_path: Path) -> None:
    """A count below zero would read as work that fell (a pass on the device time): a
    results file holding one is refused, naming where."""
    records = Path(__file__).parent / "data" / "gpu-h200"
    doc = json.loads((records / "aa2.json").read_text())
    doc["benchmarks"][0]["work"]["kernels"] = -5
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    out = infperf(records, "compare", "save.json", str(tmp_path / "bad.json"))
    assert out.returncode == 2
    assert "benchmarks/0/work/kernels: -5 is less than the minimum of 0" in out.stderr
