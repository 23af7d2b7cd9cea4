#!/usr/bin/env bash
# The test suite: installs into .venv if needed, then runs pytest on tests/.
# Extra arguments go to pytest (e.g. scripts/test.sh -k baselines -x).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
rc=0
# Two or more processes (pytest-xdist): most of the suite waits on subprocesses, git and
# imports. What the tests time stays serialised by the plugin's machine-wide timing lock;
# a module's tests share a worker (--dist loadscope), so its module-scoped fixtures (a
# saved baseline, a fleet of shards, profiled runs: 10-35 s each) are built once.
# pytest-benchmark (a dev extra, for tests/test_coexist.py) is kept out of this process: under
# xdist it warns at start-up, which this project's warnings-as-errors would make fatal.
"${INFPERF_VENV:-.venv}/bin/python" -m pytest tests -n auto --dist loadscope -p no:benchmark "$@" \
    || rc=$?
if [ "$rc" -eq 5 ]; then
    # pytest's "no tests collected" (e.g. a -k that selects nothing): say so, and do not
    # fail the job over a selection.
    echo "scripts/test.sh: pytest collected no tests (exit 5)"
    exit 0
fi
exit "$rc"
