"""Results in the formats of tools users already run.

- github-action-benchmark, ``tool: customSmallerIsBetter``: a list of
  ``{"name", "unit", "value", "range", "extra"}``; the value is the median in ms.
- Bencher Metric Format (BMF): ``{benchmark: {measure: {"value", "lower_value",
  "upper_value"}}}`` with Bencher's built-in measures ``latency`` (nanoseconds) and
  ``throughput`` (items per second); the bounds are the 95% CI of the median.
"""

from __future__ import annotations

from typing import Any

from .baselines import iter_entries

FORMATS = ("github-action-benchmark", "bencher")


def github_action_benchmark(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, entry in iter_entries(doc):
        s = entry["stats"]
        half = (s["ci_high"] - s["ci_low"]) / 2 * 1e3
        extra = [f"n={s['n']}", f"p90={s['p90'] * 1e3:.4g} ms", f"backend={entry['backend']}"]
        if entry.get("throughput"):
            extra.append(f"throughput={entry['throughput']:.4g}/s")
        out.append(
            {
                "name": key,
                "unit": "ms",
                "value": round(s["median"] * 1e3, 6),
                "range": f"±{half:.4g}",
                "extra": ", ".join(extra),
            }
        )
    return out


def bencher(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for key, entry in iter_entries(doc):
        s = entry["stats"]
        metrics: dict[str, Any] = {
            "latency": {
                "value": s["median"] * 1e9,
                "lower_value": s["ci_low"] * 1e9,
                "upper_value": s["ci_high"] * 1e9,
            }
        }
        batch = entry.get("batch_size")
        if entry.get("throughput") and batch:
            metrics["throughput"] = {
                "value": entry["throughput"],
                "lower_value": batch / s["ci_high"],
                "upper_value": batch / s["ci_low"],
            }
        out[key] = metrics
    return out


def export(doc: dict[str, Any], fmt: str) -> Any:
    if fmt == "github-action-benchmark":
        return github_action_benchmark(doc)
    if fmt == "bencher":
        return bencher(doc)
    raise ValueError(f"unknown export format {fmt!r}; expected one of {', '.join(FORMATS)}")
