"""NVIDIA GPU state through NVML (the ``nvidia-ml-py`` package, module ``pynvml``).

Everything degrades to ``None`` when NVML, the driver or a GPU is missing: a CPU machine
gets ``"gpu": null`` in its environment and no error. NVML numbers devices physically and
ignores ``CUDA_VISIBLE_DEVICES``; :func:`visible_indices` maps the visible ones back.
"""

from __future__ import annotations

import os
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
        import pynvml

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


def device_state(index: int) -> dict[str, Any] | None:
    """Clocks, temperature, power and throttle reasons of one device, now."""
    nv = _init()
    if nv is None:
        return None
    try:
        handle = nv.nvmlDeviceGetHandleByIndex(index)
    except Exception:
        return None
    reasons = _try(nv.nvmlDeviceGetCurrentClocksThrottleReasons, handle)
    active = [name for bit, name in _THROTTLE_BITS.items() if reasons and reasons & bit]
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
        return None
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
        "count": count,
        "driver_version": driver,
        "driver_major": driver.split(".")[0] if driver and driver != "None" else None,
        "cuda_driver_version": f"{cuda // 1000}.{(cuda % 1000) // 10}" if cuda else None,
        "visible": visible_indices(),
        "devices": devices,
    }
