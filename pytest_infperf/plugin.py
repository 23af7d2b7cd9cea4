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
    "infperf-signals",
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
        from .measure import gpu

        configured = str(early_config.getini("infperf_gpus") or "").replace(",", " ").split()
        warning = gpu.pin_worker(worker, configured)
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


#: The session's flags (the per-benchmark ones come from the options table). Help texts:
#: lowercase start, no trailing period, defaults in parentheses. Each flag's dest is its
#: name in snake case (``--perf-json``: ``perf_json``).
SESSION_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "--perf-json",
        {
            "metavar": "PATH",
            "default": None,
            "help": "write the results (raw samples, statistics, environment) as JSON to PATH",
        },
    ),
    (
        "--perf-save",
        {
            "action": "store_true",
            "default": False,
            "help": "store this run's results as the baseline of the current commit",
        },
    ),
    (
        "--perf-compare",
        {
            "metavar": "REF",
            "default": None,
            "help": "compare against the baseline of REF (branch, tag, sha, HEAD~N) or a results "
            "JSON file; regressions fail their tests",
        },
    ),
    (
        "--perf-ab",
        {
            "metavar": "REF",
            "default": None,
            "help": "measure the merge-base of REF and HEAD in the same job, interleaved with the "
            "current code, and compare (robust to machine drift)",
        },
    ),
    (
        "--perf-baselines",
        {
            "metavar": "DIR",
            "default": None,
            "help": "baselines directory (default: ini infperf_baselines, else baselines/ at the "
            "rootdir)",
        },
    ),
    (
        "--perf-run-alpha",
        {
            "metavar": "A",
            "default": None,
            "help": "per run: the chance that a run in which nothing changed fails at all "
            "(default: ini infperf_run_alpha, else 0.01)",
        },
    ),
    (
        "--perf-budget",
        {
            "metavar": "SPEC",
            "default": None,
            "help": "how long a comparing run may take: seconds (120) or a multiple of the "
            "plain run (1.5x, from the baseline's record); settling and the process pairs "
            "after the first run only while it lasts (default: ini infperf_budget, else none)",
        },
    ),
    (
        "--perf-strict-env",
        {
            "action": "store_true",
            "default": False,
            "help": "fail benchmarks whose baseline comes from a different environment",
        },
    ),
    (
        "--perf-warn-only",
        {
            "action": "store_true",
            "default": False,
            "help": "report regressions without failing tests",
        },
    ),
    (
        "--perf-markdown",
        {
            "metavar": "PATH",
            "default": None,
            "help": "write a Markdown report (for PR comments and job summaries) to PATH",
        },
    ),
    (
        "--perf-no-summary",
        {
            "action": "store_true",
            "default": False,
            "help": "do not append the Markdown report to $GITHUB_STEP_SUMMARY",
        },
    ),
    (
        "--perf-disable",
        {
            "action": "store_true",
            "default": False,
            "help": "call each model once without timing (run perf tests as plain tests)",
        },
    ),
    (
        "--perf-count",
        {
            "action": "store_true",
            "default": False,
            "help": "no timing: call each model and count what one call does (the profiled "
            "pass: FLOPs, operators, kernels); the JSON carries each benchmark's work "
            "(infperf bisect searches on it before it times anything)",
        },
    ),
    (
        "--perf-settle",
        {
            "default": None,
            "choices": _settings.SETTLE_CHOICES,
            "help": "what a stored baseline cannot decide (a regression, an improvement, no "
            "decision) is settled in this job by interleaved measurement against the baseline "
            "commit's code. auto: and every benchmark is interleaved at once when the machine "
            "moved since the baseline's run, or after a settling showed the stored pass "
            "misread it; stored-first: always the stored pass first; off: "
            "stored verdicts only (default: ini infperf_settle, else auto)",
        },
    ),
    (
        "--perf-pin",
        {
            "metavar": "auto|off|CPU",
            "default": None,
            "help": "interleaved comparisons: the timing thread of both sides runs on one CPU "
            "(auto: the highest-numbered this process may use; or a CPU number) for benchmarks "
            "that run on one thread on the CPU; off: where the scheduler puts it (default: "
            "ini infperf_pin, else auto)",
        },
    ),
    (
        "--perf-heap",
        {
            "default": None,
            "choices": _settings.HEAP_CHOICES,
            "help": "steady: every process that measures (this one, xdist and A/B workers) "
            "fixes glibc's malloc thresholds as a long-running process has them, so that "
            "processes of identical code run alike; system: glibc as it is (default: ini "
            "infperf_heap, else steady)",
        },
    ),
    (
        "--perf-gpu-throttle",
        {
            "default": None,
            "choices": _settings.GPU_THROTTLE_CHOICES,
            "help": "GPU blocks that ran throttled or beside another process on the GPU: "
            "exclude: set aside, the verdict withheld past a quarter of a side's blocks; "
            "keep: counted only; fail: any fails the test (default: ini "
            "infperf_gpu_throttle, else exclude)",
        },
    ),
    (
        "--perf-accept",
        {
            "metavar": "PATTERN",
            "action": "append",
            "default": [],
            "help": "accept a regression of the benchmarks matching PATTERN (node id or fnmatch "
            "pattern, optionally followed by a reason) for this run; repeatable. In CI, put a "
            "'Perf-Accept: PATTERN reason' trailer in a commit of the change instead",
        },
    ),
    (
        "--perf-allow-missing",
        {
            "action": "store_true",
            "default": None,
            "help": "let a --perf-compare that found no baseline for any benchmark pass (a first "
            "run); without it such a session fails (default: ini infperf_allow_missing)",
        },
    ),
    (
        "--perf-require-baseline",
        {
            "action": "store_true",
            "default": None,
            "help": "fail every benchmark that has no baseline or an incomparable one (default: "
            "ini infperf_require_baseline)",
        },
    ),
    (
        "--perf-progress",
        {
            "default": "auto",
            "choices": ("auto", "lines", "off"),
            "help": "a line per benchmark as it completes: auto (when the output is not a "
            "terminal, as in CI logs, or with -v), lines, off (default auto)",
        },
    ),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("infperf", "pytest-infperf: inference performance testing")
    add = group.addoption
    for flag, kwargs in SESSION_FLAGS:
        add(flag, dest=flag[2:].replace("-", "_"), **kwargs)
    # The per-benchmark options' flags, from the options table (their help and defaults are
    # the table's; their values go through the option's own parser).
    for spec in _options.FLAG_OPTIONS:
        add(
            spec.flag_name,
            metavar=spec.flag,
            dest=spec.dest,
            default=None,
            type=_options.option_type(spec.name),
            help=spec.describe(),
        )
    for spec in _options.INI_OPTIONS:
        parser.addini(_options.ini_name(spec.name), spec.describe(), type="string", default="")
    for name, (text, _default) in _settings.SESSION_INI.items():
        parser.addini(name, text, type="string", default="")
    for name, text in _settings.BOOL_INI.items():
        parser.addini(name, text, type="bool", default=False)


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
    from .measure import gpu, heap
    from .session.collector import Collector
    from .session.context import RunContext
    from .session.modes import choose

    # An A/B worker installed its mode before this hook: it serves its controller's
    # measurements of another checkout's tests. Like an xdist worker it writes no results,
    # reports or job summary of its own (each worker appended a second report to the
    # GitHub job summary), and that checkout's ini and markers are not this run's to check.
    serving = config.stash.get(mode_key, None) is not None
    settings = _settings.from_config(config, serving)
    controller = not hasattr(config, "workerinput") and not serving
    if controller:  # before anything this run must clean up
        from .session.signals import TermAsInterrupt

        signals = TermAsInterrupt()
        signals.install()
        config.pluginmanager.register(signals, "infperf-signals")
    # Every process this run starts from here on (xdist and A/B workers, their children)
    # descends from the run's root: none of them is ever taken for a GPU's tenant.
    gpu.mark_run()
    if not settings.disable:
        # Before any test builds a model: every process that measures runs on the same heap
        # (an A/B worker has already applied its controller's: the first call decides).
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
    from .session.fixture import InferBench

    stash = request.config.stash
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
