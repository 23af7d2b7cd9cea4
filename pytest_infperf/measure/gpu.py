"""NVIDIA GPU state through NVML (the ``nvidia-ml-py`` package, module ``pynvml``).

Everything degrades to ``None`` when NVML, the driver or a GPU is missing: a CPU machine
gets ``"gpu": null`` in its environment and no error. NVML numbers devices physically and
ignores ``CUDA_VISIBLE_DEVICES``; :func:`visible_indices` maps the visible ones back.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

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
#: The "applications clocks setting" event reason, which NVML also names "user-defined
#: clocks": active while clocks set with ``nvidia-smi -ac`` or locked with ``-lgc`` cap the
#: clock. NVML has no getter for ``-lgc`` locks; this bit is how they show.
USER_CLOCKS_BIT = 0x0000000000000002


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
            or (reasons is not None and reasons & USER_CLOCKS_BIT)
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


def nvidia_present() -> bool:
    """Whether this machine has an NVIDIA GPU at all, whatever this process can use: the
    driver's device node or its folder, or its nvidia-smi. Never a CUDA library call."""
    return (
        Path("/dev/nvidiactl").exists()
        or Path("/proc/driver/nvidia").is_dir()
        or shutil.which("nvidia-smi") is not None
    )


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
