"""config.device must name a device a backend provides (checked at the first compile and
shown by ``info``); ``python -m tensorjit --version``."""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.__main__ import info
from tensorjit.core.config import config


def test_an_unknown_device_fails_at_the_first_compile_and_says_why():
    x = T.vector("x")
    with config.change_flags(device="tpu"):
        with pytest.raises(ValueError, match=r"config.device is 'tpu', but no installed backend "
                           r"provides that device \(known devices: cpu"):  # fmt: skip
            tensorjit.function([x], x * 2)
        out = io.StringIO()
        info(out)
        assert "tpu        config.device names it, but no installed backend" in out.getvalue()
    np.testing.assert_allclose(tensorjit.function([x], x * 2)(np.ones(2)), [2.0, 2.0])


def test_version_flag():
    done = subprocess.run(
        [sys.executable, "-m", "tensorjit", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() == f"tensorjit {tensorjit.__version__}"
