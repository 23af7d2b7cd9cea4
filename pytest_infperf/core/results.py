"""Benchmark results and the versioned JSON document that carries them.

One schema serves ``--perf-json`` artifacts and stored baselines (a baseline file is the
results document of one commit), so ``--perf-compare`` accepts either. Serialisation is
deterministic (sorted keys, 12 significant digits, one benchmark list sorted by key) so
that baselines diff well in git.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from .names import CompareMode, Metric
from .record import ResultExtra

SCHEMA_VERSION = 1
#: Significant digits kept for floats: sub-picosecond detail of a timing is noise.
FLOAT_DIGITS = 12


class Verdict(str, enum.Enum):
    """What a comparison concluded. A str, so it is its own JSON value."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    #: The gate's own question answered: the data rule out a slowdown past the tolerance
    #: (upper bound <= 1 + threshold), though not a speed-up past it.
    NO_REGRESSION = "no-regression"
    INCONCLUSIVE = "inconclusive"
    NO_BASELINE = "no-baseline"
    INCOMPARABLE = "incomparable"
    #: A regression the change accepts (a Perf-Accept trailer, --perf-accept): it passes.
    ACCEPTED = "accepted"

    def __str__(self) -> str:  # f-strings and str() give the name users see
        return self.value

    @property
    def decisive(self) -> bool:
        """The interval settled it (as opposed to inconclusive, or nothing to compare)."""
        return self in (
            Verdict.REGRESSION,
            Verdict.IMPROVEMENT,
            Verdict.UNCHANGED,
            Verdict.NO_REGRESSION,
            Verdict.ACCEPTED,
        )

    @property
    def passes(self) -> bool:
        """The data rule out a regression past the tolerance."""
        return self in (Verdict.IMPROVEMENT, Verdict.UNCHANGED, Verdict.NO_REGRESSION)


class Reason(str, enum.Enum):
    """Why a comparison is not decisive, or why a verdict was changed after the statistics."""

    INTERVAL_WIDE = "interval-too-wide"
    TOO_FEW = "too-few-samples"
    NO_FIGURE = "no-figure"
    DRIFT_WITHHELD = "drift-guard"
    DRIFT_EXPLAINS = "drift-explains"
    #: Kept for results written before 0.2: Holm over the benchmarks flagged so far.
    HOLM = "holm"
    #: A regression that did not survive the run's multiplicity control (Bonferroni over
    #: the run's family for a stored-only verdict; Holm over a generation's metrics;
    #: the run-level "nothing changed" test of an interleaved one).
    MULTIPLICITY = "multiplicity"
    #: The interleaved run stopped because it could no longer reach a decision.
    FUTILITY = "futility"
    NOT_IN_BASELINE = "not-in-baseline"
    BASE_ERROR = "base-error"
    #: The base side's exact work counts are not those a stored baseline of its commit
    #: recorded: it did not run that commit's code, and its verdict is withheld.
    BASE_CODE = "base-code-differs"
    ENVIRONMENT = "environment-differs"
    #: Too many of the benchmark's GPU blocks ran throttled or beside another process on
    #: the GPU (or, with infperf_expert gpu_throttle=fail, any of them did).
    GPU_THROTTLED = "gpu-throttled"
    #: Left undecided because the run's time budget (--perf-budget) was spent (not the
    #: ``max_median_ms`` budget of a benchmark's own latency).
    BUDGET = "run-budget"
    #: A GPU benchmark's latency on a runner whose host moves it between processes by more
    #: than the pairs a comparison may take can resolve: the device time and the exact work
    #: counts decide, and the host part goes ungated (said with its spread).
    HOST_UNGATED = "host-ungated"
    #: A verdict that passed while the exact work counts grew, which no pass stands against,
    #: and which could not be settled: not a pass.
    WORK_GREW = "work-grew"

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where the baseline side of a comparison came from."""

    #: A baseline saved earlier, or measured in this job, interleaved.
    mode: CompareMode
    commit: str | None = None
    distance: int | None = None
    #: For people: "commit 1a2b3c4d5e (1 commit before the merge-base of main and HEAD)".
    text: str = "a baseline"


#: The ``details`` key where a comparison records the host's spread (log sd, as the run
#: measured it) that left its latency ungated on a GPU runner.
HOST_SD = "host_ungated_sd"

#: Comparison fields that hold another (earlier) pass.
NESTED = ("first_pass", "stored_pass")

#: How people read the generation metrics (judged: ``options.GENERATION_METRICS``) and
#: the device's time.
METRIC_LABELS = {
    "ttft": "TTFT",
    "tpot": "TPOT",
    "itl": "ITL",
    "e2e": "E2E",
    "gpu_time": "device time",
}


#: A work profile's per-call counts, each a number or None (a work diff pairs them).
_COUNTS = ("flops", "op_calls", "kernels", "alloc_bytes", "python_calls", "syncs")


@dataclasses.dataclass(frozen=True)
class WorkProfile:
    """What one call of a benchmark does, counted in a profiled pass after its timed samples
    (:mod:`~pytest_infperf.measure.profile`): per call, exactly where the count is exact.
    Stored with the result (``work`` in the JSON) and compared by the judge
    (:class:`WorkDiff`). Dicts keep the most frequent names only (``ops_truncated``)."""

    #: ``counts`` or ``full`` (``--perf-profile``); what counted it (``torch.profiler``,
    #: ``onnx graph``...).
    mode: str = "counts"
    source: str = ""
    #: How many calls were profiled (counts are per call, averaged over them).
    calls: int = 0
    #: Floating-point operations per call (``torch.utils.flop_counter``), and by operator.
    flops: float | None = None
    flops_by_op: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Operator calls per call in all (torch: aten operators, nested ones included; ONNX
    #: Runtime: the graph's nodes) and by name, the most frequent first.
    op_calls: float | None = None
    ops: dict[str, float] = dataclasses.field(default_factory=dict)
    ops_truncated: bool = False
    #: Bytes the allocators handed out per call (torch's CPU and CUDA allocators).
    alloc_bytes: float | None = None
    #: The host's Python function calls in one call (``sys.setprofile``): the framework's
    #: dispatch in Python, which an eager model's host-bound latency follows.
    python_calls: float | None = None
    #: CUDA: the host's waits for the device per call (the runtime's and driver's
    #: ``*Synchronize`` calls: ``.item()``, ``.cpu()``, an explicit sync).
    syncs: float | None = None
    #: CUDA: kernel launches per call, by kernel name (the most frequent), and the
    #: device's busy time of each profiled call (kernels, copies and memsets; seconds).
    kernels: float | None = None
    kernel_counts: dict[str, float] = dataclasses.field(default_factory=dict)
    gpu_time: list[float] = dataclasses.field(default_factory=list)
    #: ``full`` only: self time per call by operator (CPU) and by kernel (CUDA), seconds.
    op_time: dict[str, float] | None = None
    kernel_time: dict[str, float] | None = None
    #: The figures that differed between the profiled calls (data-dependent control flow,
    #: dynamic shapes): reported as varying, never judged.
    varying: list[str] = dataclasses.field(default_factory=list)
    #: Seconds the pass took (not part of any sample), and what it could not count.
    cost_s: float = 0.0
    notes: list[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> WorkProfile | None:
        """From a results document, which may be old, hand-made or hostile: every field
        of the wrong type is dropped (its default kept), never a crash later."""
        if not isinstance(data, Mapping):
            return None
        out: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            if f.name in ("mode", "source"):
                out[f.name] = str(value)
            elif f.name == "calls":
                out[f.name] = int(_number(value) or 0)
            elif f.name in _COUNTS:
                out[f.name] = _number(value)
            elif f.name == "cost_s":
                out[f.name] = _number(value) or 0.0
            elif f.name == "ops_truncated":
                out[f.name] = bool(value)
            elif f.name in ("flops_by_op", "ops", "kernel_counts", "op_time", "kernel_time"):
                table = _table(value)
                out[f.name] = table if table is not None or f.name.endswith("_time") else {}
            elif f.name == "gpu_time":
                out[f.name] = [v for v in map(_number, _list(value)) if v is not None and v > 0]
            elif f.name in ("varying", "notes"):
                out[f.name] = [str(v) for v in _list(value)]
        return cls(**out)


def _number(value: Any) -> float | None:
    """A finite number as a float, else None (a bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _table(value: Any) -> dict[str, float] | None:
    """A name -> number table (entries that are not numbers dropped); None if not a dict."""
    if not isinstance(value, Mapping):
        return None
    return {str(k): n for k, v in value.items() if (n := _number(v)) is not None}


#: One figure of a work diff: (baseline, now).
Pair = tuple[float | None, float | None]


@dataclasses.dataclass(frozen=True)
class WorkDiff:
    """The work per call of the two sides of a comparison, side by side: made by the judge
    (:mod:`~pytest_infperf.judge.work`), shown by every report. Figures are
    ``(baseline, now)``; ``ops``/``kernel_changes`` list only the names whose count
    changed, the largest change first."""

    flops: Pair = (None, None)
    op_calls: Pair = (None, None)
    kernels: Pair = (None, None)
    alloc_bytes: Pair = (None, None)
    python_calls: Pair = (None, None)
    syncs: Pair = (None, None)
    #: Medians of the two sides' device busy time per call (CUDA).
    gpu_time: Pair = (None, None)
    ops: list[tuple[str, float | None, float | None]] = dataclasses.field(default_factory=list)
    kernel_changes: list[tuple[str, float | None, float | None]] = dataclasses.field(
        default_factory=list
    )
    #: ``full`` on both sides: the operators (and kernels) whose time per call moved most,
    #: (name, seconds now minus baseline).
    time_movers: list[tuple[str, float]] = dataclasses.field(default_factory=list)
    #: What differed from call to call on either side (never judged).
    varying: list[str] = dataclasses.field(default_factory=list)
    #: The headline: the relative change of ``measure`` (FLOPs where both sides counted
    #: them, else operator calls, else kernels), now / baseline - 1; None when that measure
    #: varies from call to call.
    change: float | None = None
    measure: str | None = None
    #: The largest relative increase of any measure both sides counted that does not vary
    #: (FLOPs, operator calls or graph nodes, kernels), and which: what ``max_work_increase``
    #: is held to (a fused op that moves no FLOPs can still do more work).
    increase: float | None = None
    increase_measure: str | None = None
    #: Every count the two sides share is equal.
    same: bool = False

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> WorkDiff | None:
        """From a results document (a shard's, maybe hand-made): values of the wrong type
        become None or are dropped, so nothing downstream formats a string as a number."""
        if not isinstance(data, Mapping):
            return None
        values: dict[str, Any] = {}
        for key in (*_COUNTS, "gpu_time"):
            pair = [*_list(data.get(key)), None, None][:2]
            values[key] = (_number(pair[0]), _number(pair[1]))
        for key in ("ops", "kernel_changes"):
            values[key] = [
                (str(row[0]), _number(row[1]), _number(row[2]))
                for row in _list(data.get(key))
                if isinstance(row, list | tuple) and len(row) == 3
            ]
        values["time_movers"] = [
            (str(row[0]), delta)
            for row in _list(data.get("time_movers"))
            if isinstance(row, list | tuple)
            and len(row) == 2
            and (delta := _number(row[1])) is not None
        ]
        values["varying"] = [str(v) for v in _list(data.get("varying"))]
        for key in ("change", "increase"):
            values[key] = _number(data.get(key))
        for key in ("measure", "increase_measure"):
            values[key] = None if data.get(key) is None else str(data.get(key))
        values["same"] = data.get("same") is True
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One benchmark judged against its baseline: the verdict and the numbers behind it.

    Built only by :mod:`pytest_infperf.judge`; everything that shows a verdict (terminal,
    Markdown, JUnit, HTML, the failure message) reads these fields, never message text.
    """

    verdict: Verdict
    metric: Metric = Metric.MEDIAN
    threshold: float = 0.05
    #: The overall significance level asked for.
    alpha: float = 0.05
    #: How the baseline side was measured: "stored" (a saved baseline) or "ab" (in this job).
    mode: CompareMode = CompareMode.STORED
    #: now / baseline of the metric's figure (for throughput, higher is better).
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    #: Two-sided coverage of [ci_low, ci_high]; each bound alone holds at (1 + ci_level) / 2.
    ci_level: float | None = None
    p_value: float | None = None
    #: The metric's figure the ratio compares, now and in the baseline (s, items/s, bytes).
    current: float | None = None
    baseline: float | None = None
    #: How many independent units the test used on each side, and what one unit is.
    n: int | None = None
    n_baseline: int | None = None
    unit: str | None = None
    reason: Reason | None = None
    note: str | None = None
    #: Where the baseline came from, for people (the commit and how it was found).
    source: str | None = None
    baseline_commit: str | None = None
    baseline_distance: int | None = None
    env_diff: dict[str, list[Any]] | None = None
    machine_speed: dict[str, float] | None = None
    remeasured: bool = False
    first_pass: Comparison | None = None
    family_size: int | None = None
    holm_p: float | None = None
    #: Who decided: "stored" (the stored baseline) or "ab" (interleaved in this job).
    decided_by: CompareMode | None = None
    #: An interleaved verdict: how many head/base process pairs it pooled.
    process_pairs: int | None = None
    #: The slowdown (a fraction) this comparison's noise would have flagged as a regression
    #: with 80% power: what the test could have caught.
    detectable: float | None = None
    #: When settled in this job: the stored baseline's first pass, and why it was settled.
    stored_pass: Comparison | None = None
    settled_because: str | None = None
    #: Why an undecided stored verdict could not be settled in this job.
    not_settled: str | None = None
    #: A GPU verdict that stood on its quiet evidence, without settling: the part that
    #: decided ("gpu_time": the device time, the GPU's clocks held) and how the exact work
    #: counts agreed with it ("same", "grew", "shrank").
    evidence: dict[str, str] | None = None
    #: An accepted regression: the rule's commit (None: --perf-accept), pattern and reason.
    accepted_by: dict[str, Any] | None = None
    #: Figures particular to how it was measured (samples per side, A/B pairs and looks...).
    details: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: A GPU benchmark's interleaved run: its blocks per side, those flagged (throttled, or
    #: beside another process on the GPU) and set aside, and why (``BlockTally.to_json``).
    gpu_blocks: dict[str, Any] | None = None
    #: The failure message, when the verdict fails the test.
    message: str | None = None
    #: A generation benchmark: the verdict of each judged metric ("ttft", "tpot"); a CUDA
    #: benchmark: its latency ("median") and device time ("gpu_time"). The fields above are
    #: those of the part that decided (the worst verdict).
    parts: dict[str, Comparison] | None = None
    #: The work per call of both sides (the profiled passes'), when both have a profile.
    work: WorkDiff | None = None

    @property
    def bound_level(self) -> float | None:
        """The one-sided confidence of each bound alone."""
        return None if self.ci_level is None else (1.0 + self.ci_level) / 2.0

    @property
    def estimate_beyond(self) -> bool:
        """The point estimate alone is past the threshold (worth a warning when undecided)."""
        if self.ratio is None:
            return False
        if self.metric == "throughput":
            return self.ratio < 1.0 / (1.0 + self.threshold)
        return self.ratio > 1.0 + self.threshold

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        # asdict copies nested comparisons as dicts already; enums become their values.
        data["verdict"] = self.verdict.value
        data["reason"] = None if self.reason is None else self.reason.value
        for nested in NESTED:
            inner = getattr(self, nested)
            data[nested] = None if inner is None else inner.to_json()
        if self.parts is not None:
            data["parts"] = {k: v.to_json() for k, v in self.parts.items()}
        data["work"] = None if self.work is None else self.work.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Comparison:
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["verdict"] = Verdict(values["verdict"])
        if values.get("reason") is not None:
            values["reason"] = Reason(values["reason"])
        if values.get("metric") is not None:
            values["metric"] = Metric(values["metric"])
        if values.get("mode") is not None:
            values["mode"] = CompareMode(values["mode"])
        if values.get("decided_by") is not None:
            values["decided_by"] = CompareMode(values["decided_by"])
        for nested in NESTED:
            if values.get(nested) is not None:
                values[nested] = cls.from_json(values[nested])
        if values.get("parts") is not None:
            values["parts"] = {k: cls.from_json(v) for k, v in values["parts"].items()}
        values["work"] = WorkDiff.from_json(values.get("work"))
        return cls(**values)


@dataclasses.dataclass
class BenchmarkResult:
    """One measurement: what ``infer_bench(...)`` returns and what the JSON stores."""

    nodeid: str
    name: str | None
    backend: str
    samples: list[float]
    stats: dict[str, Any]
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    warmup_samples: list[float] = dataclasses.field(default_factory=list)
    first_call: float | None = None
    block_size: int = 1
    batch_size: int | None = None
    throughput: float | None = None
    memory: dict[str, Any] = dataclasses.field(default_factory=dict)
    decisions: dict[str, Any] = dataclasses.field(default_factory=dict)
    backend_info: dict[str, Any] = dataclasses.field(default_factory=dict)
    env: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Declared key by key in :mod:`.record` (the schema's ``$defs/extra``).
    extra: ResultExtra = dataclasses.field(default_factory=ResultExtra)
    warnings: list[str] = dataclasses.field(default_factory=list)
    #: Machine-speed probes taken while sampling (the drift guard), or None.
    reference: dict[str, Any] | None = None
    comparison: Comparison | None = None
    path: str | None = None
    lineno: int | None = None
    #: A generation benchmark (``infer_bench.generate``): per-metric samples and statistics
    #: (``ttft``, ``tpot``, ``itl``, ``e2e``, ``tokens_per_s``) and the fixed figures
    #: (``prompt_tokens``, ``new_tokens``, ``batch_size``, ``timing_method``). None otherwise.
    generation: dict[str, Any] | None = None
    #: What one call does, from the profiled pass after timing (None: not profiled).
    work: WorkProfile | None = None

    @property
    def key(self) -> str:
        return bench_key(self.nodeid, self.name)

    @property
    def median(self) -> float:
        return float(self.stats["median"])

    @property
    def verdict(self) -> Verdict | None:
        return None if self.comparison is None else self.comparison.verdict

    def __getitem__(self, stat: str) -> Any:
        """``result["p90"]`` reads a statistic."""
        return self.stats[stat]

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["comparison"] = None if self.comparison is None else self.comparison.to_json()
        data["key"] = self.key
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BenchmarkResult:
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        if values.get("comparison") is not None:
            values["comparison"] = Comparison.from_json(values["comparison"])
        values["work"] = WorkProfile.from_json(values.get("work"))
        return cls(**values)


def verdict_of(entry: Mapping[str, Any]) -> Verdict | None:
    """A results document's benchmark entry's verdict (None: not compared, or a verdict
    this version does not know): what every reader of a document counts by."""
    data = entry.get("comparison")
    if not isinstance(data, Mapping):
        return None
    try:
        return Verdict(data.get("verdict"))
    except ValueError:
        return None


def verdict_counts(entries: Iterable[Mapping[str, Any]]) -> dict[Verdict, int]:
    """How many of a document's benchmarks got each verdict (the uncompared left out)."""
    counts: dict[Verdict, int] = {}
    for entry in entries:
        if (v := verdict_of(entry)) is not None:
            counts[v] = counts.get(v, 0) + 1
    return counts


def memory_figure(memory: Mapping[str, Any]) -> float | None:
    """The memory number a row shows and a memory comparison uses: CUDA peak allocated when
    the model ran on a GPU, else RSS growth over the timed region."""
    if memory.get("cuda_max_allocated_bytes") is not None:
        return float(memory["cuda_max_allocated_bytes"])
    if memory.get("rss_growth_bytes") is not None:
        return float(memory["rss_growth_bytes"])
    return None


def bench_key(nodeid: str, name: str | None) -> str:
    """The identity of a benchmark across runs: the test's node id, plus ``#name`` for the
    extra measurements of a test."""
    return nodeid if not name else f"{nodeid}#{name}"


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def clean(value: Any, digits: int = FLOAT_DIGITS) -> Any:
    """JSON-safe and stable: non-finite floats become None, floats keep ``digits``
    significant digits (12; a compacted baseline keeps 6)."""
    if isinstance(value, enum.Enum):
        return clean(value.value, digits)
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {str(k): clean(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v, digits) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return clean(value.item(), digits)
    return str(value)


def document(
    benchmarks: Iterable[BenchmarkResult | dict[str, Any]],
    environment: dict[str, Any],
    commit: dict[str, Any] | None,
    **extra: Any,
) -> dict[str, Any]:
    """The results document: ``{"schema_version", "created", "environment", "commit",
    "benchmarks": [...]}`` plus any top-level ``extra`` (mode, reference, comparison...)."""
    entries = [b.to_json() if isinstance(b, BenchmarkResult) else dict(b) for b in benchmarks]
    entries.sort(key=lambda e: str(e.get("key") or bench_key(e["nodeid"], e.get("name"))))
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "created": now_iso(),
        "environment": environment,
        "commit": commit,
        "benchmarks": entries,
    }
    doc.update(extra)
    return doc


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(clean(doc), sort_keys=True, indent=1, allow_nan=False) + "\n"
