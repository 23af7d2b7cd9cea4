"""Real Python projects, laid out and installed the ways users do, in real git repositories
and virtual environments: what the A/B and settling tests compare.

A project is one model package (``tinymodels``) and its perf tests under ``tests/perf``; the
``main`` branch holds the base, ``feature`` the head, whose change (``slower``) makes one
model half as deep again (+50% FLOPs) or touches nothing the tests import (``same``).
Each environment is a ``python -m venv`` that sees this suite's packages through a ``.pth``
(``site.addsitedir``), with the project installed by pip from its own folder, as a CI job
installs it: ``pip install --no-deps --no-build-isolation [-e] .``.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from .conftest import git, init_repo

#: Where the model lives, and how the test imports it.
LAYOUTS = {
    # a module beside the tests (pytest's rootdir insertion imports it), nothing installed
    "beside": ("tests/perf/tinymodels.py", "import tinymodels"),
    # a package at the repository's root
    "flat": ("tinymodels/__init__.py", "import tinymodels"),
    # the src layout
    "src": ("src/tinymodels/__init__.py", "import tinymodels"),
    # two packages of one distribution: the model's depth lives in the second
    "several": ("src/tinylayers/__init__.py", "import tinymodels"),
    # a namespace package's portion (no acme/__init__.py)
    "namespace": ("src/acme/tinymodels/__init__.py", "from acme import tinymodels"),
    # a portion two namespace packages down (no acme/ nor acme/vision/__init__.py)
    "nested": ("src/acme/vision/tinymodels/__init__.py", "from acme.vision import tinymodels"),
    # a src layout on main that the change moves to the root (and makes slower)
    "moved": ("src/tinymodels/__init__.py", "import tinymodels"),
    # a src layout whose test reads the model's depth from a process it starts, with
    # sys.executable and an environment of its own (PATH only)
    "child": ("src/tinymodels/__init__.py", "import tinymodels"),
    # a src layout found through a conftest.py's sys.path edit, nothing installed
    "conftest": ("src/tinymodels/__init__.py", "import tinymodels"),
    # a src layout found through pytest's ``pythonpath`` ini key, nothing installed
    "pythonpath": ("src/tinymodels/__init__.py", "import tinymodels"),
}

#: How the project is installed: pip's arguments, and the build backend it needs.
INSTALLS = {
    "none": None,
    "editable": ["-e", "."],
    "editable-strict": ["-e", ".", "--config-settings", "editable_mode=strict"],
    "wheel": ["."],
    # a wheel built elsewhere and installed from there (an index, a Docker image's build)
    "wheel-elsewhere": [],
    "hatch-editable": ["-e", "."],
    "hatch-exact": ["-e", "."],
}

MODEL = """\
import torch

DEPTH = {depth}


def mlp(width=256):
    layers = []
    for _ in range(DEPTH):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)
"""

#: The same model, its depth taken from the second package.
SEVERAL = MODEL.replace("\nDEPTH = {depth}\n", "from tinylayers import DEPTH\n")

TESTS = """\
import torch
{import_line}


def test_mlp_latency(infer_bench):
    infer_bench(tinymodels.mlp(), (torch.randn(8, 256),))


def test_untouched(infer_bench):
    infer_bench(torch.nn.Linear(64, 64), (torch.randn(8, 64),))
"""

#: The ``child`` layout's test: the depth its model is built with comes from a process it
#: starts, which imports the project as its interpreter's start-up finds it.
CHILD_TESTS = """\
import os
import subprocess
import sys

import torch
import tinymodels

ASK = "import tinymodels; print(tinymodels.DEPTH)"


def test_mlp_latency(infer_bench):
    env = {"PATH": os.environ.get("PATH", "")}
    tinymodels.DEPTH = int(subprocess.check_output([sys.executable, "-c", ASK], env=env))
    infer_bench(tinymodels.mlp(), (torch.randn(8, 256),))


def test_untouched(infer_bench):
    infer_bench(torch.nn.Linear(64, 64), (torch.randn(8, 64),))
"""

DEPENDS = 'version = "0.1"\ndependencies = ["fastdep==1.0"]\n'

DEPENDENCY_TEST = """

def test_dependency(infer_bench):
    import fastdep

    infer_bench(fastdep.work)
"""

CONFTEST = """\
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
"""

INI = """\
[pytest]
infperf_max_time = 0.3
infperf_warmup = 2
infperf_rounds = 10
infperf_expert = warmup_time=0.01 max_rounds=200
infperf_intra_op_threads = 1
"""


@dataclasses.dataclass
class Project:
    """A project on its ``feature`` branch, and the Python its environment runs."""

    root: Path
    python: Path
    layout: str = "src"
    install: str = "none"

    def reinstall(self) -> None:
        """Install the checked-out commit again, as a CI job of that commit would."""
        args = INSTALLS[self.install]
        if self.install == "wheel-elsewhere":
            wheels = self.root.parent / "wheels"
            wheel = [str(self.python), "-m", "pip", "wheel", "-q", "--no-deps"]
            subprocess.run(
                [*wheel, "--no-build-isolation", ".", "-w", str(wheels)], cwd=self.root, check=True
            )
            args = [str(next(wheels.glob("*.whl")))]
        if args is not None:
            _pip(self.python, self.root, ["--force-reinstall", *args])

    def pytest(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """``python -m pytest ARGS`` in the project, as a user runs it in CI."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("INFPERF_AB_")}
        return subprocess.run(
            [str(self.python), "-m", "pytest", *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )


def environment(folder: Path) -> Path:
    """A virtual environment that sees this suite's packages (torch, pytest, this plugin)
    after its own: what it installs itself comes first. Its Python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    purelib = Path(
        sysconfig.get_paths(vars={"base": str(folder), "platbase": str(folder)})["purelib"]
    )
    ours = sysconfig.get_paths()["purelib"]
    (purelib / "_infperf_suite.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return folder / "bin" / "python"


def build_system(layout: str, install: str) -> str:
    """The project's pyproject.toml for its layout and backend."""
    packages = {"several": '"tinymodels", "tinylayers"'}.get(layout, '"tinymodels"')
    if install.startswith("hatch"):
        where = {"flat": "tinymodels", "namespace": "src/acme", "nested": "src/acme"}.get(
            layout, "src/tinymodels"
        )
        wanted = [f'"{where}"'] + (['"src/tinylayers"'] if layout == "several" else [])
        exact = "dev-mode-exact = true\n" if install == "hatch-exact" else ""
        return (
            '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
            '[project]\nname = "tinymodels"\nversion = "0.1"\n'
            f"[tool.hatch.build.targets.wheel]\npackages = [{', '.join(wanted)}]\n{exact}"
        )
    find = ""
    if layout in ("namespace", "nested"):
        find = '[tool.setuptools.packages.find]\nwhere = ["src"]\nnamespaces = true\n'
    elif layout == "flat":
        find = f"[tool.setuptools]\npackages = [{packages}]\n"
    return (
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "tinymodels"\nversion = "0.1"\n{find}'
    )


def project(
    folder: Path,
    layout: str,
    install: str,
    change: str = "slower",
    dependency: Path | None = None,
    venv_inside: bool = False,
) -> Project:
    """The project in ``folder``: its base on ``main``, its head on ``feature`` (checked
    out), installed from the head as ``install`` says (as CI installs the branch it tests).
    ``dependency``: a folder to build the wheels of ``fastdep`` 1.0 and 2.0 in; the base
    pins the first, the head the second (installed), and ``test_dependency`` times it.
    ``venv_inside``: the environment is the repository's own ``.venv`` (uv's, Poetry's)."""
    model_path, import_line = LAYOUTS[layout]
    root = folder / "project"
    (root / "tests" / "perf").mkdir(parents=True)
    model = root / model_path
    model.parent.mkdir(parents=True, exist_ok=True)
    if layout == "several":
        model.write_text("DEPTH = 4\n")
        (root / "src" / "tinymodels").mkdir(parents=True)
        (root / "src" / "tinymodels" / "__init__.py").write_text(SEVERAL)
    else:
        model.write_text(MODEL.format(depth=4))
    tests = CHILD_TESTS if layout == "child" else TESTS.format(import_line=import_line)
    (root / "tests" / "perf" / "test_models.py").write_text(tests)
    ini = INI
    if layout == "conftest":
        (root / "tests" / "conftest.py").write_text(CONFTEST)
    if layout == "pythonpath":
        ini += "pythonpath = src\n"
    (root / "pytest.ini").write_text(ini)
    pyproject = build_system(layout, install)
    if dependency is not None:
        dependency_wheels(dependency)
        pyproject = pyproject.replace('version = "0.1"\n', DEPENDS)
        tests = root / "tests" / "perf" / "test_models.py"
        tests.write_text(tests.read_text() + DEPENDENCY_TEST)
    (root / "pyproject.toml").write_text(pyproject)
    (root / ".gitignore").write_text(
        "__pycache__/\n*.egg-info/\nbuild/\nresults/\nbaselines/\n.venv/\n"
    )
    (root / "README.md").write_text("tinymodels\n")
    init_repo(root, "base")
    git(root, "checkout", "-q", "-b", "feature")
    if dependency is not None:
        text = (root / "pyproject.toml").read_text()
        (root / "pyproject.toml").write_text(text.replace("fastdep==1.0", "fastdep==2.0"))
    if change == "slower":
        text = model.read_text().replace("DEPTH = 4", "DEPTH = 6")
        model.write_text(text)
    else:
        (root / "README.md").write_text("tinymodels, documented\n")
    if layout == "moved":  # the package moves to the root: git mv src/tinymodels tinymodels
        git(root, "mv", "src/tinymodels", "tinymodels")
        flat = '[tool.setuptools]\npackages = ["tinymodels"]\n'
        (root / "pyproject.toml").write_text((root / "pyproject.toml").read_text() + flat)
    git(root, "commit", "-qam", change)
    python = environment(root / ".venv" if venv_inside else folder / "venv")
    if dependency is not None:
        _pip(python, root, [str(next(dependency.glob("fastdep-2.0-*.whl")))])
    proj = Project(root, python, layout, install)
    proj.reinstall()
    return proj


def _pip(python: Path, cwd: Path, args: list[str]) -> None:
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", "--no-build-isolation", *args], cwd=cwd, check=True)


FASTDEP = """\
def work():
    total = 0
    for i in range({n}):
        total += i
    return total
"""


def dependency_wheels(folder: Path) -> None:
    """Two versions of a pure-Python dependency, the second half as slow again, built as
    wheels in ``folder``: what a pinned-dependency change brings."""
    for version, n in (("1.0", 2000), ("2.0", 3000)):
        src = folder.parent / f"fastdep-{version}"
        (src / "fastdep").mkdir(parents=True)
        (src / "fastdep" / "__init__.py").write_text(FASTDEP.format(n=n))
        (src / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools>=68"]\n'
            'build-backend = "setuptools.build_meta"\n'
            f'[project]\nname = "fastdep"\nversion = "{version}"\n'
        )
        wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check"]
        subprocess.run(
            [*wheel, "--no-deps", "--no-build-isolation", str(src), "-w", str(folder)],
            check=True,
            capture_output=True,
        )


EXTENSION = """\
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define N {n}
static PyObject *work(PyObject *self, PyObject *args) {{
    volatile double s = 0;
    for (long i = 0; i < N; i++) s += i * 0.5;
    return PyFloat_FromDouble(s);
}}
static PyMethodDef methods[] = {{{{"work", work, METH_NOARGS, ""}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef mod = {{PyModuleDef_HEAD_INIT, "_core", NULL, -1, methods}};
PyMODINIT_FUNC PyInit__core(void) {{ return PyModule_Create(&mod); }}
"""


def compiled_project(folder: Path, install: str = "editable", change: str = "slower") -> Project:
    """A src layout whose package is a C extension module, installed editable (built in
    place, the ``.so`` untracked) or not; the head's loop is half as long again (``change``
    "same": the head adds a README instead)."""
    root = folder / "project"
    (root / "src" / "fastext").mkdir(parents=True)
    (root / "tests" / "perf").mkdir(parents=True)
    (root / "src" / "fastext" / "_core.c").write_text(EXTENSION.format(n=200000))
    (root / "src" / "fastext" / "__init__.py").write_text("from ._core import work\n")
    (root / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        'setup(ext_modules=[Extension("fastext._core", ["src/fastext/_core.c"])])\n'
    )
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\n'
        'build-backend = "setuptools.build_meta"\n'
        '[project]\nname = "fastext"\nversion = "0.1"\n'
        '[tool.setuptools.packages.find]\nwhere = ["src"]\n'
    )
    (root / "tests" / "perf" / "test_models.py").write_text(
        "import fastext\n\n\ndef test_extension(infer_bench):\n"
        "    infer_bench(fastext.work)\n\n\ndef test_untouched(infer_bench):\n"
        "    infer_bench(lambda: sum(range(300)))\n"
    )
    (root / "pytest.ini").write_text(INI)
    (root / ".gitignore").write_text("__pycache__/\n*.so\nbuild/\n*.egg-info/\nresults/\n")
    init_repo(root, "base")
    git(root, "checkout", "-q", "-b", "feature")
    if change == "slower":
        (root / "src" / "fastext" / "_core.c").write_text(EXTENSION.format(n=300000))
    else:
        (root / "README.md").write_text("fastext, documented\n")
        git(root, "add", "README.md")
    git(root, "commit", "-qam", change)
    proj = Project(root, environment(folder / "venv"), "compiled", install)
    proj.reinstall()
    return proj
