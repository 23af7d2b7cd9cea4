"""Which code a side of a comparison runs: the project's own modules, found from what the
head process imports from its repository; each worker held to its checkout; and the proof,
read back from every side, of where its modules came from.

An interleaved comparison is worth nothing if the base side imports HEAD's code, and by
default it does wherever the project's package is not at the checkout's root: a ``src/``
layout installed editable (a ``.pth`` path, or setuptools' finder, resolves it to the head's
checkout whatever the working directory), a non-editable ``pip install .`` of HEAD in
site-packages, a ``PYTHONPATH``. Nothing here asks the user for a setting:

- :func:`discover` (the controller, once): the import roots inside the repository (the
  head's ``sys.path`` entries there, and the folders that hold the packages the repository's
  installed distributions provide) and the project's module names, each with its folder;
- :func:`hold` (each worker, before its pytest session starts): ``sys.path`` entries inside
  the head's checkout mapped into the worker's own, the roots put first, editable finders
  that resolve the project to the head's checkout removed, and :class:`CheckoutFinder`
  first on ``sys.meta_path``: a project module comes from this checkout or not at all;
- :class:`Origins`: where each project module a process imported came from, which
  :mod:`~pytest_infperf.ab.proof` judges for its side;
- :func:`startup`: every process of the base side held as its interpreter starts (the base
  side's own environment runs it: :mod:`~pytest_infperf.ab.interpreter`).

A worker of the head's working tree is held the same way, so that both workers of a
process pair import alike.
"""

from __future__ import annotations

import atexit
import configparser
import contextlib
import dataclasses
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import re
import site
import sys
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

#: Folders never searched for the project's modules: tools' and environments' own.
SKIP_DIRS = frozenset(
    [
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".eggs",
        "node_modules",
        "build",
        "dist",
        "site-packages",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
    ]
)
#: Module names an installer writes beside a package (editable hooks), never the project's.
_HOOK_PREFIXES = ("__editable__", "_editable_impl_", "__editables_")
#: Names pytest imports itself, one per folder (``conftest``), that mean this process, or
#: that are a repository's scripts rather than its modules.
_NEVER = frozenset({"conftest", "__main__", "setup", "noxfile"})
#: How deep below the repository's root a package installed from it is looked for.
_DEPTH = 3


@dataclasses.dataclass(frozen=True)
class ImportMap:
    """What the head imports of its repository, for a worker to import from its checkout."""

    #: The head's repository root (resolved).
    toplevel: str
    #: The head's ``sys.path`` entries inside the repository, relative ("" is the root).
    roots: tuple[str, ...] = ()
    #: Each of the project's module names (top-level, or a namespace package's portion) and
    #: the folder, relative to the root, that holds it in the head's checkout.
    names: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: Copies of the project installed from the repository (not editable): each package's
    #: or module's name, where it lies, and its distribution ("tinymodels 0.1").
    installed: tuple[tuple[str, str, str], ...] = ()
    #: Extra folders (``infperf_ab_pythonpath``), put first in every worker.
    extra: tuple[str, ...] = ()
    #: A base worker of a compiled project: the site folder its environment installed the
    #: base's own build in, where the project's names are found first. A head worker of a
    #: compiled project installed non-editable: the site folder of that copy (a checkout
    #: holds an extension's sources, not its build).
    built: str = ""
    #: The head's Python environment folders (a ``.venv`` inside the repository is the
    #: environment, not the project).
    env: tuple[str, ...] = ()

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["names"] = dict(self.names)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> ImportMap | None:
        return _parsed(text)

    @classmethod
    def _parse(cls, text: str) -> ImportMap | None:
        if not text:
            return None
        data = json.loads(text)
        return cls(
            toplevel=str(data["toplevel"]),
            roots=tuple(str(r) for r in data.get("roots") or ()),
            names={str(k): str(v) for k, v in dict(data.get("names") or {}).items()},
            installed=tuple((str(n), str(p), str(d)) for n, p, d in data.get("installed") or ()),
            extra=tuple(str(e) for e in data.get("extra") or ()),
            built=str(data.get("built") or ""),
            env=tuple(str(e) for e in data.get("env") or ()),
        )

    def import_roots(self) -> list[str]:
        """The folders ``sys.path`` needs for the project's names (a portion ``acme.models``
        in ``src/acme``: ``src``)."""
        out = []
        for name, folder in self.names.items():
            parts = Path(folder).parts
            up = name.count(".")
            out.append("/".join(parts[: len(parts) - up]) if up else folder)
        return out

    def env_dirs(self) -> list[str]:
        """The Python environment folders of the head and of this process, less any that
        holds the repository itself (``virtualenv .``): third-party code lies there."""
        return [e for e in (*environment_dirs(), *self.env) if inside(self.toplevel, e) is None]

    def claimed(self, module: str) -> str | None:
        """The project's name ``module`` is, or lies under (None: not the project's)."""
        parts = module.split(".")
        for i in range(len(parts), 0, -1):
            name = ".".join(parts[:i])
            if name in self.names:
                return name
        return None


@functools.lru_cache(maxsize=16)
def _parsed(text: str) -> ImportMap | None:
    """An import map's JSON, read once: the controller checks one against every READY."""
    return ImportMap._parse(text)


# --- paths ------------------------------------------------------------------------------


def inside(path: str | Path, folder: str | Path) -> str | None:
    """``path`` relative to ``folder`` ("" for the folder itself), or None when outside."""
    p, f = os.fspath(path), os.fspath(folder).rstrip(os.sep) or os.sep
    if p == f:
        return ""
    prefix = f if f.endswith(os.sep) else f + os.sep
    if not p.startswith(prefix):
        return None
    rest = p[len(prefix) :]
    return Path(rest).as_posix() if rest else ""


def _resolve(entry: str) -> Path | None:
    try:
        return (Path(entry) if entry else Path.cwd()).resolve()
    except (OSError, RuntimeError):
        return None


def environment_dirs() -> tuple[str, ...]:
    """The running Python's own folders: a virtualenv inside the repository (``.venv``) is
    the environment, not the project."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    try:
        found.update(site.getsitepackages())
    except AttributeError:  # an old virtualenv's site module
        pass
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user:
        found.add(user)
    return tuple(sorted({str(_resolve(p)) for p in found if p and _resolve(p) is not None}))


def in_env(path: str | Path, env: Sequence[str]) -> bool:
    return any(inside(path, e) is not None for e in env)


def file_of(module: ModuleType) -> str | None:
    """Where a module was loaded from (a namespace package: its first folder). Only an
    absolute path is a place: torch's ``torch.ops`` and ``torch.classes`` are objects whose
    ``__file__`` is a bare name, which would read as a file of the working directory."""
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None) if spec is not None else None
    file = getattr(module, "__file__", None)
    locations = getattr(spec, "submodule_search_locations", None) if spec else None
    for found in (origin, file, *(locations or ())):
        if isinstance(found, str) and Path(found).is_absolute():
            return found
    return None


# --- discovery (the controller) ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RepoDist:
    """A distribution installed from a folder of the repository (PEP 610's direct_url)."""

    label: str
    editable: bool
    names: tuple[str, ...]
    #: A copy (not editable): each package, module or namespace portion it installed
    #: (``acme.models``), and where it lies.
    places: tuple[tuple[str, str], ...] = ()


def repo_distributions(
    toplevel: Path, dists: Iterable[importlib.metadata.Distribution] | None = None
) -> list[RepoDist]:
    """The installed distributions of this project: those whose source is this repository
    (PEP 610's ``direct_url.json``, editable or not), and a copy of the project's own name
    installed from anywhere else (a wheel built elsewhere, an index, another checkout, a
    Docker image's ``pip install /app``), which is never the base's code either."""
    project = project_name(toplevel)
    found: dict[str, RepoDist] = {}
    for dist in importlib.metadata.distributions() if dists is None else dists:
        try:
            text = dist.read_text("direct_url.json")
            data = json.loads(text) if text else None
            name = str(dist.metadata["Name"] or "")
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            data = {}
        url = str(data.get("url", ""))
        where = _resolve(urllib.parse.unquote(urllib.parse.urlparse(url).path)) if url else None
        ours = (
            url.startswith("file://") and where is not None and inside(where, toplevel) is not None
        )
        if name in found or not (ours or (project and _normalize(name) == project)):
            continue
        editable = ours and bool((data.get("dir_info") or {}).get("editable"))
        names = top_level_names(dist)
        places = () if editable else _places(dist, names)
        label = f"{name} {dist.version}" + ("" if ours else ", not installed from this checkout")
        found[name] = RepoDist(label, editable, names, places)
    return list(found.values())


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_toml(path: Path) -> dict[str, object] | None:
    """A TOML file's content ({} where it cannot be read; None: no TOML reader here)."""
    try:  # tomllib from Python 3.11; tomli, where installed, before it
        toml = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    except ImportError:
        return None
    try:
        return dict(toml.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def project_name(toplevel: Path) -> str:
    """The repository's distribution name (``[project] name``, else ``setup.cfg``'s), as
    PEP 503 normalizes it; "" where it declares none."""
    project = (read_toml(toplevel / "pyproject.toml") or {}).get("project")
    if isinstance(project, dict) and isinstance(project.get("name"), str):
        return _normalize(project["name"])
    parser = configparser.ConfigParser()
    with contextlib.suppress(OSError, configparser.Error):
        parser.read(toplevel / "setup.cfg")
        if parser.has_option("metadata", "name"):
            return _normalize(parser.get("metadata", "name"))
    return ""


def top_level_names(dist: importlib.metadata.Distribution) -> tuple[str, ...]:
    """The importable top-level names a distribution provides (``top_level.txt`` where the
    installer wrote one, else its files' first parts), less the installers' hooks."""
    names: set[str] = set()
    with contextlib.suppress(OSError, ValueError):
        names.update((dist.read_text("top_level.txt") or "").split())
    for file in dist.files or ():
        parts = file.parts
        if not parts or parts[0] == "..":
            continue
        first = parts[0]
        if len(parts) == 1:
            if first.endswith(".py"):
                names.add(first[:-3])
            elif any(first.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES):
                names.add(first.split(".")[0])
        elif not first.endswith((".dist-info", ".egg-info", ".data")):
            names.add(first)
    return tuple(sorted(n for n in names if n.isidentifier() and not n.startswith(_HOOK_PREFIXES)))


def _places(
    dist: importlib.metadata.Distribution, names: Sequence[str]
) -> tuple[tuple[str, str], ...]:
    """Where an installed copy's packages and modules lie: each top-level name's folder or
    file, and for a namespace package (a folder without its own ``__init__.py``) each of
    its portions (``acme.models``)."""
    files = [f.parts for f in dist.files or () if f.parts and f.parts[0] != ".."]
    inits = {parts[:-1] for parts in files if parts[-1] == "__init__.py"}
    wanted = set()
    for parts in files:
        first = parts[0].split(".")[0] if len(parts) == 1 else parts[0]  # a module's file
        if first not in names:
            continue
        if len(parts) == 1:
            wanted.add((first, parts[0]))
            continue
        # Down through namespace folders (no __init__.py: acme/, acme/vision/) to the first
        # regular package, or to a module that lies right in a namespace folder.
        depth = next((d for d in range(1, len(parts)) if parts[:d] in inits), len(parts))
        if "__pycache__" in parts[:depth] or (depth == len(parts) and not _module(parts[-1])):
            continue  # a namespace folder's data or bytecode, not a module
        leaf = (*parts[: depth - 1], parts[depth - 1].split(".")[0])
        wanted.add((".".join(leaf), "/".join(parts[:depth])))
    site_root = Path(str(dist.locate_file("")))
    out = []
    for name, rel in sorted(wanted):
        place = _resolve(str(site_root / rel))
        if place is not None and place.exists() and name.replace(".", "").isidentifier():
            out.append((name, str(place)))
    return tuple(out)


def _module(file: str) -> bool:
    """Whether a file name is a Python module's (source or extension)."""
    return file.endswith(".py") or file.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def editable_mappings() -> dict[str, str]:
    """The names editable installs map to folders, as their finders hold them: setuptools'
    (a ``MAPPING`` in its ``__editable___*_finder`` module) and the ``editables`` package's
    (hatchling's exact mode)."""
    out: dict[str, str] = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("__editable__"):
            mapping = getattr(module, "MAPPING", None)
            if isinstance(mapping, dict):
                out.update({str(k): str(v) for k, v in mapping.items()})
    for finder in sys.meta_path:
        mapping = getattr(finder, "_redirections", None)
        if isinstance(mapping, dict):
            out.update({str(k): str(v) for k, v in mapping.items()})
    return out


def scan(folder: Path) -> list[str]:
    """The importable names right in ``folder``: modules and regular packages."""
    out: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return out
    for entry in entries:
        name = entry.name
        if name.startswith(".") or name in SKIP_DIRS:
            continue
        with contextlib.suppress(OSError):  # a folder this user may not read
            if entry.is_file() and name.endswith(".py") and name[:-3].isidentifier():
                out.append(name[:-3])
            elif entry.is_dir() and name.isidentifier() and _is_file(entry.path, "__init__.py"):
                out.append(name)
    return sorted(n for n in out if n not in _NEVER and not n.startswith(_HOOK_PREFIXES))


def portions(folder: Path, prefix: str, rel: str, depth: int = _DEPTH) -> dict[str, str]:
    """The importable names in a namespace package's ``folder`` (``prefix`` its dotted
    name, ``rel`` the folder relative to the repository), each with the folder that holds
    it: its modules and regular packages, and those of the namespace folders below it
    (``acme/vision/models``: ``acme.vision.models`` in ``src/acme/vision``)."""
    out = {f"{prefix}.{sub}": rel for sub in scan(folder)}
    if depth <= 1:
        return out
    try:
        subs = sorted(e.name for e in os.scandir(folder) if e.is_dir())
    except OSError:
        return out
    for sub in subs:
        inner = folder / sub
        if sub.isidentifier() and sub not in SKIP_DIRS and not _is_file(inner, "__init__.py"):
            out.update(portions(inner, f"{prefix}.{sub}", f"{rel}/{sub}".lstrip("/"), depth - 1))
    return out


def locate(toplevel: Path, name: str, roots: Sequence[str]) -> str | None:
    """The folder of the repository that holds package or module ``name`` (relative; a
    namespace package's portion ``acme.models``: the folder that holds ``models``): the
    roots first, then the root and ``src``, then the shallowest match a few levels down."""
    path = name.replace(".", "/")
    inner = path.rpartition("/")[0]

    def holds(folder: Path) -> bool:
        return _is_file(folder / path, "__init__.py") or _is_file(folder, f"{path}.py")

    def found(folder: Path) -> str:
        return (folder / inner).relative_to(toplevel).as_posix().removeprefix(".")

    for rel in dict.fromkeys([*roots, "", "src"]):
        if holds(toplevel / rel):
            return found(toplevel / rel)
    level = [toplevel]
    for _ in range(_DEPTH):
        nxt = []
        for folder in level:
            try:
                subs = sorted(e.path for e in os.scandir(folder) if e.is_dir())
            except OSError:  # a folder this user may not read
                continue
            for sub in map(Path, subs):
                if sub.name.startswith(".") or sub.name in SKIP_DIRS:
                    continue
                if holds(sub):
                    return found(sub)
                nxt.append(sub)
        level = nxt
    return None


def _is_file(*parts: str | Path) -> bool:
    """Whether the file exists (False where it cannot be looked at)."""
    try:
        return Path(*parts).is_file()
    except OSError:
        return False


def _generated(rel: str) -> bool:
    """Whether a folder of the repository is one tools generate (``build/``...)."""
    return any(part in SKIP_DIRS for part in Path(rel).parts)


def _find_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError, OSError):
        return None


def discover(
    toplevel: Path,
    extra: Sequence[str] = (),
    find: Callable[[str], importlib.machinery.ModuleSpec | None] = _find_spec,
    dists: Sequence[RepoDist] | None = None,
) -> ImportMap:
    """What this (the head) process imports of the repository at ``toplevel``: its import
    roots there, and every name of the project with the folder that holds it, whether this
    process finds it in the repository (a ``sys.path`` entry, an editable install's finder)
    or in a copy installed from it (found again in the repository by its name)."""
    top = toplevel.resolve()
    # An environment folder that holds the repository itself (`virtualenv .`) is not one.
    env = tuple(e for e in environment_dirs() if inside(top, e) is None)
    roots: list[str] = []
    for entry in sys.path:
        path = _resolve(entry)
        if path is None or in_env(path, env):
            continue
        rel = inside(path, top)
        if rel is not None and rel not in roots and not _generated(rel):
            roots.append(rel)
    repo = repo_distributions(top) if dists is None else list(dists)
    candidates = {n for d in repo for n in d.names}
    candidates.update(n for n, p in editable_mappings().items() if inside(p, top) is not None)
    for rel in dict.fromkeys([*roots, "", "src"]):
        candidates.update(scan(top / rel))
    for name, module in list(sys.modules.items()):
        file = file_of(module)
        if file and inside(file, top) is not None and not in_env(file, env):
            candidates.add(name.partition(".")[0])
    # Copies of the project installed: every module of them is the project's.
    installed = [(n, place, d.label) for d in repo for n, place in d.places]
    owners = {n: d for d in repo for n in d.names}
    names: dict[str, str] = {}
    for name in sorted(candidates):
        if name in _NEVER or not name.isidentifier() or name.startswith(_HOOK_PREFIXES):
            continue
        spec = find(name)
        if spec is None:
            continue
        origin = spec.origin if spec.origin not in (None, "namespace") else None
        locations = [str(p) for p in spec.submodule_search_locations or ()]
        if origin is None:  # a namespace package: the portions the repository holds
            for loc in locations:
                real = _resolve(loc) or Path(loc)
                rel = inside(real, top)
                if rel is not None and not in_env(real, env):
                    names.update(portions(real, name, rel))
            continue
        # The file, resolved: setuptools' strict editable mode links each file from a tree
        # under build/, and the package's folder there is not a link.
        real = _resolve(origin) or Path(origin)
        place = real.parent if locations else real  # the package's folder, or the module
        rel = inside(place.parent, top)
        if rel is not None and not in_env(real, env) and not _generated(rel):
            names[name] = rel
        elif rel is not None and not in_env(real, env):  # a tree an installer generated
            names[name] = locate(top, name, roots) or rel
        elif name in owners and not any(inside(real, p) is not None for _, p, _ in installed):
            # The project's name from a copy outside it (another checkout's editable install)
            installed.append((name, str(place), owners[name].label))
    for name, _, _ in installed:  # what this process takes from a copy: found again here
        if name not in names and (home := locate(top, name, roots)) is not None:
            names[name] = home
    return ImportMap(str(top), tuple(roots), names, tuple(installed), tuple(extra), env=env)


class Origins:
    """Where the project's modules in this process came from, kept up to date cheaply: a
    module is looked at once (``sys.modules`` grows; torch alone brings thousands)."""

    def __init__(self, imports: ImportMap, tree: Path) -> None:
        self.imports = imports
        self.tree = str(tree.resolve())
        # Environment folders (a .venv inside the repository): third-party code, unless an
        # installed copy of the project lies there.
        self.env = imports.env_dirs()
        self.trees = (imports.toplevel, self.tree)
        copies = [p for _, p, _ in imports.installed]
        self.copies = (*copies, imports.built) if imports.built else tuple(copies)
        self._seen: dict[str, tuple[int, str | None]] = {}

    def read(self) -> dict[str, str]:
        """Each project module (by name, or by a file in either checkout or an installed
        copy) and the file it came from ("" where it has none)."""
        out: dict[str, str] = {}
        for name, module in list(sys.modules.items()):
            key = id(module)
            seen = self._seen.get(name)
            if seen is None or seen[0] != key:
                seen = (key, self._place(name, module))
                self._seen[name] = seen
            if seen[1] is not None:
                out[name] = seen[1]
        return out

    def _place(self, name: str, module: ModuleType) -> str | None:
        file = file_of(module)
        claimed = self.imports.claimed(name) is not None
        if file is None:
            return "" if claimed else None
        real = os.path.realpath(file)
        if any(inside(real, p) is not None for p in self.copies):
            return real
        if in_env(real, self.env):
            return None
        if claimed or any(inside(real, t) is not None for t in self.trees):
            return real
        return None


# --- a worker held to its checkout --------------------------------------------------------


class CheckoutFinder(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path`` in a worker: the project's modules are found in its
    checkout only. Where the checkout lacks one that another copy on the path has (HEAD's
    package installed in site-packages), the import fails as it would in the checkout
    alone, instead of quietly taking that copy."""

    def __init__(self, tree: Path, imports: ImportMap) -> None:
        self.tree = tree
        self.imports = imports
        self._here: dict[str, bool] = {}
        self._homes: dict[str, str | None] = {}

    def _ours(self, entry: str) -> bool:
        known = self._here.get(entry)
        if known is not None:
            return known
        path = _resolve(entry)
        homes: list[str | Path] = [self.tree]
        if self.imports.built:
            homes.append(self.imports.built)
        ours = path is not None and any(inside(path, h) is not None for h in homes)
        if Path(entry).is_absolute():  # "" and relative entries follow the working folder
            self._here[entry] = ours
        return ours

    def _moved(self, name: str) -> str | None:
        """Where this checkout keeps the project's ``name`` when not where HEAD does (None:
        it does not hold it)."""
        if name not in self._homes:
            home = locate(self.tree, name, self.imports.roots)
            self._homes[name] = None if home == self.imports.names[name] else home
        return self._homes[name]

    def _forbidden(self, origin: str | None) -> bool:
        """Whether a copy found elsewhere is the project's own code: HEAD's checkout, or a
        copy of the project installed (a third party's portion of a namespace is not)."""
        if not origin:
            return False
        real = _resolve(origin) or Path(origin)
        top = self.imports.toplevel
        if inside(real, top) is not None and not in_env(real, self.imports.env):
            return True
        return any(inside(real, p) is not None for _, p, _ in self.imports.installed)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        claimed = self.imports.claimed(fullname)
        if claimed is None:
            return None
        if fullname == claimed and "." not in fullname:
            # The base's own build first (a compiled project); then pytest's insertions (a
            # test folder at sys.path[0]) before the rest, as usual.
            search = [self.imports.built] if self.imports.built else []
            search += [e for e in sys.path if self._ours(e)]
            search.append(str(self.tree / self.imports.names[claimed]))
        else:
            search = [e for e in path or () if self._ours(e)]
            if fullname == claimed:  # a namespace package's portion: its folder here too
                search.append(str(self.tree / self.imports.names[claimed]))
        spec = importlib.machinery.PathFinder.find_spec(fullname, list(dict.fromkeys(search)))
        if spec is None and fullname == claimed and (moved := self._moved(claimed)) is not None:
            # Not where HEAD keeps it: the layout moved between the commits (src/ to the
            # root, or back), and this checkout keeps it there.
            spec = importlib.machinery.PathFinder.find_spec(fullname, [str(self.tree / moved)])
        if spec is not None:
            return spec
        elsewhere = importlib.machinery.PathFinder.find_spec(
            fullname, None if "." not in fullname else list(path or ())
        )
        if elsewhere is not None and self._forbidden(elsewhere.origin):
            raise ModuleNotFoundError(
                f"No module named {fullname!r} in {self.tree} (the copy at "
                f"{elsewhere.origin} is not this checkout's)",
                name=fullname,
            )
        return None


def _points_to(finder: Any, top: Path) -> bool:
    """Whether a finder on ``sys.meta_path`` is an editable install's that maps a name into
    the head's checkout (setuptools' ``MAPPING``, the ``editables`` package's table)."""
    module = sys.modules.get(str(getattr(finder, "__module__", "")))
    for mapping in (getattr(module, "MAPPING", None), getattr(finder, "_redirections", None)):
        if isinstance(mapping, dict) and any(
            inside(_resolve(str(p)) or str(p), top) is not None for p in mapping.values()
        ):
            return True
    return False


def hold(imports: ImportMap, tree: Path) -> None:
    """This (worker) process imports the project from ``tree`` only: call before anything
    of the project is imported."""
    top, tree = Path(imports.toplevel), tree.resolve()
    env = imports.env_dirs()

    def mapped(entry: str) -> str | None:
        """A path entry as this checkout has it: one into the head's checkout (PYTHONPATH,
        a .pth) is this checkout's same folder or zip, or gone where this one lacks it."""
        path = _resolve(entry)
        rel = None if path is None or in_env(path, env) else inside(path, top)
        if rel is None:
            return entry
        return str(tree / rel) if (tree / rel).exists() else None

    front = [*imports.extra, *imports.roots, *sorted(set(imports.import_roots()))]
    first = [str(tree / rel) for rel in front if (tree / rel).is_dir()] + [str(tree)]
    kept = [m for m in map(mapped, sys.path) if m is not None]
    sys.path[:] = list(dict.fromkeys([*first, *kept]))
    # The processes a test starts (a server, a client) import the same checkout first.
    told = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    inherited = [m for m in map(mapped, filter(None, told)) if m is not None]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*first, *inherited]))
    sys.meta_path[:] = [f for f in sys.meta_path if not _points_to(f, top)]
    sys.meta_path.insert(0, CheckoutFinder(tree, imports))
    importlib.invalidate_caches()


def held() -> bool:
    """Whether this process is held to a checkout already (at its interpreter's start-up,
    by :func:`startup`)."""
    return any(type(f).__name__ == CheckoutFinder.__name__ for f in sys.meta_path)


#: Beside this module's copy in the base side's own environment (``ab/interpreter.py``):
#: what :func:`startup` holds the process to.
STARTUP_FILE = "_infperf_hold.json"


def startup() -> None:
    """Run by a ``.pth`` file of the base side's own environment as every process of the
    base side starts, the worker and whatever its tests start (``subprocess`` with
    ``sys.executable``, ``env={}`` or not): hold it to the base's checkout before anything
    of the project is imported, and record, now and at its exit, where its project modules
    came from (a module imported before this ran, by an earlier ``.pth``, is named then).
    A copy of this module (standard library only) is what runs: importing the package here
    would import HEAD's."""
    try:
        told = json.loads(Path(__file__).with_name(STARTUP_FILE).read_text())
        imports = ImportMap._parse(str(told["imports"]))
        tree, record = Path(str(told["tree"])), Path(str(told["origins"]))
    except (OSError, ValueError, KeyError):
        return  # not this run's environment any more: nothing to hold it to
    if imports is None:
        return
    origins = Origins(imports, tree)
    failed: list[str] = []

    def write() -> None:
        found = {"pid": os.getpid(), "origins": origins.read(), "error": "; ".join(failed)}
        with contextlib.suppress(OSError):
            here = record / f"{os.getpid()}.json"
            part = here.with_suffix(".part")
            part.write_text(json.dumps(found))
            os.replace(part, here)

    atexit.register(write)
    try:
        hold(imports, tree)
    except Exception as exc:  # said, and refused by the proof: never a process left loose
        failed.append(f"{type(exc).__name__}: {exc}")
    write()


def top_names(toplevel: Path) -> frozenset[str]:
    """The top-level names the repository at ``toplevel`` holds at its root or under
    ``src/``: its packages, modules and namespace packages' folders."""
    held: set[str] = set()
    for folder in (toplevel, toplevel / "src"):
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                name = entry.name.removesuffix(".py")
                if name.isidentifier() and name not in _NEVER and name not in SKIP_DIRS:
                    held.add(name)
    return frozenset(held)


def shadowed(toplevel: Path, names: frozenset[str]) -> bool:
    """Whether this process imported, from outside the repository at ``toplevel``, one of
    the top-level ``names`` it holds (:func:`top_names`): an installed copy of the
    project, stale or foreign, which only then is worth proving (:func:`discover` reads
    every installed distribution)."""
    top = str(toplevel)
    for name in names & set(sys.modules):
        module = sys.modules[name]
        spec = getattr(module, "__spec__", None)
        places = [file_of(module), *(getattr(spec, "submodule_search_locations", None) or ())]
        for place in places:  # a namespace package: any of its folders
            if place and inside(os.path.realpath(place), top) is None:
                return True
    return False
