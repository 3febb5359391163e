"""The OpenCL device's values: ``pyopencl.array.Array``, strided (views may be
transposed, sliced, negatively strided) over a buffer of the device's memory pool."""

from __future__ import annotations

import sys
from typing import Any

from tensorjit.plugins.device_kernels.arrays import StridedDeviceArrays
from tensorjit.plugins.opencl_backend import DEVICE


def _array_class() -> type | None:
    # A pyopencl array can only exist once pyopencl.array was imported: never import it
    # here, so recognising values costs nothing where OpenCL is not used.
    module = sys.modules.get("pyopencl.array")
    return None if module is None else module.Array


def buffer_id(value: Any) -> int | None:
    base = value.base_data
    return None if base is None else base.int_ptr


class OpenCLArrays(StridedDeviceArrays):
    device = DEVICE
    type_name = "pyopencl.array.Array"

    def target(self) -> Any:
        from tensorjit.plugins.opencl_backend.target import OPENCL

        return OPENCL

    def is_value(self, value: Any) -> bool:
        cls = _array_class()
        return cls is not None and isinstance(value, cls)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        from tensorjit.plugins.opencl_backend.runtime import runtime

        return runtime().empty(shape, dtype)

    def buffer_address(self, value: Any) -> int | None:
        return buffer_id(value)

    def view(self, base: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> Any:
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
