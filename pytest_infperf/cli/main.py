"""The ``infperf`` command (also ``python -m pytest_infperf``).

Exit codes: 0 success, 1 a regression (``compare``), 2 bad usage or an error that names
its cause (missing file, not a repository, push rejected...), 141 when the reader of its
output went away (`infperf list | head`).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.options import SPECS, option_type
from ..measure.backends import BackendError
from ..store.baselines import BaselineFileError, BaselineStore
from ..store.git import GitError
from . import action, bisect, ci, scaffold, steps

#: The retention the docs recommend: raw samples for the newest 50 baselines of each
#: environment (a comparison finds its baseline among them), summaries for the rest.
DEFAULT_KEEP_RAW = 50


class CLIError(Exception):
    """A problem with the command's arguments; printed, exit code 2."""


def _root(args: argparse.Namespace) -> Path:
    return Path(args.repo).resolve()


def _store(args: argparse.Namespace) -> BaselineStore:
    folder = Path(args.dir)
    return BaselineStore(folder if folder.is_absolute() else _root(args) / folder)


def _current_env() -> str:
    from ..measure import environment, gpu

    return environment.env_key(environment.hard_fields(gpu.snapshot()))


def _load(spec: str, args: argparse.Namespace) -> dict[str, Any]:
    """A document from a JSON path, or the baseline of a commit (sha, prefix or ref), found
    by the store's resolver, as ``--perf-compare`` finds it."""
    from ..store.resolve import CompareError, document

    store = _store(args)
    # A file needs no environment; a commit is read in --env's, else this machine's.
    env = "" if _is_file(spec) else (args.env or _pick_env(store))
    try:
        doc, note = document(
            spec, rootdir=_root(args), store=store, env_key=env, depth=_search_depth()
        )
    except CompareError as exc:
        raise CLIError(str(exc)) from None
    if note:
        print(note, file=sys.stderr)
    return doc


def _is_file(spec: str) -> bool:
    return spec.endswith(".json") or Path(spec).is_file()


def _branch_name(ref: str, args: argparse.Namespace) -> str:
    """What a heading should call ``ref``: HEAD's branch when it is on one."""
    from ..store import git as gitinfo

    if ref not in ("HEAD", "@"):
        return ref
    try:
        branch = gitinfo.head(gitinfo.open_repo(_root(args))).branch
    except GitError:
        return ref
    return f"{branch} (HEAD)" if branch else ref


def _search_depth() -> int:
    """The plugin's default ``search_depth``: the CLI walks as far as it does."""
    from ..core.session_table import SETTINGS

    return int(SETTINGS["search_depth"].default)


def _pick_env(store: BaselineStore) -> str:
    """The environment to read when ``--env`` is not given: this machine's, else the only
    one stored (:func:`~pytest_infperf.store.history.choose_env`)."""
    from ..store.history import choose_env

    env = choose_env(store, None, _current_env())
    if env is None:
        raise CLIError(f"no baselines in {store.root}")
    return env


def _results(doc: dict[str, Any]) -> list[Any]:
    from ..core.results import BenchmarkResult

    return [BenchmarkResult.from_json(e) for e in doc["benchmarks"]]


def _list(args: argparse.Namespace) -> int:
    from ..store.index import StoreIndex

    store = _store(args)
    keys = [args.env] if args.env else store.env_keys()
    if not keys:
        print(f"no baselines in {store.root}")
        return 0
    current = _current_env()
    # Headers from the index: a file is read only when it changed since the last look.
    with StoreIndex.open(store) as index:
        for key in keys:
            headers = index.headers(key)
            mark = "  (this machine)" if key == current else ""
            compact = sum(h.compact for h in headers)
            held = f", {compact} compacted" if compact else ""
            print(f"{key}{mark}: {len(headers)} commit(s){held}")
            for h in headers:
                if h.problem:
                    print(f"  {h.sha[:10]}  DAMAGED: {h.problem}")
                    continue
                dirty = " (dirty)" if h.dirty else ""
                tag = "  [summary]" if h.compact else ""
                print(
                    f"  {h.sha[:10]}  {h.benchmarks:4d} benchmarks  "
                    f"{str(h.time or h.created)[:19]}  {str(h.subject or '')[:50]}{dirty}{tag}"
                )
    return 0


def _show(args: argparse.Namespace) -> int:
    from ..report.text import generation_lines, profile_lines, summary_lines

    doc = _load(args.commit, args)
    commit = doc.get("commit") or {}
    print(f"commit {commit.get('sha')}  environment {doc['environment'].get('key')}")
    _say_summary(doc, "")
    results = _results(doc)
    for line in summary_lines(results) + generation_lines(results) + profile_lines(results):
        print(line)
    return 0


def _say_summary(doc: dict[str, Any], who: str) -> None:
    compact = sum(1 for e in doc["benchmarks"] if e.get("compact"))
    if compact:
        print(
            f"{who}working from a summary: {compact} of {len(doc['benchmarks'])} benchmarks "
            f"keep quantiles of their raw samples, not the samples (compacted "
            f"{str(doc.get('compacted') or 'by infperf prune --keep-raw')[:19]})"
        )


def _compare(args: argparse.Namespace) -> int:
    """B against A (A is the baseline), judged by the plugin's own judge."""
    from ..core.names import CompareMode
    from ..core.options import BenchOptions
    from ..core.results import Origin, Verdict
    from ..judge import work
    from ..judge.device import work_of
    from ..judge.judge import Judge, Policy
    from ..measure import environment
    from ..report.markdown import render
    from ..report.text import generation_lines, summary_lines, work_lines
    from ..session.gate import Gate

    base, head = _load(args.a, args), _load(args.b, args)
    _say_summary(base, f"baseline {args.a}: ")
    _say_summary(head, f"{args.b}: ")
    base_entries = {r.key: r.to_json() for r in _results(base)}
    env_diff = environment.diff(
        head["environment"].get("hard", {}), base["environment"].get("hard", {})
    )
    results = _results(head)
    opts = BenchOptions(threshold=args.threshold, alpha=args.alpha, metric=args.metric)
    base_commit = (base.get("commit") or {}).get("sha")
    origin = Origin(CompareMode.STORED, base_commit, None, f"{args.a} ({str(base_commit)[:10]})")
    # No re-measuring here (stored documents only), so no Holm family. The drift guard
    # reads the two runs' own probes: how the machine moved between them, not since. A run
    # without probes (a plain run) cannot say it moved, so no change is claimed from it.
    judge = Judge(Policy(unreferenced=True))
    gate = Gate(judge.policy)
    failed: dict[str, list[str]] = {}
    for r in results:
        entry = base_entries.get(r.key)
        c = judge.stored(r, entry, opts, origin, env_diff)
        r.comparison = work.attach(c, r.work, None if entry is None else work_of(entry))
        if failures := gate.apply(r):
            failed[r.key] = failures
    for line in summary_lines(results) + generation_lines(results) + work_lines(results):
        print(line)
    if env_diff:
        print("environments differ: " + ", ".join(sorted(env_diff)))
    if args.markdown:
        source = {"ref": args.a, "origin": "file", "path": args.a}
        Path(args.markdown).write_text(render(results, source=source))
    _say_withheld(results, base_commit)
    for failures in failed.values():
        print("\n".join(failures))
    regressions = [r for r in results if r.verdict is Verdict.REGRESSION]
    if regressions:
        print(f"{len(regressions)} regression(s): " + ", ".join(r.key for r in regressions))
    more = sorted(set(failed) - {r.key for r in regressions})
    if more:
        print(f"{len(more)} failed on their work (max_work_increase): " + ", ".join(more))
    return 1 if failed or not _whole(args, head, results) else 0


def _say_withheld(results: list[Any], base_commit: str | None) -> None:
    """Once: which verdicts the two documents could not stand behind, and the command that
    would settle them on this machine (both sides measured now, interleaved)."""
    from ..core.results import Reason

    held = [r for r in results if r.comparison and r.comparison.reason is Reason.DRIFT_WITHHELD]
    if not held:
        return
    names = ", ".join(r.key for r in held)
    print(
        f"{len(held)} change(s) not claimed (inconclusive): {names}: the machine's speed is "
        "unknown or moved between the two runs, so their difference is not the code's"
    )
    if base_commit:
        nodes = " ".join(dict.fromkeys(r.nodeid for r in held))
        print(f"to settle them here, both commits measured interleaved: pytest {nodes} "
              f"--perf-ab={base_commit[:12]}")  # fmt: skip
    else:
        print("to settle them: measure both versions interleaved (pytest ... --perf-ab=REF)")


def _whole(args: argparse.Namespace, head: dict[str, Any], results: list[Any]) -> bool:
    """Whether B's verdicts can gate: a CI step that gates on `compare` must not pass a run
    that stopped part-way, or one that shares no benchmark with A (the wrong file)."""
    from ..core.outcome import UNMARKED, incomplete
    from ..judge.judge import compared_nothing

    why = incomplete(head)
    if why is not None and why != UNMARKED:  # a baseline (no `run` record) is whole
        print(f"FAILED: {args.b} is from a run that did not complete ({why})")
        return False
    if compared_nothing(results):
        print(f"FAILED: compared nothing: {args.a} has none of the benchmarks of {args.b}")
        return False
    return True


def _history(args: argparse.Namespace) -> int:
    from ..report.fmt import fmt_time
    from ..store.history import (
        bisect_command,
        changes,
        choose_env,
        first_parent_history,
        iter_series,
    )

    store = _store(args)
    env = choose_env(store, args.env, _current_env())
    if env is None:
        raise CLIError(f"no baselines in {store.root}" + (f" for {args.env}" if args.env else ""))
    shas = first_parent_history(_root(args), args.ref, args.depth)
    problems: list[str] = []
    print(f"environment {env}; {len(shas)} first-parent commits of {args.ref}")
    for s in iter_series(store, env, shas, args.k, problems):  # one benchmark at a time
        changes(s, args.p, args.min_change)
        print(f"\n{s.key}")
        change_at = {c.index: c for c in s.changes}
        for i, p in enumerate(s.points):
            mark = ""
            if i in change_at:
                c = change_at[i]
                mark = f"  <-- change {c.ratio - 1:+.1%} (p={c.p_value:.1e})"
            print(
                f"  {p.sha[:10]}  {fmt_time(p.median):>9}  n={p.n:<5} "
                f"{str(p.subject or '')[:40]}{mark}"
            )
            command = bisect_command(s, change_at[i]) if i in change_at else None
            if command:
                print(f"    find it: {command}")
    for problem in problems:
        print(f"warning: skipped {problem}", file=sys.stderr)
    return 0


def _report(args: argparse.Namespace) -> int:
    from ..report.html import build
    from ..store.history import changes, choose_env, first_parent_history, iter_series

    results = _load(args.results, args) if args.results else None
    baseline = _load(args.compare, args) if args.compare else None
    if results is None and baseline is None:
        # Nothing named: HEAD's nearest baseline (as --perf-compare=HEAD would find it).
        try:
            results = _load("HEAD", args)
        except (CLIError, GitError, BaselineFileError) as exc:
            print(f"note: no baseline near HEAD to show ({exc}); history only", file=sys.stderr)
    history: Any = {}  # a dict, or a stream of series from the index
    store = _store(args)
    env = choose_env(
        store, args.env, (results or {}).get("environment", {}).get("key") or _current_env()
    )
    if env is not None and not args.no_history:
        try:
            shas = first_parent_history(_root(args), args.ref, args.depth)
        except GitError as exc:
            print(f"warning: no history ({exc})", file=sys.stderr)
            shas = []
        history = (changes(s) for s in iter_series(store, env, shas, args.k))
    png = Path(args.png) if args.png else None
    text, figures = build(results, baseline, history, png, along=_branch_name(args.ref, args))
    if args.html:
        Path(args.html).write_text(text, encoding="utf-8")
        print(f"wrote {args.html}")
    if args.png:
        print(f"wrote {figures} PNG(s) to {args.png}" if figures else "no figures to write yet")
    return 0


def _prune(args: argparse.Namespace) -> int:
    from ..store import git as gitinfo
    from ..store.index import StoreIndex

    if args.keep is None and args.keep_raw is None:
        raise CLIError(
            "prune needs --keep N (remove all but the newest N baselines per environment) "
            "and/or --keep-raw N (compact all but the newest N to summaries)"
        )
    for flag, value in (("--keep", args.keep), ("--keep-raw", args.keep_raw)):
        if value is not None and value < 1:
            raise CLIError(f"{flag} must be at least 1 (got {value})")
    store = _store(args)
    keys = [args.env] if args.env else store.env_keys()
    try:
        repo = gitinfo.open_repo(_root(args))
        order = {
            sha: i
            for i, sha in enumerate(gitinfo.first_parents(repo, gitinfo.head_sha(repo), 100_000))
        }
    except GitError:
        order = {}
    verb = "would remove" if args.dry_run else "removed"
    removed = compacted = saved = 0
    for key in keys:
        # Newest first: by position in HEAD's history, then (commits not in it) by file age.
        ranked = sorted(store.commits(key), key=functools.partial(_age, store, key, order=order))
        doomed = ranked[args.keep :] if args.keep is not None else []
        for sha in doomed:
            print(f"{verb} {store.path_for(key, sha)}")
        if doomed and not args.dry_run:
            store.remove(key, doomed)  # under the savers' lock, and remembered as pruned
        removed += len(doomed)
        kept = ranked[: args.keep] if args.keep is not None else ranked
        if args.keep_raw is None:
            continue
        with StoreIndex.open(store) as index:  # which are compact already, without reading
            already = {h.sha for h in index.headers(key) if h.compact}
        for sha in kept[args.keep_raw :]:
            if sha in already:
                continue
            if args.dry_run:
                compacted += 1
                continue
            try:
                gain = store.compact(key, sha)
            except BaselineFileError as exc:
                print(f"skipped {exc}", file=sys.stderr)
                continue
            if gain:
                compacted += 1
                saved += gain
    what = f"{removed} baseline file(s) {'to remove' if args.dry_run else 'removed'}"
    if args.keep is not None:
        what += f"; kept the newest {args.keep} per environment"
    if args.keep_raw is not None:
        done = "to compact" if args.dry_run else f"compacted ({saved / 2**20:.1f} MiB saved)"
        what += (
            f"; {compacted} {done}, raw samples kept for the newest {args.keep_raw} per environment"
        )
    print(what)
    return 0


def _age(store: BaselineStore, key: str, sha: str, *, order: dict[str, int]) -> tuple[int, float]:
    if sha in order:
        return (order[sha], 0.0)
    try:
        return (len(order) + 1, -store.path_for(key, sha).stat().st_mtime)
    except OSError:
        return (len(order) + 2, 0.0)


def _export(args: argparse.Namespace) -> int:
    import json

    from ..store.exports import export

    data = export(_load(args.results, args), args.format)
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if args.output:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def _wanted(root: Path, args: argparse.Namespace) -> set[str] | None:
    """``pull --depth N``: the newest N first-parent commits of each ``--ref``."""
    from ..store import git as gitinfo

    if args.depth is None:
        if args.ref:
            raise CLIError("--ref goes with --depth N (the commits whose baselines to pull)")
        return None
    if args.depth < 1:
        raise CLIError(f"--depth must be at least 1 (got {args.depth})")
    repo = gitinfo.open_repo(root)
    wanted: set[str] = set()
    for ref in args.ref or ["HEAD"]:
        wanted.update(gitinfo.first_parents(repo, gitinfo.resolve(repo, ref), args.depth - 1))
    return wanted


def _baselines(args: argparse.Namespace) -> int:
    from ..store import data_branch as branch

    root = Path(args.repo).resolve()
    folder = Path(args.dir) if Path(args.dir).is_absolute() else root / args.dir
    if args.action == "pull":
        if args.squash:
            raise CLIError("--squash is for push (it rewrites the branch)")
        branch.pull(root, folder, args.remote, args.branch, only=_wanted(root, args))
    else:
        branch.push(
            root, folder, args.remote, args.branch, attempts=args.attempts, squash=args.squash
        )
    return 0


def _common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument(
        "--dir",
        default="baselines",
        help="baselines folder, relative to the repository (default baselines)",
    )
    p.add_argument("--repo", default=".", help="path inside the repository (default .)")
    p.add_argument(
        "--env",
        default=None,
        help="environment key (default: this machine's, else the most used)",
    )
    return p


def _add_baselines(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """infperf baselines pull|push."""
    from ..store import data_branch as branch

    bl = sub.add_parser(
        "baselines",
        help="keep baselines on a dedicated git branch",
        description=branch.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bl.add_argument(
        "action",
        choices=("pull", "push"),
        help="pull: branch -> baselines folder; push: folder -> branch",
    )
    bl.add_argument(
        "--branch",
        default="infperf-baselines",
        help="the branch that holds the baselines (default infperf-baselines)",
    )
    bl.add_argument(
        "--remote", default="origin", help="the remote the branch is on (default origin)"
    )
    bl.add_argument(
        "--dir",
        default="baselines",
        help="baselines folder, relative to the repository (default baselines)",
    )
    bl.add_argument("--repo", default=".", help="path inside the repository (default .)")
    bl.add_argument(
        "--attempts",
        type=int,
        default=6,
        help="push: tries when another job pushes first (default 6)",
    )
    bl.add_argument(
        "--depth",
        type=int,
        default=None,
        help="pull: only the baselines of the newest N first-parent commits of each --ref "
        "(a comparing job needs the recent ones; default: all)",
    )
    bl.add_argument(
        "--ref",
        action="append",
        default=None,
        help="pull --depth: whose history (repeatable; default HEAD; in a pull request add "
        "the base branch, e.g. --ref origin/main)",
    )
    bl.add_argument(
        "--squash",
        action="store_true",
        help="push: replace the branch's history by one commit holding what it holds now "
        "(after infperf prune, so the packed branch shrinks); safe against a concurrent push",
    )
    bl.set_defaults(func=_baselines)


def _add_reading(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """infperf list, show and compare."""
    _common(sub.add_parser("list", help="stored baselines by environment and commit")).set_defaults(
        func=_list
    )
    show = _common(sub.add_parser("show", help="one commit's (or JSON file's) benchmarks"))
    show.add_argument("commit", help="sha, prefix, ref, or a results/baseline JSON file")
    show.set_defaults(func=_show)
    cmp = _common(sub.add_parser("compare", help="B against baseline A; exit 1 on regression"))
    cmp.add_argument("a", help="baseline: commit, ref or JSON file")
    cmp.add_argument("b", help="current: commit, ref or JSON file")
    # The plugin's own parsers: a value the plugin refuses is refused here too.
    # The plugin's options, from the same table (help, default, parser).
    for name in ("threshold", "alpha", "metric"):
        spec = SPECS[name]
        cmp.add_argument(
            f"--{name}",
            metavar=spec.flag,
            type=option_type(name, f"--{name}"),
            default=spec.default,
            help=spec.describe(),
        )
    cmp.add_argument("--markdown", help="also write a Markdown report here")
    cmp.set_defaults(func=_compare)


def _add_history(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """infperf history and report."""
    from ..stats.changepoint import MIN_MAGNITUDE, P_MAX

    hist = _common(
        sub.add_parser("history", help="benchmarks along first-parent history, with change points")
    )
    hist.add_argument("-k", default=None, help="only benchmarks matching (substring or glob)")
    hist.add_argument("--ref", default="HEAD", help="branch whose history to walk (HEAD)")
    hist.add_argument("--depth", type=int, default=200, help="commits to walk (200)")
    hist.add_argument(
        "--p", type=float, default=P_MAX, help=f"change-point p-value, by permutation ({P_MAX})"
    )
    hist.add_argument(
        "--min-change",
        type=float,
        default=MIN_MAGNITUDE,
        help=f"smallest change point reported, as a fraction ({MIN_MAGNITUDE})",
    )
    hist.set_defaults(func=_history)
    rep = _common(sub.add_parser("report", help="self-contained HTML report with plots"))
    rep.add_argument(
        "--html",
        default="infperf-report.html",
        help="where to write the report (default: infperf-report.html in this folder)",
    )
    rep.add_argument("--png", default=None, help="also write the figures as PNGs here")
    rep.add_argument("--results", default=None, help="a --perf-json file (the current run)")
    rep.add_argument("--compare", default=None, help="baseline: commit, ref or JSON file")
    rep.add_argument("--ref", default="HEAD", help="branch whose history to plot (HEAD)")
    rep.add_argument("--depth", type=int, default=200, help="commits of history to plot (200)")
    rep.add_argument("-k", default=None, help="only benchmarks matching (substring or glob)")
    rep.add_argument("--no-history", action="store_true", help="no history figures")
    rep.set_defaults(func=_report)


def _add_upkeep(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """infperf prune and export (merge and comment: :mod:`.ci`)."""
    prune = _common(sub.add_parser("prune", help="remove old baselines safely"))
    prune.add_argument(
        "--keep", type=int, default=None, help="newest commits to keep per environment"
    )
    prune.add_argument(
        "--keep-raw",
        type=int,
        default=None,
        help="newest commits per environment that keep raw samples; older ones are "
        f"compacted to summaries (e.g. {DEFAULT_KEEP_RAW})",
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="say what would be removed, remove nothing"
    )
    prune.set_defaults(func=_prune)
    exp = _common(sub.add_parser("export", help="results for github-action-benchmark or Bencher"))
    exp.add_argument("results", help="commit, ref or JSON file")
    exp.add_argument(
        "--format",
        required=True,
        choices=("github-action-benchmark", "bencher"),
        help="the tool whose input to write",
    )
    exp.add_argument("-o", "--output", default=None, help="write here (default: stdout)")
    exp.set_defaults(func=_export)


def _bisect(args: argparse.Namespace) -> int:
    from ..store.history import choose_env, iter_series

    store = _store(args)
    env = choose_env(store, args.env, _current_env()) if store.root.is_dir() else None

    def series(shas: list[str]) -> Any:
        for s in iter_series(store, env or "", shas):
            yield s.key, [(p.sha, p.median) for p in s.points]

    try:
        return bisect.run(args, series if env else None)
    except steps.BisectError as exc:
        raise CLIError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="infperf", description="pytest-infperf: baselines, comparisons and reports."
    )
    parser.add_argument("--version", action="version", version=f"pytest-infperf {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (
        _add_baselines,
        _add_reading,
        _add_history,
        _add_upkeep,
        ci.add_parsers,
        action.add_parser,
        scaffold.add_parser,
    ):
        add(sub)
    bisect.add_parser(sub, _common, _bisect)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # `infperf bisect GOOD BAD -k x -- PYTEST_ARGS`: what follows `--` is pytest's.
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    args = parser.parse_args(argv)
    if extra and not hasattr(args, "pytest_args"):
        parser.error(f"infperf {args.command} takes no arguments after --")
    if extra:
        args.pytest_args = extra
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # The reader left (`infperf list | head`): stop quietly, with the status a shell
        # gives a command its pipe's reader closed (128 + SIGPIPE), not a traceback. Output
        # Python still holds goes to /dev/null so that its flush at exit cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (
        GitError,
        BaselineFileError,
        CLIError,
        ci.CIError,
        action.ActionError,
        scaffold.InitError,
    ) as exc:
        print(f"infperf: error: {exc}", file=sys.stderr)
        return 2
    except BackendError as exc:  # an optional dependency (matplotlib) is missing
        print(f"infperf: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print(
            f"infperf: error: {args.command} ran out of memory. Nothing stored was changed "
            "by the part that failed (every write is atomic); compact old baselines "
            "(infperf prune --keep-raw 50) or give the job more memory",
            file=sys.stderr,
        )
        return 2
