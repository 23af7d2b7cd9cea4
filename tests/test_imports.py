"""Which code each side of a comparison imports: the origin logic as tables, then real
projects (git repositories, virtual environments, pip installs) in real ``--perf-ab`` and
settling runs, each side proving where its modules came from (the slow tier has the
whole table of layouts x install modes)."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_infperf.ab import baseenv, imports, proof
from pytest_infperf.ab.imports import ImportMap
from pytest_infperf.ab.proof import Problem

from .conftest import git, infperf, init_repo, load_json
from .layouts import LAYOUTS, Project, build_system, compiled_project, environment, project

TOP = "/repo"
TREE = "/tmp/infperf-ab-x/tree-abc"
SITE = "/venv/lib/python3.11/site-packages"
MAP = ImportMap(
    TOP,
    roots=("src",),
    names={"tinymodels": "src", "acme.models": "src/acme"},
    installed=(("tinymodels", f"{SITE}/tinymodels", "tinymodels 0.1"),),
    env=(f"{TOP}/.venv",),
)


@pytest.mark.parametrize(
    ("path", "folder", "expected"),
    [
        ("/repo/src/a.py", "/repo", "src/a.py"),
        ("/repo", "/repo", ""),
        ("/repo/", "/repo", ""),
        ("/repository/a.py", "/repo", None),  # a sibling whose name starts the same
        ("/other/a.py", "/repo", None),
        ("/a.py", "/", "a.py"),
    ],
)
def test_inside(path: str, folder: str, expected: str | None) -> None:
    assert imports.inside(path, folder) == expected


@pytest.mark.parametrize(
    ("module", "rel", "root"),
    [
        ("tinymodels", "src/tinymodels/__init__.py", "src"),
        ("tinymodels.layers", "src/tinymodels/layers.py", "src"),
        ("tinymodels", "tinymodels/__init__.py", "."),
        ("models", "tests/perf/models.py", "tests/perf"),
        ("acme.models", "src/acme/models/__init__.py", "src"),
    ],
)
def test_the_import_root_of_a_module_file(module: str, rel: str, root: str) -> None:
    assert proof._root_of(module, rel) == root


@pytest.mark.parametrize(
    ("module", "claimed"),
    [
        ("tinymodels", "tinymodels"),
        ("tinymodels.layers.deep", "tinymodels"),
        ("acme.models.bert", "acme.models"),
        ("acme", None),  # a namespace package: only the repository's portion is ours
        ("acme.other", None),
        ("torch", None),
        ("tinymodelsx", None),
    ],
)
def test_which_names_are_the_projects(module: str, claimed: str | None) -> None:
    assert MAP.claimed(module) == claimed


BASE_ROWS = [
    # module, where the base side's file came from, what is wrong with it
    ("tinymodels", f"{TREE}/src/tinymodels/__init__.py", None),
    ("test_models", f"{TREE}/tests/perf/test_models.py", None),
    ("tinymodels", f"{TOP}/src/tinymodels/__init__.py", "HEAD's checkout"),
    ("test_models", f"{TOP}/tests/perf/test_models.py", "HEAD's checkout"),
    ("tinymodels", f"{SITE}/tinymodels/__init__.py", "the installed copy (tinymodels 0.1)"),
    ("acme.models", "/elsewhere/acme/models/__init__.py", "outside the base's checkout"),
    ("torch", f"{SITE}/torch/__init__.py", None),  # not the project's: any place will do
    # a virtualenv inside the repository is the environment, not HEAD's checkout
    ("numpy", f"{TOP}/.venv/lib/python3.11/site-packages/numpy/__init__.py", None),
    ("tinymodels", "", None),  # no file (a namespace the finder made): nothing to prove
]


@pytest.mark.parametrize(("module", "path", "wrong"), BASE_ROWS)
def test_a_base_sides_origins(module: str, path: str, wrong: str | None) -> None:
    found = proof.problems("base", {module: path}, MAP, TREE)
    assert [p.where for p in found] == ([] if wrong is None else [wrong])
    if wrong == "HEAD's checkout":  # the message names the file it should have been
        assert found[0].expected == f"{TREE}/{path.removeprefix(TOP + '/')}"
    if wrong is not None and "installed" in wrong:
        assert found[0].expected == f"{TREE}/src/tinymodels/__init__.py"


def test_a_base_sides_own_build_is_its_own() -> None:
    """A compiled project's base is built into an environment of its own: that is the
    base's code, not an installed copy of HEAD's."""
    built = ImportMap(TOP, names={"fastext": "src"}, built="/cache/envs/k/site-packages")
    found = {"fastext": "/cache/envs/k/site-packages/fastext/__init__.py"}
    assert proof.problems("base", found, built, TREE) == []
    assert proof.problems("base", found, ImportMap(TOP, names={"fastext": "src"}), TREE)


def test_a_head_sides_installed_copy_must_be_the_working_trees(tmp_path: Path) -> None:
    """The head imported an installed copy: fine where it is the working tree's content; a
    stale install (asv's trap: pip kept an older build) is refused."""
    top, site = tmp_path / "repo", tmp_path / "site"
    (top / "src" / "tinymodels").mkdir(parents=True)
    (site / "tinymodels").mkdir(parents=True)
    (top / "src" / "tinymodels" / "__init__.py").write_text("DEPTH = 6\n")
    copy = site / "tinymodels" / "__init__.py"
    told = ImportMap(
        str(top),
        names={"tinymodels": "src"},
        installed=(("tinymodels", str(site / "tinymodels"), "tinymodels 0.1"),),
    )
    copy.write_text("DEPTH = 6\n")
    assert proof.problems("head", {"tinymodels": str(copy)}, told, str(top)) == []
    copy.write_text("DEPTH = 4\n")
    (found,) = proof.problems("head", {"tinymodels": str(copy)}, told, str(top))
    assert "not the working tree's content" in found.where
    assert found.expected == str(top / "src" / "tinymodels" / "__init__.py")
    # and never the base's checkout
    base = str(tmp_path / "base")
    (bad,) = proof.problems("head", {"x": f"{base}/x.py"}, told, str(top), base)
    assert bad.where == "the base's checkout"


def test_the_refusal_says_what_and_what_to_do() -> None:
    found = [Problem("tinymodels", "/repo/src/tinymodels/__init__.py", "HEAD's checkout", "/t")]
    text = proof.explain("base", "base, merge-base 1a2b3c4d5e", found)
    assert text.startswith("refused to compare: the base side (base, merge-base 1a2b3c4d5e)")
    assert (
        "tinymodels from /repo/src/tinymodels/__init__.py (HEAD's checkout; its own is /t)" in text
    )
    assert "measured HEAD's code on both sides" in text and ".pth" in text
    head = proof.explain("head", "this process", found)
    assert "pip install ." in head and "pip install -e ." in head


def test_discovery_and_hold_in_a_real_process(tmp_path: Path) -> None:
    """The head finds its package under src/ (a sys.path entry there, as an editable
    install's .pth puts it); a worker held to another checkout imports that checkout's copy,
    a module only HEAD's copy has is not found there, and its origins say so."""
    head, base = tmp_path / "head", tmp_path / "base"
    for tree, depth in ((head, 6), (base, 4)):
        (tree / "src" / "tinymodels").mkdir(parents=True)
        (tree / "src" / "tinymodels" / "__init__.py").write_text(f"DEPTH = {depth}\n")
    (head / "src" / "tinymodels" / "extra.py").write_text("NEW = True\n")
    script = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {str(head / "src")!r})  # an editable install's .pth
        from pathlib import Path
        from pytest_infperf.ab import imports
        told = imports.discover(Path({str(head)!r}))
        assert told.names == {{"tinymodels": "src"}}, told
        from pytest_infperf.ab import proof
        origins = proof.Origins(told, Path({str(base)!r}))
        imports.hold(told, Path({str(base)!r}))
        import tinymodels
        try:
            import tinymodels.extra
            extra = "found"
        except ImportError:
            extra = "missing"
        print(json.dumps([tinymodels.DEPTH, extra, origins.read()]))
        """
    )
    out = _python(script)
    depth, extra, found = json.loads(out.strip().splitlines()[-1])
    assert (depth, extra) == (4, "missing")
    assert found == {"tinymodels": str((base / "src" / "tinymodels" / "__init__.py").resolve())}


def test_a_worker_refuses_a_copy_elsewhere_of_a_module_its_checkout_lacks(tmp_path: Path) -> None:
    """HEAD added a module; its installed copy is on the path. The base worker's import of it
    fails, saying so, instead of running HEAD's file."""
    base, site = tmp_path / "base", tmp_path / "site"
    (base / "tinymodels").mkdir(parents=True)
    (base / "tinymodels" / "__init__.py").write_text("")
    (site / "tinymodels").mkdir(parents=True)
    (site / "tinymodels" / "__init__.py").write_text("")
    (site / "tinymodels" / "extra.py").write_text("")
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from pytest_infperf.ab import imports
        sys.path.append({str(site)!r})
        told = imports.ImportMap("/nowhere", names={{"tinymodels": ""}})
        imports.hold(told, Path({str(base)!r}))
        import tinymodels
        assert tinymodels.__file__.startswith({str(base)!r}), tinymodels.__file__
        try:
            import tinymodels.extra
        except ModuleNotFoundError as exc:
            print("REFUSED", exc)
        """
    )
    out = _python(script)
    assert "REFUSED No module named 'tinymodels.extra'" in out


def test_every_process_of_the_base_side_is_held_as_it_starts(tmp_path: Path) -> None:
    """A process a base-side test starts with ``sys.executable`` and ``env={}`` (no
    PYTHONPATH, nothing of the worker's) imports the base's package, not the one HEAD's
    editable ``.pth`` names; it records where its modules came from, and one that imported
    HEAD's before the hold (a ``.pth`` of its own) is named by the proof."""
    import subprocess

    from pytest_infperf.ab import interpreter

    head, base, site = tmp_path / "head", tmp_path / "base", tmp_path / "site"
    for tree, depth in ((head, 6), (base, 4)):
        (tree / "src" / "tinymodels").mkdir(parents=True)
        (tree / "src" / "tinymodels" / "__init__.py").write_text(f"DEPTH = {depth}\n")
    site.mkdir()
    (site / "tinymodels-editable.pth").write_text(f"{head / 'src'}\n")  # HEAD's install
    told = ImportMap(str(head.resolve()), roots=("src",), names={"tinymodels": "src"})
    made = interpreter.make(tmp_path / "py", [str(site)], told.to_json(), base)
    ask = [made.python, "-c", "import sys, tinymodels; print(tinymodels.DEPTH, sys.executable)"]
    done = subprocess.run(ask, env={}, capture_output=True, text=True, check=True, cwd=tmp_path)
    assert done.stdout.split() == ["4", made.python], done.stderr
    (child,) = interpreter.recorded(made.origins, own=0)
    mine = str((base / "src" / "tinymodels" / "__init__.py").resolve())
    assert child["origins"] == {"tinymodels": mine} and not child["error"]
    assert proof.problems("base", child["origins"], told, str(base.resolve())) == []
    # something imports the project at start-up, before the hold: named, and refused
    (site / "zz_starts.pth").write_text("import tinymodels\n")
    subprocess.run([made.python, "-c", "pass"], env={}, check=True, cwd=tmp_path)
    found = [c for c in interpreter.recorded(made.origins, own=0) if c["pid"] != child["pid"]]
    (bad,) = proof.problems("base", found[0]["origins"], told, str(base.resolve()))
    assert bad.where == "HEAD's checkout" and bad.module == "tinymodels"


def _python(script: str) -> str:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# --- dependency specs ---------------------------------------------------------------------


def _spec_tree(folder: Path, deps: list[str], requirements: str = "", lock: str = "") -> Path:
    folder.mkdir(parents=True)
    listed = ", ".join(json.dumps(d) for d in deps)
    (folder / "pyproject.toml").write_text(
        f'[project]\nname = "p"\nversion = "0"\ndependencies = [{listed}]\n'
    )
    if requirements:
        (folder / "requirements.txt").write_text(requirements)
    if lock:
        (folder / "uv.lock").write_text(lock)
    return folder


LOCK = (
    '[[package]]\nname = "numpy"\nversion = "{v}"\n\n'
    '[[package]]\nname = "p"\nversion = "{v}"\nsource = {{ editable = "." }}\n\n'
    '[[package]]\nname = "pytest"\nversion = "9.2.0"\n'
)


PY = "pyproject.toml"


@pytest.mark.parametrize(
    ("base", "head", "files", "install"),
    [
        # the same spec: nothing to build, nothing to say
        ({"deps": ["numpy>=1.24"]}, {"deps": ["numpy>=1.24"]}, [], []),
        # a pin HEAD's environment holds at another version: installed for the base
        ({"deps": ["numpy==1.26.4"]}, {"deps": ["numpy>=2"]}, [PY], ["numpy==1.26.4"]),
        # a range this environment satisfies: said, nothing installed
        ({"deps": ["numpy>=1.0"]}, {"deps": ["numpy>=1.24"]}, [PY], []),
        # a package HEAD's environment lacks (an extra, a docs group): never installed
        ({"deps": ["fastdep==1.0"]}, {"deps": ["fastdep==2.0"]}, [PY], []),
        # the harness both sides share, and the project itself: never installed
        ({"deps": ["pytest==7.0", "p==0.1"]}, {"deps": ["pytest>=8", "p==0.2"]}, [PY], []),
        # a requirement with a marker that is false here: nothing installed
        ({"deps": ['numpy==1.26.4; sys_platform == "nowhere"']}, {"deps": []}, [PY], []),
        # requirements files (pip-compile's hashes and continuations) and lock files
        (
            {"deps": [], "requirements": "numpy==1.26.4 \\\n    --hash=sha256:ab\n-e .\n"},
            {"deps": [], "requirements": "numpy==2.4.6 \\\n    --hash=sha256:cd\n-e .\n"},
            ["requirements.txt"],
            ["numpy==1.26.4"],
        ),
        (
            {"deps": [], "lock": LOCK.format(v="1.26.4")},
            {"deps": [], "lock": LOCK.format(v="2.4.6")},
            ["uv.lock"],
            ["numpy==1.26.4"],
        ),
    ],
)
def test_what_the_base_spec_needs(
    tmp_path: Path, base: dict, head: dict, files: list[str], install: list[str]
) -> None:
    a = _spec_tree(tmp_path / "base", **base)
    b = _spec_tree(tmp_path / "head", **head)
    found = baseenv.changes(a, b)
    assert [c.file for c in found] == files
    assert baseenv.wanted(found, frozenset({"p"})) == (install, [])


def test_a_spec_no_installer_reads_is_said_not_built(tmp_path: Path) -> None:
    a = _spec_tree(tmp_path / "base", [])
    b = _spec_tree(tmp_path / "head", [])
    (a / "setup.py").write_text("setup(install_requires=['fastdep==1.0'])\n")
    (b / "setup.py").write_text("setup(install_requires=['fastdep==2.0'])\n")
    env = baseenv.prepare(a, b, "0" * 40, [])
    assert env.python == sys.executable and env.failed is None
    assert env.note == (
        "the base's code ran under HEAD's environment: setup.py differs from HEAD's, and no "
        "installer here reads its dependencies"
    )


def _plant(python: Path, marker: Path) -> None:
    """What a job that can write the cache could leave for the next: an interpreter of
    its own, and a .pth that runs in every process over the environment (the sealed
    folders made writable first, as the same user can)."""
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    for folder in (python.parent, site):
        folder.chmod(0o755)
    python.unlink()
    python.write_text(f'#!/bin/sh\ntouch {marker}\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    (site / "zz_planted.pth").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n")


def test_a_cached_environment_is_verified_before_reuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cached base environment is reused only as it was built (owner, mode, every file's
    hash in its manifest): before, a planted bin/python beside the completion file ran for
    every base worker of the next run, and a missing one stopped every run with an
    INTERNALERROR (FileNotFoundError) until someone removed the folder."""
    import subprocess

    monkeypatch.setenv("INFPERF_CACHE_DIR", str(tmp_path / "cache"))
    scratch = tmp_path / "run"
    python, site, reused = baseenv.build([], None, None, scratch)
    assert not reused
    folder = python.parent.parent
    assert folder.parent == tmp_path / "cache" / "envs" and python.is_symlink()
    manifest = folder / baseenv.MANIFEST
    built = manifest.stat().st_mtime_ns
    assert baseenv.build([], None, None, scratch) == (python, site, True)
    assert manifest.stat().st_mtime_ns == built  # reused as it was
    # sealed: nothing the base side runs writes in it (bytecode included)
    assert not site.stat().st_mode & 0o222 and not folder.stat().st_mode & 0o222
    site.chmod(0o755)  # bytecode Python could write where it may: not what was built
    (site / "__pycache__").mkdir(exist_ok=True)
    (site / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"")
    assert baseenv.build([], None, None, scratch) == (python, site, True)
    assert manifest.stat().st_mtime_ns == built
    marker = tmp_path / "planted-ran"
    _plant(python, marker)
    again, _, _ = baseenv.build([], None, None, scratch)
    assert again == python and python.is_symlink() and manifest.stat().st_mtime_ns != built
    subprocess.run([str(again), "-c", "pass"], check=True)
    assert not marker.exists() and not (site / "zz_planted.pth").exists()
    # damaged: its interpreter gone beside the completion file -> built again
    python.parent.chmod(0o755)
    python.unlink()
    again, _, _ = baseenv.build([], None, None, scratch)
    assert again == python and python.is_symlink()
    subprocess.run([str(again), "-c", "pass"], check=True)
    # a cache folder another user could write in: never reused, built in the run's own
    (tmp_path / "cache" / "envs").chmod(0o777)
    private, _, _ = baseenv.build([], None, None, scratch)
    assert private.parent.parent.parent == scratch / "envs"
    (tmp_path / "cache" / "envs").chmod(0o755)
    folder.chmod(0o775)  # the environment itself open to its group: built again
    again, _, _ = baseenv.build([], None, None, scratch)
    assert again == python and not folder.stat().st_mode & 0o022
    assert not list(folder.parent.glob("*-discarded-*")) and not list(scratch.glob("*/*-b*"))


def test_compiled_parts_are_found(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    assert not baseenv.compiled([tmp_path / "pkg"], tmp_path)
    (tmp_path / "pkg" / "fast.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    assert baseenv.compiled([tmp_path / "pkg"], tmp_path)
    (tmp_path / "pkg" / "fast.cpython-311-x86_64-linux-gnu.so").unlink()
    (tmp_path / "setup.py").write_text("setup(ext_modules=[Extension('fast', ['fast.c'])])\n")
    assert baseenv.compiled([tmp_path / "pkg"], tmp_path)


# --- real runs ----------------------------------------------------------------------------


def verdicts(proj: Project, name: str = "ab.json") -> dict[str, dict]:
    doc = load_json(proj.root / "results" / name)
    return {b["nodeid"].split("::")[-1]: b for b in doc["benchmarks"]}


#: The module each layout's model lives in (the rest: tinymodels).
MODULES = {
    "namespace": "acme.tinymodels",
    "nested": "acme.vision.tinymodels",
    "several": "tinylayers",
}


def check_slower_alone(proj: Project, result: object, mode: str = "ab") -> None:
    """The +50% model failed, alone; the untouched benchmark passed; each side's project
    modules came from its own checkout."""
    out = getattr(result, "stdout", "") + getattr(result, "stderr", "")
    found = verdicts(proj)
    mlp, same = found["test_mlp_latency"], found["test_untouched"]
    assert mlp["comparison"]["verdict"] == "regression", out[-3000:]
    assert 1.3 < mlp["comparison"]["ratio"] < 1.8, mlp["comparison"]
    # Identical code: never a claim (this noisy machine may leave it undecided).
    assert same["comparison"]["verdict"] not in ("regression", "improvement"), same["comparison"]
    record = mlp["extra"]["ab" if mode == "ab" else "settle"]
    origins = record["origins"]
    model = MODULES.get(proj.layout, "tinymodels")
    for side in ("base", "head"):
        where = [k for k, modules in origins[side].items() if model in modules]
        assert where and all(k.startswith("checkout:") or k.startswith("installed:") for k in where)
    assert all(k.startswith("checkout:") for k, m in origins["base"].items() if model in m)
    assert getattr(result, "returncode", None) == 1


AB_ARGS = ("tests/perf", "--perf-ab=main", "--perf-json=results/ab.json", "-p", "no:cacheprovider")


@pytest.mark.parametrize(
    ("layout", "install"),
    [("src", "editable"), ("src", "wheel")],
)
def test_the_base_side_runs_the_base_package(
    tmp_path: Path, git_env: None, layout: str, install: str
) -> None:
    """The scenario users hit: the model in an installed package. Before, a src layout
    installed editable read 1.012 unchanged for a +50% change: both sides ran HEAD."""
    proj = project(tmp_path, layout, install)
    result = proj.pytest(*AB_ARGS)
    check_slower_alone(proj, result)


def test_a_contaminated_base_is_refused_and_nothing_is_kept(tmp_path: Path, git_env: None) -> None:
    """Something imports HEAD's package in every process at start-up (a .pth): the base
    worker cannot run the base's code, and says so; the tests fail, nothing is stored."""
    proj = project(tmp_path, "src", "editable")
    site = next(proj.python.parent.parent.glob("lib/python*/site-packages"))
    (site / "zz_starts_tinymodels.pth").write_text("import tinymodels\n")
    result = proj.pytest(*AB_ARGS, "--perf-save")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out[-3000:]
    assert "refused to compare: the base side (base, merge-base" in out
    assert f"tinymodels from {proj.root}/src/tinymodels/__init__.py (HEAD's checkout" in out
    assert "2 failed" in out
    assert not list((proj.root / "baselines").rglob("*.json"))
    assert verdicts(proj) == {}


def test_the_layout_table_covers_every_layout() -> None:
    assert set(LAYOUTS) == {
        "beside",
        "flat",
        "src",
        "several",
        "namespace",
        "nested",
        "moved",
        "child",
        "conftest",
        "pythonpath",
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("layout", "install"),
    [
        ("beside", "none"),
        ("flat", "editable"),
        ("flat", "editable-strict"),
        ("flat", "wheel"),
        ("flat", "hatch-exact"),
        ("src", "editable-strict"),
        ("src", "wheel-elsewhere"),
        ("src", "hatch-editable"),
        ("src", "hatch-exact"),
        ("several", "editable"),
        ("several", "wheel"),
        ("namespace", "editable"),
        ("namespace", "wheel"),
        # two namespace packages down: before, the base was refused (blamed on a .pth),
        # and with infperf_ab_pythonpath=src the head was refused as stale
        ("nested", "editable"),
        ("nested", "wheel"),
        # the package moved from src/ to the root: before, the base worker could not
        # import it and its test read as "not in the base commit" (no-baseline, exit 0)
        ("moved", "editable"),
        # the test reads its depth from a process it starts (sys.executable, env={"PATH"}):
        # before, that process imported HEAD's package on the base side (0.987)
        ("child", "editable"),
        ("child", "wheel"),
        ("conftest", "none"),
        ("pythonpath", "none"),
    ],
)
def test_every_layout_and_install(tmp_path: Path, git_env: None, layout: str, install: str) -> None:
    proj = project(tmp_path, layout, install)
    check_slower_alone(proj, proj.pytest(*AB_ARGS))


@pytest.mark.slow
def test_a_stale_install_is_refused_and_nothing_is_stored(tmp_path: Path, git_env: None) -> None:
    """``pip install .`` on a branch, then ``git switch`` back without installing again:
    the save measured the branch's code (its FLOPs) and stored it as main's baseline, exit
    0; the interleaving modes alone caught it. Every mode that measures refuses now."""
    proj = project(tmp_path, "src", "wheel")  # installed from feature
    git(proj.root, "checkout", "-q", "main")
    result = proj.pytest("tests/perf", "--perf-save", "-p", "no:cacheprovider")
    out = " ".join((result.stdout + result.stderr).split())  # the refusal wraps at 110
    assert result.returncode == 1, out[-3000:]
    assert "refused to measure: the head side (this process) imported the project's" in out
    assert "which is not the working tree's content" in out and "2 failed" in out
    assert not list((proj.root / "baselines").rglob("*.json"))
    plain = proj.pytest("tests/perf", "--perf-json=results/plain.json", "-p", "no:cacheprovider")
    assert plain.returncode == 1 and "refused to measure" in plain.stdout
    proj.reinstall()  # main's own copy: measured and stored
    saved = proj.pytest("tests/perf", "--perf-save", "-p", "no:cacheprovider")
    assert saved.returncode == 0, saved.stdout[-3000:]
    assert list((proj.root / "baselines").rglob("*.json"))


@pytest.mark.slow
def test_a_virtualenv_inside_the_repository_is_not_heads_code(
    tmp_path: Path, git_env: None
) -> None:
    """uv and Poetry keep the environment in the repository (``.venv``): its packages are
    third-party code, not HEAD's checkout, on both sides."""
    proj = project(tmp_path, "src", "wheel", venv_inside=True)
    check_slower_alone(proj, proj.pytest(*AB_ARGS))


@pytest.mark.slow
@pytest.mark.parametrize("install", ["editable", "wheel"])
def test_settling_runs_the_base_package(tmp_path: Path, git_env: None, install: str) -> None:
    """--perf-compare: the stored pass is settled by interleaving with the baseline
    commit's code, which must be that commit's package. The baseline is saved on main as
    CI saves it (installed from main), the comparison made on the branch."""
    proj = project(tmp_path, "src", install)
    reinstall = proj.reinstall if install == "wheel" else (lambda: None)
    git(proj.root, "checkout", "-q", "main")
    reinstall()
    saved = proj.pytest("tests/perf", "--perf-save", "-p", "no:cacheprovider")
    assert saved.returncode == 0, saved.stdout[-2000:]
    git(proj.root, "checkout", "-q", "feature")
    reinstall()
    result = proj.pytest(
        "tests/perf", "--perf-compare=main", "--perf-json=results/ab.json", "-p", "no:cacheprovider"
    )
    mlp = verdicts(proj)["test_mlp_latency"]
    assert mlp["comparison"]["decided_by"] == "ab", result.stdout[-3000:]
    check_slower_alone(proj, result, mode="settle")


@pytest.mark.slow
def test_a_baseline_whose_counts_the_base_side_does_not_match(
    tmp_path: Path, git_env: None
) -> None:
    """A stored baseline of the base commit counted other work than the base side does now
    (here its FLOPs edited; in life, a base side that did not run that commit's code): the
    interleaved verdict is withheld, 'the base side did not run the baseline's code'. A
    baseline saved from a working tree with uncommitted changes witnesses nothing."""
    proj = project(tmp_path, "src", "editable")
    git(proj.root, "checkout", "-q", "main")
    assert proj.pytest("tests/perf", "--perf-save", "-p", "no:cacheprovider").returncode == 0
    (saved,) = (proj.root / "baselines").rglob("*.json")
    doc = json.loads(saved.read_text())
    for entry in doc["benchmarks"]:
        if entry["nodeid"].endswith("test_mlp_latency"):
            entry["work"]["flops"] *= 1.5
    saved.write_text(json.dumps(doc))
    git(proj.root, "checkout", "-q", "feature")
    result = proj.pytest(*AB_ARGS)
    found = verdicts(proj)
    c = found["test_mlp_latency"]["comparison"]
    assert c["verdict"] == "inconclusive" and c["reason"] == "base-code-differs", result.stdout
    assert c["note"].startswith("the base side did not run the baseline's code: FLOPs:")
    # the untouched benchmark's counts agree: judged as usual
    same = found["test_untouched"]["comparison"]
    assert same["reason"] != "base-code-differs" and same["verdict"] != "regression", same
    # saved dirty: not a witness, the regression stands
    doc["commit"]["dirty"] = True
    saved.write_text(json.dumps(doc))
    proj.pytest(*AB_ARGS)
    assert verdicts(proj)["test_mlp_latency"]["comparison"]["verdict"] == "regression"


@pytest.mark.slow
def test_a_dependency_change_is_measured_in_the_bases_own_environment(
    tmp_path: Path, git_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The change pins a slower version of a pure-Python dependency: the base side runs
    with the version its own spec pins (installed from a local wheel), so the slowdown is
    caught; offline, the run says plainly that the base ran under HEAD's environment."""
    wheels = tmp_path / "wheels"
    proj = project(tmp_path, "src", "editable", dependency=wheels)
    monkeypatch.setenv("INFPERF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("UV_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("UV_FIND_LINKS", str(wheels))
    result = proj.pytest(*AB_ARGS, "-k", "dependency")
    out = result.stdout + result.stderr
    # An info line with its cost and each side's version, not a warning.
    said = re.search(
        r"^infperf: the base side ran in its commit's own environment \(built in \d+\.\d s\): "
        r"fastdep 1\.0 \(HEAD 2\.0\)$",
        out,
        re.M,
    )
    assert said and "warning: the base side" not in out, out[-3000:]
    c = verdicts(proj)["test_dependency"]["comparison"]
    assert c["verdict"] == "regression" and c["ratio"] > 1.3, out[-3000:]
    env = verdicts(proj)["test_dependency"]["extra"]["ab"]["base_environment"]
    assert env["installed"] == ["fastdep==1.0"] and env["failed"] is None
    assert env["versions"] == {"fastdep": {"head": "2.0", "base": "1.0"}} and env["seconds"] > 0
    assert not any("fastdep" in w for w in load_json(proj.root / "results" / "ab.json")["warnings"])
    # offline: said in the terminal, the JSON and the Markdown a PR comment shows
    monkeypatch.setenv("INFPERF_CACHE_DIR", str(tmp_path / "cache2"))
    monkeypatch.delenv("PIP_FIND_LINKS")
    monkeypatch.delenv("UV_FIND_LINKS")
    result = proj.pytest(*AB_ARGS, "-k", "dependency", "--perf-markdown=results/ab.md")
    out = result.stdout + result.stderr
    said = "the base's code ran under HEAD's environment: its dependency specs differ"
    assert said in out and "fastdep==1.0" in out
    doc = load_json(proj.root / "results" / "ab.json")
    assert any(w.startswith(said) for w in doc["warnings"])
    env = verdicts(proj)["test_dependency"]["extra"]["ab"]["base_environment"]
    asked = {"head": "2.0", "base": "2.0", "asked": "fastdep==1.0"}
    assert env["versions"] == {"fastdep": asked} and env["seconds"] is None
    markdown = (proj.root / "results" / "ab.md").read_text()
    assert "> **Not the base's own environment:** the base's code ran under HEAD's" in markdown


@pytest.mark.slow
@pytest.mark.parametrize("install", ["editable", "wheel"])
def test_a_compiled_project_is_built_for_the_base(
    tmp_path: Path, git_env: None, monkeypatch: pytest.MonkeyPatch, install: str
) -> None:
    """A checkout holds a C extension's sources, not its build: the base's own build is
    made (pip, from the base commit) and its workers import it; head workers import what
    this process does (the in-place build, or the installed copy); a +50% loop is caught."""
    monkeypatch.setenv("INFPERF_CACHE_DIR", str(tmp_path / "cache"))
    proj = compiled_project(tmp_path, install)
    result = proj.pytest(*AB_ARGS)
    out = result.stdout + result.stderr
    said = "infperf: the base side ran in its commit's own environment (built in "
    assert said in out and "s): its own build of the project" in out, out[-3000:]
    found = verdicts(proj)
    c = found["test_extension"]["comparison"]
    assert c["verdict"] == "regression" and 1.3 < c["ratio"] < 1.8, out[-3000:]
    assert found["test_untouched"]["comparison"]["verdict"] not in ("regression", "improvement")
    record = found["test_extension"]["extra"]["ab"]
    assert record["origins"]["base"]["build:."] == ["fastext", "fastext._core"]
    head = "checkout:src" if install == "editable" else "installed:fastext 0.1"
    assert record["origins"]["head"][head] == ["fastext", "fastext._core"]
    assert record["base_environment"]["compiled"] is True


INIT_MODEL = """\
import torch

DEPTH = 4


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layers = [torch.nn.Linear(16, 256), torch.nn.ReLU()]
        for _ in range(DEPTH):
            layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
        self.body = torch.nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)
"""


@pytest.mark.slow
def test_inits_install_step_and_the_gate_agree_on_a_src_layout(
    tmp_path: Path, git_env: None
) -> None:
    """What `infperf init` writes for a src-layout package (its workflow installs the
    project editable) and the gate agree: installed as the workflow says, the test init
    wrote (given its inputs) fails a +50% change of the package's model."""
    yaml = pytest.importorskip("yaml")
    root = tmp_path / "repo"
    (root / "src" / "tinymodels").mkdir(parents=True)
    (root / "src" / "tinymodels" / "__init__.py").write_text("")
    (root / "src" / "tinymodels" / "models.py").write_text(INIT_MODEL)
    (root / "pyproject.toml").write_text(build_system("src", "editable"))
    (root / ".gitignore").write_text("__pycache__/\n*.egg-info/\nresults/\nbaselines/\n")
    init_repo(root)
    out = infperf(root, "init", "--tests", "tests/perf")
    assert out.returncode == 0, out.stderr
    perf = yaml.safe_load((root / ".github" / "workflows" / "perf.yml").read_text())
    install = next(s["run"] for s in perf["jobs"]["perf"]["steps"] if "pip install" in str(s))
    assert ".venv/bin/python -m pip install" in install and install.endswith(" -e . torch")
    test = root / "tests" / "perf" / "test_infperf.py"
    text = test.read_text()
    assert "from tinymodels.models import MLP" in text
    test.write_text(text.replace("@pytest.mark.skip(reason=EDIT)\n", ""))  # given its inputs
    git(root, "add", "-A")
    git(root, "commit", "-qm", "infperf init")
    git(root, "checkout", "-q", "-b", "feature")
    model = root / "src" / "tinymodels" / "models.py"
    model.write_text(INIT_MODEL.replace("DEPTH = 4", "DEPTH = 6"))
    git(root, "commit", "-qam", "deeper")
    proj = Project(root, environment(tmp_path / "venv"), "src", "editable")
    proj.reinstall()  # the workflow's `pip install -e .` (torch is this suite's)
    result = proj.pytest(*AB_ARGS, "-o", "infperf_max_time=0.3")
    found = verdicts(proj)
    mlp = found["test_mlp_latency"]
    assert mlp["comparison"]["verdict"] == "regression", (list(found), result.stdout[-3000:])
    assert 1.2 < mlp["comparison"]["ratio"] < 1.8


def _installed_copy(site: Path, repo: Path, files: dict[str, str]) -> None:
    """A copy of the project installed from ``repo`` into ``site`` as pip leaves one: its
    files, and a dist-info whose RECORD lists them and whose direct_url names the repo."""
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    info = site / "tinymodels-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinymodels\nVersion: 0.1\n")
    (info / "direct_url.json").write_text(json.dumps({"url": repo.as_uri(), "dir_info": {}}))
    listed = [*files, f"{info.name}/METADATA", f"{info.name}/direct_url.json"]
    (info / "RECORD").write_text("".join(f"{rel},,\n" for rel in listed))


def test_a_stale_install_is_refused_before_anything_is_measured(tmp_path: Path) -> None:
    """The head process imported the project from an installed copy that is not the
    working tree's (``pip install .`` on a branch, then ``git switch`` back): every mode
    that measures refuses, a save first; the same copy, fresh, passes."""
    repo, site = tmp_path / "repo", tmp_path / "site"
    (repo / "src" / "tinymodels").mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "src" / "tinymodels" / "__init__.py").write_text("DEPTH = 4\n")
    _installed_copy(site, repo, {"tinymodels/__init__.py": "DEPTH = 6\n"})
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from pytest_infperf.ab import proof
        head = proof.Head(Path({str(repo)!r}))
        print("before:", head.refusal("measure"))
        sys.path.append({str(site)!r})
        import tinymodels
        print("stale:", head.refusal("measure"))
        Path({str(site / "tinymodels" / "__init__.py")!r}).write_text("DEPTH = 4\\n")
        print("fresh:", proof.Head(Path({str(repo)!r})).refusal("measure"))
        """
    )
    out = _python(script)
    assert "before: None" in out and "fresh: None" in out
    assert "stale: refused to measure: the head side (this process) imported" in out
    assert f"tinymodels from {site}/tinymodels/__init__.py" in out
    assert "which is not the working tree's content" in out and "pip install ." in out


def test_a_save_that_met_a_stale_install_stores_nothing(
    pytester: pytest.Pytester, git_env: None
) -> None:
    """One test measures before another imports the stale copy: the second fails, and the
    save stores neither (what the run measured is not all this commit's code)."""
    from .conftest import FAST_INI

    repo = pytester.path
    (repo / "src" / "tinymodels").mkdir(parents=True)
    (repo / "src" / "tinymodels" / "__init__.py").write_text("DEPTH = 4\n")
    _installed_copy(repo.parent / "site", repo, {"tinymodels/__init__.py": "DEPTH = 6\n"})
    pytester.makeconftest(f"import sys\nsys.path.append({str(repo.parent / 'site')!r})\n")
    pytester.makefile(".ini", pytest=FAST_INI)
    pytester.makepyfile(
        test_a="def test_a(infer_bench):\n    infer_bench(lambda: None)\n",
        test_b="def test_b(infer_bench):\n    import tinymodels\n    infer_bench(lambda: None)\n",
    )
    init_repo(repo)
    result = pytester.runpytest_subprocess("--perf-save", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*refused to measure: the head side (this process) imported the project's code*",
            "*error: not saving the baseline: the run imported the project from an installed "
            "copy that is not the working tree's (its failed tests name it)",
        ]
    )
    assert not list((repo / "baselines").rglob("*.json"))


def test_a_nested_namespace_copy_is_found_in_the_repository(tmp_path: Path) -> None:
    """``acme/vision/tinymodels`` installed non-editable: the copy's portion is found two
    namespace folders down, and again in the repository, so that the base side imports its
    own and the head's copy is checked against the working tree (before, the base was
    refused, blamed on a .pth, and the head refused as stale)."""
    repo, site = tmp_path / "repo", tmp_path / "site"
    (repo / "src" / "acme" / "vision" / "tinymodels").mkdir(parents=True)
    (repo / "src" / "acme" / "vision" / "tinymodels" / "__init__.py").write_text("D = 4\n")
    copy = "acme/vision/tinymodels/__init__.py"
    _installed_copy(site, repo, {copy: "D = 4\n", "acme/vision/data.json": "{}"})
    from importlib.metadata import PathDistribution

    info = PathDistribution(site / "tinymodels-0.1.dist-info")
    (dist,) = imports.repo_distributions(repo, [info])
    place = str((site / "acme" / "vision" / "tinymodels").resolve())
    assert dist.places == (("acme.vision.tinymodels", place),)
    assert imports.locate(repo, "acme.vision.tinymodels", ()) == "src/acme/vision"
    assert imports.portions(repo / "src" / "acme", "acme", "src/acme") == {
        "acme.vision.tinymodels": "src/acme/vision"
    }
    told = ImportMap(
        str(repo),
        names={"acme.vision.tinymodels": "src/acme/vision"},
        installed=(("acme.vision.tinymodels", place, "tinymodels 0.1"),),
    )
    found = {"acme.vision.tinymodels": f"{place}/__init__.py"}
    assert proof.problems("head", found, told, str(repo)) == []
