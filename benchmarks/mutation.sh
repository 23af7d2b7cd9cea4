#!/usr/bin/env bash
# A decision table's tests proven by mutation: mutmut mutates a module and runs its table's
# tests against each mutant; a mutant that survives is a row the table lacks. Prints
# mutmut's tally and the survivors.
#   bash benchmarks/mutation.sh                      judge/policy.py by tests/test_policy.py
#   bash benchmarks/mutation.sh MODULE... -- TEST...  other modules by their tables, e.g.
#   bash benchmarks/mutation.sh pytest_infperf/core/outcome.py pytest_infperf/core/record.py -- tests/test_record.py
# The pair given is written into a copy of the checkout's [tool.mutmut]; the checkout's own
# stays as it is (the policy's).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="$(cd "${INFPERF_VENV:-.venv}" && pwd)"
modules=() tests=()
seen=0
for arg in "$@"; do
    if [ "$arg" = "--" ]; then seen=1; elif [ "$seen" -eq 0 ]; then modules+=("$arg"); else tests+=("$arg"); fi
done
work="."
if [ "${#modules[@]}" -gt 0 ]; then
    [ "${#tests[@]}" -gt 0 ] || { echo "name the tests after --" >&2; exit 2; }
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    git ls-files -z | xargs -0 -I{} cp --parents {} "$work"
    list() { local IFS=,; local q=("${@/#/\"}"); q=("${q[@]/%/\"}"); echo "[${q[*]}]"; }
    sed -i "s|^only_mutate = .*|only_mutate = $(list "${modules[@]}")|; s|^pytest_add_cli_args_test_selection = .*|pytest_add_cli_args_test_selection = $(list "${tests[@]}")|" "$work/pyproject.toml"
fi
cd "$work"
rm -rf mutants
"$VENV/bin/mutmut" run --max-children "${MUTMUT_CHILDREN:-2}" >/tmp/mutmut.log 2>&1 || true
all=$("$VENV/bin/mutmut" results --all true)
echo "not killed:"
grep -v ": killed$" <<<"$all" || true
echo "mutants by outcome:"
awk '{print $NF}' <<<"$all" | sort | uniq -c
killed=$(grep -c ": killed$" <<<"$all" || true)
total=$(grep -c ": " <<<"$all" || true)
echo "killed $killed of $total ($((100 * killed / total))%)"
rm -rf mutants
