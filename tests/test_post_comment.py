"""The pull-request comment of perf-comment.yml goes to the triggering run's own pull request,
looked up through the API from the run's head commit, never to a number the pull request's
code wrote into its artifact. GitHub's API is faked at the HTTP boundary: a
local server that the real poster, run as the workflow runs it (the standard library alone,
no site-packages), is pointed at through ``GITHUB_API_URL``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT

REPO = "owner/project"
FORK = "mallory/project"
SHA = "a" * 40
MARKER = "<!-- pytest-infperf:comment -->"
BOT = "github-actions[bot]"


def _pr(number: int, sha: str, head_repo: str, branch: str = "feature") -> dict[str, Any]:
    return {
        "number": number,
        "state": "open",
        "head": {"sha": sha, "ref": branch, "repo": {"full_name": head_repo}},
        "base": {"ref": "main", "repo": {"full_name": REPO}},
    }


class FakeGitHub:
    """The few endpoints the poster uses, over an in-memory repository; every request is
    recorded."""

    def __init__(self) -> None:
        self.pulls: list[dict[str, Any]] = []
        #: What GET /commits/{sha}/pulls answers (GitHub may not list a fork's commit).
        self.by_commit: dict[str, list[int]] = {}
        self.comments: dict[int, list[dict[str, Any]]] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.next_id = 100

    def writes(self) -> list[tuple[str, str, Any]]:
        return [r for r in self.requests if r[0] != "GET"]

    def answer(self, method: str, url: str, body: Any) -> tuple[int, Any]:
        self.requests.append((method, url, body))
        parts = urllib.parse.urlsplit(url)
        query = dict(urllib.parse.parse_qsl(parts.query))
        path = parts.path
        if not path.startswith(f"/repos/{REPO}/"):
            return 404, {"message": "Not Found"}
        rest = path[len(f"/repos/{REPO}/") :]
        if m := re.fullmatch(r"commits/([0-9a-f]{40})/pulls", rest):
            wanted = self.by_commit.get(m[1], [])
            return 200, [p for p in self.pulls if p["number"] in wanted]
        if rest == "pulls":
            owner, _, branch = query.get("head", "").partition(":")
            return 200, [
                p
                for p in self.pulls
                if p["state"] == query.get("state", "open")
                and p["head"]["ref"] == branch
                and p["head"]["repo"]["full_name"].split("/")[0] == owner
            ]
        if m := re.fullmatch(r"issues/(\d+)/comments", rest):
            listed = self.comments.setdefault(int(m[1]), [])
            if method == "POST":
                made = {"id": self.next_id, "user": {"login": BOT}, "body": body["body"]}
                self.next_id += 1
                listed.append(made)
                return 201, made
            page, per = int(query.get("page", 1)), int(query.get("per_page", 30))
            return 200, listed[(page - 1) * per : page * per]
        if (m := re.fullmatch(r"issues/comments/(\d+)", rest)) and method == "PATCH":
            for listed in self.comments.values():
                for c in listed:
                    if c["id"] == int(m[1]):
                        c["body"] = body["body"]
                        return 200, c
            return 404, {"message": "Not Found"}
        return 404, {"message": "Not Found"}


@pytest.fixture
def github() -> Iterator[tuple[FakeGitHub, str]]:
    fake = FakeGitHub()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            if self.headers.get("Authorization") != "Bearer t0ken":
                self._send(401, {"message": "Bad credentials"})
                return
            size = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(size)) if size else None
            self._send(*fake.answer(self.command, self.path, body))

        def _send(self, status: int, data: Any) -> None:
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = do_PATCH = _serve

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _post(
    tmp_path: Path,
    url: str,
    *,
    body: str = f"{MARKER}\n## pytest-infperf: 1 regression in 2 benchmarks\n",
    number: str | None = "7",
    event: str = "pull_request",
    head_repo: str = FORK,
) -> subprocess.CompletedProcess[str]:
    """The poster as perf-comment.yml runs it: from a checkout, standard library only."""
    (tmp_path / "perf-results").mkdir(exist_ok=True)
    (tmp_path / "perf-results" / "comment.md").write_text(body)
    args = ["perf-results/comment.md"]
    if number is not None:
        (tmp_path / "perf-results" / "pr-number.txt").write_text(number + "\n")
        args += ["--pr-number-file", "perf-results/pr-number.txt"]
    payload = {
        "workflow_run": {
            "id": 1,
            "event": event,
            "head_sha": SHA,
            "head_branch": "feature",
            "head_repository": {"full_name": head_repo},
        }
    }
    (tmp_path / "event.json").write_text(json.dumps(payload))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")},
        "PYTHONPATH": str(ROOT),
        "GITHUB_API_URL": url,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
        "GITHUB_TOKEN": "t0ken",
    }
    return subprocess.run(
        [sys.executable, "-S", "-m", "pytest_infperf.cli.post", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_comment_goes_to_the_runs_own_pull_request_and_is_updated_there(
    github: tuple[FakeGitHub, str], tmp_path: Path
) -> None:
    fake, url = github
    fake.pulls = [_pr(7, SHA, FORK), _pr(8, "b" * 40, "owner/project", "other")]
    fake.by_commit = {SHA: [7]}
    out = _post(tmp_path, url)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "posted comment 100 on pull request #7" in out.stdout
    (posted,) = fake.comments[7]
    assert posted["body"].startswith(MARKER + "\n## pytest-infperf: 1 regression")
    assert posted["body"].count(MARKER) == 1
    # Someone else's comment that copies the marker is never the one updated.
    fake.comments[7].insert(0, {"id": 5, "user": {"login": "mallory"}, "body": MARKER + " mine"})
    out = _post(tmp_path, url, body="## pytest-infperf: 2 regressions in 2 benchmarks\n")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "updated comment 100 on pull request #7" in out.stdout
    assert fake.comments[7][0]["body"] == MARKER + " mine"
    assert "2 regressions" in fake.comments[7][1]["body"]
    assert 8 not in fake.comments


def test_an_interrupted_runs_comment_replaces_a_regression_saying_it_is_incomplete(
    github: tuple[FakeGitHub, str], tmp_path: Path
) -> None:
    """The comment is updated in place on every run: after a run that showed a regression,
    an interrupted run's partial results (every benchmark it reached unchanged) must say
    the run did not complete, never "no changes"."""
    fake, url = github
    fake.pulls = [_pr(7, SHA, FORK)]
    fake.by_commit = {SHA: [7]}
    assert _post(tmp_path, url).returncode == 0  # the earlier run: 1 regression
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_cut.py").write_text(
        "def test_a(infer_bench):\n"
        "    infer_bench(lambda: None, max_time=0.01, min_time=0.01)\n"
        "    raise KeyboardInterrupt\n\n"
        "def test_b(infer_bench):\n"
        "    infer_bench(lambda: None)\n"
    )
    # This checkout's package, not an installed one.
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    cut = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--perf-json=r.json"],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cut.returncode == 2, cut.stdout[-2000:]
    built = subprocess.run(
        [sys.executable, "-m", "pytest_infperf", "comment", "r.json", "-o", "comment.md"],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert built.returncode == 0, built.stderr
    out = _post(tmp_path, url, body=(suite / "comment.md").read_text())
    assert out.returncode == 0, out.stdout + out.stderr
    assert "updated comment 100 on pull request #7" in out.stdout
    (updated,) = fake.comments[7]
    assert updated["body"].startswith(
        MARKER + "\n## pytest-infperf: incomplete run, 1 benchmark measured"
    )
    assert "no changes" not in updated["body"]


def test_a_pr_number_that_is_not_the_runs_is_refused_and_nothing_is_posted(
    github: tuple[FakeGitHub, str], tmp_path: Path
) -> None:
    """The fork's run wrote another pull request's number into its artifact."""
    fake, url = github
    fake.pulls = [_pr(7, SHA, FORK), _pr(8, "b" * 40, "owner/project", "other")]
    fake.by_commit = {SHA: [7]}
    out = _post(tmp_path, url, number="8")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "names pull request #8, but the run's head aaaaaaaaaa" in out.stderr
    assert "is pull request #7" in out.stderr and "nothing posted" in out.stderr
    assert "::error title=pull-request comment refused::" in out.stdout
    assert fake.writes() == []
    for bad in ("8; rm -rf /", "-3", ""):
        out = _post(tmp_path, url, number=bad)
        assert out.returncode == 1 and "does not hold a pull-request number" in out.stderr
    assert fake.writes() == []


@pytest.mark.parametrize("case", ["head moved", "other head repository", "closed"])
def test_no_pull_request_with_the_runs_head_means_nothing_is_posted(
    github: tuple[FakeGitHub, str], tmp_path: Path, case: str
) -> None:
    fake, url = github
    pr = {
        "head moved": _pr(7, "c" * 40, FORK),  # pushed again since the run
        "other head repository": _pr(7, SHA, "eve/project"),
        "closed": {**_pr(7, SHA, FORK), "state": "closed"},
    }[case]
    fake.pulls = [pr]
    fake.by_commit = {SHA: [7]}
    out = _post(tmp_path, url, number=None)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no open pull request of owner/project has the run's head aaaaaaaaaa" in out.stdout
    assert "nothing posted" in out.stdout
    assert fake.writes() == []


def test_a_forks_commit_is_found_by_its_branch(
    github: tuple[FakeGitHub, str], tmp_path: Path
) -> None:
    """GitHub may not list a fork's commit under /commits/{sha}/pulls: the poster asks for
    open pull requests of the fork's branch, and still checks head commit and repository."""
    fake, url = github
    fake.pulls = [_pr(7, SHA, FORK)]
    out = _post(tmp_path, url)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "posted comment" in out.stdout and len(fake.comments[7]) == 1
    assert any("head=mallory%3Afeature" in r[1] for r in fake.requests)


def test_the_artifacts_text_is_only_a_body(github: tuple[FakeGitHub, str], tmp_path: Path) -> None:
    """Cut to GitHub's limit, with the workflow's marker once, first."""
    fake, url = github
    fake.pulls = [_pr(7, SHA, FORK)]
    fake.by_commit = {SHA: [7]}
    text = "## pytest-infperf: 1 regression\n" + (MARKER + "x" * 1000) * 120
    out = _post(tmp_path, url, body=text)
    assert out.returncode == 0, out.stdout + out.stderr
    (posted,) = fake.comments[7]
    assert len(posted["body"]) <= 65_536
    assert posted["body"].startswith(MARKER + "\n## pytest-infperf")
    assert posted["body"].count(MARKER) == 1
    assert posted["body"].endswith("*(cut to GitHub's comment limit)*\n")


def test_bad_inputs_say_what_is_wrong(github: tuple[FakeGitHub, str], tmp_path: Path) -> None:
    fake, url = github
    out = _post(tmp_path, url, event="push")
    assert out.returncode == 2 and "came from a push event, not a pull request" in out.stderr
    fake.pulls = [_pr(7, SHA, FORK)]
    fake.by_commit = {SHA: [7]}
    out = _post(tmp_path, "http://127.0.0.1:1")  # nothing listens there
    assert out.returncode == 2 and "infperf post-comment: error: GET /repos/" in out.stderr
    assert "Traceback" not in out.stderr
    (tmp_path / "event.json").unlink()
    out = subprocess.run(
        [sys.executable, "-S", "-m", "pytest_infperf.cli.post", "x.md"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "GITHUB_REPOSITORY, GITHUB_EVENT_PATH, GITHUB_TOKEN not set" in out.stderr
    assert fake.writes() == []
