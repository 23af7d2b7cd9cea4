"""pytest-infperf's entry point (``pytest11``): options, ini keys, marker and fixture.

PYTEST_DONT_REWRITE

Kept thin on purpose: it imports nothing beyond pytest and the standard library at load
(no numpy, no torch, no onnxruntime); the measuring code is imported when a test first
asks for ``infer_bench``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .core import cmdline as _cmdline
from .core import options as _options
from .core import settings as _settings
from .core.keys import forwarded_key, pin_warning_key, settings_key
from .measure.mode import mode_key
from .session.collector import collector_key
from .session.context import context_key

if TYPE_CHECKING:
    from .hf import HFModels
    from .session.fixture import InferBench


#: The plugin objects this plugin registers, one per job.
PLUGIN_NAMES = (
    "infperf-collector",
    "infperf-mode",
    "infperf-xdist-worker",
    "infperf-artifacts",
    "infperf-terminal",
    "infperf-xdist",
)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser
) -> Iterator[None]:
    """Around the loading of the initial conftest files. Before: pytest-xdist workers are
    pinned to a GPU, before any conftest is imported (a conftest that touches
    ``torch.cuda`` would otherwise start CUDA on every GPU first). After: the options
    those conftest files registered are the project's own, which interleaving workers are
    given too (:mod:`~pytest_infperf.core.cmdline`)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        from .measure import gpupin

        configured = str(early_config.getini("infperf_gpus") or "").replace(",", " ").split()
        # Only where the run asks for measurement (its controller said so, or the GPUs are
        # named): a suite of multi-GPU tests with no perf option keeps every GPU. Not
        # passed on: a pytest run a test starts decides for itself.
        if os.environ.pop(gpupin.PIN_ENV, None) or configured:
            warning = gpupin.pin_worker(worker, configured)
            if warning:
                early_config.stash[pin_warning_key] = warning
    before = set(_cmdline.arity(parser))
    yield
    known = _cmdline.arity(parser)
    tokens = [
        *shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
        *early_config.invocation_params.args,
    ]
    bench_flags = [spec.flag_name for spec in _options.FLAG_OPTIONS]
    early_config.stash[forwarded_key] = _cmdline.forwarded(
        tokens, known, set(known) - before, bench_flags
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    """Every flag and ini key, from the one table of settings (``core.options``: the
    session's settings and the per-benchmark options, one ``Spec`` type)."""
    import argparse

    group = parser.getgroup("infperf", "pytest-infperf: inference performance testing")
    for s in (*_options.SESSION, *_options.FLAG_OPTIONS):
        if s.flag is None:
            continue
        kwargs: dict[str, Any] = {"dest": s.dest, "default": None}
        if s.flag == _options.SWITCH:
            kwargs["action"] = "store_true"
        else:
            kwargs["metavar"] = s.flag
        if s.append:
            kwargs.update(action="append", default=[])
        if s.choices:
            kwargs["choices"] = s.choices
        if not s.session:
            # A benchmark option's flag is parsed at once, by the option's own parser.
            kwargs["type"] = _options.option_type(s.name)
        kwargs["help"] = argparse.SUPPRESS if s.hidden else s.describe()
        group.addoption(s.flag_name, **kwargs)
    for s in (*_options.SESSION, *_options.INI_OPTIONS):
        if s.ini:
            parser.addini(s.ini_key, s.describe(), type="string", default="")
    parser.addini(_options.EXPERT_KEY, _options.EXPERT_HELP, type="string", default="")


@pytest.hookimpl(tryfirst=True, specname="pytest_configure")
def pytest_configure_beside_others(config: pytest.Config) -> None:
    """Before any plugin's ``pytest_configure``: a run that another plugin would stop there
    with an internal error (pytest-benchmark's start-up warning under xdist, made an error
    by the project's filters) stops with a usage error that says what to do
    (:mod:`~pytest_infperf.session.coexist`)."""
    from .session.coexist import benchmark_stops_the_run

    message = benchmark_stops_the_run(config)
    if message is not None:
        raise pytest.UsageError(message)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "infperf(**options): tune infer_bench for this test (rounds, max_time, warmup, "
        "threshold, alpha, metric, batch_size, max_median_ms, ...)",
    )
    from .measure import gpupin, heap
    from .session.collector import Collector
    from .session.context import RunContext
    from .session.modes import choose

    # An A/B worker installed its mode before this hook: it serves its controller's
    # measurements of another checkout's tests. Like an xdist worker it writes no results,
    # reports or job summary of its own (each worker appended a second report to the
    # GitHub job summary), and that checkout's ini and markers are not this run's to check.
    serving = config.stash.get(mode_key, None) is not None
    settings = _settings.from_config(config, serving)
    # Every process this run starts from here on (xdist and A/B workers, their children)
    # descends from the run's root: none of them is ever taken for a GPU's tenant. Named in
    # the environment only where the run measures or starts workers (else at the first
    # infer_bench): an unused plugin leaves the environment as it found it.
    asked = settings.save or settings.compare or settings.ab
    distributed = bool(getattr(config.option, "numprocesses", None))
    measures = not settings.disable and (asked or _measures(config))
    if asked or (distributed and measures):
        from .measure import tenancy  # psutil: only for a run that measures

        tenancy.mark_run()
    if distributed and measures and not hasattr(config, "workerinput"):
        # xdist's workers, started after this hook, pin themselves to a GPU each.
        os.environ[gpupin.PIN_ENV] = "1"
        config.add_cleanup(_unpin)
    if not settings.disable and asked:
        # Before any test builds a model: every process that measures runs on the same heap
        # (an A/B worker has already applied its controller's: the first call decides). A
        # run that was not asked to save or compare settles it when a test first asks for
        # infer_bench, and one that never does keeps glibc's heap as it was.
        heap.settle(settings.heap)
    context = RunContext.create(config, settings)
    mode = choose(config, context)
    collector = Collector(context, serving)
    config.stash[settings_key] = settings
    config.stash[context_key] = context
    config.stash[mode_key] = mode
    config.stash[collector_key] = collector
    manager = config.pluginmanager
    manager.register(collector, "infperf-collector")
    if not manager.is_registered(mode):  # the A/B worker registered itself already
        manager.register(mode, "infperf-mode")
    if serving:
        return
    if hasattr(config, "workerinput"):
        from .session.xdist import XdistWorker

        pinned = config.stash.get(pin_warning_key, None)
        if pinned:
            context.warn(pinned)
        manager.register(XdistWorker(config, collector), "infperf-xdist-worker")
        return
    # Controller-only objects exist only on the controller (as junitxml's LogXML).
    from .session.artifacts import ArtifactWriter
    from .session.terminal import TerminalReport

    artifacts = ArtifactWriter(context, collector, _split(config))
    manager.register(artifacts, "infperf-artifacts")
    manager.register(TerminalReport(config, context, collector, artifacts), "infperf-terminal")
    if manager.hasplugin("xdist"):
        from .session.xdist import XdistController

        manager.register(XdistController(context, collector), "infperf-xdist")


def _unpin() -> None:
    """The run's end: a later run in this process (pytester's) decides for itself."""
    from .measure import gpupin

    os.environ.pop(gpupin.PIN_ENV, None)


def _measures(config: pytest.Config) -> bool:
    """Whether the run asks for measurement: a ``--perf-*`` option (on the command line,
    in PYTEST_ADDOPTS or the ini's addopts) other than ``--perf-disable``."""
    tokens = [
        *config.invocation_params.args,
        *shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
        *(str(t) for t in config.getini("addopts")),
    ]
    return any(t.startswith("--perf-") and not t.startswith("--perf-disable") for t in tokens)


def _split(config: pytest.Config) -> tuple[int, int] | None:
    """pytest-split's ``--group i --splits N`` (None without pytest-split or a split)."""
    group, splits = config.getoption("group", None), config.getoption("splits", None)
    return (int(group), int(splits)) if group and splits else None


def pytest_unconfigure(config: pytest.Config) -> None:
    manager = config.pluginmanager
    for name in PLUGIN_NAMES:
        plugin = manager.get_plugin(name)
        if plugin is not None:
            manager.unregister(plugin)
    keys: tuple[pytest.StashKey[Any], ...] = (settings_key, context_key, mode_key, collector_key)
    for key in keys:
        if key in config.stash:
            del config.stash[key]


@pytest.fixture
def infer_bench(request: pytest.FixtureRequest) -> Iterator[InferBench]:
    """Measure inference latency: ``infer_bench(model, inputs=None, **options)``.

    Runs warmed, repeated, correctly synchronised inferences of a callable, a
    ``torch.nn.Module``, an ``onnxruntime.InferenceSession`` or an ``.onnx`` path, and
    returns a :class:`~pytest_infperf.results.BenchmarkResult` with raw samples and
    statistics. Options come from ini keys, the ``infperf`` marker and keyword arguments.
    ``infer_bench.generate(model, inputs, max_new_tokens=...)`` times a transformers
    model's generation token by token (TTFT, TPOT, tokens/s).
    """
    from .measure import heap, tenancy
    from .session.fixture import InferBench

    stash = request.config.stash
    tenancy.mark_run()  # both no-ops once done (see pytest_configure)
    if not stash[settings_key].disable:
        heap.settle(stash[settings_key].heap)
    yield InferBench(
        request.node, stash[mode_key], stash[collector_key], stash[settings_key].bench_layer
    )


@pytest.fixture(scope="session")
def infperf_hf() -> HFModels:
    """transformers models with random weights and their ONNX exports, built once per session.

    ``infperf_hf.model("bert-base-uncased")``, ``infperf_hf.onnx("distilbert-base-uncased")``,
    ``infperf_hf.inputs(name, batch_size, seq_len, framework="np")``. Offline: configurations
    are built in or read from the local cache, never downloaded.
    """
    from .hf import HFModels, default_cache_dir

    return HFModels(default_cache_dir())
