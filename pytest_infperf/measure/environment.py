"""The environment fingerprint: what a benchmark ran on.

*Hard* fields decide whether two measurements can be compared at all (CPU and GPU model,
driver major, CUDA driver, torch/onnxruntime versions and builds, thread settings, Python
minor version); they are hashed into the environment key that names the baselines folder.
*Soft* fields (hostname, kernel, clocks, load, other package versions) are only reported.

Nothing here imports torch or onnxruntime: versions come from package metadata, and torch's
thread count is read only if the user's code already imported torch.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import re
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.cpus import available
from . import gpu as _gpu
from . import heap as _heap

#: Packages whose version and build decide what a model's kernels are.
HARD_PACKAGES = ("torch", "onnxruntime", "onnxruntime-gpu")
#: Packages recorded for information.
SOFT_PACKAGES = ("numpy", "scipy", "transformers", "onnx", "pytest", "pytest-infperf")
#: Thread variables that change how many cores a framework uses.
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "TORCH_NUM_THREADS",
)


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _physical_cores() -> int | None:
    try:
        import psutil  # noqa: PLC0415 (psutil: imported at start-up)

        count = psutil.cpu_count(logical=False)
        return int(count) if count else None
    except Exception:
        return None


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "unknown"


def hard_fields(gpu: dict[str, Any] | None) -> dict[str, Any]:
    """The fields that must be equal for two runs to be comparable (flat, JSON-safe)."""
    fields: dict[str, Any] = {
        "os": platform.system(),
        "arch": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_logical": os.cpu_count(),
        # None where the platform does not say (not Linux).
        "cpu_affinity": len(available()) or None,
        "python": f"{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}",
    }
    for name in HARD_PACKAGES:
        fields[f"pkg:{name}"] = package_version(name)
    for var in THREAD_VARS:
        fields[f"env:{var}"] = os.environ.get(var)
    if gpu is not None:
        fields["gpu_models"] = sorted({d["name"] for d in gpu["devices"]})
        fields["gpu_driver_major"] = gpu["driver_major"]
        fields["cuda_driver"] = gpu["cuda_driver_version"]
        fields["gpu_mig"] = sorted({str(d.get("mig_mode")) for d in gpu["devices"]})
        profiles = _gpu.mig_profiles(gpu, os.environ.get("CUDA_VISIBLE_DEVICES"))
        if profiles:  # only then: the keys of machines without MIG stay as they were
            fields["gpu_mig_profiles"] = profiles
    else:
        fields["gpu_models"] = None
    return fields


def env_key(hard: dict[str, Any]) -> str:
    """Readable prefix plus a hash of every hard field: ``linux-x86_64-cpu-py3.11-1a2b3c4d5e``."""
    digest = hashlib.sha256(json.dumps(hard, sort_keys=True).encode()).hexdigest()[:10]
    accel = _slug(hard["gpu_models"][0]) if hard.get("gpu_models") else "cpu"
    py = hard["python"].split("-")[-1]
    return f"{_slug(hard['os'])}-{_slug(hard['arch'])}-{accel}-py{py}-{digest}"


def collect(with_gpu: bool = True) -> dict[str, Any]:
    """The full environment document: structured sections plus flat ``hard``/``soft``."""
    gpu = _gpu.snapshot() if with_gpu else None
    hard = hard_fields(gpu)
    packages = {n: v for n in HARD_PACKAGES + SOFT_PACKAGES if (v := package_version(n))}
    threads: dict[str, Any] = {v: os.environ.get(v) for v in THREAD_VARS if os.environ.get(v)}
    torch = sys.modules.get("torch")
    if torch is not None:
        threads["torch_num_threads"] = torch.get_num_threads()
        threads["torch_num_interop_threads"] = torch.get_num_interop_threads()
    governor = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    soft: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "python_version": platform.python_version(),
        "cpu_governor": governor,
        "cpu_physical": _physical_cores(),
        "loadavg_1m": round(load[0], 2) if load else None,
        "gpu_count": len(gpu["devices"]) if gpu else 0,
        # Soft: a locked-clock baseline and an unlocked run compare, flagged.
        "gpu_clocks_locked": _gpu.clocks_locked(gpu),
        # Soft: a baseline saved before the heap setting existed still compares (settling
        # measures both sides on the same heap).
        "heap": _heap.state(),
    }
    for name in SOFT_PACKAGES:
        soft[f"pkg:{name}"] = package_version(name)
    return {
        "key": env_key(hard),
        "os": {
            "system": platform.system(),
            "release": platform.release(),
            "machine": platform.machine(),
            "platform": platform.platform(),
        },
        "python": {
            "implementation": sys.implementation.name,
            "version": platform.python_version(),
            "executable": sys.executable,
        },
        "cpu": {
            "model": hard["cpu_model"],
            "logical": hard["cpu_logical"],
            "physical": soft["cpu_physical"],
            "affinity": hard["cpu_affinity"],
            "governor": governor,
        },
        "gpu": gpu,
        "threads": threads,
        "packages": packages,
        "hostname": soft["hostname"],
        "hard": hard,
        "soft": soft,
    }


def intra_op_threads(env: Mapping[str, Any]) -> int | None:
    """A benchmark's intra-op thread count as its own environment records it (torch's
    ``num_threads``, ONNX Runtime's ``intra_op_threads``; 0: the library's default, one per
    core); None where neither library says (a plain callable)."""
    n = env.get("num_threads", env.get("intra_op_threads"))
    return None if n is None else int(n)


def diff(current: dict[str, Any], baseline: dict[str, Any]) -> dict[str, list[Any]]:
    """Hard fields that differ: ``{field: [baseline value, current value]}``."""
    keys = sorted(set(current) | set(baseline))
    return {k: [baseline.get(k), current.get(k)] for k in keys if current.get(k) != baseline.get(k)}


def describe_diff(differences: dict[str, list[Any]]) -> str:
    """``diff``'s result for a message: ``field: 'baseline' -> 'current', ...``."""
    return ", ".join(f"{k}: {v[0]!r} -> {v[1]!r}" for k, v in differences.items())
