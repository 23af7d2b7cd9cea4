"""Both sides of an interleaved GPU comparison on the GPU's own NUMA node.

On a GPU runner with more than one NUMA node, a process whose threads and memory sit on the
far node from the GPU pays for every host-to-device step over the interconnect, and where
the scheduler puts each process is chance: a latency that follows the host then differs
between processes by that chance too. TensorRT-LLM binds each worker to its GPU's node at
birth (``numactl --cpunodebind --membind``): a late ``sched_setaffinity`` leaves threads and
first-touched pages on the far node, and thread pools sized for the CPUs it had. Here every
A/B worker of a session whose GPUs share a node starts bound to that node's CPUs, both
sides alike: ``numactl`` where it is installed (CPUs and memory), else ``taskset`` (the
CPUs; memory follows first touch). This process heads the first process pair, so it must
run on the same CPUs: it does where it was started bound (its workers inherit that), or is
moved there before any library that sizes a thread pool was imported. Otherwise nothing is
bound, and the record says why and how to start the run bound; so too on a machine of one
node, without NVML, with GPUs on several nodes, or without either tool.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

from ..core.cpus import available, ranges
from . import gpu as _gpu


@dataclasses.dataclass(frozen=True)
class Binding:
    """The node the session's GPUs sit on, the CPUs of it this process may use, and the
    tool that binds a worker at birth (``numactl`` or ``taskset``; None: none found)."""

    node: int
    cpus: frozenset[int]
    tool: str | None

    def command(self, cmd: list[str]) -> list[str]:
        """``cmd`` started bound to the node (as it is where no tool was found)."""
        if self.tool is None:
            return cmd
        # The CPUs themselves, not the whole node: the set this process runs on (a cgroup
        # may allow only part of the node).
        if Path(self.tool).name == "numactl":
            return [self.tool, f"--physcpubind={ranges(self.cpus)}", f"--membind={self.node}", *cmd]
        return [self.tool, "-c", ranges(self.cpus), *cmd]

    def record(self) -> dict[str, Any]:
        how = Path(self.tool).name if self.tool else "not bound: neither numactl nor taskset"
        return {"node": self.node, "cpus": ranges(self.cpus), "workers": how}

    def advice(self) -> str:
        node = self.node
        return f"start the run bound: numactl --cpunodebind={node} --membind={node} pytest ..."


def parse_cpulist(text: str) -> set[int]:
    """A kernel CPU list (``0-3,8,10-11``) as numbers; empty for anything else."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            return set()
        out.update(range(int(low), int(high or low) + 1))
    return out


def pci_node(bus_id: str, sysfs: Path) -> int | None:
    """The NUMA node of a PCI device by its NVML bus id (``00000000:18:00.0``); None where
    the kernel does not say (-1: no NUMA information)."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    if not rest:
        return None
    path = sysfs / "bus" / "pci" / "devices" / f"{domain[-4:].rjust(4, '0')}:{rest}" / "numa_node"
    try:
        node = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def nodes(sysfs: Path) -> list[int]:
    """The machine's NUMA nodes (empty where the kernel does not list them)."""
    folder = sysfs / "devices" / "system" / "node"
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError:
        return []
    return sorted(int(n[4:]) for n in names if n.startswith("node") and n[4:].isdigit())


def node_cpus(node: int, sysfs: Path) -> set[int]:
    try:
        text = (sysfs / "devices" / "system" / "node" / f"node{node}" / "cpulist").read_text()
    except OSError:
        return set()
    return parse_cpulist(text)


def bus_ids() -> list[str] | None:
    """The PCI bus ids of the GPUs this process sees (NVML); None without NVML."""
    nv = _gpu._init()
    if nv is None:
        return None
    indices = _gpu.visible_indices()
    if indices is None:
        indices = list(range(_gpu._try(nv.nvmlDeviceGetCount) or 0))
    out = []
    for index in indices:
        handle = _gpu._try(nv.nvmlDeviceGetHandleByIndex, index)
        info = _gpu._try(nv.nvmlDeviceGetPciInfo, handle) if handle is not None else None
        bus = getattr(info, "busId", None)
        if bus is not None:
            out.append(_gpu._text(bus))
    return out


def binding_for(
    buses: list[str] | None, sysfs: Path, may_use: frozenset[int], which: Any = shutil.which
) -> Binding | str:
    """The binding of a session whose GPUs are on ``buses``, or why there is none."""
    if not buses:
        return "no GPU seen through NVML"
    if len(nodes(sysfs)) < 2:
        return "one NUMA node"
    found = {pci_node(bus, sysfs) for bus in buses}
    if None in found:
        return "the kernel gives the GPU no NUMA node"
    if len(found) > 1:
        return f"the visible GPUs sit on NUMA nodes {sorted(n for n in found if n is not None)}"
    (node,) = found
    assert node is not None
    cpus = node_cpus(node, sysfs) & set(may_use)
    if not cpus:
        return f"none of NUMA node {node}'s CPUs is one this process may run on"
    tool = which("numactl") or which("taskset")
    if tool is None:  # workers unbound beside a bound head would differ by more than code
        return f"neither numactl nor taskset to start workers on NUMA node {node}'s CPUs"
    return Binding(node, frozenset(cpus), tool)


@functools.cache
def session_binding() -> Binding | str:
    """This session's binding (:func:`binding_for` on this machine), read once."""
    return binding_for(bus_ids(), Path("/sys"), available())


#: Frameworks that size their intra-op thread pool from the CPUs they see when imported: a
#: process moved to fewer CPUs after would run more threads than a worker started there.
#: Not numpy: this plugin imports it before any pair starts (the A/B controller's modules),
#: and a model's threads are its framework's.
THREAD_POOLS = ("torch", "onnxruntime", "tensorflow", "jax")


def here(b: Binding, loaded: Collection[str] | None = None) -> Binding | str:
    """``b`` where this process (the first pair's head) runs on its CPUs too, moved there
    if nothing here sized a thread pool yet; else why nothing is bound, with the fix."""
    mine = available()
    if mine and mine <= b.cpus:
        return b  # started bound
    pools = [m for m in THREAD_POOLS if m in (sys.modules if loaded is None else loaded)]
    if pools:
        return (
            f"this process imported {', '.join(pools)} before its workers started, on CPUs "
            f"outside NUMA node {b.node}'s: {b.advice()}"
        )
    if not bind_here(b):
        return f"this process could not be moved to NUMA node {b.node}'s CPUs: {b.advice()}"
    return b


def bind_here(b: Binding) -> bool:
    """Move every thread of this process to the binding's CPUs (its memory stays where it
    was touched); whether it could."""
    try:
        tids = [int(t.name) for t in Path("/proc/self/task").iterdir()]
    except (OSError, ValueError):
        tids = [0]
    moved = False
    for tid in tids:
        try:
            os.sched_setaffinity(tid, b.cpus)
            moved = True
        except OSError:
            continue
    return moved
