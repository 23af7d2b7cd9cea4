#!/usr/bin/env bash
# The README's example output, from a real run: a package (src layout, installed editable in
# an environment of its own that sees this project's .venv) whose MLP is saved on main, then
# a branch that gives it a fifth layer, compared (`--perf-compare=main`). Prints what the
# compare printed.
#     bash benchmarks/readme_example.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="$ROOT/${INFPERF_VENV:-.venv}/bin/python"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir -p src/mymodels tests/perf
cat > src/mymodels/__init__.py <<'PY'
import torch

LAYERS = 4


def mlp(layers=LAYERS):
    return torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(layers)])


def small():
    return torch.nn.Sequential(torch.nn.Linear(200, 128), torch.nn.Sigmoid())
PY
cat > tests/perf/test_latency.py <<'PY'
import torch
from mymodels import mlp, small


def test_mlp_latency(infer_bench):
    infer_bench(mlp(), (torch.randn(8, 256),))


def test_mlp_unchanged(infer_bench):
    infer_bench(small(), (torch.randn(1, 200),))
PY
printf '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n[project]\nname = "mymodels"\nversion = "0.1"\n' > pyproject.toml
printf '[pytest]\n' > pytest.ini  # this folder is the rootdir, whatever lies above it
printf '.venv/\n*.egg-info/\n__pycache__/\nbaselines/\n' > .gitignore
# An environment of the package's own that sees this project's (torch, pytest-infperf).
"$PY" -m venv --without-pip .venv
site="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
own="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "import site; site.addsitedir('$site')" > "$own/_infperf.pth"
.venv/bin/python -m pip install -q --no-deps --no-build-isolation -e . 2>/dev/null
export GIT_AUTHOR_NAME=demo GIT_AUTHOR_EMAIL=demo@example.com
export GIT_COMMITTER_NAME=demo GIT_COMMITTER_EMAIL=demo@example.com
git init -q -b main && git add -A && git commit -qm "an MLP"
.venv/bin/python -m pytest -p no:cacheprovider -q tests/perf --perf-save > /dev/null
git switch -q -c deeper
sed -i 's/^LAYERS = 4$/LAYERS = 5/' src/mymodels/__init__.py
git commit -qam "one layer more"
.venv/bin/python -m pytest -p no:cacheprovider tests/perf --perf-compare=main || true
