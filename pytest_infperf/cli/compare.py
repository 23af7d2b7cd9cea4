"""``infperf compare A B``: B against baseline A, judged by the plugin's own judge, and
said with the plugin's table; what two stored runs cannot show is not claimed."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..report.fmt import fit
from . import documents as _docs

if TYPE_CHECKING:
    from ..core.options import BenchOptions
    from ..core.results import BenchmarkResult, Origin
    from ..judge.judge import Judge
    from ..judge.policy import Facts


def say_summary(doc: dict[str, Any], who: str) -> None:
    compact = sum(1 for e in doc["benchmarks"] if e.get("compact"))
    if compact:
        print(
            fit(
                f"{who}working from a summary: {compact} of {len(doc['benchmarks'])} benchmarks "
                f"keep quantiles of their raw samples, not the samples (compacted "
                f"{str(doc.get('compacted') or 'by infperf prune --keep-raw')[:19]})"
            )
        )


def judged(
    base: dict[str, Any], head: dict[str, Any], opts: Any, name: str
) -> tuple[list[Any], dict[str, list[str]], dict[str, Any], str | None]:
    """``head``'s benchmarks judged against ``base`` (named ``name``) by the plugin's own
    judge and gate, as `infperf compare` and `infperf report --compare` say them: the
    results with their comparisons, each failing one's failures, how the environments
    differ, and the baseline's commit."""
    from ..core.names import CompareMode
    from ..core.results import Origin
    from ..judge import policy
    from ..judge.judge import Judge
    from ..judge.rules import Policy
    from ..measure import environment
    from ..session.gate import Gate

    base_entries = {r.key: r.to_json() for r in _docs.results(base)}
    env_diff = environment.diff(
        head["environment"].get("hard", {}), base["environment"].get("hard", {})
    )
    results = _docs.results(head)
    base_commit = (base.get("commit") or {}).get("sha")
    origin = Origin(CompareMode.STORED, base_commit, None, f"{name} ({str(base_commit)[:10]})")
    # No re-measuring or settling here (stored documents only): the live run's policy
    # decides what stands, and each claim is held over the compared benchmarks as one pass
    # (Bonferroni), as the plugin holds a stored one. The drift guard reads the two runs'
    # own probes: how the machine moved between them, not since. A run without probes (a
    # plain run) cannot say it moved, so no change is claimed from it.
    judge = Judge(Policy(unreferenced=True), family=len(results))
    judge.host_moved(_python_ratio(head, base))
    gate = Gate(judge.policy)
    failed: dict[str, list[str]] = {}
    for r in results:
        facts = facts_of(judge, r, base_entries.get(r.key), opts, origin, env_diff)
        assert facts.stored is not None
        r.comparison = judge.stands(facts.stored, policy.after_stored(facts))
        judge.learn_stored(facts.stored, r.comparison)
        if failures := gate.apply(r):
            failed[r.key] = failures
    return results, failed, env_diff, base_commit


def run(args: argparse.Namespace) -> int:
    """B against A (A is the baseline), judged by the plugin's own judge."""
    from ..core.options import BenchOptions
    from ..core.results import Verdict
    from ..report.markdown import render
    from ..report.notices import host_ungated, undetectable
    from ..report.text import generation_lines, summary_lines, work_lines

    base, head = _docs.load(args.a, args), _docs.load(args.b, args)
    say_summary(base, f"baseline {args.a}: ")
    say_summary(head, f"{args.b}: ")
    opts = BenchOptions(threshold=args.threshold, alpha=args.alpha, metric=args.metric)
    results, failed, env_diff, base_commit = judged(base, head, opts, args.a)
    # The tables fit by their own layout; a work line is prose, wrapped to the terminal.
    for line in summary_lines(results) + generation_lines(results):
        print(line)
    for line in work_lines(results):
        print(fit(line))
    if env_diff:
        print(fit("environments differ: " + ", ".join(sorted(env_diff))))
    blind = [line for line in (undetectable(results), host_ungated(results)) if line]
    if args.markdown:
        source = {"ref": args.a, "origin": "file", "path": args.a}
        Path(args.markdown).write_text(render(results, source=source, warnings=blind))
    _say_withheld(results, base_commit)
    for line in blind:
        print(fit(line))
    for failures in failed.values():
        print("\n".join(failures))
    regressions = [r for r in results if r.verdict is Verdict.REGRESSION]
    if regressions:
        print(fit(f"{len(regressions)} regression(s): " + ", ".join(r.key for r in regressions)))
    more = sorted(set(failed) - {r.key for r in regressions})
    if more:
        print(fit(f"{len(more)} failed on their work (max_work_increase): " + ", ".join(more)))
    return 1 if failed or not _whole(args, head, results) else 0


def facts_of(
    judge: Judge,
    r: BenchmarkResult,
    entry: dict[str, Any] | None,
    opts: BenchOptions,
    origin: Origin,
    env_diff: dict[str, list[Any]],
) -> Facts:
    """B's benchmark against A's entry: the facts the live run's policy decides it on (its
    stored verdict among them), where nothing can be settled or re-measured."""
    from ..judge import policy, work
    from ..judge.device import clocks_held, work_of
    from ..measure.backends import runs_on_gpu

    c = judge.stored(r, entry, opts, origin, env_diff)
    c = work.attach(c, r.work, None if entry is None else work_of(entry))
    gpu = runs_on_gpu(r.env)
    return policy.Facts(
        domain="gpu" if gpu else "cpu",
        commit=False,
        metric=str(opts.metric),
        remeasure=0,
        family=judge.family,
        run_alpha=judge.policy.run_alpha,
        stored=c,
        clocks_held=clocks_held(r, entry),
        host_ungated=judge.host_ungated(opts) if gpu else None,
    )


def _python_ratio(head: dict[str, Any], base: dict[str, Any]) -> float | None:
    """The session-start reference's Python loop of B over A's (None: a side has none)."""
    now = (head.get("reference") or {}).get("python_s")
    then = (base.get("reference") or {}).get("python_s")
    if not isinstance(now, int | float) or not isinstance(then, int | float) or then <= 0:
        return None
    return float(now) / float(then) if now > 0 else None


def _say_withheld(results: list[Any], base_commit: str | None) -> None:
    """Once: which verdicts the two documents could not stand behind, and the command that
    would settle them on this machine (both sides measured now, interleaved)."""
    from ..core.results import Reason

    held = [r for r in results if r.comparison and r.comparison.reason is Reason.DRIFT_WITHHELD]
    if not held:
        return
    names = ", ".join(r.key for r in held)
    print(fit(f"{len(held)} verdict(s) withheld, cannot tell (inconclusive): {names}"))
    print(
        fit(
            "  the machine's speed is unknown or moved between the two runs: a change of the "
            "code, or its absence, cannot be told from it (grown work counts can, and are said)"
        )
    )
    if base_commit:
        nodes = shlex.join(dict.fromkeys(r.nodeid for r in held))
        print(
            fit(
                "to settle them here, in a checkout of the second run's code, both commits "
                f"measured interleaved: pytest {nodes} --perf-ab={base_commit[:12]}"
            )
        )
    else:
        print("to settle them: measure both versions interleaved (pytest ... --perf-ab=REF)")


def _whole(args: argparse.Namespace, head: dict[str, Any], results: list[Any]) -> bool:
    """Whether B's verdicts can gate: a CI step that gates on `compare` must not pass a run
    that stopped part-way, or one that shares no benchmark with A (the wrong file)."""
    from ..core.outcome import UNMARKED, compared_nothing, incomplete

    why = incomplete(head)
    if why is not None and why != UNMARKED:  # a baseline (no `run` record) is whole
        print(fit(f"FAILED: {args.b} is from a run that did not complete ({why})"))
        return False
    if compared_nothing(results):
        print(fit(f"FAILED: compared nothing: {args.a} has none of the benchmarks of {args.b}"))
        return False
    return True
