#!/usr/bin/env bash
# The comparing policy's table proven by mutation: mutmut mutates judge/policy.py and runs
# tests/test_policy.py against each mutant ([tool.mutmut] in pyproject.toml); a mutant that
# survives is a row the table lacks. Prints mutmut's tally and the survivors.
#   bash benchmarks/mutation.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${INFPERF_VENV:-.venv}"
rm -rf mutants
"$VENV/bin/mutmut" run --max-children "${MUTMUT_CHILDREN:-2}" >/tmp/mutmut.log 2>&1 || true
all=$("$VENV/bin/mutmut" results --all true)
echo "not killed:"
grep -v ": killed$" <<<"$all" || true
echo "mutants of judge/policy.py, by outcome:"
awk '{print $NF}' <<<"$all" | sort | uniq -c
killed=$(grep -c ": killed$" <<<"$all" || true)
total=$(grep -c ": " <<<"$all" || true)
echo "killed $killed of $total ($((100 * killed / total))%)"
rm -rf mutants
