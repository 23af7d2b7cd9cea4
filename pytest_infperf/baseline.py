"""Baselines on disk: ``<baselines>/<environment-key>/<commit-sha>.json``.

A baseline file is the results document of one commit in one environment. Reads are
bounded in size and validated against the JSON Schema before anything in them is used;
a bad file is an error that names the file and what to do, never a silent "no baseline".
Writes take a cross-process lock, merge with what is stored, and replace the file
atomically, so concurrent savers lose nothing and a killed saver corrupts nothing.
Baselines are data: JSON only, nothing in them is executed or unpickled.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .fsutil import atomic_write_text, clean_stale_temps, lock_dir
from .results import SCHEMA_VERSION, bench_key, document, dumps, now_iso

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
KEY_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{0,119}$")
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
LOCK_TIMEOUT_S = 120.0
_SCHEMA_FILE = Path(__file__).with_name("schema") / "results-v1.schema.json"


class BaselineFileError(Exception):
    """A baseline or results file that cannot be used; the message names it and the fix."""

    def __init__(self, path: Path | str, problem: str, fix: str) -> None:
        self.path = str(path)
        self.problem = problem
        self.fix = fix
        super().__init__(f"{path}: {problem}. {fix}")


_FIX_RESTORE = (
    "If it is tracked, restore it with `git checkout -- <file>`; otherwise delete it and "
    "save the baseline again with --perf-save"
)


def _validator() -> Any:
    import jsonschema

    schema = json.loads(_SCHEMA_FILE.read_text())
    return jsonschema.Draft202012Validator(schema)


_cached_validator: list[Any] = []


def validate(doc: Any, path: Path | str) -> dict[str, Any]:
    """Check a parsed document: version first (a newer one gets an upgrade message), then
    the schema. Returns the document or raises :class:`BaselineFileError`."""
    if not isinstance(doc, dict):
        raise BaselineFileError(
            path,
            f"is not a pytest-infperf results document (top level is a "
            f"{type(doc).__name__}, expected an object)",
            _FIX_RESTORE,
        )
    version = doc.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise BaselineFileError(
            path,
            f"was written by a newer pytest-infperf (schema version {version}; this one "
            f"reads version {SCHEMA_VERSION})",
            "Upgrade pytest-infperf (pip install -U pytest-infperf) to read it",
        )
    if version != SCHEMA_VERSION:
        raise BaselineFileError(
            path,
            f"is not a pytest-infperf results document (schema_version is {version!r}, "
            f"expected {SCHEMA_VERSION})",
            "Point --perf-compare at a file written by --perf-json or --perf-save",
        )
    if not _cached_validator:
        _cached_validator.append(_validator())
    errors = sorted(_cached_validator[0].iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(top level)"
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        raise BaselineFileError(
            path,
            f"does not match the results schema at {where}: {first.message[:200]}{more}",
            _FIX_RESTORE,
        )
    keys = [b.get("key") or bench_key(b["nodeid"], b.get("name")) for b in doc["benchmarks"]]
    if len(set(keys)) != len(keys):
        raise BaselineFileError(path, "lists the same benchmark twice", _FIX_RESTORE)
    return doc


def read_document(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """Read and validate a results or baseline file, refusing absurd sizes unread."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise BaselineFileError(
            path, "does not exist", "Check the path, or save a baseline first with --perf-save"
        ) from None
    except OSError as exc:
        raise BaselineFileError(
            path, f"cannot be read ({exc.strerror})", "Check its permissions"
        ) from None
    if not path.is_file():
        raise BaselineFileError(path, "is not a regular file", "Point at a JSON file")
    if size == 0:
        raise BaselineFileError(
            path, "is empty (an interrupted write or a truncated checkout?)", _FIX_RESTORE
        )
    if size > max_bytes:
        raise BaselineFileError(
            path,
            f"is {size / 2**20:.0f} MiB, over the {max_bytes / 2**20:.0f} MiB limit for "
            "baseline files, so it was not read",
            "If it is genuine, raise ini infperf_max_baseline_mb; otherwise delete it",
        )
    try:
        with path.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise BaselineFileError(
            path, f"cannot be read ({exc.strerror})", "Check its permissions"
        ) from None
    return parse_bytes(raw, path)


def parse_bytes(raw: bytes, path: Path | str) -> dict[str, Any]:
    """Decode, parse and validate a document's bytes; ``path`` names it in errors."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BaselineFileError(
            path, f"is not UTF-8 text (byte {exc.start})", _FIX_RESTORE
        ) from None
    if "<<<<<<<" in text and ">>>>>>>" in text:
        raise BaselineFileError(
            path,
            "contains git merge-conflict markers",
            "Resolve the conflict (keep one side: git checkout --ours/--theirs -- <file>)",
        )
    try:
        doc = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise BaselineFileError(
            path,
            f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}; "
            "truncated or edited by hand?)",
            _FIX_RESTORE,
        ) from None
    except ValueError as exc:
        raise BaselineFileError(path, str(exc), _FIX_RESTORE) from None
    except RecursionError:
        raise BaselineFileError(
            path, "is nested too deeply to be a results document", _FIX_RESTORE
        ) from None
    return validate(doc, path)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"contains the non-standard JSON number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"contains the number {text[:40]}, which overflows to infinity")
    return value


@dataclasses.dataclass(frozen=True)
class Location:
    """Where a baseline was found."""

    path: Path
    sha: str
    env_key: str
    distance: int


class BaselineStore:
    """The baselines directory."""

    def __init__(self, root: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes

    def path_for(self, env_key: str, sha: str) -> Path:
        # Both parts are validated, so no name from a test id, a ref or a file can steer
        # a path outside the baselines directory.
        if not KEY_RE.match(env_key):
            raise ValueError(f"invalid environment key {env_key!r}")
        if not SHA_RE.match(sha):
            raise ValueError(f"invalid commit sha {sha!r}")
        return self.root / env_key / f"{sha}.json"

    def env_keys(self) -> list[str]:
        try:
            return sorted(
                p.name for p in self.root.iterdir() if p.is_dir() and KEY_RE.match(p.name)
            )
        except OSError:
            return []

    def commits(self, env_key: str) -> list[str]:
        try:
            return sorted(
                p.stem for p in (self.root / env_key).glob("*.json") if SHA_RE.match(p.stem)
            )
        except OSError:
            return []

    def load(self, path: Path) -> dict[str, Any]:
        return read_document(path, self.max_bytes)

    def find(self, shas: Iterable[str], env_key: str) -> Location | None:
        """The nearest of ``shas`` (nearest first) with a baseline for ``env_key``."""
        for distance, sha in enumerate(shas):
            path = self.path_for(env_key, sha)
            if path.is_file():
                return Location(path, sha, env_key, distance)
        return None

    def find_other_env(self, shas: Iterable[str], env_key: str) -> Location | None:
        """The nearest baseline of another environment, to explain an ``incomparable``."""
        others = [k for k in self.env_keys() if k != env_key]
        for distance, sha in enumerate(shas):
            for key in others:
                path = self.path_for(key, sha)
                if path.is_file():
                    return Location(path, sha, key, distance)
        return None

    def check_writable(self, env_key: str, sha: str) -> Path:
        """Before a run: the target exists only as a valid document (else it would be
        replaced and lost), and the directory can be created."""
        path = self.path_for(env_key, sha)
        if path.exists():
            self.load(path)
        return path

    def save(
        self,
        env_key: str,
        sha: str,
        benchmarks: list[dict[str, Any]],
        environment: dict[str, Any],
        commit: dict[str, Any],
        **extra: Any,
    ) -> tuple[Path, int, int]:
        """Merge ``benchmarks`` into the stored baseline of ``sha`` and write it atomically.

        Benchmarks not in this run keep their stored entries; a benchmark measured again
        replaces its stored entry (the latest measurement is the baseline). Returns the
        path, the number of entries written by this run and the total.
        """
        from filelock import FileLock

        path = self.path_for(env_key, sha)
        path.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_temps(path.parent)
        with FileLock(str(lock_path(path)), timeout=LOCK_TIMEOUT_S):
            merged: dict[str, dict[str, Any]] = {}
            if path.exists():
                merged.update(iter_entries(self.load(path)))
            saved_at = now_iso()
            for new in benchmarks:
                entry = dict(new)
                entry.pop("comparison", None)  # a verdict belongs to a run, not a baseline
                entry["saved_at"] = saved_at
                merged[entry["key"]] = entry
            doc = document(merged.values(), environment, commit, mode="baseline", **extra)
            atomic_write_text(path, dumps(doc))
        return path, len(benchmarks), len(merged)


def lock_path(path: Path) -> Path:
    """The cross-process lock of a baseline file, in :func:`~.fsutil.lock_dir`: every saver
    on this machine agrees on it (a hash of the resolved path)."""
    import hashlib

    digest = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:24]
    return lock_dir() / f"{digest}.lock"


def iter_entries(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for entry in doc["benchmarks"]:
        yield entry.get("key") or bench_key(entry["nodeid"], entry.get("name")), entry
