"""The OpenCL backend as the shared kernel families (plugins/device_kernels) see it."""

from __future__ import annotations

from typing import Any

from tensorjit.plugins.device_kernels.target import Target
from tensorjit.plugins.opencl_backend import BACKEND, DEVICE
from tensorjit.plugins.opencl_backend.arrays import OPENCL_ARRAYS
from tensorjit.plugins.opencl_backend.dialect import OPENCL_DIALECT, preamble
from tensorjit.plugins.opencl_backend.runtime import runtime


def _matmul(out: Any, a: Any, b: Any, accumulate: bool = False) -> None:
    from tensorjit.plugins.opencl_backend.blas import matmul_into  # (it imports the target)

    matmul_into(out, a, b, accumulate)


OPENCL = Target(
    backend=BACKEND,
    device=DEVICE,
    plugin="opencl_backend",
    dialect=OPENCL_DIALECT,
    runtime=runtime,
    arrays=OPENCL_ARRAYS,
    preamble=preamble,
    matmul=_matmul,
    matmul_launches_only=True,
)
