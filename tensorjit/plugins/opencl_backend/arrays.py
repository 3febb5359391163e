"""The OpenCL device's values: ``pyopencl.array.Array``, strided (views may be
transposed, sliced, negatively strided) over a buffer of the device's memory pool."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from tensorjit.core.devices import ArrayKind
from tensorjit.plugins.device_kernels.arrays import byte_extent, is_c_contiguous
from tensorjit.plugins.opencl_backend import DEVICE


def _array_class() -> type | None:
    # A pyopencl array can only exist once pyopencl.array was imported: never import it
    # here, so recognising values costs nothing where OpenCL is not used.
    module = sys.modules.get("pyopencl.array")
    return None if module is None else module.Array


def buffer_id(value: Any) -> int | None:
    base = value.base_data
    return None if base is None else base.int_ptr


def _target() -> Any:
    from tensorjit.plugins.opencl_backend.target import OPENCL

    return OPENCL


class OpenCLArrays(ArrayKind):
    device = DEVICE
    type_name = "pyopencl.array.Array"

    def is_value(self, value: Any) -> bool:
        cls = _array_class()
        return cls is not None and isinstance(value, cls)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        from tensorjit.plugins.opencl_backend.runtime import runtime

        return runtime().empty(shape, dtype)

    def from_host(self, array: Any) -> Any:
        host = np.asarray(array, order="C")
        value = self.empty(host.shape, host.dtype)
        if host.size:
            value.set(host)
        return value

    def to_host(self, value: Any) -> np.ndarray:
        from tensorjit.plugins.device_kernels.arrays import contiguous

        if value.size == 0:
            return np.empty(value.shape, value.dtype)
        return contiguous(_target(), value).get()

    def write_from_host(self, dest: Any, array: Any) -> bool:
        if dest.shape != array.shape or dest.dtype != array.dtype or not is_c_contiguous(dest):
            return False
        if dest.size:
            dest.set(np.asarray(array, order="C"))
        return True

    def copy(self, value: Any) -> Any:
        from tensorjit.plugins.device_kernels.arrays import copy_to_new

        return copy_to_new(_target(), value)

    def may_share_memory(self, a: Any, b: Any) -> bool:
        ida, idb = buffer_id(a), buffer_id(b)
        if ida is None or idb is None or ida != idb:
            return False
        (la, ha), (lb, hb) = byte_extent(a), byte_extent(b)
        return la < hb and lb < ha

    def describe(self, value: Any) -> str:
        return f"{self.type_name} on opencl of dtype {value.dtype} and shape {value.shape}"

    def view(self, base: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> Any:
        """A view of ``base``'s buffer (``strides`` and ``offset`` in bytes)."""
        import pyopencl.array as cla

        return cla.Array(
            base.queue,
            tuple(int(n) for n in shape),
            base.dtype,
            strides=tuple(int(s) for s in strides),
            data=base.base_data,
            offset=int(offset),
            allocator=base.allocator,
        )


OPENCL_ARRAYS = OpenCLArrays()
# A view of an OpenCL array (tests and the GEMM family build them).
view = OPENCL_ARRAYS.view
