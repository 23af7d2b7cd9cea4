"""Both sides of an interleaved GPU comparison on the GPU's NUMA node (measure/numa.py): what
the kernel says of a machine, as a table over sysfs trees written here, and a process
started bound by the command the workers are started with."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_infperf.core.cpus import available
from pytest_infperf.measure import numa

GPU0, GPU1 = "00000000:18:00.0", "00000000:AF:00.0"


def machine(root: Path, nodes: dict[int, str], gpus: dict[str, int]) -> Path:
    """A sysfs tree: NUMA nodes and their CPU lists, GPUs by PCI bus and their node."""
    for node, cpus in nodes.items():
        folder = root / "devices" / "system" / "node" / f"node{node}"
        folder.mkdir(parents=True)
        (folder / "cpulist").write_text(cpus + "\n")
    for bus, node in gpus.items():
        dev = root / "bus" / "pci" / "devices" / f"{bus[4:].lower()}"
        dev.mkdir(parents=True)
        (dev / "numa_node").write_text(f"{node}\n")
    return root


def tools(*found: str):  # type: ignore[no-untyped-def]
    return lambda name: f"/usr/bin/{name}" if name in found else None


ALL = frozenset(range(32))
TWO = {0: "0-15", 1: "16-31"}

# (id, nodes, gpus, the session's buses, CPUs it may use, tools, binding or why not)
ROWS = [
    ("far node: numactl", TWO, {GPU1: 1}, [GPU1], ALL, ("numactl",), (1, "16-31", "numactl")),
    ("near node", TWO, {GPU0: 0}, [GPU0], ALL, ("numactl", "taskset"), (0, "0-15", "numactl")),
    ("no numactl: taskset", TWO, {GPU1: 1}, [GPU1], ALL, ("taskset",), (1, "16-31", "taskset")),
    ("neither tool", TWO, {GPU1: 1}, [GPU1], ALL, (), "neither numactl nor taskset"),
    ("a cgroup's CPUs", TWO, {GPU1: 1}, [GPU1], frozenset({3, 17, 18}), ("taskset",),
     (1, "17-18", "taskset")),
    ("one node", {0: "0-31"}, {GPU0: 0}, [GPU0], ALL, ("numactl",), "one NUMA node"),
    ("no node for the GPU", TWO, {GPU0: -1}, [GPU0], ALL, ("numactl",), "no NUMA node"),
    ("GPUs on both nodes", TWO, {GPU0: 0, GPU1: 1}, [GPU0, GPU1], ALL, ("numactl",),
     "nodes [0, 1]"),
    ("no GPU", TWO, {}, [], ALL, ("numactl",), "no GPU"),
    ("no NVML", TWO, {}, None, ALL, ("numactl",), "no GPU"),
    ("none of its CPUs", TWO, {GPU1: 1}, [GPU1], frozenset({0, 1}), ("numactl",),
     "none of NUMA node 1's CPUs"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("nodes", "gpus", "buses", "may_use", "found", "expected"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_a_session_binds_where_its_gpus_share_a_node(
    tmp_path: Path,
    nodes: dict[int, str],
    gpus: dict[str, int],
    buses: list[str] | None,
    may_use: frozenset[int],
    found: tuple[str, ...],
    expected: tuple[int, str, str | None] | str,
) -> None:
    sysfs = machine(tmp_path, nodes, gpus)
    got = numa.binding_for(buses, sysfs, may_use, tools(*found))
    if isinstance(expected, str):
        assert isinstance(got, str) and expected in got
        return
    assert isinstance(got, numa.Binding)
    node, cpus, tool = expected
    assert (got.node, got.record()["cpus"]) == (node, cpus)
    assert got.tool == (f"/usr/bin/{tool}" if tool else None)
    cmd = got.command(["python", "-m", "pytest_infperf.abworker"])
    # The same CPUs whichever tool: those this process would run on.
    if tool == "numactl":
        assert cmd[:3] == ["/usr/bin/numactl", f"--physcpubind={cpus}", f"--membind={node}"]
    else:
        assert cmd[:3] == ["/usr/bin/taskset", "-c", cpus]


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0-3,8,10-11\n", {0, 1, 2, 3, 8, 10, 11}), ("5", {5}), ("", set()), ("0-x", set())],
)
def test_a_kernel_cpu_list(text: str, cpus: set[int]) -> None:
    assert numa.parse_cpulist(text) == cpus


@pytest.mark.skipif(shutil.which("taskset") is None, reason="no taskset on this machine")
def test_a_worker_started_bound_runs_on_the_nodes_cpus_from_birth() -> None:
    """The command a worker is started with binds it before its first instruction: a
    process started so reports the CPUs of the binding, and only those."""
    cpu = max(available())
    bound = numa.Binding(0, frozenset({cpu}), shutil.which("taskset"))
    show = [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"]
    out = subprocess.run(bound.command(show), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"[{cpu}]"


def test_this_machine_binds_nothing_without_a_gpu() -> None:
    """The negative control on a runner without a GPU (this one): nothing is bound."""
    if numa.bus_ids():
        pytest.skip("a GPU is visible here")
    assert isinstance(numa.session_binding(), str)


def test_the_first_pairs_head_runs_where_its_workers_do_or_nothing_is_bound() -> None:
    """This process heads the first pair: bound where it was started bound, moved where no
    library has sized a thread pool yet, and otherwise nothing is bound (a late move left
    torch's pool at two threads where a worker started bound had one), saying how to start
    the run bound."""
    cpu = max(available())
    mine = numa.Binding(0, available(), "/usr/bin/taskset")
    assert numa.here(mine, loaded=("torch",)) is mine  # started on these CPUs already
    one = numa.Binding(1, frozenset({cpu}), "/usr/bin/taskset")
    why = numa.here(one, loaded=("numpy", "onnxruntime", "torch"))
    assert isinstance(why, str) and "imported torch, onnxruntime before its workers" in why
    assert why.endswith("numactl --cpunodebind=1 --membind=1 pytest ...")
    # Nothing sized yet: moved (in a process of its own, not this test's), with what the
    # A/B controller's own modules import loaded, as when it sets up.
    moved = (
        "import os; import pytest_infperf.ab.controller; from pytest_infperf.measure import numa; "
        f"b = numa.Binding(1, frozenset({{{cpu}}}), 'taskset'); "
        "print(numa.here(b) is b, sorted(os.sched_getaffinity(0)))"
    )
    out = subprocess.run([sys.executable, "-c", moved], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", f"[{cpu}]"]
