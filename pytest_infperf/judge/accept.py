"""Accepting a known regression in the change itself: ``Perf-Accept:`` commit trailers.

A commit of the change (reachable from HEAD, not from the commit compared against) may
carry one or more trailers::

    Perf-Accept: tests/perf/test_bert.py::test_latency[*] tokenizer moved into the model

The first word is a test node id or an fnmatch pattern of node ids, the rest of the line is
the reason. A benchmark that would have been a ``regression`` and matches becomes
``accepted``: its test passes and the reports show it apart, with the ratio it was accepted
at. Nothing else is waived (budgets, strict environments), and the acceptance expires on
its own: the next baseline saved on main is the new reference. ``--perf-accept=PATTERN``
does the same for a manual run.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..store import git as gitinfo

TRAILER = "Perf-Accept"
#: Separators in ``git log``'s output: records, fields, trailer values.
_RECORD, _FIELD, _VALUE = "\x1d", "\x1f", "\x1e"


@dataclasses.dataclass(frozen=True)
class AcceptRule:
    pattern: str
    reason: str
    #: The commit whose trailer says so; None for ``--perf-accept``.
    commit: str | None = None

    def matches(self, key: str) -> bool:
        """A benchmark key (``nodeid`` or ``nodeid#name``) against the pattern: the node id
        alone matches all of its measurements."""
        nodeid = key.split("#", 1)[0]
        # Brackets are a parametrized id's ("test_x[*]", "test_x[3]"), never fnmatch's
        # character class: the pattern the docs show must match the tests it names.
        literal = "".join({"[": "[[]", "]": "[]]"}.get(c, c) for c in self.pattern)
        return self.pattern in (key, nodeid) or any(
            fnmatch.fnmatchcase(k, literal) for k in (key, nodeid)
        )

    def where(self) -> str:
        if self.commit is None:
            return "--perf-accept"
        return f"a {TRAILER} trailer in commit {self.commit[:10]}"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def parse(
    value: str, commit: str | None = None, default_reason: str = "(no reason given)"
) -> AcceptRule | None:
    """``<pattern> <reason...>`` -> a rule; None for an empty value."""
    parts = value.strip().split(None, 1)
    if not parts:
        return None
    reason = parts[1].strip() if len(parts) > 1 else ""
    return AcceptRule(parts[0], reason or default_reason, commit)


def from_flags(patterns: Iterable[str]) -> list[AcceptRule]:
    rules = (parse(p, None, "accepted on the command line") for p in patterns)
    return [rule for rule in rules if rule is not None]


def from_trailers(root: Path, since: str, head: str = "HEAD") -> list[AcceptRule]:
    """The ``Perf-Accept:`` trailers of the commits in ``since..head``, oldest first (git's
    own trailer parser decides what a trailer is)."""
    repo = gitinfo.open_repo(root)
    fmt = f"%H{_FIELD}%(trailers:key={TRAILER},valueonly,separator={_VALUE}){_RECORD}"
    try:
        out = str(repo.git.log("--reverse", f"--format={fmt}", f"{since}..{head}"))
    except Exception as exc:  # git's own error, e.g. since is not in this clone
        raise gitinfo.GitError(
            f"cannot read {TRAILER} trailers since {since[:10]}: {exc}"
        ) from None
    rules = []
    for record in out.split(_RECORD):
        sha, _, values = record.strip().partition(_FIELD)
        for value in values.split(_VALUE):
            rule = parse(value, sha or None)
            if rule is not None:
                rules.append(rule)
    return rules


def first_match(rules: Sequence[AcceptRule], key: str) -> AcceptRule | None:
    return next((rule for rule in rules if rule.matches(key)), None)


def unmatched(rules: Sequence[AcceptRule], keys: Iterable[str]) -> list[AcceptRule]:
    """Rules that match none of ``keys``: most likely a typo in the pattern."""
    keys = list(keys)
    return [rule for rule in rules if not any(rule.matches(k) for k in keys)]
