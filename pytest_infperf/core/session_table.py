"""The session's settings, one row each (:data:`TABLE`): the flags and ini keys are
generated from it (``plugin.py``), every value is read through it
(:mod:`~pytest_infperf.core.settings`), each default is written here once. The
per-benchmark options are :mod:`.options`' table."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

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
        "an override, which no layout needs: folders (relative to the checkout) put first on "
        "sys.path of every A/B worker (each worker imports the project from its own "
        "checkout by itself: docs/COMPARING.md, 'Which code each side runs')",
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
        "benchmark's baseline, a stored verdict that drift could explain is withheld",
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
