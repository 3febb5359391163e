"""Helpers on device arrays that every device backend shares (strided arrays over a
buffer, with a byte offset: pyopencl's arrays, tensorjit's CUDA arrays)."""

from __future__ import annotations

from typing import Any

from tensorjit.plugins.device_kernels.target import Target


def is_c_contiguous(value: Any) -> bool:
    return bool(value.flags.c_contiguous) or value.size == 0


def byte_extent(value: Any) -> tuple[int, int]:
    """``[low, high)``: the bytes of its buffer that ``value`` may touch."""
    low = high = value.offset
    for n, stride in zip(value.shape, value.strides):
        if n == 0:
            return value.offset, value.offset
        if stride < 0:
            low += (n - 1) * stride
        else:
            high += (n - 1) * stride
    return low, high + value.dtype.itemsize


def reusable(t: Target, buffer: Any, shape: tuple, dtype: Any) -> Any:
    """``buffer`` (what the VM left in an output cell: a dead temporary, or an
    ``Out(borrow=True)`` output) when a result of ``shape``/``dtype`` may be written
    into it, else None; reusing it saves allocating a device array each call."""
    if (
        t.arrays.is_value(buffer)
        and buffer.shape == shape
        and buffer.dtype == dtype
        and is_c_contiguous(buffer)
    ):
        return buffer
    return None


def copy_to_new(t: Target, value: Any) -> Any:
    """A new C-contiguous device array equal to ``value``."""
    from tensorjit.plugins.device_kernels.elementwise import copy_into

    out = t.arrays.empty(value.shape, value.dtype)
    if value.size:
        copy_into(t, out, value)
    return out


def contiguous(t: Target, value: Any) -> Any:
    """``value`` itself when C-contiguous, else a contiguous copy."""
    return value if is_c_contiguous(value) else copy_to_new(t, value)
