"""The OpenCL backend's kernel table: the shared kernel families (plugins/device_kernels)
on the OpenCL target, and the backend's own GEMM family (``blas``)."""

from __future__ import annotations

import importlib

from tensorjit.core.registries import KernelSpec

# The shared families, each with ``specs(target) -> list[KernelSpec]``.
FAMILIES = ("elementwise", "views", "reductions", "rowwise", "indexing", "random")


def specs() -> list[KernelSpec]:
    from tensorjit.plugins.opencl_backend import blas
    from tensorjit.plugins.opencl_backend.target import OPENCL

    found = []
    for family in FAMILIES:
        module = importlib.import_module(f"tensorjit.plugins.device_kernels.{family}")
        found.extend(module.specs(OPENCL))
    return found + blas.specs()
