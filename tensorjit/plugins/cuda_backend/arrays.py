"""The CUDA device's values: ``CudaArray``, a strided array (byte strides, byte offset)
over an allocation of the runtime's memory pool; views share the allocation (which
stays alive while any view does)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.plugins.cuda_backend import DEVICE
from tensorjit.plugins.device_kernels.arrays import StridedDeviceArrays, c_strides


class _Flags:
    __slots__ = ("c_contiguous", "f_contiguous", "writeable")

    def __init__(self, c: bool, f: bool) -> None:
        self.c_contiguous, self.f_contiguous, self.writeable = c, f, True


class CudaArray:
    """``shape``, ``dtype``, byte ``strides`` and ``offset`` over ``base`` (a pooled
    device allocation, None for an array without elements)."""

    __slots__ = ("shape", "dtype", "strides", "offset", "base_data", "size", "ndim", "flags")

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: Any,
        base: Any,
        strides: tuple[int, ...] | None = None,
        offset: int = 0,
    ) -> None:
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        self.base_data = base
        self.offset = int(offset)
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        contiguous = c_strides(self.shape, self.dtype.itemsize)
        self.strides = contiguous if strides is None else tuple(int(s) for s in strides)
        c = self.size <= 1 or all(
            s == c for n, s, c in zip(self.shape, self.strides, contiguous) if n != 1
        )
        fortran = c_strides(self.shape[::-1], self.dtype.itemsize)[::-1]
        f = self.size <= 1 or all(
            s == c for n, s, c in zip(self.shape, self.strides, fortran) if n != 1
        )
        self.flags = _Flags(c, f)

    @property
    def pointer_base(self) -> int:
        return 0 if self.base_data is None else int(self.base_data)

    @property
    def pointer(self) -> int:
        """The device address of the first element."""
        return self.pointer_base + self.offset

    def get(self) -> np.ndarray:
        """A host copy (a C-contiguous array only)."""
        if self.size == 0:
            return np.empty(self.shape, self.dtype)
        if not self.flags.c_contiguous:
            raise ValueError("get() of a non-contiguous CUDA array: copy it contiguous first")
        from tensorjit.plugins.cuda_backend.runtime import runtime

        return runtime().to_host(self.pointer, self.shape, self.dtype)

    def set(self, host: Any) -> None:
        """Write host values of this array's shape (a C-contiguous array only)."""
        host = np.asarray(host, dtype=self.dtype, order="C")  # (0-d stays 0-d)
        if host.shape != self.shape or not self.flags.c_contiguous:
            raise ValueError(f"set() of shape {host.shape} into a CUDA array {self.shape}")
        if self.size:
            from tensorjit.plugins.cuda_backend.runtime import runtime

            runtime().to_device(self.pointer, host)

    def __repr__(self) -> str:
        return f"CudaArray(shape={self.shape}, dtype={self.dtype}, strides={self.strides})"


class CudaArrays(StridedDeviceArrays):
    device = DEVICE
    type_name = "CudaArray"

    def target(self) -> Any:
        from tensorjit.plugins.cuda_backend.target import CUDA

        return CUDA

    def is_value(self, value: Any) -> bool:
        return isinstance(value, CudaArray)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        from tensorjit.plugins.cuda_backend.runtime import runtime

        return runtime().empty(shape, dtype)

    def buffer_address(self, value: Any) -> int | None:
        return None if value.base_data is None else value.pointer_base

    def view(self, base: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> Any:
        return CudaArray(shape, base.dtype, base.base_data, strides, offset)


CUDA_ARRAYS = CudaArrays()
