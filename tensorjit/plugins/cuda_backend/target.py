"""The CUDA backend as the shared kernel families (plugins/device_kernels) see it."""

from __future__ import annotations

from tensorjit.plugins.cuda_backend import BACKEND, DEVICE
from tensorjit.plugins.cuda_backend.arrays import CUDA_ARRAYS
from tensorjit.plugins.cuda_backend.dialect import CUDA_DIALECT, preamble
from tensorjit.plugins.cuda_backend.runtime import runtime
from tensorjit.plugins.device_kernels.target import Target

CUDA = Target(
    backend=BACKEND,
    device=DEVICE,
    plugin="cuda_backend",
    dialect=CUDA_DIALECT,
    runtime=runtime,
    arrays=CUDA_ARRAYS,
    preamble=preamble,
)
