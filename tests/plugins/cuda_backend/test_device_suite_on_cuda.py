"""The conformance suite (tensorjit.testing.conformance: kernels against Op.perform in
DebugMode across layouts and dtypes, the memory contract on the device, training) and
tensorjit's own suites on a device (tests/plugins/device_suite: the dense op suite, the
memory-model suite, the MLP example) run on the CUDA device. Where no CUDA device is usable (CI)
it is skipped, saying why; every CUDA kernel still compiles to PTX here
(test_cuda_kernels_compile.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from helpers.cuda import NEEDS_CUDA

ROOT = Path(__file__).resolve().parents[3]


@NEEDS_CUDA
def test_the_device_suite_passes_on_cuda():
    env = dict(os.environ, TENSORJIT_TEST_BACKEND="cuda", TENSORJIT_TEST_COVERS="all")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"]
        + ["tensorjit/testing/conformance", "tests/plugins/device_suite"]
        # the other backends' runs: not this one's business
        + ["--ignore=tests/plugins/device_suite/test_conformance_on_backends.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all("tests OpenCL internals" in line for line in skips), skips
    assert re.search(r"\d+ passed", result.stdout)
