#!/usr/bin/env bash
# Create .venv (once) and install pytest-infperf with every extra and the test tools,
# pinned by constraints.txt (torch==2.13.0: any other spec pulls a multi-GB CUDA build).
# Re-runs are quick: the install is skipped while pyproject.toml and constraints.txt match.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${INFPERF_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
stamp="$VENV/.infperf-install-stamp"
want="$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        -c constraints.txt -e '.[all,dev]'
    echo "$want" > "$stamp"
fi
