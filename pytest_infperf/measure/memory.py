"""Host memory around the timed region.

Peak RSS of a region: on Linux, writing ``5`` to ``/proc/self/clear_refs`` resets the
process's high-water mark (VmHWM), so VmHWM read afterwards is the peak *within* the region.
Elsewhere (or when the reset is refused) the peak is approximated by the larger of the RSS
before and after, and the result says which method was used.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
_state: dict[str, Any] = {}


def _rss() -> int:
    import psutil  # noqa: PLC0415 (psutil: imported at start-up)

    return int(psutil.Process(os.getpid()).memory_info().rss)


def _vm_hwm() -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _reset_hwm() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def before_timed() -> None:
    _state.clear()
    _state["hwm_reset"] = _reset_hwm()
    _state["rss_before"] = _rss()


def after_timed() -> dict[str, Any]:
    rss_after = _rss()
    before = int(_state.get("rss_before", rss_after))
    peak: int | None = None
    method = "rss-before-after"
    if _state.get("hwm_reset"):
        peak = _vm_hwm()
        method = "vmhwm"
    if peak is None:
        peak = max(before, rss_after)
        method = "rss-before-after"
    return {
        "rss_before_bytes": before,
        "rss_after_bytes": rss_after,
        "rss_peak_bytes": peak,
        "rss_growth_bytes": max(0, peak - before),
        "rss_method": method,
    }
