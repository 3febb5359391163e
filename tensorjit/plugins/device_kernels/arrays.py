"""Helpers on device arrays that every device backend shares (strided arrays over a
buffer, with a byte offset: pyopencl's arrays, tensorjit's CUDA arrays)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorjit.core.devices import ArrayKind
from tensorjit.plugins.device_kernels.target import Target


def c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a C-contiguous array of ``shape``."""
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


def array_nbytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    """The bytes of a new C-contiguous array of ``shape``; a negative length is refused,
    as NumPy refuses it."""
    if any(n < 0 for n in shape):
        raise ValueError(f"negative dimensions are not allowed: {shape}")
    return math.prod(shape) * dtype.itemsize


def bytes_text(nbytes: int) -> str:
    """``nbytes`` for a reader: exact, and in the largest binary unit below it."""
    size, unit = float(nbytes), ""
    for bigger in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{nbytes} bytes" if not unit else f"{size:.2f} {unit} ({nbytes} bytes)"


def allocation_error(
    device: str, shape: tuple[int, ...], dtype: np.dtype, nbytes: int, why: str
) -> MemoryError:
    """The error for an array a device could not allocate: its size, shape and dtype, the
    device, and ``why`` (the device's limit or its driver's words), as NumPy's own
    MemoryError names the size rather than a driver status."""
    return MemoryError(
        f"cannot allocate {bytes_text(nbytes)} on {device} for an array of shape {shape} "
        f"and dtype {dtype}: {why}"
    )


def byte_offset(value: Any) -> int:
    """Where ``value`` starts in the buffer ``runtime.buffer_args`` passes for it: a
    device array's offset; zero for a host ``ndarray`` (the host target passes its data
    address)."""
    return int(getattr(value, "offset", 0))


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


class StridedDeviceArrays(ArrayKind):
    """The array kind of a device whose values are strided views over buffers (what
    every device backend's kind shares). A subclass gives ``is_value``, ``empty``,
    ``view``, ``buffer_address`` (None for a value without a buffer) and ``target``."""

    def target(self) -> Target:
        raise NotImplementedError

    def buffer_address(self, value: Any) -> int | None:
        raise NotImplementedError

    def view(self, base: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> Any:
        """A view of ``base``'s buffer (``strides`` and ``offset`` in bytes)."""
        raise NotImplementedError

    def from_host(self, array: Any) -> Any:
        host = np.asarray(array, order="C")  # (a 0-d value stays 0-d)
        value = self.empty(host.shape, host.dtype)
        if host.size:
            value.set(host)
        return value

    def to_host(self, value: Any) -> np.ndarray:
        if value.size == 0:
            return np.empty(value.shape, value.dtype)
        return contiguous(self.target(), value).get()

    def write_from_host(self, dest: Any, array: Any) -> bool:
        if dest.shape != array.shape or dest.dtype != array.dtype or not is_c_contiguous(dest):
            return False
        if dest.size:
            dest.set(np.asarray(array, order="C"))
        return True

    def copy(self, value: Any) -> Any:
        return copy_to_new(self.target(), value)

    def may_share_memory(self, a: Any, b: Any) -> bool:
        ida, idb = self.buffer_address(a), self.buffer_address(b)
        if ida is None or idb is None or ida != idb:
            return False
        (la, ha), (lb, hb) = byte_extent(a), byte_extent(b)
        return la < hb and lb < ha

    def describe(self, value: Any) -> str:
        return f"{self.type_name} on {self.device} of dtype {value.dtype} and shape {value.shape}"
