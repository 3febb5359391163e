#!/usr/bin/env bash
# The wheels benchmarks/cuda_session.sh installs on the lent GPU machine (CPython 3.12,
# no package registry there), into the ignored folder .gpu/wheels that the device call
# carries: the pure and manylinux wheels the machine lacks, downloaded, and pycuda,
# built here against CUDA 13's headers without a driver. pycuda links libcuda, so a
# stand-in libcuda.so.1 is made whose functions (those pycuda's extension calls) all
# return CUDA_ERROR_NO_DEVICE; on the GPU machine the driver's own libcuda.so.1 is
# loaded in its place. Usage: bash benchmarks/cuda_session_wheels.sh [python3.12]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-$(pyenv prefix 3.12 2>/dev/null || true)/bin/python}
[ -x "$PY" ] || { echo "no Python 3.12 (give its path: $0 /path/to/python3.12)" >&2; exit 1; }
CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# one version of each package: the session installs every wheel here at once
rm -rf .gpu/wheels && mkdir -p .gpu/wheels
exclude=$(git rev-parse --git-path info/exclude)
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo /.gpu/ >>"$exclude"
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .gpu/wheels \
  cffi pycparser pytools platformdirs mako siphash24 pyopencl
"$WORK/venv/bin/pip" install -q numpy setuptools wheel
"$WORK/venv/bin/pip" download -q --no-deps --no-binary pycuda -d "$WORK" pycuda
tar xzf "$WORK"/pycuda-*.tar.gz -C "$WORK"
SRC=$(echo "$WORK"/pycuda-*/)

# Pass 1: an empty stand-in, to learn which driver functions the extension calls.
build() {
  (cd "$SRC" && rm -rf build siteconf.py &&
    "$WORK/venv/bin/python" configure.py --cuda-root="$CUDA_ROOT" \
      --cudadrv-lib-dir="$WORK/stub" --no-cuda-enable-curand >/dev/null &&
    "$WORK/venv/bin/pip" wheel -q --no-build-isolation --no-deps -w "$WORK/wheel" .)
}
mkdir -p "$WORK/stub"
echo 'int tj_stub_placeholder;' >"$WORK/stub/stub.c"
gcc -shared -fPIC -o "$WORK/stub/libcuda.so" -Wl,-soname,libcuda.so.1 "$WORK/stub/stub.c"
build
unzip -o -q "$WORK"/wheel/pycuda-*.whl 'pycuda/_driver*.so' -d "$WORK/first"
nm -D --undefined-only "$WORK"/first/pycuda/_driver*.so | awk '$2 ~ /^cu/ {print $2}' |
  sed 's/@.*//' | sort -u | awk '{print "int " $1 "(void) { return 100; }"}' >"$WORK/stub/stub.c"

# Pass 2: the stand-in defines them all, so the linker keeps libcuda.so.1 as NEEDED.
gcc -shared -fPIC -o "$WORK/stub/libcuda.so" -Wl,-soname,libcuda.so.1 "$WORK/stub/stub.c"
rm -rf "$WORK/wheel"
build
cp "$WORK"/wheel/pycuda-*.whl .gpu/wheels/

# Check: installed with the stand-in (its error strings filled in) as the driver, the
# import succeeds and cuInit reports no device.
mkdir -p "$WORK/check"
grep -v 'cuGetError' "$WORK/stub/stub.c" >"$WORK/check/stub.c"
{
  echo 'int cuGetErrorString(int e, const char **s) { *s = "no device (stand-in)"; return 0; }'
  echo 'int cuGetErrorName(int e, const char **s) { *s = "CUDA_ERROR_NO_DEVICE"; return 0; }'
} >>"$WORK/check/stub.c"
gcc -shared -fPIC -o "$WORK/check/libcuda.so.1" -Wl,-soname,libcuda.so.1 "$WORK/check/stub.c"
"$WORK/venv/bin/pip" install -q --no-deps --target "$WORK/site" .gpu/wheels/pycuda-*.whl \
  .gpu/wheels/pytools-*.whl .gpu/wheels/platformdirs-*.whl .gpu/wheels/siphash24-*.whl
LD_LIBRARY_PATH="$WORK/check" PYTHONPATH="$WORK/site" "$WORK/venv/bin/python" -c "
import pycuda.driver as d
try:
    d.init()
except d.Error as e:
    print('pycuda imports; without a GPU:', e)"
echo "built: $(ls .gpu/wheels/pycuda-*.whl)"
