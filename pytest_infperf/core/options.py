"""Every setting a user can give: one ``Spec`` type, one parser family, two tables.

The per-benchmark options (:class:`BenchOptions`, whose fields are the rows) are set, from
weakest to strongest, by their ini key (``infperf_<name>``, where they have one) or
``infperf_expert``, a command-line flag (where they have one), the ``@pytest.mark.infperf``
marker and keyword arguments to ``infer_bench(...)``. The session's settings
(:data:`SESSION`) are set by a flag, an ini key or ``infperf_expert``, and read into the
frozen ``Settings`` by :mod:`.settings`. The GitHub Action's inputs are rows of the same
type (``cli/action.py``). Every value goes through the same parsers, so an error names
where it was written and what is accepted.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from . import cpus as _cpus
from .budget import BudgetError, BudgetSpec
from .names import Metric

#: The metrics a generation benchmark is judged on: time to first token, time per output
#: token. The one definition; every table and test of them iterates this.
GENERATION_METRICS = (Metric.TTFT, Metric.TPOT)
#: Metrics a comparison can be made on (the generation ones: generation benchmarks only).
METRICS = tuple(Metric)
#: What ``infer_bench.generate`` can be asked to judge: "median" judges both.
GENERATION_CHOICES = (Metric.MEDIAN, *GENERATION_METRICS)


class OptionError(ValueError):
    """A benchmark option has an unknown name or a bad value."""


Parser = Callable[[str, Any], Any]


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def integer(minimum: int) -> Parser:
    def parse(name: str, value: Any) -> int:
        if isinstance(value, bool):
            raise OptionError(f"{name}={value!r}: expected an integer >= {minimum}")
        try:
            # Digits only: Python's int() also reads "1_0" as 10.
            digits = value.strip().lstrip("+-") if _is_str(value) else ""
            if _is_str(value) and not (digits.isascii() and digits.isdigit()):
                raise ValueError
            number = int(value, 10) if _is_str(value) else int(value)
            if not _is_str(value) and number != value:
                raise ValueError
        except (TypeError, ValueError):
            raise OptionError(f"{name}={value!r}: expected an integer >= {minimum}") from None
        if number < minimum:
            raise OptionError(f"{name}={value!r}: must be an integer >= {minimum}")
        return number

    return parse


def number(
    low: float, high: float = math.inf, *, low_open: bool = False, high_open: bool = True
) -> Parser:
    lb = "(" if low_open else "["
    hb = ")" if high_open else "]"
    bounds = f"{lb}{low:g}, {'inf' if high == math.inf else f'{high:g}'}{hb}"

    def parse(name: str, value: Any) -> float:
        if isinstance(value, bool):
            raise OptionError(f"{name}={value!r}: expected a number in {bounds}")
        try:
            if _is_str(value) and "_" in value:  # float() also reads "1_0" as 10.0
                raise ValueError
            number = float(value)
        except (TypeError, ValueError):
            raise OptionError(f"{name}={value!r}: expected a number in {bounds}") from None
        too_low = number <= low if low_open else number < low
        too_high = number >= high if high_open else number > high
        if math.isnan(number) or too_low or too_high:
            raise OptionError(f"{name}={value!r}: must be a number in {bounds}")
        return number

    return parse


def optional(inner: Parser) -> Parser:
    def parse(name: str, value: Any) -> Any:
        if value is None or (_is_str(value) and value.strip().lower() in ("", "none")):
            return None
        return inner(name, value)

    return parse


def boolean(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if _is_str(value) and value.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if _is_str(value) and value.strip().lower() in ("0", "false", "no", "off"):
        return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise OptionError(f"{name}={value!r}: expected true or false")


def choice(*choices: str) -> Parser:
    def parse(name: str, value: Any) -> str:
        text = value.strip().lower() if _is_str(value) else value
        if text not in choices:
            raise OptionError(f"{name}={value!r}: expected one of {', '.join(choices)}")
        return str(text)

    return parse


def _metric(name: str, value: Any) -> Metric:
    text = value.strip().lower() if _is_str(value) else value
    if text in ("latency", "p50"):
        text = "median"
    if text not in METRICS:
        raise OptionError(f"{name}={value!r}: unknown metric; expected one of {', '.join(METRICS)}")
    return Metric(text)


def text(name: str, value: Any) -> str:
    if not _is_str(value) or not value:
        raise OptionError(f"{name}={value!r}: expected a non-empty string")
    return str(value)


def _mapping(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise OptionError(f"{name}={value!r}: expected a dict")
    return dict(value)


def _any(name: str, value: Any) -> Any:
    return value


def _providers(name: str, value: Any) -> list[Any] | None:
    if value is None:
        return None
    if _is_str(value):
        items: list[Any] = [p.strip() for p in value.replace(",", " ").split() if p.strip()]
    elif isinstance(value, Iterable):
        items = list(value)
    else:
        raise OptionError(f"{name}={value!r}: expected a list of execution provider names")
    for item in items:
        ok = _is_str(item) or (isinstance(item, tuple) and len(item) == 2 and _is_str(item[0]))
        if not ok:
            raise OptionError(
                f"{name}={value!r}: each provider is a name or a (name, options) tuple"
            )
    return items


#: A flag that takes no value (``store_true``).
SWITCH = ""


@dataclasses.dataclass(frozen=True)
class Spec:
    """One setting, a row of either table (a benchmark option, :class:`BenchOptions`; a
    session setting, :data:`SESSION`): its name (the ini key is ``infperf_<name>``, the flag
    ``--perf-<name>``), its parser (this module's family: every value goes through it,
    from a flag, an ini key, ``infperf_expert``, a marker, a keyword or an Action input),
    its default (written once, here), the help (:meth:`describe` adds the default), and how
    it is given: a flag (its metavar; :data:`SWITCH` for one without a value), an ini key,
    or only inside ``infperf_expert`` (what only an experiment or a rare runner needs)."""

    name: str
    parse: Parser
    default: Any
    help: str
    ini: bool = True
    flag: str | None = None
    expert: bool = False
    #: A session setting (its value is the session's, read by ``core/settings.py``), not
    #: a benchmark option (merged per benchmark with the marker and the call's keywords).
    session: bool = False
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
        return f"--perf-{self.name.replace('_', '-')}"

    @property
    def dest(self) -> str:
        return f"perf_{self.name}"

    def describe(self) -> str:
        """The help text with the default, from the table (never restated by hand)."""
        if self.default is None or isinstance(self.default, bool) or self.default == "":
            return self.help
        return (
            f"{self.help} (default {self.default:g})"
            if isinstance(self.default, float)
            else f"{self.help} (default {self.default})"
        )


def _option(
    default: Any,
    parse: Parser,
    help: str,
    *,
    ini: bool = True,
    flag: str | None = None,
    expert: bool = False,
) -> Any:
    """A field of :class:`BenchOptions` and its row of the options table. ``expert``: set
    in the marker, a keyword, or the session's ``infperf_expert``; no ini key or flag of
    its own (what only an experiment or a rare model needs)."""
    return dataclasses.field(
        default=default, metadata={"spec": (parse, help, ini and not expert, flag, expert)}
    )


@dataclasses.dataclass(frozen=True)
class BenchOptions:
    """One benchmark's options, merged and validated (:func:`merge`): the options table.
    Each field's metadata is its row (parser, help, ini key, flag); :data:`SPECS`, the ini
    keys, the ``--perf-*`` flags and ``infperf compare``'s flags are built from it."""

    # --- measurement ---------------------------------------------------------------------
    warmup: int = _option(10, integer(0), "minimum warmup calls before timing")
    warmup_time: float = _option(
        2.0,
        number(0.0),
        "seconds of extra warmup allowed while waiting for stable timings",
        expert=True,
    )
    warmup_tolerance: float = _option(
        0.05,
        number(0.0, 1.0, low_open=True),
        "warmup ends when the median of the last 5 samples is within this fraction of the 5 before",
        expert=True,
    )
    rounds: int = _option(20, integer(1), "minimum number of timed samples", flag="N")
    max_rounds: int = _option(1000, integer(1), "maximum number of timed samples", expert=True)
    max_time: float = _option(
        3.0,
        number(0.0, low_open=True),
        "seconds of timed sampling after which sampling stops once `rounds` samples exist",
        flag="S",
    )
    min_time: float = _option(
        1.0,
        number(0.0),
        "seconds the timed samples must span before the precision stop may end "
        "sampling; fast calls are grouped so max_rounds samples still span it. Machine "
        "speed drifts over seconds: a snapshot of a few ms compares badly",
        expert=True,
    )
    precision: float = _option(
        0.01,
        number(0.0, 1.0, low_open=True),
        "stop sampling once the 95% CI of the median has this relative half-width",
        expert=True,
    )
    min_sample_time: float = _option(
        20e-6,
        number(0.0),
        "calls faster than this many seconds are timed in blocks lasting at least "
        "this long, one sample being the block's average",
        expert=True,
    )
    batch_size: int | None = _option(
        None,
        optional(integer(1)),
        "items per call for throughput (default: first dimension of the first array input)",
    )
    disable_gc: bool = _option(
        True, boolean, "switch the garbage collector off while timing", expert=True
    )
    profile: str = _option(
        "counts",
        choice("off", "counts", "full"),
        "after timing, count what one call does in a short profiled pass: off; counts "
        "(FLOPs, operator calls, bytes allocated; CUDA kernels and the device's busy time); "
        "full (also time per operator and kernel, and ONNX Runtime's per-node profile)",
        flag="MODE",
    )
    check_nan: bool = _option(
        True, boolean, "fail when the model's output contains NaN", expert=True
    )
    # --- comparison ----------------------------------------------------------------------
    threshold: float = _option(
        0.05, number(0.0, 1.0, low_open=True), "tolerated slowdown, a fraction in (0, 1)", flag="D"
    )
    alpha: float = _option(
        0.05,
        number(0.0, 0.5, low_open=True),
        "per benchmark, the error of each bound of its ratio interval: a regression "
        "claimed past the threshold, or one missed when 'no regression' is claimed, in "
        "(0, 0.5); see --perf-run-alpha for the run as a whole",
        flag="A",
    )
    metric: Metric = _option(
        Metric.MEDIAN, _metric, f"what a comparison judges: {', '.join(METRICS)}", flag="M"
    )
    remeasure: int = _option(
        1,
        integer(0),
        "where settling cannot happen, re-measure a benchmark judged regression, "
        "improvement or inconclusive this many times",
        expert=True,
    )
    max_work_increase: float | None = _option(
        None,
        optional(number(0.0)),
        "fail a benchmark whose call does more work than its baseline's by more than this "
        "fraction (FLOPs, else operator calls or graph nodes, else kernels), whatever its "
        "time verdict; counts that vary from call to call never fail it",
        flag="F",
    )
    max_median_ms: float | None = _option(
        None,
        optional(number(0.0, low_open=True)),
        "absolute budget: fail when the median's CI lower bound exceeds it (ms)",
    )
    # --- backends (marker and keyword arguments only) -------------------------------------
    device: str | None = _option(
        None,
        optional(text),
        "torch: the device a model and its inputs run on (cuda, cuda:1, cpu; default: the "
        "model's parameters'). Set for the run (ini key, flag) it moves every torch model "
        "and generate()'s model and prompt, and no plain callable or ONNX Runtime session "
        "(ONNX Runtime takes CUDA by itself where its build has it); cuda on a machine "
        "without an NVIDIA GPU skips the benchmark, saying why",
        flag="DEVICE",
    )
    providers: list[Any] | None = _option(
        None,
        _providers,
        "onnxruntime: execution providers for sessions made from a path",
        ini=False,
    )
    provider_options: dict[str, Any] | None = _option(
        None,
        optional(_mapping),
        "onnxruntime: provider options (dict), applied to the first provider",
        ini=False,
        expert=True,
    )
    session_options: Any = _option(
        None,
        _any,
        "onnxruntime: an onnxruntime.SessionOptions for sessions made from a path",
        ini=False,
    )
    intra_op_threads: int | None = _option(
        None,
        optional(integer(0)),
        "threads within an operator (torch.set_num_threads / ORT intra_op)",
    )
    inter_op_threads: int | None = _option(
        None,
        optional(integer(0)),
        "onnxruntime: threads across operators (ORT inter_op)",
        expert=True,
    )
    graph_optimization_level: str | None = _option(
        None,
        optional(choice("disable", "basic", "extended", "all")),
        "onnxruntime: graph optimisation level for sessions made from a path",
        expert=True,
    )
    io_binding: bool | None = _option(
        None,
        optional(boolean),
        "onnxruntime: bind inputs/outputs on the device (default: on for CUDA)",
        ini=False,
    )
    allow_fallback: bool = _option(
        False,
        boolean,
        "onnxruntime: accept a session that runs on fewer providers than requested",
        expert=True,
    )
    cuda_graph: bool = _option(
        False, boolean, "capture the call in a CUDA graph (torch/ORT)", ini=False
    )
    include_copies: bool = _option(
        False,
        boolean,
        "torch: copy outputs to the host inside the timed region",
        ini=False,
        expert=True,
    )
    inference_mode: bool = _option(
        True,
        boolean,
        "torch: time the model under torch.inference_mode(); false keeps the grad mode the "
        "test set (a training step, a model that needs autograd)",
        ini=False,
        expert=True,
    )
    params: dict[str, Any] | None = _option(
        None, optional(_mapping), "extra parameters recorded with the benchmark", ini=False
    )

    def replace(self, **changes: Any) -> BenchOptions:
        return dataclasses.replace(self, **changes)


def _specs() -> tuple[Spec, ...]:
    rows = []
    for f in dataclasses.fields(BenchOptions):
        parse, help_, ini, flag, expert = f.metadata["spec"]
        rows.append(Spec(f.name, parse, f.default, help_, ini, flag, expert))
    return tuple(rows)


_SPECS = _specs()

SPECS: dict[str, Spec] = {spec.name: spec for spec in _SPECS}
INI_OPTIONS: tuple[Spec, ...] = tuple(spec for spec in _SPECS if spec.ini)
#: The options with a ``--perf-*`` flag (they beat ini, lose to the marker).
FLAG_OPTIONS: tuple[Spec, ...] = tuple(spec for spec in _SPECS if spec.flag and not spec.expert)
#: The options set in the marker, a keyword or ``infperf_expert`` only.
EXPERT_OPTIONS: tuple[Spec, ...] = tuple(spec for spec in _SPECS if spec.expert)
DEFAULTS: dict[str, Any] = {spec.name: spec.default for spec in _SPECS}


# --- the session's settings ----------------------------------------------------------------
#: What --perf-settle / infperf_settle accept.
SETTLE_CHOICES = ("auto", "stored-first")
#: What infperf_expert's heap accepts (measure/heap.py).
HEAP_CHOICES = ("steady", "system")
#: What infperf_expert's gpu_throttle accepts.
GPU_THROTTLE_CHOICES = ("exclude", "keep", "fail")


def _settle(name: str, value: Any) -> str:
    """``off`` (stored verdicts only) is gone: a stored baseline alone failed unchanged
    code where the machine's speed moved between runs, and no statistic on this run's
    samples can tell that from a change."""
    if _is_str(value) and value.strip().lower() == "off":
        raise OptionError(
            f"{name}=off was removed: stored verdicts alone failed unchanged code where the\n"
            "machine's speed moved since the baseline's run. Use auto (the default) or\n"
            "stored-first: both settle what a stored pass cannot decide by interleaving with\n"
            "the baseline's commit in this job; --perf-ab=REF interleaves every benchmark"
        )
    return str(choice(*SETTLE_CHOICES)(name, value))


def as_text(name: str, value: Any) -> str:
    """Any text, empty included (a path, a ref: what it names is checked where it is used)."""
    return "" if value is None else str(value)


def _gpus(name: str, value: Any) -> tuple[str, ...] | None:
    gpus = tuple(str(value).replace(",", " ").split())
    bad = [g for g in gpus if not (g.isdigit() or g.startswith(("GPU-", "MIG-")))]
    if bad:
        raise OptionError(
            f"{name}={value!r}: {bad[0]!r} is not a GPU index or UUID; expected e.g. '0,1' "
            "or 'GPU-2f1c...'"
        )
    return gpus or None


def _pin(name: str, value: Any) -> int | None:
    chosen = str(value).strip().lower()
    if chosen not in _cpus.CHOICES and not chosen.isdigit():
        raise OptionError(
            f"{name}={value!r}: expected auto, off or a CPU number (e.g. 3, as taskset -c "
            "numbers them)"
        )
    try:
        return _cpus.resolve(chosen)
    except ValueError as exc:  # the CPU is not this process's to use
        raise OptionError(f"{name}={value!r}: {exc}; pick one of those, or auto") from None


def _budget(name: str, value: Any) -> BudgetSpec | None:
    try:
        return BudgetSpec.parse(str(value)) if str(value).strip() else None
    except BudgetError as exc:
        raise OptionError(f"{name}={value!r}: {str(exc).split(': ', 1)[-1]}") from None


def _session(
    name: str,
    default: Any,
    parse: Parser,
    help: str,
    *,
    flag: str | None = None,
    ini: bool = False,
    expert: bool = False,
    hidden: bool = False,
    choices: tuple[str, ...] = (),
    append: bool = False,
) -> Spec:
    """A row of :data:`SESSION`: a flag, its own ini key, or only inside ``infperf_expert``."""
    return Spec(name, parse, default, help, ini, flag, expert, True, hidden, choices, append)


#: The branch that holds the baselines, unless a user names another (``infperf baselines
#: --branch``, the Action's ``baselines-branch``).
BASELINES_BRANCH = "infperf-baselines"

#: Every session setting: the flags and ini keys are generated from it, each default is
#: written here once.
SESSION: tuple[Spec, ...] = (
    _session(
        "save",
        False,
        boolean,
        "store this run's results as the baseline of the current commit",
        flag=SWITCH,
    ),
    _session(
        "compare",
        "",
        as_text,
        "compare against the baseline of REF (branch, tag, sha, HEAD~N) or a results JSON "
        "file; regressions fail their tests",
        flag="REF",
    ),
    _session(
        "ab",
        "",
        as_text,
        "measure the merge-base of REF and HEAD in the same job, interleaved with the current"
        " code, and compare (robust to machine drift)",
        flag="REF",
    ),
    _session(
        "json",
        "",
        as_text,
        "write the results (raw samples, statistics, environment) as JSON to PATH (an ini "
        "path is relative to the rootdir)",
        flag="PATH",
        ini=True,
    ),
    _session(
        "markdown",
        "",
        as_text,
        "write a Markdown report (for PR comments and job summaries) to PATH",
        flag="PATH",
    ),
    _session(
        "baselines",
        "baselines",
        as_text,
        "the baselines directory (a flag's path is relative to the current folder, an ini "
        "key's to the rootdir)",
        flag="DIR",
        ini=True,
    ),
    _session(
        "accept",
        "",
        as_text,
        "accept a regression of the benchmarks matching PATTERN (node id or fnmatch pattern, "
        "optionally followed by a reason) for this run; repeatable. In CI, put a 'Perf-"
        "Accept: PATTERN reason' trailer in a commit of the change instead",
        flag="PATTERN",
        append=True,
    ),
    _session(
        "settle",
        "auto",
        _settle,
        "what a stored baseline cannot decide is settled in this job by interleaving with the"
        " baseline commit's code. auto: and every benchmark is interleaved at once when the "
        "machine moved since the baseline's run, or after a settling showed the stored pass "
        "misread it; stored-first: always the stored pass first",
        flag="MODE",
        ini=True,
    ),
    _session(
        "budget",
        "",
        _budget,
        "how long a comparing run may take: seconds (120) or a multiple of the plain run "
        "(1.5x, from the baseline's record); it never cuts what might still fail",
        flag="SPEC",
        ini=True,
    ),
    _session(
        "run_alpha",
        0.01,
        number(0.0, 0.5, low_open=True),
        "the chance that a run in which nothing changed fails at all: an interleaved "
        "regression must also reject 'no slower at all' at this level over the run's perf "
        "tests",
        flag="A",
        ini=True,
    ),
    _session(
        "warn_only",
        False,
        boolean,
        "report regressions without failing tests",
        flag=SWITCH,
    ),
    _session(
        "strict_env",
        False,
        boolean,
        "fail benchmarks whose baseline comes from a different environment",
        flag=SWITCH,
    ),
    _session(
        "allow_missing",
        False,
        boolean,
        "let a --perf-compare that found no baseline for any benchmark pass (a first run); "
        "without it such a session fails",
        flag=SWITCH,
        ini=True,
    ),
    _session(
        "require_baseline",
        False,
        boolean,
        "fail every benchmark that has no baseline or an incomparable one",
        flag=SWITCH,
        ini=True,
    ),
    _session(
        "no_summary",
        False,
        boolean,
        "do not append the Markdown report to $GITHUB_STEP_SUMMARY",
        flag=SWITCH,
    ),
    _session(
        "disable",
        False,
        boolean,
        "call each model once without timing (run perf tests as plain tests)",
        flag=SWITCH,
    ),
    _session(
        "count",
        False,
        boolean,
        "no timing: call each model and count what one call does (infperf bisect searches on it)",
        flag=SWITCH,
        hidden=True,
    ),
    _session(
        "gpus",
        "",
        _gpus,
        "GPUs the xdist workers are pinned to, as CUDA_VISIBLE_DEVICES entries (indices or "
        "GPU-/MIG- UUIDs), e.g. '0,1' (default: the visible ones, by UUID)",
        ini=True,
    ),
    _session(
        "ab_pythonpath",
        "",
        as_text,
        "an override, which no layout needs: folders (relative to the checkout) put first on "
        "sys.path of every A/B worker (each worker imports the project from its own "
        "checkout by itself: docs/COMPARING.md, 'Which code each side runs')",
        ini=True,
    ),
    # --- in infperf_expert only ----------------------------------------------------------
    _session(
        "progress",
        "auto",
        choice("auto", "lines", "off"),
        "a line per benchmark as it completes: auto (when the output is not a terminal, as "
        "in CI logs, or with -v), lines, off",
        expert=True,
        choices=("auto", "lines", "off"),
    ),
    _session(
        "heap",
        "steady",
        choice(*HEAP_CHOICES),
        "steady: every process that measures fixes glibc's malloc thresholds as a long-"
        "running process has them, so that processes of identical code run alike; system: "
        "glibc as it is",
        expert=True,
        choices=HEAP_CHOICES,
    ),
    _session(
        "pin",
        "auto",
        _pin,
        "the timing thread of both sides of an interleaved comparison runs on one CPU (auto: "
        "the highest-numbered this process may use; or a CPU number) for benchmarks that run "
        "on one thread on the CPU; off: where the scheduler puts it",
        expert=True,
    ),
    _session(
        "prestart",
        True,
        boolean,
        "an interleaving session starts its first worker pair while it collects (not timed); "
        "off: on first need",
        expert=True,
    ),
    _session(
        "gpu_throttle",
        "exclude",
        choice(*GPU_THROTTLE_CHOICES),
        "GPU blocks that ran throttled or beside another process on the GPU: exclude: set "
        "aside, the verdict withheld past a quarter of a side's blocks; keep: counted only; "
        "fail: any fails the test",
        expert=True,
        choices=GPU_THROTTLE_CHOICES,
    ),
    _session(
        "drift_guard",
        "adjust",
        choice("adjust", "warn", "off"),
        "adjust: probe machine speed while sampling and raise the bar for a stored verdict "
        "by how much slower or faster the machine ran than at the baseline; warn: only "
        "report drift; off: no probes",
        expert=True,
        choices=("adjust", "warn", "off"),
    ),
    _session(
        "drift_limit",
        0.25,
        number(0.0, 1e9, low_open=True),
        "when the machine itself ran more than this fraction slower or faster than during a "
        "benchmark's baseline, a stored verdict that drift could explain is withheld",
        expert=True,
    ),
    _session(
        "worker_timeout",
        120,
        integer(1),
        "seconds an A/B worker may stay silent when asked for a block, a profile or its "
        "result (fifteen times that while it builds and warms a model); past it the worker is"
        " killed and the test that needed it fails",
        expert=True,
    ),
    _session(
        "max_baseline_mb",
        256,
        integer(1),
        "refuse to read baseline files larger than this",
        expert=True,
    ),
    _session(
        "search_depth",
        50,
        integer(0),
        "how many first-parent commits --perf-compare walks back to find a baseline",
        expert=True,
    ),
)

SESSION_SPECS: dict[str, Spec] = {s.name: s for s in SESSION}
#: The settings a user sets by their own flag or ini key (the rest: infperf_expert).
EXPERT_KEY = "infperf_expert"
EXPERT_HELP = (
    "expert settings, 'name=value' separated by spaces or lines: the session's "
    + ", ".join(s.name for s in SESSION if s.expert)
    + "; and the benchmark options "
    + ", ".join(spec.name for spec in EXPERT_OPTIONS)
    + " (docs/USAGE.md, Expert settings)"
)


def ini_name(option: str) -> str:
    return f"infperf_{option}"


def check_known(keys: Iterable[str], where: str) -> None:
    """A marker's or a call's keywords: an unknown one is an error that names the option
    it most likely meant (as for an ini key), else every known one."""
    unknown = sorted(set(keys) - set(SPECS) - {"name"})
    if unknown:
        named = []
        for key in unknown:
            close = difflib.get_close_matches(key, sorted(SPECS), n=1)
            named.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
        raise OptionError(
            f"{where}: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(named)}; "
            f"known options: {', '.join(sorted(SPECS))}"
        )


#: The options that apply where infer_bench builds an ONNX Runtime session from an .onnx
#: path, and the SessionOptions attribute each sets there. A session the test built keeps
#: its own: set on that call or its marker they are an error; run-wide (an ini key) they
#: do not reach it, and the run says so once.
SESSION_KEYS = {
    "session_options": "",
    "graph_optimization_level": "graph_optimization_level",
    "intra_op_threads": "intra_op_num_threads",
    "inter_op_threads": "inter_op_num_threads",
    "provider_options": "",
}


def parse_layer(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Validate one layer of options (marker kwargs, call kwargs...), naming ``where``."""
    check_known(values, where)
    parsed: dict[str, Any] = {}
    for key, value in values.items():
        if key == "name":
            continue
        try:
            parsed[key] = SPECS[key].parse(key, value)
        except OptionError as exc:
            raise OptionError(f"{where}: {exc}") from None
    return parsed


def metric_applies(metric: str, generation: bool) -> bool:
    """Whether ``metric`` can judge a generation benchmark (``generation``) or a call."""
    if generation:
        return metric in GENERATION_CHOICES
    return metric not in ("ttft", "tpot")


def merge(*layers: Mapping[str, Any], generation: bool | None = False) -> BenchOptions:
    """Defaults overridden by each parsed layer in turn, then cross-checked (``generation``:
    for ``infer_bench.generate``, which judges TTFT and TPOT; None: the session's layer,
    whose metric applies to whichever kind of benchmark it fits)."""
    merged = dict(DEFAULTS)
    for layer in layers:
        merged.update(layer)
    metric = merged["metric"]
    if generation is True and not metric_applies(metric, generation):
        raise OptionError(
            f"metric={str(metric)!r} does not apply to infer_bench.generate(), which judges TTFT "
            "and TPOT: use metric='ttft' or 'tpot' to judge one of them, or leave metric "
            "unset (median: both)"
        )
    if generation is False and not metric_applies(metric, generation):
        raise OptionError(
            f"metric={str(metric)!r} applies to infer_bench.generate() only: a single call has no "
            "tokens to time"
        )
    if merged["max_rounds"] < merged["rounds"]:
        raise OptionError(
            f"max_rounds={merged['max_rounds']} is below rounds={merged['rounds']}: "
            "raise max_rounds or lower rounds"
        )
    return BenchOptions(**merged)


def recorded(options: BenchOptions, leave_out: Iterable[str] = ()) -> dict[str, Any]:
    """The options as stored in the JSON: JSON-safe values only."""
    out: dict[str, Any] = {}
    skip = set(leave_out)
    items = ((f.name, getattr(options, f.name)) for f in dataclasses.fields(options))
    for key, value in sorted(items):
        if key in skip:
            continue
        if key == "session_options":
            out[key] = None if value is None else type(value).__name__
        elif key == "providers" and value is not None:
            out[key] = [p if isinstance(p, str) else p[0] for p in value]
        elif isinstance(value, (str, int, float, bool)) or value is None:
            out[key] = value
        elif isinstance(value, Mapping):
            out[key] = {
                str(k): v if isinstance(v, (str, int, float, bool)) or v is None else repr(v)
                for k, v in value.items()
            }
        else:
            out[key] = repr(value)
    return out


def marker_layer(item: Any) -> dict[str, Any]:
    """Parsed options of the item's ``infperf`` markers (closest marker wins per key)."""
    merged: dict[str, Any] = {}
    # iter_markers yields the closest first; apply farthest first so closer ones override.
    for mark in reversed(list(item.iter_markers("infperf"))):
        if mark.args:
            raise OptionError(
                f"{item.nodeid}: @pytest.mark.infperf takes keyword arguments only "
                f"(got positional {mark.args!r}), e.g. @pytest.mark.infperf(rounds=50)"
            )
        merged.update(mark.kwargs)
    if "name" in merged:
        raise OptionError(
            f"{item.nodeid}: @pytest.mark.infperf(name=...) is not allowed; name a measurement "
            "with infer_bench(model, name=...)"
        )
    return parse_layer(merged, f"@pytest.mark.infperf on {item.nodeid}")


def option_type(option: str, flag: str | None = None) -> Callable[[str], Any]:
    """An argparse ``type=`` that validates a flag through the option's own parser, so a
    value is refused with the same words wherever it is given."""
    name = flag or f"--perf-{option.replace('_', '-')}"

    def parse(text: str) -> Any:
        try:
            return SPECS[option].parse(name, text)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = option  # argparse shows it in "invalid <name> value"
    return parse


def generation_metrics(opts: BenchOptions) -> tuple[str, ...]:
    """The metrics a generation benchmark is judged on: ``metric="ttft"`` or ``"tpot"``
    narrows it to one; otherwise both."""
    metric = opts.metric
    return (metric,) if metric in GENERATION_METRICS else GENERATION_METRICS
