"""The memory-model suite and the MLP example run again on the tested device
(``tensorjit.testing.device_under_test``): tensorjit's own test files and examples, so
these stay beside them rather than in the conformance suite a third party imports."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from tensorjit.core.config import config
from tensorjit.testing.device_under_test import DEVICE, NEEDS_DEVICE, SEPARATE_MEMORY

pytestmark = NEEDS_DEVICE
ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"


@SEPARATE_MEMORY
def test_the_memory_model_suite_passes_on_the_device():
    """tests/core/memory with config.device set to the device: every shared variable lives on the
    OpenCL device and computation is placed there (tests marked ``host_memory`` assert
    aliasing that only host memory permits and are left out)."""
    env = dict(os.environ, TENSORJIT_FLAGS=f"device={DEVICE}")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not host_memory"]
        + ["tests/core/memory"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert int(summary.split(" passed")[0].split()[-1]) >= 250, summary


def _load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_mlp_example_trains_on_the_device_like_on_the_host():
    example = _load_example("mlp")
    kwargs = dict(epochs=2, n_examples=600, max_batches=5, verbose=False)
    host = example.main(**kwargs)
    with config.change_flags(device=DEVICE):
        device = example.main(**kwargs)
    np.testing.assert_allclose(device, host, rtol=1e-6)
