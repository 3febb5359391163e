"""The CUDA backend as the shared kernel families (plugins/device_kernels) see it."""

from __future__ import annotations

from typing import Any

from tensorjit.plugins.cuda_backend import BACKEND, DEVICE
from tensorjit.plugins.cuda_backend.arrays import CUDA_ARRAYS
from tensorjit.plugins.cuda_backend.dialect import CUDA_DIALECT, preamble
from tensorjit.plugins.cuda_backend.runtime import runtime
from tensorjit.plugins.device_kernels.target import Target


def _matmul(out: Any, a: Any, b: Any, accumulate: bool = False) -> None:
    from tensorjit.plugins.cuda_backend.cublas import matmul_into  # (it imports the target)

    matmul_into(out, a, b, accumulate)


def _matmul_ready() -> bool:
    from tensorjit.plugins.cuda_backend.cublas import ready

    return ready()


CUDA = Target(
    backend=BACKEND,
    device=DEVICE,
    plugin="cuda_backend",
    dialect=CUDA_DIALECT,
    runtime=runtime,
    arrays=CUDA_ARRAYS,
    preamble=preamble,
    matmul=_matmul,
    matmul_ready=_matmul_ready,
)
