"""The facts the comparing policy (:mod:`pytest_infperf.judge.policy`) reads, gathered
from the session, the stored baseline and a benchmark's measurement. The stored mode
(:mod:`.modes`) asks the policy with them and acts on its answer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..judge import policy

if TYPE_CHECKING:
    from ..ab.workers import BaseCall
    from ..core.budget import Spare
    from ..core.results import WorkProfile
    from ..measure.call import BenchCall
    from .context import RunContext


def session_facts(
    context: RunContext, unsettled: str | None, misread: bool, budget: Spare | None, family: int
) -> policy.Facts:
    """What the policy needs of the session: the same for every benchmark (``unsettled``:
    why settling cannot happen now, for this session or the benchmark being measured)."""
    source, s = context.source, context.settings
    assert source is not None
    return policy.Facts(
        settle=s.settle,
        commit=source.origin == "commit" and bool(source.sha),
        unsettled=unsettled,
        comparable=not source.env_diff,
        env_changed=bool(source.env_diff),
        guard_adjusts=s.drift_guard == "adjust",
        moved=_moved(context),
        faster=_faster_now(context),
        misread=misread,
        budget=budget,
        family=family,
        run_alpha=s.run_alpha,
    )


def base_call_reason(paired: BaseCall) -> str:
    """Why a benchmark's baseline side gave no samples: its test failed there, or is not
    there."""
    if paired.status == "failed":
        return f"the test failed at the baseline's commit: {paired.error}"
    from ..report.messages import NO_SUCH_TEST

    return NO_SUCH_TEST


def env_reason(env_diff: dict[str, list[Any]]) -> str:
    from ..measure import environment

    return (
        "the baseline commit's code runs in a different environment here: "
        f"{environment.describe_diff(env_diff)}"
    )


def _moved(context: RunContext) -> bool:
    drift = context.drift()
    return bool(drift and drift.get("drifted"))


def _faster_now(context: RunContext) -> float:
    """How much faster the machine runs now than at the baseline's run, by the
    session-start reference (1.0: not faster, or not known)."""
    drift = context.drift() or {}
    ratios = [float(drift[k]) for k in ("gemm_ratio", "python_ratio") if drift.get(k)]
    return max([1.0, *(1.0 / r for r in ratios if r > 0)])


def comparable(context: RunContext, call: BenchCall) -> tuple[bool, bool]:
    """Whether the stored baseline can judge this benchmark (it has an entry from a
    comparable environment: else its verdict is no-baseline or incomparable, whatever this
    machine's state), and whether it has one from another environment (the run's, or the
    call's own: a thread count, a dtype)."""
    from ..core.results import bench_key
    from ..measure import environment

    source = context.source
    assert source is not None
    entry = source.entries.get(bench_key(call.nodeid, call.name))
    if entry is None:
        return False, False
    moved = bool(source.env_diff) or bool(
        environment.diff(dict(call.prepared.env), dict(entry.get("env") or {}))
    )
    return not moved, moved


def witness(context: RunContext, call: BenchCall) -> WorkProfile | None:
    """What a stored baseline of the base commit counted for this call, where it can
    witness the base side's code: saved on this environment, the call's own settings the
    same. Settling's stored baseline is of that commit; for ``--perf-ab`` the base commit's
    baseline is read from the store if one was saved."""
    from ..core.results import bench_key
    from ..judge.device import work_of
    from ..measure import environment

    source = context.source
    if source is None or source.env_diff or source.dirty:
        return None
    entry = baseline_entries(context).get(bench_key(call.nodeid, call.name))
    if entry is None or environment.diff(dict(call.prepared.env), dict(entry.get("env") or {})):
        return None
    return work_of(entry)


def baseline_entries(context: RunContext) -> dict[str, dict[str, Any]]:
    """The stored baseline's entries of the commit compared with: ``--perf-compare``'s, or
    for ``--perf-ab`` the base commit's where one was saved on this environment (read on
    first need); none where nothing is compared."""
    source = context.source
    if source is None:
        return {}
    if source.origin == "ab":
        if source.witness is None:
            source.witness = _stored_of(context, source.sha)
        return source.witness
    return source.entries


def family(context: RunContext, nodeids: Iterable[str]) -> int:
    """How many claims the run's perf tests make, the family its multiplicity is controlled
    over: a test counts as many benchmarks as the baseline holds of it (one that calls
    ``infer_bench`` several times with ``name=`` makes several claims), one where it holds
    none (a new test, or no baseline: then its calls are not known before it runs, and one
    that makes more is held at its end: :func:`~pytest_infperf.core.family.of_test`)."""
    held = counted(context)
    return sum(max(1, held[nodeid]) for nodeid in nodeids)


def counted(context: RunContext) -> Counter[str]:
    """How many benchmarks the baseline holds of each test (node id)."""
    return Counter(str(e.get("nodeid")) for e in baseline_entries(context).values())


def _stored_of(context: RunContext, sha: str | None) -> dict[str, dict[str, Any]]:
    """The entries of the baseline stored for ``sha`` on this machine's environment."""
    from ..measure import environment
    from ..measure import gpu as _gpu
    from ..store.baselines import BaselineFileError, BaselineStore, iter_entries

    s = context.settings
    store = BaselineStore(s.baselines, s.max_baseline_bytes)
    key = context.env_key or environment.env_key(environment.hard_fields(_gpu.snapshot()))
    try:
        path = store.path_for(key, sha) if sha else None
        if path is None or not path.is_file():
            return {}
        doc = store.load(path)
    except (BaselineFileError, OSError, ValueError):
        return {}
    if (doc.get("commit") or {}).get("dirty"):  # saved from other code than its commit's
        return {}
    return dict(iter_entries(doc))
