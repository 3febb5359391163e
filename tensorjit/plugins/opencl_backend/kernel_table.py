"""The OpenCL backend's kernel table: the shared kernel families (plugins/device_kernels)
on the OpenCL target, and the backend's own GEMM family (``blas``)."""

from __future__ import annotations

from tensorjit.core.registries import KernelSpec


def specs() -> list[KernelSpec]:
    from tensorjit.plugins.device_kernels import family_specs
    from tensorjit.plugins.opencl_backend import blas
    from tensorjit.plugins.opencl_backend.target import OPENCL

    return family_specs(OPENCL) + blas.specs()
