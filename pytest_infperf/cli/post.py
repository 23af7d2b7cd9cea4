"""``infperf post-comment BODY.md`` (also ``python -m pytest_infperf.cli.post``): post or
update the pull-request comment that ``perf.yml`` built, from ``perf-comment.yml``.

That workflow runs on ``workflow_run`` with a token that may write comments, and what it
reads from the perf run's artifact was written by the pull request's own code: a fork can
put anything in it. So the artifact gives only the comment's text, never where it goes.
The pull request is looked up through the API from the triggering run itself (the
``workflow_run`` payload at ``$GITHUB_EVENT_PATH``): an open pull request of this
repository whose head commit and head repository are the run's. A ``--pr-number-file``
from the artifact is only cross-checked against it; a mismatch posts nothing and fails,
saying why. The text is cut to GitHub's limit and carries this workflow's own marker, by
which the one comment is found again, and only a comment of the token's own user (by
default ``github-actions[bot]``) is ever updated.

Standard library only, so the comment job installs nothing: it runs this file from its own
checkout of the default branch. Environment: ``GITHUB_API_URL`` (GitHub's, or a test
server's), ``GITHUB_REPOSITORY``, ``GITHUB_EVENT_PATH``, and the token in
``GITHUB_TOKEN``. Exit 0: posted, updated, or nothing to post (said why); 1: refused (the
artifact names another pull request); 2: bad input or an API error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: The comment's hidden marker (``report.comment.MARKER``; the same text, kept here so that
#: this module imports nothing of the package).
MARKER = "<!-- pytest-infperf:comment -->"
#: GitHub's limit on a comment body is 65,536 characters; the rest is the marker's and a
#: line saying the text was cut.
BODY_LIMIT = 65_000
#: Who posts with the workflow's GITHUB_TOKEN.
DEFAULT_AUTHOR = "github-actions[bot]"
POSTED, REFUSED, FAILED = 0, 1, 2


class PostError(Exception):
    """Bad input or an API error: exit 2 with the message."""


class Refused(Exception):
    """The artifact's pull-request number is not the run's pull request: exit 1."""


class API:
    """GitHub's REST API, as much of it as posting one comment takes."""

    def __init__(self, base: str, token: str) -> None:
        self.base = base.rstrip("/")
        self.token = token

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "Content-Type": "application/json",
                "User-Agent": "pytest-infperf",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read().decode() or "null"
        except urllib.error.HTTPError as exc:
            said = exc.read().decode(errors="replace")[:300]
            raise PostError(f"{method} {path}: HTTP {exc.code} {said}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise PostError(f"{method} {path}: {exc}") from None
        try:
            return json.loads(text)
        except ValueError:
            raise PostError(f"{method} {path}: the answer is not JSON") from None

    def pages(self, path: str) -> list[Any]:
        """Every item of a paginated list."""
        out: list[Any] = []
        sep = "&" if "?" in path else "?"
        for page in range(1, 1000):
            items = self.call("GET", f"{path}{sep}per_page=100&page={page}")
            if not isinstance(items, list):
                raise PostError(f"GET {path}: expected a list")
            out += items
            if len(items) < 100:
                break
        return out


def the_run(event_path: str) -> dict[str, str]:
    """What the triggering run says of itself: its head commit and repository."""
    try:
        run = json.loads(Path(event_path).read_text())["workflow_run"]
        found = {
            "event": str(run["event"]),
            "head_sha": str(run["head_sha"]),
            "head_repo": str(run["head_repository"]["full_name"]),
            "head_branch": str(run.get("head_branch") or ""),
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PostError(
            f"{event_path} is not a workflow_run event ({type(exc).__name__}: {exc}): run "
            "this from a workflow triggered by `on: workflow_run`"
        ) from None
    if found["event"] != "pull_request":
        raise PostError(
            f"the triggering run came from a {found['event']} event, not a pull request"
        )
    return found


def pull_request(api: API, repo: str, run: dict[str, str]) -> dict[str, Any] | None:
    """The open pull request of ``repo`` whose head is the run's commit in the run's head
    repository (None: none, e.g. pushed again since the run)."""
    sha, head_repo = run["head_sha"], run["head_repo"]
    candidates = api.call("GET", f"/repos/{repo}/commits/{sha}/pulls")
    if not candidates and run["head_branch"]:
        # A fork's commit may not be listed by commit: ask by its branch too.
        owner = head_repo.split("/", 1)[0]
        head = urllib.parse.quote(f"{owner}:{run['head_branch']}", safe="")
        candidates = api.call("GET", f"/repos/{repo}/pulls?state=open&head={head}")
    matching = [
        pr
        for pr in candidates or []
        if pr.get("state") == "open"
        and (pr.get("head") or {}).get("sha") == sha
        and ((pr.get("head") or {}).get("repo") or {}).get("full_name") == head_repo
        and ((pr.get("base") or {}).get("repo") or {}).get("full_name") == repo
    ]
    if len(matching) > 1:
        numbers = ", ".join(f"#{pr['number']}" for pr in matching)
        raise PostError(f"several open pull requests have the run's head {sha[:10]}: {numbers}")
    return matching[0] if matching else None


def body_of(path: Path) -> str:
    """The artifact's text as a comment body: cut to the limit, this workflow's marker
    first and nowhere else (the text cannot pass for another comment)."""
    text = path.read_text(encoding="utf-8", errors="replace").replace(MARKER, "")
    if len(text) > BODY_LIMIT:
        text = text[:BODY_LIMIT] + "\n\n*(cut to GitHub's comment limit)*\n"
    return f"{MARKER}\n{text.lstrip()}"


def post(
    api: API,
    repo: str,
    run: dict[str, str],
    body_path: Path,
    number_path: Path | None,
    author: str,
) -> str:
    """Post or update the comment; returns what was done, for the log."""
    if not body_path.is_file():
        return f"no comment was built ({body_path} does not exist): nothing to post"
    claimed = _claimed_number(number_path)
    pr = pull_request(api, repo, run)
    if pr is None:
        return (
            f"no open pull request of {repo} has the run's head {run['head_sha'][:10]} from "
            f"{run['head_repo']} (pushed again since, or closed): nothing posted"
        )
    number = int(pr["number"])
    if claimed is not None and claimed != number:
        raise Refused(
            f"{number_path} names pull request #{claimed}, but the run's head "
            f"{run['head_sha'][:10]} from {run['head_repo']} is pull request #{number}: the "
            "artifact was written by the pull request's own code and is not trusted; "
            "nothing posted"
        )
    body = body_of(body_path)
    comments = api.pages(f"/repos/{repo}/issues/{number}/comments")
    mine = [
        c
        for c in comments
        if (c.get("user") or {}).get("login") == author
        and str(c.get("body") or "").startswith(MARKER)
    ]
    if mine:
        api.call("PATCH", f"/repos/{repo}/issues/comments/{mine[0]['id']}", {"body": body})
        return f"updated comment {mine[0]['id']} on pull request #{number}"
    if "pytest-infperf: no changes in" in body[:300]:
        return f"nothing changed and no comment yet on pull request #{number}: nothing posted"
    made = api.call("POST", f"/repos/{repo}/issues/{number}/comments", {"body": body})
    return f"posted comment {made.get('id')} on pull request #{number}"


def _claimed_number(path: Path | None) -> int | None:
    if path is None or not path.is_file():
        return None
    text = path.read_text(errors="replace").strip()
    if not text.isdigit() or int(text) < 1:
        raise Refused(f"{path} does not hold a pull-request number ({text[:20]!r}): nothing posted")
    return int(text)


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("body", help="the comment body perf.yml built (comment.md of its artifact)")
    p.add_argument(
        "--pr-number-file",
        default=None,
        help="the artifact's pr-number.txt: only cross-checked against the run's pull request "
        "(a mismatch posts nothing, exit 1)",
    )
    p.add_argument(
        "--author",
        default=DEFAULT_AUTHOR,
        help=f"the token's user: only its comments are updated (default {DEFAULT_AUTHOR})",
    )
    return p


def run(args: argparse.Namespace) -> int:
    env = os.environ
    missing = [
        k for k in ("GITHUB_REPOSITORY", "GITHUB_EVENT_PATH", "GITHUB_TOKEN") if not env.get(k)
    ]
    try:
        if missing:
            raise PostError(
                f"{', '.join(missing)} not set: run this in the workflow_run job, with "
                "GITHUB_TOKEN: ${{ github.token }} in the step's env"
            )
        api = API(env.get("GITHUB_API_URL") or "https://api.github.com", env["GITHUB_TOKEN"])
        said = post(
            api,
            env["GITHUB_REPOSITORY"],
            the_run(env["GITHUB_EVENT_PATH"]),
            Path(args.body),
            Path(args.pr_number_file) if args.pr_number_file else None,
            args.author,
        )
    except Refused as exc:
        print(f"::error title=pull-request comment refused::{exc}", flush=True)
        print(f"infperf post-comment: refused: {exc}", file=sys.stderr)
        return REFUSED
    except PostError as exc:
        print(f"infperf post-comment: error: {exc}", file=sys.stderr)
        return FAILED
    print(said)
    return POSTED


def main(argv: Sequence[str] | None = None) -> int:
    parser = add_arguments(
        argparse.ArgumentParser(
            prog="infperf post-comment", description=(__doc__ or "").split("\n\n")[0]
        )
    )
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
