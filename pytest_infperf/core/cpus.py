"""Which CPUs this process may run on, and the one infperf_expert's ``pin`` names (see
:mod:`pytest_infperf.measure.pinning` for why interleaved blocks are pinned)."""

from __future__ import annotations

import os

#: What infperf_expert's pin accept besides a CPU number.
CHOICES = ("auto", "off")


def available() -> frozenset[int]:
    """The CPUs this thread may run on (empty where the platform does not say: not Linux)."""
    get = getattr(os, "sched_getaffinity", None)
    if get is None:
        return frozenset()
    try:
        return frozenset(get(0))
    except OSError:
        return frozenset()


def resolve(setting: str) -> int | None:
    """The CPU interleaved blocks run on, from the setting: ``auto``, the highest-numbered
    CPU this process may run on (CPU 0 takes most interrupts) when it may run on two or more;
    ``off``, none; a number, that CPU. ``ValueError`` names a CPU the process may not use."""
    if setting == "off":
        return None
    cpus = available()
    if setting == "auto":
        return max(cpus) if len(cpus) >= 2 else None
    cpu = int(setting)
    if cpus and cpu not in cpus:
        raise ValueError(f"this process may run on CPUs {ranges(cpus)} only (os.sched_getaffinity)")
    return cpu if cpus else None


def ranges(cpus: frozenset[int]) -> str:
    """``0-3,6``: the CPU set as ``taskset -c`` writes it."""
    out: list[str] = []
    for cpu in sorted(cpus):
        if out and out[-1].split("-")[-1] == str(cpu - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{cpu}"
        else:
            out.append(str(cpu))
    return ",".join(out)
