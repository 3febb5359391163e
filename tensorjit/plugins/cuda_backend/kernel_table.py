"""The CUDA backend's kernel table: the shared kernel families (plugins/device_kernels)
on the CUDA target, and the products through cuBLAS."""

from __future__ import annotations

from tensorjit.core.registries import KernelSpec


def specs() -> list[KernelSpec]:
    from tensorjit.plugins.cuda_backend import cublas
    from tensorjit.plugins.cuda_backend.target import CUDA
    from tensorjit.plugins.device_kernels import family_specs

    return family_specs(CUDA) + cublas.specs()
