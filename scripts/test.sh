#!/usr/bin/env bash
# The test suite: installs into .venv if needed, then runs pytest on tests/.
# Extra arguments go to pytest (e.g. scripts/test.sh -k baselines -x).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${INFPERF_VENV:-.venv}/bin/python" -m pytest tests "$@"
