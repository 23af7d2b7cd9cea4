"""What spoils a GPU benchmark's timing while it runs: throttles and other jobs' processes.

Read through NVML (:mod:`.gpu`) between samples and between interleaved blocks, never
inside one: :class:`RegionWatch` over a stored pass's timed region, :class:`BlockWatch`
block by block in an interleaved run. This run's own processes (:class:`Ours`: its root
and every process descending from it) are never a GPU's tenants.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import statistics
import time
from collections.abc import Collection, Container, Sequence
from typing import Any

import psutil

from . import gpu as _gpu

#: The PID of this run's first pytest process, inherited by every process it starts (xdist
#: workers, A/B workers, their children): the root of the run's own process tree.
RUN_ROOT_ENV = "INFPERF_RUN_ROOT"


def descends(pid: int, root: int) -> bool:
    """Whether ``pid`` is ``root`` or one of its descendants (False for a process this one
    cannot see: another PID namespace, or gone)."""
    if pid == root:
        return True
    try:
        return any(p.pid == root for p in psutil.Process(pid).parents())
    except psutil.Error:
        return False


def run_root() -> int:
    """The root of this run's process tree: the PID the environment names when it is this
    process or one of its ancestors (a stale value, exported by a shell, is not; nor is
    PID 1, the ancestor of every process, which would make every GPU tenant "ours"), else
    this process."""
    value = os.environ.get(RUN_ROOT_ENV, "")
    me = os.getpid()
    if value.isdigit() and int(value) > 1 and descends(me, int(value)):
        return int(value)
    return me


def mark_run() -> None:
    """Name this run's root for every process it will start (``pytest_configure``)."""
    os.environ[RUN_ROOT_ENV] = str(run_root())


class Ours(Container[int]):
    """This run's own processes, which are never a GPU's tenants: the run's root process
    and every process that descends from it (the controller, the A/B workers of every
    process pair whenever they started, a restarted worker, their children, xdist
    workers), and the PIDs given. One rule for both watches (the stored pass's region
    watch and the interleaved run's block watch): on an H100 the block watch, built with
    the PIDs known before a pair's workers started, took the session's own workers for
    tenants and withheld every interleaved verdict."""

    def __init__(self, pids: Collection[int] = (), root: int | None = None) -> None:
        self.pids = set(pids) | {os.getpid()}
        self.root = run_root() if root is None else root
        self._seen: dict[int, bool] = {}

    def __contains__(self, pid: object) -> bool:
        if not isinstance(pid, int):
            return False
        if pid in self.pids:
            return True
        if pid not in self._seen:  # a PID's parentage is fixed at its start
            self._seen[pid] = descends(pid, self.root)
        return self._seen[pid]


def unseen(pid: int) -> bool:
    """A PID this process cannot see: another PID namespace. In a container NVML reports
    the host's PIDs (the run's own workers among them), so such a PID is recorded, never
    taken for a tenant: on a containerised runner every block would be flagged otherwise."""
    return not psutil.pid_exists(pid)


def tenants(pids: Collection[int], ours: Container[int]) -> set[int]:
    """The PIDs on a GPU that are another job's: not this run's, and visible here."""
    return {pid for pid in pids if pid not in ours and not unseen(pid)}


class RegionWatch:
    """NVML readings across a GPU benchmark's timed region, taken at its start, at every
    sampling checkpoint (between samples, never inside one) and at its end, while the GPU
    is busy: an idle GPU before warmup or after the run says nothing about throttling
    under load. Records energy per call (the total-energy counter, mJ), the throttle
    reasons seen, the power-violation time, the compute processes on the same GPU that
    are not this run's own (:class:`Ours`): another job on the GPU is the GPU runner's
    noisy neighbour; and the median SM and memory clocks of the readings the GPU was not
    idle at, the drift guard's GPU reference (:func:`~pytest_infperf.measure.drift.
    gpu_reference`): read while the benchmark runs, not after it (an idle H200 read
    345 MHz)."""

    def __init__(self, index: int) -> None:
        self.ours = Ours()
        self.nv = _gpu._init()
        self.handle = _gpu._try(self.nv.nvmlDeviceGetHandleByIndex, index) if self.nv else None
        self.energy0: int | None = None
        self.violation0: int | None = None
        self.reasons: set[str] = set()
        self.reasons_known = False
        self.tenants: set[int] = set()
        self.unseen: set[int] = set()
        self.clocks: list[tuple[int, int]] = []

    def _violation(self) -> int | None:
        nv = self.nv
        policy = getattr(nv, "NVML_PERF_POLICY_POWER", None)
        status = (
            _gpu._try(nv.nvmlDeviceGetViolationStatus, self.handle, policy)
            if policy is not None
            else None
        )
        return int(status.violationTime) if status is not None else None

    def start(self) -> None:
        if self.handle is None:
            return
        self.energy0 = _gpu._try(self.nv.nvmlDeviceGetTotalEnergyConsumption, self.handle)
        self.violation0 = self._violation()
        self.check()

    def check(self) -> None:
        if self.handle is None:
            return
        mask = _gpu._mask(self.nv, self.handle)
        if mask is not None:
            self.reasons_known = True
            self.reasons.update(_gpu._names(mask))
        clock = getattr(self.nv, "nvmlDeviceGetClockInfo", None)
        if clock is not None and (mask is None or not mask & _gpu._IDLE_BIT):
            sm = _gpu._try(clock, self.handle, getattr(self.nv, "NVML_CLOCK_SM", 1))
            mem = _gpu._try(clock, self.handle, getattr(self.nv, "NVML_CLOCK_MEM", 2))
            if sm and mem:
                self.clocks.append((int(sm), int(mem)))
        procs = _gpu._try(self.nv.nvmlDeviceGetComputeRunningProcesses, self.handle) or []
        pids = {int(p.pid) for p in procs}
        self.tenants |= tenants(pids, self.ours)
        self.unseen |= {pid for pid in pids if unseen(pid)}

    def result(self, calls: int) -> dict[str, Any]:
        if self.handle is None:
            return {}
        self.check()
        out: dict[str, Any] = {
            "throttle_reasons": sorted(self.reasons) if self.reasons_known else None,
            "other_processes": sorted(self.tenants),
            "unseen_processes": sorted(self.unseen),
        }
        if self.clocks:
            out["sm_clock_mhz"] = statistics.median(c[0] for c in self.clocks)
            out["mem_clock_mhz"] = statistics.median(c[1] for c in self.clocks)
        energy1 = _gpu._try(self.nv.nvmlDeviceGetTotalEnergyConsumption, self.handle)
        if self.energy0 is not None and energy1 is not None and calls > 0:
            out["energy_mj_per_call"] = round((int(energy1) - int(self.energy0)) / calls, 4)
        violation1 = self._violation()
        if self.violation0 is not None and violation1 is not None:
            out["power_violation_s"] = (violation1 - self.violation0) / 1e9
        return out


#: Why a block is set aside when another process computes on the GPU beside it.
OTHER_PROCESS = "other_process"


@dataclasses.dataclass(frozen=True)
class GpuRead:
    """One reading of a GPU, taken between two blocks (never inside one)."""

    #: The clock-event reason bitmask (None: NVML did not answer: unknown, not "none").
    reasons: int | None
    sm_clock_mhz: int | None
    #: The PIDs computing on the GPU.
    pids: frozenset[int]


def block_flags(before: GpuRead, after: GpuRead, ours: Container[int]) -> tuple[str, ...]:
    """Why the block between two readings is not a fair measurement of its code: each
    slowdown reason active at either reading, and another process computing on the GPU at
    either reading. Empty: a clean block. (The power/thermal violation counters would also
    catch a slowdown that came and went between readings, but reading them cost ~1.4 ms
    on an H100, 5% of a block: benchmarks/gpu_noise.py; they stay in the region record.)"""
    flags = []
    for reading in (before, after):
        for bit, name in _gpu._THROTTLE_BITS.items():
            if reading.reasons is not None and reading.reasons & bit and name not in flags:
                flags.append(name)
    if tenants(before.pids | after.pids, ours):
        flags.append(OTHER_PROCESS)
    return tuple(flags)


@dataclasses.dataclass
class BlockTally:
    """The GPU state of every block of one benchmark's interleaved run, per side: how many
    blocks, how many flagged (and why), how many set aside, the SM clocks seen, the other
    processes, and what the readings cost."""

    policy: str
    blocks: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    flagged: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    set_aside: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    reasons: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    others: set[int] = dataclasses.field(default_factory=set)
    sm_clocks: list[int] = dataclasses.field(default_factory=list)
    read_ns: list[int] = dataclasses.field(default_factory=list)
    user_clocks: bool = False
    #: Other processes that held a context on the GPU when the run began.
    present_at_start: set[int] = dataclasses.field(default_factory=set)

    def add(self, side: str, flags: Sequence[str], reading: GpuRead, ours: Container[int]) -> None:
        self.blocks[side] += 1
        if flags:
            self.flagged[side] += 1
            self.reasons.update(flags)
        self.others |= tenants(reading.pids, ours)
        if reading.sm_clock_mhz is not None:
            self.sm_clocks.append(reading.sm_clock_mhz)
        if reading.reasons is not None and reading.reasons & _gpu.USER_CLOCKS_BIT:
            self.user_clocks = True

    def share(self) -> float:
        """The larger side's share of flagged blocks."""
        return max((self.flagged[s] / n for s, n in self.blocks.items() if n), default=0.0)

    def merge(self, other: BlockTally) -> None:
        for mine, theirs in (
            (self.blocks, other.blocks),
            (self.flagged, other.flagged),
            (self.set_aside, other.set_aside),
            (self.reasons, other.reasons),
        ):
            mine.update(theirs)
        self.others |= other.others
        self.present_at_start |= other.present_at_start
        self.sm_clocks += other.sm_clocks
        self.read_ns += other.read_ns
        self.user_clocks = self.user_clocks or other.user_clocks

    def to_json(self) -> dict[str, Any]:
        reads = self.read_ns
        return {
            "policy": self.policy,
            "blocks": dict(self.blocks),
            "flagged": dict(self.flagged),
            "set_aside": dict(self.set_aside),
            "reasons": dict(self.reasons),
            "other_processes": sorted(self.others),
            "processes_at_start": sorted(self.present_at_start - self.others),
            "sm_clock_mhz": (
                {"min": min(self.sm_clocks), "max": max(self.sm_clocks)} if self.sm_clocks else None
            ),
            # What the readings cost a block, on average (the quad's last reads more).
            "read_us_per_block": round(sum(reads) / len(reads) / 1e3, 2) if reads else None,
            "user_defined_clocks": self.user_clocks,
        }


class BlockWatch:
    """Readings of one GPU between the blocks of an interleaved run. ``ours``: PIDs of this
    run's own besides those :class:`Ours` finds (the run's process tree).

    Every block: the clock-event reasons and the SM clock (3.4 us on an H100; on a lent
    H200, a Firecracker VM, a reading averaged 131-233 us: between blocks, so wall time,
    never a sample's). At each quad's end (the unit set aside), the processes holding a
    context on the GPU (9 us): a *tenant* is one that opened its context after ``before``
    was taken (at the session's start: :func:`context_pids`). One that held a context from
    before (a notebook, the job's own harness) is recorded, not flagged: holding a context
    is not computing, and NVML's per-process utilisation, which would tell, cost 2.2 ms a
    reading there (benchmarks/gpu_noise.py)."""

    def __init__(
        self,
        index: int,
        ours: Collection[int],
        policy: str,
        before: Collection[int] | None = None,
    ) -> None:
        self.nv = _gpu._init()
        self.handle = _gpu._try(self.nv.nvmlDeviceGetHandleByIndex, index) if self.nv else None
        self.ours = Ours(ours)
        self.tally = BlockTally(policy)
        self.last: GpuRead | None = None
        #: The processes on the GPU before the session began (None: at :meth:`start`).
        self.given_before = None if before is None else frozenset(before)
        self.before: frozenset[int] = frozenset()

    @property
    def active(self) -> bool:
        return self.handle is not None

    def _contexts(self) -> frozenset[int]:
        procs = _gpu._try(self.nv.nvmlDeviceGetComputeRunningProcesses, self.handle) or []
        return frozenset(int(p.pid) for p in procs)

    def read(self, processes: bool = True) -> GpuRead:
        nv, h = self.nv, self.handle
        t0 = time.perf_counter_ns()
        reasons = _gpu._mask(nv, h)
        clock = _gpu._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        tenants: frozenset[int] = frozenset()
        if processes:
            tenants = self._contexts() - self.before
        out = GpuRead(reasons, None if clock is None else int(clock), tenants)
        self.tally.read_ns.append(time.perf_counter_ns() - t0)
        return out

    def start(self) -> None:
        self.before = self.given_before if self.given_before is not None else self._contexts()
        self.tally.present_at_start |= tenants(self.before, self.ours)
        self.last = self.read(processes=False)

    def block_done(self, side: str, quad_end: bool = False) -> tuple[str, ...]:
        """Read after a block of ``side``; its flags (the reading before is the last one).
        ``quad_end``: also read the other processes."""
        now = self.read(processes=quad_end)
        before = self.last if self.last is not None else now
        flags = block_flags(before, now, self.ours)
        self.tally.add(side, flags, now, self.ours)
        self.last = now
        return flags


def context_pids() -> frozenset[int]:
    """The processes holding a context on any GPU now (empty without NVML)."""
    nv = _gpu._init()
    if nv is None:
        return frozenset()
    pids: set[int] = set()
    for i in range(int(_gpu._try(nv.nvmlDeviceGetCount) or 0)):
        h = _gpu._try(nv.nvmlDeviceGetHandleByIndex, i)
        procs = _gpu._try(nv.nvmlDeviceGetComputeRunningProcesses, h) if h is not None else None
        pids.update(int(p.pid) for p in procs or [])
    return frozenset(pids)
