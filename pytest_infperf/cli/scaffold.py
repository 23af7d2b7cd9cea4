"""``infperf init``: adopt pytest-infperf in an existing repository.

It writes a first benchmark test for the models it finds (``.onnx`` files; transformers
models loaded by name with ``from_pretrained``; ``torch.nn.Module`` subclasses, imported by
module name, or loaded by their file's path where that is no module's name), or a template
when it finds none it can run and the repository has no perf test of its own; the
``infperf_*`` settings in the file pytest reads its configuration from
(``cli/initconfig.py``, by pytest's own rules), and nothing else of the suite's: no
``pythonpath`` (a src layout's tests would then import the source tree instead of the
installed package), the project's modules imported as installed or, where it is not a
package the workflow installs, from its folder by the test alone; ``baselines/`` in
``.gitignore`` (baselines live on their own branch); and the workflows that call the GitHub
Action (``perf.yml`` on the runner labels given, installing the project and the model
libraries its code imports, pinned by its constraints file where it has one, in an
environment cached between runs, on the GPU of a runner whose labels name one;
``perf-comment.yml``). Models are found by reading files (Python is parsed, never imported
or run). Nothing is overwritten: if a file it would write exists, the configuration already
sets an ``infperf_*`` key or cannot be edited so that it reads back as intended, or an
argument is not one a workflow takes, it says so, writes nothing and exits 2."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import keyword
import os
import re
import shlex
import subprocess
import textwrap
from collections import Counter
from pathlib import Path

from ..core.options import BASELINES_BRANCH
from . import initconfig

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
#: The model libraries the workflow installs when the code imports them (each installed
#: by its import name), in the order the install step names them.
LIBRARIES = ("onnxruntime", "onnx", "torch", "torchvision", "torchaudio", "transformers")
#: What a file must mention to be parsed (most files are not).
WORTH_PARSING = re.compile(r"Module|from_pretrained|" + "|".join(LIBRARIES))
#: A reference ``uses:`` takes: owner/repo[/path]@ref, a local ./path, or docker://image.
ACTION_REF = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+(/[A-Za-z0-9._/-]+)?@[A-Za-z0-9._/-]+"
    r"|\./[A-Za-z0-9._/-]*|docker://[A-Za-z0-9._/:@-]+"
)


#: init's refusal (nothing written, exit 2), raised here and by the configuration's edit.
InitError = initconfig.InitError


@dataclasses.dataclass
class Found:
    """What the repository holds that a benchmark can measure."""

    onnx: list[str] = dataclasses.field(default_factory=list)
    hf: list[str] = dataclasses.field(default_factory=list)
    #: (file, class name) of each ``torch.nn.Module`` subclass.
    torch: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    #: The :data:`LIBRARIES` its code imports.
    imports: set[str] = dataclasses.field(default_factory=set)


def module_name(rel: str) -> str | None:
    """The dotted name a file is imported by, from its import root (``src/`` in a src
    layout, else the repository's root); None when its path is no module's (a folder or
    file name that is not an identifier: ``my-models/net.py``)."""
    parts = rel.removesuffix(".py").removeprefix("src/").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        return None
    return ".".join(parts)


def import_root(rel: str) -> str:
    return "src" if rel.startswith("src/") else "."


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
        text = _source(path)
        if text is None or WORTH_PARSING.search(text) is None:
            continue  # most files: no parse needed
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names.append(node.module)
                found.imports.update(n.split(".")[0] for n in names if n.split(".")[0] in LIBRARIES)
            elif isinstance(node, ast.ClassDef) and any(_is_module_base(b) for b in node.bases):
                found.torch.append((rel, node.name))
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


def _source(path: Path) -> str | None:
    """A source file's text, read only where it is small enough to be a project's own (None:
    too large, or unreadable)."""
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def perf_tests(root: Path) -> list[str]:
    """The repository's test files that already measure with ``infer_bench`` (read, never
    imported), relative to the root."""
    out = []
    for path in _files(root):
        name = path.name
        if path.suffix != ".py" or not (name.startswith("test_") or name.endswith("_test.py")):
            continue
        text = _source(path)
        if text is not None and re.search(r"\binfer_bench\b", text):
            out.append(path.relative_to(root).as_posix())
    return out


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
LOAD_IMPORTS = "import importlib.util\nimport sys\n"
IMPORT_IMPORTS = "import importlib\nimport sys\n"
PATH_IMPORT = "from pathlib import Path\n"
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
#: The template where the project's code imports torch: a torch model, which runs where the
#: run's device says (``--perf-device=cuda`` in the workflow of a GPU runner).
TORCH_TEMPLATE = '''

def test_template_latency(infer_bench):
    """A stand-in for your model: replace it by yours and give a real input's shape. It
    runs where the run's device says (--perf-device=cuda on a GPU runner, else the CPU)."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)
    )
    infer_bench(model, (torch.randn(8, 256),))
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


LOAD = '''

def _load(rel, name):
    """The class `name` of the file `rel`, loaded by its path (no module's name)."""
    spec = importlib.util.spec_from_file_location(rel.removesuffix(".py"), ROOT / rel)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import does (dataclasses look it up)
    spec.loader.exec_module(module)
    return getattr(module, name)
'''


IMPORT = '''

def _import(root, module, name):
    """The class `name` of `module`, imported from the folder ROOT / root; sys.path is
    put back as it was, so the rest of the suite imports as before."""
    folder = str(ROOT / root)
    sys.path.insert(0, folder)
    try:
        return getattr(importlib.import_module(module), name)
    finally:
        sys.path.remove(folder)
'''


def _literal(text: str) -> str:
    """A Python string literal in double quotes, as a formatter writes it."""
    return json.dumps(text)


def _onnx_test(name: str, rel: str) -> str:
    return f"""

def test_{name}_latency(infer_bench):
    path = ROOT / {_literal(rel)}
    infer_bench(path, _onnx_inputs(path))
"""


def _hf_test(test: str, name: str, known: bool) -> str:
    mark = ""
    if not known:
        mark = (
            "@pytest.mark.skip(reason=EDIT)\n"
            f"# infperf_hf builds its presets offline, {name} only from your local\n"
            "# transformers cache: check that the runner has it\n"
        )
    return f"""

{mark}def test_{test}_latency(infer_bench, infperf_hf):
    model = infperf_hf.model({_literal(name)})  # its configuration, random weights
    inputs = infperf_hf.inputs({_literal(name)}, batch_size=1, seq_len=128)
    infer_bench(model, inputs)
"""


def _torch_test(name: str, rel: str, cls: str, installed: bool) -> str:
    module = module_name(rel)
    load = f"from {module} import {cls}"
    if module is None:  # a dotted name would not parse: the file is loaded by its path
        load = f"{cls} = _load({_literal(rel)}, {_literal(cls)})"
    elif not (installed and rel.startswith("src/")):
        # Not known to be in the installed package (only a src layout's package is): from
        # its folder, by this test alone, with sys.path as it was after.
        load = f"{cls} = _import({_literal(import_root(rel))}, {_literal(module)}, {_literal(cls)})"
    return f"""

@pytest.mark.skip(reason=EDIT)
def test_{name}_latency(infer_bench):
    torch = pytest.importorskip("torch")
    {load}

    model = {cls}()  # give it its arguments
    infer_bench(model, (torch.randn(1, 16),))  # and a real input's shape
"""


def _names(choices: list[tuple[str, str]]) -> list[str]:
    """Each test's name: its short one (the model's) where no other test has it, else its
    precise one (the file's path in it), numbered where even that is taken: two functions
    of one name in a module are one test."""
    shorts = Counter(short for short, _ in choices)
    names: list[str] = []
    for short, precise in choices:
        name = base = short if shorts[short] == 1 else precise
        count = 1
        while name in names:
            count += 1
            name = f"{base}_{count}"
        names.append(name)
    return names


def benchmark_module(
    found: Found, depth: int, installed: bool = True, template: bool = True
) -> tuple[str, list[str]]:
    """The test file's text, and what it measures, for the report (empty: nothing to
    write). ``installed``: the workflow installs the project as a package
    (:func:`installable`), so its modules import by name; ``template``: a stand-in
    benchmark where no model found runs as is (not where the repository measures
    already)."""
    from ..hf import ALIASES, PRESETS

    onnx = found.onnx[:MAX_TESTS]
    hf = found.hf[: MAX_TESTS - len(onnx)]
    torch = found.torch[: MAX_TESTS - len(onnx) - len(hf)]
    names = iter(
        _names(
            [
                (f"{_slug(Path(r).stem)}_onnx", f"{_slug(r.removesuffix('.onnx'))}_onnx")
                for r in onnx
            ]
            + [(_slug(name), _slug(name)) for name in hf]
            + [(_slug(c), f"{_slug(r.removesuffix('.py'))}_{_slug(c)}") for r, c in torch]
        )
    )
    parts: list[str] = []
    said: list[str] = []
    for rel in onnx:
        parts.append(_onnx_test(next(names), rel))
        said.append(f"{rel} (ONNX)")
    runnable = len(onnx)
    for name in hf:
        known = name.lower() in PRESETS or name.lower() in ALIASES
        parts.append(_hf_test(next(names), name, known))
        said.append(f"{name} (transformers{'' if known else ', skipped until checked'})")
        runnable += known
    for rel, cls in torch:
        parts.append(_torch_test(next(names), rel, cls, installed))
        module = module_name(rel)
        where = f"{module}.{cls}" if module else f"{cls} of {rel} (loaded by its path)"
        said.append(f"{where} (torch, skipped until given its inputs)")
    if not runnable and template:
        parts.insert(0, TORCH_TEMPLATE if "torch" in found.imports else TEMPLATE)
        said.insert(0, "a template benchmark (no model found that runs as is)")
    if not parts:
        return "", []
    body = "".join(parts)
    load = any(module_name(rel) is None for rel, _ in torch)
    imports = any(
        module_name(rel) and not (installed and rel.startswith("src/")) for rel, _ in torch
    )
    rooted = bool(onnx) or load or imports
    stdlib = (LOAD_IMPORTS if load else IMPORT_IMPORTS if imports else "") + (
        PATH_IMPORT if rooted else ""
    )
    head = HEADER + (f"\n{stdlib}" if stdlib else "")
    head += PYTEST_IMPORT if "pytest." in body or onnx else ""
    defs = (ROOT_LINE.format(depth=depth) if rooted else "") + (EDIT_LINE if "EDIT" in body else "")
    helpers = (ONNX_INPUTS if onnx else "") + (LOAD if load else "") + (IMPORT if imports else "")
    text = head + (f"\n{defs}" if defs else "") + helpers + body
    return text, said


#: The settings ``init`` writes: the defaults, said where a team changes them.
def _settings() -> list[tuple[str, str, str]]:
    from ..core import options
    from ..core.options import SPECS, ini_name

    return [
        (ini_name("threshold"), str(SPECS["threshold"].default), "a slowdown past this fails"),
        (ini_name("max_time"), str(SPECS["max_time"].default), "seconds of samples per benchmark"),
        (
            "infperf_run_alpha",
            str(options.SESSION_SPECS["run_alpha"].default),
            "the chance a run with nothing changed fails",
        ),
    ]


def settings_edit(root: Path, tests: Path = Path("tests/perf")) -> tuple[Path, str, str]:
    """The configuration file pytest reads for ``pytest TESTS``, its new text with the
    settings, and what was done. Only the gate's settings: nothing that changes how the
    rest of the suite runs."""
    target = initconfig.locate(root, tests)
    text, what = initconfig.edit(target, list(_settings()))
    return target.path, text, what


#: Where the first benchmark goes, and what the workflow runs, unless told or the repository
#: has perf tests already.
DEFAULT_TESTS = "tests/perf"


def tests_folder(args: argparse.Namespace, existing: list[str]) -> Path:
    """Where the first benchmark goes and what the workflow runs: ``--tests``, else the
    folder of the repository's perf tests, else :data:`DEFAULT_TESTS`."""
    tests = Path(args.tests or (_folder(existing) if existing else DEFAULT_TESTS))
    if tests.is_absolute() or ".." in tests.parts:
        raise InitError(f"--tests {args.tests!r}: give a folder inside the repository")
    return tests


def _folder(files: list[str]) -> str:
    """The folder that holds all of ``files`` (relative paths), ``.`` for the root."""
    return os.path.commonpath([str(Path(f).parent) for f in files]) or "."


def _pins_note(pinned: Pins) -> str:
    """The install step's comment: what pins it, or how to pin it."""
    text = f"pinned by {pinned.by}" if pinned.by else str(pinned.how)
    lines = textwrap.wrap(text, 80)
    return "".join(f"        # {line}\n" for line in lines)


#: The runner a workflow gets when ``--runner`` names none: one every repository has (a
#: self-hosted label with no such runner queues the job for ever), said in the workflow.
HOSTED = "ubuntu-latest"
HOSTED_NOTE = (
    "  # GitHub's hosted CPU runner (infperf init had no --runner): for a GPU,\n"
    "    # put your self-hosted runner's labels here, e.g. [self-hosted, gpu]"
)


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
    runs-on: {runs_on}{runs_on_note}
    timeout-minutes: 90
    steps:
      - uses: actions/checkout@v4
        with: {{fetch-depth: 0, persist-credentials: false}}
      - name: Python's version (the cached environment is this Python's)
        id: python
        run: echo "version=$(python3 -V | cut -d' ' -f2)" >> "$GITHUB_OUTPUT"
      # The environment between runs (checkout cleans the workspace; torch is gigabytes),
      # keyed on the runner, its Python and what pins the install.
      - uses: actions/cache@v4
        with:
          path: .venv
          key: {cache_key}-${{{{ hashFiles({hashed}) }}}}
          restore-keys: {cache_key}-
      - name: Install your project and its models' libraries
{pins_note}        run: python3 -m venv .venv && {install}
      - uses: {action}
        with: {with_}
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
  actions: read          # the triggering run's artifact
  contents: read         # the commit-to-pull-request lookup
  pull-requests: write   # the one comment per pull request
jobs:
  comment:
    if: github.event.workflow_run.event == 'pull_request'
    runs-on: ubuntu-latest
    steps:
{checkout}      - uses: {action}
        with: {{role: post-comment}}
"""
#: A local Action (``--action ./path``) is read from the checkout: of the default branch,
#: which workflow_run runs, never the pull request's.
LOCAL_CHECKOUT = """\
      - uses: actions/checkout@v4  # the default branch, never the pull request's
        with: {persist-credentials: false}
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


def installable(root: Path) -> bool:
    """Whether the repository is a package pip installs (``setup.py``, or a
    ``pyproject.toml`` with a project or build system)."""
    pyproject = root / "pyproject.toml"
    doc = initconfig.read_toml(pyproject, initconfig.read(pyproject)) if pyproject.is_file() else {}
    return (root / "setup.py").is_file() or "project" in doc or "build-system" in doc


#: Where a runner without a GPU gets torch: PyPI's build brings CUDA (several GB).
TORCH_CPU = "https://download.pytorch.org/whl/cpu"
#: Files that pin what pip installs, given to it with ``-c`` (the first found).
CONSTRAINTS = ("constraints.txt", "requirements/constraints.txt", "constraints/constraints.txt")
#: Lock files pip does not read, and the command that exports each as a constraints file.
LOCKS = {
    "uv.lock": "uv export --frozen --no-hashes --no-emit-project -o constraints.txt",
    "poetry.lock": "poetry export --without-hashes -o constraints.txt",
    "pdm.lock": "pdm export --no-hashes -o constraints.txt",
    "pylock.toml": "a constraints.txt of its name==version pins",
}
#: What the install reads besides the pins: a change of any of them is a new environment.
SPECS = ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt")


@dataclasses.dataclass(frozen=True)
class Pins:
    """What pins the workflow's install: a constraints file (given to pip with ``-c``), a
    requirements file whose every line is ``==``, or nothing; and what to do then."""

    #: The constraints file passed with ``-c`` (None: none found).
    constraints: str | None
    #: What pins the install, in words (None: nothing does).
    by: str | None
    #: Where nothing pins it, how to (said in the workflow and in init's summary).
    how: str | None
    #: The files the cached environment's key hashes.
    hashed: tuple[str, ...]


def pins(root: Path) -> Pins:
    """What pins the install in ``root``, and what the cache key hashes."""
    constraints = next((c for c in CONSTRAINTS if (root / c).is_file()), None)
    hashed = tuple(f for f in (*SPECS, *LOCKS) if (root / f).is_file())
    if constraints is not None:
        return Pins(constraints, constraints, None, (constraints, *hashed))
    if _pinned(root / "requirements.txt"):
        return Pins(None, "requirements.txt (every requirement ==)", None, hashed)
    lock = next((name for name in LOCKS if (root / name).is_file()), None)
    if lock is not None:
        how = (
            f"{lock} pins your dependencies but pip does not read it: export it as "
            f"constraints ({LOCKS[lock]}), commit constraints.txt and add "
            "-c constraints.txt to the install step"
        )
    else:
        how = (
            "nothing pins what the workflow installs: each run takes the newest releases, and "
            "a new torch changes the baselines' environment without a change of yours. Pin "
            "it: pip freeze > constraints.txt where it works, commit it, and add "
            "-c constraints.txt to the install step (infperf init does where it finds one)"
        )
    return Pins(None, None, how, hashed)


def _pinned(path: Path) -> bool:
    """A requirements file whose every requirement is pinned (``name==version``)."""
    if not path.is_file():
        return False
    lines = [line.split("#", 1)[0].strip() for line in initconfig.read(path).splitlines()]
    reqs = [line for line in lines if line and not line.startswith("-")]
    return bool(reqs) and all("==" in line for line in reqs)


def _install(root: Path, found: Found, cpu: bool) -> str:
    """The workflow's install commands: the project, and the libraries the benchmarks
    written for it need (the Action installs pytest-infperf itself), pinned by the
    project's constraints file where it has one; ``cpu``: a runner without a GPU, which
    takes torch's CPU build first. Through ``python -m pip``: a cached environment's
    scripts name the folder it was made in."""
    parts = ["-e ."] if installable(root) else []
    constraints = pins(root).constraints
    if constraints is not None:
        parts.insert(0, f"-c {constraints}")
    if (root / "requirements.txt").is_file():
        parts.append("-r requirements.txt")
    need = set(found.imports)
    need.update(["onnxruntime"] if found.onnx else [])
    need.update(["torch"] if found.torch or found.hf else [])
    need.update(["transformers"] if found.hf else [])
    parts += [name for name in LIBRARIES if name in need]
    # The CPU index beside PyPI: torch (a requirements file's pin too) resolves to its CPU
    # build, the local "+cpu" version ranking above PyPI's of the same number.
    index = f" --extra-index-url {TORCH_CPU}" if cpu and "torch" in need else ""
    if all(p.startswith("-c ") for p in parts):
        parts.append("pytest")
    return f".venv/bin/python -m pip install{index} {' '.join(parts)}"


def _gpu_labels(labels: list[str]) -> bool:
    """Whether the runner's labels name a GPU: a word of one (``gpu``, ``cuda``,
    ``a100``, ``rtx4090``...; ``gpu-a100``, ``self-hosted-h100``), not a letter run inside
    another (``t4g`` is a CPU)."""
    words = [w for label in labels for w in re.split(r"[^a-z0-9]+", label.lower()) if w]
    return any(w in GPU_WORDS or w.startswith(("gpu", "cuda", "rtx", "nvidia")) for w in words)


#: Runner label words that name a GPU (NVIDIA's data-center parts, cloud GPU families).
GPU_WORDS = frozenset(
    [
        "a10",
        "a10g",
        "a100",
        "a30",
        "a40",
        "h100",
        "h200",
        "b200",
        "l4",
        "l40",
        "l40s",
        "t4",
        "v100",
        "p100",
        "k80",
        "g4dn",
        "g5",
        "g6",
        "p3",
        "p4d",
        "p5",
        "geforce",
        "quadro",
        "tesla",
    ]
)


def _labels(text: str) -> list[str]:
    labels = [label.strip() for label in text.split(",") if label.strip()]
    bad = [label for label in labels if not LABEL.match(label)]
    if not labels or bad:
        raise InitError(
            f"--runner {text!r}: give the runner labels separated by commas, each of letters, "
            "digits, '-', '_' or '.' (e.g. --runner self-hosted,gpu)"
        )
    return labels


def _action(ref: str) -> str:
    if ACTION_REF.fullmatch(ref) is None:
        raise InitError(
            f"--action {ref!r}: give a reference a workflow's uses: takes, owner/repo@ref "
            f"(e.g. {ACTION}, or a fork's owner/repo@branch), a local ./path or "
            "docker://image. Nothing was written"
        )
    return ref


def _gitignore(root: Path) -> tuple[Path, str] | None:
    """``.gitignore`` with ``baselines/`` added (None: it is ignored already, or the project
    commits its baselines, docs/CI.md's simplest way, which init leaves as it is)."""
    path = root / ".gitignore"
    text = initconfig.read(path) if path.is_file() else ""
    if re.search(r"^/?baselines/?[ \t]*\r?$", text, re.M) or _git(root, "ls-files", "baselines"):
        return None
    nl = initconfig.newline(text)
    sep = "" if not text or text.endswith("\n") else nl
    note = "# pytest-infperf: baselines are stored on their own branch (infperf-baselines)"
    return path, f"{text}{sep}{note}{nl}baselines/{nl}"


def plan_files(args: argparse.Namespace, root: Path) -> tuple[dict[Path, str], list[str]]:
    """Every file ``init`` writes, with its text, and a line per file for the report;
    :class:`InitError` when one it would create exists."""
    hosted = args.runner is None
    labels = _labels(args.runner or HOSTED)
    action = _action(args.action)
    existing = perf_tests(root)
    tests = tests_folder(args, existing)
    found = find_models(root)
    text, measures = benchmark_module(found, len(tests.parts), installable(root), not existing)
    compile(text, TEST_FILE, "exec")  # what it writes parses: a fault here is init's own
    branch = args.branch or _default_branch(root)
    gpu = _gpu_labels(labels)
    install = _install(root, found, cpu=not gpu)
    pinned = pins(root)
    # The Action splits `tests` as a shell does: a folder's name with a space stays whole.
    with_ = {"tests": _literal(shlex.quote(tests.as_posix())), "python": ".venv/bin/python"}
    torch = "torch" in install.split()
    if gpu and torch:  # one setting: every torch model of the run on the runner's GPU
        with_["pytest-args"] = _literal("--perf-device=cuda")
    fields = {
        "branch": branch,
        "runs_on": _runs_on(labels),
        "runs_on_note": HOSTED_NOTE if hosted else "",
        "action": action,
        "cache_key": "perf-venv-"
        + "-".join(labels)
        + "-${{ runner.os }}-${{ runner.arch }}-py${{ steps.python.outputs.version }}",
        "hashed": ", ".join(f"'{f}'" for f in pinned.hashed) or "'pyproject.toml'",
        "pins_note": _pins_note(pinned),
        "with_": "{" + ", ".join(f"{k}: {v}" for k, v in with_.items()) + "}",
    }
    workflow = (
        f"runs on {_runs_on(labels)}"
        + (" (a hosted CPU runner: no --runner given)" if hosted else "")
        + (", on its GPU (--perf-device=cuda)" if gpu and torch else "")
        + ", its environment cached between runs and "
        + (f"pinned by {pinned.by}" if pinned.by else "not pinned (below)")
        + f"; installs: {install.replace('.venv/bin/python -m pip', 'pip')}"
    )
    created = {
        root / tests / TEST_FILE: (text, "; ".join(measures)),
        root / WORKFLOWS / "perf.yml": (PERF_YML.format(**fields, install=install), workflow),
        root / WORKFLOWS / "perf-comment.yml": (
            COMMENT_YML.format(
                action=action, checkout=LOCAL_CHECKOUT if action.startswith("./") else ""
            ),
            "posts the pull-request comment (workflow_run)",
        ),
    }
    if not text:  # the repository measures already, and no model of its was found
        del created[root / tests / TEST_FILE]
    there = [p.relative_to(root).as_posix() for p in created if p.exists()]
    if there:
        them = "it" if len(there) == 1 else "them"
        raise InitError(
            f"{', '.join(there)} exist{'s' * (len(there) == 1)}: infperf init never "
            f"overwrites a file; move {them} aside (or give --tests another folder) and run "
            "it again. Nothing was written"
        )
    config, config_text, config_what = settings_edit(root, tests)
    files = {path: body for path, (body, _) in created.items()}
    said = {path: what for path, (_, what) in created.items()}
    files[config], said[config] = config_text, config_what
    ignore = _gitignore(root)
    if ignore is not None:
        files[ignore[0]], said[ignore[0]] = ignore[1], "baselines/ (kept on their own branch)"
    from ..report.fmt import fit

    width = max(len(p.relative_to(root).as_posix()) for p in files)
    hang = " " * (width + 2)  # under what each file is said to hold
    lines = [fit(f"  {p.relative_to(root).as_posix():<{width}}  {said[p]}", hang) for p in files]
    if existing:
        shown = ", ".join(existing[:3]) + (
            f" and {len(existing) - 3} more" if len(existing) > 3 else ""
        )
        lines.append(
            fit(
                f"  (no template benchmark: {shown} {'measure' + 's' * (len(existing) == 1)} "
                f"with infer_bench already; the workflow runs {tests.as_posix()})",
                " ",
            )
        )
    if pinned.how:
        lines.append(fit(f"  (pins: {pinned.how})", " "))
    return files, lines


def run(args: argparse.Namespace) -> int:
    top = _git(Path(args.repo), "rev-parse", "--show-toplevel")
    if top is None:
        raise InitError(f"{args.repo} is not in a git repository: run git init first")
    root = Path(top)
    files, lines = plan_files(args, root)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="")  # its line endings as they were
    from ..report.fmt import fit

    tests = shlex.quote(tests_folder(args, perf_tests(root)).as_posix())
    print("infperf init: wrote\n" + "\n".join(lines))
    if _git(root, "ls-files", "baselines"):
        where = (
            "baselines/ is committed here: pull requests are compared with those and with the "
            f"{BASELINES_BRANCH} branch, where the run on the default branch stores the "
            "baselines it saves (they are not committed to it)."
        )
    else:
        where = (
            "the run on the default branch saves the first baselines on the "
            f"{BASELINES_BRANCH} branch, and pull requests are compared with them."
        )
    if args.runner is None:
        runner = (
            f"The job runs on GitHub's hosted CPU runner ({HOSTED}): for a GPU, run infperf "
            "init --runner self-hosted,gpu (or edit runs-on in perf.yml)."
        )
    else:
        runner = (
            "Self-hosted runners: require approval for outside collaborators' runs (Settings "
            '> Actions > General; pytest-infperf\'s docs/CI.md, "Security").'
        )
    print(
        "\nNext:\n"
        f"  pytest {tests} --perf-save     # measure here, and store this commit's baseline\n"
        + fit(f"Then commit these files and push: {where} {runner}", "")
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
        default=None,
        help="the perf job's runner labels, comma-separated, e.g. self-hosted,gpu for a GPU "
        f"runner (default {HOSTED}, GitHub's hosted CPU runner, said in the workflow)",
    )
    p.add_argument(
        "--tests",
        default=None,
        help=f"folder of the test, and what the workflow runs (default {DEFAULT_TESTS}, or the "
        "folder of the repository's tests that use infer_bench already)",
    )
    p.add_argument(
        "--branch", default=None, help="the default branch (default: origin's, else this one)"
    )
    p.add_argument("--action", default=ACTION, help=f"the Action to call (default {ACTION})")
    p.set_defaults(func=run)
