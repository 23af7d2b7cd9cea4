"""The same heap in every process that measures (infperf_expert's ``heap``).

glibc's ``malloc`` serves a large request (from 128 KiB) with fresh pages of its own
``mmap``, zero-filled by the kernel on first touch, and returns them on ``free``; but each
time such a block is freed it raises that threshold to the block's size (up to 32 MiB on
64-bit), after which requests of that size come from the heap and reuse pages already
touched. So a process's speed on allocation-heavy work (a transformer's prefill, a dynamic
KV cache) depends on the order in which it happened to free large blocks: what ran before
in it, how its warmup went. Four processes of identical code generating with a tiny
Llama at prompt 256 read time to first token 15.4, 15.4, 18.9 and 15.5 ms; six with the
dynamic KV cache spread by an sd of 4.1% against 0.7% with the threshold fixed, and the
threshold fixed at glibc's start value made every process 55% slower alike (``python
benchmarks/generation_offset.py --prompt 256 --variants plain,big-free,heap-start,heap-steady``,
docs/MEASURED.md, "The same heap in every process"). That offset is between processes,
where an interleaved comparison's variance lives, and no number of blocks removes it.

``steady`` (the default) fixes both thresholds at what a long-running process tends to
reach: requests up to 32 MiB come from the heap (``M_MMAP_THRESHOLD``), and the heap keeps
up to 64 MiB of free memory at its top instead of giving it back (``M_TRIM_THRESHOLD``).
Setting either turns glibc's adjustment off for the process's life, whatever it freed
before. ``system`` leaves glibc as it is. Elsewhere (not glibc: macOS, Windows, musl)
nothing is changed and :func:`state` says so.

The first call in a process decides (:func:`settle`): an A/B worker applies the
controller's policy before its session starts, and its own checkout's ini cannot undo it.
"""

from __future__ import annotations

import os

# mallopt parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_state: str | None = None


def _glibc() -> bool:
    try:
        return bool((os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"))
    except (AttributeError, ValueError, OSError):
        return False


def set_thresholds(mmap_bytes: int | None = None, trim_bytes: int | None = None) -> bool:
    """glibc's mmap and trim thresholds fixed (``mallopt``), which also turns its adjustment
    off; by default at 32 MiB and 64 MiB (32-bit: the mmap threshold's maximum there,
    512 KiB, and twice that). Whether glibc took both. ``benchmarks/generation_offset.py``
    sets other values through it."""
    # ctypes (about 2 ms to import) only when pytest_configure settles a session's heap, not
    # when the plugin's modules are imported.
    import ctypes  # noqa: PLC0415

    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # glibc's DEFAULT_MMAP_THRESHOLD_MAX: 4 MiB x sizeof(long); a larger value is refused.
    mmap = mmap_bytes if mmap_bytes is not None else 4 * 1024 * 1024 * ctypes.sizeof(ctypes.c_long)
    trim = trim_bytes if trim_bytes is not None else 2 * mmap
    return bool(mallopt(_M_MMAP_THRESHOLD, mmap) and mallopt(_M_TRIM_THRESHOLD, trim))


def settle(policy: str) -> str:
    """Apply ``policy`` (``steady`` or ``system``, ``core.options.HEAP_CHOICES``) to this
    process's heap, once: a later call keeps the first one's. Returns :func:`state`."""
    global _state
    if _state is None:
        if policy == "steady":
            if not _glibc():
                _state = "system (not glibc)"
            else:
                _state = "steady" if set_thresholds() else "system (mallopt refused)"
        else:
            _state = "system"
    return _state


def changed(baseline: object, now: str | None) -> str | None:
    """A warning when a baseline's heap (its ``environment.soft.heap``; None where it was
    saved before the setting existed) differs from this run's, where one of them is steady;
    else None. Not an environment difference that makes verdicts incomparable: settling
    measures both sides on this run's heap, and a save on main makes the next reference."""
    was = baseline if isinstance(baseline, str) else None
    if (was == "steady") == (now == "steady"):
        return None
    then = f"heap {was}" if was else "glibc's own malloc thresholds (saved before the heap setting)"
    return (
        f"the baseline was measured on {then} and this run on heap {now}: allocation-heavy "
        "models (a transformer's prefill) can read a few percent to a fifth faster or slower "
        "for that alone. What the stored pass flags is settled interleaved, both sides on "
        "this run's heap; the next baseline saved on main is measured on it too"
    )


def state() -> str | None:
    """What holds in this process: ``steady``, ``system`` (with why, where steady was asked
    for and could not be had), or None before :func:`settle`."""
    return _state
