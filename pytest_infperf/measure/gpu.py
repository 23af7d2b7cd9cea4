"""NVIDIA GPU state through NVML (the ``nvidia-ml-py`` package, module ``pynvml``).

Everything degrades to ``None`` when NVML, the driver or a GPU is missing: a CPU machine
gets ``"gpu": null`` in its environment and no error. NVML numbers devices physically and
ignores ``CUDA_VISIBLE_DEVICES``; :func:`visible_indices` maps the visible ones back.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Collection, Container, Sequence
from pathlib import Path
from typing import Any

import psutil

from .smi import smi_snapshot

_nvml: Any = None
_failed = False

#: Clock-event (throttle) reasons that mean the GPU ran slower than it could. Idle and
#: application-clock settings are not slowdowns; sync boost is (a GPU held to the clock of
#: the slowest in its sync-boost group).
_THROTTLE_BITS = {
    0x0000000000000004: "sw_power_cap",
    0x0000000000000008: "hw_slowdown",
    0x0000000000000010: "sync_boost",
    0x0000000000000020: "sw_thermal",
    0x0000000000000040: "hw_thermal",
    0x0000000000000080: "hw_power_brake",
    0x0000000000000100: "display_clocks",
}


def _init() -> Any:
    """The initialised pynvml module, or None (cached either way)."""
    global _nvml, _failed
    if _nvml is not None or _failed:
        return _nvml
    try:
        import pynvml  # noqa: PLC0415 (pynvml: the optional gpu extra)

        pynvml.nvmlInit()
    except Exception:
        _failed = True
        return None
    _nvml = pynvml
    return _nvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        return None


def visible_indices() -> list[int] | None:
    """NVML indices of the devices CUDA_VISIBLE_DEVICES exposes (None: all)."""
    nv = _init()
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if nv is None or value is None or not value.strip():
        return None
    count = nv.nvmlDeviceGetCount()
    uuids = {
        _text(_try(nv.nvmlDeviceGetUUID, nv.nvmlDeviceGetHandleByIndex(i))): i for i in range(count)
    }
    out: list[int] = []
    for raw in value.split(","):
        part = raw.strip()
        if part.isdigit() and int(part) < count:
            out.append(int(part))
        else:
            for uuid, index in uuids.items():
                if uuid.startswith(part):
                    out.append(index)
    return out


def nvml_index(cuda_index: int) -> int:
    """The NVML index of a CUDA device index (CUDA numbers only the visible devices)."""
    visible = visible_indices()
    if visible and 0 <= cuda_index < len(visible):
        return visible[cuda_index]
    return cuda_index


#: The "GPU idle" clock-event reason: nothing runs, so the clocks say nothing of a load.
_IDLE_BIT = 0x0000000000000001


def _mask(nv: Any, handle: Any) -> int | None:
    # The clock-*event*-reasons call replaced the deprecated throttle-reasons one (NVML
    # 12.535); older bindings have only the latter. None when neither answers: "unknown",
    # not "not throttled".
    read = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    reasons = _try(read, handle) if read is not None else None
    return None if reasons is None else int(reasons)


def _names(mask: int) -> list[str]:
    return [name for bit, name in _THROTTLE_BITS.items() if mask & bit]


def _reasons(nv: Any, handle: Any) -> list[str] | None:
    mask = _mask(nv, handle)
    return None if mask is None else _names(mask)


#: Set by an xdist run's controller where the run asks for measurement: its workers pin
#: themselves to a GPU each (:func:`pin_worker`); any other run's workers keep every GPU.
PIN_ENV = "INFPERF_PIN_WORKERS"
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
        self.nv = _init()
        self.handle = _try(self.nv.nvmlDeviceGetHandleByIndex, index) if self.nv else None
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
            _try(nv.nvmlDeviceGetViolationStatus, self.handle, policy)
            if policy is not None
            else None
        )
        return int(status.violationTime) if status is not None else None

    def start(self) -> None:
        if self.handle is None:
            return
        self.energy0 = _try(self.nv.nvmlDeviceGetTotalEnergyConsumption, self.handle)
        self.violation0 = self._violation()
        self.check()

    def check(self) -> None:
        if self.handle is None:
            return
        mask = _mask(self.nv, self.handle)
        if mask is not None:
            self.reasons_known = True
            self.reasons.update(_names(mask))
        clock = getattr(self.nv, "nvmlDeviceGetClockInfo", None)
        if clock is not None and (mask is None or not mask & _IDLE_BIT):
            sm = _try(clock, self.handle, getattr(self.nv, "NVML_CLOCK_SM", 1))
            mem = _try(clock, self.handle, getattr(self.nv, "NVML_CLOCK_MEM", 2))
            if sm and mem:
                self.clocks.append((int(sm), int(mem)))
        procs = _try(self.nv.nvmlDeviceGetComputeRunningProcesses, self.handle) or []
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
        energy1 = _try(self.nv.nvmlDeviceGetTotalEnergyConsumption, self.handle)
        if self.energy0 is not None and energy1 is not None and calls > 0:
            out["energy_mj_per_call"] = round((int(energy1) - int(self.energy0)) / calls, 4)
        violation1 = self._violation()
        if self.violation0 is not None and violation1 is not None:
            out["power_violation_s"] = (violation1 - self.violation0) / 1e9
        return out


#: The "applications clocks setting" event reason, which NVML also names "user-defined
#: clocks": active while clocks set with ``nvidia-smi -ac`` or locked with ``-lgc`` cap the
#: clock. NVML has no getter for ``-lgc`` locks; this bit is how they show.
_USER_CLOCKS_BIT = 0x0000000000000002
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
        for bit, name in _THROTTLE_BITS.items():
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
        if reading.reasons is not None and reading.reasons & _USER_CLOCKS_BIT:
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
        self.nv = _init()
        self.handle = _try(self.nv.nvmlDeviceGetHandleByIndex, index) if self.nv else None
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
        procs = _try(self.nv.nvmlDeviceGetComputeRunningProcesses, self.handle) or []
        return frozenset(int(p.pid) for p in procs)

    def read(self, processes: bool = True) -> GpuRead:
        nv, h = self.nv, self.handle
        t0 = time.perf_counter_ns()
        reasons = _mask(nv, h)
        clock = _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
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
    nv = _init()
    if nv is None:
        return frozenset()
    pids: set[int] = set()
    for i in range(int(_try(nv.nvmlDeviceGetCount) or 0)):
        h = _try(nv.nvmlDeviceGetHandleByIndex, i)
        procs = _try(nv.nvmlDeviceGetComputeRunningProcesses, h) if h is not None else None
        pids.update(int(p.pid) for p in procs or [])
    return frozenset(pids)


#: Said once per run on a GPU whose clocks are not locked.
UNLOCKED_CLOCKS = (
    "the GPU's clocks are not locked: GPU Boost moves them with temperature and power, and "
    "latency with them. On a dedicated benchmark runner lock them (as root, once per boot): "
    "`nvidia-smi -pm 1 && nvidia-smi -lgc <base clock> && nvidia-smi -lmc <max memory "
    "clock>` (the base clock from `nvidia-smi -q -d CLOCK`); `nvidia-smi -rgc -rmc` undoes "
    "it. Baselines from locked and unlocked runs still compare, flagged"
)


def clock_state(index: int) -> dict[str, Any] | None:
    """What the clocks are allowed to do: application clocks against their defaults and the
    maximum, persistence mode and compute mode (``None`` without NVML)."""
    nv = _init()
    if nv is None:
        return None
    h = _try(nv.nvmlDeviceGetHandleByIndex, index)
    if h is None:
        return None
    app = _try(nv.nvmlDeviceGetApplicationsClock, h, nv.NVML_CLOCK_SM)
    default = _try(nv.nvmlDeviceGetDefaultApplicationsClock, h, nv.NVML_CLOCK_SM)
    reasons = _try(nv.nvmlDeviceGetCurrentClocksEventReasons, h)
    return {
        "application_sm_mhz": app,
        "default_application_sm_mhz": default,
        # Set below the default with -ac, or capping the clock now (-lgc shows only so).
        "locked": bool(
            (app is not None and default is not None and app != default)
            or (reasons is not None and reasons & _USER_CLOCKS_BIT)
        ),
        "persistence_mode": _try(nv.nvmlDeviceGetPersistenceMode, h),
        "compute_mode": _try(nv.nvmlDeviceGetComputeMode, h),
    }


def mig_profile(name: str | None) -> str | None:
    """The MIG profile in a MIG device's name (``NVIDIA A100-SXM4-40GB MIG 1g.5gb``:
    ``1g.5gb``), else None."""
    if not name or " MIG " not in f" {name} ":
        return None
    return name.split("MIG", 1)[1].strip() or None


def _mig_devices(nv: Any, handle: Any) -> list[dict[str, Any]]:
    """The MIG instances of a GPU in MIG mode: UUID, name and profile (empty otherwise)."""
    count = _try(nv.nvmlDeviceGetMaxMigDeviceCount, handle) or 0
    out = []
    for i in range(int(count)):
        mig = _try(nv.nvmlDeviceGetMigDeviceHandleByIndex, handle, i)
        if mig is None:
            continue
        name = _text(_try(nv.nvmlDeviceGetName, mig))
        out.append(
            {
                "uuid": _text(_try(nv.nvmlDeviceGetUUID, mig)),
                "name": name,
                "profile": mig_profile(name),
            }
        )
    return out


def mig_profiles(snap: dict[str, Any] | None, visible: str | None) -> list[str]:
    """The MIG profiles this process computes on: those of the MIG instances
    CUDA_VISIBLE_DEVICES names (``MIG-<uuid>``), else of every instance there is. A MIG
    instance is its own benchmark machine (a ``1g.10gb`` slice is not the whole GPU)."""
    instances = [m for d in (snap or {}).get("devices") or [] for m in d.get("mig_devices") or []]
    named = [e.strip() for e in (visible or "").split(",") if e.strip().startswith("MIG-")]
    if named:
        instances = [m for m in instances if any(m["uuid"].startswith(e) for e in named)]
    return sorted({m["profile"] for m in instances if m.get("profile")})


def clocks_locked(snap: dict[str, Any] | None) -> bool | None:
    """Whether every GPU's clocks are locked (None: unknown, or no GPU)."""
    states = [d.get("clocks") for d in (snap or {}).get("devices") or []]
    if not states or any(s is None for s in states):
        return None
    return all(bool(s["locked"]) for s in states)


def clock_lock_changed(baseline_locked: Any, locked: bool | None) -> str | None:
    """The soft difference of a baseline measured on locked clocks and a run on unlocked
    ones (or the reverse): they compare, but the verdicts carry the difference."""
    if baseline_locked is None or locked is None or bool(baseline_locked) == locked:
        return None
    then, now = ("locked", "unlocked") if baseline_locked else ("unlocked", "locked")
    return (
        f"the baseline was measured with the GPU's clocks {then}, this run with them {now}: "
        "the two compare (same GPU), but a difference may be the clocks' and not the code's"
    )


def device_state(index: int) -> dict[str, Any] | None:
    """Clocks, temperature, power and throttle reasons of one device, now."""
    nv = _init()
    if nv is None:
        return None
    try:
        handle = nv.nvmlDeviceGetHandleByIndex(index)
    except Exception:
        return None
    active = _reasons(nv, handle)
    mem = _try(nv.nvmlDeviceGetMemoryInfo, handle)
    return {
        "sm_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM),
        "mem_clock_mhz": _try(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_MEM),
        "temperature_c": _try(nv.nvmlDeviceGetTemperature, handle, nv.NVML_TEMPERATURE_GPU),
        "power_w": (_try(nv.nvmlDeviceGetPowerUsage, handle) or 0) / 1000 or None,
        "memory_used_bytes": int(mem.used) if mem is not None else None,
        "throttle_reasons": active,
    }


def snapshot() -> dict[str, Any] | None:
    """The GPU section of the environment, or None without an NVIDIA GPU."""
    nv = _init()
    if nv is None:
        # Without nvidia-ml-py (the torch extra does not bring it) the GPU must still be
        # named, or an A100's and an H100's baselines would share a "-cpu-" key.
        return smi_snapshot()
    try:
        count = nv.nvmlDeviceGetCount()
    except Exception:
        return None
    if count == 0:
        return None
    driver = _text(_try(nv.nvmlSystemGetDriverVersion))
    cuda = _try(nv.nvmlSystemGetCudaDriverVersion)
    devices = []
    for i in range(count):
        h = nv.nvmlDeviceGetHandleByIndex(i)
        mem = _try(nv.nvmlDeviceGetMemoryInfo, h)
        mig = _try(nv.nvmlDeviceGetMigMode, h)
        devices.append(
            {
                "index": i,
                "name": _text(_try(nv.nvmlDeviceGetName, h)),
                "uuid": _text(_try(nv.nvmlDeviceGetUUID, h)),
                "memory_total_bytes": int(mem.total) if mem is not None else None,
                "sm_clock_max_mhz": _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
                "mem_clock_max_mhz": _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM),
                "power_limit_w": (_try(nv.nvmlDeviceGetPowerManagementLimit, h) or 0) / 1000
                or None,
                "persistence_mode": _try(nv.nvmlDeviceGetPersistenceMode, h),
                "mig_mode": mig[0] if isinstance(mig, (tuple, list)) else mig,
                "mig_devices": _mig_devices(nv, h),
                "clocks": clock_state(i),
                "state": device_state(i),
            }
        )
    return {
        "source": "nvml",
        "count": count,
        "driver_version": driver,
        "driver_major": driver.split(".")[0] if driver and driver != "None" else None,
        "cuda_driver_version": f"{cuda // 1000}.{(cuda % 1000) // 10}" if cuda else None,
        "visible": visible_indices(),
        "devices": devices,
    }


# --- pinning pytest-xdist workers ----------------------------------------------------------


def any_visible() -> bool:
    """Whether this process may see a GPU: NVML counts one; or a CUDA build of torch
    (already imported by the tests, never here) beside an NVIDIA device node; or ONNX
    Runtime (likewise) with its CUDA provider. Never ``torch.cuda.is_available()``: it
    initialises the driver, after which CUDA_VISIBLE_DEVICES is fixed for the process."""
    nv = _init()
    if nv is not None and (_try(nv.nvmlDeviceGetCount) or 0) > 0:
        return True
    torch = sys.modules.get("torch")
    cuda_build = getattr(getattr(torch, "version", None), "cuda", None)
    if cuda_build and Path("/dev/nvidiactl").exists():
        return True
    ort = sys.modules.get("onnxruntime")
    providers = _try(getattr(ort, "get_available_providers", list)) or []
    return "CUDAExecutionProvider" in providers


def cuda_initialised() -> bool:
    """Whether this process already started CUDA through torch (after that, a change to
    CUDA_VISIBLE_DEVICES is ignored)."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:
        return False


def pin_choices(
    visible: str | None, configured: Sequence[str], snap: dict[str, Any] | None
) -> list[str]:
    """The GPUs workers are spread over, as CUDA_VISIBLE_DEVICES entries.

    ``infperf_gpus`` first, else what the user already restricted CUDA_VISIBLE_DEVICES to
    (kept verbatim: indices in CUDA's own numbering, GPU or MIG UUIDs), else every GPU by
    UUID (unambiguous whatever CUDA_DEVICE_ORDER says; NVML indices are not CUDA ordinals).
    An empty or negative CUDA_VISIBLE_DEVICES means the user hid the GPUs: none."""
    if configured:
        return [str(c) for c in configured]
    if visible is not None:
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if not entries or entries[0].startswith("-"):
            return []
        return entries
    if snap is None:
        return []
    return [str(d.get("uuid") or d["index"]) for d in snap["devices"]]


def pin_worker(worker_id: str, configured: Sequence[str]) -> str | None:
    """Pin this xdist worker (``gwK``) to one GPU, before any conftest can start CUDA.
    Returns a warning for the run, or None."""
    digits = worker_id[2:] if worker_id.startswith("gw") else ""
    if not digits.isdigit() or os.environ.get("INFPERF_NO_GPU_PINNING"):
        return None
    choices = pin_choices(os.environ.get("CUDA_VISIBLE_DEVICES"), configured, snapshot())
    if not choices:
        return None
    if cuda_initialised():
        # Too late: this process keeps the GPUs it started with, and every worker then
        # shares one timing lock (the lock's name follows CUDA_VISIBLE_DEVICES, unchanged).
        return (
            f"pytest-xdist worker {worker_id}: CUDA was initialised before pytest-infperf "
            "could pin the worker to a GPU (a plugin or an early import called into "
            "torch.cuda): workers share the GPUs and take turns timing"
        )
    os.environ["CUDA_VISIBLE_DEVICES"] = choices[int(digits) % len(choices)]
    return None
