"""What the shared kernel families need from one device backend.

A runtime (``Target.runtime()``, made on first use) must offer:

- ``kernel(source, name)``: the compiled kernel ``name`` of ``source`` (cached);
- ``launch(kernel, items, *args)``: run over ``items`` work-items (none when 0);
- ``launch_chunks(kernel, items, *args)``: the same for kernels whose items each loop
  over a chunk of elements (a CPU device spreads them over its cores);
- ``launch_groups(kernel, groups, group_size, *args)``;
- ``empty(shape, dtype)``: a new C-contiguous device array;
- ``buffer_args(value)``: a device array as the two kernel arguments ``char *p, long
  offset`` (base pointer and byte offset);
- ``fp64``, ``is_cpu``, ``compute_units``, ``work_per_item`` (the config choice of
  elements per work-item, "auto" or a number), ``device`` (hashable identity).

Kernels are launched with at least ``items`` work-items: every kernel guards its index
(a CUDA grid is a whole number of blocks).

Device arrays must have ``shape``, ``strides`` (bytes), ``dtype``, ``size``, ``ndim``,
``offset`` (bytes into their buffer), ``flags.c_contiguous``, ``get()`` (a host copy)
and ``set(host)`` (a contiguous write); the array kind adds ``view(base, shape,
strides, offset)``: a new header over ``base``'s buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tensorjit.core.devices import ArrayKind
from tensorjit.plugins.cstyle import Dialect


@dataclass(frozen=True, eq=False)
class Target:
    """One device backend as the kernel families see it (compared by identity)."""

    backend: str  # the backend's name, prefix of its kernel names ("opencl:reduce")
    device: str  # the device its values live on
    plugin: str  # the plugin registering the kernels
    dialect: Dialect
    runtime: Callable[[], Any]
    arrays: ArrayKind
    #: the source every program starts with, for the dtypes it uses
    preamble: Callable[[set[str]], str]

    def kernel_name(self, family: str) -> str:
        return f"{self.backend}:{family}"

    def __repr__(self) -> str:
        return f"Target({self.backend})"


def node_label(node: Any) -> str:
    """How a kernel's errors name its node: the op and where the user created it."""
    return f"{node.op} (created at {node.outputs[-1].created_at or 'unknown'})"
