"""Where ``infperf init`` writes its settings: the file pytest reads its options from, found
by pytest's own rules, and the edit of that file, checked with the parsers pytest uses
(``tomllib``, or ``tomli`` before Python 3.11; ``iniconfig``). An edit that does not read
back as the file's configuration plus the new keys is refused with the reason: a
repository's configuration is never left in a state pytest rejects or reads differently.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, cast


class InitError(Exception):
    """Nothing written: exit 2 with the message."""


#: pytest's configuration files, in its order of precedence within one folder
#: (``_pytest/config/findpaths.py``), each with the table or section that holds its
#: options and whether pytest takes the file even without it. The TOML files' native
#: tables (``pytest.toml``, ``[tool.pytest]``) are pytest 9's: an older pytest ignores them.
FILES: tuple[tuple[str, str, bool], ...] = (
    ("pytest.toml", "pytest", True),
    (".pytest.toml", "pytest", True),
    ("pytest.ini", "pytest", True),
    (".pytest.ini", "pytest", True),
    ("pyproject.toml", "tool.pytest.ini_options", False),
    ("tox.ini", "pytest", False),
    ("setup.cfg", "tool:pytest", False),
)

#: One setting: its key, its value (a list for a list of paths) and why a team changes it.
Setting = tuple[str, "str | list[str]", str]


@dataclasses.dataclass
class Target:
    """The configuration file pytest reads, and the section its options are in."""

    path: Path
    text: str
    section: str
    #: The options it sets already (empty when the section is still to be added).
    options: dict[str, Any]
    #: Whether the section is there (else it is added at the end of the file).
    exists: bool

    @property
    def toml(self) -> bool:
        return self.path.suffix == ".toml"


def read(path: Path) -> str:
    """A file's text with its line endings as they are: an edit keeps them."""
    with open(path, encoding="utf-8", newline="") as file:
        return file.read()


def newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def read_toml(path: Path, text: str) -> dict[str, Any]:
    # pytest's own TOML parser: the standard library's from 3.11, tomli (its dependency) before.
    module = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    try:
        return cast(dict[str, Any], module.loads(text))
    except ValueError as exc:  # TOMLDecodeError
        raise InitError(
            f"{path.name} does not parse as TOML ({exc}), so pytest cannot read it either: "
            "fix it and run infperf init again. Nothing was written"
        ) from None


def _ini(path: Path, text: str) -> dict[str, dict[str, str]]:
    import iniconfig  # pytest's own ini parser, one of its dependencies

    try:
        parsed = iniconfig.IniConfig(str(path), data=text)
    except iniconfig.ParseError as exc:
        raise InitError(
            f"{path.name} does not parse as pytest reads it ({exc}): fix it and run infperf "
            "init again. Nothing was written"
        ) from None
    return {name: dict(values) for name, values in parsed.sections.items()}


def _table(doc: dict[str, Any], dotted: str) -> dict[str, Any] | None:
    node: Any = doc
    for key in dotted.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def _native_toml() -> bool:
    from importlib.metadata import version

    return int(version("pytest").split(".")[0]) >= 9


def _options(path: Path, text: str) -> tuple[str, dict[str, Any]] | None:
    """The section of ``path`` that holds pytest's options and what it sets there (None:
    pytest takes no options from this file)."""
    if path.suffix == ".toml":
        doc = read_toml(path, text)
        if path.name != "pyproject.toml":
            table = _table(doc, "pytest")
            return None if table is None else ("pytest", table)
        # [tool.pytest] holds options in native TOML types (pytest 9); [tool.pytest.ini_options]
        # as an ini file's strings.
        native = {k: v for k, v in (_table(doc, "tool.pytest") or {}).items() if k != "ini_options"}
        if native and _native_toml():
            return "tool.pytest", native
        table = _table(doc, "tool.pytest.ini_options")
        return None if table is None else ("tool.pytest.ini_options", table)
    sections = _ini(path, text)
    section = "tool:pytest" if path.name == "setup.cfg" else "pytest"
    return (section, sections[section]) if section in sections else None


def locate(root: Path, tests: Path) -> Target:
    """The file pytest takes its options from for ``pytest TESTS`` run at the root, by its
    own search: from the tests' folder up to the repository's root, each folder's files in
    its order; a ``pytest.ini`` (or ``pytest.toml``) is taken even with no pytest section,
    else the nearest ``pyproject.toml`` even with no pytest table; else a new one."""
    start = root / tests
    nearest: Target | None = None
    native = _native_toml()
    for base in (start, *start.parents):
        for name, section, always in FILES:
            if name.endswith("pytest.toml") and not native:
                continue
            path = base / name
            if not path.is_file():
                continue
            text = read(path)
            found = _options(path, text)
            if found is not None:
                return Target(path, text, found[0], found[1], exists=True)
            if always:
                return Target(path, text, section, {}, exists=False)
            if name == "pyproject.toml" and nearest is None:
                nearest = Target(path, text, section, {}, exists=False)
        if base == root:
            break
    return nearest or Target(root / "pyproject.toml", "", "tool.pytest.ini_options", {}, False)


def _lines(toml: bool, settings: list[Setting]) -> str:
    # A comment on its own line: an ini file's value would keep an inline one.
    out = ["# pytest-infperf (written by infperf init; every option: its docs/USAGE.md)\n"]
    for key, value, why in settings:
        text = json.dumps(value) if toml else value if isinstance(value, str) else " ".join(value)
        out.append(f"# {why}\n{key} = {text}\n")
    return "".join(out)


def _header(target: Target) -> re.Pattern[str]:
    """The section's header line, a comment after it allowed (TOML keys may be quoted)."""
    if not target.toml:  # an indented line continues a value: never a header
        return re.compile(rf"^\[{re.escape(target.section)}\][ \t]*([#;].*)?\r?$", re.M)
    parts = [
        rf"""(?:{re.escape(p)}|"{re.escape(p)}"|'{re.escape(p)}')"""
        for p in target.section.split(".")
    ]
    name = r"[ \t]*\.[ \t]*".join(parts)
    return re.compile(rf"^[ \t]*\[[ \t]*{name}[ \t]*\][ \t]*(#[^\r\n]*)?\r?$", re.M)


def _parsed(target: Target, text: str) -> dict[str, Any]:
    return read_toml(target.path, text) if target.toml else dict(_ini(target.path, text))


def _reads_back(target: Target, new: str, settings: list[Setting]) -> bool:
    """Whether pytest's parser reads ``new`` as the old configuration plus the settings."""
    expected = copy.deepcopy(_parsed(target, target.text))
    node = expected
    for key in target.section.split(".") if target.toml else [target.section]:
        node = node.setdefault(key, {})
    for key, value, _ in settings:
        node[key] = value if target.toml or isinstance(value, str) else " ".join(value)
    return bool(_parsed(target, new) == expected)


def edit(target: Target, settings: list[Setting]) -> tuple[str, str]:
    """The configuration file's new text with ``settings`` in its pytest section, and what
    was done; :class:`InitError` when it sets one of those keys already, or when the edit
    would not read back as intended. Other ``infperf_*`` keys stay as they are (the noise
    advice's ``infperf_intra_op_threads = 1``, followed before init ran, is kept)."""
    name = target.path.name
    writes = {key for key, _, _ in settings}
    already = sorted(key for key in target.options if key in writes)
    if already:
        raise InitError(
            f"{name} already sets {', '.join(already)}: pytest-infperf is configured here "
            "already; nothing was written (remove them to start again)"
        )
    text = target.text
    lines = _lines(target.toml, settings).replace("\n", newline(text))
    header = f"[{target.section}]"
    if target.exists:
        found = list(_header(target).finditer(text))
        new = None
        if len(found) == 1:
            at = found[0].end()
            at = text.index("\n", at) + 1 if "\n" in text[at:] else len(text)
            new = (
                text[:at] + ("" if text[:at].endswith("\n") else newline(text)) + lines + text[at:]
            )
        what = f"infperf_* settings under {header}"
    else:
        nl = newline(text)
        sep = "" if not text else (nl if text.endswith("\n") else nl * 2)
        new = f"{text}{sep}{header}{nl}{lines}"
        what = f"infperf_* settings under a new {header}"
    if new is None or not _reads_back(target, new, settings):
        raise InitError(
            f"{name} keeps pytest's options under {header} in a form infperf init does not "
            f"edit (dotted keys, an inline table or a header it cannot place): add these "
            f"lines to it yourself and run infperf init again. Nothing was written\n{lines}"
        )
    return new, what


def relative(target: Target, root: Path, folders: list[str]) -> list[str]:
    """``folders`` of the repository as pytest reads them from ``target``: relative to the
    rootdir, which is the configuration file's folder."""
    base = target.path.parent
    return [Path(os.path.relpath(root / f, base)).as_posix() for f in folders]
