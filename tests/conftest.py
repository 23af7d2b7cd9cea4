from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.special  # noqa: F401 (see below)

# pytester's in-process runs drop modules first imported inside them from sys.modules, and
# numpy (a C extension) cannot be imported twice in one process: import the measuring code,
# and with it numpy, here in the outer process. scipy.special too: the pooled test imports
# it lazily (stats/pooled.py), and its first import inside a pytester run (an interleaved
# verdict's look) made the next one fail on numpy.fft, in any subset of the suite where no
# test had imported it before (test_ci's test_exit_codes, test_gate's accepted A/B test).
# The CLI too, which the tests call in process: a module of it dropped and imported again
# makes a second CLIError class that main() does not catch.
import pytest_infperf.cli.main
import pytest_infperf.session.fixture  # noqa: F401
from pytest_infperf.store.baselines import BaselineStore


def pytest_configure(config: pytest.Config) -> None:
    """The same holds for the optional frameworks a test imports in this process
    (importorskip) while its pytester fixture is live: the fixture drops them from
    sys.modules when the test ends, and torch imported a second time crashed the process
    (test_ab's torch test, then test_gpu's importorskip("torch"), with test_backends not
    selected: its module-level import at collection kept the whole suite safe). Imported
    here, before any snapshot; in a hook, not at import, so that the helper processes
    that import this module (test_reliability's savers) do not pay for them."""
    # torch._dynamo too: the profiled pass's FlopCounterMode imports it on its first use
    # (a dispatch mode calls through torch._disable_dynamo), and torch registers its
    # operator libraries once per process ("Only a single TORCH_LIBRARY can be used").
    for name in ("torch", "torch._dynamo", "onnxruntime", "transformers", "matplotlib.pyplot"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    controller = bool(getattr(config.option, "numprocesses", 0)) and not hasattr(
        config, "workerinput"
    )
    if not controller and "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in os.environ:
        os.environ.update(ONLY_OURS)
    if controller:
        # The suite's workers stay on every GPU: the runs their tests start pin themselves
        # where a test asks (test_gpu), and inherit no worker's pin.
        os.environ["INFPERF_NO_GPU_PINNING"] = "1"
    if hasattr(config, "workerinput"):
        # An xdist worker's identity is its own: the pytest runs its tests start would take
        # it for theirs (a worker pins itself to a GPU by PYTEST_XDIST_WORKER).
        for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
            os.environ.pop(name, None)
        os.environ.pop("INFPERF_NO_GPU_PINNING", None)  # the controller's, for this worker
        _own_cache_dir()  # test_store corrupts the indexes in its cache folder


@pytest.hookimpl(trylast=True, specname="pytest_configure")
def pytest_configure_wide(config: pytest.Config) -> None:
    """What the plugin and the CLI print wraps to the terminal's width (report/fmt.fit),
    120 where none is known: the runs the tests start, which read whole lines of what they
    print, get a terminal too wide to wrap them, and this session's own output keeps its
    terminal's width. tests/test_columns.py runs pytest without it and checks that every
    line fits; tests/test_golden.py sets 120."""
    config.get_terminal_writer().fullwidth = shutil.get_terminal_size().columns
    os.environ["COLUMNS"] = "1000"


pytest_plugins = ["pytester"]


# The store index (pytest_infperf/store/index.py) is a cache under ~/.cache: keep the suite's
# (and its subprocesses', which inherit the variable) out of the user's, and remove it at
# exit (every run used to leave one behind in the temp folder).
def _own_cache_dir() -> None:
    """A store-index cache folder of this process's own, removed at its exit."""
    os.environ["INFPERF_CACHE_DIR"] = tempfile.mkdtemp(prefix="infperf-test-cache-")
    atexit.register(shutil.rmtree, os.environ["INFPERF_CACHE_DIR"], ignore_errors=True)


if "INFPERF_CACHE_DIR" not in os.environ:
    _own_cache_dir()

#: The pytest runs the tests start (pytester's, the interleaving workers', bisect's steps)
#: load this plugin and no other: autoloading every installed one (hypothesis alone takes
#: 2.7 s to import here) cost each of them seconds, hundreds of times a suite. A test about
#: another plugin (xdist, pytest-split, pytest-benchmark) asks for them all (all_plugins).
#: Set in pytest_configure, not here: xdist's controller runs no test, and the workers it
#: starts inherit its environment, so it must leave them free to load xdist itself.
ONLY_OURS = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_PLUGINS": "pytest_infperf.plugin"}


@pytest.fixture
def all_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pytest runs this test starts load every installed plugin, as a user's do."""
    for name in ONLY_OURS:
        monkeypatch.delenv(name, raising=False)


ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "pytest_infperf" / "schema" / "results-v1.schema.json"

#: Settings that keep inner pytest runs fast: benchmarks here test behaviour, not speed.
#: The expert settings every fast run takes: short warmups, few samples at most.
FAST_EXPERT = {"warmup_time": "0.01", "max_rounds": "200"}


def expert(**extra: object) -> str:
    """The ``infperf_expert`` value of a fast run plus ``extra`` (one line holds them all:
    an ini file sets a key once, and ``-o infperf_expert=...`` replaces the file's)."""
    pairs = {**FAST_EXPERT, **{k: str(v) for k, v in extra.items()}}
    return " ".join(f"{k}={v}" for k, v in pairs.items())


def fast_ini(**extra: object) -> str:
    """A fast run's ini file, with ``extra`` expert settings."""
    return f"""
[pytest]
console_output_style = classic
infperf_max_time = 0.05
infperf_warmup = 2
infperf_rounds = 10
infperf_expert = {expert(**extra)}
# Whether the machine "moved" since a baseline's run depends on the machine: the tests take
# the stored pass first (deterministic), and test_routing covers auto.
infperf_settle = stored-first
# The profiled pass is tested where it is the subject (test_profile, test_work, the A/B and
# bisect tests that name it): elsewhere it would only add its seconds to every run.
infperf_profile = off
"""


FAST_INI = fast_ini()


@pytest.fixture
def ourtester(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester whose runs use short benchmark budgets."""
    pytester.makefile(".ini", pytest=FAST_INI)
    return pytester


def load_json(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


@pytest.fixture(scope="session")
def validate() -> Any:
    """Validate a document against the shipped JSON Schema."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)

    def check(doc: dict[str, Any]) -> None:
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])

    return check


GIT_ENV = {
    "GIT_AUTHOR_NAME": "infperf tests",
    "GIT_AUTHOR_EMAIL": "tests@infperf.invalid",
    "GIT_COMMITTER_NAME": "infperf tests",
    "GIT_COMMITTER_EMAIL": "tests@infperf.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def infperf(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The ``infperf`` command line run in ``cwd``: ``main(argv)`` in this process, its
    output and exit code as a subprocess's would be (a Python process per call cost the
    suite about a second each). ``bisect``, which starts pytest runs and takes signals,
    runs as its own process (``python -m pytest_infperf``)."""
    if args[:1] == ("bisect",):
        return subprocess.run(
            [sys.executable, "-m", "pytest_infperf", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, **GIT_ENV, **env},
        )
    return run_main(cwd, list(args), {**GIT_ENV, **env})


def run_main(cwd: Path, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``pytest_infperf.cli.main(argv)`` in ``cwd`` with ``env`` set, as a finished process."""
    import io

    from pytest_infperf.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in env}
    here = Path.cwd()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code: Any = main(argv)
            except SystemExit as exc:  # argparse's errors and --help
                code = exc.code
    finally:
        os.chdir(here)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if not isinstance(code, int):
        if code is not None:
            err.write(f"{code}\n")
        code = 0 if code is None else 1
    return subprocess.CompletedProcess(["infperf", *argv], code, out.getvalue(), err.getvalue())


@pytest.fixture
def git_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)


def has_cuda() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


PYTHON = sys.executable


def glob_escape(text: str) -> str:
    """Make literal text safe inside an fnmatch pattern (brackets are character classes)."""
    return text.replace("[", "[[]")


#: The head of a test module whose benchmarks busy-wait: immune to the machine's speed, so
#: verdicts in behaviour tests are deterministic (benchmarks/ checks the statistics).
#: FACTOR scales the work and comes from factor.txt beside the module.
BUSY_HEADER = """
import time
from pathlib import Path

FACTOR = float((Path(__file__).parent / "factor.txt").read_text())

def busy(us):
    end = time.perf_counter_ns() + int(us * 1000)
    while time.perf_counter_ns() < end:
        pass
"""


#: An A/B suite: test_slowed scales with factor.txt, test_steady does not (and has a
#: second, named measurement); with the ini that gives interleaved runs enough time.
AB_SUITE = (
    BUSY_HEADER
    + """

def test_slowed(infer_bench):
    infer_bench(lambda: busy(300 * FACTOR))

def test_steady(infer_bench):
    infer_bench(lambda: busy(200))
    infer_bench(lambda: busy(100), name="second")
"""
)


def ab_ini(**extra: object) -> str:
    """An A/B suite's ini: interleaved runs get more time."""
    return fast_ini(**extra).replace("infperf_max_time = 0.05", "infperf_max_time = 0.3")


AB_INI = ab_ini()


def stored_file(root: Path) -> str:
    """``--perf-compare=`` the run's one stored baseline as a results file: compared with
    it, the stored pass decides alone (settling needs a commit to check out), as tests of
    the stored pass and what follows it want; what settling decides is tested apart."""
    (path,) = sorted((root / "baselines").glob("*/*.json"))
    return f"--perf-compare={path}"


def init_repo(path: Path, message: str = "suite") -> None:
    """`git init` on main and commit everything there."""
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-qm", message)


def make_result(
    samples: list[float],
    *,
    nodeid: str = "test_m.py::test_m",
    name: str | None = None,
    backend: str = "callable",
    **fields: Any,
) -> Any:
    """The suite's one :class:`BenchmarkResult` factory: ``samples`` with their real
    statistics (``summarize``); any other field by keyword (``options``, ``memory``, ``env``,
    ``generation``, ``comparison``, ``stats`` to override...)."""
    from pytest_infperf.core.results import BenchmarkResult
    from pytest_infperf.stats.descriptive import summarize

    stats = fields.pop("stats", None)
    return BenchmarkResult(
        nodeid=nodeid,
        name=name,
        backend=backend,
        samples=list(samples),
        stats=summarize(samples) if stats is None else stats,
        **fields,
    )


def _history_entry(name: str, median: float, rng: np.random.Generator) -> dict[str, Any]:
    samples = list(median * np.exp(rng.normal(0, 0.01, 40)))
    return make_result(samples, nodeid=f"test_h.py::{name}").to_json()


@pytest.fixture
def history_repo(tmp_path: Path, git_env: None) -> tuple[Path, list[str]]:
    """30 commits on main with baselines; test_step gets 10% slower at commit 17."""
    repo = tmp_path / "h"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    store = BaselineStore(repo / "baselines")
    rng = np.random.default_rng(11)
    shas = []
    env_key = "linux-x86-64-cpu-py3.11-0123456789"
    for i in range(30):
        (repo / "file.txt").write_text(str(i))
        git(repo, "add", "file.txt")
        git(repo, "commit", "-qm", f"commit {i}")
        sha = git(repo, "rev-parse", "HEAD")
        shas.append(sha)
        noise = 1 + rng.normal(0, 0.015)
        step = 1.10 if i >= 17 else 1.0
        store.save(
            env_key,
            sha,
            [
                _history_entry("test_step", 1e-3 * step * noise, rng),
                _history_entry("test_flat", 2e-3 * (1 + rng.normal(0, 0.015)), rng),
            ],
            {"key": env_key, "hard": {}, "soft": {}},
            {"sha": sha, "subject": f"commit {i}"},
        )
    return repo, shas
