"""The base side's environment: what the base commit's own dependency spec, and its compiled
parts, make of the environment the head runs in.

Where the base commit's spec (``[project]`` dependencies, ``requirements*.txt``, a lock
file) pins something HEAD's environment does not satisfy, or the project has compiled
extension modules (which a checkout holds only as sources), the base worker runs in an
environment built for the base commit by an existing installer (uv where it is on the path,
else pip): a virtual environment over this one, in which the base's differing requirements
and, for a compiled project, the base's own build are installed first. It is cached under
the tool's cache folder by a hash of what it holds. So a change that bumps a dependency is
compared as its users will run each side.

Where that cannot be done (offline, a build error, a spec no installer reads: ``setup.py``,
``environment.yml``), the base's code runs in HEAD's environment and the run says so
plainly, naming the specs that differ.
"""

from __future__ import annotations

import configparser
import contextlib
import dataclasses
import hashlib
import importlib
import importlib.machinery
import importlib.metadata
import json
import os
import re
import shutil
import signal
import site
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ..report.notices import HEAD_ENVIRONMENT
from ..store.index import cache_dir
from . import imports

#: Files whose requirement lines are compared (relative to the repository's root; the
#: glob patterns also match one folder down, ``requirements/*.txt``).
REQUIREMENT_FILES = ("requirements*.txt", "requirements/*.txt", "constraints*.txt")
#: Lock files: their pins (name and version of every package) are compared.
LOCK_FILES = ("uv.lock", "poetry.lock", "pdm.lock", "pylock.toml", "pylock.*.toml")
#: Specs no installer here reads line by line: a difference is only said.
OPAQUE_FILES = ("setup.py", "environment.yml", "environment.yaml", "Pipfile.lock")
#: Files that say the project builds compiled extension modules.
BUILD_MARKERS = ("meson.build", "CMakeLists.txt", "Cargo.toml")
#: Never installed for the base, whatever its spec pins: the harness both sides share.
HARNESS = frozenset({"pytest", "pytest-infperf", "pip", "setuptools", "wheel", "uv"})
#: How long building the base's environment may take, and how old a build's leftover
#: folder (a run killed while it built) is before the next build removes it.
BUILD_TIMEOUT_S = 900.0
STALE_BUILD_S = 24 * 3600.0


@dataclasses.dataclass(frozen=True)
class SpecChange:
    """One spec file that differs between the base commit and HEAD."""

    file: str
    #: The base's requirements HEAD's spec lacks (as written), and HEAD's the base lacks.
    base_only: tuple[str, ...] = ()
    head_only: tuple[str, ...] = ()
    #: No installer reads it line by line (a ``setup.py``): the difference is only said.
    opaque: bool = False

    def describe(self) -> str:
        if self.opaque:
            return f"{self.file} differs (not read)"
        pairs = []
        if self.base_only:
            pairs.append("base " + ", ".join(self.base_only[:4]))
        if self.head_only:
            pairs.append("HEAD " + ", ".join(self.head_only[:4]))
        return f"{self.file} ({'; '.join(pairs)})" if pairs else f"{self.file} differs"


@dataclasses.dataclass(frozen=True)
class BaseEnv:
    """What the base worker runs in: a Python (this one where nothing needed building), the
    site folder the base's own build lies in (a compiled project), and what to say."""

    python: str
    #: The base's compiled project, installed here (None: the base imports its checkout).
    built_site: str | None = None
    changes: tuple[SpecChange, ...] = ()
    compiled: bool = False
    #: What was installed for the base (requirements, and its own build of the project).
    installed: tuple[str, ...] = ()
    #: Why the environment could not be built (None: it was, or none was needed).
    failed: str | None = None
    #: The site folder of the environment built for the base (None: none was built).
    site: str | None = None
    #: Seconds the build took (None: none was needed or it failed; 0: an earlier run's).
    seconds: float | None = None
    #: Each requirement the base's spec pins differently: the version each side imported
    #: (``base`` is HEAD's where the base's environment could not be built) and, where
    #: the base's could not be installed, what its spec asked for.
    versions: tuple[tuple[str, str | None, str | None, str], ...] = ()

    @property
    def unread(self) -> list[str]:
        """The differing specs nothing here could read (a ``setup.py``)."""
        return [c.file for c in self.changes if c.opaque]

    @property
    def note(self) -> str | None:
        """One line for the terminal, the JSON and the PR comment, or None when the base's
        code ran as its own spec says."""
        differ = "; ".join(c.describe() for c in self.changes[:4])
        if self.failed is not None:
            what = f"its dependency specs differ from HEAD's: {differ}" if differ else ""
            if self.compiled:
                what = "the project has compiled parts" + (f", and {what}" if what else "")
            return f"{HEAD_ENVIRONMENT}: {what}; its own could not be built ({self.failed})"
        unread = self.unread
        if self.installed and unread:
            built = ", ".join(self.installed[:6])
            return (
                f"the base side ran in an environment built from the base commit: {built} "
                f"({', '.join(unread)} differs and was not read)"
            )
        if unread and not self.installed:
            return (
                f"{HEAD_ENVIRONMENT}: {', '.join(unread)} differs from HEAD's, and no installer "
                "here reads its dependencies"
            )
        return None

    @property
    def info(self) -> str | None:
        """The line that says the base's own environment was built, what it holds and what
        it cost (None: none was built, or :attr:`note` says what went wrong)."""
        if not self.installed or self.note is not None:
            return None
        held = [
            f"{name} {base} (HEAD {head})" if head != base else f"{name} {base}"
            for name, head, base, _ in self.versions
        ]
        held += [i for i in self.installed if i.startswith("its own build")]
        took = "an earlier run's, reused" if not self.seconds else f"built in {self.seconds:.1f} s"
        built = ", ".join(held[:6] or self.installed[:6])
        return f"the base side ran in its commit's own environment ({took}): {built}"

    def to_json(self) -> dict[str, object]:
        return {
            "python": self.python,
            "built": self.built_site is not None or bool(self.installed),
            "compiled": self.compiled,
            "installed": list(self.installed),
            "failed": self.failed,
            "changes": [dataclasses.asdict(c) for c in self.changes],
            "seconds": None if self.seconds is None else round(self.seconds, 3),
            "versions": {
                name: {"head": head, "base": base, **({"asked": asked} if asked else {})}
                for name, head, base, asked in self.versions
            },
            "note": self.note or self.info,
        }


# --- reading specs ------------------------------------------------------------------------


def _pyproject(tree: Path) -> list[str]:
    """``[project]`` dependencies, optional ones (``extra: req``), and dependency groups."""
    data = imports.read_toml(tree / "pyproject.toml")
    if data is None:  # no TOML reader: the file's lines, compared as they are
        return _requirements(tree / "pyproject.toml")
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    assert isinstance(project, dict)
    out = [str(r) for r in project.get("dependencies") or ()]
    for extra, reqs in dict(project.get("optional-dependencies") or {}).items():
        out += [f"{extra}: {r}" for r in reqs or ()]
    for group, reqs in dict(data.get("dependency-groups") or {}).items():  # type: ignore[call-overload]
        out += [f"{group}: {r}" for r in reqs or () if isinstance(r, str)]
    return out


def _setup_cfg(path: Path) -> list[str]:
    """``setup.cfg``'s ``install_requires`` and extras (``extra: req``)."""
    parser = configparser.ConfigParser()
    try:
        parser.read(path)
    except configparser.Error:
        return ["(setup.cfg could not be read)"]
    out = []
    if parser.has_option("options", "install_requires"):
        out += [r for r in parser.get("options", "install_requires").splitlines() if r.strip()]
    if parser.has_section("options.extras_require"):
        for extra, reqs in parser.items("options.extras_require"):
            out += [f"{extra}: {r.strip()}" for r in reqs.splitlines() if r.strip()]
    return [r.strip() for r in out]


def _requirements(path: Path) -> list[str]:
    """A requirements file's requirements: continuation lines joined, comments and options
    such as pip-compile's ``--hash`` dropped."""
    try:
        text = path.read_text()
    except OSError:
        return []
    out = []
    for raw in text.replace("\\\n", " ").splitlines():
        line = re.split(r"(?:^|\s)#", raw, maxsplit=1)[0].strip()
        line = re.split(r"\s+--?[a-z]", line, maxsplit=1)[0].strip() if line[:1] != "-" else line
        if line:
            out.append(line)
    return out


def _lock_pins(path: Path) -> list[str]:
    """A lock file's pins, ``name==version`` (a package the lock installs from the project's
    own folders, as the project itself, is not a pin)."""
    data = imports.read_toml(path)
    if data is None:
        return _requirements(path)
    packages = data.get("package") or data.get("packages") or []
    out = []
    for pkg in packages if isinstance(packages, list) else []:
        if not isinstance(pkg, dict) or not pkg.get("name") or not pkg.get("version"):
            continue
        source = pkg.get("source")
        if isinstance(source, dict) and ({"editable", "virtual", "directory"} & set(source)):
            continue
        out.append(f"{pkg['name']}=={pkg['version']}")
    return sorted(out)


def _files(tree: Path, patterns: Sequence[str]) -> list[Path]:
    found: set[Path] = set()
    for pattern in patterns:
        found.update(p for p in tree.glob(pattern) if p.is_file())
    return sorted(found)


def specs(tree: Path) -> dict[str, tuple[bool, list[str]]]:
    """Every dependency spec of a checkout: file -> (opaque, its lines or pins)."""
    out: dict[str, tuple[bool, list[str]]] = {}
    if (tree / "pyproject.toml").is_file():
        out["pyproject.toml"] = (False, _pyproject(tree))
    if (tree / "setup.cfg").is_file():
        out["setup.cfg"] = (False, _setup_cfg(tree / "setup.cfg"))
    for path in _files(tree, REQUIREMENT_FILES):
        out[path.relative_to(tree).as_posix()] = (False, _requirements(path))
    for path in _files(tree, LOCK_FILES):
        out[path.relative_to(tree).as_posix()] = (False, _lock_pins(path))
    for path in _files(tree, OPAQUE_FILES):
        with contextlib.suppress(OSError):
            out[path.relative_to(tree).as_posix()] = (True, path.read_text().splitlines())
    return out


def changes(base: Path, head: Path) -> list[SpecChange]:
    """The spec files that differ between two checkouts."""
    a, b = specs(base), specs(head)
    out = []
    for file in sorted(set(a) | set(b)):
        (opaque, lines), (_, theirs) = a.get(file, (False, [])), b.get(file, (False, []))
        if lines == theirs:
            continue
        if opaque:
            out.append(SpecChange(file, opaque=True))
            continue
        base_only = tuple(r for r in lines if r not in theirs)
        head_only = tuple(r for r in theirs if r not in lines)
        if base_only or head_only:
            out.append(SpecChange(file, base_only, head_only))
    return out


def wanted(
    change: Sequence[SpecChange], own: frozenset[str] = frozenset()
) -> tuple[list[str], list[str]]:
    """What the base's differing specs pin that this environment has at another version
    (pip's requirement strings), and the lines no installer can be given (said, not
    installed). Only what HEAD's environment holds is replaced: a package it lacks (an
    extra, a docs group) would give the base something the head does not have, and a name
    an index may serve that nobody installed here is how dependency confusion happens. The
    project's own names (``own``) and the harness both sides share are never installed."""
    from packaging.requirements import InvalidRequirement, Requirement  # noqa: PLC0415
    from packaging.utils import canonicalize_name  # noqa: PLC0415

    skip = {canonicalize_name(n) for n in (*HARNESS, *own)}
    install: list[str] = []
    unread: list[str] = []
    for c in change:
        for line in c.base_only:
            text = (
                line.split(": ", 1)[1]
                if ": " in line and c.file.endswith(("toml", "cfg"))
                else line
            )
            if text.startswith(("-e", ".", "-r", "-c", "--")):
                continue  # the project itself, another file (compared on its own), options
            try:
                req = Requirement(text)
            except InvalidRequirement:
                unread.append(text)
                continue
            if canonicalize_name(req.name) in skip:
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            try:
                version = importlib.metadata.version(req.name)
            except importlib.metadata.PackageNotFoundError:
                continue  # not in HEAD's environment: nothing of HEAD's to replace
            if req.url is None and req.specifier.contains(version, prereleases=True):
                continue
            if text not in install:
                install.append(text)
    return install, unread


def compiled(folders: Sequence[str | Path], head: Path) -> bool:
    """Whether the project has compiled extension modules: a build file that says so, or an
    extension module in the folders given (its installed copies, its packages' folders in
    the head's tree, where an in-place build leaves them)."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    for folder in folders:
        for _, _, files in os.walk(folder):
            if any(f.endswith(suffixes) for f in files):
                return True
    if any((head / m).is_file() for m in BUILD_MARKERS):
        return True
    for name in ("setup.py", "pyproject.toml"):
        with contextlib.suppress(OSError):
            text = (head / name).read_text()
            if "ext_modules" in text or "Extension(" in text or "scikit-build" in text:
                return True
    return False


# --- building -----------------------------------------------------------------------------


def site_dirs() -> list[str]:
    """This environment's site folders, which the base's environment sees after its own
    (their ``.pth`` files processed as here)."""
    paths = sysconfig.get_paths()
    found = [paths["purelib"], paths["platlib"]]
    with contextlib.suppress(AttributeError):  # an old virtualenv's site module
        found += site.getsitepackages()
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(found) if Path(d).is_dir()]


def _installer(python: Path) -> list[str]:
    """uv where it is on the path (fast, cached), else this environment's pip."""
    uv = shutil.which("uv")
    if uv:
        return [uv, "pip", "install", "--python", str(python)]
    return [str(python), "-m", "pip", "install", "--disable-pip-version-check"]


def _key(install: Sequence[str], sha: str | None) -> str:
    """The name of the environment's folder: what it would hold. A hash (SHA-256, its first
    20 hex digits) of this Python's path and version, every distribution installed here
    (name and version: a build against an older torch or numpy is not reused), the base's
    requirements that differ, and, for a compiled project, the base commit. Inputs anyone
    can predict: a folder is trusted by :func:`_trusted`, never by its name."""
    held = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())
    what = {
        "python": sys.executable,
        "version": sys.version,
        "environment": hashlib.sha256("\n".join(held).encode()).hexdigest(),
        "install": sorted(install),
        "project": sha,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:20]


def build(
    install: Sequence[str], base_tree: Path | None, sha: str | None, scratch: Path | None = None
) -> tuple[Path, Path, bool]:
    """The base's environment with ``install`` (requirements) and, where ``base_tree`` is
    given, the base project built from it; cached, and reused only as :func:`_trusted`
    says (a damaged or altered one is built again). Where the cache folder is one another
    user could write, built in ``scratch`` (the run's own folder) instead. Its Python, its
    purelib folder, and whether an earlier run's was reused. Raises OSError or
    subprocess.CalledProcessError (with the installer's output)."""
    envs = cache_dir() / "envs"
    key = _key(install, sha if base_tree is not None else None)
    envs.mkdir(parents=True, exist_ok=True, mode=0o700)
    if (_open_to_others(envs) or _open_to_others(envs.parent, sticky=True)) and scratch:
        envs = scratch / "envs"  # never a folder another user could swap or plant in
        envs.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder = envs / key
    python = folder / "bin" / "python"
    why = _trusted(folder)
    if why is None:
        return python, _purelib(folder), True
    if folder.exists() or folder.is_symlink():
        _discard(folder)
    _prune(envs)
    work = Path(tempfile.mkdtemp(prefix=f"{folder.name}-building-", dir=envs))
    try:
        _run([sys.executable, "-m", "venv", "--without-pip", str(work)])
        # This environment after the base's own: what the base needs differently shadows it.
        lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in site_dirs())
        (_purelib(work) / "_infperf_head_env.pth").write_text(lines)
        tool = _installer(work / "bin" / "python")
        if install:
            _run([*tool, "--no-deps", *install])
        if base_tree is not None:
            project = [*tool, "--no-deps", str(base_tree)]
            try:  # offline-friendly first: the build backend HEAD's environment has
                _run([*project[:-1], "--no-build-isolation", str(base_tree)])
            except subprocess.CalledProcessError:
                _run(project)  # the backend the project's own spec names
        _seal(work, [*install, sha or ""])
        try:
            work.rename(folder)
        except OSError:
            if _trusted(folder) is not None:
                raise
            _remove(work)  # another run built it first
    except BaseException:
        _remove(work)
        raise
    return python, _purelib(folder), False


#: The file beside a built environment's folders: what it was built from, and the hash of
#: every file it holds (SHA-256; a link: where it points), written last.
MANIFEST = "infperf-complete"
#: Python writes these where it imports from; they are not what was built.
_BYTECODE = "__pycache__"


def _contents(folder: Path) -> tuple[dict[str, str], str | None]:
    """Every file and link under ``folder`` and its hash (bytecode folders left out), or
    why the folder cannot be trusted: an entry another user owns, or one writable by
    anyone but its owner."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    out: dict[str, str] = {}
    for here, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != _BYTECODE]
        for name in [*dirs, *files]:
            path = Path(here, name)
            st = path.lstat()
            if uid is not None and st.st_uid != uid:
                return out, f"{path} belongs to another user"
            link = stat.S_ISLNK(st.st_mode)
            if not link and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return out, f"{path} is writable by other users"
            rel = path.relative_to(folder).as_posix()
            if link:
                out[rel] = f"link:{path.readlink()}"
            elif stat.S_ISREG(st.st_mode) and rel != MANIFEST:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out, None


def _seal(work: Path, built: Sequence[str]) -> None:
    """A built environment made read-only (its folders to their owner too: nothing the base
    side runs adds to it, bytecode included) and its manifest written, last: its presence
    says the build completed."""
    _writable(work, False).chmod(0o700)
    held, why = _contents(work)
    if why is not None:
        raise OSError(f"the base's environment cannot be sealed: {why}")
    manifest = {"built": list(built), "files": held}
    (work / MANIFEST).write_text(json.dumps(manifest, sort_keys=True))
    (work / MANIFEST).chmod(0o400)
    work.chmod(0o500)


def _writable(folder: Path, writable: bool = True) -> Path:
    """Nothing under ``folder`` (itself included) writable by other users, and its folders
    writable by their owner or by no one (no file can be added, removed or renamed; a
    file's own mode is left to its owner: an installer links files from its cache, which
    they share); links left as they are."""
    paths = [folder]
    for here, dirs, files in os.walk(folder):
        paths += [Path(here, name) for name in (*dirs, *files)]
    for path in paths:
        with contextlib.suppress(OSError):
            if not path.is_symlink():
                mode = path.stat().st_mode & ~(stat.S_IWGRP | stat.S_IWOTH)
                if path.is_dir():
                    mode = mode | stat.S_IWUSR if writable else mode & ~stat.S_IWUSR
                path.chmod(mode)
    return folder


def _remove(folder: Path) -> None:
    """A sealed (read-only) environment or a build's leftover, removed."""
    if folder.is_symlink():
        folder.unlink()
        return
    if folder.exists():
        shutil.rmtree(_writable(folder), ignore_errors=True)


def _trusted(folder: Path) -> str | None:
    """Why a cached environment cannot be reused (None: it can): not a folder this user
    owns, closed to other users, whose files are exactly those its manifest lists with
    the hashes it lists (a planted interpreter, a file removed or added, a build killed
    before its manifest was written)."""
    try:
        st = folder.lstat()
    except OSError:
        return "not built"
    if not stat.S_ISDIR(st.st_mode):
        return f"{folder} is not a folder"
    if _open_to_others(folder):
        return f"{folder} is open to other users"
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        listed = dict(manifest["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return "no manifest (damaged, or built by an older version)"
    try:
        found, why = _contents(folder)
    except OSError as exc:
        return str(exc)
    if why is not None:
        return why
    if found != listed:
        changed = sorted(set(found) ^ set(listed) | {k for k in found if found[k] != listed.get(k)})
        return f"its files are not what was built ({', '.join(changed[:3])})"
    return None


def _open_to_others(folder: Path, sticky: bool = False) -> bool:
    """Whether another user owns ``folder`` or could write in it (add, remove or swap its
    entries); ``sticky``: a folder only root may own, such as /tmp, whose sticky bit
    keeps others from moving what they do not own, is not."""
    try:
        st = folder.lstat()
    except OSError:
        return True
    uid = os.getuid() if hasattr(os, "getuid") else st.st_uid
    if sticky and st.st_uid in (uid, 0) and st.st_mode & stat.S_ISVTX:
        return False
    return st.st_uid != uid or bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _discard(folder: Path) -> None:
    """A cached environment that cannot be trusted, out of the way at once (renamed, so
    that no run finds it again), then removed."""
    aside = folder.with_name(f"{folder.name}-discarded-{os.getpid()}-{time.monotonic_ns()}")
    try:
        folder.rename(aside)
    except OSError:
        aside = folder
    _remove(aside)


def _prune(envs: Path) -> None:
    """Remove the leftovers of builds a killed run left behind."""
    with contextlib.suppress(OSError):
        for leftover in [*envs.glob("*-building-*"), *envs.glob("*-discarded-*")]:
            with contextlib.suppress(OSError):
                if time.time() - leftover.lstat().st_mtime > STALE_BUILD_S:
                    _remove(leftover)


def _purelib(folder: Path) -> Path:
    return Path(sysconfig.get_paths(vars={"base": str(folder), "platbase": str(folder)})["purelib"])


def _run(cmd: list[str]) -> None:
    """An installer's command, in a process group of its own: past the time limit, it and
    the build it started are ended together. Raises CalledProcessError with its last
    lines."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=BUILD_TIMEOUT_S)
    except BaseException:  # the time limit, Ctrl-C: nothing it started runs on
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    if proc.returncode != 0:
        tail = (out or "").strip().splitlines()[-2:]
        raise subprocess.CalledProcessError(proc.returncode, cmd, " ".join(tail))


def prepare(
    base_tree: Path,
    head_tree: Path,
    sha: str,
    folders: Sequence[str | Path],
    scratch: Path | None = None,
) -> BaseEnv:
    """The environment the base worker runs in, built where the base needs one
    (``folders``: where the project's modules lie, looked through for compiled ones;
    ``scratch``: the run's own folder, where it is built when the cache folder is open to
    other users)."""
    found = tuple(changes(base_tree, head_tree))
    is_compiled = compiled(folders, head_tree)
    own = frozenset(
        n for n in (imports.project_name(head_tree), imports.project_name(base_tree)) if n
    )
    install, unread = wanted(found, own)
    if unread:
        why = f"no installer here reads {', '.join(unread)}"
        return BaseEnv(sys.executable, None, found, is_compiled, failed=why)
    if not install and not is_compiled:
        return BaseEnv(sys.executable, changes=found)
    started = time.monotonic()
    try:
        python, site_dir, reused = build(install, base_tree if is_compiled else None, sha, scratch)
    except subprocess.CalledProcessError as exc:
        tool = "uv" if Path(str(exc.cmd[0])).name == "uv" else "pip"
        why = f"{tool} failed: {exc.output or f'exit code {exc.returncode}'}"
        versions = sides(install, None)
        return BaseEnv(sys.executable, None, found, is_compiled, failed=why, versions=versions)
    except (OSError, subprocess.TimeoutExpired) as exc:
        versions = sides(install, None)
        return BaseEnv(sys.executable, None, found, is_compiled, failed=str(exc), versions=versions)
    seconds = 0.0 if reused else time.monotonic() - started
    done = tuple(install) + (("its own build of the project",) if is_compiled else ())
    built = str(site_dir) if is_compiled else None
    versions = sides(install, site_dir)
    return BaseEnv(
        str(python),
        built,
        found,
        is_compiled,
        done,
        seconds=seconds,
        versions=versions,
        site=str(site_dir),
    )


def sides(
    install: Sequence[str], site_dir: Path | None
) -> tuple[tuple[str, str | None, str | None, str], ...]:
    """Each requirement installed for the base (name, HEAD's version, the base's, what
    the base's spec asked for): the base's read from its environment's site folder
    (``site_dir``; None: it could not be built, so the base imported HEAD's)."""
    from packaging.requirements import InvalidRequirement, Requirement  # noqa: PLC0415

    out = []
    for text in install:
        try:
            name = Requirement(text).name
        except InvalidRequirement:
            continue
        head = _version(name, None)
        base = head if site_dir is None else _version(name, site_dir)
        out.append((name, head, base, text if site_dir is None else ""))
    return tuple(out)


def _version(name: str, site_dir: Path | None) -> str | None:
    """The version of ``name`` installed here (``site_dir``: in that folder only)."""
    if site_dir is None:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(name)
        return None
    found = importlib.metadata.distributions(name=name, path=[str(site_dir)])
    return next((d.version for d in found), None)
