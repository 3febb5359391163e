"""The OpenCL backend's kernel table: one ``KernelSpec`` per op family, each module of
a family giving its own (``specs()``), gathered here."""

from __future__ import annotations

import importlib

from tensorjit.core.registries import KernelSpec

PLUGIN = "opencl_backend"
# The modules of the kernel families, each with ``specs() -> list[KernelSpec]``.
FAMILIES = ("elementwise", "views", "reductions", "rowwise", "blas", "indexing", "random")


def specs() -> list[KernelSpec]:
    found = []
    for family in FAMILIES:
        module = importlib.import_module(f"tensorjit.plugins.opencl_backend.{family}")
        found.extend(module.specs())
    return found
