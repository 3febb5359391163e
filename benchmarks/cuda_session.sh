#!/usr/bin/env bash
# A session on a GPU machine without a package registry (the team's lent H100/H200):
# builds pycuda from carried sdists and wheels, runs the CUDA tests (every kernel on the
# GPU against Op.perform, the device suite, the dense op suite) and the CUDA benchmark,
# and leaves the logs in $OUT.
#
# On the development machine first (with PyPI), into an ignored folder that travels:
#   mkdir -p .gpu && echo /.gpu/ >> .git/info/exclude
#   pip download -d .gpu/wheels --no-binary pycuda pycuda
#   pip download -d .gpu/wheels "pytools>=2011.2" platformdirs mako markupsafe \
#       typing_extensions siphash24 numpy cffi pycparser pluggy scipy pytest hypothesis \
#       setuptools wheel packaging
# then run this with `.gpu` carried: bash benchmarks/cuda_session.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m venv --system-site-packages .gpu/venv   # CuPy and JAX come from the machine
.gpu/venv/bin/pip install --no-index --find-links .gpu/wheels pycuda 2>&1 | tail -3
.gpu/venv/bin/pip install --no-index --find-links .gpu/wheels --no-build-isolation -e . \
    2>&1 | tail -1
.gpu/venv/bin/python -m tensorjit info | sed -n '/^backends/,/^devices/p' | tee "$OUT/info.txt"
.gpu/venv/bin/python -m pytest -q -rs -p no:cacheprovider tests/plugins/cuda_backend \
    2>&1 | tail -40 | tee "$OUT/cuda_tests.txt" || true
TENSORJIT_TEST_DEVICE=cuda .gpu/venv/bin/python -m pytest -q -x -rs -p no:cacheprovider \
    tests/plugins/device_suite 2>&1 | tail -60 | tee "$OUT/device_suite.txt" || true
(cd benchmarks && ../.gpu/venv/bin/python cuda.py) 2>&1 | tee "$OUT/bench.txt" || true
# launch plans on the GPU: Python per call and launches, plans off and on
(cd benchmarks && ../.gpu/venv/bin/python launch_plans.py --device cuda --calls 50 \
    --rounds 2) 2>&1 | tee "$OUT/launch_plans.txt" || true
