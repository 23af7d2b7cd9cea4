"""Session settings: built once from the command line and ini file, validated, frozen."""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import Any

import pytest

from . import options as _options
from .budget import BudgetSpec
from .options import EXPERT_KEY, SESSION, SESSION_SPECS

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
    #: The first worker pair started as the session collects (expert prestart).
    prestart: bool
    #: Progress lines: auto, lines or off (expert progress).
    progress: str
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
    return frozenset(options | {s.ini_key for s in SESSION if s.ini} | {EXPERT_KEY})


def expert_names() -> frozenset[str]:
    """What ``infperf_expert`` sets: the expert session settings and benchmark options."""
    session = {s.name for s in SESSION if s.expert}
    return frozenset(session | {spec.name for spec in _options.EXPERT_OPTIONS})


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
    known one (pytest's own "unknown config option" warning passes a misspelt threshold in
    silence, and the run then gates on the default); one that is an expert setting now
    says where it goes."""
    from_file, overrides = _given_ini_keys(config)
    known = known_ini_keys()
    expert = expert_names()
    # Matched on what follows the prefix, which every key shares.
    names = {key.removeprefix("infperf_"): key for key in known}
    problems = []
    for key in sorted((from_file | overrides) - known):
        if not key.startswith("infperf_"):
            continue
        where = f"-o {key}=..." if key in overrides else f"{key} in {config.inipath}"
        name = key.removeprefix("infperf_")
        close = difflib.get_close_matches(name, sorted(names), n=1)
        if name in expert:
            fix = f"an expert setting: set it as {EXPERT_KEY} = {name}=VALUE"
        elif close:
            fix = f"did you mean {names[close[0]]}?"
        else:
            fix = (
                "not one of the infperf_* keys (docs/USAGE.md lists them, and `pytest "
                "--help` under [pytest] ini-options)"
            )
        problems.append(f"unknown infperf ini key {where}: {fix}")
    if problems:
        raise pytest.UsageError("\n".join(problems))


def _ini(config: pytest.Config, name: str) -> str:
    value = config.getini(name)
    return str(value).strip() if value is not None else ""


def expert_values(config: pytest.Config) -> dict[str, str]:
    """``infperf_expert``'s ``name=value`` pairs, each name checked."""
    text = _ini(config, EXPERT_KEY)
    known = expert_names()
    out: dict[str, str] = {}
    for pair in text.split():
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise pytest.UsageError(
                f"{EXPERT_KEY}: {pair!r} is not name=value (e.g. {EXPERT_KEY} = heap=system)"
            )
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(sorted(known))}"
            raise pytest.UsageError(f"{EXPERT_KEY}: unknown setting {name!r}: {hint}")
        out[name] = value
    return out


def value(config: pytest.Config, name: str, expert: dict[str, str] | None = None) -> Any:
    """A session setting's value: its flag when given, else its ini key, else (an expert
    one) ``infperf_expert``, else its default; parsed by its own parser, and a bad value a
    usage error that names where it came from and what is expected."""
    s = SESSION_SPECS[name]
    given_value: Any = s.default
    where = "its default"
    given = config.getoption(s.dest) if s.flag is not None else None
    if s.append:
        return tuple(given or ())
    if given not in (None, False, ""):
        given_value, where = given, s.flag_name
    elif s.ini and _ini(config, s.ini_key):
        given_value, where = _ini(config, s.ini_key), s.ini_key
    elif s.expert and expert is not None and name in expert:
        given_value, where = expert[name], f"{EXPERT_KEY}'s {name}"
    try:
        return s.parse(where, given_value)
    except _options.OptionError as exc:
        raise pytest.UsageError(str(exc)) from None


def _bench_layer(config: pytest.Config, expert: dict[str, str]) -> dict[str, Any]:
    """The per-benchmark options set for the whole run: ini keys and ``infperf_expert``'s,
    then --perf-* flags."""
    ini_values: dict[str, tuple[str, str]] = {}
    for spec in _options.INI_OPTIONS:
        text = _ini(config, _options.ini_name(spec.name))
        if text:
            ini_values[spec.name] = (_options.ini_name(spec.name), text)
    for spec in _options.EXPERT_OPTIONS:
        if spec.name in expert:
            ini_values[spec.name] = (f"{EXPERT_KEY}'s {spec.name}", expert[spec.name])
    try:
        layer = {k: _options.SPECS[k].parse(where, v) for k, (where, v) in ini_values.items()}
    except _options.OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    for dest, option in CLI_OPTIONS.items():
        flag = config.getoption(dest)
        if flag is not None:
            layer[option] = flag
    try:
        _options.merge(layer, generation=None)
    except _options.OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    return layer


def _paths(config: pytest.Config, rootdir: Path) -> tuple[Path, Path | None]:
    """The baselines folder and the results JSON path: a flag's path is relative to the
    current folder, an ini key's to the rootdir."""
    cli_baselines = config.getoption("perf_baselines")
    if cli_baselines:
        baselines = Path(cli_baselines).expanduser()
        baselines = baselines if baselines.is_absolute() else Path.cwd() / baselines
    else:
        baselines = rootdir / value(config, "baselines")
    json_path: Path | None = None
    if config.getoption("perf_json"):
        json_path = Path(config.getoption("perf_json")).expanduser().absolute()
    elif _ini(config, "infperf_json"):
        json_path = rootdir / Path(_ini(config, "infperf_json")).expanduser()
    return baselines, json_path


def _modes(config: pytest.Config) -> tuple[str | None, str | None, bool]:
    """--perf-compare, --perf-ab and --perf-count, checked against each other."""
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
    return compare, ab, count


def _budget_for(config: pytest.Config, compare: str | None, ab: str | None) -> BudgetSpec | None:
    """--perf-budget / infperf_budget, checked against the mode it is for."""
    budget: BudgetSpec | None = value(config, "budget")
    flag = config.getoption("perf_budget")
    if flag and budget is not None and not (compare or ab):
        # The ini key is for the comparing runs; the flag on a run that compares nothing is
        # a mistake worth saying.
        raise pytest.UsageError(
            "--perf-budget spends a comparing run's time: use it with --perf-compare or "
            "--perf-ab (this run compares nothing)"
        )
    if flag and budget is not None and budget.multiple and ab:
        raise pytest.UsageError(
            f"--perf-budget={budget.describe()} multiplies a stored baseline's run, and "
            "--perf-ab has none: give seconds (--perf-budget=300)"
        )
    return budget


#: An interleaving worker: its controller's run-wide benchmark options (ini keys,
#: ``infperf_expert``'s, --perf-* flags), set before configure. Both sides of a comparison
#: time with them: the served checkout's own ini (an older commit's, from before a key
#: moved) would time the base another way than the head.
served_layer_key: pytest.StashKey[dict[str, Any]] = pytest.StashKey()


def served_layer(text: str) -> dict[str, Any] | None:
    """The controller's options as a worker reads them (JSON), each through its own parser
    (None: none were given)."""
    import json  # noqa: PLC0415 (an interleaving worker's start-up only)

    if not text:
        return None
    return {k: _options.SPECS[k].parse(k, v) for k, v in json.loads(text).items()}


def from_config(config: pytest.Config, serving: bool = False) -> Settings:
    """Read and validate every infperf setting; a bad one is a ``pytest.UsageError``.
    ``serving``: an A/B worker in another commit's checkout, whose ini file is that
    commit's (checked when that commit is the one under test, not a reason to stop this
    run): its unknown keys are not checked, and its benchmark options are its
    controller's (``served_layer_key``)."""
    if not serving:
        check_ini_keys(config)
    expert = expert_values(config)

    def get(name: str) -> Any:
        return value(config, name, expert)

    layer = _bench_layer(config, expert)
    if serving:
        layer = config.stash.get(served_layer_key, layer)
    rootdir = Path(str(config.rootpath))
    baselines, json_path = _paths(config, rootdir)
    md = config.getoption("perf_markdown")
    compare, ab, count = _modes(config)
    return Settings(
        rootdir=rootdir,
        verbose=config.get_verbosity() > 0,
        json_path=json_path,
        save=get("save"),
        compare=compare,
        ab=ab,
        baselines=baselines.resolve(),
        strict_env=get("strict_env"),
        warn_only=get("warn_only"),
        markdown=Path(md).expanduser().absolute() if md else None,
        summary=not get("no_summary"),
        disable=get("disable"),
        count=count,
        search_depth=get("search_depth"),
        max_baseline_bytes=get("max_baseline_mb") * 1024 * 1024,
        gpus=get("gpus"),
        ab_pythonpath=tuple(get("ab_pythonpath").replace(",", " ").split()),
        drift_guard=get("drift_guard"),
        settle=get("settle"),
        gpu_throttle=get("gpu_throttle"),
        pin_cpu=value(config, "pin", expert),
        heap=get("heap"),
        prestart=get("prestart"),
        progress=get("progress"),
        worker_timeout=float(get("worker_timeout")),
        accept=get("accept"),
        allow_missing=get("allow_missing"),
        require_baseline=get("require_baseline"),
        drift_limit=get("drift_limit"),
        run_alpha=get("run_alpha"),
        budget=_budget_for(config, compare, ab),
        bench_layer=layer,
    )
