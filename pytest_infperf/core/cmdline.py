"""The options of a pytest command line that an interleaving worker must be given too.

A worker process (``--perf-ab``, settling, process pairs) runs the same tests in its own
pytest session. Given only the session's paths and ``-k``/``-m``, it ran a project's
tests with that project's option defaults: ``pytest examples --threads 0 --perf-ab=main``
timed the head at ONNX Runtime's default threading against a base at one thread, and the
verdict was "incomparable" (``--sweep=full`` would have had the workers collect other
tests altogether). So a worker gets, from this session's command line and
``PYTEST_ADDOPTS`` (never the ini's ``addopts``: each checkout has its own ini):

- the project's own options: those registered while the initial conftest files loaded
  (the plugin's ``pytest_load_initial_conftests`` tells them apart), and the benchmark
  options' ``--perf-*`` flags (``--perf-rounds``, ``--perf-threshold``...);
- the pytest options that change what runs: ``-p``, ``-o``, ``-W``, ``-s``/``--capture``,
  ``--import-mode``, ``--noconftest``.

Nothing else: not the options of plugins loaded before the conftest files (``-p NAME``
is passed, so the plugin loads, with its defaults), not the paths, ``-k``/``-m`` (the
worker gets its own), reports (a worker writing ``--junitxml`` would overwrite the
session's), ``--basetemp`` (a worker would empty the session's), xdist or the cache
plugin's options (disabled in workers), or the session's ``--perf-ab``/``--perf-compare``.
The pytest options go on the worker's command line; the project's options and the
benchmark flags are handed over apart and added by the worker only where its own checkout
defines them (a branch that adds an option to its conftest: the base worker runs without
it, and says so), since pytest stops at an option it does not know.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: pytest's own options a worker is given (they shape what is imported, run or warned).
PYTEST_FORWARDED = frozenset(
    {"plugins", "override_ini", "pythonwarnings", "capture", "importmode", "noconftest"}
)
#: An option taking any number of values (argparse's "*", "+" and "...").
MANY = -1


@dataclasses.dataclass(frozen=True)
class Forwarded:
    """What a worker gets of this session's command line: ``early`` goes on its command
    line; each of ``project`` (one option and its values) is added where the worker's
    checkout defines that option."""

    early: tuple[str, ...] = ()
    project: tuple[tuple[str, ...], ...] = ()


def arity(parser: Any) -> dict[str, tuple[str, int]]:
    """Each option string pytest's parser knows: its ``dest`` and how many values it takes
    (0, 1, ... or :data:`MANY`). pytest has no public view of its options' arity: its
    argparse parser is ``Parser.optparser`` since pytest 9 and ``Parser._getparser()``
    before (pytest >= 8.4 is supported)."""
    optparser = getattr(parser, "optparser", None)
    if optparser is None:
        optparser = parser._getparser()
    out: dict[str, tuple[str, int]] = {}
    for flag, action in optparser._option_string_actions.items():
        nargs = action.nargs
        if isinstance(nargs, int):
            count = nargs
        elif nargs is None:
            count = 1
        elif nargs == "?":
            count = 1 if action.const is None else 0
        else:
            count = MANY
        out[flag] = (str(action.dest), count)
    return out


def split(tokens: Sequence[str], known: Mapping[str, tuple[str, int]]) -> list[tuple[str, ...]]:
    """The options of a command line, each with its values, normalised to one token where
    it takes one value (``--name=value``, ``-pNAME``), so that a worker can drop it whole.
    Paths and other positional arguments are left out; an option ``known`` does not hold
    is kept alone (its value, if it had one, then reads as a path and is left out)."""
    out: list[tuple[str, ...]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token == "--":
            break  # the rest are paths
        if not token.startswith("-") or token == "-":
            continue
        if token.startswith("--"):
            flag, eq, _ = token.partition("=")
            count = known.get(flag, ("", 0))[1]
            if eq or count == 0:
                out.append((token,))
            else:
                found, i = _with_values(tokens, i, flag, count, "=")
                out += found
            continue
        # Short options: "-sv" (flags together), "-pNAME" or "-p NAME" (a value).
        j = 1
        while j < len(token):
            flag = "-" + token[j]
            count = known.get(flag, ("", 0))[1]
            if count == 0:
                out.append((flag,))
                j += 1
                continue
            rest = token[j + 1 :]
            if rest:
                out.append((flag + rest.removeprefix("="),))
            else:
                found, i = _with_values(tokens, i, flag, count, "")
                out += found
            break
    return out


def _with_values(
    tokens: Sequence[str], i: int, flag: str, count: int, join: str
) -> tuple[list[tuple[str, ...]], int]:
    """An option whose values follow it from ``tokens[i]`` on, and where the next token
    is: one value joined to its flag (``join``: "=" after a long one, "" after a short
    one), several as they are. None when its one value is missing."""
    if count == 1:
        return ([(flag + join + tokens[i],)] if i < len(tokens) else []), i + 1
    taken = _values(tokens, i, count)
    return [(flag, *taken)], i + len(taken)


def _values(tokens: Sequence[str], start: int, count: int) -> list[str]:
    """The values of an option taking ``count`` (or, for MANY, all up to the next option)."""
    if count != MANY:
        return list(tokens[start : start + count])
    taken: list[str] = []
    for token in tokens[start:]:
        if token.startswith("-") and token != "-":
            break
        taken.append(token)
    return taken


def flag_of(option: Sequence[str]) -> str:
    """The option string of one of :func:`split`'s options."""
    head = option[0]
    if head.startswith("--"):
        return head.partition("=")[0]
    return head[:2]


def forwarded(
    tokens: Sequence[str],
    known: Mapping[str, tuple[str, int]],
    project: Iterable[str],
    bench_flags: Iterable[str],
) -> Forwarded:
    """What a worker gets of ``tokens`` (``PYTEST_ADDOPTS`` then the command line):
    ``project`` and ``bench_flags`` are option strings, the rest is :data:`PYTEST_FORWARDED`."""
    mine = set(project) | set(bench_flags)
    early: list[str] = []
    late: list[tuple[str, ...]] = []
    for option in split(tokens, known):
        flag = flag_of(option)
        if flag in mine:
            late.append(option)
        elif flag in known and known[flag][0] in PYTEST_FORWARDED:
            early.extend(option)
    return Forwarded(tuple(early), tuple(late))
