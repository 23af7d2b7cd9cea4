"""Session settings: built once from the command line and ini file, validated, frozen."""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import Any

import pytest

from . import cpus as _cpus
from . import options as _options
from .budget import BudgetError, BudgetSpec

#: ini keys that are not benchmark options.
SESSION_INI: dict[str, tuple[str, str]] = {
    "infperf_baselines": (
        "baselines directory, relative to the rootdir (default baselines)",
        "baselines",
    ),
    "infperf_search_depth": (
        "how many first-parent commits --perf-compare walks back to find a baseline (default 50)",
        "50",
    ),
    "infperf_json": ("write the results JSON here on every run (like --perf-json)", ""),
    "infperf_gpus": (
        "GPUs the xdist workers are pinned to, as CUDA_VISIBLE_DEVICES entries (indices or "
        "GPU-/MIG- UUIDs), e.g. '0,1' (default: the visible ones, by UUID)",
        "",
    ),
    "infperf_ab_pythonpath": (
        "folders (relative to the checkout) put on sys.path of the A/B base worker, e.g. 'src'",
        "",
    ),
    "infperf_worker_timeout": (
        "seconds an A/B worker may stay silent when asked for a block of samples, a profile "
        "or its result (fifteen times that while it builds and warms a model); past it the "
        "worker is killed with its children and the test that needed it fails (default 120)",
        "120",
    ),
    "infperf_max_baseline_mb": (
        "refuse to read baseline files larger than this (default 256)",
        "256",
    ),
    "infperf_drift_limit": (
        "drift guard: when the machine itself ran more than this "
        "fraction slower or faster than during a benchmark's baseline, "
        "its stored-baseline verdict is withheld (default 0.25)",
        "0.25",
    ),
    "infperf_budget": (
        "how long a comparing run may take: seconds (120) or a multiple of the plain run "
        "(1.5x); settling and the process pairs after the first run only while it lasts, "
        "and what it left undecided says so (default: none)",
        "",
    ),
    "infperf_run_alpha": (
        "the chance that a run in which nothing changed fails at all: an interleaved "
        "regression must also reject 'no slower at all' at this level divided by the run's "
        "perf tests (default 0.01)",
        "0.01",
    ),
    "infperf_settle": (
        "auto (default): interleave against the baseline commit's code in the same job "
        "what a stored baseline cannot decide, and every benchmark at once when the machine "
        "moved since the baseline's run or a settling showed the stored pass misread it; "
        "stored-first: always the stored pass first; off: "
        "the stored verdict stands",
        "auto",
    ),
    "infperf_prestart": (
        "on (default): an interleaving session starts its first worker pair while it "
        "collects (not timed); off: on first need (fewer processes holding their imports)",
        "on",
    ),
    "infperf_pin": (
        "auto (default): the timing thread of both sides of an interleaved comparison runs "
        "on one CPU, the highest-numbered this process may use, for benchmarks that run on "
        "one thread on the CPU; a number: that CPU; off: where the scheduler puts it",
        "auto",
    ),
    "infperf_heap": (
        "steady (default): in every process that measures, glibc's malloc serves requests "
        "up to 32 MiB from its heap and keeps 64 MiB free at its top, as a long-running "
        "process tends to, instead of thresholds that move with what the process freed "
        "before (a speed offset between processes of identical code); system: glibc as it is",
        "steady",
    ),
    "infperf_gpu_throttle": (
        "GPU blocks that ran throttled (power, thermal, sync boost, HW slowdown) or beside "
        "another process on the GPU: exclude (default): set aside, and the verdict withheld "
        "when more than a quarter of a side's blocks were; keep: counted only; fail: any such "
        "block fails the benchmark's test",
        "exclude",
    ),
    "infperf_drift_guard": (
        "adjust (default): probe machine speed while sampling and raise "
        "the bar for a verdict by how much slower/faster the machine ran "
        "than at the baseline; warn: only report drift; off: no probes",
        "adjust",
    ),
}

#: What --perf-settle / infperf_settle accept.
SETTLE_CHOICES = ("auto", "stored-first", "off")
#: What --perf-heap / infperf_heap accept (measure/heap.py).
HEAP_CHOICES = ("steady", "system")
#: What --perf-gpu-throttle / infperf_gpu_throttle accept.
GPU_THROTTLE_CHOICES = ("exclude", "keep", "fail")

#: Switches, declared with pytest's own ``type="bool"`` (true/false, yes/no, 1/0).
BOOL_INI: dict[str, str] = {
    "infperf_allow_missing": "let a --perf-compare that found no baseline for any benchmark "
    "pass instead of failing the session (default false)",
    "infperf_require_baseline": "fail every benchmark that has no baseline or an "
    "incomparable one (default false)",
}

#: Command-line flags that set a benchmark option (they beat ini, lose to the marker).
CLI_OPTIONS = {spec.dest: spec.name for spec in _options.FLAG_OPTIONS}


@dataclasses.dataclass(frozen=True)
class Settings:
    rootdir: Path
    #: -v or more: the statistics behind a verdict in its failure message.
    verbose: bool
    json_path: Path | None
    save: bool
    compare: str | None
    ab: str | None
    baselines: Path
    strict_env: bool
    warn_only: bool
    markdown: Path | None
    summary: bool
    disable: bool
    #: --perf-count: no timing, the profiled pass only.
    count: bool
    search_depth: int
    max_baseline_bytes: int
    gpus: tuple[str, ...] | None
    ab_pythonpath: tuple[str, ...]
    drift_guard: str
    settle: str
    #: What a throttled or shared GPU block does (GPU_THROTTLE_CHOICES).
    gpu_throttle: str
    #: The CPU interleaved blocks are pinned to (--perf-pin; None: not pinned).
    pin_cpu: int | None
    #: The heap policy of every process that measures (HEAP_CHOICES).
    heap: str
    #: The first worker pair started as the session collects (infperf_prestart).
    prestart: bool
    #: Seconds an A/B worker may stay silent (infperf_worker_timeout).
    worker_timeout: float
    #: --perf-accept patterns (each maybe followed by a reason).
    accept: tuple[str, ...]
    allow_missing: bool
    require_baseline: bool
    drift_limit: float
    run_alpha: float
    #: --perf-budget / infperf_budget (None: no budget).
    budget: BudgetSpec | None
    bench_layer: dict[str, Any]


def known_ini_keys() -> frozenset[str]:
    """Every ``infperf_*`` ini key the plugin registers."""
    options = {_options.ini_name(spec.name) for spec in _options.INI_OPTIONS}
    return frozenset(options | set(SESSION_INI) | set(BOOL_INI))


def _given_ini_keys(config: pytest.Config) -> tuple[set[str], set[str]]:
    """The keys the ini file sets, and those ``-o``/``--override-ini`` sets."""
    overrides = {
        str(item).split("=", 1)[0].strip() for item in config.getoption("override_ini", None) or ()
    }
    # pytest 9 keeps the file's keys (and the overrides) in _inicfg, of which its inicfg
    # is a deprecated view; pytest 8 has only inicfg, the file's keys.
    stored = getattr(config, "_inicfg", None)
    if stored is None:
        stored = getattr(config, "inicfg", None) or {}
    return set(stored), overrides


def check_ini_keys(config: pytest.Config) -> None:
    """An ``infperf_*`` key the plugin does not know is a usage error naming the closest
    known one: pytest's own "unknown config option" warning passes a misspelt threshold or
    budget in silence, and the run then gates on the default."""
    from_file, overrides = _given_ini_keys(config)
    known = known_ini_keys()
    # Matched on what follows the prefix, which every key shares.
    names = {key.removeprefix("infperf_"): key for key in known}
    problems = []
    for key in sorted((from_file | overrides) - known):
        if not key.startswith("infperf_"):
            continue
        where = f"-o {key}=..." if key in overrides else f"{key} in {config.inipath}"
        close = difflib.get_close_matches(key.removeprefix("infperf_"), sorted(names), n=1)
        fix = (
            f"did you mean {names[close[0]]}?"
            if close
            else "not one of the infperf_* keys (docs/USAGE.md lists them, and `pytest "
            "--help` under [pytest] ini-options)"
        )
        problems.append(f"unknown infperf ini key {where}: {fix}")
    if problems:
        raise pytest.UsageError("\n".join(problems))


def _ini(config: pytest.Config, name: str) -> str:
    value = config.getini(name)
    return str(value).strip() if value is not None else ""


def _int_ini(config: pytest.Config, name: str, minimum: int) -> int:
    text = _ini(config, name) or SESSION_INI[name][1]
    try:
        value = int(text)
    except ValueError:
        raise pytest.UsageError(f"{name} = {text!r}: expected an integer >= {minimum}") from None
    if value < minimum:
        raise pytest.UsageError(f"{name} = {text!r}: expected an integer >= {minimum}")
    return value


def _switch(config: pytest.Config, dest: str, ini: str) -> bool:
    """A flag when given, else its ini key (pytest parses the bool and names a bad one)."""
    flag = config.getoption(dest)
    if flag is not None:
        return bool(flag)
    try:
        return bool(config.getini(ini))
    # pytest's own parse says "invalid truth value 'maybe'" without naming the key: a
    # ValueError up to pytest 8, a UsageError from pytest 9.
    except (ValueError, pytest.UsageError) as exc:
        raise pytest.UsageError(
            f"ini {ini}: {exc}; expected true or false (also yes/no, on/off, 1/0)"
        ) from None


def _bench_layer(config: pytest.Config) -> dict[str, Any]:
    """The per-benchmark options set for the whole run: ini keys, then --perf-* flags."""
    ini_values: dict[str, Any] = {}
    for spec in _options.INI_OPTIONS:
        text = _ini(config, _options.ini_name(spec.name))
        if text:
            ini_values[spec.name] = text
    try:
        layer = {k: _options.SPECS[k].parse(_options.ini_name(k), v) for k, v in ini_values.items()}
    except _options.OptionError as exc:
        raise pytest.UsageError(f"ini setting {exc}") from None
    for dest, option in CLI_OPTIONS.items():
        value = config.getoption(dest)
        if value is not None:
            layer[option] = value
    try:
        _options.merge(layer, generation=None)
    except _options.OptionError as exc:
        raise pytest.UsageError(str(exc)) from None

    return layer


def _paths(config: pytest.Config, rootdir: Path) -> tuple[Path, Path | None]:
    """The baselines folder and the results JSON path."""
    cli_baselines = config.getoption("perf_baselines")
    ini_baselines = _ini(config, "infperf_baselines")
    if cli_baselines:
        baselines = Path(cli_baselines).expanduser()
        baselines = baselines if baselines.is_absolute() else Path.cwd() / baselines
    else:
        baselines = rootdir / (ini_baselines or "baselines")
    # Command-line paths are relative to the cwd, ini paths to the rootdir.
    json_path: Path | None = None
    if config.getoption("perf_json"):
        json_path = Path(config.getoption("perf_json")).expanduser().absolute()
    elif _ini(config, "infperf_json"):
        json_path = rootdir / Path(_ini(config, "infperf_json")).expanduser()
    return baselines, json_path


def _gpus(config: pytest.Config) -> tuple[str, ...] | None:
    """infperf_gpus: the GPUs xdist workers are pinned to."""
    gpus_text = _ini(config, "infperf_gpus")
    gpus: tuple[str, ...] | None = None
    if gpus_text:
        gpus = tuple(gpus_text.replace(",", " ").split())
        bad = [g for g in gpus if not (g.isdigit() or g.startswith(("GPU-", "MIG-")))]
        if bad:
            raise pytest.UsageError(
                f"infperf_gpus = {gpus_text!r}: {bad[0]!r} is not a GPU index or UUID; "
                "expected e.g. '0,1' or 'GPU-2f1c8b4e-...'"
            )
    return gpus


def _numbers(config: pytest.Config) -> tuple[float, float]:
    """The drift limit and the run's alpha."""
    limit_text = _ini(config, "infperf_drift_limit") or SESSION_INI["infperf_drift_limit"][1]
    try:
        drift_limit = float(limit_text)
        if not drift_limit > 0:
            raise ValueError
    except ValueError:
        raise pytest.UsageError(
            f"infperf_drift_limit = {limit_text!r}: expected a positive fraction, e.g. 0.25"
        ) from None
    run_alpha_text = (
        config.getoption("perf_run_alpha")
        or _ini(config, "infperf_run_alpha")
        or SESSION_INI["infperf_run_alpha"][1]
    )
    try:
        run_alpha = float(run_alpha_text)
        if not 0 < run_alpha < 0.5:
            raise ValueError
    except ValueError:
        raise pytest.UsageError(
            f"--perf-run-alpha / infperf_run_alpha = {run_alpha_text!r}: expected a number in "
            "(0, 0.5), e.g. 0.01 (one run in a hundred with nothing changed may fail)"
        ) from None
    return drift_limit, run_alpha


def _choice(config: pytest.Config, name: str, choices: tuple[str, ...]) -> str:
    """A setting with a fixed set of values: ``--perf-NAME``, else ini ``infperf_NAME``,
    else its default (``SESSION_INI``)."""
    ini = f"infperf_{name}"
    value = config.getoption(f"perf_{name}") or _ini(config, ini).lower() or SESSION_INI[ini][1]
    if value not in choices:
        flag = "--perf-" + name.replace("_", "-")
        raise pytest.UsageError(f"{flag} / {ini} = {value!r}: expected one of {', '.join(choices)}")
    return value


def _on_off(config: pytest.Config, ini: str) -> bool:
    """An ini switch that reads on or off (else its default)."""
    value = _ini(config, ini).lower() or SESSION_INI[ini][1]
    if value not in ("on", "off"):
        raise pytest.UsageError(f"{ini} = {value!r}: expected on or off")
    return value == "on"


def _pin_cpu(config: pytest.Config) -> int | None:
    """--perf-pin / infperf_pin: auto, off or a CPU number, resolved to the CPU."""
    value = (config.getoption("perf_pin") or _ini(config, "infperf_pin") or "auto").strip().lower()
    if value not in _cpus.CHOICES and not value.isdigit():
        raise pytest.UsageError(
            f"--perf-pin / infperf_pin = {value!r}: expected auto, off or a CPU number "
            "(e.g. 3, as taskset -c numbers them)"
        )
    try:
        return _cpus.resolve(value)
    except ValueError as exc:
        raise pytest.UsageError(
            f"--perf-pin / infperf_pin = {value!r}: {exc}; pick one of those, or auto"
        ) from None


def _budget(config: pytest.Config, compare: str | None, ab: str | None) -> BudgetSpec | None:
    """--perf-budget / infperf_budget, checked against the mode it is for."""
    budget_text = config.getoption("perf_budget") or _ini(config, "infperf_budget")
    try:
        budget = BudgetSpec.parse(budget_text) if budget_text else None
    except BudgetError as exc:
        raise pytest.UsageError(str(exc)) from None
    if config.getoption("perf_budget") and budget is not None and not (compare or ab):
        # The ini key is for the comparing runs; the flag on a run that compares nothing is
        # a mistake worth saying.
        raise pytest.UsageError(
            "--perf-budget spends a comparing run's time: use it with --perf-compare or "
            "--perf-ab (this run compares nothing)"
        )
    if config.getoption("perf_budget") and budget is not None and budget.multiple and ab:
        raise pytest.UsageError(
            f"--perf-budget={budget.describe()} multiplies a stored baseline's run, and "
            "--perf-ab has none: give seconds (--perf-budget=300)"
        )
    return budget


def from_config(config: pytest.Config, serving: bool = False) -> Settings:
    """Read and validate every infperf setting; a bad one is a ``pytest.UsageError``.
    ``serving``: an A/B worker in another commit's checkout, whose ini file is that
    commit's (checked when that commit is the one under test, not a reason to stop this
    run): its unknown keys are not checked."""
    if not serving:
        check_ini_keys(config)
    layer = _bench_layer(config)
    rootdir = Path(str(config.rootpath))
    baselines, json_path = _paths(config, rootdir)
    md = config.getoption("perf_markdown")
    gpus = _gpus(config)
    drift_guard = (_ini(config, "infperf_drift_guard") or "adjust").lower()
    if drift_guard not in ("adjust", "warn", "off"):
        raise pytest.UsageError(
            f"infperf_drift_guard = {drift_guard!r}: expected one of adjust, warn, off"
        )
    settle = _choice(config, "settle", SETTLE_CHOICES)
    gpu_throttle = _choice(config, "gpu_throttle", GPU_THROTTLE_CHOICES)
    heap = _choice(config, "heap", HEAP_CHOICES)
    drift_limit, run_alpha = _numbers(config)
    compare = config.getoption("perf_compare")
    ab = config.getoption("perf_ab")
    if compare is not None and not compare.strip():
        raise pytest.UsageError("--perf-compare needs a value: a branch, tag, sha or JSON file")
    if compare and ab:
        raise pytest.UsageError(
            "--perf-compare and --perf-ab are two ways of comparing: use one "
            "(--perf-ab measures both sides now; --perf-compare uses a stored baseline)"
        )
    count = bool(config.getoption("perf_count"))
    clash = [
        f
        for f, on in (
            ("--perf-save", config.getoption("perf_save")),
            ("--perf-compare", compare),
            ("--perf-ab", ab),
            ("--perf-disable", config.getoption("perf_disable")),
        )
        if on
    ]
    if count and clash:
        raise pytest.UsageError(
            f"--perf-count times nothing, so it cannot go with {', '.join(clash)}: count the "
            "work in a run of its own (its --perf-json has each benchmark's work)"
        )
    budget = _budget(config, compare, ab)
    return Settings(
        rootdir=rootdir,
        verbose=config.get_verbosity() > 0,
        json_path=json_path,
        save=bool(config.getoption("perf_save")),
        compare=compare,
        ab=ab,
        baselines=baselines.resolve(),
        strict_env=bool(config.getoption("perf_strict_env")),
        warn_only=bool(config.getoption("perf_warn_only")),
        markdown=Path(md).expanduser().absolute() if md else None,
        summary=not config.getoption("perf_no_summary"),
        disable=bool(config.getoption("perf_disable")),
        count=count,
        search_depth=_int_ini(config, "infperf_search_depth", 0),
        max_baseline_bytes=_int_ini(config, "infperf_max_baseline_mb", 1) * 1024 * 1024,
        gpus=gpus,
        ab_pythonpath=tuple(_ini(config, "infperf_ab_pythonpath").replace(",", " ").split()),
        drift_guard=drift_guard,
        settle=settle,
        gpu_throttle=gpu_throttle,
        pin_cpu=_pin_cpu(config),
        heap=heap,
        prestart=_on_off(config, "infperf_prestart"),
        worker_timeout=float(_int_ini(config, "infperf_worker_timeout", 1)),
        accept=tuple(config.getoption("perf_accept") or ()),
        allow_missing=_switch(config, "perf_allow_missing", "infperf_allow_missing"),
        require_baseline=_switch(config, "perf_require_baseline", "infperf_require_baseline"),
        drift_limit=drift_limit,
        run_alpha=run_alpha,
        budget=budget,
        bench_layer=layer,
    )
