"""The run context: what this pytest run compares with and saves to.

Resolved once, in ``pytest_configure``, on the controller (bad input is a usage error
before any test runs): the environment key, the commit a ``--perf-save`` belongs to, the
baseline a ``--perf-compare`` or ``--perf-ab`` compares with, and the drift guard's
reference workload. xdist workers get it as JSON through ``workerinput`` and never touch
git themselves.

Loaded at pytest start-up: it imports nothing heavy at module level.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..core.settings import Settings

# The storage modules (source, baseline, gitinfo) are imported where a flag needs them:
# a run without --perf-save/--perf-compare/--perf-ab pays nothing for them at start-up
# (about 10 ms of dataclass and regex set-up, a fifth of the 50 ms budget).
if TYPE_CHECKING:
    from ..judge.accept import AcceptRule
    from ..store.git import CommitInfo
    from ..store.resolve import BaselineSource

#: The key of the context in xdist's ``workerinput``.
WORKER_KEY = "infperf"


#: The run's context on ``config.stash``.
context_key: pytest.StashKey[RunContext] = pytest.StashKey()


@dataclasses.dataclass
class RunContext:
    settings: Settings
    env_key: str | None = None
    hard: dict[str, Any] | None = None
    #: The commit a ``--perf-save`` stores the baseline for (controller only).
    commit: CommitInfo | None = None
    source: BaselineSource | None = None
    #: The drift guard's reference workload, timed at session start.
    reference: dict[str, Any] | None = None
    #: The top of the git checkout (``--perf-ab`` and settling check commits out beside it).
    toplevel: Path | None = None
    #: Session-wide warnings, for the terminal, the JSON and the Markdown report.
    warnings: list[str] = dataclasses.field(default_factory=list)
    #: What the run did that the terminal says and no warning is (the base commit's own
    #: environment built, and its cost).
    notes: list[str] = dataclasses.field(default_factory=list)
    #: ``--perf-ab``: perf tests of the base that HEAD no longer has.
    removed: list[str] = dataclasses.field(default_factory=list)
    #: Regressions this change accepts: Perf-Accept trailers and --perf-accept.
    accept: list[AcceptRule] = dataclasses.field(default_factory=list)
    #: Why this run measured code that is not the working tree's (a stale or foreign
    #: installed copy of the project): its tests failed, and it stores nothing.
    refused: str | None = None

    @property
    def compares(self) -> bool:
        return self.source is not None

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    def probe(self) -> Callable[[], tuple[float, float]] | None:
        """The machine-speed probe taken at sampling checkpoints, when a baseline is saved
        or compared and the drift guard is on."""
        s = self.settings
        if s.drift_guard == "off" or not (s.save or s.compare):
            return None
        from ..measure.drift import probe

        return probe

    def drift(self) -> dict[str, Any] | None:
        """The reference workload now against the baseline's run (stored comparisons)."""
        if self.source is None:
            return None
        from ..core import options as _options
        from ..measure.drift import drift

        threshold = self.settings.bench_layer.get("threshold", _options.DEFAULTS["threshold"])
        return drift(self.reference, self.source.reference, threshold)

    # --- creation ------------------------------------------------------------------------
    @classmethod
    def create(cls, config: pytest.Config, settings: Settings) -> RunContext:
        workerinput = getattr(config, "workerinput", None)
        if workerinput is not None:
            return cls.from_worker(settings, workerinput.get(WORKER_KEY))
        context = cls(settings)
        context._resolve(config)
        return context

    def _resolve(self, config: pytest.Config) -> None:
        from ..measure import environment
        from ..measure import gpu as _gpu
        from ..measure import heap as _heap
        from ..store import git as gitinfo

        s = self.settings
        if s.ab:
            self._resolve_ab(config)
        if not (s.save or s.compare):
            self._resolve_accept()
            return
        from ..store.baselines import BaselineFileError, BaselineStore
        from ..store.resolve import CompareError, resolve

        store = BaselineStore(s.baselines, s.max_baseline_bytes)
        snapshot = _gpu.snapshot()
        if snapshot is not None and snapshot.get("source") == "nvidia-smi":
            self.warn(
                "nvidia-ml-py is not installed: the GPU is identified through nvidia-smi "
                "(name, driver), but clocks, throttling and power are not recorded; pip "
                "install nvidia-ml-py (the gpu and onnx-gpu extras bring it)"
            )
        self.hard = environment.hard_fields(snapshot)
        self.env_key = environment.env_key(self.hard)
        if s.save:
            try:
                repo = gitinfo.open_repo(s.rootdir)
                commit = gitinfo.head(repo, s.baselines)
                store.check_writable(self.env_key, commit.sha)
            except gitinfo.GitError as exc:
                raise pytest.UsageError(f"--perf-save: {exc}") from None
            except BaselineFileError as exc:
                raise pytest.UsageError(
                    f"--perf-save would replace a damaged baseline: {exc}"
                ) from None
            self.commit = commit
            if commit.dirty:
                self.warn(
                    f"the working tree has uncommitted changes: the baseline is saved for "
                    f"{commit.short} (marked dirty: true) but measures code that differs "
                    "from that commit"
                )
        if s.compare:
            try:
                self.source = resolve(
                    s.compare,
                    rootdir=s.rootdir,
                    store=store,
                    env_key=self.env_key,
                    hard=self.hard,
                    depth=s.search_depth,
                )
            except CompareError as exc:
                raise pytest.UsageError(str(exc)) from None
            if self.source.origin == "none" and self.source.note:
                self.warn(self.source.note)
            found = self.source.origin != "none"
            if found and (heap_moved := _heap.changed(self.source.soft.get("heap"), _heap.state())):
                self.warn(heap_moved)
            locked = self.source.soft.get("gpu_clocks_locked")
            if changed := _gpu.clock_lock_changed(locked, _gpu.clocks_locked(snapshot)):
                self.warn(changed)
            if self.source.env_diff:
                self.warn(self._moved_environment())
        self._resolve_accept()
        from ..measure.drift import measure_reference

        self.reference = measure_reference()

    def _moved_environment(self) -> str:
        """The one line a run says where its baseline was measured in another environment:
        the fields that moved, and what the run does about it."""
        from ..measure import environment

        source, s = self.source, self.settings
        assert source is not None
        moved = environment.describe_diff(source.env_diff)
        said = f"the baseline ({source.describe()}) was measured in another environment ({moved})"
        if source.origin == "commit" and source.sha and not s.ab:
            return f"{said}: both commits are measured here instead, interleaved"
        return f"{said}: verdicts are 'incomparable'" + (
            " and fail (--perf-strict-env)" if s.strict_env else ""
        )

    def _resolve_accept(self) -> None:
        """--perf-accept, and the Perf-Accept trailers of the commits since the one this run
        compares with (when there is one)."""
        from ..judge import accept
        from ..store import git as gitinfo

        self.accept = accept.from_flags(self.settings.accept)
        since = self.source.sha if self.source is not None else None
        if since:
            try:
                self.accept += accept.from_trailers(self.settings.rootdir, since)
            except gitinfo.GitError as exc:
                self.warn(f"{accept.TRAILER} trailers were not read: {exc}")

    def _resolve_ab(self, config: pytest.Config) -> None:
        from ..store import git as gitinfo
        from ..store.resolve import BaselineSource

        ref = self.settings.ab or ""
        if config.getoption("numprocesses", None):
            raise pytest.UsageError(
                "--perf-ab measures one benchmark at a time, interleaved with its base: run "
                "it without pytest-xdist's -n"
            )
        try:
            repo = gitinfo.open_repo(self.settings.rootdir)
            head = gitinfo.head_sha(repo)
            base = gitinfo.merge_base(repo, gitinfo.resolve(repo, ref), head)
        except gitinfo.GitError as exc:
            raise pytest.UsageError(f"--perf-ab={ref}: {exc}") from None
        self.toplevel = Path(repo.working_tree_dir).resolve()
        dirty = gitinfo.dirty(repo, self.settings.baselines)
        self.source = BaselineSource(
            ref=ref, origin="ab", sha=base, merge_base=base, head_dirty=dirty
        )
        if dirty:
            self.warn(
                f"--perf-ab: the working tree has uncommitted changes: the head side measures "
                f"the files on disk, not commit {head[:10]} (the JSON says dirty: true)"
            )

    # --- xdist ---------------------------------------------------------------------------
    def to_worker(self) -> str:
        """What each xdist worker needs (JSON): workers re-read the baseline file."""
        return json.dumps(
            {
                "env_key": self.env_key,
                "hard": self.hard,
                "source": self.source.to_worker() if self.source is not None else None,
                "reference": self.reference,
                "warnings": self.warnings,
                "accept": [rule.to_json() for rule in self.accept],
            }
        )

    @classmethod
    def from_worker(cls, settings: Settings, payload: str | dict[str, Any] | None) -> RunContext:
        if payload is None:
            return cls(settings)
        from ..judge.accept import AcceptRule
        from ..store.resolve import BaselineSource

        data = json.loads(payload) if isinstance(payload, str) else dict(payload)
        source = None
        if data.get("source") is not None:
            source = BaselineSource.from_worker(data["source"], settings.max_baseline_bytes)
        return cls(
            settings,
            env_key=data.get("env_key"),
            hard=data.get("hard"),
            source=source,
            reference=data.get("reference"),
            warnings=list(data.get("warnings") or []),
            accept=[AcceptRule(**rule) for rule in data.get("accept") or []],
        )
