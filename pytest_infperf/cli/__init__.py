"""The ``infperf`` command (also ``python -m pytest_infperf``): the top layer beside the
plugin. Its sub-commands (list, compare, history, report, comment, baselines, prune...)
read the store, ask the judge and write reports; each loads numpy, scipy or matplotlib only
when it runs. Importing this package imports nothing else of it: ``post`` (the comment
poster of ``perf-comment.yml``) runs on the standard library alone, from a checkout.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The ``infperf`` entry point."""
    from .main import main as _main

    return _main(argv)


__all__ = ["main"]
