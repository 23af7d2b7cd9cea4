"""``infperf init``: adopt pytest-infperf in an existing repository.

It writes a first benchmark test for the models it finds (``.onnx`` files; transformers
models loaded by name with ``from_pretrained``; ``torch.nn.Module`` subclasses), or a
template when it finds none it can run; the ``infperf_*`` settings where pytest reads its
configuration (``pyproject.toml`` unless the project keeps it in ``pytest.ini``, ``tox.ini``
or ``setup.cfg``); ``baselines/`` in ``.gitignore`` (baselines live on their own branch);
and the workflows that call the GitHub Action (``perf.yml`` on the runner labels given,
``perf-comment.yml``). Models are found by reading files (Python is parsed, never
imported or run). Nothing is overwritten: if a file it would write exists, or the
configuration already sets an ``infperf_*`` key, it names it, writes nothing and exits 2.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path

#: The Action's reference in the written workflows (docs/CI.md, "Versions of the Action").
ACTION = "pytest-infperf/pytest-infperf@v1"
TEST_FILE = "test_infperf.py"
WORKFLOWS = Path(".github") / "workflows"
#: Folders never searched for models: environments, caches, build output, VCS.
SKIP_DIRS = {
    "node_modules",
    "site-packages",
    "__pycache__",
    "build",
    "dist",
    "venv",
    "env",
    "baselines",
    "results",
}
#: A repository's first benchmarks: enough to start with, few enough to read.
MAX_TESTS = 8
#: Files larger than this are not read (a generated or vendored file, not a model's code).
MAX_SOURCE_BYTES = 512 * 1024
LABEL = re.compile(r"^[A-Za-z0-9_.-]+$")
MODULE_BASES = {"Module", "nn.Module", "torch.nn.Module"}


class InitError(Exception):
    """Nothing written: exit 2 with the message."""


@dataclasses.dataclass
class Found:
    """What the repository holds that a benchmark can measure."""

    onnx: list[str] = dataclasses.field(default_factory=list)
    hf: list[str] = dataclasses.field(default_factory=list)
    #: (module path, class name) of each ``torch.nn.Module`` subclass.
    torch: list[tuple[str, str]] = dataclasses.field(default_factory=list)


def _files(root: Path) -> list[Path]:
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
        out += [Path(folder) / f for f in sorted(files)]
    return out


def _is_module_base(node: ast.expr) -> bool:
    return ast.unparse(node) in MODULE_BASES


def find_models(root: Path) -> Found:
    """The models in ``root``, by reading its files (never importing them). Tests and
    conftest files are skipped: a module defined there is a test's fixture."""
    found = Found()
    for path in _files(root):
        rel = path.relative_to(root).as_posix()
        if path.suffix == ".onnx":
            found.onnx.append(rel)
            continue
        name = path.name
        if path.suffix != ".py" or name.startswith("test_") or name == "conftest.py":
            continue
        if "tests" in path.relative_to(root).parts[:-1]:
            continue
        try:
            if path.stat().st_size > MAX_SOURCE_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "Module" not in text and "from_pretrained" not in text:
            continue  # most files: no parse needed
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            continue
        module = rel[: -len(".py")].removeprefix("src/").replace("/", ".")
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(_is_module_base(b) for b in node.bases):
                found.torch.append((module, node.name))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "from_pretrained"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and node.args[0].value not in found.hf
            ):
                found.hf.append(node.args[0].value)
    return found


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "model"


HEADER = '''\
"""First benchmarks, written by `infperf init`: edit them freely. A test measures what
it hands `infer_bench` (a torch module, an ONNX Runtime session, an .onnx path or any
callable) and its inputs. Settings: the infperf_* keys of your pytest configuration;
every option is in pytest-infperf's docs/USAGE.md.
"""

from __future__ import annotations
'''
#: The header's lines that only some modules need (imports, the repository's root, the
#: mark of a test to finish), added when a test uses them.
PATH_IMPORT = "\nfrom pathlib import Path\n"
PYTEST_IMPORT = "\nimport pytest\n"
ROOT_LINE = "ROOT = Path(__file__).resolve().parents[{depth}]\n"
EDIT_LINE = (
    "#: The mark of a test that needs your edit (its comments say what) before it runs.\n"
    'EDIT = "infperf init: edit this test as its comments say, then remove this mark"\n'
)

TEMPLATE = '''

def test_template_latency(infer_bench):
    """A stand-in for your model: replace the lambda by its call and give its inputs,
    e.g. infer_bench(model, (torch.randn(1, 3, 224, 224),))."""
    data = list(range(10_000))
    infer_bench(lambda: sorted(data, reverse=True))
'''

ONNX_INPUTS = '''

#: ONNX Runtime's input types, as numpy's.
ONNX_TYPES = {
    "tensor(float)": "float32",
    "tensor(double)": "float64",
    "tensor(float16)": "float16",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(bool)": "bool",
}


def _onnx_inputs(path):
    """Zeros of each input's shape and type (a symbolic dimension taken as 1): replace
    them by a real input's shape where it changes the time."""
    np = pytest.importorskip("numpy")
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return {
        i.name: np.zeros(
            [d if isinstance(d, int) else 1 for d in i.shape],
            dtype=ONNX_TYPES.get(i.type, "float32"),
        )
        for i in session.get_inputs()
    }
'''


def _literal(text: str) -> str:
    """A Python string literal in double quotes, as a formatter writes it."""
    return json.dumps(text)


def _onnx_test(rel: str) -> str:
    return f"""

def test_{_slug(Path(rel).stem)}_onnx_latency(infer_bench):
    path = ROOT / {_literal(rel)}
    infer_bench(path, _onnx_inputs(path))
"""


def _hf_test(name: str, known: bool) -> str:
    mark = ""
    if not known:
        mark = (
            "@pytest.mark.skip(reason=EDIT)\n"
            f"# infperf_hf builds its presets offline, {name} only from your local\n"
            "# transformers cache: check that the runner has it\n"
        )
    return f"""

{mark}def test_{_slug(name)}_latency(infer_bench, infperf_hf):
    model = infperf_hf.model({_literal(name)})  # its configuration, random weights
    inputs = infperf_hf.inputs({_literal(name)}, batch_size=1, seq_len=128)
    infer_bench(model, inputs)
"""


def _torch_test(module: str, cls: str) -> str:
    return f"""

@pytest.mark.skip(reason=EDIT)
def test_{_slug(cls)}_latency(infer_bench):
    torch = pytest.importorskip("torch")
    from {module} import {cls}

    model = {cls}()  # give it its arguments
    infer_bench(model, (torch.randn(1, 16),))  # and a real input's shape
"""


def benchmark_module(found: Found, depth: int) -> tuple[str, list[str]]:
    """The test file's text, and what it measures, for the report."""
    from ..hf import ALIASES, PRESETS

    parts: list[str] = []
    said: list[str] = []
    runnable = 0
    for rel in found.onnx[:MAX_TESTS]:
        parts.append(_onnx_test(rel))
        said.append(f"{rel} (ONNX)")
        runnable += 1
    for name in found.hf[: MAX_TESTS - len(parts)]:
        known = name.lower() in PRESETS or name.lower() in ALIASES
        parts.append(_hf_test(name, known))
        said.append(f"{name} (transformers{'' if known else ', skipped until checked'})")
        runnable += known
    for module, cls in found.torch[: max(0, MAX_TESTS - len(parts))]:
        parts.append(_torch_test(module, cls))
        said.append(f"{module}.{cls} (torch, skipped until given its inputs)")
    if not runnable:
        parts.insert(0, TEMPLATE)
        said.insert(0, "a template benchmark (no model found that runs as is)")
    body = "".join(parts)
    head = HEADER + (PATH_IMPORT if found.onnx else "")
    head += PYTEST_IMPORT if "pytest." in body or found.onnx else ""
    defs = (ROOT_LINE.format(depth=depth) if found.onnx else "") + (
        EDIT_LINE if "EDIT" in body else ""
    )
    text = head + (f"\n{defs}" if defs else "") + (ONNX_INPUTS if found.onnx else "") + body
    return text, said


#: The settings ``init`` writes: the defaults, said where a team changes them.
def _settings() -> list[tuple[str, str, str]]:
    from ..core import settings
    from ..core.options import SPECS, ini_name

    return [
        (ini_name("threshold"), str(SPECS["threshold"].default), "a slowdown past this fails"),
        (ini_name("max_time"), str(SPECS["max_time"].default), "seconds of samples per benchmark"),
        (
            "infperf_run_alpha",
            settings.SESSION_INI["infperf_run_alpha"][1],
            "the chance a run with nothing changed fails",
        ),
    ]


#: Where pytest reads its configuration, in its own order of precedence: the file, the
#: section header and whether it is TOML.
CONFIGS = (
    ("pytest.ini", r"\[pytest\]", False),
    (".pytest.ini", r"\[pytest\]", False),
    ("pyproject.toml", r"\[tool\.pytest(\.ini_options)?\]", True),
    ("tox.ini", r"\[pytest\]", False),
    ("setup.cfg", r"\[tool:pytest\]", False),
)


def settings_edit(root: Path) -> tuple[Path, str, str]:
    """The configuration file to write, its new text, and what was done to it."""
    for name, header, toml in CONFIGS:
        path = root / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        match = re.search(rf"^{header}[ \t]*$", text, re.M)
        if match is None:
            continue
        already = re.findall(r"^[ \t]*(infperf_\w+)[ \t]*=", text, re.M)
        if already:
            raise InitError(
                f"{name} already sets {', '.join(sorted(set(already)))}: pytest-infperf is "
                "configured here already; nothing was written (remove them to start again)"
            )
        at = text.index("\n", match.end()) + 1 if "\n" in text[match.end() :] else len(text)
        lines = _setting_lines(toml)
        if at == len(text) and not text.endswith("\n"):
            lines = "\n" + lines
        return path, text[:at] + lines + text[at:], f"infperf_* settings under {match.group()}"
    path = root / "pyproject.toml"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    sep = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
    new = f"{text}{sep}[tool.pytest.ini_options]\n{_setting_lines(True)}"
    return path, new, "infperf_* settings under a new [tool.pytest.ini_options]"


def _setting_lines(toml: bool) -> str:
    # A comment on its own line: an ini file's value would keep an inline one.
    out = ["# pytest-infperf (written by infperf init; every option: its docs/USAGE.md)\n"]
    for key, value, why in _settings():
        out.append(f"# {why}\n{key} = {json.dumps(value) if toml else value}\n")
    return "".join(out)


def _runs_on(labels: list[str]) -> str:
    return labels[0] if len(labels) == 1 else "[" + ", ".join(labels) + "]"


PERF_YML = """\
# Written by `infperf init`: the performance gate (pytest-infperf's docs/CI.md). A pull
# request is compared with its base branch's stored baselines; a push to {branch} saves
# the commit's. On self-hosted runners, set Settings > Actions > General to require
# approval for outside collaborators' runs: this file cannot keep a fork's code off them.
name: perf
on:
  push:
    branches: [{branch}]
  pull_request:
  workflow_dispatch:
concurrency:  # a newer push to a pull request cancels its older run
  group: perf-${{{{ github.event_name == 'push' && '{branch}' || github.ref }}}}
  cancel-in-progress: ${{{{ github.event_name == 'pull_request' }}}}
permissions:
  contents: read
jobs:
  perf:
    runs-on: {runs_on}
    timeout-minutes: 90
    steps:
      - uses: actions/checkout@v4
        with: {{fetch-depth: 0, persist-credentials: false}}
      - name: Install your project and its models' libraries
        run: python3 -m venv .venv && .venv/bin/pip install {install}
      - uses: {action}
        with: {{tests: {tests}, python: .venv/bin/python}}
  push-baselines:  # the only job with a write token: {branch} only, one push at a time
    needs: perf
    if: github.event_name == 'push' && github.ref == 'refs/heads/{branch}'
    runs-on: ubuntu-latest
    permissions: {{contents: write}}
    concurrency: {{group: perf-baselines-push, cancel-in-progress: false}}
    steps:
      - uses: actions/checkout@v4
        with: {{fetch-depth: 0}}
      - uses: {action}
        with: {{role: push-baselines}}
"""

COMMENT_YML = """\
# Written by `infperf init`: posts the comment the perf workflow's run built. workflow_run
# runs this file from the default branch with a token that may write comments, also for
# forks' pull requests; the Action reads the run's artifact as data and finds the pull
# request from the run itself.
name: perf-comment
on:
  workflow_run:
    workflows: [perf]
    types: [completed]
permissions:
  actions: read
  pull-requests: write
jobs:
  comment:
    if: github.event.workflow_run.event == 'pull_request'
    runs-on: ubuntu-latest
    steps:
      - uses: {action}
        with: {{role: post-comment}}
"""


def _git(root: Path, *args: str) -> str | None:
    out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    return out.stdout.strip() if out.returncode == 0 else None


def _default_branch(root: Path) -> str:
    """origin's default branch, else the branch checked out, else main."""
    remote = _git(root, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD")
    if remote and "/" in remote:
        return remote.split("/", 1)[1]
    return _git(root, "branch", "--show-current") or "main"


def _install(root: Path, found: Found) -> str:
    """What the workflow's install step installs: the project, and the libraries the
    benchmarks written for it need (the Action installs pytest-infperf itself)."""
    parts = []
    pyproject = root / "pyproject.toml"
    packaged = (root / "setup.py").is_file() or (
        pyproject.is_file()
        and re.search(r"^\[(project|build-system)\]", pyproject.read_text(), re.M) is not None
    )
    if packaged:
        parts.append("-e .")
    if (root / "requirements.txt").is_file():
        parts.append("-r requirements.txt")
    if found.onnx:
        parts.append("onnxruntime")
    if found.torch or found.hf:
        parts.append("torch")
    if found.hf:
        parts.append("transformers")
    return " ".join(parts) or "pytest"


def _labels(text: str) -> list[str]:
    labels = [label.strip() for label in text.split(",") if label.strip()]
    bad = [label for label in labels if not LABEL.match(label)]
    if not labels or bad:
        raise InitError(
            f"--runner {text!r}: give the runner labels separated by commas, each of letters, "
            "digits, '-', '_' or '.' (e.g. --runner self-hosted,gpu)"
        )
    return labels


def _gitignore(root: Path) -> tuple[Path, str] | None:
    """``.gitignore`` with ``baselines/`` added (None: it is ignored already)."""
    path = root / ".gitignore"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if re.search(r"^/?baselines/?[ \t]*$", text, re.M):
        return None
    sep = "" if not text or text.endswith("\n") else "\n"
    note = "# pytest-infperf: baselines are stored on their own branch (infperf-baselines)\n"
    return path, f"{text}{sep}{note}baselines/\n"


def plan_files(args: argparse.Namespace, root: Path) -> tuple[dict[Path, str], list[str]]:
    """Every file ``init`` writes, with its text, and a line per file for the report;
    :class:`InitError` when one it would create exists."""
    labels = _labels(args.runner)
    tests = Path(args.tests)
    if tests.is_absolute() or ".." in tests.parts:
        raise InitError(f"--tests {args.tests!r}: give a folder inside the repository")
    found = find_models(root)
    text, measures = benchmark_module(found, len(tests.parts))
    branch = args.branch or _default_branch(root)
    install = _install(root, found)
    fields = {"branch": branch, "runs_on": _runs_on(labels), "action": args.action}
    created = {
        root / tests / TEST_FILE: (text, "; ".join(measures)),
        root / WORKFLOWS / "perf.yml": (
            PERF_YML.format(**fields, install=install, tests=_literal(tests.as_posix())),
            f"runs on {_runs_on(labels)}, installs: pip install {install}",
        ),
        root / WORKFLOWS / "perf-comment.yml": (
            COMMENT_YML.format(action=args.action),
            "posts the pull-request comment (workflow_run)",
        ),
    }
    there = [p.relative_to(root).as_posix() for p in created if p.exists()]
    if there:
        them = "it" if len(there) == 1 else "them"
        raise InitError(
            f"{', '.join(there)} exist{'s' * (len(there) == 1)}: infperf init never "
            f"overwrites a file; move {them} aside (or give --tests another folder) and run "
            "it again. Nothing was written"
        )
    config, config_text, config_what = settings_edit(root)
    files = {path: body for path, (body, _) in created.items()}
    said = {path: what for path, (_, what) in created.items()}
    files[config], said[config] = config_text, config_what
    ignore = _gitignore(root)
    if ignore is not None:
        files[ignore[0]], said[ignore[0]] = ignore[1], "baselines/ (kept on their own branch)"
    width = max(len(p.relative_to(root).as_posix()) for p in files)
    lines = [f"  {p.relative_to(root).as_posix():<{width}}  {said[p]}" for p in files]
    return files, lines


def run(args: argparse.Namespace) -> int:
    top = _git(Path(args.repo), "rev-parse", "--show-toplevel")
    if top is None:
        raise InitError(f"{args.repo} is not in a git repository: run git init first")
    root = Path(top)
    files, lines = plan_files(args, root)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    tests = Path(args.tests).as_posix()
    print("infperf init: wrote\n" + "\n".join(lines))
    print(
        "\nNext:\n"
        f"  pytest {tests} --perf-save     # measure here, and store this commit's baseline\n"
        "Then commit these files and push: the run on the default branch saves the first\n"
        "baselines (on the infperf-baselines branch), and pull requests are compared with\n"
        "them. Self-hosted runners: require approval for outside collaborators' runs\n"
        '(Settings > Actions > General; pytest-infperf\'s docs/CI.md, "Security").'
    )
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """infperf init."""
    p = sub.add_parser(
        "init",
        help="adopt pytest-infperf here: a first benchmark test, settings, workflows",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--repo", default=".", help="path inside the repository (default .)")
    p.add_argument(
        "--runner",
        default="self-hosted",
        help="the perf job's runner labels, comma-separated (default self-hosted; e.g. "
        "self-hosted,gpu)",
    )
    p.add_argument("--tests", default="tests/perf", help="folder of the test (tests/perf)")
    p.add_argument(
        "--branch", default=None, help="the default branch (default: origin's, else this one)"
    )
    p.add_argument("--action", default=ACTION, help=f"the Action to call (default {ACTION})")
    p.set_defaults(func=run)
