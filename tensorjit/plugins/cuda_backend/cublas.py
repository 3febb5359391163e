"""Dot, 2-d MatMul, Gemm (GEMM and GEMV) and Ger on the CUDA device through cuBLAS.

cuBLAS is the toolkit's library (``libcublas``, or the ``nvidia-cublas`` wheel), called
through cffi in ABI mode: nothing is compiled against its headers. Calls go on the
default stream, after the kernels launched before them. alpha and beta are read on the
device (``CUBLAS_POINTER_MODE_DEVICE``): a graph constant becomes a cached device scalar,
any other scalar is cast on the device to the product's dtype: no host sync. The stride
mapping (no copies for C-ordered, Fortran-ordered or sliced operands) is blas_calls.py's.
Float32 and float64; integer products stay on the host.
"""

from __future__ import annotations

import glob
import os
import threading
from functools import cache
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.registries import KernelSpec
from tensorjit.plugins.cuda_backend.blas_calls import (
    Matrix,
    column_major,
    gemm_call,
    gemv_call,
    ger_call,
)
from tensorjit.plugins.device_kernels import blas_kernels
from tensorjit.plugins.device_kernels.arrays import copy_to_new, is_c_contiguous
from tensorjit.plugins.device_kernels.blas_plan import BlasPlan, BlasPlanner
from tensorjit.plugins.device_kernels.elementwise import (
    copy_into,
    device_can_run,
)

FLOATS = {"float32": ("S", "float"), "float64": ("D", "double")}
OPS = {"N": 0, "T": 1}
POINTER_MODE_DEVICE = 1

CDEF = """
typedef void *cublasHandle_t;
int cublasCreate_v2(cublasHandle_t *handle);
int cublasDestroy_v2(cublasHandle_t handle);
int cublasSetPointerMode_v2(cublasHandle_t handle, int mode);
int cublasGetVersion_v2(cublasHandle_t handle, int *version);
"""
for _p, _t in (("S", "float"), ("D", "double")):
    CDEF += f"""
int cublas{_p}gemm_v2(cublasHandle_t h, int transa, int transb, int m, int n, int k,
    const {_t} *alpha, const {_t} *a, int lda, const {_t} *b, int ldb,
    const {_t} *beta, {_t} *c, int ldc);
int cublas{_p}gemv_v2(cublasHandle_t h, int trans, int m, int n, const {_t} *alpha,
    const {_t} *a, int lda, const {_t} *x, int incx, const {_t} *beta, {_t} *y, int incy);
int cublas{_p}ger_v2(cublasHandle_t h, int m, int n, const {_t} *alpha, const {_t} *x,
    int incx, const {_t} *y, int incy, {_t} *a, int lda);
"""


class CublasUnavailable(RuntimeError):
    """libcublas could not be loaded, or cublasCreate failed."""


def library_candidates() -> list[str]:
    from tensorjit.plugins.cuda_backend.compiler import wheel_libraries

    home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    found = wheel_libraries("libcublas.so*")
    found += sorted(glob.glob(os.path.join(home, "lib64", "libcublas.so*")))
    return found + ["libcublas.so", "libcublas.so.13", "libcublas.so.12"]


@cache
def binding() -> tuple[Any, Any]:
    """(ffi, lib) of cuBLAS, loaded once."""
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    errors = []
    for name in library_candidates():
        try:
            return ffi, ffi.dlopen(name)
        except OSError as exc:
            errors.append(f"{name}: {exc}")
    raise CublasUnavailable("libcublas could not be loaded: " + "; ".join(errors[-3:]))


class Cublas:
    """A cuBLAS handle of the runtime's device (device pointer mode, default stream)."""

    def __init__(self, rt: Any) -> None:
        self.ffi, self.lib = binding()
        rt.make_current()
        handle = self.ffi.new("cublasHandle_t *")
        self.check(self.lib.cublasCreate_v2(handle), "cublasCreate")
        self.handle = handle[0]
        self.check(self.lib.cublasSetPointerMode_v2(self.handle, POINTER_MODE_DEVICE), "mode")
        self.rt = rt
        self.scalars: dict[tuple[str, float], Any] = {}
        self.lock = threading.Lock()

    @staticmethod
    def check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"cuBLAS {what} failed with status {status}")

    def ptr(self, dtype: str, address: int) -> Any:
        return self.ffi.cast(FLOATS[dtype][1] + " *", address)

    def constant(self, dtype: str, value: float) -> Any:
        """A device scalar holding ``value`` (made once per dtype and value)."""
        key = (dtype, float(value))
        scalar = self.scalars.get(key)
        if scalar is None:
            scalar = self.scalars[key] = self.rt.empty((), dtype)
            scalar.set(np.asarray(value, dtype))
        return scalar

    def _run(self, routine: str, dtype: str, *args: Any) -> None:
        """``cublas<S|D><routine>_v2(handle, *args)``; device addresses are given as
        ``(address,)`` tuples and passed as pointers of ``dtype``."""
        p = FLOATS[dtype][0]
        values = [self.ptr(dtype, a[0]) if isinstance(a, tuple) else a for a in args]
        self.rt.make_current()
        self.check(getattr(self.lib, f"cublas{p}{routine}_v2")(self.handle, *values), p + routine)

    def gemm(self, dtype: str, call: Any, alpha: Any, beta: Any) -> None:
        c = call
        self._run(
            "gemm", dtype, OPS[c.transa], OPS[c.transb], c.m, c.n, c.k, (alpha.pointer,),
            (c.a,), c.lda, (c.b,), c.ldb, (beta.pointer,), (c.c,), c.ldc,
        )  # fmt: skip

    def gemv(self, dtype: str, call: Any, alpha: Any, beta: Any) -> None:
        c = call
        self._run(
            "gemv", dtype, OPS[c.trans], c.m, c.n, (alpha.pointer,), (c.a,), c.lda,
            (c.x,), c.incx, (beta.pointer,), (c.y,), c.incy,
        )  # fmt: skip

    def ger(self, dtype: str, call: Any, alpha: Any) -> None:
        c = call
        self._run(
            "ger", dtype, c.m, c.n, (alpha.pointer,), (c.x,), c.incx, (c.y,), c.incy,
            (c.a,), c.lda,
        )  # fmt: skip


_HANDLES: dict[int, Cublas] = {}
_HANDLE_LOCK = threading.Lock()


def cublas(rt: Any) -> Cublas:
    with _HANDLE_LOCK:
        handle = _HANDLES.get(id(rt))
        if handle is None:
            handle = _HANDLES[id(rt)] = Cublas(rt)
        return handle


# ---------------------------------------------------------------- operands
def _target() -> Any:
    from tensorjit.plugins.cuda_backend.target import CUDA

    return CUDA


def matrix(v: Any) -> Matrix:
    size = v.dtype.itemsize
    return Matrix(v.pointer, v.shape[0], v.shape[1], v.strides[0] // size, v.strides[1] // size)


def addressable(v: Any) -> Any:
    """``v`` if BLAS can address it without a copy (a column-major view of a matrix, a
    positive step of a vector), else a C-contiguous copy."""
    size = v.dtype.itemsize
    if any(s % size for s in v.strides):
        return copy_to_new(_target(), v)
    if v.ndim == 2 and column_major(matrix(v)) is not None:
        return v
    if v.ndim == 1 and (v.shape[0] <= 1 or v.strides[0] > 0):
        return v
    return v if is_c_contiguous(v) else copy_to_new(_target(), v)


def step(v: Any) -> int:
    """A vector's element step for BLAS (any positive step when it has one element)."""
    return v.strides[0] // v.dtype.itemsize if v.shape[0] > 1 else 1


def _takes(node: Apply) -> bool:
    """Whether the CUDA device runs ``node``: its device, and cuBLAS usable here."""
    return device_can_run(_target(), node) and ready()  # no cuBLAS: they run elsewhere


PLANS = BlasPlanner(_takes)


def _scalar(handle: Cublas, dtype: str, source: Any, value: Any) -> Any:
    """The device scalar of alpha or beta, of ``dtype``: the plan's constant, else the
    input ``value``."""
    if not BlasPlan.is_input(source):
        return handle.constant(dtype, float(source))
    if value.dtype == np.dtype(dtype):
        return value
    out = handle.rt.empty(value.shape, dtype)
    copy_into(_target(), out, value)
    return out


def _scale(out: Any, beta: Any) -> None:
    """``out *= beta`` for a product over an empty inner axis, on the host: BLAS would
    return early without scaling (rare, so a sync is acceptable here)."""
    arrays = _target().arrays
    b = arrays.to_host(beta).reshape(())
    # beta == 0: out is not read (it may hold anything, as BLAS allows)
    scaled = np.zeros(out.shape, out.dtype) if b == 0 else arrays.to_host(out) * b
    copy_into(_target(), out, arrays.from_host(scaled.astype(out.dtype)))


def _via_copy(handle: Cublas, dtype: str, out: Any, x: Any, y: Any, alpha: Any, beta: Any):
    """The product into a contiguous copy of ``out`` (a target BLAS can not address),
    written back."""
    tmp = copy_to_new(_target(), out)
    product_into(handle, dtype, tmp, x, y, alpha, beta)
    copy_into(_target(), out, tmp)


def product_into(
    handle: Cublas, dtype: str, out: Any, x: Any, y: Any, alpha: Any, beta: Any
) -> None:
    """``out = alpha dot(x, y) + beta out`` (``out`` already holds the addend unless beta
    is 0; x and y do not overlap it)."""
    if out.size == 0:
        return
    x, y = addressable(x), addressable(y)
    k = x.shape[-1]
    if k == 0:
        _scale(out, beta)
        return
    if x.ndim == 2 and y.ndim == 2:
        call = gemm_call(matrix(out), matrix(x), matrix(y))
        if call is None:
            _via_copy(handle, dtype, out, x, y, alpha, beta)
        else:
            handle.gemm(dtype, call, alpha, beta)
        return
    if out.ndim == 1 and out.shape[0] > 1 and out.strides[0] <= 0:
        _via_copy(handle, dtype, out, x, y, alpha, beta)
        return
    if x.ndim == 2:
        a, v = matrix(x), y
    elif y.ndim == 2:
        a, v = matrix(y).T, x
    else:  # vector . vector (a 0-d out): a one-row matrix times a vector
        a, v = Matrix(x.pointer, 1, k, k * step(x), step(x)), y
    incy = step(out) if out.ndim == 1 else 1
    handle.gemv(dtype, gemv_call(out.pointer, incy, a, v.pointer, step(v)), alpha, beta)


def matmul_into(out: Any, a: Any, b: Any, accumulate: bool = False) -> None:
    """out = a @ b, or out += a @ b (2-d, one float dtype): the Target's ``matmul``."""
    dtype = out.dtype.name
    handle = cublas(_target().runtime())
    alpha, beta = handle.constant(dtype, 1.0), handle.constant(dtype, float(accumulate))
    product_into(handle, dtype, out, a, b, alpha, beta)


def ready() -> bool:
    """Whether cuBLAS loads here (the Target's ``matmul_ready``)."""
    try:
        binding()
    except CublasUnavailable:
        return False
    return True


class CublasProducts:
    """One plan's products through cuBLAS, which computes ``out = alpha x y + beta
    out``: an addend that is not the target is copied into it first."""

    def __init__(self, plan: BlasPlan) -> None:
        self.plan = plan

    def product(self, out: Any, c: Any, x: Any, y: Any, alpha: Any, beta: Any) -> None:
        plan = self.plan
        handle = cublas(_target().runtime())
        if c is not out and (BlasPlan.is_input(plan.beta) or float(plan.beta) != 0.0):
            copy_into(_target(), out, c)
        a = _scalar(handle, plan.dtype, plan.alpha, alpha)
        b = _scalar(handle, plan.dtype, plan.beta, beta)
        product_into(handle, plan.dtype, out, x, y, a, b)

    def ger(self, out: Any, z: Any, x: Any, y: Any, alpha: Any) -> None:
        if not out.size:
            return
        if z is not out:
            copy_into(_target(), out, z)
        plan = self.plan
        handle = cublas(_target().runtime())
        x, y = addressable(x), addressable(y)
        scalar = _scalar(handle, plan.dtype, plan.alpha, alpha)
        target = out if column_major(matrix(out)) else copy_to_new(_target(), out)
        call = ger_call(matrix(target), x.pointer, step(x), y.pointer, step(y))
        handle.ger(plan.dtype, call, scalar)
        if target is not out:
            copy_into(_target(), out, target)


class CublasGemm:
    """cuBLAS as the shared BLAS factories' ``GemmProvider``
    (device_kernels/blas_kernels.py): a library's calls, which launch plans do not
    record."""

    launches_only = False

    @property
    def target(self) -> Any:
        return _target()

    def bind(self, plan: BlasPlan) -> CublasProducts:
        return CublasProducts(plan)


def specs() -> list[KernelSpec]:
    return blas_kernels.specs(CublasGemm(), PLANS)
