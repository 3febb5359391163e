"""Kernel families shared by the device backends (OpenCL, CUDA).

A family module plans a node, renders its kernels' source from the shared C-like
renderer (plugins/cstyle) in the backend's dialect, and launches them through the
backend's runtime. What differs between devices is one ``Target`` (target.py): the
dialect, the runtime (kernel cache, launches, allocation), the array kind and the
backend's names. A backend builds its kernel table with ``specs(target)`` of each
family:

- ``elementwise``: fused maps (Elemwise, Composite), casts and copies;
- ``views``: dimshuffle, reshape, basic indexing, alloc, fill;
- ``indexing``: set/inc subtensor, advanced gather/scatter, class selection;
- ``reductions``: Reduce and Argmax over any axes;
- ``rowwise``: softmax and log-softmax;
- ``construct``: join, eye, tri, arange, one-hot, cumulative sums and products, sort;
- ``random``: MRG31k3p giving the host's stream;
- ``convolution``: Conv2d and its gradients, pooling and its gradients.

``transpose`` (not a family: no op of its own) gives the copies of ``elementwise`` a
tiled path for values whose fast axis is the second-to-last.

How a product is computed differs per device (OpenCL: our packed kernels; CUDA: cuBLAS):
each backend gives a ``GemmProvider``, and ``blas_kernels`` makes its Dot, MatMul, Gemm
and Ger kernels (the plans are ``blas_plan``'s, which the host's BLAS selection uses too).
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tensorjit.core.registries import KernelSpec
    from tensorjit.plugins.device_kernels.target import Target

# The kernel families, each a module with ``specs(target) -> list[KernelSpec]``.
FAMILIES = (
    "elementwise",
    "views",
    "reductions",
    "rowwise",
    "indexing",
    "construct",
    "random",
    "convolution",
)


def family_specs(target: Target) -> list[KernelSpec]:
    """Every family's kernel specs on ``target`` (a backend adds its own GEMM)."""
    found: list[KernelSpec] = []
    for family in FAMILIES:
        module = importlib.import_module(f"tensorjit.plugins.device_kernels.{family}")
        found.extend(module.specs(target))
    # The families read Op.host_inputs on the host (views.IndexInputs), wherever they are.
    return [replace(spec, reads_host_inputs=True) for spec in found]
