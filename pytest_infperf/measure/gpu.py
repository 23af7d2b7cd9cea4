"""NVIDIA GPU state through NVML (the ``nvidia-ml-py`` package, module ``pynvml``).

Everything degrades to ``None`` when NVML, the driver or a GPU is missing: a CPU machine
gets ``"gpu": null`` in its environment and no error. NVML numbers devices physically and
ignores ``CUDA_VISIBLE_DEVICES``; :func:`visible_indices` maps the visible ones back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

_nvml: Any = None
_failed = False

#: Clock-event (throttle) reasons that mean the GPU ran slower than it could. Idle and
#: application-clock settings are not slowdowns.
_THROTTLE_BITS = {
    0x0000000000000004: "sw_power_cap",
    0x0000000000000008: "hw_slowdown",
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


def _reasons(nv: Any, handle: Any) -> list[str] | None:
    # The clock-*event*-reasons call replaced the deprecated throttle-reasons one (NVML
    # 12.535); older bindings have only the latter. None when neither answers: "unknown",
    # not "not throttled".
    read = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    reasons = _try(read, handle) if read is not None else None
    if reasons is None:
        return None
    return [name for bit, name in _THROTTLE_BITS.items() if reasons & bit]


class RegionWatch:
    """NVML readings across a GPU benchmark's timed region, taken at its start, at every
    sampling checkpoint (between samples, never inside one) and at its end, while the GPU
    is busy: an idle GPU before warmup or after the run says nothing about throttling
    under load. Records energy per call (the total-energy counter, mJ), the throttle
    reasons seen, the power-violation time, and the compute processes of *other* PIDs on
    the same GPU: another job on the GPU is the GPU runner's noisy neighbour."""

    def __init__(self, index: int) -> None:
        self.nv = _init()
        self.handle = _try(self.nv.nvmlDeviceGetHandleByIndex, index) if self.nv else None
        self.energy0: int | None = None
        self.violation0: int | None = None
        self.reasons: set[str] = set()
        self.reasons_known = False
        self.tenants: set[int] = set()

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
        reasons = _reasons(self.nv, self.handle)
        if reasons is not None:
            self.reasons_known = True
            self.reasons.update(reasons)
        procs = _try(self.nv.nvmlDeviceGetComputeRunningProcesses, self.handle) or []
        me = os.getpid()
        self.tenants.update(int(p.pid) for p in procs if int(p.pid) != me)

    def result(self, calls: int) -> dict[str, Any]:
        if self.handle is None:
            return {}
        self.check()
        out: dict[str, Any] = {
            "throttle_reasons": sorted(self.reasons) if self.reasons_known else None,
            "other_processes": sorted(self.tenants),
        }
        energy1 = _try(self.nv.nvmlDeviceGetTotalEnergyConsumption, self.handle)
        if self.energy0 is not None and energy1 is not None and calls > 0:
            out["energy_mj_per_call"] = round((int(energy1) - int(self.energy0)) / calls, 4)
        violation1 = self._violation()
        if self.violation0 is not None and violation1 is not None:
            out["power_violation_s"] = (violation1 - self.violation0) / 1e9
        return out


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


_SMI_FIELDS = "index,name,uuid,driver_version,memory.total,compute_cap"


def smi_snapshot() -> dict[str, Any] | None:
    """The GPUs' identity from ``nvidia-smi`` (shipped with the driver), when the NVML
    Python bindings are missing: names, UUIDs, driver, memory, compute capability. No
    clocks or throttling (those need nvidia-ml-py: ``pip install nvidia-ml-py``)."""

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={_SMI_FIELDS}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    devices = []
    driver: str | None = None
    for line in out.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 6 or not cells[0].isdigit():
            continue
        driver = driver or cells[3]
        memory = cells[4]
        devices.append(
            {
                "index": int(cells[0]),
                "name": cells[1],
                "uuid": cells[2],
                "memory_total_bytes": int(memory) * 2**20 if memory.isdigit() else None,
                "compute_capability": cells[5],
                "state": None,
            }
        )
    if not devices:
        return None
    return {
        "source": "nvidia-smi",
        "count": len(devices),
        "driver_version": driver,
        "driver_major": driver.split(".")[0] if driver else None,
        "cuda_driver_version": None,
        "visible": None,
        "devices": devices,
    }


# --- pinning pytest-xdist workers ----------------------------------------------------------


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
