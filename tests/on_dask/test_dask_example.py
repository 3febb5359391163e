"""examples/dask_mlp.py runs as documented (its own LocalCluster) and reports equality
with single-process SGD."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="the [dask] extra is not installed")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dask_mlp.py"


def test_example_trains_and_matches_single_process():
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--epochs", "1", "--batch-size", "500"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trained 40 steps" in done.stdout
    accuracy = float(re.search(r"test accuracy ([0-9.]+)", done.stdout).group(1))
    assert accuracy > 0.9
    difference = float(re.search(r"single-process SGD: ([0-9.e+-]+)", done.stdout).group(1))
    assert difference < 1e-10
