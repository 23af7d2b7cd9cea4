"""A worker process's own helpers: ending it with everything it started, and the path of
its socket."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill a worker and every process it started (its own process group, made at spawn)
    and reap it: a worker is never forgotten while it or a child of it still runs (it would
    hold its GPU context, look like a GPU tenant, and run on in a deleted worktree)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


#: AF_UNIX paths are limited to 108 bytes on Linux (104 on macOS), less than a deep
#: TMPDIR (macOS's /var/folders/..., a test's tmp_path, infperf bisect's steps) leaves.
SOCKET_PATH_MAX = 100


def socket_path(folder: Path, name: str) -> str:
    """The worker's socket in ``folder``, or in a short private folder under /tmp when that
    path would be too long for AF_UNIX (removed at exit)."""
    path = str(folder / f"{name}.sock")
    if len(path.encode()) <= SOCKET_PATH_MAX or not Path("/tmp").is_dir():
        return path
    short = Path(tempfile.mkdtemp(prefix="ipab-", dir="/tmp"))  # mode 0700: only us
    atexit.register(shutil.rmtree, short, ignore_errors=True)
    return str(short / f"{name}.sock")
