#!/usr/bin/env bash
# The test suite: installs into .venv if needed, then runs pytest on tests/.
#   bash scripts/test.sh           the default tier (every test not marked slow: <= 5 min)
#   bash scripts/test.sh --slow    the slow tier (real-process behaviour at length)
#   bash scripts/test.sh --all     both
# Further arguments go to pytest (e.g. scripts/test.sh -k baselines -x).
set -euo pipefail
cd "$(dirname "$0")/.."
tier=(-m "not slow")
slow=0
case "${1:-}" in
    --slow) tier=(-m slow); slow=1; shift ;;
    --all) tier=(); shift ;;
esac
bash scripts/setup.sh
rc=0
# One process. On xdist (-n auto --dist loadscope, which tests/conftest.py supports) the
# suite took 478 s against 727 s (clean-clone `CI=true bash .ci/run`, 2 cores), but in four
# of five runs one to three timing tests failed under the other worker's load: what they
# time is serialised by the plugin's timing lock, the load is not.
"${INFPERF_VENV:-.venv}/bin/python" -m pytest tests ${tier[@]+"${tier[@]}"} "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
    # pytest's "no tests collected": a -k that selects nothing is said, not failed; a slow
    # tier that collects nothing by itself (a renamed marker) is a broken CI, and fails.
    echo "scripts/test.sh: pytest collected no tests (exit 5)"
    if [ "$slow" -eq 1 ] && [ "$#" -eq 0 ]; then
        exit 1
    fi
    exit 0
fi
exit "$rc"
