"""The OpenCL device's values: ``pyopencl.array.Array``, strided (views may be
transposed, sliced, negatively strided) over a buffer of the device's memory pool."""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from tensorjit.plugins.device_kernels.arrays import StridedDeviceArrays
from tensorjit.plugins.opencl_backend import DEVICE


def _array_class() -> type | None:
    # A pyopencl array can only exist once pyopencl.array was imported: never import it
    # here, so recognising values costs nothing where OpenCL is not used.
    module = sys.modules.get("pyopencl.array")
    return None if module is None else module.Array


_FAST_HEADERS = [True]  # pyopencl takes its own fast constructor's arguments


def new_array(
    queue: Any,
    shape: tuple[int, ...],
    dtype: np.dtype,
    strides: tuple[int, ...],
    allocator: Any,
    data: Any = None,
    offset: int = 0,
) -> Any:
    """A ``pyopencl.array.Array`` header (over ``data``, or a new buffer from
    ``allocator``). pyopencl's public constructor re-derives and checks the shape with
    NumPy (~15 us an array, the better part of a small call on a device); the arguments
    here are already checked, so its fast constructor (what its own views use) is taken
    where this pyopencl has it, the public one otherwise."""
    import pyopencl.array as cla

    if _FAST_HEADERS[0]:
        try:
            return cla.Array(
                None,
                shape,
                dtype,
                allocator=allocator,
                data=data,
                offset=offset,
                strides=strides,
                _fast=True,
                _size=math.prod(shape),
                _context=queue.context,
                _queue=queue,
            )
        except TypeError:
            _FAST_HEADERS[0] = False  # (a pyopencl without it)
    return cla.Array(
        queue, shape, dtype, allocator=allocator, data=data, offset=offset, strides=strides
    )


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
        return new_array(
            base.queue,
            tuple(int(n) for n in shape),
            base.dtype,
            tuple(int(s) for s in strides),
            base.allocator,
            data=base.base_data,
            offset=int(offset),
        )


OPENCL_ARRAYS = OpenCLArrays()
# A view of an OpenCL array (tests and the GEMM family build them).
view = OPENCL_ARRAYS.view
