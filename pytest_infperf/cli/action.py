"""``infperf action ROLE``: the script steps of the GitHub Action (``action.yml`` at the
repository root), kept here so that the Action's shell steps stay one line each and tests
can run them in a temporary repository.

The Action's inputs reach these commands as environment variables (``INPUT_TESTS``,
``INPUT_SHARD``..., set from ``${{ inputs.* }}`` in each step's ``env:``, never pasted
into a script), beside GitHub's own (``GITHUB_EVENT_NAME``, ``GITHUB_REF_NAME``,
``GITHUB_BASE_REF``, ``GITHUB_EVENT_PATH``, ``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY``).

- ``measure``: on a pull request (or a branch other than the default), pull the stored
  baselines of the recent history and compare with the base branch (or ``compare-to``);
  on the default branch, save this commit's baseline. It writes ``perf-shard/`` (results,
  JUnit, the shard's status, and when saving the baselines and durations) for the
  artifact the Action uploads, and, when this job is the whole run (no ``shard`` input),
  ``perf-results/`` (the results, the report and the pull request's comment). It never
  fails on what it measured: ``gate`` does, after the uploads. Only a complete run's
  results are believed (their ``run`` record): an exit status of 0 with partial results
  (``pytest.exit()``) is a failure, said so in the outcome and the comment.
- ``merge``: a fleet's fan-in: every shard of ``shards`` must have sent its artifact and
  succeeded (each missing or failed one named), then ``infperf merge --expect`` of exactly
  this label's ``perf-shard-LABEL-1..N`` into ``perf-results/``, the job summary, the
  comment (one saying the run failed, and why, when the shards do not merge).
- ``push-baselines``: each downloaded shard's baselines to the baselines branch.
- ``gate``: exit 1, saying why, when the run failed (the outcome ``measure`` or ``merge``
  wrote); a missing outcome fails too.

Exit codes: 0, 1 (``gate``: the run failed), 2 (a bad input, named with its fix).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.options import (
    BASELINES_BRANCH,
    OptionError,
    Parser,
    Spec,
    as_text,
    boolean,
    choice,
    integer,
    optional,
)
from ..report.fmt import fit

if TYPE_CHECKING:
    from ..store.data_branch import Token

#: What a job of the Action writes, relative to the workspace.
SHARD_DIR = Path("perf-shard")
RESULTS_DIR = Path("perf-results")
SHARDS_DIR = Path("perf-shards")
OUTCOME = "outcome.json"
#: First-parent commits whose baselines a comparing job pulls: ``--perf-compare`` walks
#: ``search_depth`` (50) of them.
PULL_DEPTH = 60
ROLES = ("measure", "merge", "push-baselines")


def _words(name: str, value: object) -> list[str]:
    try:
        return shlex.split(str(value))
    except ValueError as exc:
        raise OptionError(f"{name}={value!r}: does not split into words ({exc})") from None


def _label(name: str, value: object) -> str:
    label = str(value) or "default"
    if not label.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise OptionError(
            f"{name}={value!r}: it names artifacts: use letters, digits, '-', '_', '.'"
        )
    return label


def _input(name: str, default: object, parse: Parser, choices: tuple[str, ...] = ()) -> Spec:
    return Spec(name, parse, default, "", ini=False, choices=choices)


#: The inputs whose empty value means their default (a missing label or branch name).
EMPTY_IS_DEFAULT = frozenset({"mode", "baselines-branch", "label"})
#: The Action's inputs, each with the settings' own parsers and its default written once:
#: action.yml's inputs and defaults are checked against this table (tests/test_ci.py).
#: ``role`` and ``python`` are read by action.yml's steps, before any Python runs: the
#: role's first step refuses one not in its ``choices`` (checked against the step too).
INPUTS: tuple[Spec, ...] = (
    _input("role", "measure", choice(*ROLES, "post-comment"), choices=(*ROLES, "post-comment")),
    _input("tests", "tests/perf", _words),
    _input("pytest-args", "", _words),
    _input("compare-to", "", as_text),
    _input("mode", "auto", choice("auto", "save", "compare")),
    _input("baselines-branch", BASELINES_BRANCH, as_text),
    _input("shard", "", optional(integer(1))),
    _input("shards", "1", integer(1)),
    _input("label", "default", _label),
    _input("fail-on-regression", "true", boolean),
    _input("comment", "true", boolean),
    _input("python", "python3", as_text),
    _input("shard-jobs", "", as_text),
)


class ActionError(Exception):
    """A bad input or a repository the Action cannot work in: exit 2 with the fix."""


@dataclasses.dataclass(frozen=True)
class Inputs:
    """The Action's inputs (``action.yml``), checked."""

    tests: list[str]
    pytest_args: list[str]
    compare_to: str
    mode: str
    baselines_branch: str
    shard: int | None
    shards: int
    label: str
    fail_on_regression: bool
    comment: bool
    shard_jobs: str

    @classmethod
    def from_env(cls, env: Mapping[str, str], role: str = "measure") -> Inputs:
        specs = {s.name: s for s in INPUTS}

        def get(name: str) -> Any:
            """The input as given (its default where it is not given at all), through its
            parser. Given empty: empty (``tests: ''`` leaves the choice to pytest's
            testpaths), but for the inputs whose empty value means their default."""
            s = specs[name]
            given = env.get(f"INPUT_{name.upper().replace('-', '_')}")
            text = s.default if given is None else given.strip()
            if not text and name in EMPTY_IS_DEFAULT:
                text = s.default
            try:
                return s.parse(f"input {name}", text)
            except OptionError as exc:
                raise ActionError(str(exc)) from None

        shards, shard = get("shards"), get("shard")
        if shard is not None and shard > shards:
            raise ActionError(
                f"input shard: {shard} is past shards ({shards}); give each job of the "
                f"matrix a shard from 1 to {shards}"
            )
        if shard is None and shards > 1 and role == "measure":
            raise ActionError(
                f"input shards is {shards} but shard is not given: pass shard: "
                "${{ matrix.group }} from a matrix of groups 1..shards (and a merge job)"
            )
        return cls(
            tests=get("tests"),
            pytest_args=get("pytest-args"),
            compare_to=get("compare-to"),
            mode=get("mode"),
            baselines_branch=get("baselines-branch"),
            shard=shard,
            shards=shards,
            label=get("label"),
            fail_on_regression=get("fail-on-regression"),
            comment=get("comment"),
            shard_jobs=get("shard-jobs"),
        )

    @property
    def whole_run(self) -> bool:
        """No ``shard`` input: this job is the whole run, and gates it."""
        return self.shard is None

    @property
    def artifact(self) -> str:
        return f"perf-shard-{self.label}-{self.shard or 1}"


@dataclasses.dataclass(frozen=True)
class Plan:
    """What this job does: save (None) or compare with ``ref``."""

    ref: str | None
    pr_number: int | None
    why: str

    @property
    def save(self) -> bool:
        return self.ref is None


def _event(env: Mapping[str, str]) -> dict[str, Any]:
    path = env.get("GITHUB_EVENT_PATH")
    if not path or not Path(path).is_file():
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def plan(inputs: Inputs, env: Mapping[str, str]) -> Plan:
    """Save on the default branch's pushes (and runs started there by hand or on a
    schedule); compare everywhere else, with ``compare-to``, else the pull request's base
    branch, else the default branch."""
    event = _event(env)
    name = env.get("GITHUB_EVENT_NAME", "")
    default = str((event.get("repository") or {}).get("default_branch") or "main")
    number = (event.get("pull_request") or {}).get("number")
    pr = int(number) if isinstance(number, int) else None
    on_default = env.get("GITHUB_REF_NAME") == default and not env.get("GITHUB_BASE_REF")
    save = inputs.mode == "save" or (
        inputs.mode == "auto" and on_default and name in ("push", "workflow_dispatch", "schedule")
    )
    if save:
        return Plan(None, pr, f"{name or 'a run'} on {env.get('GITHUB_REF_NAME') or default}")
    base = env.get("GITHUB_BASE_REF")
    ref = inputs.compare_to or f"origin/{base or default}"
    return Plan(ref, pr, f"{name or 'a run'}: compare with {ref}")


def pytest_command(inputs: Inputs, the_plan: Plan, python: str) -> list[str]:
    """The pytest run of this job: its results, JUnit and Markdown in ``perf-shard/``."""
    cmd = [python, "-m", "pytest", *inputs.tests, *inputs.pytest_args]
    if the_plan.ref is None:
        cmd.append("--perf-save")
    else:
        cmd.append(f"--perf-compare={the_plan.ref}")
        # A shard records its verdicts; the fan-in judges the run (its family is the
        # whole run's). A whole run gates itself unless told not to.
        if not inputs.whole_run or not inputs.fail_on_regression:
            cmd.append("--perf-warn-only")
    if inputs.shard is not None:
        cmd += ["--splits", str(inputs.shards), "--group", str(inputs.shard)]
        cmd.append("--store-durations" if the_plan.save else "--splitting-algorithm")
        cmd += [] if the_plan.save else ["least_duration"]
    cmd += [
        # The folder the baselines were pulled into, whatever the project's ini says.
        f"--perf-baselines={Path.cwd() / 'baselines'}",
        f"--perf-json={SHARD_DIR / 'results.json'}",
        f"--junitxml={SHARD_DIR / 'junit.xml'}",
        f"--perf-markdown={SHARD_DIR / 'report.md'}",
    ]
    return cmd


class GitHub:
    """The step's outputs (``$GITHUB_OUTPUT``) and job summary (``$GITHUB_STEP_SUMMARY``);
    outside Actions, printed."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def output(self, **values: object) -> None:
        lines = "".join(f"{k.replace('_', '-')}={v}\n" for k, v in values.items())
        target = self.env.get("GITHUB_OUTPUT")
        if target:
            with Path(target).open("a", encoding="utf-8") as fh:
                fh.write(lines)
        else:
            sys.stdout.write(lines)

    def summary(self, text: str) -> None:
        target = self.env.get("GITHUB_STEP_SUMMARY")
        if target:
            with Path(target).open("a", encoding="utf-8") as fh:
                fh.write(text if text.endswith("\n") else text + "\n")

    @staticmethod
    def error(title: str, message: str) -> None:
        # A workflow command: the message may hold nothing that ends it early.
        flat = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        print(f"::error title={title}::{flat}", flush=True)


def _check_checkout(root: Path) -> None:
    """A comparison walks history to find its baseline: a shallow clone has none."""
    out = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise ActionError(
            f"{root} is not a git checkout ({out.stderr.strip()}): run actions/checkout first"
        )
    if out.stdout.strip() == "true":
        raise ActionError(
            "the checkout is shallow, and baselines are found by walking first-parent "
            "history: give actions/checkout `fetch-depth: 0`"
        )


#: The job's token (``github.token``), which action.yml gives the steps that fetch or push
#: the baselines branch: a checkout with ``persist-credentials: false`` keeps none, and a
#: private repository's branch needs one.
TOKEN_ENV = "INFPERF_GIT_TOKEN"


def _token(env: Mapping[str, str]) -> Token | None:
    """The job's token for git, for ``$GITHUB_SERVER_URL`` (None: none given)."""
    from ..store.data_branch import Token

    value = env.get(TOKEN_ENV, "").strip()
    if not value:
        return None
    return Token(value, env.get("GITHUB_SERVER_URL") or "https://github.com")


def _outcome(folder: Path, passed: bool, why: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / OUTCOME
    path.write_text(json.dumps({"passed": passed, "why": why}, indent=1) + "\n")
    return path


def _publish(
    gh: GitHub, doc: Mapping[str, Any], markdown: str, the_plan: Plan, inputs: Inputs
) -> None:
    """``perf-results/``: the whole run's results and report, and on a pull request (with
    ``comment`` on) the comment body and the number perf-comment's poster cross-checks."""
    from ..core.fsutil import atomic_write_text
    from ..core.results import dumps
    from ..report.comment import body

    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    atomic_write_text(RESULTS_DIR / "results.json", dumps(dict(doc)))
    atomic_write_text(RESULTS_DIR / "report.md", markdown)
    if inputs.comment and the_plan.pr_number is not None:
        text, notable = body(doc)
        atomic_write_text(RESULTS_DIR / "comment.md", text)
        atomic_write_text(RESULTS_DIR / "pr-number.txt", f"{the_plan.pr_number}\n")
        gh.output(notable=str(notable).lower())
    from ..core.results import Verdict, verdict_counts

    counts = verdict_counts(doc.get("benchmarks") or ())
    gh.output(
        published="true",
        results=RESULTS_DIR / "results.json",
        report=RESULTS_DIR / "report.md",
        benchmarks=len(doc.get("benchmarks") or ()),
        regressions=counts.get(Verdict.REGRESSION, 0),
        verdicts=json.dumps(
            {v.value: n for v, n in sorted(counts.items(), key=lambda i: i[0].value)},
            separators=(",", ":"),
        ),
    )


def measure(env: Mapping[str, str], root: Path) -> int:
    """The ``measure`` role (see the module's docstring)."""
    inputs = Inputs.from_env(env)
    the_plan = plan(inputs, env)
    token = _token(env)
    _check_checkout(root)
    if inputs.shard is not None and importlib.util.find_spec("pytest_split") is None:
        raise ActionError(
            f"input shard: splitting needs pytest-split in {sys.executable}: install it "
            "(python -m pip install pytest-split) in the step that installs your project"
        )
    gh = GitHub(env)
    gh.output(mode="save" if the_plan.save else "compare", compared_to=the_plan.ref or "")
    print(fit(f"infperf action: {the_plan.why}"), flush=True)
    if not the_plan.save:
        from ..store import data_branch

        assert the_plan.ref is not None
        only = _recent(root, ["HEAD", the_plan.ref])
        data_branch.pull(
            root, root / "baselines", "origin", inputs.baselines_branch, only=only, token=token
        )
    shutil.rmtree(SHARD_DIR, ignore_errors=True)
    SHARD_DIR.mkdir(parents=True)
    (SHARD_DIR / "status.txt").write_text("started\n")  # a crash below leaves no success
    gh.output(shard_artifact=inputs.artifact, status=SHARD_DIR / "status.txt")
    command = pytest_command(inputs, the_plan, sys.executable)
    print(fit("infperf action: " + shlex.join(command)), flush=True)
    # The token is git's, for the fetch above: not the environment of the run's code.
    child = {k: v for k, v in env.items() if k != TOKEN_ENV}
    status = subprocess.run(command, cwd=root, env=child, check=False).returncode
    # No test in this shard's group is no failure (a split may leave one empty); a whole
    # run that collected nothing is.
    ok = status == 0 or (status == 5 and not inputs.whole_run)
    why = [] if ok else [_pytest_failure(status, inputs)]
    # Only a complete run's results are believed: pytest.exit(0) or a plugin that kept
    # the results from being written pass an exit status, not a run.
    results = SHARD_DIR / "results.json"
    unbelieved = _incomplete(results)
    if ok and unbelieved is not None:
        ok, why = False, [unbelieved]
    elif unbelieved is not None and results.is_file():
        why.append(unbelieved)  # an interrupt's exit status, and what it left unrun
    (SHARD_DIR / "status.txt").write_text("success\n" if ok else "failure\n")
    # What the push job stores, and the durations a later split balances by.
    if the_plan.save and (root / "baselines").is_dir():
        shutil.copytree(root / "baselines", SHARD_DIR / "baselines", dirs_exist_ok=True)
    if the_plan.save and (root / ".test_durations").is_file():
        shutil.copy(root / ".test_durations", SHARD_DIR)
    if inputs.whole_run and results.is_file():
        from ..store.baselines import read_document

        report = SHARD_DIR / "report.md"
        text = report.read_text(encoding="utf-8") if report.is_file() else ""
        _publish(gh, read_document(results), text, the_plan, inputs)
    elif inputs.whole_run:
        _failure_comment(gh, why, the_plan, inputs)
    elif results.is_file():
        gh.output(results=results, report=SHARD_DIR / "report.md")
    gh.output(outcome=_outcome(SHARD_DIR, ok, why), passed=str(ok).lower())
    return 0


def _incomplete(path: Path) -> str | None:
    """Why the run's results cannot be believed (None: a complete run's)."""
    from ..core.outcome import incomplete
    from ..store.baselines import BaselineFileError, read_document

    if not path.is_file():
        return f"pytest wrote no results ({path} is missing): see its log"
    try:
        why = incomplete(read_document(path))
    except BaselineFileError as exc:
        return f"the results cannot be read: {exc}"
    return None if why is None else f"the run did not complete: {why}"


def _failure_comment(gh: GitHub, why: list[str], the_plan: Plan, inputs: Inputs) -> None:
    """A run that left no results to report still says so on the pull request: its
    comment (the one posted and updated in place) must not keep an earlier run's text."""
    from ..core.fsutil import atomic_write_text
    from ..report.comment import MARKER

    if not inputs.comment or the_plan.pr_number is None:
        return
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    lines = [
        MARKER,
        "## pytest-infperf: run failed, no results",
        "",
        "> [!CAUTION]",
        "> **The run failed before its results could be judged:**",
        ">",
        *(f"> - {' '.join(line.split())}" for line in why or ["no outcome"]),
        "",
        "See the job's log; no benchmark of this run has a verdict.",
    ]
    atomic_write_text(RESULTS_DIR / "comment.md", "\n".join(lines) + "\n")
    atomic_write_text(RESULTS_DIR / "pr-number.txt", f"{the_plan.pr_number}\n")
    gh.output(published="true", notable="true")


def _pytest_failure(status: int, inputs: Inputs) -> str:
    if status == 5:
        return f"pytest collected no tests in {shlex.join(inputs.tests)} (exit 5)"
    if status == 1:
        return (
            "pytest failed (exit 1): a regression, a budget exceeded, a comparison that "
            "compared nothing, a run that measured no benchmark, or a failing test; its log "
            "and the job summary say which"
        )
    return f"pytest ended with exit status {status}: see its log"


def _recent(root: Path, refs: list[str]) -> set[str] | None:
    """The commits whose baselines a comparison can reach (``pull --depth``)."""
    from ..store import git as gitinfo

    repo = gitinfo.open_repo(root)
    wanted: set[str] = set()
    for ref in refs:
        try:
            sha = gitinfo.resolve(repo, ref)
        except gitinfo.GitError as exc:
            raise ActionError(
                f"cannot compare with {ref!r}: {exc}. Check out with fetch-depth: 0 (every "
                "branch), or set compare-to to a ref that exists"
            ) from None
        wanted.update(gitinfo.first_parents(repo, sha, PULL_DEPTH - 1))
    return wanted


def _shard_results(inputs: Inputs) -> list[Path]:
    """The results each of this label's shards sent, by exact name: the download's pattern
    ``perf-shard-LABEL-*`` also takes another label that begins with this one (``gpu``
    and ``gpu-h100``), whose groups are another run's."""
    names = {f"perf-shard-{inputs.label}-{group}" for group in range(1, inputs.shards + 1)}
    found = [SHARDS_DIR / name / "results.json" for name in sorted(names)]
    return [path for path in found if path.is_file()]


def _missing_or_failed(inputs: Inputs) -> list[str]:
    """Each shard of the fleet that sent nothing or did not succeed, named."""
    bad = []
    for group in range(1, inputs.shards + 1):
        name = f"perf-shard-{inputs.label}-{group}"
        folder = SHARDS_DIR / name
        if not folder.is_dir():
            bad.append(
                f"{name} sent nothing: it never ran to its upload (cancelled, timed out, "
                "runner lost)"
            )
            continue
        try:
            raw = (folder / "status.txt").read_text(errors="replace")[:20]
        except OSError:
            raw = ""
        status = "".join(ch for ch in raw if "a" <= ch <= "z")
        if status != "success":
            bad.append(f"{name} ended {status or 'without a status'}: see its job")
    if not bad and inputs.shard_jobs and inputs.shard_jobs != "success":
        bad.append(f"the shard jobs ended {inputs.shard_jobs}")
    return bad


def merge(env: Mapping[str, str], root: Path) -> int:
    """The ``merge`` role: a fleet's fan-in (see the module's docstring)."""
    from ..store.baselines import BaselineFileError
    from . import ci

    inputs = Inputs.from_env(env, "merge")
    the_plan = plan(inputs, env)
    gh = GitHub(env)
    gh.output(mode="save" if the_plan.save else "compare", compared_to=the_plan.ref or "")
    why = _missing_or_failed(inputs)
    for line in why:
        gh.error("shard missing" if "sent nothing" in line else "shard failed", line)
    shutil.rmtree(RESULTS_DIR, ignore_errors=True)
    RESULTS_DIR.mkdir(parents=True)
    # What did arrive is merged even so (the summary shows it); a missing group fails it.
    paths = [str(p) for p in _shard_results(inputs)]
    try:
        doc, text = ci.merged(paths, inputs.shards)
    except (ci.CIError, BaselineFileError) as exc:
        gh.error("merge", str(exc))
        why.append(f"the shards do not merge: {exc}")
        _failure_comment(gh, why, the_plan, inputs)
    else:
        _publish(gh, doc, text, the_plan, inputs)
        gh.summary(text)
        if inputs.fail_on_regression:
            why += ci.failures(doc)
        n = len(doc["benchmarks"])
        print(f"merged {len(paths)} shards, {n} benchmark{'s' * (n != 1)}, into {RESULTS_DIR}")
    passed = not why
    gh.output(outcome=_outcome(RESULTS_DIR, passed, why), passed=str(passed).lower())
    return 0


def push_baselines(env: Mapping[str, str], root: Path) -> int:
    """The ``push-baselines`` role: every downloaded shard's baselines to the branch."""
    from ..store import data_branch

    inputs = Inputs.from_env(env, "push-baselines")
    # The commit on the baselines branch needs an author; the Actions bot's, unless the
    # job set one.
    for who in ("AUTHOR", "COMMITTER"):
        os.environ.setdefault(f"GIT_{who}_NAME", "github-actions[bot]")
        os.environ.setdefault(
            f"GIT_{who}_EMAIL", "41898282+github-actions[bot]@users.noreply.github.com"
        )
    folders = sorted(SHARDS_DIR.glob("perf-shard-*/baselines"))
    if not folders:
        print(fit(f"infperf action: no shard sent baselines (nothing in {SHARDS_DIR}/*/baselines)"))
    token = _token(env)
    for folder in folders:
        data_branch.push(root, root / folder, "origin", inputs.baselines_branch, token=token)
    return 0


def gate(path: str) -> int:
    """The ``gate`` role: the run's outcome, as the step's exit status."""
    if not path or not Path(path).is_file():
        GitHub.error(
            "pytest-infperf",
            "no outcome was written: the measuring or merging step did not finish (see its log)",
        )
        return 1
    outcome = json.loads(Path(path).read_text(encoding="utf-8"))
    if outcome.get("passed") is True:
        print("infperf action: passed")
        return 0
    for line in outcome.get("why") or ["failed"]:
        GitHub.error("pytest-infperf", str(line))
    return 1


def run(args: argparse.Namespace) -> int:
    root = Path.cwd()
    try:
        if args.role == "gate":
            return gate(args.outcome or "")
        if args.role == "measure":
            return measure(os.environ, root)
        if args.role == "merge":
            return merge(os.environ, root)
        return push_baselines(os.environ, root)
    except ActionError as exc:
        GitHub.error("pytest-infperf", str(exc))
        raise


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """infperf action."""
    p = sub.add_parser(
        "action",
        help="the GitHub Action's steps (action.yml): measure, merge, push-baselines, gate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "role",
        choices=(*ROLES, "gate"),
        help="the step of the Action to run (its action.yml calls each in turn)",
    )
    p.add_argument("outcome", nargs="?", default=None, help="gate: the outcome file to read")
    p.set_defaults(func=run)
