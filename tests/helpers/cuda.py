"""What the CUDA backend's tests share: the skip where no CUDA device is usable, and a
runtime that compiles kernels to PTX without a device (CI machines have no GPU): every
kernel a function would launch is rendered, compiled by nvcc or NVRTC and checked to
define its entry point; launching raises."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tensorjit.core.hooks import get_plugin_system
from tensorjit.plugins.cuda_backend import runtime as cuda_runtime
from tensorjit.plugins.cuda_backend.compiler import (
    NoCudaCompiler,
    compile_ptx,
    compiler,
    entry_names,
)

REASON = get_plugin_system().registries.backends.unavailable_reason("cuda")
NEEDS_CUDA = pytest.mark.skipif(
    REASON is not None, reason=f"no CUDA device (hardware/driver absent): {REASON}"
)


def compiler_reason(choice: str) -> str | None:
    from tensorjit.core.config import config

    try:
        with config.change_flags(cuda_compiler=choice):
            compiler()
    except NoCudaCompiler as exc:
        return str(exc)
    return None


def cublas_reason() -> str | None:
    """None where libcublas loads (the CUDA toolkit, or the nvidia-cublas wheel)."""
    from tensorjit.plugins.cuda_backend.cublas import CublasUnavailable, binding

    try:
        binding()
    except CublasUnavailable as exc:
        return str(exc)
    return None


class NoDevice(RuntimeError):
    pass


class PtxOnlyRuntime:
    """A stand-in device of compute capability 7.5 (the oldest CUDA 13 targets) with
    fp64, on which kernels compile for real and launches raise. Arrays are headers
    without memory (a compiled function's constants get one), writes to them are
    dropped and reads raise."""

    is_cpu = False
    fp64 = True
    work_per_item = "auto"
    compute_units = 40
    arch = "compute_75"
    device = "ptx-only"

    def __init__(self) -> None:
        self.compiled: dict[str, str] = {}  # source -> PTX
        self.kernels: list[tuple[str, str]] = []

    def kernel(self, source: str, name: str) -> tuple[str, str]:
        ptx = self.compiled.get(source)
        if ptx is None:
            ptx = self.compiled[source] = compile_ptx(source, self.arch)
        assert name in entry_names(ptx), f"{name} is not an entry point of its PTX"
        self.kernels.append((source, name))
        return source, name

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        from tensorjit.plugins.cuda_backend.arrays import CudaArray

        return CudaArray(shape, dtype, None)

    def to_device(self, dest_pointer: int, host: Any) -> None:
        pass

    def _no_device(self, *args: Any, **kwargs: Any) -> Any:
        raise NoDevice("no CUDA device: this runtime only compiles kernels to PTX")

    to_host = launch = launch_chunks = launch_groups = buffer_args = _no_device


@contextmanager
def ptx_only_device() -> Iterator[PtxOnlyRuntime]:
    """The CUDA backend made available on a PtxOnlyRuntime while inside."""
    backends = get_plugin_system().registries.backends
    saved_runtime = cuda_runtime._RUNTIME
    saved_reason = backends._availability.pop("cuda", "unset")
    rt = PtxOnlyRuntime()
    cuda_runtime._RUNTIME = rt
    backends._availability["cuda"] = None
    try:
        yield rt
    finally:
        cuda_runtime._RUNTIME = saved_runtime
        if saved_reason == "unset":
            backends._availability.pop("cuda", None)
        else:
            backends._availability["cuda"] = saved_reason
