#!/usr/bin/env bash
# The README's example output, from a real run: an MLP saved on main, then a branch that
# gives it a fifth layer, compared (`--perf-compare=main`). Prints what the compare printed.
#     bash benchmarks/readme_example.sh
set -euo pipefail
PY="$(cd "$(dirname "$0")/.." && pwd)/${INFPERF_VENV:-.venv}/bin/python"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
cat > test_latency.py <<'PY'
from pathlib import Path

import torch

LAYERS = int(Path(__file__).with_name("layers.txt").read_text())


def test_mlp_latency(infer_bench):
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(LAYERS)])
    infer_bench(model, (torch.randn(8, 256),))


def test_mlp_unchanged(infer_bench):
    model = torch.nn.Sequential(torch.nn.Linear(200, 128), torch.nn.Sigmoid())
    infer_bench(model, (torch.randn(1, 200),))
PY
printf '[pytest]\n' > pytest.ini  # this folder is the rootdir, whatever lies above it
echo 4 > layers.txt
export GIT_AUTHOR_NAME=demo GIT_AUTHOR_EMAIL=demo@example.com
export GIT_COMMITTER_NAME=demo GIT_COMMITTER_EMAIL=demo@example.com
git init -q -b main && git add -A && git commit -qm "an MLP"
"$PY" -m pytest -p no:cacheprovider -q test_latency.py --perf-save > /dev/null
git switch -q -c deeper
echo 5 > layers.txt
git commit -qam "one layer more"
"$PY" -m pytest -p no:cacheprovider test_latency.py --perf-compare=main || true
