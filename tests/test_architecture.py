"""The package's shape (docs/ARCHITECTURE.md), checked on the source itself.

The layers, the worker as a leaf and the absence of cycles are import-linter contracts
(``[tool.importlinter]`` in pyproject.toml, run by .ci/run as ``lint-imports`` and here);
imports inside functions are ruff's PLC0415 with the per-file exceptions listed there.
What neither tool checks, each module's one job and each folder's contract, is checked
here, with the rules that keep one decision in one place (a verdict written, a verdict
read).
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_infperf.core.results import Verdict

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pytest_infperf"

#: The longest a module's job may take to say: its docstring's first sentence. A module
#: whose job takes more words to say is doing two; split it along them.
JOB_WORDS = 40


def test_import_contracts_hold() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    out = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_import_contracts_catch_a_planted_upward_import(tmp_path: Path) -> None:
    """The contracts are not vacuous: the judge importing the report layer breaks them."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(PACKAGE, tmp_path / PACKAGE.name, ignore=shutil.ignore_patterns("__pycache__"))
    judge = tmp_path / PACKAGE.name / "judge" / "judge.py"
    judge.write_text(judge.read_text() + "\nfrom ..report import fmt  # planted\n")
    out = subprocess.run([exe, "--no-cache"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode != 0
    assert "pytest_infperf.judge.judge -> pytest_infperf.report.fmt" in out.stdout


def job(path: Path) -> str | None:
    """A module's one job: its docstring's first sentence (up to a full stop or a colon)."""
    doc = ast.get_docstring(ast.parse(path.read_text()))
    if not doc:
        return None
    first = " ".join(doc.split("\n\n")[0].split())
    match = re.match(r"(.+?[.:])(\s|$)", first)
    return match.group(1) if match else first


def test_every_module_names_its_one_job() -> None:
    """Seams, not sizes: each module opens with the one job it does, said in one sentence
    a reviewer can hold it to (a line cap had code moved sideways to fit)."""
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        said = job(path)
        rel = path.relative_to(ROOT)
        if said is None:
            problems.append(f"{rel}: no module docstring naming its job")
        elif len(said.split()) > JOB_WORDS:
            problems.append(f"{rel}: its job takes {len(said.split())} words to say")
    assert problems == []
    # Not vacuous: a module of two jobs said at length, or none, is found.
    assert job(Path(__file__)) is not None


def test_every_folder_states_its_contract() -> None:
    """Each folder is a layer or a family; its ``__init__`` docstring says which, and what
    it may import. The ``__init__`` imports nothing heavy: importing one submodule runs it."""
    folders = sorted(p.parent for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)
    assert len(folders) >= 9
    for folder in folders:
        tree = ast.parse((folder / "__init__.py").read_text())
        doc = ast.get_docstring(tree)
        assert doc and len(doc.split()) >= 20, f"{folder.name}/__init__.py states no contract"


def test_the_old_worker_path_still_runs_the_worker() -> None:
    """``python -m pytest_infperf.abworker`` is the worker's name in every version: the
    controller starts it so, and an older base checkout's copy answers to it too."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest_infperf.abworker"], capture_output=True, text=True
    )
    assert "ADDRESS" in out.stderr + out.stdout


def test_the_architecture_doc_names_every_folder_and_module() -> None:
    """The picture in docs/ARCHITECTURE.md is the package: a module added, moved or renamed
    without it fails here (the old hand-kept lists disagreed with the code)."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    words = set(re.findall(r"[A-Za-z_]+", doc))
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.name == "__init__.py":
            if rel.parent != Path() and f"{rel.parent.name}/" not in doc:
                missing.append(f"{rel.parent}/")
        elif path.stem not in words:
            missing.append(str(rel))
    assert missing == []


#: Where a comparison's verdict is written: the judging step (and the merge's re-judging of
#: a whole split run). The gate only applies acceptance: it may write ``accepted`` alone.
VERDICT_WRITERS = {"judge/judge.py", "judge/merged.py"}
ACCEPTANCE = {"session/gate.py": "Verdict.ACCEPTED"}


def _verdict_writes(tree: ast.AST) -> list[tuple[int, str]]:
    """Each ``Comparison(...)`` or ``replace(...)`` call given a ``verdict=``: line, value."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if name.split(".")[-1] not in ("Comparison", "replace"):
            continue
        for kw in node.keywords:
            if kw.arg == "verdict":
                found.append((node.lineno, ast.unparse(kw.value)))
    return found


def test_a_verdict_is_written_in_one_place() -> None:
    """No module but the judging step writes a verdict: the policy decides steps, the
    session and the A/B machinery act on them, the reports tell them."""
    stray = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for line, value in _verdict_writes(ast.parse(path.read_text())):
            if rel in VERDICT_WRITERS or ACCEPTANCE.get(rel) == value:
                continue
            stray.append(f"{rel}:{line}: verdict={value}")
    assert not stray, stray
    # The check is not vacuous: a planted write is found.
    planted = "c = dataclasses.replace(c, verdict=Verdict.UNCHANGED)"
    assert _verdict_writes(ast.parse(planted)) == [(1, "Verdict.UNCHANGED")]


#: Verdict values as strings: the enum's, which every reader compares by.
_VERDICT_TEXTS = {v.value for v in Verdict}


def _verdict_texts(tree: ast.AST) -> list[tuple[int, str]]:
    """Each comparison with a verdict's text in it: line, the comparison."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        sides += [e for s in sides if isinstance(s, ast.Tuple | ast.List | ast.Set) for e in s.elts]
        if any(isinstance(s, ast.Constant) and s.value in _VERDICT_TEXTS for s in sides):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_verdict_is_read_by_its_string() -> None:
    """A verdict is compared as a ``Verdict`` (``verdict_of`` reads a document's), never as
    text: a string compared with one of its values is found wherever it is."""
    stray = [
        f"{path.relative_to(PACKAGE).as_posix()}:{line}: {text}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, text in _verdict_texts(ast.parse(path.read_text()))
    ]
    assert stray == []
    planted = 'if entry["verdict"] in ("accepted", "regression"): pass'
    assert [line for line, _ in _verdict_texts(ast.parse(planted))] == [1]
