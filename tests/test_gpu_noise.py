"""The GPU runner's own noise (docs/BACKENDS.md, "GPU noise"): blocks read between, flagged
when throttled or shared, set aside, and verdicts withheld past a share.

A CPU machine has no GPU, so NVML is replaced here by ``FakeNVML``, a labelled fake that
answers what NVML would: only what a CPU cannot do is faked. tests/test_gpu.py runs the
real NVML path on a GPU (a tenant process included) and skips without one.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest

from pytest_infperf.ab.interleave import interleave
from pytest_infperf.core.names import CompareMode
from pytest_infperf.core.results import Comparison, Origin, Reason, Verdict
from pytest_infperf.judge.device import gpu_withholds
from pytest_infperf.judge.judge import Judge
from pytest_infperf.judge.plan import GPU_SHARE_LIMIT, PairedPlan
from pytest_infperf.judge.rules import Policy
from pytest_infperf.measure import gpu, tenancy
from pytest_infperf.measure.tenancy import GpuRead, block_flags

POWER_CAP, IDLE, USER_CLOCKS = 0x4, 0x1, 0x2


def _read(reasons: int = 0, pids: tuple[int, ...] = (1,)) -> GpuRead:
    return GpuRead(reasons, 1980, frozenset(pids))


def test_a_block_is_flagged_for_a_slowdown_at_either_reading() -> None:
    assert block_flags(_read(), _read(), {1}) == ()
    assert block_flags(_read(IDLE | USER_CLOCKS), _read(), {1}) == ()  # not slowdowns
    assert block_flags(_read(POWER_CAP), _read(), {1}) == ("sw_power_cap",)
    assert block_flags(_read(), _read(0x40 | 0x10), {1}) == ("sync_boost", "hw_thermal")


def test_an_unknown_reading_claims_nothing() -> None:
    unknown = GpuRead(None, None, frozenset())
    assert block_flags(unknown, unknown, set()) == ()  # NVML silent: nothing claimed


def test_another_process_on_the_gpu_flags_the_block() -> None:
    assert block_flags(_read(pids=(1, 7)), _read(), {1}) == (tenancy.OTHER_PROCESS,)
    assert block_flags(_read(pids=(1, 7)), _read(), {1, 7}) == ()  # our own worker


class FakeNVML:
    """A fake of the ``pynvml`` calls BlockWatch makes, for a CPU machine. Reading k (one per
    call of the clock-event reasons) answers state k: (reasons bitmask, PIDs holding a
    context, PIDs that computed since the last reading). ``utilisation=False``: a driver
    that keeps no per-process utilisation samples."""

    NVML_CLOCK_SM = 0

    def __init__(
        self, states: list[tuple[int, tuple[int, ...], tuple[int, ...]]], utilisation: bool
    ) -> None:
        self.states = states
        self.i = 0
        self.reads = 0
        self.utilisation = utilisation

    def _state(self) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        return self.states[min(self.i, len(self.states) - 1)]

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: str) -> int:
        self.i = self.reads
        self.reads += 1
        return self._state()[0]

    def nvmlDeviceGetClockInfo(self, handle: str, clock: int) -> int:
        return 1350 if self._state()[0] & POWER_CAP else 1980

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[Any]:
        return [type("P", (), {"pid": pid}) for pid in self._state()[1]]

    def nvmlDeviceGetProcessUtilization(self, handle: str, since: int) -> list[Any]:
        busy = self._state()[2]
        if not self.utilisation or not busy:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")  # as NVML: no sample since
        return [type("S", (), {"pid": p, "smUtil": 40, "timeStamp": self.i + 1}) for p in busy]


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(
        states: list[tuple[int, tuple[int, ...], tuple[int, ...]]], utilisation: bool = True
    ) -> FakeNVML:
        fake = FakeNVML(states, utilisation)
        monkeypatch.setattr(gpu, "_nvml", fake)
        monkeypatch.setattr(gpu, "_failed", False)
        # The fake's PIDs stand for processes this one can see (test_unseen_... below).
        monkeypatch.setattr(tenancy, "unseen", lambda pid: False)
        return fake

    return install


class _Side:
    """A side whose every block takes 1 ms per call (x ``factor``)."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def block(
        self, count: int, calls: int, cpu: int | None = None
    ) -> tuple[list[float], dict[str, list[float]]]:
        return [1e-3 * self.factor] * count, {}


def test_interleave_sets_aside_every_quad_with_a_flagged_block(fake_nvml: Any) -> None:
    # Readings: the start (0), then one after each block. Processes are read at each quad's
    # end: reading 8 (quad 2's end) finds PID 99 computing. Quad 2's last block and quad
    # 3's first (each reading bounds two blocks) are flagged: both quads are set aside.
    clean = (0, (1, 5), ())  # PID 5 holds a context from before and never computes
    fake_nvml([clean] * 8 + [(0, (1, 5, 99), (99,))] + [clean] * 200)
    watch = tenancy.BlockWatch(0, {1}, "exclude")
    plan = PairedPlan(0.05, 0.05, ("median",))
    run = interleave(_Side(1.0), _Side(1.1), 1, 1e-3, plan, watch=watch)
    assert run.gpu is not None
    record = run.gpu.to_json()
    assert record["set_aside"] == {"base": 4, "head": 4}  # two quads, two blocks a side each
    assert record["flagged"] == {"base": 2}
    assert record["reasons"] == {tenancy.OTHER_PROCESS: 2}
    assert record["other_processes"] == [99]
    assert record["processes_at_start"] == [5]
    # The kept quads are all clean, and as many as the plan asked for.
    assert len(run.quads["median"]) == 8
    assert record["blocks"]["base"] == record["blocks"]["head"] == 4 * 10 // 2
    assert all(q == pytest.approx(math.log(1.1)) for q in run.quads["median"])
    assert record["read_us_per_block"] is not None and record["read_us_per_block"] > 0


def test_a_process_that_opens_a_context_mid_run_is_a_tenant(fake_nvml: Any) -> None:
    """A context that appears during the run is a tenant."""
    clean = (0, (1,), ())
    fake_nvml([clean] * 4 + [(0, (1, 42), ())] * 200, utilisation=False)
    watch = tenancy.BlockWatch(0, {1}, "exclude")
    interleave(_Side(1.0), _Side(1.0), 1, 1e-3, PairedPlan(0.05, 0.05, ("median",)), watch=watch)
    assert watch.tally.to_json()["other_processes"] == [42]


def test_a_tenant_that_came_after_the_session_began_counts_from_the_first_block(
    fake_nvml: Any,
) -> None:
    """Seen on an H100: a tenant that starts while the session builds and warms up its
    models is already there when a pair begins; ``before`` is the session's start."""
    fake_nvml([(0, (1, 5, 77), ())] * 400)  # 5 was there before the session, 77 was not
    watch = tenancy.BlockWatch(0, {1}, "exclude", before={1, 5})
    interleave(_Side(1.0), _Side(1.0), 1, 1e-3, PairedPlan(0.05, 0.05, ("median",)), watch=watch)
    record = watch.tally.to_json()
    assert record["other_processes"] == [77]
    assert record["processes_at_start"] == [5]


def test_keep_counts_flagged_blocks_but_uses_them(fake_nvml: Any) -> None:
    fake_nvml([(0, (1,), ())] * 3 + [(POWER_CAP, (1,), ())] + [(0, (1,), ())] * 200)
    watch = tenancy.BlockWatch(0, {1}, "keep")
    run = interleave(
        _Side(1.0), _Side(1.0), 1, 1e-3, PairedPlan(0.05, 0.05, ("median",)), watch=watch
    )
    assert run.gpu is not None and run.gpu.to_json()["set_aside"] == {}
    assert run.gpu.to_json()["reasons"] == {"sw_power_cap": 2}  # the blocks either side
    assert len(run.quads["median"]) == 8


def test_a_pair_on_a_gpu_that_is_always_shared_stops_by_itself(fake_nvml: Any) -> None:
    """Every quad flagged: the plan stops the pair once the share is known to be past the
    limit, instead of waiting for quads that never come."""
    fake_nvml([(0, (1,), ())] + [(0, (1, 99), ())] * 400)  # 99 arrives after the start
    watch = tenancy.BlockWatch(0, {1}, "exclude")
    run = interleave(
        _Side(1.0), _Side(1.0), 1, 1e-3, PairedPlan(0.05, 0.05, ("median",)), watch=watch
    )
    assert run.quads["median"] == []
    assert run.gpu is not None and run.gpu.share() > GPU_SHARE_LIMIT
    assert min(run.gpu.blocks.values()) == 16  # GPU_MIN_BLOCKS a side, then stopped


def _blocks(flagged_head: int, total: int = 40, policy: str = "exclude") -> dict[str, Any]:
    return {
        "policy": policy,
        "blocks": {"head": total, "base": total},
        "flagged": {"head": flagged_head},
        "reasons": {"sw_power_cap": flagged_head},
        "other_processes": [],
    }


def test_the_judge_withholds_past_the_share_only() -> None:
    assert gpu_withholds(_blocks(0), "exclude") is None
    limit = int(40 * GPU_SHARE_LIMIT)
    assert gpu_withholds(_blocks(limit), "exclude") is None
    why = gpu_withholds(_blocks(limit + 1), "exclude")
    assert why is not None and "28% of the head side's GPU blocks" in why
    assert "sw_power_cap x11" in why
    assert gpu_withholds(_blocks(40), "keep") is None
    assert gpu_withholds(_blocks(1), "fail") is not None


def _decided(verdict: Verdict = Verdict.UNCHANGED) -> Comparison:
    return Comparison(verdict, ratio=1.0, ci_low=0.98, ci_high=1.02, decided_by=CompareMode.AB)


def test_an_interleaved_verdict_carries_its_blocks_and_is_withheld_past_the_share() -> None:
    judge = Judge(Policy())
    kept = judge.gpu_checked(_decided(), _blocks(2))
    assert kept.verdict is Verdict.UNCHANGED and kept.gpu_blocks == _blocks(2)
    withheld = judge.gpu_checked(_decided(Verdict.REGRESSION), _blocks(20))
    assert withheld.verdict is Verdict.INCONCLUSIVE
    assert withheld.reason is Reason.GPU_THROTTLED
    assert withheld.note and "50% of the head side's GPU blocks" in withheld.note
    # The record round-trips through the JSON and the schema.
    doc = json.loads(json.dumps(withheld.to_json()))
    assert Comparison.from_json(doc).gpu_blocks == _blocks(20)


def test_a_stored_verdict_from_a_throttled_run_is_withheld_and_settled(
    tmp_path: Any,
) -> None:
    """The stored pass reads NVML only across the region: a decided verdict from a run
    (or a baseline's run) that saw throttling or a tenant is not a verdict on the code."""
    from pytest_infperf.core.options import BenchOptions

    from .conftest import make_result

    judge = Judge(Policy())
    judge.host_moved(1.01)  # the session-start reference: this runner's host spread
    opts = BenchOptions()
    origin = Origin(CompareMode.STORED)
    fast = make_result([1e-3] * 40, env={"device_type": "cuda"})
    slow = make_result(
        [1.3e-3] * 40,
        env={"device_type": "cuda"},
        extra={"gpu_region": {"throttle_reasons": ["hw_thermal"], "other_processes": []}},
    )
    entry = fast.to_json()
    c = judge.stored(slow, entry, opts, origin)
    assert c.verdict is Verdict.INCONCLUSIVE and c.reason is Reason.GPU_THROTTLED
    assert c.note and "regression withheld" in c.note and "this run (hw_thermal)" in c.note
    keep = Judge(Policy(gpu_throttle="keep"))
    keep.host_moved(1.01)
    kept = keep.stored(slow, entry, opts, origin)
    assert kept.verdict is Verdict.REGRESSION


def test_fail_fails_the_test_of_a_benchmark_that_saw_one() -> None:
    from pytest_infperf.session.gate import Gate

    from .conftest import make_result

    judge = Judge(Policy(gpu_throttle="fail"))
    c = judge.gpu_checked(_decided(), _blocks(1, policy="fail"))
    assert c.reason is Reason.GPU_THROTTLED
    result = make_result([1e-3] * 20, comparison=c)
    failures = Gate(judge.policy).apply(result)
    assert len(failures) == 1 and "gpu_throttle=fail" in failures[0]
    assert Gate(Policy()).apply(make_result([1e-3] * 20, comparison=c)) == []


def test_mig_instances_are_named_by_their_profile() -> None:
    assert gpu.mig_profile("NVIDIA A100-SXM4-40GB MIG 1g.5gb") == "1g.5gb"
    assert gpu.mig_profile("NVIDIA H100 80GB HBM3") is None
    snap = {
        "devices": [
            {
                "mig_devices": [
                    {"uuid": "MIG-aaa", "profile": "1g.10gb"},
                    {"uuid": "MIG-bbb", "profile": "3g.40gb"},
                ]
            }
        ]
    }
    assert gpu.mig_profiles(snap, None) == ["1g.10gb", "3g.40gb"]
    assert gpu.mig_profiles(snap, "MIG-bbb") == ["3g.40gb"]
    assert gpu.mig_profiles({"devices": [{"mig_devices": []}]}, None) == []


def test_locked_and_unlocked_clocks_compare_flagged() -> None:
    assert gpu.clock_lock_changed(None, False) is None
    assert gpu.clock_lock_changed(True, True) is None
    said = gpu.clock_lock_changed(True, False)
    assert said and "clocks locked, this run with them unlocked" in said
    snap = {"devices": [{"clocks": {"locked": True}}, {"clocks": {"locked": False}}]}
    assert gpu.clocks_locked(snap) is False
    assert gpu.clocks_locked({"devices": [{"clocks": None}]}) is None


def test_the_record_is_plain_json() -> None:
    tally = tenancy.BlockTally("exclude")
    tally.add("head", ("sw_power_cap",), _read(POWER_CAP, pids=(1, 5)), {1})
    tally.add("base", (), _read(USER_CLOCKS), {1})
    record = tally.to_json()
    assert json.loads(json.dumps(record)) == record
    assert record["user_defined_clocks"] is True
    assert record["other_processes"] == [5]
    assert dataclasses.asdict(_read()) is not None


def test_the_blocks_set_aside_are_said() -> None:
    from pytest_infperf.report.messages import warnings_of

    judge = Judge(Policy())
    blocks = {**_blocks(4), "set_aside": {"head": 8, "base": 8}}
    said = warnings_of(judge.gpu_checked(_decided(), blocks))
    assert said == [
        "16 of 80 GPU blocks set aside (whole quads with a block that ran throttled or beside "
        "another process: sw_power_cap x4); the verdict is the other blocks'"
    ]
    withheld = judge.gpu_checked(_decided(), _blocks(20))
    assert warnings_of(withheld) == [withheld.note]


def test_a_pid_this_process_cannot_see_is_never_a_tenant() -> None:
    """In a container NVML reports the host's PIDs, the run's own workers among them: one
    that does not exist in this PID namespace is recorded as unseen and flags nothing,
    while a visible process that is not the run's is a tenant."""
    import os

    import psutil

    host_pid = 2**22 + 4321  # past any pid_max: no such process here
    assert not psutil.pid_exists(host_pid)
    assert tenancy.unseen(host_pid) and tenancy.tenants({host_pid}, set()) == set()
    stranger = 1  # init: visible, and never descends from the run's root
    assert tenancy.tenants({stranger, os.getpid()}, tenancy.Ours()) == {stranger}
    reads = tenancy.GpuRead(None, None, frozenset({host_pid}))
    assert tenancy.block_flags(reads, reads, set()) == ()
