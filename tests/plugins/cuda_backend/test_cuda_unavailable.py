"""Where CUDA can not run (no pycuda, no driver, no device), tensorjit says exactly
why and keeps working on the host: ``info`` prints the reason, functions compiled with
device=cuda run on the host with one warning, shared variables defaulted to the device
live on the host with a warning, and an explicit ``target="cuda"`` is a clear error."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
from helpers.cuda import REASON

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.config import config
from tensorjit.core.diagnostics import TensorjitRuntimeWarning

pytestmark = pytest.mark.skipif(
    REASON is None, reason="a CUDA device is usable here: the GPU tests cover it"
)


def test_info_says_exactly_why_cuda_is_unavailable():
    out = subprocess.run(
        [sys.executable, "-m", "tensorjit", "info"], capture_output=True, text=True, check=True
    ).stdout
    (line,) = [row for row in out.splitlines() if "device=cuda " in row]
    assert "unavailable" in line and REASON in line
    assert "compiler:" in out  # the PTX compiler is reported even without a device


def test_device_cuda_runs_functions_and_shared_variables_on_the_host_with_a_warning():
    with config.change_flags(device="cuda"):
        with pytest.warns(TensorjitRuntimeWarning, match="shared variable 'w' lives on the host"):
            w = tensorjit.shared(np.arange(3.0), name="w")
        assert w.type.device == "cpu"
        x = T.vector("x")
        with warnings.catch_warnings():  # said once per process: whichever test is first
            warnings.filterwarnings("ignore", "backend 'cuda' is unavailable")
            f = tensorjit.function([x], T.exp(x) * w)
    np.testing.assert_allclose(f(np.zeros(3)), np.arange(3.0))


def test_an_explicit_cuda_target_is_a_clear_error_naming_the_variable_and_reason():
    with pytest.raises(RuntimeError, match=r"shared variable 'v': target='cuda1' can not hold"):
        tensorjit.shared(np.ones(2), name="v", target="cuda1")
