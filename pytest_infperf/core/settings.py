"""Session settings: built once from the command line and ini file, validated, frozen."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from . import cpus as _cpus
from . import options as _options
from .budget import BudgetError, BudgetSpec

#: What --perf-settle / infperf_settle accept.
SETTLE_CHOICES = ("auto", "stored-first", "off")
#: What infperf_expert's heap accepts (measure/heap.py).
HEAP_CHOICES = ("steady", "system")
#: What infperf_expert's gpu_throttle accepts.
GPU_THROTTLE_CHOICES = ("exclude", "keep", "fail")
#: A flag that takes no value (``store_true``).
SWITCH = ""


@dataclasses.dataclass(frozen=True)
class Setting:
    """One session setting, a row of :data:`TABLE`: its name (the ini key is
    ``infperf_<name>``, the flag ``--perf-<name>``), its default (as text, written once and
    parsed like any value given), the parser, the help, and how it is given: a flag (its
    metavar; :data:`SWITCH` for one without a value), its own ini key, or only inside
    ``infperf_expert`` (what only an experiment or a rare runner needs)."""

    name: str
    default: str
    parse: Callable[[str], Any]
    help: str
    flag: str | None = None
    ini: bool = False
    expert: bool = False
    #: A flag for the tools that start pytest (``infperf bisect``), not listed by --help.
    hidden: bool = False
    choices: tuple[str, ...] = ()
    #: A repeatable flag (each use adds a value).
    append: bool = False

    @property
    def ini_key(self) -> str:
        return f"infperf_{self.name}"

    @property
    def flag_name(self) -> str:
        return "--perf-" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        return "perf_" + self.name

    def describe(self) -> str:
        """The help with the default, from the table (never restated by hand)."""
        if self.default in ("", "false"):
            return self.help
        return f"{self.help} (default {self.default})"


def _text(text: str) -> str:
    return text


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false (also yes/no, on/off, 1/0)")


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return value

    return parse


def _int(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise ValueError(f"expected an integer >= {minimum}")
        return value

    return parse


def _fraction(low: float, high: float, example: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = low
        if not low < value < high:
            raise ValueError(f"expected a number in ({low:g}, {high:g}), e.g. {example}")
        return value

    return parse


def _gpus(text: str) -> tuple[str, ...] | None:
    gpus = tuple(text.replace(",", " ").split())
    bad = [g for g in gpus if not (g.isdigit() or g.startswith(("GPU-", "MIG-")))]
    if bad:
        raise ValueError(
            f"{bad[0]!r} is not a GPU index or UUID; expected e.g. '0,1' or 'GPU-2f1c...'"
        )
    return gpus or None


def _pin(text: str) -> int | None:
    value = text.strip().lower()
    if value not in _cpus.CHOICES and not value.isdigit():
        raise ValueError("expected auto, off or a CPU number (e.g. 3, as taskset -c numbers them)")
    return _cpus.resolve(value)


def _budget(text: str) -> BudgetSpec | None:
    try:
        return BudgetSpec.parse(text) if text.strip() else None
    except BudgetError as exc:
        raise ValueError(str(exc).split(": ", 1)[-1]) from None


#: Every session setting: the flags and ini keys are generated from it, each default is
#: written here once. The per-benchmark options are :mod:`.options`' table.
TABLE: tuple[Setting, ...] = (
    Setting(
        "save",
        "false",
        _bool,
        "store this run's results as the baseline of the current commit",
        flag=SWITCH,
    ),
    Setting(
        "compare",
        "",
        _text,
        "compare against the baseline of REF (branch, tag, sha, HEAD~N) or a results JSON "
        "file; regressions fail their tests",
        flag="REF",
    ),
    Setting(
        "ab",
        "",
        _text,
        "measure the merge-base of REF and HEAD in the same job, interleaved with the current"
        " code, and compare (robust to machine drift)",
        flag="REF",
    ),
    Setting(
        "json",
        "",
        _text,
        "write the results (raw samples, statistics, environment) as JSON to PATH (an ini "
        "path is relative to the rootdir)",
        flag="PATH",
        ini=True,
    ),
    Setting(
        "markdown",
        "",
        _text,
        "write a Markdown report (for PR comments and job summaries) to PATH",
        flag="PATH",
    ),
    Setting(
        "baselines",
        "baselines",
        _text,
        "the baselines directory (a flag's path is relative to the current folder, an ini "
        "key's to the rootdir)",
        flag="DIR",
        ini=True,
    ),
    Setting(
        "accept",
        "",
        _text,
        "accept a regression of the benchmarks matching PATTERN (node id or fnmatch pattern, "
        "optionally followed by a reason) for this run; repeatable. In CI, put a 'Perf-"
        "Accept: PATTERN reason' trailer in a commit of the change instead",
        flag="PATTERN",
        append=True,
    ),
    Setting(
        "settle",
        "auto",
        _choice(*SETTLE_CHOICES),
        "what a stored baseline cannot decide is settled in this job by interleaving with the"
        " baseline commit's code. auto: and every benchmark is interleaved at once when the "
        "machine moved since the baseline's run, or after a settling showed the stored pass "
        "misread it; stored-first: always the stored pass first; off: stored verdicts only",
        flag="MODE",
        ini=True,
        choices=SETTLE_CHOICES,
    ),
    Setting(
        "budget",
        "",
        _budget,
        "how long a comparing run may take: seconds (120) or a multiple of the plain run "
        "(1.5x, from the baseline's record); it never cuts what might still fail",
        flag="SPEC",
        ini=True,
    ),
    Setting(
        "run_alpha",
        "0.01",
        _fraction(0.0, 0.5, "0.01"),
        "the chance that a run in which nothing changed fails at all: an interleaved "
        "regression must also reject 'no slower at all' at this level over the run's perf "
        "tests",
        flag="A",
        ini=True,
    ),
    Setting(
        "warn_only",
        "false",
        _bool,
        "report regressions without failing tests",
        flag=SWITCH,
    ),
    Setting(
        "strict_env",
        "false",
        _bool,
        "fail benchmarks whose baseline comes from a different environment",
        flag=SWITCH,
    ),
    Setting(
        "allow_missing",
        "false",
        _bool,
        "let a --perf-compare that found no baseline for any benchmark pass (a first run); "
        "without it such a session fails",
        flag=SWITCH,
        ini=True,
    ),
    Setting(
        "require_baseline",
        "false",
        _bool,
        "fail every benchmark that has no baseline or an incomparable one",
        flag=SWITCH,
        ini=True,
    ),
    Setting(
        "no_summary",
        "false",
        _bool,
        "do not append the Markdown report to $GITHUB_STEP_SUMMARY",
        flag=SWITCH,
    ),
    Setting(
        "disable",
        "false",
        _bool,
        "call each model once without timing (run perf tests as plain tests)",
        flag=SWITCH,
    ),
    Setting(
        "count",
        "false",
        _bool,
        "no timing: call each model and count what one call does (infperf bisect searches on it)",
        flag=SWITCH,
        hidden=True,
    ),
    Setting(
        "gpus",
        "",
        _gpus,
        "GPUs the xdist workers are pinned to, as CUDA_VISIBLE_DEVICES entries (indices or "
        "GPU-/MIG- UUIDs), e.g. '0,1' (default: the visible ones, by UUID)",
        ini=True,
    ),
    Setting(
        "ab_pythonpath",
        "",
        _text,
        "folders (relative to the checkout) put on sys.path of the A/B base worker, e.g. 'src'",
        ini=True,
    ),
    # --- in infperf_expert only ----------------------------------------------------------
    Setting(
        "progress",
        "auto",
        _choice("auto", "lines", "off"),
        "a line per benchmark as it completes: auto (when the output is not a terminal, as "
        "in CI logs, or with -v), lines, off",
        expert=True,
        choices=("auto", "lines", "off"),
    ),
    Setting(
        "heap",
        "steady",
        _choice(*HEAP_CHOICES),
        "steady: every process that measures fixes glibc's malloc thresholds as a long-"
        "running process has them, so that processes of identical code run alike; system: "
        "glibc as it is",
        expert=True,
        choices=HEAP_CHOICES,
    ),
    Setting(
        "pin",
        "auto",
        _pin,
        "the timing thread of both sides of an interleaved comparison runs on one CPU (auto: "
        "the highest-numbered this process may use; or a CPU number) for benchmarks that run "
        "on one thread on the CPU; off: where the scheduler puts it",
        expert=True,
    ),
    Setting(
        "prestart",
        "on",
        _bool,
        "an interleaving session starts its first worker pair while it collects (not timed); "
        "off: on first need",
        expert=True,
    ),
    Setting(
        "gpu_throttle",
        "exclude",
        _choice(*GPU_THROTTLE_CHOICES),
        "GPU blocks that ran throttled or beside another process on the GPU: exclude: set "
        "aside, the verdict withheld past a quarter of a side's blocks; keep: counted only; "
        "fail: any fails the test",
        expert=True,
        choices=GPU_THROTTLE_CHOICES,
    ),
    Setting(
        "drift_guard",
        "adjust",
        _choice("adjust", "warn", "off"),
        "adjust: probe machine speed while sampling and raise the bar for a stored verdict "
        "by how much slower or faster the machine ran than at the baseline; warn: only "
        "report drift; off: no probes",
        expert=True,
        choices=("adjust", "warn", "off"),
    ),
    Setting(
        "drift_limit",
        "0.25",
        _fraction(0.0, 1e9, "0.25"),
        "when the machine itself ran more than this fraction slower or faster than during a "
        "benchmark's baseline, its stored verdict is withheld",
        expert=True,
    ),
    Setting(
        "worker_timeout",
        "120",
        _int(1),
        "seconds an A/B worker may stay silent when asked for a block, a profile or its "
        "result (fifteen times that while it builds and warms a model); past it the worker is"
        " killed and the test that needed it fails",
        expert=True,
    ),
    Setting(
        "max_baseline_mb",
        "256",
        _int(1),
        "refuse to read baseline files larger than this",
        expert=True,
    ),
    Setting(
        "search_depth",
        "50",
        _int(0),
        "how many first-parent commits --perf-compare walks back to find a baseline",
        expert=True,
    ),
)

SETTINGS: dict[str, Setting] = {s.name: s for s in TABLE}
#: The settings a user sets by their own flag or ini key (the rest: infperf_expert).
EXPERT_KEY = "infperf_expert"
EXPERT_HELP = (
    "expert settings, 'name=value' separated by spaces or lines: the session's "
    + ", ".join(s.name for s in TABLE if s.expert)
    + "; and the benchmark options "
    + ", ".join(spec.name for spec in _options.EXPERT_OPTIONS)
    + " (docs/USAGE.md, Expert settings)"
)

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
    return frozenset(options | {s.ini_key for s in TABLE if s.ini} | {EXPERT_KEY})


def expert_names() -> frozenset[str]:
    """What ``infperf_expert`` sets: the expert session settings and benchmark options."""
    session = {s.name for s in TABLE if s.expert}
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
    s = SETTINGS[name]
    text, where = s.default, "its default"
    given = config.getoption(s.dest) if s.flag is not None else None
    if s.append:
        return tuple(given or ())
    if given not in (None, False, ""):
        text, where = "true" if given is True else str(given), s.flag_name
    elif s.ini and _ini(config, s.ini_key):
        text, where = _ini(config, s.ini_key), s.ini_key
    elif s.expert and expert is not None and name in expert:
        text, where = expert[name], f"{EXPERT_KEY}'s {name}"
    try:
        return s.parse(text)
    except ValueError as exc:
        raise pytest.UsageError(f"{where} = {text!r}: {exc}") from None


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
        raise pytest.UsageError(f"ini setting {exc}") from None
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


def from_config(config: pytest.Config, serving: bool = False) -> Settings:
    """Read and validate every infperf setting; a bad one is a ``pytest.UsageError``.
    ``serving``: an A/B worker in another commit's checkout, whose ini file is that
    commit's (checked when that commit is the one under test, not a reason to stop this
    run): its unknown keys are not checked."""
    if not serving:
        check_ini_keys(config)
    expert = expert_values(config)

    def get(name: str) -> Any:
        return value(config, name, expert)

    layer = _bench_layer(config, expert)
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
        pin_cpu=_pin_cpu(config, expert),
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


def _pin_cpu(config: pytest.Config, expert: dict[str, str]) -> int | None:
    """The CPU interleaved blocks are pinned to; a CPU this process may not use is named."""
    try:
        cpu: int | None = value(config, "pin", expert)
    except pytest.UsageError:
        raise
    except ValueError as exc:  # the CPU is not this process's to use
        raise pytest.UsageError(f"{EXPERT_KEY}'s pin: {exc}; pick one of those, or auto") from None
    return cpu
