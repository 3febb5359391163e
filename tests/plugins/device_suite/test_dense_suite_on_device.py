"""The dense op tests (Table 1: elementwise math, reductions, allocation and indexing,
nnet, the operators) run again with ``config.device`` set to the tested device
(``tensorjit.testing.device_under_test``): every node a device kernel covers is placed on
the device, and DebugMode (which these tests use) compares each device kernel with Op.perform. The
same files run on the host backends (C and Python) in the ordinary test run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tensorjit.testing.device_under_test import DEVICE, NEEDS_DEVICE

pytestmark = NEEDS_DEVICE
ROOT = Path(__file__).resolve().parents[3]
SUITES = [
    "tests/tensor/test_table1_elementwise.py",
    "tests/tensor/test_table1_alloc_indexing.py",
    "tests/tensor/test_table1_nnet.py",
    "tests/tensor/test_operators.py",
]


@pytest.mark.parametrize("suite", SUITES)
def test_dense_op_suite_passes_on_the_device(suite):
    env = dict(os.environ, TENSORJIT_FLAGS=f"device={DEVICE}")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", suite],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary, summary
