"""The CUDA backend's kernel table: the shared kernel families (plugins/device_kernels)
on the CUDA target, and the products through cuBLAS."""

from __future__ import annotations

import importlib

from tensorjit.core.registries import KernelSpec

# The shared families, each with ``specs(target) -> list[KernelSpec]`` (as OpenCL's).
FAMILIES = ("elementwise", "views", "reductions", "rowwise", "indexing", "random")


def specs() -> list[KernelSpec]:
    from tensorjit.plugins.cuda_backend import cublas
    from tensorjit.plugins.cuda_backend.target import CUDA

    found = []
    for family in FAMILIES:
        module = importlib.import_module(f"tensorjit.plugins.device_kernels.{family}")
        found.extend(module.specs(CUDA))
    return found + cublas.specs()
