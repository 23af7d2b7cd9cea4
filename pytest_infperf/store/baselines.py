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
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock

from ..core.fsutil import atomic_write_text, clean_stale_temps, lock_dir
from ..core.results import SCHEMA_VERSION, bench_key, document, dumps, now_iso
from .compact import compact_document, dumps_compact, is_compact_document

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
KEY_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{0,119}$")
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
#: In each environment's folder: the commits pruned on purpose (see BaselineStore.pruned).
PRUNED = "pruned.txt"
LOCK_TIMEOUT_S = 120.0
_SCHEMA_FILE = Path(__file__).parents[1] / "schema" / "results-v1.schema.json"


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
    """The schema's validator, less the per-item rules of the raw sample arrays: checking
    each sample through jsonschema was most of the cost of loading a baseline (0.5 s for
    2 MB). :func:`_check_samples` checks those items in a plain loop, with the same messages."""
    import jsonschema  # noqa: PLC0415 (jsonschema: only when a document is validated)

    schema = json.loads(_SCHEMA_FILE.read_text())
    defs = schema["$defs"]
    for props, field in (
        (defs["benchmark"]["properties"], "samples"),
        (defs["benchmark"]["properties"], "warmup_samples"),
        (defs["series"]["properties"], "samples"),
    ):
        props[field] = {"type": "array"}
    _loosen_arrays(defs["extra"])
    # JSON Schema counts 0.0 as an integer; a count written as a float is not one this
    # plugin wrote, and a reader would then index or range over a float.
    base = jsonschema.Draft202012Validator
    ints = base.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
    )
    return jsonschema.validators.extend(base, type_checker=ints)(schema)


def _loosen_arrays(schema: dict[str, Any]) -> None:
    """Drop the per-item rule of every number array in ``schema`` (``extra``'s sample
    arrays: a settling's, an A/B's, CUDA's enqueue and device times), for the same cost:
    their one reader, the HTML report, takes their items through ``record.numbers``."""
    for key, sub in list(schema.get("properties", {}).items()):
        if sub.get("type") == "array" and sub.get("items", {}).get("type") == "number":
            schema["properties"][key] = {"type": "array"}
        elif sub.get("type") == "object":
            _loosen_arrays(sub)


def _first_bad(values: list[Any], strict: bool) -> tuple[int, str] | None:
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return i, f"{v!r} is not of type 'number'"
        if strict and v <= 0:
            return i, f"{v!r} is less than or equal to the minimum of 0"
        if not strict and v < 0:
            return i, f"{v!r} is less than the minimum of 0"
    return None


def _check_samples(doc: dict[str, Any], path: Path | str) -> None:
    for i, entry in enumerate(doc["benchmarks"]):
        arrays = [(f"benchmarks/{i}/samples", entry["samples"], True)]
        arrays.append((f"benchmarks/{i}/warmup_samples", entry["warmup_samples"], False))
        gen = entry.get("generation")
        if isinstance(gen, dict):
            for metric, series in sorted(gen.items()):
                if isinstance(series, dict) and isinstance(series.get("samples"), list):
                    arrays.append(
                        (f"benchmarks/{i}/generation/{metric}/samples", series["samples"], False)
                    )
        for where, values, strict in arrays:
            bad = _first_bad(values, strict)
            if bad is not None:
                raise BaselineFileError(
                    path,
                    f"does not match the results schema at {where}/{bad[0]}: {bad[1]}",
                    _FIX_RESTORE,
                )


_cached_validator: list[Any] = []


def validate(doc: Any, path: Path | str, full: bool = True) -> dict[str, Any]:
    """Check a parsed document: version first (a newer one gets an upgrade message), then
    the schema. Returns the document or raises :class:`BaselineFileError`.

    ``full=False`` checks only what the index and a pull rely on (the version, the commit,
    each entry's key and statistics): the JSON Schema walks every sample of every entry,
    0.5 s for a 2 MB baseline, which would make ten thousand files cost an hour. A document
    is still checked in full when it is loaded to be used (a comparison, show, compare)."""
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
    if not full:
        return _light(doc, path)
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
    _check_samples(doc, path)
    keys = [b.get("key") or bench_key(b["nodeid"], b.get("name")) for b in doc["benchmarks"]]
    if len(set(keys)) != len(keys):
        raise BaselineFileError(path, "lists the same benchmark twice", _FIX_RESTORE)
    return doc


def _light(doc: dict[str, Any], path: Path | str) -> dict[str, Any]:
    def bad(where: str, what: str) -> BaselineFileError:
        return BaselineFileError(
            path, f"does not match the results schema at {where}: {what}", _FIX_RESTORE
        )

    if not isinstance(doc.get("benchmarks"), list):
        raise bad("benchmarks", "not an array")
    if not isinstance(doc.get("commit"), (dict, type(None))):
        raise bad("commit", "not an object or null")
    keys = set()
    for i, entry in enumerate(doc["benchmarks"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("nodeid"), str):
            raise bad(f"benchmarks/{i}", "not a benchmark entry (no nodeid)")
        stats = entry.get("stats")
        if not isinstance(stats, dict):
            raise bad(f"benchmarks/{i}/stats", "not an object")
        for field in ("median", "ci_low", "ci_high"):
            value = stats.get(field)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float))
            ):
                raise bad(f"benchmarks/{i}/stats/{field}", f"{value!r} is not a number")
        keys.add(entry.get("key") or bench_key(entry["nodeid"], entry.get("name")))
    if len(keys) != len(doc["benchmarks"]):
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
    _check_size(size, max_bytes, path)
    try:
        with path.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise BaselineFileError(
            path, f"cannot be read ({exc.strerror})", "Check its permissions"
        ) from None
    return parse_bytes(raw, path, max_bytes)


def _check_size(size: int, max_bytes: int, path: Path | str) -> None:
    if size == 0:
        raise BaselineFileError(
            path, "is empty (an interrupted write or a truncated checkout?)", _FIX_RESTORE
        )
    if size > max_bytes:
        raise BaselineFileError(
            path,
            f"is {size / 2**20:.0f} MiB, over the {max_bytes / 2**20:.0f} MiB limit for "
            "baseline files, so it was not read",
            "If it is genuine, raise infperf_expert's max_baseline_mb; otherwise delete it",
        )


def parse_bytes(
    raw: bytes, path: Path | str, max_bytes: int = DEFAULT_MAX_BYTES, full: bool = True
) -> dict[str, Any]:
    """Decode, parse and validate a document's bytes; ``path`` names it in errors
    (``full``: see :func:`validate`)."""
    _check_size(len(raw), max_bytes, path)
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
    return validate(doc, path, full)


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

    def stored_env_keys(self) -> list[str]:
        """The environments holding at least one baseline: what a message may offer (a
        stray subfolder, or one whose baselines were all pruned, holds none)."""
        return [key for key in self.env_keys() if self.commits(key)]

    def commits(self, env_key: str) -> list[str]:
        try:
            return sorted(
                p.stem for p in (self.root / env_key).glob("*.json") if SHA_RE.match(p.stem)
            )
        except OSError:
            return []

    def load(self, path: Path) -> dict[str, Any]:
        return read_document(path, self.max_bytes)

    def parse(self, data: bytes, path: Path | str, full: bool = True) -> dict[str, Any]:
        """A document from bytes already read (the index, a pull), under the same limits."""
        return parse_bytes(data, path, self.max_bytes, full)

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

    # -- retention: removing and compacting, under the savers' lock ------------------------

    def pruned(self, env_key: str) -> set[str]:
        """Commits of ``env_key`` pruned on purpose (``<env>/pruned.txt``, one sha a line):
        ``baselines pull`` does not bring them back and ``push`` removes them from the
        branch. A new ``--perf-save`` of such a commit takes it off the list."""
        try:
            text = (self.root / env_key / PRUNED).read_text(encoding="utf-8")
        except OSError:
            return set()
        return {line.strip() for line in text.splitlines() if SHA_RE.match(line.strip())}

    def _set_pruned(self, env_key: str, shas: set[str]) -> None:
        path = self.root / env_key / PRUNED
        if not shas:
            path.unlink(missing_ok=True)
            return
        atomic_write_text(path, "".join(f"{sha}\n" for sha in sorted(shas)))

    def env_lock(self, env_key: str) -> Any:

        folder = self.root / env_key
        folder.mkdir(parents=True, exist_ok=True)
        return FileLock(str(lock_path(folder)), timeout=LOCK_TIMEOUT_S)

    def remove(self, env_key: str, shas: Iterable[str]) -> int:
        """Delete these baselines and record them as pruned; returns how many existed."""
        shas = set(shas)
        removed = 0
        with self.env_lock(env_key):
            for sha in shas:
                path = self.path_for(env_key, sha)
                if path.exists():
                    path.unlink()
                    removed += 1
            self._set_pruned(env_key, self.pruned(env_key) | shas)
        return removed

    def compact(self, env_key: str, sha: str) -> int:
        """Rewrite one baseline as a compact document (:mod:`.compact`); returns the bytes
        it saved (0 when it already was compact)."""
        path = self.path_for(env_key, sha)
        with self.env_lock(env_key):
            before = path.stat().st_size
            doc = self.load(path)
            if is_compact_document(doc):
                return 0
            atomic_write_text(path, dumps_compact(compact_document(doc, now_iso())))
        return before - path.stat().st_size

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
        path = self.path_for(env_key, sha)
        path.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_temps(path.parent)
        with self.env_lock(env_key):
            merged: dict[str, dict[str, Any]] = {}
            before: dict[str, Any] = {}
            if path.exists():
                before = self.load(path)
                merged.update(iter_entries(before))
            saved_at = now_iso()
            for new in benchmarks:
                entry = dict(new)
                entry.pop("comparison", None)  # a verdict belongs to a run, not a baseline
                entry["saved_at"] = saved_at
                merged[entry["key"]] = entry
            if len(merged) > len(benchmarks):
                # A run that saved part of the baseline: the run time --perf-budget=1.5x
                # multiplies is the longest recorded, never a subset's.
                extra = {**extra, **longest_run(before, extra)}
            doc = document(merged.values(), environment, commit, mode="baseline", **extra)
            atomic_write_text(path, dumps(doc))
            pruned = self.pruned(env_key)
            if sha in pruned:  # saved again on purpose: no longer pruned
                self._set_pruned(env_key, pruned - {sha})
        return path, len(benchmarks), len(merged)


def longest_run(*docs: dict[str, Any]) -> dict[str, float]:
    """``{"run_seconds": the largest of the documents'}``, or ``{}`` when none records it."""
    seconds = [d["run_seconds"] for d in docs if isinstance(d.get("run_seconds"), int | float)]
    return {"run_seconds": max(seconds)} if seconds else {}


def lock_path(path: Path) -> Path:
    """The cross-process lock of an environment's folder of baselines (``path``), in
    :func:`~.fsutil.lock_dir`: every saver, pruner and puller on this machine agrees on it
    (a hash of the resolved path). One lock per folder, not per file: lock files are never
    deleted (deleting one a waiter holds open would let two writers in), so a lock per
    file would leave one behind for every baseline ever written or pruned."""

    digest = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:24]
    return lock_dir() / f"{digest}.lock"


def iter_entries(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for entry in doc["benchmarks"]:
        yield entry.get("key") or bench_key(entry["nodeid"], entry.get("name")), entry
