"""The proof of which code a side ran: what is wrong with where each of the project's
modules a process imported came from (:class:`~.imports.Origins`, read in every worker at
every call, in the processes its tests start and in the head process) for its side
(:func:`problems`: the base's from HEAD's checkout or a copy of the project installed; the
head's from a copy that is not the working tree's content), the refusal that says so
(:func:`explain`), and the JSON's record of it (:func:`summary`). What each side imports is
:mod:`~pytest_infperf.ab.imports`'s."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .imports import ImportMap, Origins, discover, in_env, inside, shadowed, top_names

__all__ = ["Head", "Origins", "Problem", "explain", "problems", "summary"]


@dataclasses.dataclass(frozen=True)
class Problem:
    """A module a side should not have imported from where it did."""

    module: str
    path: str
    #: Where it came from, for people ("HEAD's checkout").
    where: str
    #: Where it should have come from (None: not known).
    expected: str | None = None


def problems(
    side: str, found: Mapping[str, str], imports: ImportMap, tree: str, other: str | None = None
) -> list[Problem]:
    """What is wrong with where a side's modules came from (empty: nothing).

    ``side`` "base": a checkout of the base commit at ``tree``; its project modules must all
    come from it, none from the head's checkout (``imports.toplevel``) or a copy installed
    from it. ``side`` "head": the working tree (``tree`` is the toplevel); none may come from
    the base's checkout (``other``), and a copy installed from the repository must be the
    working tree's content, or the head did not run HEAD's code either."""
    top = imports.toplevel
    out: list[Problem] = []
    env = imports.env_dirs()
    for module, path in sorted(found.items()):
        if not path:
            continue
        copy = _copy_of(path, imports)
        if copy is None and in_env(path, env):
            continue  # third-party code in an environment inside the repository
        if side == "base" and imports.built and inside(path, imports.built) is not None:
            continue  # the base's own build, in the environment built for it
        if side == "base":
            rel = inside(path, top)
            if rel is not None and inside(path, tree) is None:
                out.append(Problem(module, path, "HEAD's checkout", str(Path(tree, rel))))
            elif copy is not None:
                home = _counterpart(path, copy, imports)
                expected = None if home is None else str(Path(tree) / home)
                out.append(Problem(module, path, f"the installed copy ({copy[2]})", expected))
            elif imports.claimed(module) and inside(path, tree) is None:
                out.append(Problem(module, path, "outside the base's checkout"))
        elif other is not None and inside(path, other) is not None:
            out.append(Problem(module, path, "the base's checkout"))
        elif copy is not None and path.endswith(".py"):
            home = _counterpart(path, copy, imports)
            mine = None if home is None else Path(top) / home
            if mine is not None and not mine.exists() and not mine.is_symlink():
                continue  # a file its build made (a version file): no source to hold it to
            if mine is None or not _same_file(Path(path), mine):
                where = f"the installed copy ({copy[2]}), which is not the working tree's content"
                out.append(Problem(module, path, where, None if mine is None else str(mine)))
    return out


def _copy_of(path: str, imports: ImportMap) -> tuple[str, str, str] | None:
    """The installed copy (name, where, distribution) a file belongs to, if any."""
    return next((c for c in imports.installed if inside(path, c[1]) is not None), None)


def _counterpart(path: str, copy: tuple[str, str, str], imports: ImportMap) -> str | None:
    """Where an installed copy's file lies in a checkout (relative; None: not known)."""
    name, place, _ = copy
    folder, rel = imports.names.get(name), inside(path, place)
    if folder is None or rel is None:
        return None
    last = name.rpartition(".")[2]
    own = Path(folder, last, rel) if rel else Path(folder, Path(place).name)
    return own.as_posix()


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.read_bytes() == b.read_bytes()
    except OSError:
        return False


class Head:
    """The head process's own proof, asked at every measurement of every mode that
    measures (a save first): its project modules are the working tree's, not a stale or
    foreign installed copy's. What it imports of the repository is found once such a copy
    is imported at all (:func:`~.imports.shadowed`)."""

    def __init__(self, toplevel: Path) -> None:
        self.toplevel = toplevel.resolve()
        self._names = top_names(self.toplevel)
        self._imports: ImportMap | None = None
        self._origins: Origins | None = None

    def refusal(self, doing: str) -> str | None:
        """Why this process must not measure (``doing``: what it would, "measure" or
        "compare"), or None."""
        if self._imports is None:
            if not shadowed(self.toplevel, self._names):
                return None
            self._imports = discover(self.toplevel)
            self._origins = Origins(self._imports, self.toplevel)
        assert self._origins is not None
        top = str(self.toplevel)
        bad = problems("head", self._origins.read(), self._imports, top)
        return explain("head", "this process", bad, doing) if bad else None


def explain(side: str, title: str, found: Sequence[Problem], doing: str = "compare") -> str:
    """The error for a side whose modules came from the wrong place (``doing``: what it
    was refused, "compare" or "measure")."""
    shown = []
    for p in found[:3]:
        expected = f"; its own is {p.expected}" if p.expected else ""
        shown.append(f"{p.module} from {p.path} ({p.where}{expected})")
    more = f", and {len(found) - 3} more" if len(found) > 3 else ""
    listed = "; ".join(shown) + more
    if side == "base":
        return (
            f"refused to compare: the base side ({title}) imported the project's code from "
            f"somewhere other than its own checkout: {listed}. It would have measured HEAD's "
            "code on both sides. Something imported the project before the worker could hold "
            "it to its checkout (a .pth file or sitecustomize that imports it, "
            "PYTHONSTARTUP), or it lies where pytest-infperf did not look: set ini "
            "infperf_ab_pythonpath to the folders that hold the project's packages, and "
            "report the layout to pytest-infperf"
        )
    return (
        f"refused to {doing}: the head side ({title}) imported the project's code from "
        f"somewhere other than the working tree: {listed}. It would not have measured HEAD's "
        "code: reinstall the project (pip install .), or install it editable "
        "(pip install -e .), then run again"
    )


def summary(
    processes: Iterable[Mapping[str, str]], imports: ImportMap, trees: Mapping[str, str]
) -> dict[str, list[str]]:
    """A side's origins for the JSON, over its processes: the modules grouped by where they
    came from (``trees``: a label for each checkout; "checkout:src" says which folder)."""
    out: dict[str, list[str]] = {}
    for module, path in sorted({(m, p) for found in processes for m, p in found.items()}):
        key = f"elsewhere:{Path(path).parent}" if path else "no file"
        copy = _copy_of(path, imports) if path else None
        if copy is not None:
            key = f"installed:{copy[2]}"
        for label, tree in trees.items():
            rel = inside(path, tree) if path else None
            if rel is not None:
                key = f"{label}:{_root_of(module, rel)}"
                break
        if module not in out.setdefault(key, []):
            out[key].append(module)
    return out


def _root_of(module: str, rel: str) -> str:
    """The import root of a module's file (relative): its folder, less the package parts."""
    parts = Path(rel).parts[:-1]
    depth = module.count(".") + (1 if Path(rel).name.startswith("__init__.") else 0)
    root = parts[: max(len(parts) - depth, 0)]
    return "/".join(root) or "."
