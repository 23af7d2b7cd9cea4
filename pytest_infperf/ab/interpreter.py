"""The interpreter every process of the base side runs: a virtual environment of the run's
own over the base's environment, whose start-up holds each process to the base's checkout
and records where its project modules came from.

A worker holds itself to its checkout (:func:`~.imports.hold`), but a process a test starts
(``subprocess.run([sys.executable, ...], env={"PATH": ...})``) imports the project as its
interpreter's start-up finds it, and an editable install's ``.pth`` finds HEAD's checkout.
Environment variables do not survive ``env={}``; an interpreter's own environment does. So
the base side's processes run this environment's ``python`` (``sys.executable`` in each of
them, and first on ``PATH`` where HEAD's environment's folder was): its ``site-packages``
sees the base's environment (HEAD's, or one built for the base commit:
:mod:`~.baseenv`), then a ``.pth`` runs :func:`~.imports.startup` from a copy of
:mod:`~.imports` (the standard library only: importing the package there would import
HEAD's). HEAD's environment's console scripts (``pytest``...) are copied with this
``python`` in their first line. Each process writes where its project modules came from to
a folder the base's workers read at every call, and the controller holds to the proof.

What it cannot hold, the docs say (COMPARING.md, "Which code each side runs"): a process
started through another interpreter's own path, or with ``python -S``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import stat
import sys
import sysconfig
import venv
from collections.abc import Mapping, Sequence
from pathlib import Path

from . import imports

#: The ``.pth`` files, processed in this order: the base's environment's site folders
#: first (their own ``.pth`` files, editable finders included), then the hold.
SITES_PTH = "_infperf_a_sites.pth"
HOLD_PTH = "_infperf_z_hold.pth"
#: The copy of :mod:`~.imports` the hold runs.
COPY = "_infperf_imports"


@dataclasses.dataclass(frozen=True)
class Interpreter:
    """The base side's own ``python``, the folder of its commands, and the folder its
    processes record their project modules' origins in (one ``<pid>.json`` each)."""

    python: str
    bin: str
    origins: str

    def environ(self, env: Mapping[str, str]) -> dict[str, str]:
        """A base-side worker's environment: this ``bin`` first on ``PATH`` where HEAD's
        environment's folder is on it (``python``, ``pytest`` there ran HEAD's; elsewhere
        the path names what it names on the head's side too)."""
        out = dict(env)
        head = str(Path(sys.executable).parent)
        parts = out.get("PATH", "").split(os.pathsep)
        if head in parts:
            parts.insert(parts.index(head), self.bin)
            out["PATH"] = os.pathsep.join(parts)
        return out


def make(folder: Path, sites: Sequence[str], imports_json: str, tree: Path) -> Interpreter:
    """The base side's interpreter in ``folder`` (the run's own temporary folder): over the
    site folders ``sites``, held to ``tree`` by ``imports_json`` (an
    :class:`~.imports.ImportMap`). Raises OSError."""
    venv.EnvBuilder(symlinks=os.name != "nt", with_pip=False, clear=True).create(folder)
    paths = sysconfig.get_paths(vars={"base": str(folder), "platbase": str(folder)})
    site_dir = Path(paths["purelib"])
    bin_dir = Path(paths["scripts"])
    python = bin_dir / Path(sys.executable).name
    if not python.exists():
        python = bin_dir / "python"
    origins = folder / "origins"
    origins.mkdir()
    (site_dir / f"{COPY}.py").write_text(Path(imports.__file__).read_text())
    told = {"imports": imports_json, "tree": str(tree), "origins": str(origins)}
    (site_dir / imports.STARTUP_FILE).write_text(json.dumps(told))
    lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in sites)
    (site_dir / SITES_PTH).write_text(lines)
    (site_dir / HOLD_PTH).write_text(f"import {COPY}; {COPY}.startup()\n")
    _commands(Path(sys.executable).parent, bin_dir, python)
    return Interpreter(str(python), str(bin_dir), str(origins))


def recorded(folder: str, own: int) -> list[dict[str, object]]:
    """What the base side's processes recorded in ``folder`` (an :class:`Interpreter`'s
    ``origins``), but for process ``own`` (the one asking): ``{"pid": ..., "origins":
    {module: file}}`` each."""
    out: list[dict[str, object]] = []
    with contextlib.suppress(OSError):
        for path in sorted(Path(folder).glob("*.json")):
            if path.stem == str(own):
                continue
            with contextlib.suppress(OSError, ValueError):
                found = json.loads(path.read_text())
                if isinstance(found, dict) and isinstance(found.get("origins"), dict):
                    out.append(found)
    return out


def _commands(head: Path, bin_dir: Path, python: Path) -> None:
    """HEAD's environment's console scripts whose first line names its Python, copied into
    ``bin_dir`` with ``python`` there instead (what is there already stays)."""
    try:
        entries = list(os.scandir(head))
    except OSError:
        return
    for entry in entries:
        target = bin_dir / entry.name
        with contextlib.suppress(OSError, UnicodeDecodeError):
            if target.exists() or not entry.is_file():
                continue
            with open(entry.path, "rb") as f:
                first = f.readline(4096)
            if not first.startswith(b"#!"):
                continue
            named = first[2:].decode().strip().split(" ")[0]
            if Path(named).parent != head or "python" not in Path(named).name:
                continue
            rest = Path(entry.path).read_bytes()[len(first) :]
            target.write_bytes(f"#!{python}\n".encode() + rest)
            target.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
