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

from ..core.options import BASELINES_BRANCH, SPECS, option_type
from ..measure.backends import BackendError
from ..report.fmt import fit
from ..store.baselines import BaselineFileError, BaselineStore
from ..store.git import GitError
from . import action, bisect, ci, scaffold, steps
from . import compare as _compare_cmd
from . import documents as _docs
from .documents import CLIError

#: The retention the docs recommend: raw samples for the newest 50 baselines of each
#: environment (a comparison finds its baseline among them), summaries for the rest.
DEFAULT_KEEP_RAW = 50


def _list(args: argparse.Namespace) -> int:
    from ..store.index import StoreIndex

    store = _docs.store(args)
    keys = [args.env] if args.env else store.env_keys()
    if not keys:
        print(f"no baselines in {store.root}")
        return 0
    current = _docs.current_env()
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

    doc = _docs.load(args.commit, args)
    commit = doc.get("commit") or {}
    print(f"commit {commit.get('sha')}  environment {doc['environment'].get('key')}")
    _compare_cmd.say_summary(doc, "")
    results = _docs.results(doc)
    for line in summary_lines(results) + generation_lines(results):
        print(line)
    for line in profile_lines(results):
        print(fit(line))
    return 0


def _history(args: argparse.Namespace) -> int:
    from ..report.fmt import fmt_time
    from ..store.history import (
        bisect_command,
        changes,
        choose_env,
        first_parent_history,
        iter_series,
    )

    store = _docs.store(args)
    env = choose_env(store, args.env, _docs.current_env())
    if env is None:
        raise CLIError(f"no baselines in {store.root}" + (f" for {args.env}" if args.env else ""))
    shas = first_parent_history(_docs.root(args), args.ref, args.depth)
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
        print(fit(f"warning: skipped {problem}"), file=sys.stderr)
    return 0


def _report(args: argparse.Namespace) -> int:
    from ..report.html import build
    from ..store.history import changes, choose_env, first_parent_history, iter_series

    if args.compare and not args.results:
        raise CLIError(
            f"--compare {args.compare}: give --results FILE too, the run (a --perf-json file) "
            f"to judge against {args.compare}"
        )
    results = _docs.load(args.results, args) if args.results else None
    baseline = _docs.load(args.compare, args) if args.compare else None
    shown, now = None, "now"
    if results is not None and baseline is not None:
        # Judged against what --compare names, by infperf compare's own judge: the run's
        # own verdicts were against another baseline (or none), and would be drawn beside
        # this one's samples under its commit.
        results, shown = _judged_against(args, results, baseline)
        print(fit(f"note: {shown}"), file=sys.stderr)
    if results is None and baseline is None:
        # Nothing named: HEAD's nearest baseline (as --perf-compare=HEAD would find it).
        try:
            results = _docs.load("HEAD", args)
        except (CLIError, GitError, BaselineFileError) as exc:
            print(
                fit(f"note: no baseline near HEAD to show ({exc}); history only"), file=sys.stderr
            )
        else:
            shown = _nearest_note(args, results)
            print(fit(f"note: {shown}"), file=sys.stderr)
            # A stored baseline shown on its own: its commit's figures, not now.
            now = f"commit {str((results.get('commit') or {}).get('sha') or '?')[:10]}"
    history: Any = {}  # a dict, or a stream of series from the index
    store = _docs.store(args)
    env = choose_env(
        store, args.env, (results or {}).get("environment", {}).get("key") or _docs.current_env()
    )
    if env is not None and not args.no_history:
        try:
            shas = first_parent_history(_docs.root(args), args.ref, args.depth)
        except GitError as exc:
            print(fit(f"warning: no history ({exc})"), file=sys.stderr)
            shas = []
        history = (changes(s) for s in iter_series(store, env, shas, args.k))
    png = Path(args.png) if args.png else None
    text, figures = build(
        results,
        baseline,
        history,
        png,
        along=_docs.branch_name(args.ref, args),
        shown=shown,
        now=now,
    )
    if args.html:
        Path(args.html).write_text(text, encoding="utf-8")
        print(f"wrote {args.html}")
    if args.png:
        print(f"wrote {figures} PNG(s) to {args.png}" if figures else "no figures to write yet")
    return 0


def _judged_against(
    args: argparse.Namespace, results: dict[str, Any], baseline: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    """``results`` with each benchmark judged against ``baseline`` as ``infperf compare``
    judges it, and what the page shows, said under its heading."""
    from ..core.options import BenchOptions

    judged, _, _, sha = _compare_cmd.judged(baseline, results, BenchOptions(), args.compare)
    doc = {**results, "benchmarks": [r.to_json() for r in judged]}
    where = f" (commit {sha[:10]})" if sha else ""
    shown = (
        f"{args.results} judged against {args.compare}{where} as infperf compare judges "
        "them; the run's own verdicts are not shown"
    )
    return doc, shown


def _nearest_note(args: argparse.Namespace, results: dict[str, Any]) -> str:
    """What a plain `infperf report` shows, said where it is shown (the page's heading):
    HEAD's own baseline, or the nearest one an ancestor has."""
    from ..store import git as gitinfo

    sha = str((results.get("commit") or {}).get("sha") or "")
    try:
        head = gitinfo.head_sha(gitinfo.open_repo(_docs.root(args)))
    except GitError:
        head = ""
    if sha and head and sha != head:
        return (
            f"HEAD ({head[:10]}) has no baseline of its own here: shown is the nearest, "
            f"commit {sha[:10]}, as --perf-compare=HEAD would find it"
        )
    return f"HEAD's own baseline (commit {sha[:10] or '?'})"


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
    store = _docs.store(args)
    keys = [args.env] if args.env else store.env_keys()
    try:
        repo = gitinfo.open_repo(_docs.root(args))
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
                print(fit(f"skipped {exc}"), file=sys.stderr)
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
    print(fit(what))
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

    data = export(_docs.load(args.results, args), args.format)
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
        default=BASELINES_BRANCH,
        help=f"the branch that holds the baselines (default {BASELINES_BRANCH})",
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
            # The table's words name pytest's flags; here the command's own are meant.
            help=spec.describe().replace(
                "; see --perf-run-alpha for the run as a whole",
                ", for each benchmark; a claim also holds over all those compared at 0.01",
            ),
        )
    cmp.add_argument("--markdown", help="also write a Markdown report here")
    cmp.set_defaults(func=_compare_cmd.run)


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

    store = _docs.store(args)
    env = choose_env(store, args.env, _docs.current_env()) if store.root.is_dir() else None

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
        print(fit(f"infperf: error: {exc}"), file=sys.stderr)
        return 2
    except BackendError as exc:  # an optional dependency (matplotlib) is missing
        print(fit(f"infperf: error: {exc}"), file=sys.stderr)
        return 2
    except MemoryError:
        print(
            fit(
                f"infperf: error: {args.command} ran out of memory. Nothing stored was "
                "changed by the part that failed (every write is atomic); compact old "
                "baselines (infperf prune --keep-raw 50) or give the job more memory"
            ),
            file=sys.stderr,
        )
        return 2
