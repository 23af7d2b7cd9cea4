"""The GPUs' identity from ``nvidia-smi`` where the NVML Python bindings are missing
(:func:`pytest_infperf.measure.gpu.snapshot` falls back to it): apart from
:mod:`.gpu`, which reads NVML itself."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

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
