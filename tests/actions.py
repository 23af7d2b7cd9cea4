"""The Action's shell steps (``action.yml``), run as GitHub runs them, without GitHub.

A composite action cannot be run here, so its ``run:`` steps are: each with the bash
GitHub uses (``bash --noprofile --norc -eo pipefail``), its ``env:`` evaluated from the
inputs and the outputs of the steps before it, in a job-like environment (GITHUB_OUTPUT
per step, GITHUB_STEP_SUMMARY, GITHUB_ACTION_PATH at this repository...). ``uses:`` steps
(checkout, upload and download of artifacts) need GitHub: they are skipped and the caller
moves the files the way the artifacts would. ``if:`` conditions are evaluated with the
few expression forms the Action uses (a status function, ``==``, ``!=``, ``&&``, ``||``,
``inputs.*``, ``steps.*.outputs.*``, ``github.*``), translated to Python.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from .conftest import GIT_ENV, ONLY_OURS, ROOT

ACTION = ROOT / "action.yml"
EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_STATUS = re.compile(r"\b(always|success|failure|cancelled)\(\)")


def load_action() -> dict[str, Any]:
    return dict(yaml.safe_load(ACTION.read_text()))


@dataclasses.dataclass
class Job:
    """What a run of the Action's steps left: each step's outputs, its log, whether it
    failed, and the names of the ``uses:`` steps GitHub would have run."""

    outputs: dict[str, dict[str, str]]
    log: list[str]
    failed: bool
    uses: list[str]

    def output(self, name: str) -> str:
        """The Action's output ``name``, as its ``outputs:`` section computes it."""
        value = load_action()["outputs"][name]["value"]
        return _template(value, _namespace({}, self.outputs, {}, self.failed))


def _python(expr: str) -> str:
    text = _STATUS.sub(
        lambda m: {"always": "True", "success": "(not failed)"}.get(m.group(1), "failed"), expr
    )
    text = text.replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"\binputs\.([\w-]+)", r"inputs['\1']", text)
    text = re.sub(r"\bsteps\.([\w-]+)\.outputs\.([\w-]+)", r"steps('\1', '\2')", text)
    text = re.sub(r"\bgithub\.([\w.-]+)", r"github('\1')", text)
    return text.replace("format(", "fmt(")


def _namespace(
    inputs: dict[str, str], outputs: dict[str, dict[str, str]], github: dict[str, str], failed: bool
) -> dict[str, Any]:
    return {
        "__builtins__": {},
        "failed": failed,
        "inputs": inputs,
        "steps": lambda step, name: outputs.get(step, {}).get(name, ""),
        "github": lambda name: github.get(name, ""),
        "fmt": lambda text, *args: text.format(*args),
    }


def _evaluate(expr: str, ns: dict[str, Any]) -> Any:
    return eval(_python(expr), ns)  # this repository's own action.yml


def _template(value: object, ns: dict[str, Any]) -> str:
    text = str(value)
    return EXPR.sub(lambda m: str(_evaluate(m.group(1), ns)), text)


def _runs(step: dict[str, Any], ns: dict[str, Any]) -> bool:
    cond = str(step.get("if", "success()"))
    cond = EXPR.sub(lambda m: m.group(1), cond)
    if not _STATUS.search(cond):
        cond = f"success() && ({cond})"
    return bool(_evaluate(cond, ns))


def _read_outputs(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        out[key] = value
    return out


def run_action(
    cwd: Path, inputs: dict[str, str], env: dict[str, str], github: dict[str, str] | None = None
) -> Job:
    """Run the Action's shell steps for ``inputs`` (the rest take action.yml's defaults)
    in ``cwd``, with the job's environment ``env`` (GITHUB_EVENT_NAME...)."""
    action = load_action()
    given = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    unknown = set(inputs) - set(given)
    assert not unknown, f"action.yml has no input {sorted(unknown)}"
    given.update(inputs)
    job = Job({}, [], False, [])
    temp = cwd.parent / f"{cwd.name}-runner"
    temp.mkdir(exist_ok=True)
    summary = temp / "summary.md"
    # A runner loads every plugin installed, as a user's does (the suite's own nested runs
    # load only this one: conftest.ONLY_OURS).
    user = {k: v for k, v in os.environ.items() if k not in ONLY_OURS}
    base = {
        **user,
        **GIT_ENV,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(cwd),
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_STEP_SUMMARY": str(summary),
        "RUNNER_TEMP": str(temp),
        **env,
    }
    for i, step in enumerate(action["runs"]["steps"]):
        ns = _namespace(given, job.outputs, github or {}, job.failed)
        if not _runs(step, ns):
            continue
        if "uses" in step:
            job.uses.append(str(step.get("name") or step["uses"]))
            continue
        output = temp / f"output-{i}"
        output.write_text("")
        step_env = {k: _template(v, ns) for k, v in (step.get("env") or {}).items()}
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=cwd,
            env={**base, **step_env, "GITHUB_OUTPUT": str(output)},
            capture_output=True,
            text=True,
            check=False,
        )
        job.log.append(
            f"## {step.get('name')} (exit {done.returncode})\n{done.stdout}{done.stderr}"
        )
        if "id" in step:
            job.outputs[str(step["id"])] = _read_outputs(output)
        if done.returncode != 0:
            job.failed = True
    return job


def event(path: Path, **payload: Any) -> str:
    """A ``GITHUB_EVENT_PATH`` file holding ``payload`` (the default branch: main)."""
    payload.setdefault("repository", {"default_branch": "main"})
    path.write_text(json.dumps(payload))
    return str(path)
