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

from .settings import Settings

# The storage modules (source, baseline, gitinfo) are imported where a flag needs them:
# a run without --perf-save/--perf-compare/--perf-ab pays nothing for them at start-up
# (about 10 ms of dataclass and regex set-up, a fifth of the 50 ms budget).
if TYPE_CHECKING:
    from .gitinfo import CommitInfo
    from .source import BaselineSource

#: The key of the context in xdist's ``workerinput``.
WORKER_KEY = "infperf"


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
    #: GPU indices xdist workers are pinned to (a worker's copy of the controller's view).
    gpus: list[int] | None = None
    #: Session-wide warnings, for the terminal, the JSON and the Markdown report.
    warnings: list[str] = dataclasses.field(default_factory=list)
    #: ``--perf-ab``: perf tests of the base that HEAD no longer has.
    removed: list[str] = dataclasses.field(default_factory=list)

    @property
    def compares(self) -> bool:
        return self.source is not None

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def probe(self) -> Callable[[], tuple[float, float]] | None:
        """The machine-speed probe taken at sampling checkpoints, when a baseline is saved
        or compared and the drift guard is on."""
        s = self.settings
        if s.drift_guard == "off" or not (s.save or s.compare):
            return None
        from .drift import probe

        return probe

    def drift(self) -> dict[str, Any] | None:
        """The reference workload now against the baseline's run (stored comparisons)."""
        if self.source is None:
            return None
        from . import options as _options
        from .drift import drift

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
        from . import environment, gitinfo
        from . import gpu as _gpu

        s = self.settings
        if s.ab:
            self._resolve_ab(config)
        if not (s.save or s.compare):
            return
        from .baseline import BaselineFileError, BaselineStore
        from .source import CompareError, resolve

        store = BaselineStore(s.baselines, s.max_baseline_bytes)
        self.hard = environment.hard_fields(_gpu.snapshot())
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
            if self.source.env_diff:
                fields = ", ".join(sorted(self.source.env_diff))
                self.warn(
                    f"the baseline ({self.source.describe()}) was measured in a different "
                    f"environment ({fields} differ): verdicts are 'incomparable'"
                    + (" and fail (--perf-strict-env)" if s.strict_env else "")
                )
        from .drift import measure_reference

        self.reference = measure_reference()

    def _resolve_ab(self, config: pytest.Config) -> None:
        from . import gitinfo
        from .source import BaselineSource

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
        self.source = BaselineSource(ref=ref, origin="ab", sha=base, merge_base=base)

    # --- xdist ---------------------------------------------------------------------------
    def to_worker(self) -> str:
        """What each xdist worker needs (JSON): workers re-read the baseline file."""
        from . import gpu as _gpu

        if self.gpus is None and self.settings.gpus:
            self.gpus = list(self.settings.gpus)
        elif self.gpus is None and (snapshot := _gpu.snapshot()) is not None:
            self.gpus = snapshot["visible"] or list(range(snapshot["count"]))
        return json.dumps(
            {
                "env_key": self.env_key,
                "hard": self.hard,
                "source": self.source.to_worker() if self.source is not None else None,
                "reference": self.reference,
                "warnings": self.warnings,
                "gpus": self.gpus,
            }
        )

    @classmethod
    def from_worker(cls, settings: Settings, payload: str | dict[str, Any] | None) -> RunContext:
        if payload is None:
            return cls(settings)
        from .source import BaselineSource

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
            gpus=data.get("gpus"),
            warnings=list(data.get("warnings") or []),
        )
