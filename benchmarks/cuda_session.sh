#!/usr/bin/env bash
# A session on a lent GPU machine without a package registry (the team's H200): installs
# tensorjit and what the machine lacks from carried wheels, runs the CUDA tests, the
# conformance/device suite, the dense op suite and the memory-model suite on the GPU,
# looks for NVIDIA's OpenCL, and runs benchmarks/cuda_rivals.py; logs go to $OUT.
#
# The machine's python3 (3.12) has numpy, scipy, pluggy, pytest, pytest-xdist,
# hypothesis, CuPy, JAX and PyTorch, but no pycuda, cffi or pycparser. On the
# development machine first (with PyPI), into the ignored folder .gpu/wheels that travels
# (those, and pycuda for CPython 3.12 built without a driver; a few minutes):
#   bash benchmarks/cuda_session_wheels.sh
# Then, on the GPU machine, with `.gpu` carried:
#   DEADLINE=420 bash benchmarks/cuda_session.sh        (seconds for the whole run)
#   STEPS="launch_plans bench dense" DEADLINE=240 ...   (some steps only; default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
DEADLINE=${DEADLINE:-420}
STEPS=${STEPS:-all}
PY=${PYTHON:-python3}
SITE=/tmp/tensorjit-site
mkdir -p "$OUT"
# JAX would take 75% of the GPU's memory up front, beside CuPy's, PyTorch's and ours.
export PYTHONUNBUFFERED=1 XDG_CACHE_HOME=/tmp/tensorjit-cache XLA_PYTHON_CLIENT_PREALLOCATE=false
START=$(date +%s)

wanted() { [ "$STEPS" = all ] || [[ " $STEPS " == *" $1 "* ]]; }

# step NAME SECONDS LOG COMMAND...: runs COMMAND (when NAME is wanted) for at most
# SECONDS, less if the deadline is nearer, its output appended to $OUT/LOG; the exit
# status and the log's last lines go to the summary.
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  wanted "$name" || return 0
  local left=$((DEADLINE - ($(date +%s) - START) - 5))
  ((left < limit)) && limit=$left
  if ((limit < 10)); then
    echo "SKIPPED (deadline): $name" | tee -a "$OUT/summary.txt"
    return 0
  fi
  echo "== $name: $* (limit ${limit}s)" >>"$OUT/$log"
  timeout --kill-after=5 "$limit" "$@" >>"$OUT/$log" 2>&1
  local status=$?
  echo "$name: exit $status at ${limit}s limit, $(($(date +%s) - START))s in" |
    tee -a "$OUT/summary.txt"
  tail -n 3 "$OUT/$log" | cut -c1-300 | sed 's/^/    /' | tee -a "$OUT/summary.txt"
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  $PY --version
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .gpu/wheels/*.whl
  # tensorjit's metadata (its plugins' entry points) from a wheel; the code itself is
  # imported from this checkout (first on the path), so edits need no reinstall.
  $PY -m pip wheel -q --no-index --no-deps --no-build-isolation -w /tmp/tensorjit-wheel .
  $PY -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE" \
    /tmp/tensorjit-wheel/tensorjit-*.whl
} >"$OUT/setup.txt" 2>&1
export PYTHONPATH="$PWD:$SITE"
step info 60 setup.txt "$PY" -m tensorjit info

XDIST=()
"$PY" -c "import xdist" 2>/dev/null && XDIST=(-n 14)
# -v: a line per test as it ends, so a run cut by its limit still names what failed.
PYTEST=("$PY" -m pytest -v -rfEs -p no:cacheprovider "${XDIST[@]}")
ON_CUDA=(env TENSORJIT_TEST_BACKEND=cuda TENSORJIT_TEST_COVERS=all)

# NVIDIA's OpenCL: the driver's library, registered for the ICD loader when no vendor
# file names it (the suite on it only when asked: STEPS=opencl).
{
  ls /etc/OpenCL/vendors 2>&1
  found=$(ls /usr/local/nvidia/lib64/libnvidia-opencl.so* \
    /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so* 2>/dev/null | head -1)
  echo "libnvidia-opencl: ${found:-none}"
} >>"$OUT/setup.txt" 2>&1
if [ -n "${found:-}" ]; then
  mkdir -p /tmp/ocl-vendors && echo "$found" >/tmp/ocl-vendors/nvidia.icd
  step info 30 setup.txt env OCL_ICD_VENDORS=/tmp/ocl-vendors "$PY" -c \
    "import pyopencl as cl; print([d.name for p in cl.get_platforms() for d in p.get_devices()])"
  [ "$STEPS" = all ] || step opencl 150 setup.txt env OCL_ICD_VENDORS=/tmp/ocl-vendors \
    TENSORJIT_TEST_BACKEND=opencl "${PYTEST[@]}" tensorjit/testing/conformance
fi

# The launch plans' conformance tests on their own (quick, for a rerun after a fix).
step launch_plans 60 launch_plans.txt "${ON_CUDA[@]}" "${PYTEST[@]}" \
  tensorjit/testing/conformance/test_launch_plans.py
# CUDA's own tests (kernels to PTX and on the GPU, arrays, cuBLAS); the device suite,
# which test_device_suite_on_cuda runs serially, runs below in parallel instead.
step cuda_tests 90 cuda_tests.txt "${PYTEST[@]}" tests/plugins/cuda_backend \
  --deselect tests/plugins/cuda_backend/test_device_suite_on_cuda.py
# The conformance suite and the device suite (less the two subprocess runs, below).
step device_suite 200 device_suite.txt "${ON_CUDA[@]}" "${PYTEST[@]}" \
  tensorjit/testing/conformance tests/plugins/device_suite \
  --ignore=tests/plugins/device_suite/test_conformance_on_backends.py \
  --ignore=tests/plugins/device_suite/test_dense_suite_on_device.py \
  --deselect "tests/plugins/device_suite/test_repo_suites_on_device.py::test_the_memory_model_suite_passes_on_the_device"
step bench 120 bench.txt bash -c "cd benchmarks && $PY cuda_rivals.py --parts copy,figure7,reductions"
step bench 100 bench.txt bash -c "cd benchmarks && $PY cuda_rivals.py --parts mlp,overhead"
step examples 90 bench.txt bash -c "cd benchmarks && $PY cuda_rivals.py --parts mrg,examples"
# The dense op suite (what test_dense_suite_on_device runs file by file) on device=cuda.
step dense 180 dense_suite.txt env TENSORJIT_FLAGS=device=cuda "${PYTEST[@]}" \
  tests/tensor/test_table1_elementwise.py tests/tensor/test_table1_alloc_indexing.py \
  tests/tensor/test_table1_nnet.py tests/tensor/test_operators.py
# The memory-model suite with every shared variable on the GPU (test_repo_suites_on_device).
step memory 90 memory_suite.txt env TENSORJIT_FLAGS=device=cuda "${PYTEST[@]}" \
  -m "not host_memory" tests/core/memory
step compile 60 bench.txt bash -c "cd benchmarks && $PY cuda_rivals.py --parts compile"
# Optimiser updates as one multi-output launch against one launch per group.
step multi 60 bench.txt bash -c "cd benchmarks && $PY multi_output.py --device cuda --rounds 1"

for log in launch_plans cuda_tests device_suite dense_suite memory_suite; do
  [ -f "$OUT/$log.txt" ] || continue
  echo "$log: $(grep -c ' PASSED' "$OUT/$log.txt") passed, $(grep -c ' FAILED' "$OUT/$log.txt")" \
    "failed, $(grep -c ' ERROR' "$OUT/$log.txt") errors, $(grep -c ' SKIPPED' "$OUT/$log.txt")" \
    "skipped" | tee -a "$OUT/summary.txt"
done
echo "done after $(($(date +%s) - START))s" | tee -a "$OUT/summary.txt"
