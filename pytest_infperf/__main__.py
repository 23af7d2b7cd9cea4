"""``python -m pytest_infperf``: the ``infperf`` command line."""

from __future__ import annotations

from .cli.main import main

raise SystemExit(main())
