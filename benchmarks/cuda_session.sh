#!/usr/bin/env bash
# A session on a lent GPU machine without a package registry (the team's H200): installs
# tensorjit and what the machine lacks from carried wheels, runs the CUDA tests, the
# conformance/device suite and the dense op suite on the GPU, the OpenCL device suite on
# NVIDIA's OpenCL where the driver has one, and benchmarks/cuda.py; logs go to $OUT.
#
# The machine's python3 (3.12) has numpy, scipy, pluggy, pytest, pytest-xdist,
# hypothesis, CuPy, JAX and PyTorch, but no pycuda, cffi or pycparser. On the
# development machine first (with PyPI), into the ignored folder .gpu that travels:
#   echo /.gpu/ >> .git/info/exclude; mkdir -p .gpu/wheels
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#       --platform manylinux2014_x86_64 -d .gpu/wheels \
#       cffi pycparser pytools platformdirs mako siphash24 pyopencl
# and a pycuda wheel for CPython 3.12 built against the CUDA headers here (no driver
# needed: see benchmarks/cuda_pycuda_wheel.sh). Then, on the GPU machine, with `.gpu`
# carried: DEADLINE=420 bash benchmarks/cuda_session.sh (seconds for the whole run).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
DEADLINE=${DEADLINE:-420}
PY=${PYTHON:-python3}
SITE=/tmp/tensorjit-site
mkdir -p "$OUT"
# JAX would take 75% of the GPU's memory up front, beside CuPy's, PyTorch's and ours.
export PYTHONUNBUFFERED=1 XDG_CACHE_HOME=/tmp/tensorjit-cache XLA_PYTHON_CLIENT_PREALLOCATE=false
START=$(date +%s)

# step SECONDS LOG COMMAND...: runs COMMAND for at most SECONDS (less if the deadline is
# nearer), its output appended to $OUT/LOG; the exit status goes to the summary.
step() {
  local limit=$1 log=$2
  shift 2
  local left=$((DEADLINE - ($(date +%s) - START) - 5))
  ((left < limit)) && limit=$left
  if ((limit < 10)); then
    echo "SKIPPED (deadline): $*" | tee -a "$OUT/summary.txt"
    return
  fi
  echo "== $* (limit ${limit}s)" >>"$OUT/$log"
  timeout --kill-after=5 "$limit" "$@" >>"$OUT/$log" 2>&1
  local status=$?
  echo "exit $status after $(($(date +%s) - START))s: $*" | tee -a "$OUT/summary.txt"
  tail -n 3 "$OUT/$log" | sed 's/^/    /' | tee -a "$OUT/summary.txt"
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  $PY --version
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .gpu/wheels/*.whl
  # tensorjit's metadata (its plugins' entry points) from a wheel; the code itself is
  # imported from this checkout (first on the path), so edits need no reinstall.
  $PY -m pip wheel -q --no-index --no-deps --no-build-isolation -w /tmp/tensorjit-wheel .
  $PY -m pip install -q --no-index --no-deps --no-compile --target "$SITE" \
    /tmp/tensorjit-wheel/tensorjit-*.whl
} >"$OUT/setup.txt" 2>&1
export PYTHONPATH="$PWD:$SITE"
step 60 setup.txt "$PY" -m tensorjit info

XDIST=()
"$PY" -c "import xdist" 2>/dev/null && XDIST=(-n 14)
# -v: a line per test as it ends, so a run cut by its limit still names what failed.
PYTEST=("$PY" -m pytest -v -rfEs -p no:cacheprovider "${XDIST[@]}")

# CUDA's own tests (kernels to PTX and on the GPU, arrays, cuBLAS); the whole device
# suite, which test_device_suite_on_cuda runs serially, runs below in parallel instead.
step 90 cuda_tests.txt "${PYTEST[@]}" tests/plugins/cuda_backend \
  --deselect tests/plugins/cuda_backend/test_device_suite_on_cuda.py
# The conformance suite and the device suite (less the two subprocess runs, below).
step 200 device_suite.txt env TENSORJIT_TEST_BACKEND=cuda TENSORJIT_TEST_COVERS=all \
  "${PYTEST[@]}" tensorjit/testing/conformance tests/plugins/device_suite \
  --ignore=tests/plugins/device_suite/test_conformance_on_backends.py \
  --ignore=tests/plugins/device_suite/test_dense_suite_on_device.py \
  --deselect tests/plugins/device_suite/test_repo_suites_on_device.py::test_the_memory_model_suite_passes_on_the_device
# The dense op suite (what test_dense_suite_on_device runs file by file) on device=cuda.
step 150 dense_suite.txt env TENSORJIT_FLAGS=device=cuda "${PYTEST[@]}" \
  tests/tensor/test_table1_elementwise.py tests/tensor/test_table1_alloc_indexing.py \
  tests/tensor/test_table1_nnet.py tests/tensor/test_operators.py
step 120 bench.txt bash -c "cd benchmarks && $PY cuda.py --parts copy,figure7,reductions"
step 100 bench.txt bash -c "cd benchmarks && $PY cuda.py --parts mlp,overhead"
step 90 bench.txt bash -c "cd benchmarks && $PY cuda.py --parts mrg,examples"
# The memory-model suite with every shared variable on the GPU (test_repo_suites_on_device).
step 90 memory_suite.txt env TENSORJIT_FLAGS=device=cuda "${PYTEST[@]}" -m "not host_memory" \
  tests/core/memory

# NVIDIA's OpenCL where the driver has one, and benchmarks/cuda.py; logs go to $OUT.
#
# The machine's python3 (3.12) has numpy, scipy, pluggy, pytest, pytest-xdist,
# hypothesis, CuPy, JAX and PyTorch, but no pycuda, cffi or pycparser. On the
# development machine first (with PyPI), into the ignored folder .gpu that travels:
#   echo /.gpu/ >> .git/info/exclude; mkdir -p .gpu/wheels
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#       --platform manylinux2014_x86_64 -d .gpu/wheels \
#       cffi pycparser pytools platformdirs mako siphash24 pyopencl
# and a pycuda wheel for CPython 3.12 built against the CUDA headers here (no driver
# needed: see benchmarks/cuda_pycuda_wheel.sh). Then, on the GPU machine, with `.gpu`
# carried: DEADLINE=420 bash benchmarks/cuda_session.sh (seconds for the whole run).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
DEADLINE=${DEADLINE:-420}
PY=${PYTHON:-python3}
SITE=/tmp/tensorjit-site
mkdir -p "$OUT"
# JAX would take 75% of the GPU's memory up front, beside CuPy's, PyTorch's and ours.
export PYTHONUNBUFFERED=1 XDG_CACHE_HOME=/tmp/tensorjit-cache XLA_PYTHON_CLIENT_PREALLOCATE=false
START=$(date +%s)

# step SECONDS LOG COMMAND...: runs COMMAND for at most SECONDS (less if the deadline is
# nearer), its output appended to $OUT/LOG; the exit status goes to the summary.
step() {
  local limit=$1 log=$2
  shift 2
  local left=$((DEADLINE - ($(date +%s) - START) - 5))
  ((left < limit)) && limit=$left
  if ((limit < 10)); then
    echo "SKIPPED (deadline): $*" | tee -a "$OUT/summary.txt"
    return
  fi
  echo "== $* (limit ${limit}s)" >>"$OUT/$log"
  timeout --kill-after=5 "$limit" "$@" >>"$OUT/$log" 2>&1
  local status=$?
  echo "exit $status after $(($(date +%s) - START))s: $*" | tee -a "$OUT/summary.txt"
  tail -n 3 "$OUT/$log" | sed 's/^/    /' | tee -a "$OUT/summary.txt"
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  $PY --version
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .gpu/wheels/*.whl
  # tensorjit's metadata (its plugins' entry points) from a wheel; the code itself is
  # imported from this checkout (first on the path), so edits need no reinstall.
  $PY -m pip wheel -q --no-index --no-deps --no-build-isolation -w /tmp/tensorjit-wheel .
  $PY -m pip install -q --no-index --no-deps --no-compile --target "$SITE" \
    /tmp/tensorjit-wheel/tensorjit-*.whl
} >"$OUT/setup.txt" 2>&1
export PYTHONPATH="$PWD:$SITE"
step 60 setup.txt "$PY" -m tensorjit info

XDIST=()
"$PY" -c "import xdist" 2>/dev/null && XDIST=(-n 14)
# -v: a line per test as it ends, so a run cut by its limit still names what failed.
PYTEST=("$PY" -m pytest -v -rfEs -p no:cacheprovider "${XDIST[@]}")

# CUDA's own tests (kernels to PTX and on the GPU, arrays, cuBLAS); the whole device
# suite, which test_device_suite_on_cuda runs serially, runs below in parallel instead.
step 120 cuda_tests.txt "${PYTEST[@]}" tests/plugins/cuda_backend \
  --deselect tests/plugins/cuda_backend/test_device_suite_on_cuda.py
step 150 bench.txt bash -c "cd benchmarks && $PY cuda.py --parts copy,figure7,reductions"
step 120 bench.txt bash -c "cd benchmarks && $PY cuda.py --parts mlp,overhead"
step 90 bench.txt bash -c "cd benchmarks && $PY cuda.py --parts mrg,examples"
step 240 device_suite.txt env TENSORJIT_TEST_BACKEND=cuda TENSORJIT_TEST_COVERS=all \
  "${PYTEST[@]}" tensorjit/testing/conformance tests/plugins/device_suite \
  --ignore=tests/plugins/device_suite/test_conformance_on_backends.py \
  --ignore=tests/plugins/device_suite/test_dense_suite_on_device.py
# The dense op suite (what test_dense_suite_on_device runs file by file) on device=cuda.
step 180 dense_suite.txt env TENSORJIT_FLAGS=device=cuda "${PYTEST[@]}" \
  tests/tensor/test_table1_elementwise.py tests/tensor/test_table1_alloc_indexing.py \
  tests/tensor/test_table1_nnet.py tests/tensor/test_operators.py

# NVIDIA's OpenCL: the driver's library, registered for the ICD loader if no vendor file
# names it.
{
  ls /etc/OpenCL/vendors 2>&1
  found=$(ls /usr/local/nvidia/lib64/libnvidia-opencl.so* /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so* 2>/dev/null | head -1)
  echo "libnvidia-opencl: ${found:-none}"
} >"$OUT/opencl_nvidia.txt" 2>&1
if [ -n "${found:-}" ]; then
  mkdir -p /tmp/ocl-vendors && echo "$found" >/tmp/ocl-vendors/nvidia.icd
  export OCL_ICD_VENDORS=/tmp/ocl-vendors
  step 30 opencl_nvidia.txt "$PY" -c "import pyopencl as cl; print([d.name for p in cl.get_platforms() for d in p.get_devices()])"
  step 120 opencl_nvidia.txt env TENSORJIT_TEST_BACKEND=opencl "${PYTEST[@]}" \
    tensorjit/testing/conformance
fi
step 60 bench.txt bash -c "cd benchmarks && $PY cuda.py --parts compile"
for log in cuda_tests device_suite dense_suite memory_suite opencl_nvidia; do
  [ -f "$OUT/$log.txt" ] || continue
  echo "$log: $(grep -c ' PASSED' "$OUT/$log.txt") passed, $(grep -c ' FAILED' "$OUT/$log.txt")" \
    "failed, $(grep -c ' ERROR' "$OUT/$log.txt") errors, $(grep -c ' SKIPPED' "$OUT/$log.txt")" \
    "skipped" | tee -a "$OUT/summary.txt"
done
echo "done after $(($(date +%s) - START))s" | tee -a "$OUT/summary.txt"
