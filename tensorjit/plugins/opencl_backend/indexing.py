"""OpenCL kernels: indexing (being written; no specs yet)."""

from __future__ import annotations

from tensorjit.core.registries import KernelSpec


def specs() -> list[KernelSpec]:
    return []
