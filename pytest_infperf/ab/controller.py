"""The controller of a session's A/B workers: the base commit's worktree and environment,
its worker, and the process pairs started once per session and reused by later benchmarks;
what the head process itself imported of the repository, and where each side's project
modules came from (see :mod:`pytest_infperf.ab.imports`)."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.record import PairedRecord
from ..measure import numa
from ..measure import tenancy as _tenancy
from . import baseenv, imports, interpreter, proof, sigterm
from .checkout import Checkout, Selection
from .workers import QUIT_GRACE_S, ABError, ForeignCode, ProcessPair, WorkerSide

if TYPE_CHECKING:
    from collections.abc import Sequence


#: Worker process pairs a session keeps, each holding its models, for comparisons to reuse:
#: a comparison that takes more pairs (the few still undecided) starts these afresh.
LIVE_PAIRS = 7


class ABController:
    """The base side of one pytest session: the base commit's worktree and its worker."""

    def __init__(
        self,
        base_sha: str,
        toplevel: Path,
        selection: Selection,
        title: str = "merge-base",
        warn: Callable[[str], None] | None = None,
        pin_cpu: int | None = None,
        info: Callable[[str], None] | None = None,
    ) -> None:
        self.base_sha = base_sha
        #: The CPU interleaved blocks are timed on (expert ``pin``), where they can be.
        self.pin_cpu = pin_cpu
        self.warn = warn
        #: Where a line that is no warning goes (the base's own environment, built).
        self.info = info
        self._noticed: set[str] = set()
        self.toplevel = toplevel
        #: What this process imports of the repository: every worker imports the project
        #: from its own checkout by it, and proves where its modules came from.
        self.imports = imports.discover(toplevel, selection.pythonpath)
        selection = dataclasses.replace(selection, imports=self.imports.to_json())
        self.selection = selection
        #: Where this process's own project modules came from (the first pair's head).
        self.here = proof.Origins(self.imports, toplevel)
        self.tmp = Path(tempfile.mkdtemp(prefix="infperf-ab-"))
        self.checkout = Checkout(toplevel, base_sha, self.tmp, f"{title} {base_sha[:10]}")
        self.base = WorkerSide(self.checkout, selection, "base")
        self.base.notice = self._notice
        #: The environment the base's workers run in (set up with the checkout), and what
        #: they are told of the project there.
        self.env: baseenv.BaseEnv | None = None
        self.base_imports = self.head_imports = selection.imports
        #: The interpreter the base side's processes run (None: not set up; said then).
        self.interpreter: interpreter.Interpreter | None = None
        self.pairs: list[ProcessPair] = []
        #: What process pairs collect: :meth:`collected` narrows it to the perf tests' files.
        self.pair_selection = selection
        self.gpu_before: frozenset[int] | None = None
        #: The GPU's NUMA node every worker starts bound to, or why none is.
        self.numa = numa.session_binding()
        self._closed = False
        # A child a test forks inherits this atexit hook: only this process cleans up.
        self._owner = os.getpid()
        atexit.register(self.close)
        # From here until close() there is a folder, a worktree or workers to remove.
        sigterm.hold()

    def setup(self) -> None:
        """Check the base commit out (GitError: a usage error for the caller), and note who
        was on the GPUs before the session measured anything: a process that comes later
        is a tenant of the blocks it shares (measure/tenancy.BlockWatch)."""
        self.gpu_before = _tenancy.context_pids()
        if isinstance(self.numa, numa.Binding):  # the first pair's head: on its CPUs too
            self.numa = numa.here(self.numa)
        try:
            self.checkout.add()
            self._environment()
        except BaseException:  # a GitError, no git at all, Ctrl-C while it checks out
            self.close()
            raise
        # The base worker collects while this session does (--perf-ab sets up at
        # configure), instead of after it. One that fails to start is started again, and
        # its error reported, where it is first needed.
        self._base_side(self.base)
        with contextlib.suppress(ABError):
            self.base.connect()

    def _environment(self) -> None:
        """The base's workers' environment: this one, or one built for the base commit
        where its dependency spec or compiled parts need it (said either way)."""
        folders = [p for _, p, _ in self.imports.installed]
        folders += [str(self.toplevel / rel / n) for n, rel in self.imports.names.items()]
        self.env = baseenv.prepare(
            self.checkout.root,
            self.toplevel,
            self.base_sha,
            [f for f in folders if Path(f).is_dir()],
            self.tmp,
        )
        if self.env.note and self.warn is not None:
            self.warn(self.env.note)
        elif self.env.info and self.info is not None:
            self.info(self.env.info)
        if self.env.built_site is not None:
            told = dataclasses.replace(self.imports, built=self.env.built_site)
            self.base_imports = told.to_json()
        # Every process of the base side runs an interpreter held to the base's checkout as
        # it starts: the worker, and what its tests start with sys.executable.
        sites = [self.env.site] if self.env.site else baseenv.site_dirs()
        try:
            self.interpreter = interpreter.make(
                self.tmp / "base-python", sites, self.base_imports, self.checkout.root
            )
        except (OSError, ValueError) as exc:
            self.interpreter = None
            if self.warn is not None:
                self.warn(
                    "the processes the base side's tests start may import HEAD's code: its "
                    f"own interpreter could not be set up ({exc})"
                )
        if self.env.compiled and self.imports.installed:
            # Installed non-editable: the working tree holds the extension's sources only,
            # so head workers import the installed copy, as this process does (the head's
            # proof compares its Python files with the working tree's).
            site_dir = str(Path(self.imports.installed[0][1]).parent)
            self.head_imports = dataclasses.replace(self.imports, built=site_dir).to_json()

    def _bound(self, side: WorkerSide) -> WorkerSide:
        """A worker that starts on the GPU's NUMA node, where the session has one."""
        side.numa = self.numa if isinstance(self.numa, numa.Binding) else None
        return side

    def _base_side(self, side: WorkerSide) -> WorkerSide:
        """A worker of the base's checkout, in the base's environment."""
        self._bound(side)
        if self.env is not None:
            side.python = self.env.python
            side.imports = self.base_imports
        if self.interpreter is not None:
            side.python = self.interpreter.python
            side.interpreter = self.interpreter
        return side

    def base_tests(self) -> set[str]:
        return self.base.tests()

    def collected(self, modules: Sequence[str]) -> None:
        """The files of the perf tests this session collected (head paths). Process pairs
        collect only those present in both checkouts, instead of the session's arguments:
        given a folder, a worker walks everything in it, and the working tree holds
        untracked folders the base checkout lacks (baselines/, results/). Walking one
        more folder, even an empty one, left a head worker's 50-iteration Python loop
        4-5% slower than its base partner in every pair of every session measured
        (docs/MEASURED.md, "A/A run counts, and the same files on both sides"), a bias
        no number of pairs removes. The controller's own base worker keeps the whole
        selection: it lists the base's tests, and pair 1's head is this process anyway."""
        both = tuple(
            m
            for m in dict.fromkeys(modules)
            if Path(m).is_file() and self.checkout.map(Path(m)).is_file()
        )
        if both:
            self.pair_selection = dataclasses.replace(self.selection, args=both)

    def process_pair(self, k: int) -> ProcessPair:
        """The ``k``-th extra process pair (k >= 1), started on first use and kept for
        the session's later benchmarks: a base worker in the base checkout and a head
        worker in the working tree, with the same hash seed. Past the :data:`LIVE_PAIRS`
        a session keeps, one of those is started afresh for it: new processes, as every
        pair must be, and no more models held in memory."""
        if k > LIVE_PAIRS:
            pair = self.process_pair((k - 1) % LIVE_PAIRS + 1)
            # A new pair, not the one it replaces again: new processes and a new seed.
            seed = secrets.randbelow(2**32 - 1) + 1
            for side in (pair.base, pair.head):
                side.quit()  # launched anew when the pair begins
                side.hash_seed = seed
            for side in (pair.base, pair.head):
                # Its session ended as at close() (a test's teardown, atexit hooks), not
                # killed by the relaunch while it still exits.
                side.wait(QUIT_GRACE_S)
            return pair
        while len(self.pairs) < k:
            n = len(self.pairs) + 1
            # A random seed per pair and session, not a fixed one: the seed sets dict and
            # set layouts, and with them part of a pair's speed offset. A fixed seed (1, 2,
            # ...) would make that part the same in every session, a bias every CI run
            # repeats; drawn afresh, it is part of the between-process variance the
            # pooling accounts for.
            seed = secrets.randbelow(2**32 - 1) + 1
            head_tree = Checkout(self.toplevel, None, self.tmp, "the working tree")
            base = WorkerSide(self.checkout, self.pair_selection, f"base{n}", seed)
            head = WorkerSide(head_tree, self.pair_selection, f"head{n}", seed)
            head.imports = self.head_imports
            pair = ProcessPair(self._base_side(base), self._bound(head))
            pair.base.notice = pair.head.notice = self._notice
            pair.head.other = self.checkout.root
            self.pairs.append(pair)
        return self.pairs[k - 1]

    def prestart(self) -> None:
        """Start the first process pair now, without waiting for it: it imports and
        collects while this session collects and builds its first model, instead of when
        a benchmark first needs it (docs/MEASURED.md, "Workers started ahead of need"). A
        pair that cannot start is started again, and its error reported, where it is
        first needed. :meth:`quiet` waits for it before any block is timed."""
        pair = self.process_pair(1)
        for side in (pair.base, pair.head):
            with contextlib.suppress(ABError):
                side.connect()

    def quiet(self) -> None:
        """Wait for every worker still collecting (a prestarted one), so that none imports
        or collects while blocks are timed (a test that runs on after its call is parked:
        ``WorkerSide.park``). A worker that fails here is started again where needed."""
        for side in self.sides():
            if side.collecting:
                with contextlib.suppress(ABError):
                    side.ensure()

    def vouch_here(self) -> dict[str, str]:
        """Where this process's project modules came from, checked as the head's (raises
        :class:`ForeignCode`)."""
        found = self.here.read()
        top, tree = str(self.toplevel.resolve()), str(self.checkout.root.resolve())
        bad = proof.problems("head", found, self.imports, top, tree)
        if bad:
            raise ForeignCode(proof.explain("head", "this process", bad))
        return found

    def proof(self, pairs: int, here: dict[str, str]) -> PairedRecord:
        """What the JSON keeps of which code each side ran over ``pairs`` process pairs:
        ``origins`` (:meth:`origins`), and the base's environment where it was not HEAD's
        as is (its spec differed, or the project has compiled parts)."""
        env = self.env
        told = env is not None and (env.changes or env.compiled)
        out = PairedRecord(origins=self.origins(pairs, here))
        if isinstance(self.numa, numa.Binding):
            out["numa"] = self.numa.record()
        elif self.numa != "no GPU seen through NVML":  # a GPU runner says why not
            out["numa"] = {"not_bound": self.numa}
        if env is not None and told:
            out["base_environment"] = env.to_json()
        return out

    def origins(self, pairs: int, here: dict[str, str]) -> dict[str, dict[str, list[str]]]:
        """Each side's origins over the processes of ``pairs`` process pairs (this process
        and the base worker first), grouped for the JSON; a side an older worker served
        has none."""
        used = self.pairs[: pairs - 1]
        heads = [here, *(p.head.origins or {} for p in used)]
        sides = (self.base, *(p.base for p in used))
        bases = [side.origins for side in sides]
        children = [c for side in sides for c in side.children]
        top, tree = str(self.toplevel), str(self.checkout.root)
        out = {"head": proof.summary(heads, self.imports, {"checkout": top, "base checkout": tree})}
        base_trees = {"checkout": tree, "HEAD's checkout": top}
        if self.env is not None and self.env.built_site:  # a compiled project's own build
            base_trees["build"] = self.env.built_site
        if all(found is not None for found in bases):
            told = [*(b for b in bases if b is not None), *children]
            out["base"] = proof.summary(told, self.imports, base_trees)
        return out

    def _notice(self, message: str) -> None:
        """Said once per session, however many workers say it."""
        if message not in self._noticed:
            self._noticed.add(message)
            if self.warn is not None:
                self.warn(message)

    def sides(self) -> list[WorkerSide]:
        """Every worker of this session: the base's, then each process pair's."""
        return [self.base, *(s for pair in self.pairs for s in (pair.base, pair.head))]

    def pids(self) -> set[int]:
        """This session's worker processes: on a GPU they are not its tenants."""
        return {side.proc.pid for side in self.sides() if side.proc is not None}

    def end_test(self, nodeid: str) -> None:
        """``nodeid`` ended on every side that serves it, whatever another side did; the
        first error after."""
        errors = []
        for side in self.sides():
            if side.current == nodeid:
                try:
                    side.end_test()
                except ABError as exc:
                    errors.append(exc)
        if errors:
            raise errors[0]

    def close(self) -> None:
        if self._closed or os.getpid() != self._owner:
            return
        self._closed = True
        # Every worker told first, then waited for: a worker's exit (its pytest session's
        # end, torch's and transformers' teardown) took about 3 s on 2 cores, and one
        # after another the workers added 21 s to a compare of the examples.
        sides = self.sides()
        try:
            for side in sides:
                with contextlib.suppress(Exception):
                    side.quit()
            for side in sides:
                side.wait()
        finally:
            # Whatever interrupted the above (a second Ctrl-C): no worker outlives this,
            # and the worktree and the temporary folder go; SIGTERM's default is back
            # whatever of that fails.
            try:
                for side in sides:
                    side.kill()
                self.checkout.remove()
                shutil.rmtree(self.tmp, ignore_errors=True)
                with contextlib.suppress(Exception):
                    atexit.unregister(self.close)
            finally:
                sigterm.release()
