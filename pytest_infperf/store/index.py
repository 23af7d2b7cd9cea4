"""A derived index of a baselines folder, so that reading costs what is asked.

``infperf list``, ``history`` and ``report`` used to open, parse and validate every stored
document (about 0.5 s per 2 MB baseline, all of it held in memory at once). The index keeps,
per baseline file, its header (commit time, subject, dirty, benchmark count, compacted or
not, or the problem that makes it unreadable) and, per benchmark, the point a history plots
(median, interval, n, throughput), in one SQLite file. It is a cache: never committed,
never the only copy of anything, rebuilt from the files whenever they differ from what it
recorded (size, modification time and inode of each file are checked on every use, a
directory listing: milliseconds for ten thousand files). A file added, replaced or removed by
anyone (a save, a pull, a checkout, a hand edit) is re-read on the next use; only that file.

Where: ``$INFPERF_CACHE_DIR`` or ``$XDG_CACHE_HOME/pytest-infperf`` or
``~/.cache/pytest-infperf``, one file per baselines folder (a hash of its path). A damaged
or unwritable cache is not an error: it is removed and rebuilt, or the index runs in memory.
It also remembers each file's git blob id, so ``infperf baselines push/pull`` can tell what
changed without reading files that did not.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import sqlite3
from pathlib import Path
from typing import Any

from .baselines import SHA_RE, BaselineFileError, BaselineStore, iter_entries
from .compact import is_compact_document

#: Bump when the tables change: an index of another version is rebuilt.
VERSION = 2

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS files (
    env TEXT NOT NULL, sha TEXT NOT NULL,
    size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ino INTEGER NOT NULL,
    blob TEXT, created TEXT, time TEXT, subject TEXT, dirty INTEGER,
    benchmarks INTEGER, compact INTEGER, problem TEXT,
    PRIMARY KEY (env, sha)
);
CREATE TABLE IF NOT EXISTS points (
    env TEXT NOT NULL, key TEXT NOT NULL, sha TEXT NOT NULL,
    median REAL NOT NULL, ci_low REAL, ci_high REAL, n INTEGER, throughput REAL,
    PRIMARY KEY (env, key, sha)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS points_by_sha ON points (env, sha);
"""


def cache_dir() -> Path:
    explicit = os.environ.get("INFPERF_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "pytest-infperf"


def cache_path(root: Path) -> Path:
    digest = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:20]
    return cache_dir() / f"index-{digest}.sqlite"


def blob_id(data: bytes) -> str:
    """The id git gives these bytes as a blob (``git hash-object``)."""
    h = hashlib.sha1(b"blob %d\0" % len(data))  # git's object id, not a security hash
    h.update(data)
    return h.hexdigest()


@dataclasses.dataclass(frozen=True)
class Header:
    """One stored baseline, as ``infperf list`` shows it."""

    env: str
    sha: str
    created: str | None
    time: str | None
    subject: str | None
    dirty: bool
    benchmarks: int
    compact: bool
    problem: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class PointRow:
    sha: str
    median: float
    ci_low: float | None
    ci_high: float | None
    n: int
    throughput: float | None


class StoreIndex:
    """The index of one :class:`BaselineStore`; open with :meth:`open`, use as a context."""

    def __init__(self, store: BaselineStore, db: sqlite3.Connection) -> None:
        self.store = store
        self.db = db
        self._fresh: set[str] = set()

    @classmethod
    def open(cls, store: BaselineStore, path: Path | None = None) -> StoreIndex:
        target = path if path is not None else cache_path(store.root)
        try:
            return cls(store, _connect(target))
        except (sqlite3.Error, OSError):
            # Damaged (or from a crash mid-write of an old sqlite): start again; unwritable
            # (a read-only home): work in memory for this command.
            with contextlib.suppress(OSError):
                target.unlink()
            try:
                return cls(store, _connect(target))
            except (sqlite3.Error, OSError):
                return cls(store, _connect(None))

    def __enter__(self) -> StoreIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    # -- keeping it true ------------------------------------------------------------------

    def refresh(self, env: str) -> None:
        """Re-read the files of ``env`` that changed since the index saw them (once per
        command)."""
        if env in self._fresh:
            return
        on_disk = _scan(self.store.root / env)
        known = {
            sha: (size, mtime, ino)
            for sha, size, mtime, ino in self.db.execute(
                "SELECT sha, size, mtime_ns, ino FROM files WHERE env = ?", (env,)
            )
        }
        gone = [sha for sha in known if sha not in on_disk]
        stale = [sha for sha, stat in on_disk.items() if known.get(sha) != stat]
        if gone or stale:
            with self.db:
                for sha in gone:
                    self._forget(env, sha)
                for sha in stale:
                    self._read(env, sha, on_disk[sha])
        self._fresh.add(env)

    def add(self, env: str, sha: str, doc: dict[str, Any], data: bytes) -> None:
        """Record a document just written (a pull): no second read of the file."""
        path = self.store.path_for(env, sha)
        st = path.stat()
        with self.db:
            self._forget(env, sha)
            self._insert(env, sha, (st.st_size, st.st_mtime_ns, st.st_ino), doc, blob_id(data))

    def _forget(self, env: str, sha: str) -> None:
        self.db.execute("DELETE FROM files WHERE env = ? AND sha = ?", (env, sha))
        self.db.execute("DELETE FROM points WHERE env = ? AND sha = ?", (env, sha))

    def _read(self, env: str, sha: str, stat: tuple[int, int, int]) -> None:
        self._forget(env, sha)
        path = self.store.path_for(env, sha)
        try:
            data = path.read_bytes()
            doc = self.store.parse(data, path, full=False)  # what the index reads
        except BaselineFileError as exc:
            self.db.execute(
                "INSERT INTO files (env, sha, size, mtime_ns, ino, problem) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (env, sha, *stat, exc.problem),
            )
            return
        except OSError:
            return  # removed while we looked: the next refresh sees it gone
        self._insert(env, sha, stat, doc, blob_id(data))

    def _insert(
        self, env: str, sha: str, stat: tuple[int, int, int], doc: dict[str, Any], blob: str
    ) -> None:
        commit = doc.get("commit") or {}
        self.db.execute(
            "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
            (
                env,
                sha,
                *stat,
                blob,
                doc.get("created"),
                commit.get("time"),
                commit.get("subject"),
                int(bool(commit.get("dirty"))),
                len(doc["benchmarks"]),
                int(is_compact_document(doc)),
            ),
        )
        rows = []
        for key, entry in iter_entries(doc):
            stats = entry["stats"]
            if not stats.get("median"):
                continue
            rows.append(
                (
                    env,
                    key,
                    sha,
                    stats["median"],
                    stats.get("ci_low"),
                    stats.get("ci_high"),
                    int(stats.get("n", 0)),
                    entry.get("throughput"),
                )
            )
        self.db.executemany("INSERT OR REPLACE INTO points VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)

    # -- reading ----------------------------------------------------------------------------

    def headers(self, env: str) -> list[Header]:
        self.refresh(env)
        return [
            Header(env, sha, created, time, subject, bool(dirty), benchmarks or 0, bool(c), p)
            for sha, created, time, subject, dirty, benchmarks, c, p in self.db.execute(
                "SELECT sha, created, time, subject, dirty, benchmarks, compact, problem "
                "FROM files WHERE env = ? ORDER BY sha",
                (env,),
            )
        ]

    def problems(self, env: str, shas: set[str] | None = None) -> list[str]:
        self.refresh(env)
        return [
            f"{self.store.path_for(env, sha)}: {problem}"
            for sha, problem in self.db.execute(
                "SELECT sha, problem FROM files WHERE env = ? AND problem IS NOT NULL ORDER BY sha",
                (env,),
            )
            if shas is None or sha in shas
        ]

    def keys(self, env: str) -> list[str]:
        self.refresh(env)
        return [
            k for (k,) in self.db.execute("SELECT DISTINCT key FROM points WHERE env = ?", (env,))
        ]

    def points(self, env: str, key: str) -> list[PointRow]:
        """Every stored point of one benchmark (any order; the caller orders by history)."""
        self.refresh(env)
        return [
            PointRow(*row)
            for row in self.db.execute(
                "SELECT sha, median, ci_low, ci_high, n, throughput FROM points "
                "WHERE env = ? AND key = ?",
                (env, key),
            )
        ]

    def commit_info(self, env: str) -> dict[str, tuple[str | None, str | None]]:
        """``{sha: (time, subject)}`` of the readable baselines of ``env``."""
        self.refresh(env)
        return {
            sha: (time, subject)
            for sha, time, subject in self.db.execute(
                "SELECT sha, time, subject FROM files WHERE env = ? AND problem IS NULL", (env,)
            )
        }

    def blobs(self, env: str) -> dict[str, str]:
        """``{sha: git blob id}`` of the files of ``env`` (damaged ones included)."""
        self.refresh(env)
        missing = [
            sha
            for (sha,) in self.db.execute(
                "SELECT sha FROM files WHERE env = ? AND blob IS NULL", (env,)
            )
        ]
        if missing:
            with self.db:
                for sha in missing:
                    with contextlib.suppress(OSError):
                        data = self.store.path_for(env, sha).read_bytes()
                        self.db.execute(
                            "UPDATE files SET blob = ? WHERE env = ? AND sha = ?",
                            (blob_id(data), env, sha),
                        )
        return dict(
            self.db.execute(
                "SELECT sha, blob FROM files WHERE env = ? AND blob IS NOT NULL", (env,)
            )
        )


def _scan(folder: Path) -> dict[str, tuple[int, int, int]]:
    found: dict[str, tuple[int, int, int]] = {}
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return found
    for entry in entries:
        name = entry.name
        if not name.endswith(".json") or not SHA_RE.match(name[:-5]):
            continue
        try:
            st = entry.stat()
        except OSError:
            continue
        if entry.is_file():
            found[name[:-5]] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return found


def _connect(path: Path | None) -> sqlite3.Connection:
    if path is None:
        db = sqlite3.connect(":memory:")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(path), timeout=60.0)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
    row = None
    with contextlib.suppress(sqlite3.Error):
        row = db.execute("SELECT value FROM meta WHERE name = 'version'").fetchone()
    if row is None or row[0] != str(VERSION):
        with db:
            for table in ("meta", "files", "points"):
                db.execute(f"DROP TABLE IF EXISTS {table}")
    db.executescript(_TABLES)
    with db:
        db.execute("INSERT OR REPLACE INTO meta VALUES ('version', ?)", (str(VERSION),))
    # No integrity check here: PRAGMA quick_check reads the whole file (2.7 s at 3,000
    # baselines). A file that is not a database fails the statements above; the caller
    # then removes it and starts again.
    return db
