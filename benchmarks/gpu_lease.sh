#!/usr/bin/env bash
# What one short GPU lease runs (the `device` tool: one call, logs under $OUT), in order of
# what the GPU issue needs most. Each step has its own time limit so that the call ends
# inside the lease and what ran comes back:
#   [GQ_REPS=1] [GQ_MODES=compare,ab] [GQ_TESTS="tests/test_context.py tests/test_gpu.py"]
#       bash benchmarks/gpu_lease.sh [QUALITY_DEADLINE_S] [K_EXPR]
# Needs the project's dependencies that the machine's image lacks as wheels in .whl/
# (GitPython, gitdb, smmap, jsonschema and its helpers; pytest in .whl/pytest/ for an image
# whose pytest is older than 8.4), which .git/info/exclude ignores: the device call names
# it in `carry` (carry=[".whl"]). Never run on a CPU machine: it is not a test.
set -u
case "${1:-300}" in *[!0-9]*) echo "usage: gpu_lease.sh [SECONDS] [K_EXPR]" >&2; exit 2 ;; esac
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
OUT=${OUT:-/tmp/gpu-lease}
mkdir -p "$OUT/runs"
deadline=${1:-300}
kexpr=${2:-bert_b1 or bert_b32_graph or resnet50_b16}
reps=${GQ_REPS:-1}
modes=${GQ_MODES:-compare,ab}
case "$reps" in ''|*[!0-9]*) echo "GQ_REPS: a whole number" >&2; exit 2 ;; esac
t0=$(date +%s)
say() { echo "== $(($(date +%s) - t0)) s: $*"; }

say "machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
    --format=csv
nproc; git --version
# A fresh target every time: pip skips what a warm machine's target already holds, and the
# runs would then measure the code of an earlier call.
rm -rf /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 3
if ! python3 -c "import pytest,sys; sys.exit(tuple(map(int, pytest.__version__.split('.')[:2])) < (8, 4))"; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/pytest/*.whl || exit 3
fi
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site . \
    || exit 4
python3 - <<'EOF'
import onnxruntime as o, pytest, torch, transformers
print("torch", torch.__version__, torch.cuda.get_device_name(0), "| ort", o.__version__,
      o.get_available_providers(), "| pytest", pytest.__version__, "| transformers",
      transformers.__version__)
EOF

tests=${GQ_TESTS:-tests/test_context.py tests/test_gpu.py}
say "$tests"
# shellcheck disable=SC2086 # a list of test files
timeout 90 python3 -m pytest $tests -q -p no:benchmark -rs >"$OUT/tests.log" 2>&1
echo "exit $?"; grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/tests.log" | cut -c1-300 | tail -25

say "gpu_quality, quiet (deadline ${deadline} s)"
timeout $((deadline + 170)) python3 benchmarks/gpu_quality.py --reps "$reps" --modes "$modes" \
    -k "$kexpr" --log-dir "$OUT/runs" --deadline "$deadline" \
    --pytest-args='-p no:benchmark'
echo "exit $?"

say "GPU processes left"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
tar czf "$OUT/runs.tgz" -C "$OUT" runs && rm -rf "$OUT/runs"
say "done"
