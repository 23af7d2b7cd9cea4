#!/usr/bin/env bash
# The main job: run the example benchmarks (sigmoid MLP, DistilBERT, BERT-base in torch and
# onnxruntime), save them as the baseline of the current commit, then run them again and
# compare against that baseline, as CI does on a pull request. Writes results/.
# Extra arguments go to both pytest runs (e.g. scripts/main-job.sh --sweep=full).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY="${INFPERF_VENV:-.venv}/bin/python"
mkdir -p results
echo "The main job: the example benchmarks (a sigmoid MLP, DistilBERT and BERT-base in torch"
echo "and onnxruntime), measured twice. It takes 2.4 to 7.5 minutes on a 2-core machine."
echo
echo "== 1/2: measure and save the baseline of $(git rev-parse --short HEAD) =="
"$PY" -m pytest examples -p no:cacheprovider --perf-save --perf-json=results/baseline-run.json "$@"
echo "== 2/2: measure again and compare with the saved baseline =="
# The demo compares a commit with itself, so any "regression" here is machine drift between
# the two runs (large on shared VMs): it reports verdicts without failing the job
# (--perf-warn-only). A real gate, like .github/workflows/perf.yml, leaves the flag out.
# What the stored baseline cannot decide is settled in the same run, interleaved against
# the baseline's commit (--perf-settle=auto, the default).
"$PY" -m pytest examples -p no:cacheprovider --perf-compare=HEAD --perf-warn-only \
    --perf-json=results/compare.json --perf-markdown=results/report.md \
    --junitxml=results/junit.xml "$@"
cat <<'DONE'

Done. Look at, in this order:
  results/report.md        the verdicts as a reviewer sees them (the CI job summary / PR comment)
  results/compare.json     every figure and raw sample (schema: pytest_infperf/schema/)
  results/junit.xml        infperf.* properties per test, for CI test reports
  baselines/               the stored baseline of this commit
A real gate leaves out --perf-warn-only: see README.md, "The gate in CI".
DONE
