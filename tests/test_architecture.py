"""The package's shape (docs/ARCHITECTURE.md), checked on the source itself.

The layers, the worker as a leaf and the absence of cycles are import-linter contracts
(``[tool.importlinter]`` in pyproject.toml, run by .ci/run as ``lint-imports`` and here);
imports inside functions are ruff's PLC0415 with the per-file exceptions listed there.
What neither tool measures, sizes and folder contracts, is checked here.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pytest_infperf"

#: Size limits (lines, docstrings and comments included). A claim about sizes in a note
#: or a doc is this table. Each is the largest size in the package when it was set; a
#: unit that outgrows it is split, not the limit raised.
MAX_LINES = {"module": 700, "class": 250, "function": 80}


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


def _units() -> list[tuple[str, str, int]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        where = str(path.relative_to(ROOT))
        found.append(("module", where, len(text.splitlines())))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                kind = "class"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                kind = "function"
            else:
                continue
            assert node.end_lineno is not None
            found.append((kind, f"{where}:{node.name}", node.end_lineno - node.lineno + 1))
    return found


def test_sizes_stay_under_the_limits() -> None:
    over = [
        f"{where}: {kind} of {n} lines > {MAX_LINES[kind]}"
        for kind, where, n in _units()
        if n > MAX_LINES[kind]
    ]
    assert over == []


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
    import re

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
