"""The names a user can set, counted from the tables that generate them.

    python benchmarks/surface.py

Prints the flags (``--perf-*``, hidden ones left out), the ini keys, the names
``infperf_expert`` takes, the marker and keyword options, the GitHub Action's inputs
(``action.yml``) and the ``infperf`` sub-commands with their arguments.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest_infperf.cli.main as cli
from pytest_infperf.core import options, settings

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    flags = [s for s in options.SESSION if s.flag is not None and not s.hidden]
    flags += list(options.FLAG_OPTIONS)
    action = (ROOT / "action.yml").read_text()
    block = action.split("\ninputs:", 1)[1].split("\noutputs:", 1)[0]
    inputs = re.findall(r"^  ([a-z][a-z0-9-]*):\s*$", block, re.M)
    commands = arguments = 0
    for act in cli.build_parser()._actions:
        if isinstance(act, argparse._SubParsersAction):
            for sub in act.choices.values():
                commands += 1
                arguments += sum(not isinstance(a, argparse._HelpAction) for a in sub._actions)
    print(
        f"flags {len(flags)}; ini keys {len(settings.known_ini_keys())}; infperf_expert "
        f"names {len(settings.expert_names())}; marker/keyword options {len(options.SPECS)}; "
        f"Action inputs {len(inputs)}; sub-commands {commands} with {arguments} arguments"
    )


if __name__ == "__main__":
    main()
