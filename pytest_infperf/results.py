"""Benchmark results and the versioned JSON document that carries them.

One schema serves ``--perf-json`` artifacts and stored baselines (a baseline file is the
results document of one commit), so ``--perf-compare`` accepts either. Serialisation is
deterministic (sorted keys, 12 significant digits, one benchmark list sorted by key) so
that baselines diff well in git.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
from collections.abc import Iterable
from typing import Any

SCHEMA_VERSION = 1
#: Significant digits kept for floats: sub-picosecond detail of a timing is noise.
FLOAT_DIGITS = 12


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
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)
    #: Machine-speed probes taken while sampling (the drift guard), or None.
    reference: dict[str, Any] | None = None
    comparison: dict[str, Any] | None = None
    path: str | None = None
    lineno: int | None = None

    @property
    def key(self) -> str:
        return bench_key(self.nodeid, self.name)

    @property
    def median(self) -> float:
        return float(self.stats["median"])

    @property
    def verdict(self) -> str | None:
        return None if self.comparison is None else str(self.comparison["verdict"])

    def __getitem__(self, stat: str) -> Any:
        """``result["p90"]`` reads a statistic."""
        return self.stats[stat]

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["key"] = self.key
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchmarkResult:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def bench_key(nodeid: str, name: str | None) -> str:
    """The identity of a benchmark across runs: the test's node id, plus ``#name`` for the
    extra measurements of a test."""
    return nodeid if not name else f"{nodeid}#{name}"


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def clean(value: Any) -> Any:
    """JSON-safe and stable: non-finite floats become None, floats keep 12 digits."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return float(f"{value:.{FLOAT_DIGITS}g}")
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return clean(value.item())
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
