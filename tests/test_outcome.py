"""A results file says whether its run completed; a perf run that measured nothing fails
closed; the pull-request comment never reads a partial or failed run as "no changes"; a
work limit that could not be checked says so. Real pytest runs in real git repositories."""

from __future__ import annotations

import pytest

from .conftest import init_repo, load_json


VARYING = """
import itertools

import torch


class Alternating(torch.nn.Module):
    # every other call runs one operator more: its counts vary from call to call
    def __init__(self):
        super().__init__()
        self.calls = itertools.count()

    def forward(self, x):
        y = x.relu()
        if next(self.calls) % 2:
            y = y.sigmoid()
        return y


def test_varying(infer_bench):
    infer_bench(Alternating(), torch.ones(8), max_work_increase=0.1)
"""


def test_a_work_limit_that_cannot_be_checked_says_so(
    pytester: pytest.Pytester, git_env: None
) -> None:
    """Both sides profiled, but their operator counts vary from call to call (and a CPU
    run counts no kernels): no measure is left to hold to max_work_increase. The gate
    says it did not check, in the terminal and the JSON, instead of passing in silence."""
    pytest.importorskip("torch")
    from .conftest import FAST_INI

    ini = FAST_INI.replace("infperf_profile = off", "infperf_profile = counts")
    pytester.makefile(".ini", pytest=ini + "infperf_drift_guard = off\n")
    pytester.makepyfile(test_varying=VARYING)
    (pytester.path / ".gitignore").write_text("baselines/\n*.json\n__pycache__/\n")
    init_repo(pytester.path)
    assert pytester.runpytest_subprocess("--perf-save").ret == 0
    result = pytester.runpytest_subprocess(
        "--perf-compare=HEAD", "--perf-settle=off", "--perf-json=out.json"
    )
    result.stdout.fnmatch_lines(
        [
            "*max_work_increase=0.1 not checked: the counts vary from call to call "
            "(operators), and no other measure it is held to*"
        ]
    )
    (bench,) = load_json(pytester.path / "out.json")["benchmarks"]
    assert bench["comparison"]["work"]["increase"] is None
    gate = bench["extra"]["work_gate"]
    assert gate["passed"] is None and gate["change"] is None
    assert gate["unchecked"].startswith("the counts vary from call to call (operators)")
    assert any(w.startswith("max_work_increase=0.1 not checked") for w in bench["warnings"])
