#!/usr/bin/env bash
# The main job: run the example benchmarks (sigmoid MLP, DistilBERT, BERT-base in torch and
# onnxruntime), print the summary table and write the results JSON to results/.
# Extra arguments go to pytest (e.g. scripts/main-job.sh --sweep=full).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY="${INFPERF_VENV:-.venv}/bin/python"
mkdir -p results
"$PY" -m pytest examples -p no:cacheprovider --perf-json=results/examples.json "$@"
echo "results JSON: results/examples.json"
