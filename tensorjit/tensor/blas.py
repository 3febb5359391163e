"""GEMM and GEMV: ``beta * z + alpha * dot(x, y)`` in one BLAS call.

The kernels call the BLAS that SciPy ships (``scipy.linalg.blas``), so there is nothing
to detect or link. Row-major arrays are handed to the column-major BLAS as their
transposes: ``C = aAB + bC`` is computed as ``C.T = aB.T A.T + bC.T``, which needs no
copies for C-contiguous operands.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.linalg import blas as scipy_blas

from tensorjit.core.devices import HOST
from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.tensor.math import Reduce, dot, mul, reusable_buffer, sqr
from tensorjit.tensor.rounding import abs_float64, is_exact, product_bound, summation_bound
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable

BLAS_DTYPES = ("float32", "float64", "complex64", "complex128")


def _result_type(z: Any) -> Any:
    # Built ops compute on the host (placement moves them), even when z lives on a device.
    return z.type.on_device(HOST)


class _BlasUpdate(Op):
    """A BLAS call that updates its first input z; ``inplace=True`` overwrites z."""

    __props__ = ("inplace",)

    def __init__(self, inplace: bool = False):
        self.inplace = inplace
        if inplace:
            self.destroy_map = {0: [0]}

    def __str__(self) -> str:
        return f"{type(self).__name__}_inplace" if self.inplace else type(self).__name__

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def _target(self, z: np.ndarray, output_storage: list) -> np.ndarray:
        """Where the result goes: z itself in place, else a (reused) C-ordered copy."""
        if self.inplace:
            return z
        target = reusable_buffer(output_storage[0][0], z.shape, z.dtype)
        if target is None:
            return np.array(z, order="C", copy=True)
        target[...] = z
        return target


class Gemm(_BlasUpdate):
    """``beta * z + alpha * dot(x, y)`` for a matrix x and a matrix (GEMM) or vector
    (GEMV) y; alpha and beta are scalars."""

    def make_node(self, z: Any, alpha: Any, x: Any, y: Any, beta: Any) -> Apply:
        z, alpha, x, y, beta = (as_tensor_variable(v) for v in (z, alpha, x, y, beta))
        dtype = z.type.dtype
        if dtype not in BLAS_DTYPES or any(v.type.dtype != dtype for v in (x, y)):
            raise TypeError(f"Gemm needs x, y and z of one BLAS dtype, got {x}, {y}, {z}")
        if x.type.ndim != 2 or y.type.ndim not in (1, 2) or z.type.ndim != y.type.ndim:
            raise TypeError("Gemm: x must be a matrix, y and z both matrices or both vectors")
        if alpha.type.ndim != 0 or beta.type.ndim != 0:
            raise TypeError("Gemm: alpha and beta must be scalars")
        return Apply(self, [z, alpha, x, y, beta], [_result_type(z).make_variable()])

    def input_check(self, node: Apply) -> Callable[[list[Any]], None]:
        return self.check_shapes

    @staticmethod
    def check_shapes(inputs: Sequence[Any]) -> None:
        z, _, x, y, _ = inputs
        if x.shape[1] != y.shape[0] or z.shape != x.shape[:1] + y.shape[1:]:
            raise ValueError(f"Gemm: shapes z {z.shape}, x {x.shape}, y {y.shape} are not aligned")

    def rounding_bounds(self, node, inputs):
        z, alpha, x, y, beta = inputs
        if is_exact(z.dtype):
            return None
        # the products' sums, scaled (+2 roundings: alpha's product, the add), and beta*z;
        # alpha 0 reads neither x nor y, beta 0 not z (BLAS's rule): they bound nothing
        a, b = abs(complex(alpha)), abs(complex(beta))
        with np.errstate(all="ignore"):
            scaled = 0.0 if a == 0 else a * product_bound(x, y, z.dtype, extra_roundings=2)
            target = 0.0 if b == 0 else summation_bound(b * abs_float64(z), 2, z.dtype)
            return [scaled + target]

    def perform(self, node, inputs, output_storage):
        self.check_shapes(inputs)
        z, alpha, x, y, beta = inputs
        alpha, beta = alpha.item(), beta.item()
        target = self._target(z, output_storage)
        if alpha == 0 or not x.size or not y.size:
            # Reference BLAS's rule, on every CPU: alpha 0 reads neither x nor y (their
            # NaNs do not show). OpenBLAS's small-matrix kernels (AVX-512) do read them.
            _scale(target, beta)
        elif target.flags.c_contiguous and target.size:
            _blas_into(target, alpha, x, y, beta)
        else:  # an odd-strided or empty target: still in place, without BLAS
            _scale(target, beta)
            target += alpha * np.dot(x, y)
        output_storage[0][0] = target


class PenalisedGemm(Op):
    """``(beta * z + alpha * dot(x, y), sum(z ** 2))``: an L2-penalised weight's update
    and its penalty's sum of squares, in two passes over the weight z (the unfused
    graph makes three; c_backend/linalg/penalised.py). ``dtype``: the
    sum's, as MappedReduce's; ``inplace=True`` overwrites z with the update (the sum is
    taken first). Made by the rewrite ``local_decay_with_penalty`` from graphs whose
    gradients are already built; x, y and z as Gemm's.

    In place, the node is a call's commit (core/compile/commit.py) and the cost reads
    its sum afterwards: a program checks nothing there, as an elementwise kernel on
    operands of static shapes can not fail (KernelSpec.cannot_fail)."""

    __props__ = ("dtype", "inplace")

    def __init__(self, dtype: str, inplace: bool = False):
        self.dtype = dtype
        self.inplace = inplace
        if inplace:
            self.destroy_map = {0: [0]}

    def __str__(self) -> str:
        return f"{type(self).__name__}{{{self.dtype}{', inplace' if self.inplace else ''}}}"

    def make_node(self, z: Any, alpha: Any, x: Any, y: Any, beta: Any) -> Apply:
        update = Gemm().make_node(z, alpha, x, y, beta)  # Gemm's checks
        if np.dtype(self.dtype).kind != "f" or np.dtype(update.inputs[0].type.dtype).kind != "f":
            raise TypeError(
                f"{type(self).__name__}: a float weight and sum are needed, got "
                f"{update.inputs[0].describe()} and a sum of dtype {self.dtype}"
            )
        updated = _result_type(update.inputs[0]).make_variable()
        squares = TensorType(self.dtype, ()).make_variable()
        return Apply(self, update.inputs, [updated, squares])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0], ()]

    def input_check(self, node: Apply) -> Callable[[list[Any]], None]:
        return Gemm.check_shapes

    def perform(self, node, inputs, output_storage):
        Gemm.check_shapes(inputs)
        z, alpha, x, y, beta = inputs
        squares = np.asarray(np.sum(np.square(z), dtype=self.dtype))
        # NumPy's BLAS (np.dot), as the Python backend's Gemm: see numpy_blas_kernel.
        # The product comes first: x or y may be views of z. Alpha 0 reads neither
        # (Gemm's rule).
        product = 0 if alpha.item() == 0 else np.dot(x, y) * z.dtype.type(alpha.item())
        if self.inplace:
            target = z
            target *= z.dtype.type(beta.item())
        else:
            target = np.multiply(z, z.dtype.type(beta.item()))
        target += product
        output_storage[0][0] = target
        output_storage[1][0] = squares

    def L_op(self, inputs, outputs, output_grads):
        from tensorjit.core.gradient import grad

        z, alpha, x, y, beta = inputs
        updated = gemm_reference(z, alpha, x, y, beta)
        squares = Reduce("sum", tuple(range(z.type.ndim)), self.dtype)(sqr(z))
        known = {out: g for out, g in zip((updated, squares), output_grads)}
        return grad(None, list(inputs), known_grads=known, disconnected_inputs="ignore")


def _as_fortran_operand(m: np.ndarray) -> tuple[np.ndarray, int] | None:
    """(array, trans) such that trans(array) == m, with array Fortran-contiguous."""
    if m.flags.f_contiguous:
        return m, 0
    if m.flags.c_contiguous:
        return m.T, 1
    return None


def _scale(target: np.ndarray, beta: float) -> None:
    """target *= beta in place, BLAS's way: beta 0 does not read the target (NaN -> 0)."""
    if beta == 0:
        target[...] = 0
    elif beta != 1:
        target *= beta


def _blas_into(target: np.ndarray, alpha, x: np.ndarray, y: np.ndarray, beta) -> None:
    """target = alpha * x @ y + beta * target, target C-contiguous, no operand copies."""
    fx = _as_fortran_operand(x)
    if y.ndim == 2:
        # Row-major C is column-major C.T = y.T @ x.T.
        fyt = _as_fortran_operand(y.T)
        fxt = _as_fortran_operand(x.T)
        if fyt is None or fxt is None:
            _scale(target, beta)
            target += alpha * np.dot(x, y)
            return
        gemm = _blas("gemm", target.dtype)
        (a, trans_a), (b, trans_b) = fyt, fxt
        result = gemm(
            alpha, a, b, beta, target.T, trans_a=trans_a, trans_b=trans_b, overwrite_c=True
        )
        if not np.shares_memory(result, target):  # the wrapper had to copy: store back
            target[...] = result.T
        return
    if fx is None:
        _scale(target, beta)
        target += alpha * np.dot(x, y)
        return
    a, trans = fx
    gemv = _blas("gemv", target.dtype)
    result = gemv(alpha, a, y, beta=beta, y=target, overwrite_y=True, trans=trans)
    if not np.shares_memory(result, target):
        target[...] = result


_BLAS_CACHE: dict[tuple[str, np.dtype], object] = {}


def _blas(name: str, dtype: np.dtype):
    fn = _BLAS_CACHE.get((name, dtype))
    if fn is None:
        fn = _BLAS_CACHE[(name, dtype)] = scipy_blas.get_blas_funcs(name, dtype=dtype)
    return fn


class Ger(_BlasUpdate):
    """``z + alpha * outer(x, y)`` (BLAS GER) for a matrix z and vectors x, y."""

    def make_node(self, z: Any, alpha: Any, x: Any, y: Any) -> Apply:
        z, alpha, x, y = (as_tensor_variable(v) for v in (z, alpha, x, y))
        dtype = z.type.dtype
        if dtype not in BLAS_DTYPES or any(v.type.dtype != dtype for v in (x, y)):
            raise TypeError(f"Ger needs z, x and y of one BLAS dtype, got {z}, {x}, {y}")
        if z.type.ndim != 2 or x.type.ndim != 1 or y.type.ndim != 1 or alpha.type.ndim != 0:
            raise TypeError("Ger: z must be a matrix, x and y vectors, alpha a scalar")
        return Apply(self, [z, alpha, x, y], [_result_type(z).make_variable()])

    def input_check(self, node: Apply) -> Callable[[list[Any]], None]:
        return self.check_shapes

    @staticmethod
    def check_shapes(inputs: Sequence[Any]) -> None:
        z, _, x, y = inputs
        if z.shape != (x.shape[0], y.shape[0]):
            raise ValueError(f"Ger: z {z.shape} does not match outer({x.shape}, {y.shape})")

    def perform(self, node, inputs, output_storage):
        self.check_shapes(inputs)
        z, alpha, x, y = inputs
        target = self._target(z, output_storage)
        if alpha == 0:  # BLAS's rule, as Gemm's: x and y are not read
            pass
        elif target.flags.c_contiguous and target.size:
            # Row-major z is column-major z.T = z.T + alpha * y x^T.
            ger = _blas("ger", target.dtype)
            result = ger(alpha.item(), y, x, a=target.T, overwrite_a=True)
            if not np.shares_memory(result, target):
                target[...] = result.T
        else:
            target += alpha * np.multiply.outer(x, y)
        output_storage[0][0] = target


def numpy_blas_kernel(node: Apply):
    """The Python backend's kernel for Gemm and Ger: NumPy's own BLAS (``np.dot``) into a
    scratch buffer the kernel keeps, then scaled in place into z.

    Op.perform calls SciPy's BLAS, which is a second OpenBLAS with its own thread pool;
    mixing it with NumPy's (every other product uses ``np.dot``) makes the two pools
    fight over the cores. The scratch buffer is kept between calls, so a weight update
    allocates nothing once warm."""
    op = node.op
    scratch: list = [None]

    def product(x: np.ndarray, y: np.ndarray, target: np.ndarray) -> np.ndarray:
        buf = scratch[0]
        if buf is None or buf.shape != target.shape or buf.dtype != target.dtype:
            buf = scratch[0] = np.empty(target.shape, dtype=target.dtype)
        if isinstance(op, Ger):
            return np.multiply.outer(x, y, out=buf)
        return np.dot(x, y, out=buf)

    def run(inputs: list, output_storage: list) -> None:
        if isinstance(op, Ger):
            z, alpha, x, y = inputs
            beta = 1.0
        else:
            z, alpha, x, y, beta = inputs
            beta = beta.item()
            if x.shape[1] != y.shape[0]:
                raise ValueError(
                    f"Gemm: shapes z {z.shape}, x {x.shape}, y {y.shape} are not aligned"
                )
        expected = (x.shape[0], y.shape[0]) if isinstance(op, Ger) else x.shape[:1] + y.shape[1:]
        if z.shape != expected:
            raise ValueError(f"{op}: z {z.shape} does not match x {x.shape}, y {y.shape}")
        target = op._target(z, output_storage)
        if not (x.dtype == y.dtype == target.dtype) or target.dtype.kind == "c":
            op.perform(node, inputs, output_storage)  # mixed or complex dtypes: the reference
            return
        if alpha == 0:  # as Op.perform: BLAS's rule, x and y are not read
            _scale(target, beta)
            output_storage[0][0] = target
            return
        prod = product(x, y, target)
        np.multiply(prod, alpha, out=prod)
        _scale(target, beta)
        np.add(target, prod, out=target)
        output_storage[0][0] = target

    return run


def gemm_reference(z, alpha, x, y, beta):
    """The symbolic meaning of Gemm, for tests and DebugMode."""
    return mul(beta, z) + mul(alpha, dot(x, y))


__all__ = [
    "BLAS_DTYPES",
    "Gemm",
    "Ger",
    "PenalisedGemm",
    "TensorType",
    "gemm_reference",
    "numpy_blas_kernel",
]
