"""Crash-safe file writes.

A write goes to a temporary file in the destination's own directory (same filesystem, so
``os.replace`` is atomic), is flushed and fsynced, then replaces the destination; the
directory is fsynced too so the rename survives a power cut. A process killed mid-write
leaves the old file intact and at worst a ``.tmp-infperf-<pid>-*`` file, which readers
ignore (it is not named like a baseline) and :func:`clean_stale_temps` removes as soon as
its writer is gone.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

TEMP_PREFIX = ".tmp-infperf-"
#: Temp files older than this are leftovers of killed writers, not writes in progress.
STALE_AFTER_S = 3600.0


def atomic_write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


@contextlib.contextmanager
def atomic_path(path: Path, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer that only takes a file name (an ONNX
    exporter); when the block ends it is fsynced and replaces ``path``, or is removed if
    the block raised. Named like every temp file here, so readers and
    :func:`clean_stale_temps` treat it the same."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(
        prefix=f"{TEMP_PREFIX}{os.getpid()}-", suffix=suffix, dir=path.parent
    )
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        # mkstemp creates the file 0600; give it the mode an ordinary open() would (0666
        # less the umask), or a team's baselines and reports end up readable by one user.
        tmp.chmod(0o666 & ~_umask())
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _umask() -> int:
    # Linux says it in /proc without changing it; elsewhere the only way to read the umask
    # is to set it and set it straight back (a window in which another thread's new file
    # would get 022).
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def lock_dir() -> Path:
    """This user's folder of lock files, shared by every pytest-infperf process here. Locks
    live in the system temp directory, never beside the files they guard: lock files in
    ``baselines/`` would end up committed."""
    user = os.getuid() if hasattr(os, "getuid") else "user"
    folder = Path(tempfile.gettempdir()) / f"pytest-infperf-locks-{user}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _writer_alive(name: str) -> bool:
    pid_text = name[len(TEMP_PREFIX) :].split("-", 1)[0]
    if not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def clean_stale_temps(directory: Path, older_than_s: float = STALE_AFTER_S) -> int:
    """Remove temp files that killed writers left behind (their process is gone, or they
    are older than an hour); returns how many."""
    removed = 0
    now = time.time()
    try:
        entries = list(Path(directory).glob(f"{TEMP_PREFIX}*"))
    except OSError:
        return 0
    for entry in entries:
        try:
            if not _writer_alive(entry.name) or now - entry.stat().st_mtime > older_than_s:
                entry.unlink()
                removed += 1
        except OSError:
            continue
    return removed
