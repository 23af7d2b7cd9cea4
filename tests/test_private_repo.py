"""The baselines branch of a private repository, with the workflow as written: the checkout
keeps no credentials (``persist-credentials: false``), and the Action gives git the job's
token for the fetch and the push alone. A local bare repository served by ``git
http-backend`` behind an HTTP server that asks for that token stands in for GitHub; the
Action's steps run as GitHub runs them (tests/actions.py)."""

from __future__ import annotations

import base64
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .actions import event, run_action
from .conftest import BUSY_HEADER, fast_ini, git

pytest.importorskip("yaml")

#: The job's token, as GitHub hands it to a workflow.
TOKEN = "ghs_private0123456789abcdefTOKEN"
BACKEND = (
    Path(
        subprocess.run(
            ["git", "--exec-path"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    / "git-http-backend"
)
SUITE = (
    BUSY_HEADER
    + """

def test_model(infer_bench):
    infer_bench(lambda: busy(100 * FACTOR))
"""
)


class _Git(http.server.BaseHTTPRequestHandler):
    """git's smart HTTP protocol through ``git http-backend`` (CGI), for a client that
    logs in as GitHub's token does (Basic, x-access-token); anyone else gets a 401."""

    root = ""

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, *args: object) -> None:  # quiet: the test reads what it needs
        pass

    def _serve(self) -> None:
        login = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
        given = self.headers.get("Authorization", "")
        if given != f"Basic {login}":
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="private"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": self.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(length),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "REMOTE_USER": "x-access-token",  # logged in: receive-pack allowed
            "REMOTE_ADDR": "127.0.0.1",
        }
        done = subprocess.run([BACKEND], input=body, env=env, capture_output=True, check=False)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode().splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """``http://127.0.0.1:PORT/origin.git``: a bare repository only the token reads or
    writes."""
    (tmp_path / "served").mkdir()
    git(tmp_path / "served", "init", "-q", "--bare", "-b", "main", "origin.git")
    handler = type("Handler", (_Git,), {"root": str(tmp_path / "served")})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/origin.git"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _login() -> str:
    """What actions/checkout passes git for the clone alone (persist-credentials: false)."""
    login = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    return f"http.extraHeader=Authorization: Basic {login}"


def _checkout(url: str, folder: Path, branch: str) -> Path:
    """actions/checkout with fetch-depth 0 and persist-credentials: false: the token is
    used for the clone and not kept."""
    git(folder.parent, "-c", _login(), "clone", "-q", "-b", branch, url, folder.name)
    assert TOKEN not in (folder / ".git" / "config").read_text()
    return folder


def test_a_private_repositorys_baselines_branch_with_the_workflow_as_written(
    tmp_path: Path, server: str
) -> None:
    quick = "-p no:cacheprovider -o infperf_max_time=0.05"
    runner = {"tests": "tests", "python": sys.executable, "pytest-args": quick}
    job_env = {"GITHUB_SERVER_URL": server.rsplit("/", 1)[0]}
    github = {"token": TOKEN}

    source = tmp_path / "source"
    (source / "tests").mkdir(parents=True)
    (source / "tests" / "test_model.py").write_text(SUITE)
    (source / "tests" / "factor.txt").write_text("1.0")
    (source / "pytest.ini").write_text(fast_ini())
    (source / ".gitignore").write_text("baselines/\nperf-*/\n__pycache__/\n")
    git(source, "init", "-q", "-b", "main")
    git(source, "add", "-A")
    git(source, "commit", "-qm", "a model")
    git(source, "-c", _login(), "push", "-q", server, "main")

    # The push to main: the perf job saves, the push job stores the baselines on the
    # branch, both through the token the Action gives git.
    push = {
        **job_env,
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_REF_NAME": "main",
        "GITHUB_EVENT_PATH": event(tmp_path / "push.json"),
    }
    main = _checkout(server, tmp_path / "main", "main")
    saved = run_action(main, runner, push, github)
    assert not saved.failed and saved.output("mode") == "save", "\n".join(saved.log)
    storer = _checkout(server, tmp_path / "push-job", "main")
    shutil.copytree(main / "perf-shard", storer / "perf-shards" / "perf-shard-default-1")
    stored = run_action(storer, {"role": "push-baselines"}, push, github)
    assert not stored.failed, "\n".join(stored.log)
    assert "pushed 1 baseline file(s) to origin/infperf-baselines" in "\n".join(stored.log)

    # A pull request: the measuring job fetches the branch with the token, and compares.
    feature = tmp_path / "feature-source"
    git(tmp_path, "-c", _login(), "clone", "-q", server, feature.name)
    git(feature, "switch", "-q", "-c", "feature")
    (feature / "README.md").write_text("documented\n")
    git(feature, "add", "README.md")
    git(feature, "commit", "-qm", "docs")
    git(feature, "-c", _login(), "push", "-q", "origin", "feature")
    pr = {
        **job_env,
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_REF_NAME": "1/merge",
        "GITHUB_BASE_REF": "main",
        "GITHUB_EVENT_PATH": event(tmp_path / "pr.json", pull_request={"number": 1}),
    }
    checkout = _checkout(server, tmp_path / "pr", "feature")
    job = run_action(checkout, runner, pr, github)
    log = "\n".join(job.log)
    assert not job.failed, log
    assert "pulled 1 baseline file(s) from origin/infperf-baselines" in log
    assert job.output("benchmarks") == "1" and job.output("compared-to") == "origin/main"
    verdicts = job.output("verdicts")
    assert "no-baseline" not in verdicts, verdicts
    # The token is in no log, no file of the checkout, and not in the run's environment.
    for text in [log, "\n".join(saved.log), "\n".join(stored.log)]:
        assert TOKEN not in text
    for path in checkout.rglob("*"):
        if path.is_file() and path.stat().st_size < 2**20:
            assert TOKEN.encode() not in path.read_bytes(), path

    # Without the token (a workflow that gave none): the fetch fails, saying why and what
    # to do; nothing is measured against a branch it could not read.
    bare = _checkout(server, tmp_path / "no-token", "feature")
    refused = run_action(bare, runner, pr, {})
    said = " ".join("\n".join(refused.log).split())
    assert refused.failed
    assert "The remote asks for credentials (a private repository)" in said, said
    assert "gives git the job's token (github.token, with contents: read)" in said


def test_the_token_is_asked_only_by_its_own_server(
    tmp_path: Path, server: str, git_env: None
) -> None:
    """The helper answers for the token's server alone: a remote elsewhere (a mirror, a
    fork's URL a pull request planted in .git/config) never gets it."""
    from pytest_infperf.store import data_branch
    from pytest_infperf.store.git import GitError

    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", "repo")
    git(repo, "commit", "-q", "--allow-empty", "-m", "x")
    git(repo, "remote", "add", "origin", server)
    elsewhere = data_branch.Token(TOKEN, "http://localhost:1")
    with pytest.raises(GitError, match="The remote asks for credentials"):
        data_branch.pull(repo, repo / "baselines", token=elsewhere, log=lambda _: None)
    here = data_branch.Token(TOKEN, server.rsplit("/", 1)[0])
    assert data_branch.pull(repo, repo / "baselines", token=here, log=lambda _: None) == 0
    assert "***" in repr(here) and TOKEN not in repr(here)
