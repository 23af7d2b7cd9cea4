"""``infperf bisect GOOD BAD``: the first commit that made a benchmark slower, found with the
plugin's own interleaved verdicts (``--perf-ab``) in a temporary worktree.

Every step runs the selected benchmarks at a candidate commit, interleaved with GOOD on
this machine, in a pytest subprocess: a regression marks it bad, ``unchanged``,
``no-regression`` or ``improvement`` good, anything else (inconclusive, a failed import, a
benchmark that does not exist there) skips it, with the reason. The search walks BAD's
first-parent history (a merge is one candidate, as with ``git bisect --first-parent``) and
is its own, not ``git bisect``'s: the state lives in this process, so nothing of it is left
in the repository after an interruption. The user's checkout, index and branch are never
touched: the candidates are checked out in a detached worktree under a temporary folder,
which is also every child's TMPDIR, so the base worktree ``--perf-ab`` makes goes with it.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..core.fsutil import atomic_write_text
from ..core.results import WorkDiff, WorkProfile
from ..report.fmt import fit
from .steps import Bench, BisectError, Commit, GitFailed, Interrupts, Step, git

#: Exit codes: the commit was named; BAD does not regress against GOOD or the step could not
#: be pinned to one commit; bad usage (main's, also a pytest command line that pytest
#: refuses); git failed during the search; interrupted (128 + SIGINT, as a shell says).
FOUND, NOT_FOUND, USAGE, GIT_FAILED, INTERRUPTED = 0, 1, 2, 3, 130


class Search:
    """Binary search over commits ``0..n-1`` (oldest first): 0 is known good, ``n-1`` bad.

    ``hints`` are indices to measure first where they are still open (from stored
    baselines); they order the search and never decide it. A skipped commit makes the next
    probe its nearest open neighbour (the later one on a tie)."""

    def __init__(self, n: int, hints: Sequence[int] = ()) -> None:
        self.good = 0
        self.bad = n - 1
        self.skipped: set[int] = set()
        self.hints = list(hints)

    def open(self) -> list[int]:
        return [i for i in range(self.good + 1, self.bad) if i not in self.skipped]

    def next(self) -> int | None:
        candidates = self.open()
        if not candidates:
            return None
        while self.hints:
            hint = self.hints.pop(0)
            if hint in candidates:
                return hint
        middle = (self.good + self.bad) / 2
        return min(candidates, key=lambda i: (abs(i - middle), -i))

    def mark(self, i: int, outcome: str) -> None:
        if outcome == "bad":
            self.bad = i
        elif outcome == "good":
            self.good = i
        else:
            self.skipped.add(i)

    def suspects(self) -> list[int]:
        """Where the first bad commit is once :meth:`next` is None: the bad one, and any
        skipped commits between the last good one and it."""
        return list(range(self.good + 1, self.bad + 1))

    def steps_left(self) -> int:
        return len(self.open()).bit_length()


# -- git ---------------------------------------------------------------------------------


def _commit(top: Path, ref: str) -> Commit:
    try:
        sha = git(top, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except GitFailed:
        raise BisectError(
            f"{ref!r} is not a commit, branch or tag in {top} (check the name; "
            "`git log --oneline` lists the commits)"
        ) from None
    subject, author = git(top, "log", "-1", "--format=%s%x00%an", sha).split("\x00", 1)
    return Commit(sha, subject, author)


def history(top: Path, good: Commit, bad: Commit) -> list[Commit]:
    """GOOD, then BAD's first-parent commits after it, oldest first, BAD last."""
    if good.sha == bad.sha:
        raise BisectError("GOOD and BAD are the same commit: nothing to search")
    listing = git(
        top, "log", "--first-parent", "--format=%H%x00%s%x00%an", f"{good.sha}..{bad.sha}"
    )
    rows = [line.split("\x00") for line in reversed(listing.splitlines())]  # oldest first
    # GOOD is on BAD's first-parent chain exactly when it is the oldest listed commit's
    # first parent (no listing at all: BAD is an ancestor of GOOD).
    if not rows or git(top, "rev-parse", f"{rows[0][0]}^1") != good.sha:
        raise BisectError(
            f"GOOD {good.short} is not on BAD {bad.short}'s first-parent history: give a "
            "GOOD that BAD descends from along first parents (e.g. the merge-base, "
            f"`git merge-base {good.short} {bad.short}`)"
        )
    middle = [Commit(sha, subject, author) for sha, subject, author in rows[:-1]]
    return [good, *middle, bad]


# -- stored baselines: where to look first ---------------------------------------------------


def hints_from_store(
    commits: Sequence[Commit], tracked: set[str], series: Callable[[list[str]], Any]
) -> tuple[list[int], str]:
    """Indices to measure first: the commit where the stored baselines of a tracked
    benchmark step up, then the stored commit before it. ``series(shas)`` yields
    (key, [(sha, median), ...]) oldest first. Never a verdict: the steps measure them."""
    from ..stats.changepoint import detect  # numpy: only with baselines

    index = {c.sha: i for i, c in enumerate(commits)}
    for key, points in series([c.sha for c in reversed(commits)]):
        if key not in tracked or len(points) < 2:
            continue
        medians = [m for _, m in points]
        found = detect(medians) if len(points) >= 4 else []
        ups = [c.index for c in found if c.ratio > 1]
        if not ups:
            jumps = [(medians[i] / medians[i - 1], i) for i in range(1, len(medians))]
            ratio, at = max(jumps)
            ups = [at] if ratio > 1.05 else []
        if ups:
            after, before = points[ups[0]][0], points[ups[0] - 1][0]
            return [index[after], index[before]], (
                f"the stored baselines of {key} step up between {before[:10]} and "
                f"{after[:10]}: measuring those first"
            )
    return [], ""


# -- the search ---------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    good: Commit
    bad: Commit
    steps: list[Step]
    tracked: list[str]
    found: Commit | None = None
    suspects: list[Commit] = dataclasses.field(default_factory=list)
    verdict: str = ""  # one line: what the search concluded
    hint: str = ""
    code: int = NOT_FOUND


def search(
    commits: Sequence[Commit],
    bench: Bench,
    say: Callable[[str], None],
    hinter: Callable[[set[str]], tuple[list[int], str]] | None = None,
    retries: int = 1,
) -> Outcome:
    """Confirm BAD against GOOD, search between them, check the named commit against its
    parent. Every verdict comes from an interleaved run on this machine."""
    good, bad = commits[0], commits[-1]
    out = Outcome(good, bad, [], [])

    def measure(role: str, commit: Commit, against: Commit, tracked: set[str]) -> Step:
        # An undecided step is measured again on fresh processes (where the variance
        # lives, docs/COMPARING.md) before the commit is skipped.
        for attempt in range(retries + 1):
            step = bench.measure(role, commit, against, tracked)
            out.steps.append(step)
            say(
                _line(step)
                + (
                    " - measuring again"
                    if step.outcome == "undecided" and attempt < retries
                    else ""
                )
            )
            if step.outcome != "undecided":
                break
        return step

    first = measure("confirm", bad, good, set())
    if first.outcome != "bad":
        # A pass does not reproduce the slowdown; an undecided or failed run says nothing.
        what = "not reproducible" if first.outcome == "good" else "inconclusive"
        out.verdict = (
            f"{what}: BAD {bad.short} against GOOD {good.short} on this machine: {first.why}"
        )
        return out
    tracked = {m.key for m in first.benchmarks if m.slower}
    out.tracked = sorted(tracked)
    if len(commits) == 2:
        # BAD's parent is GOOD: the confirming step was the direct measurement against its
        # parent that names a commit, and there is nothing between them to search.
        return _named(
            out, bad, f"the only commit after GOOD; measured against its parent, {good.short}"
        )
    # The counts first: where the work per call jumps is named without timing.
    if _named_by_counts(commits, bench, first, tracked, say, out, measure):
        return out
    hints, out.hint = hinter(tracked) if hinter else ([], "")
    if out.hint:
        say(out.hint)
    s = Search(len(commits), hints)
    while (i := s.next()) is not None:
        say(f"{len(s.open())} commits left to test (about {s.steps_left()} steps)")
        s.mark(i, measure("search", commits[i], good, tracked).outcome)
    suspects = s.suspects()
    out.suspects = [commits[i] for i in suspects]
    if len(suspects) > 1:
        out.verdict = (
            f"inconclusive: the first bad commit is one of {len(suspects)} "
            f"({', '.join(c.short for c in out.suspects)}): the last is bad, the ones "
            "before it were skipped (see why above)"
        )
        return out
    found, parent = commits[suspects[0]], commits[suspects[0] - 1]
    if s.good > 0:
        # Both ends were judged against GOOD; the step itself is measured directly, so a
        # wrong "good" on the slow side cannot name a commit on its own.
        check = measure("check", found, parent, tracked)
        if check.outcome != "bad":
            out.verdict = (
                f"inconclusive: the search points at {found.short}, but against its parent "
                f"{parent.short} directly it is not a regression ({check.why}): the step may "
                "be near the threshold or spread over several commits"
            )
            return out
    return _named(out, found)


def _named(out: Outcome, commit: Commit, how: str = "") -> Outcome:
    """``out`` naming ``commit`` as the first bad one (``how``: what named it)."""
    out.found, out.code = commit, FOUND
    out.verdict = f"first bad commit: {commit.sha} {commit.subject!r} by {commit.author}" + (
        f" ({how})" if how else ""
    )
    return out


def _named_by_counts(
    commits: Sequence[Commit],
    bench: Bench,
    first: Step,
    tracked: set[str],
    say: Callable[[str], None],
    out: Outcome,
    measure: Callable[[str, Commit, Commit, set[str]], Step],
) -> bool:
    """The counts first: where the work per call jumps is named without timing, and timing
    against its parent confirms it (then ``out`` holds the commit). False: the timed
    search decides."""
    moved = {m.key for m in first.benchmarks if m.key in tracked and _moved(m.work)}
    if not moved:
        # The confirming run profiled both ends: their work is the same (or not counted).
        return False
    at, why = counted_search(commits, bench, moved, say, out.steps)
    if at is None:
        say(why)
        return False
    check = measure("check", commits[at], commits[at - 1], tracked)
    # Its parent must still be as fast as GOOD: a slowdown with the same counts before it
    # (a threading change, say) is the first bad commit, not the one the counts name.
    before = measure("check", commits[at - 1], commits[0], tracked) if at > 1 else None
    if check.outcome != "bad" or (before is not None and before.outcome != "good"):
        where = "its parent" if check.outcome != "bad" else "GOOD, for its parent"
        say(
            f"the counts point at {commits[at].short}, but timing against {where} does not "
            "confirm it: searching by timing"
        )
        return False
    _named(
        out,
        commits[at],
        f"named by its work counts, {why}; confirmed by timing against its parent, and its "
        "parent against GOOD",
    )
    return True


def _moved(diff: WorkDiff | None) -> bool:
    return diff is not None and not diff.same and not diff.varying


def counted_search(
    commits: Sequence[Commit],
    bench: Bench,
    tracked: set[str],
    say: Callable[[str], None],
    steps: list[Step],
) -> tuple[int | None, str]:
    """The first commit whose work per call (FLOPs, operators, kernels: exact, no timing)
    equals BAD's where GOOD's differs, for the slowed benchmarks: its index and the work
    diff; None and why not where the counts cannot name one (no work changed, or it
    changed over several commits, or counts vary from call to call)."""
    from ..judge import work  # the judge's diff: numpy-free

    ends = [bench.works(commits[0]), bench.works(commits[-1])]
    good, bad = ends[0][0], ends[1][0]
    diffs = {k: work.diff(good[k], bad[k]) for k in tracked if k in good and k in bad}
    changed = {k: d for k, d in diffs.items() if d is not None and _moved(d)}
    if not changed:
        return None, "counted alone, GOOD and BAD do the same work: timing decides"

    def same(a: dict[str, WorkProfile], b: dict[str, WorkProfile]) -> bool:
        return all(k in a and (d := work.diff(b[k], a[k])) is not None and d.same for k in changed)

    s = Search(len(commits))
    while (i := s.next()) is not None:
        found, seconds, why = bench.works(commits[i])
        outcome = "bad" if same(found, bad) else "good" if same(found, good) else "skip"
        why = why or {"bad": "work as at BAD", "good": "work as at GOOD"}.get(
            outcome, "work unlike either end"
        )
        step = Step("count", commits[i], commits[i], outcome, why, (), seconds)
        steps.append(step)
        say(_line(step))
        s.mark(i, outcome)
    suspects = s.suspects()
    if len(suspects) != 1:
        return None, "the counts changed over several commits: timing decides"
    key, diff = next(iter(sorted(changed.items())))
    from ..report.fmt import work_line

    return suspects[0], f"{key}: {work_line(diff)}"


def _line(step: Step) -> str:
    figures = "; ".join(f"{m.key} {m.figure()}" for m in step.benchmarks)
    return (
        f"{step.role:>7} {step.commit.short} against {step.against.short}: {step.outcome:<4} "
        f"({step.seconds:.0f} s) {figures or step.why}"
        + (
            f"\n        {step.outcome}: {step.why}"
            if step.outcome in ("skip", "undecided") and figures
            else ""
        )
    )


def markdown(out: Outcome) -> str:
    """The summary a pull request or an issue can carry."""
    head = (
        f"## infperf bisect: first bad commit `{out.found.short}`\n\n"
        f"**{out.found.subject}** by {out.found.author} (`{out.found.sha}`)"
        if out.found
        else "## infperf bisect: no commit named\n\n" + out.verdict
    )
    lines = [
        head,
        "",
        f"Searched `{out.good.short}` (good) .. `{out.bad.short}` (bad) along first parents; "
        "every step measured the benchmarks interleaved with the good commit on one machine "
        "(`--perf-ab`)"
        + (f"; tracked: {', '.join(f'`{k}`' for k in out.tracked)}." if out.tracked else "."),
        "",
        "| step | commit | subject | against | outcome | ratio [interval] verdict | time |",
        "|---|---|---|---|---|---|---|",
    ]
    for st in out.steps:
        figures = "<br>".join(
            f"`{m.key}` {m.figure()}"
            for m in st.benchmarks
            if not out.tracked or m.key in out.tracked
        )
        subject = st.commit.subject.replace("|", "\\|")
        lines.append(
            f"| {st.role} | `{st.commit.short}` | {subject} | `{st.against.short}` | "
            f"{st.outcome} | {figures or st.why} | {st.seconds:.0f} s |"
        )
    if out.hint:
        lines += ["", f"Order: {out.hint}."]
    return "\n".join(lines) + "\n"


# -- the command --------------------------------------------------------------------------


def run(args: argparse.Namespace, series: Callable[[list[str]], Any] | None) -> int:
    """``infperf bisect``; ``series`` reads stored baselines (None: none to read)."""
    try:
        return _run(args, series)
    except GitFailed as exc:
        print(
            fit(
                f"infperf: error: git failed during the bisect (exit {GIT_FAILED}): {exc}. "
                "The temporary worktree is removed and your checkout was never touched; "
                "check the repository (`git status`, `git worktree list`, free disk space) "
                "and run again"
            ),
            file=sys.stderr,
        )
        return GIT_FAILED


def _run(args: argparse.Namespace, series: Callable[[list[str]], Any] | None) -> int:
    cwd = Path.cwd().resolve()
    try:
        top = Path(git(Path(args.repo).resolve(), "rev-parse", "--show-toplevel")).resolve()
    except GitFailed:
        raise BisectError(f"{Path(args.repo).resolve()} is not inside a git repository") from None
    good, bad = _commit(top, args.good), _commit(top, args.bad)
    commits = history(top, good, bad)
    try:
        subdir = cwd.relative_to(top)
    except ValueError:
        subdir = Path()
    selection = [*args.nodeids, *(["-k", args.k] if args.k else [])]

    def say(text: str) -> None:
        print(fit(text), flush=True)

    say(_header(commits, selection))
    hinter = (lambda tracked: hints_from_store(commits, tracked, series)) if series else None
    interrupts = Interrupts()
    # Ctrl-C and a cancelled CI job's SIGTERM stop the search; the handlers go in before
    # the temporary folder exists, so no signal finds it without its cleanup.
    with interrupts.installed():
        tmp = Path(tempfile.mkdtemp(prefix="infperf-bisect-"))
        bench = Bench(top, tmp, subdir, selection, args.pytest_args, interrupts)
        try:
            out = search(commits, bench, say, hinter, args.retries)
        except KeyboardInterrupt:
            interrupts.stopping = True  # a KeyboardInterrupt raised by Python itself
            bench.stop(now=lambda: interrupts.hard)
            print(
                "infperf bisect: interrupted; the temporary worktree is removed and your "
                "checkout was never touched",
                file=sys.stderr,
            )
            return INTERRUPTED
        finally:
            interrupts.stopping = True
            bench.close()
    say(out.verdict)
    if args.markdown:
        atomic_write_text(Path(args.markdown), markdown(out))
    return out.code


def _header(commits: Sequence[Commit], selection: list[str]) -> str:
    """What the bisect is about to do. Its candidates are every commit after GOOD up to
    BAD, BAD included: one, when BAD's parent is GOOD."""
    good, bad = commits[0], commits[-1]
    step = " ".join(["pytest", *([shlex.join(selection)] if selection else []), "--perf-ab=<good>"])
    if len(commits) == 2:
        return (
            f"bisecting 1 commit: {bad.short} (bad), whose parent is {good.short} (good); "
            f"one step: {step} in a temporary worktree"
        )
    return (
        f"bisecting {len(commits) - 1} commits after {good.short} (good) up to {bad.short} "
        f"(bad); each step: {step} in a temporary worktree"
    )


def add_parser(sub: Any, common: Callable[[argparse.ArgumentParser], Any], func: Any) -> None:
    p = common(
        sub.add_parser(
            "bisect",
            help="the first commit between GOOD and BAD that made a benchmark slower, "
            "by interleaved runs on this machine",
            description="Measures the selected benchmarks at commits between GOOD and BAD "
            "(first parents), each interleaved with GOOD (--perf-ab) in a temporary "
            "worktree; arguments after -- go to every step's pytest (e.g. -- "
            "--perf-max-time=2). Exit 0: a commit named; 1: BAD does not regress, or "
            "no single commit could be named; 2: bad usage (also a pytest command line "
            "pytest refuses at BAD); 3: git failed during the search; 130: interrupted "
            "(a second Ctrl-C or SIGTERM kills the running step at once).",
        )
    )
    p.add_argument("good", metavar="GOOD", help="a commit without the slowdown")
    p.add_argument("bad", metavar="BAD", help="a later commit with it")
    p.add_argument("nodeids", nargs="*", metavar="NODEID", help="benchmarks to measure")
    p.add_argument("-k", default=None, help="pytest -k expression selecting the benchmarks")
    p.add_argument("--markdown", default=None, help="also write the summary as Markdown here")
    p.add_argument(
        "--retries",
        type=_retries,
        default=1,
        help="times an undecided (inconclusive) step is measured again before the commit is "
        "skipped (1)",
    )
    # Arguments after `--` go to every step's pytest (main() splits them off first).
    p.set_defaults(func=func, pytest_args=[])


def _retries(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"{value} is below 0: give 0 (never measure an undecided step again) or more"
        )
    return value
