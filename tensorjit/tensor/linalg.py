"""Linear algebra: products (matmul, tensordot, batched_dot), diagonals, decompositions,
solvers and norms, with NumPy/SciPy semantics.

The decompositions and solvers take matrices (2-d). Their gradients assume real inputs
and are built from tensor ops, so they can be differentiated again. ``cholesky`` and
``eigh`` read one triangle of their input only (as LAPACK does), and their gradients
are the exact derivatives of that: they are zero in the triangle that is not read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.linalg

from tensorjit.core.gradient import grad_undefined
from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.op import Op
from tensorjit.tensor import math as tm
from tensorjit.tensor.elemwise import DimShuffle
from tensorjit.tensor.rounding import abs_float64, summation_bound
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable

__all__ = [
    "batched_dot",
    "cholesky",
    "det",
    "diag",
    "diagonal",
    "eigh",
    "inv",
    "matmul",
    "matrix_inverse",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_triangular",
    "svd",
    "tensordot",
    "trace",
]


# ---------------------------------------------------------------- helpers
def _is_float(var: Variable) -> bool:
    return np.dtype(var.type.dtype).kind == "f"


def _nondiff(op: Op, i: int, x: Variable) -> Any:
    """The gradient for a non-float input: none for integers (no dependence), undefined
    for complex ones (the gradients here are written for real inputs)."""
    if np.dtype(x.type.dtype).kind == "c":
        return grad_undefined(op, i, x, "gradients of complex inputs are not implemented")
    return None


def _complex_result(op: Op, inputs: Sequence[Variable], outputs: Sequence[Variable]) -> Any:
    """Undefined gradients for every input if the result is complex, else None."""
    if any(np.dtype(o.type.dtype).kind == "c" for o in outputs):
        reason = "gradients of complex values are not implemented"
        return [grad_undefined(op, i, v, reason) for i, v in enumerate(inputs)]
    return None


def _swap(x: Variable) -> Variable:
    """``x`` with its last two axes swapped (the matrix transpose of a stack)."""
    n = x.type.ndim
    return DimShuffle(n, tuple(range(n - 2)) + (n - 1, n - 2))(x)


def _col(v: Variable) -> Variable:
    return DimShuffle(1, (0, "x"))(v)


def _row(v: Variable) -> Variable:
    return DimShuffle(1, ("x", 0))(v)


def _require_ndim(fname: str, x: Variable, ndims: Sequence[int], what: str) -> None:
    if x.type.ndim not in ndims:
        raise ValueError(f"{fname}: {what} must be {_ndim_words(ndims)}, got {x.describe()}")


def _ndim_words(ndims: Sequence[int]) -> str:
    return " or ".join(f"{n}-d" for n in ndims)


def _square_matrix(fname: str, x: Any) -> Variable:
    """``x`` as a tensor, checked to be a matrix whose static shape may be square."""
    x = as_tensor_variable(x)
    if x.type.ndim != 2:
        raise ValueError(f"{fname}: expected a square matrix (2-d), got {x.describe()}")
    m, n = x.type.shape
    if m is not None and n is not None and m != n:
        raise ValueError(
            f"{fname}: expected a square matrix, but {x.describe()} has static shape ({m}, {n})"
        )
    return x


def _check_square_value(fname: str, node: Apply, value: np.ndarray, i: int = 0) -> None:
    if value.ndim != 2 or value.shape[0] != value.shape[1]:
        raise ValueError(
            f"{fname}: expected a square matrix for {node.inputs[i].describe()}, got an "
            f"array of shape {value.shape}"
        )


def _call(fname: str, node: Apply, fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args)``, with LAPACK failures reported with the variable they concern."""
    try:
        return fn(*args, **kwargs)
    except np.linalg.LinAlgError as exc:
        raise np.linalg.LinAlgError(f"{fname} of {node.inputs[0].describe()}: {exc}") from None


@functools.cache
def _probe_dtypes(fname: str, dtypes: tuple[str, ...]) -> tuple[str, ...]:
    """The output dtypes NumPy/SciPy give for inputs of ``dtypes`` (tiny probes)."""
    probe = _PROBES[fname]
    args = [np.eye(2, dtype=d) for d in dtypes]
    try:
        outs = probe(*args)
    except (TypeError, ValueError, np.linalg.LinAlgError) as exc:
        raise TypeError(
            f"{fname}: inputs of dtype {', '.join(dtypes)} are not supported: {exc}"
        ) from None
    if not isinstance(outs, tuple):
        outs = (outs,)
    return tuple(np.asarray(o).dtype.name for o in outs)


_PROBES: dict[str, Callable] = {
    "matmul": lambda a, b: np.matmul(a, b),
    "tensordot": lambda a, b: np.tensordot(a, b, 1),
    "cholesky": lambda a: scipy.linalg.cholesky(a, lower=True),
    "solve_triangular": lambda a, b: scipy.linalg.solve_triangular(a, b),
    "inv": lambda a: np.linalg.inv(a),
    "pinv": lambda a: np.linalg.pinv(a),
    "solve": lambda a, b: np.linalg.solve(a, b),
    "det": lambda a: np.linalg.det(a),
    "slogdet": lambda a: tuple(np.linalg.slogdet(a)),
    "eigh": lambda a: tuple(np.linalg.eigh(a)),
    "qr": lambda a: tuple(np.linalg.qr(a)),
    "svd": lambda a: tuple(np.linalg.svd(a)),
}


def _out_dtypes(fname: str, *vars_: Variable) -> tuple[str, ...]:
    return _probe_dtypes(fname, tuple(v.type.dtype for v in vars_))


def _store(output_storage: list, i: int, node: Apply, value: Any) -> None:
    output_storage[i][0] = np.asarray(value, dtype=node.outputs[i].type.numpy_dtype)


def _sum_to(g: Variable, x: Variable) -> Variable:
    """Sum the gradient ``g`` of a broadcast use of ``x`` back to ``x``'s dimensions."""
    extra = g.type.ndim - x.type.ndim
    if extra:
        g = tm.sum(g, axis=tuple(range(extra)))
    axes = tuple(
        a for a, (xs, gs) in enumerate(zip(x.type.shape, g.type.shape)) if xs == 1 and gs != 1
    )
    if axes:
        g = tm.sum(g, axis=axes, keepdims=True)
    return g


def _eye_like(v: Variable) -> Variable:
    """The identity matrix of the length of vector ``v``."""
    return AllocDiag(0)(tm.ones_like(v))


# ---------------------------------------------------------------- matmul
def _broadcast_batch(a: Variable, b: Variable) -> tuple[int | None, ...]:
    sa, sb = a.type.shape[:-2], b.type.shape[:-2]
    n = max(len(sa), len(sb))
    sa = (1,) * (n - len(sa)) + sa
    sb = (1,) * (n - len(sb)) + sb
    out: list[int | None] = []
    for axis, (x, y) in enumerate(zip(sa, sb)):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x is not None and y is not None and x != y:
            raise ValueError(
                f"matmul: batch dimensions of {a.describe()} and {b.describe()} can not be "
                f"broadcast together (batch axis {axis}: lengths {x} and {y})"
            )
        else:
            out.append(x if x is not None else y)
    return tuple(out)


def _check_inner(fname: str, a: Variable, b: Variable, ka: int | None, kb: int | None) -> None:
    if ka is not None and kb is not None and ka != kb:
        raise ValueError(
            f"{fname}: shapes {a.type.shape} and {b.type.shape} are not aligned: the "
            f"contracted lengths differ ({ka} in {a.describe()}, {kb} in {b.describe()})"
        )


class MatMul(Op):
    """``numpy.matmul`` of two stacks of matrices (ndim >= 2 each) with broadcast batch
    dimensions. A batch dimension broadcasts only if its static length is 1."""

    __props__ = ()

    def make_node(self, a: Any, b: Any) -> Apply:
        a, b = as_tensor_variable(a), as_tensor_variable(b)
        if a.type.ndim < 2 or b.type.ndim < 2:
            raise ValueError(
                f"MatMul takes stacks of matrices (ndim >= 2), got {a.describe()} and "
                f"{b.describe()}; use matmul() for vectors"
            )
        _check_inner("matmul", a, b, a.type.shape[-1], b.type.shape[-2])
        shape = _broadcast_batch(a, b) + (a.type.shape[-2], b.type.shape[-1])
        (dtype,) = _out_dtypes("matmul", a, b)
        return Apply(self, [a, b], [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        a, b = node.inputs
        sa, sb = input_shapes
        na, nb = a.type.ndim - 2, b.type.ndim - 2
        n = max(na, nb)
        batch = []
        for j in range(n):
            ia, ib = j - (n - na), j - (n - nb)
            if ia < 0 or a.type.shape[ia] == 1:
                batch.append(sb[ib] if ib >= 0 else 1)
            elif ib < 0 or b.type.shape[ib] == 1:
                batch.append(sa[ia])
            else:
                batch.append(sa[ia])
        return [tuple(batch) + (sa[-2], sb[-1])]

    def perform(self, node, inputs, output_storage):
        a, b = inputs
        if a.shape[-1] != b.shape[-2]:
            raise ValueError(
                f"matmul: shapes {a.shape} and {b.shape} are not aligned: {a.shape[-1]} "
                f"(last dimension of {node.inputs[0].describe()}) != {b.shape[-2]} "
                f"(second-to-last dimension of {node.inputs[1].describe()})"
            )
        ba, bb = a.shape[:-2], b.shape[:-2]
        n = max(len(ba), len(bb))
        sa = (1,) * (n - len(ba)) + tuple(node.inputs[0].type.shape[:-2])
        sb = (1,) * (n - len(bb)) + tuple(node.inputs[1].type.shape[:-2])
        ba = (1,) * (n - len(ba)) + ba
        bb = (1,) * (n - len(bb)) + bb
        for axis in range(n):
            if ba[axis] != bb[axis] and not (sa[axis] == 1 or sb[axis] == 1):
                raise ValueError(
                    f"matmul: batch dimensions {a.shape[:-2]} and {b.shape[:-2]} do not match "
                    f"(batch axis {axis}); a batch dimension broadcasts only if its static "
                    f"length is 1. Inputs: {node.inputs[0].describe()}, "
                    f"{node.inputs[1].describe()}"
                )
        _store(output_storage, 0, node, np.matmul(a, b))

    def rounding_bounds(self, node, inputs):
        a, b = (abs_float64(v) for v in inputs)
        with np.errstate(all="ignore"):
            abs_sum = np.matmul(a, b)
        return [summation_bound(abs_sum, a.shape[-1], node.outputs[0].type.dtype)]

    def L_op(self, inputs, outputs, output_grads):
        undefined = _complex_result(self, inputs, outputs)
        if undefined is not None:
            return undefined
        a, b = inputs
        (g,) = output_grads
        ga = _sum_to(matmul(g, _swap(b)), a) if _is_float(a) else _nondiff(self, 0, a)
        gb = _sum_to(matmul(_swap(a), g), b) if _is_float(b) else _nondiff(self, 1, b)
        return [ga, gb]


def matmul(a: Any, b: Any) -> Variable:
    """``numpy.matmul``: matrix product with broadcast batch dimensions; a 1-d operand is
    promoted to a matrix (a row on the left, a column on the right) and the added axis
    removed from the result. Scalars are not allowed (use ``*``)."""
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    if a.type.ndim == 0 or b.type.ndim == 0:
        raise ValueError(
            f"matmul: scalar operands are not allowed (use * instead), got {a.describe()} "
            f"and {b.describe()}"
        )
    kb = b.type.shape[0] if b.type.ndim == 1 else b.type.shape[-2]
    _check_inner("matmul", a, b, a.type.shape[-1], kb)
    if a.type.ndim <= 2 and b.type.ndim <= 2:
        return tm.Dot()(a, b)  # the same thing for vectors and matrices (and GEMM-able)
    if b.type.ndim == 2:
        # A stack of matrices times one matrix is one product of the stack's rows (a
        # sequence model's projections): one GEMM, and the matrix's gradient is one GEMM
        # too, not a stack of products summed over the batch.
        return TensorDot((a.type.ndim - 1,), (0,))(a, b)
    a2 = _row(a) if a.type.ndim == 1 else a
    b2 = _col(b) if b.type.ndim == 1 else b
    out = MatMul()(a2, b2)
    n = out.type.ndim
    if b.type.ndim == 1:
        out = DimShuffle(n, tuple(range(n - 1)))(out)
        n -= 1
    if a.type.ndim == 1:
        out = DimShuffle(n, tuple(range(n - 2)) + (n - 1,))(out)
    return out


# ---------------------------------------------------------------- tensordot
class TensorDot(Op):
    """``numpy.tensordot(a, b, axes=(axes_a, axes_b))`` with normalized axes."""

    __props__ = ("axes_a", "axes_b")

    def __init__(self, axes_a: Sequence[int], axes_b: Sequence[int]):
        self.axes_a = tuple(int(i) for i in axes_a)
        self.axes_b = tuple(int(i) for i in axes_b)
        if len(self.axes_a) != len(self.axes_b):
            raise ValueError(
                f"tensordot: axes {self.axes_a} and {self.axes_b} have different lengths"
            )

    def _free(self, ndim_a: int, ndim_b: int) -> tuple[list[int], list[int]]:
        return (
            [i for i in range(ndim_a) if i not in self.axes_a],
            [i for i in range(ndim_b) if i not in self.axes_b],
        )

    def make_node(self, a: Any, b: Any) -> Apply:
        a, b = as_tensor_variable(a), as_tensor_variable(b)
        for axes, x in ((self.axes_a, a), (self.axes_b, b)):
            for ax in axes:
                if not 0 <= ax < x.type.ndim:
                    raise ValueError(f"tensordot: axis {ax} is out of range for {x.describe()}")
            if len(set(axes)) != len(axes):
                raise ValueError(f"tensordot: repeated axis in {axes} for {x.describe()}")
        for ia, ib in zip(self.axes_a, self.axes_b):
            la, lb = a.type.shape[ia], b.type.shape[ib]
            if la is not None and lb is not None and la != lb:
                raise ValueError(
                    f"tensordot: shape mismatch for sum: axis {ia} of {a.describe()} has length "
                    f"{la} but axis {ib} of {b.describe()} has length {lb}"
                )
        fa, fb = self._free(a.type.ndim, b.type.ndim)
        shape = tuple(a.type.shape[i] for i in fa) + tuple(b.type.shape[i] for i in fb)
        (dtype,) = _out_dtypes("tensordot", a, b)
        return Apply(self, [a, b], [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        sa, sb = input_shapes
        fa, fb = self._free(len(sa), len(sb))
        return [tuple(sa[i] for i in fa) + tuple(sb[i] for i in fb)]

    def perform(self, node, inputs, output_storage):
        a, b = inputs
        for ia, ib in zip(self.axes_a, self.axes_b):
            if a.shape[ia] != b.shape[ib]:
                raise ValueError(
                    f"tensordot: shape mismatch for sum: axis {ia} of "
                    f"{node.inputs[0].describe()} has length {a.shape[ia]} but axis {ib} of "
                    f"{node.inputs[1].describe()} has length {b.shape[ib]}"
                )
        _store(output_storage, 0, node, np.tensordot(a, b, (self.axes_a, self.axes_b)))

    def rounding_bounds(self, node, inputs):
        a, b = (abs_float64(v) for v in inputs)
        n_terms = int(np.prod([a.shape[i] for i in self.axes_a]))
        with np.errstate(all="ignore"):
            abs_sum = np.tensordot(a, b, (self.axes_a, self.axes_b))
        return [summation_bound(abs_sum, n_terms, node.outputs[0].type.dtype)]

    def L_op(self, inputs, outputs, output_grads):
        undefined = _complex_result(self, inputs, outputs)
        if undefined is not None:
            return undefined
        a, b = inputs
        (g,) = output_grads
        na, nb = a.type.ndim, b.type.ndim
        fa, fb = self._free(na, nb)
        ga, gb = _nondiff(self, 0, a), _nondiff(self, 1, b)
        if _is_float(a):
            # g (fa..., fb...) . b over fb -> (fa..., b's contracted axes in b's order)
            res = TensorDot(tuple(range(len(fa), len(fa) + len(fb))), tuple(fb))(g, b)
            src = fa + [self.axes_a[self.axes_b.index(s)] for s in sorted(self.axes_b)]
            ga = DimShuffle(na, tuple(src.index(i) for i in range(na)))(res)
        if _is_float(b):
            # a . g over fa -> (a's contracted axes in a's order..., fb...)
            res = TensorDot(tuple(fa), tuple(range(len(fa))))(a, g)
            src = [self.axes_b[self.axes_a.index(s)] for s in sorted(self.axes_a)] + fb
            gb = DimShuffle(nb, tuple(src.index(i) for i in range(nb)))(res)
        return [ga, gb]


def _norm_axes(fname: str, axes: Any, ndim: int, x: Variable) -> tuple[int, ...]:
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    out = []
    for ax in axes:
        if not isinstance(ax, (int, np.integer)) or isinstance(ax, bool):
            raise TypeError(f"{fname}: axes must be integers, got {ax!r}")
        if not -ndim <= ax < ndim:
            raise ValueError(f"{fname}: axis {ax} is out of range for {x.describe()}")
        out.append(int(ax) % ndim)
    return tuple(out)


def tensordot(a: Any, b: Any, axes: Any = 2) -> Variable:
    """``numpy.tensordot``: sum products over ``axes``, either an int N (the last N axes
    of ``a`` with the first N of ``b``) or a pair of axis sequences (or ints)."""
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    na, nb = a.type.ndim, b.type.ndim
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        n = int(axes)
        if n < 0 or n > na or n > nb:
            raise ValueError(
                f"tensordot: axes={n} is out of range for {a.describe()} and {b.describe()}"
            )
        axes_a, axes_b = tuple(range(na - n, na)), tuple(range(n))
    else:
        try:
            first, second = axes
        except (TypeError, ValueError):
            raise TypeError(
                f"tensordot: axes must be an int or a pair of axis sequences, got {axes!r}"
            ) from None
        axes_a = _norm_axes("tensordot", first, na, a)
        axes_b = _norm_axes("tensordot", second, nb, b)
        if len(axes_a) != len(axes_b):
            raise ValueError(
                f"tensordot: axes {axes!r} pair {len(axes_a)} axes of {a.describe()} with "
                f"{len(axes_b)} axes of {b.describe()}"
            )
    return TensorDot(axes_a, axes_b)(a, b)


def batched_dot(a: Any, b: Any) -> Variable:
    """``dot(a[i], b[i])`` for every ``i`` of the leading (batch) axis: a and b are each
    2-d (a batch of vectors) or 3-d (a batch of matrices)."""
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    _require_ndim("batched_dot", a, (2, 3), "the first argument")
    _require_ndim("batched_dot", b, (2, 3), "the second argument")
    la, lb = a.type.shape[0], b.type.shape[0]
    if la is not None and lb is not None and la != lb:
        raise ValueError(
            f"batched_dot: batch sizes differ: {la} for {a.describe()} and {lb} for {b.describe()}"
        )
    a3 = DimShuffle(2, (0, "x", 1))(a) if a.type.ndim == 2 else a
    b3 = DimShuffle(2, (0, 1, "x"))(b) if b.type.ndim == 2 else b
    _check_inner("batched_dot", a, b, a3.type.shape[2], b3.type.shape[1])
    out = MatMul()(a3, b3)
    keep = [0]
    if a.type.ndim == 3:
        keep.append(1)
    if b.type.ndim == 3:
        keep.append(2)
    if len(keep) != 3:
        out = DimShuffle(3, tuple(keep))(out)
    return out


# ---------------------------------------------------------------- diagonals
def _diag_len(n1: Any, n2: Any, offset: int) -> Any:
    """Length of the ``offset`` diagonal of an (n1, n2) matrix (ints or symbolic)."""
    if isinstance(n1, (int, np.integer)) and isinstance(n2, (int, np.integer)):
        return max(0, min(n1 + min(offset, 0), n2 - max(offset, 0)))
    length = tm.minimum(tm.sub(n1, max(-offset, 0)), tm.sub(n2, max(offset, 0)))
    return tm.maximum(length, 0)


class AllocDiag(Op):
    """A square matrix with vector ``v`` on its ``offset`` diagonal (``numpy.diag(v, k)``)."""

    __props__ = ("offset",)

    def __init__(self, offset: int = 0):
        self.offset = int(offset)

    def make_node(self, v: Any) -> Apply:
        v = as_tensor_variable(v)
        _require_ndim("diag", v, (1,), "the vector")
        n = v.type.shape[0]
        size = None if n is None else n + abs(self.offset)
        return Apply(self, [v], [TensorType(v.type.dtype, (size, size)).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        (n,) = input_shapes[0]
        size = tm.add(n, abs(self.offset)) if self.offset else n
        return [(size, size)]

    def perform(self, node, inputs, output_storage):
        _store(output_storage, 0, node, np.diag(inputs[0], self.offset))

    def grad(self, inputs, output_grads):
        if not _is_float(inputs[0]):
            return [_nondiff(self, 0, inputs[0])]
        return [ExtractDiag(self.offset, 0, 1)(output_grads[0])]


class ExtractDiag(Op):
    """``numpy.diagonal(x, offset, axis1, axis2)`` as a new array: the two axes are
    removed and the diagonal becomes the last axis."""

    __props__ = ("offset", "axis1", "axis2")

    def __init__(self, offset: int = 0, axis1: int = 0, axis2: int = 1):
        self.offset, self.axis1, self.axis2 = int(offset), int(axis1), int(axis2)
        if self.axis1 == self.axis2:
            raise ValueError("diagonal: axis1 and axis2 can not be the same")

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        if x.type.ndim < 2:
            raise ValueError(f"diagonal: the input must be at least 2-d, got {x.describe()}")
        for ax in (self.axis1, self.axis2):
            if not 0 <= ax < x.type.ndim:
                raise ValueError(f"diagonal: axis {ax} is out of range for {x.describe()}")
        n1, n2 = x.type.shape[self.axis1], x.type.shape[self.axis2]
        length = None if n1 is None or n2 is None else _diag_len(n1, n2, self.offset)
        shape = self._rest(x.type.shape) + (length,)
        return Apply(self, [x], [TensorType(x.type.dtype, shape).make_variable()])

    def _rest(self, shape: Sequence) -> tuple:
        return tuple(s for a, s in enumerate(shape) if a not in (self.axis1, self.axis2))

    def infer_shape(self, fgraph, node, input_shapes):
        (shape,) = input_shapes
        length = _diag_len(shape[self.axis1], shape[self.axis2], self.offset)
        return [self._rest(shape) + (length,)]

    def perform(self, node, inputs, output_storage):
        # np.diagonal returns a read-only view: copy it so that the result is ours.
        out = np.diagonal(inputs[0], self.offset, self.axis1, self.axis2).copy()
        output_storage[0][0] = out

    def grad(self, inputs, output_grads):
        (x,) = inputs
        if not _is_float(x):
            return [_nondiff(self, 0, x)]
        op = IncDiagonal(self.offset, self.axis1, self.axis2)
        return [op(tm.zeros_like(x), output_grads[0])]


class IncDiagonal(Op):
    """A copy of ``x`` with ``d`` added to its ``offset`` diagonal over (axis1, axis2);
    ``d`` has the shape ``ExtractDiag`` gives for ``x``."""

    __props__ = ("offset", "axis1", "axis2")

    def __init__(self, offset: int = 0, axis1: int = 0, axis2: int = 1):
        self.offset, self.axis1, self.axis2 = int(offset), int(axis1), int(axis2)

    def make_node(self, x: Any, d: Any) -> Apply:
        x, d = as_tensor_variable(x), as_tensor_variable(d)
        expected = ExtractDiag(self.offset, self.axis1, self.axis2).make_node(x).outputs[0]
        if d.type.ndim != expected.type.ndim:
            raise ValueError(
                f"{self}: the diagonal {d.describe()} must have {expected.type.ndim} dimensions"
            )
        if d.type.dtype != x.type.dtype:
            d = tm.cast(d, x.type.dtype)
        return Apply(self, [x, d], [x.type.make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        x, d = inputs
        out = x.copy()
        view = np.moveaxis(out, (self.axis1, self.axis2), (-2, -1))
        n1, n2 = view.shape[-2:]
        idx = np.arange(_diag_len(n1, n2, self.offset))
        view[..., idx + max(-self.offset, 0), idx + max(self.offset, 0)] += d
        output_storage[0][0] = out

    def grad(self, inputs, output_grads):
        (g,) = output_grads
        return [g, ExtractDiag(self.offset, self.axis1, self.axis2)(g)]


def diagonal(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Variable:
    """``numpy.diagonal``: the ``offset`` diagonal over ``axis1``/``axis2``, as the last
    axis of the result (a new array, not a view)."""
    x = as_tensor_variable(x)
    if x.type.ndim < 2:
        raise ValueError(f"diagonal: the input must be at least 2-d, got {x.describe()}")
    a1, a2 = _norm_axes("diagonal", (axis1, axis2), x.type.ndim, x)
    if a1 == a2:
        raise ValueError(f"diagonal: axis1 and axis2 can not be the same ({axis1}, {axis2})")
    return ExtractDiag(int(offset), a1, a2)(x)


def diag(v: Any, k: int = 0) -> Variable:
    """``numpy.diag``: a square matrix with vector ``v`` on its ``k``-th diagonal, or the
    ``k``-th diagonal of matrix ``v``."""
    v = as_tensor_variable(v)
    if v.type.ndim == 1:
        return AllocDiag(int(k))(v)
    if v.type.ndim == 2:
        return ExtractDiag(int(k), 0, 1)(v)
    raise ValueError(f"diag: the input must be 1-d or 2-d, got {v.describe()}")


def trace(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Variable:
    """``numpy.trace``: the sum along the ``offset`` diagonal."""
    return tm.sum(diagonal(x, offset, axis1, axis2), axis=-1)


# ---------------------------------------------------------------- triangles
class TriangularPart(Op):
    """``numpy.tril(x, k)`` (``lower=True``) or ``numpy.triu(x, k)`` of a matrix."""

    __props__ = ("lower", "k")

    def __init__(self, lower: bool, k: int = 0):
        self.lower, self.k = bool(lower), int(k)

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        _require_ndim("tril" if self.lower else "triu", x, (2,), "the input")
        return Apply(self, [x], [x.type.make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        fn = np.tril if self.lower else np.triu
        _store(output_storage, 0, node, fn(inputs[0], self.k))

    def grad(self, inputs, output_grads):
        return [self(output_grads[0]) if _is_float(inputs[0]) else _nondiff(self, 0, inputs[0])]


def _tril(x: Variable, k: int = 0) -> Variable:
    return TriangularPart(True, k)(x)


def _triu(x: Variable, k: int = 0) -> Variable:
    return TriangularPart(False, k)(x)


# ---------------------------------------------------------------- triangular solve
class _LinearSolve(Op):
    """Shared structure of the solvers: a square ``a``, a vector or matrix ``b`` of
    matching length, a result shaped like ``b``; subclasses give ``what`` and ``_solve``."""

    what = "solve"

    def make_node(self, a: Any, b: Any) -> Apply:
        a = _square_matrix(self.what, a)
        b = as_tensor_variable(b)
        _require_ndim(self.what, b, (1, 2), "the right-hand side")
        _check_inner(self.what, a, b, a.type.shape[0], b.type.shape[0])
        (dtype,) = _out_dtypes(self.what, a, b)
        return Apply(self, [a, b], [TensorType(dtype, b.type.shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[1]]

    def perform(self, node, inputs, output_storage):
        a, b = inputs
        _check_square_value(self.what, node, a)
        _check_rhs(self.what, node, a, b)
        _store(output_storage, 0, node, self._solve(node, a, b))


class SolveTriangular(_LinearSolve):
    """``scipy.linalg.solve_triangular(a, b, lower=lower, trans=trans)``: solves
    ``a x = b`` (trans=0) or ``a.T x = b`` (trans=1) reading one triangle of ``a``."""

    __props__ = ("lower", "trans")

    def __init__(self, lower: bool = False, trans: int = 0):
        self.lower = bool(lower)
        if trans in ("N", 0):
            trans = 0
        elif trans in ("T", 1):
            trans = 1
        else:
            raise ValueError(f"solve_triangular: trans must be 0/'N' or 1/'T', got {trans!r}")
        self.trans = trans

    what = "solve_triangular"

    def _solve(self, node, a, b):
        return _call(
            self.what,
            node,
            scipy.linalg.solve_triangular,
            a,
            b,
            trans=self.trans,
            lower=self.lower,
        )

    def L_op(self, inputs, outputs, output_grads):
        undefined = _complex_result(self, inputs, outputs)
        if undefined is not None:
            return undefined
        a, b = inputs
        (x,) = outputs
        (g,) = output_grads
        gb = SolveTriangular(self.lower, 1 - self.trans)(a, g)
        prod = tm.outer if b.type.ndim == 1 else (lambda u, v: tm.dot(u, v.T))
        ga = tm.neg(prod(gb, x) if self.trans == 0 else prod(x, gb))
        ga = _tril(ga) if self.lower else _triu(ga)
        return [
            ga if _is_float(a) else _nondiff(self, 0, a),
            gb if _is_float(b) else _nondiff(self, 1, b),
        ]


def _check_rhs(fname: str, node: Apply, a: np.ndarray, b: np.ndarray) -> None:
    if b.shape[0] != a.shape[0]:
        raise ValueError(
            f"{fname}: the right-hand side {node.inputs[1].describe()} has {b.shape[0]} "
            f"rows (shape {b.shape}), but the matrix {node.inputs[0].describe()} has "
            f"{a.shape[0]} (shape {a.shape})"
        )


def solve_triangular(a: Any, b: Any, lower: bool = False, trans: int | str = 0) -> Variable:
    """``scipy.linalg.solve_triangular``: ``x`` with ``a x = b`` (``trans=1``: ``a.T x = b``)
    for triangular ``a`` (only the ``lower`` or upper triangle is read)."""
    return SolveTriangular(lower, trans)(a, b)


# ---------------------------------------------------------------- cholesky
class _SquareMatrixMap(Op):
    """A map from a square matrix to a matrix of the same shape (cholesky, inv); the
    subclass gives ``what`` and ``_compute``."""

    what = ""

    def make_node(self, x: Any) -> Apply:
        x = _square_matrix(self.what, x)
        (dtype,) = _out_dtypes(self.what, x)
        return Apply(self, [x], [TensorType(dtype, x.type.shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        _check_square_value(self.what, node, x)
        result = np.empty(x.shape) if x.size == 0 else self._compute(node, x)
        _store(output_storage, 0, node, result)


class Cholesky(_SquareMatrixMap):
    """``scipy.linalg.cholesky(x, lower=lower)``: L with x = L L^T (or U with x = U^T U).
    Only the lower (upper) triangle of x is read."""

    __props__ = ("lower",)

    def __init__(self, lower: bool = True):
        self.lower = bool(lower)

    what = "cholesky"

    def _compute(self, node, x):
        return _call(self.what, node, scipy.linalg.cholesky, x, lower=self.lower)

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        if not _is_float(x):
            return [_nondiff(self, 0, x)]
        (chol,) = outputs
        (g,) = output_grads
        low, g_low = (chol, g) if self.lower else (chol.T, g.T)
        # S = L^-T Phi(L^T gL) L^-1, Phi = lower triangle with the diagonal halved.
        inner = tm.dot(low.T, g_low)
        phi = tm.sub(_tril(inner), tm.mul(0.5, diag(diag(inner))))
        left = SolveTriangular(True, 1)(low, phi)  # L^-T Phi
        s = SolveTriangular(True, 1)(low, left.T).T  # (L^-T Phi) L^-1
        sym = tm.add(s, s.T)
        part = _tril(sym) if self.lower else _triu(sym)
        return [tm.sub(part, diag(diag(s)))]


def cholesky(x: Any, lower: bool = True) -> Variable:
    """Cholesky factor of a symmetric positive definite matrix (``scipy.linalg.cholesky``,
    but lower triangular by default)."""
    return Cholesky(lower)(x)


# ---------------------------------------------------------------- inverse & co.
class MatrixInverse(_SquareMatrixMap):
    """``numpy.linalg.inv`` of a square matrix."""

    __props__ = ()

    what = "inv"

    def _compute(self, node, x):
        return _call(self.what, node, np.linalg.inv, x)

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        if not _is_float(x):
            return [_nondiff(self, 0, x)]
        (y,) = outputs
        (g,) = output_grads
        return [tm.neg(tm.dot(y.T, tm.dot(g, y.T)))]


def inv(x: Any) -> Variable:
    """``numpy.linalg.inv``: the inverse of a square matrix."""
    return MatrixInverse()(x)


matrix_inverse = inv  # Theano's name (its tensor.inv was the elementwise reciprocal)


class MatrixPinv(Op):
    """``numpy.linalg.pinv``: the Moore-Penrose pseudo-inverse of a matrix."""

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        _require_ndim("pinv", x, (2,), "the input")
        (dtype,) = _out_dtypes("pinv", x)
        shape = (x.type.shape[1], x.type.shape[0])
        return Apply(self, [x], [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        m, n = input_shapes[0]
        return [(n, m)]

    def perform(self, node, inputs, output_storage):
        _store(output_storage, 0, node, _call("pinv", node, np.linalg.pinv, inputs[0]))

    def L_op(self, inputs, outputs, output_grads):
        # Golub & Pereyra, valid where the rank is locally constant:
        # gA = -X^T G X^T + (I - A X) G^T X X^T + X^T X G^T (I - X A)
        (a,) = inputs
        if not _is_float(a):
            return [_nondiff(self, 0, a)]
        (xp,) = outputs
        (g,) = output_grads
        t1 = tm.neg(tm.dot(xp.T, tm.dot(g, xp.T)))
        gt_xxt = tm.dot(g.T, tm.dot(xp, xp.T))
        t2 = tm.sub(gt_xxt, tm.dot(a, tm.dot(xp, gt_xxt)))
        xtx_gt = tm.dot(tm.dot(xp.T, xp), g.T)
        t3 = tm.sub(xtx_gt, tm.dot(tm.dot(xtx_gt, xp), a))
        return [tm.add(tm.add(t1, t2), t3)]


def pinv(x: Any) -> Variable:
    """``numpy.linalg.pinv``: the pseudo-inverse (through the SVD) of an (m, n) matrix."""
    return MatrixPinv()(x)


class Solve(_LinearSolve):
    """``numpy.linalg.solve(a, b)`` for a square matrix ``a`` and a vector or matrix ``b``."""

    __props__ = ()

    def _solve(self, node, a, b):
        return _call(self.what, node, np.linalg.solve, a, b)

    def L_op(self, inputs, outputs, output_grads):
        undefined = _complex_result(self, inputs, outputs)
        if undefined is not None:
            return undefined
        a, b = inputs
        (x,) = outputs
        (g,) = output_grads
        gb = Solve()(a.T, g)
        ga = tm.neg(tm.outer(gb, x) if b.type.ndim == 1 else tm.dot(gb, x.T))
        return [
            ga if _is_float(a) else _nondiff(self, 0, a),
            gb if _is_float(b) else _nondiff(self, 1, b),
        ]


def solve(a: Any, b: Any) -> Variable:
    """``numpy.linalg.solve``: ``x`` with ``a x = b``, for a square ``a`` and a vector or
    matrix ``b``."""
    return Solve()(a, b)


class Det(Op):
    """``numpy.linalg.det`` of a square matrix (a 0-d result)."""

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = _square_matrix("det", x)
        (dtype,) = _out_dtypes("det", x)
        return Apply(self, [x], [TensorType(dtype, ()).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [()]

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        _check_square_value("det", node, x)
        _store(output_storage, 0, node, _call("det", node, np.linalg.det, x))

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        if not _is_float(x):
            return [_nondiff(self, 0, x)]
        (d,) = outputs
        (g,) = output_grads
        return [tm.mul(tm.mul(g, d), inv(x).T)]


def det(x: Any) -> Variable:
    """``numpy.linalg.det``: the determinant of a square matrix."""
    return Det()(x)


class SLogDet(Op):
    """``numpy.linalg.slogdet``: (sign, log|det|) of a square matrix."""

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = _square_matrix("slogdet", x)
        d_sign, d_log = _out_dtypes("slogdet", x)
        outs = [TensorType(d_sign, ()).make_variable(), TensorType(d_log, ()).make_variable()]
        return Apply(self, [x], outs)

    def infer_shape(self, fgraph, node, input_shapes):
        return [(), ()]

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        _check_square_value("slogdet", node, x)
        sign, logdet = _call("slogdet", node, np.linalg.slogdet, x)
        _store(output_storage, 0, node, sign)
        _store(output_storage, 1, node, logdet)

    def L_op(self, inputs, outputs, output_grads):
        # The sign is piecewise constant: only log|det| contributes.
        (x,) = inputs
        if not _is_float(x):
            return [_nondiff(self, 0, x)]
        g_log = output_grads[1]
        return [tm.mul(g_log, inv(x).T)]


def slogdet(x: Any) -> tuple[Variable, Variable]:
    """``numpy.linalg.slogdet``: ``(sign, logabsdet)`` of a square matrix."""
    sign, logdet = SLogDet()(x)
    return sign, logdet


# ---------------------------------------------------------------- eigh
class Eigh(Op):
    """``numpy.linalg.eigh(x, UPLO)``: eigenvalues (ascending) and eigenvectors (columns)
    of a symmetric matrix; only the lower (``UPLO='L'``) or upper triangle is read."""

    __props__ = ("UPLO",)

    def __init__(self, UPLO: str = "L"):
        if UPLO not in ("L", "U"):
            raise ValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
        self.UPLO = UPLO

    def make_node(self, x: Any) -> Apply:
        x = _square_matrix("eigh", x)
        d_w, d_v = _out_dtypes("eigh", x)
        n = x.type.shape[0] if x.type.shape[0] is not None else x.type.shape[1]
        outs = [TensorType(d_w, (n,)).make_variable(), TensorType(d_v, (n, n)).make_variable()]
        return Apply(self, [x], outs)

    def infer_shape(self, fgraph, node, input_shapes):
        n = input_shapes[0][0]
        return [(n,), (n, n)]

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        _check_square_value("eigh", node, x)
        w, v = _call("eigh", node, np.linalg.eigh, x, UPLO=self.UPLO)
        _store(output_storage, 0, node, w)
        _store(output_storage, 1, node, v)

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        if not _is_float(x):
            return [_nondiff(self, 0, x)]
        w, v = outputs
        gw, gv = output_grads
        # M = V (diag(gw) + F o (V^T gV)) V^T with F_ij = 1 / (w_j - w_i), F_ii = 0
        d = tm.sub(_row(w), _col(w))
        f = tm.true_div(d, tm.add(tm.mul(d, d), _eye_like(w)))
        inner = tm.add(diag(gw), tm.mul(f, tm.dot(v.T, gv)))
        m = tm.dot(v, tm.dot(inner, v.T))
        # The input's other triangle is not read: entry (i, j) stands for (i, j) and (j, i).
        if self.UPLO == "L":
            return [tm.add(_tril(m), _triu(m, 1).T)]
        return [tm.add(_triu(m), _tril(m, -1).T)]


def eigh(x: Any, UPLO: str = "L") -> tuple[Variable, Variable]:
    """``numpy.linalg.eigh``: ``(w, v)`` of a symmetric matrix, ``x @ v = v * w``."""
    w, v = Eigh(UPLO)(x)
    return w, v


# ---------------------------------------------------------------- qr
class QR(Op):
    """``numpy.linalg.qr(x, mode)`` for mode 'reduced' (Q, R), 'complete' (Q, R) or 'r'
    (R only)."""

    __props__ = ("mode",)

    def __init__(self, mode: str = "reduced"):
        if mode not in ("reduced", "complete", "r"):
            raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
        self.mode = mode

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        _require_ndim("qr", x, (2,), "the input")
        d_q, d_r = _out_dtypes("qr", x)
        m, n = x.type.shape
        k = None if m is None or n is None else min(m, n)
        r_type = TensorType(d_r, (m if self.mode == "complete" else k, n))
        if self.mode == "r":
            return Apply(self, [x], [r_type.make_variable()])
        q_type = TensorType(d_q, (m, m if self.mode == "complete" else k))
        return Apply(self, [x], [q_type.make_variable(), r_type.make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        m, n = input_shapes[0]
        k = tm.minimum(m, n)
        if self.mode == "complete":
            return [(m, m), (m, n)]
        if self.mode == "r":
            return [(k, n)]
        return [(m, k), (k, n)]

    def perform(self, node, inputs, output_storage):
        res = _call("qr", node, np.linalg.qr, inputs[0], mode=self.mode)
        if self.mode == "r":
            _store(output_storage, 0, node, res)
        else:
            _store(output_storage, 0, node, res[0])
            _store(output_storage, 1, node, res[1])

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        if not _is_float(x):
            return [_nondiff(self, 0, x)]
        m, n = x.type.shape
        if m is not None and n is not None and m < n:
            return [
                grad_undefined(
                    self, 0, x, "the QR gradient is implemented for (m, n) inputs with m >= n"
                )
            ]
        if self.mode == "complete" and not (m is None or n is None or m == n):
            return [grad_undefined(self, 0, x, "Q of mode='complete' is not unique for m > n")]
        if self.mode == "r":
            q, _ = QR("reduced")(x)
            (r,) = outputs
            gq, gr = tm.zeros_like(q), output_grads[0]
        else:
            q, r = outputs
            gq, gr = output_grads
        # A_bar = (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q
        mm = tm.sub(tm.dot(r, gr.T), tm.dot(gq.T, q))
        copyltu = tm.add(_tril(mm), _tril(mm, -1).T)
        b = tm.add(gq, tm.dot(q, copyltu))
        return [SolveTriangular(False, 0)(_RequireSquare(_QR_GRAD_SHAPES)(r, r), b.T).T]


class _RequireSquare(Op):
    """Passes ``value`` through, checking at run time that matrix ``m`` is square:
    gradients built for inputs of unknown static shape need this where their formula
    does."""

    __props__ = ("message",)
    view_map = {0: [0]}

    def __init__(self, message: str):
        self.message = message

    def make_node(self, value: Any, m: Any) -> Apply:
        value, m = as_tensor_variable(value), as_tensor_variable(m)
        return Apply(self, [value, m], [value.type.make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        value, m = inputs
        if m.shape[0] != m.shape[1]:
            raise ValueError(f"{self.message} (got a matrix of shape {m.shape})")
        output_storage[0][0] = value

    def grad(self, inputs, output_grads):
        return [output_grads[0], None]


_QR_GRAD_SHAPES = (
    "qr: the gradient is implemented for (m, n) inputs with m >= n (and m == n for "
    "mode='complete'), but R is not square"
)


def qr(x: Any, mode: str = "reduced") -> Any:
    """``numpy.linalg.qr``: ``(Q, R)`` (mode 'reduced' or 'complete') or ``R`` (mode 'r')."""
    out = QR(mode)(x)
    return tuple(out) if mode != "r" else out


# ---------------------------------------------------------------- svd
class SVD(Op):
    """``numpy.linalg.svd(x, full_matrices, compute_uv)``: (U, S, Vh), or S alone."""

    __props__ = ("full_matrices", "compute_uv")

    def __init__(self, full_matrices: bool = True, compute_uv: bool = True):
        self.full_matrices, self.compute_uv = bool(full_matrices), bool(compute_uv)

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        _require_ndim("svd", x, (2,), "the input")
        d_u, d_s, d_v = _out_dtypes("svd", x)
        m, n = x.type.shape
        k = None if m is None or n is None else min(m, n)
        s = TensorType(d_s, (k,)).make_variable()
        if not self.compute_uv:
            return Apply(self, [x], [s])
        full = self.full_matrices
        u = TensorType(d_u, (m, m if full else k)).make_variable()
        vh = TensorType(d_v, (n if full else k, n)).make_variable()
        return Apply(self, [x], [u, s, vh])

    def infer_shape(self, fgraph, node, input_shapes):
        m, n = input_shapes[0]
        k = tm.minimum(m, n)
        if not self.compute_uv:
            return [(k,)]
        if self.full_matrices:
            return [(m, m), (k,), (n, n)]
        return [(m, k), (k,), (k, n)]

    def perform(self, node, inputs, output_storage):
        res = _call(
            "svd",
            node,
            np.linalg.svd,
            inputs[0],
            full_matrices=self.full_matrices,
            compute_uv=self.compute_uv,
        )
        if not self.compute_uv:
            _store(output_storage, 0, node, res)
            return
        for i, value in enumerate(res):
            _store(output_storage, i, node, value)

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        if not _is_float(x):
            return [_nondiff(self, 0, x)]
        if not self.compute_uv:
            u, _, vh = SVD(False, True)(x)
            (gs,) = output_grads
            return [tm.dot(tm.mul(u, _row(gs)), vh)]
        m, n = x.type.shape
        if self.full_matrices and m is not None and n is not None and m != n:
            return [
                grad_undefined(
                    self,
                    0,
                    x,
                    "with full_matrices=True the extra singular vectors of a non-square "
                    "matrix are not unique; use full_matrices=False (or a statically square "
                    "matrix)",
                )
            ]
        u, s, vh = outputs
        gu, gs, gvh = output_grads
        if self.full_matrices and (m is None or n is None):
            check = _RequireSquare(
                "svd: the gradient with full_matrices=True is implemented for square inputs "
                "only (the extra singular vectors of other shapes are not unique)"
            )
            u, s, vh = check(u, x), check(s, x), check(vh, x)
        v, gv = vh.T, gvh.T
        # Townsend (2016), for distinct non-zero singular values:
        # A_bar = U [(F o (U^T gU - gU^T U)) S + diag(gS) + S (F o (V^T gV - gV^T V))] V^T
        #         + (I - U U^T) gU S^-1 V^T + U S^-1 gV^T (I - V V^T)
        s2 = tm.mul(s, s)
        d = tm.sub(_row(s2), _col(s2))
        f = tm.true_div(d, tm.add(tm.mul(d, d), _eye_like(s)))
        utgu = tm.dot(u.T, gu)
        vtgv = tm.dot(v.T, gv)
        j = tm.mul(f, tm.sub(utgu, utgu.T))
        kk = tm.mul(f, tm.sub(vtgv, vtgv.T))
        core = tm.add(tm.add(tm.mul(j, _row(s)), diag(gs)), tm.mul(_col(s), kk))
        out = tm.dot(u, tm.dot(core, vh))
        gu_s = tm.true_div(gu, _row(s))  # gU S^-1
        out = tm.add(out, tm.dot(tm.sub(gu_s, tm.dot(u, tm.dot(u.T, gu_s))), vh))
        gv_s = tm.true_div(gv, _row(s))  # gV S^-1
        out = tm.add(out, tm.dot(u, tm.sub(gv_s.T, tm.dot(tm.dot(gv_s.T, v), vh))))
        return [out]


def svd(x: Any, full_matrices: bool = True, compute_uv: bool = True) -> Any:
    """``numpy.linalg.svd``: ``(U, S, Vh)`` with ``x = U @ diag(S) @ Vh``, or ``S`` alone
    when ``compute_uv=False``."""
    out = SVD(full_matrices, compute_uv)(x)
    return tuple(out) if compute_uv else out


# ---------------------------------------------------------------- norm
def _abs_sq(x: Variable) -> Variable:
    return tm.sqr(tm.abs(x)) if np.dtype(x.type.dtype).kind == "c" else tm.sqr(x)


def _restore_dims(out: Variable, ndim: int, axes: Sequence[int]) -> Variable:
    pattern: list[Any] = []
    k = 0
    for a in range(ndim):
        if a in axes:
            pattern.append("x")
        else:
            pattern.append(k)
            k += 1
    return DimShuffle(out.type.ndim, tuple(pattern))(out)


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Variable:
    """``numpy.linalg.norm``: vector norms (ord None/2, 1, inf, -inf, 0 or any p) over one
    axis, matrix norms ('fro'/None, 'nuc', 1, -1, inf, -inf, 2, -2) over two axes; with
    ``axis=None`` a 1-d input has a vector norm, a 2-d one a matrix norm, and with ``ord``
    None any input the 2-norm of its flattening. Integer inputs are converted to float64."""
    x = as_tensor_variable(x)
    nd = x.type.ndim
    if np.dtype(x.type.dtype).kind not in "fc":
        x = tm.cast(x, "float64")
    if axis is None:
        if ord is None:
            out = tm.sqrt(tm.sum(_abs_sq(x)))
            return _restore_dims(out, nd, range(nd)) if keepdims else out
        if nd not in (1, 2):
            raise ValueError(
                f"norm: with ord={ord!r} and axis=None the input must be 1-d or 2-d, got "
                f"{x.describe()}"
            )
        axes = tuple(range(nd))
    else:
        raw = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        axes = _norm_axes("norm", raw, nd, x)
        if len(set(axes)) != len(axes):
            raise ValueError(f"norm: repeated axis in {axis!r}")
    if len(axes) == 1:
        out = _vector_norm(x, ord, axes[0])
    elif len(axes) == 2:
        out = _matrix_norm(x, ord, axes)
    else:
        raise ValueError(f"norm: axis must name 1 or 2 axes, got {axis!r}")
    return _restore_dims(out, nd, axes) if keepdims else out


def _vector_norm(x: Variable, ord: Any, axis: int) -> Variable:
    if ord is None or (not isinstance(ord, str) and ord == 2):
        return tm.sqrt(tm.sum(_abs_sq(x), axis=axis))
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
    if ord == np.inf:
        return tm.max(tm.abs(x), axis=axis)
    if ord == -np.inf:
        return tm.min(tm.abs(x), axis=axis)
    if ord == 0:
        real = {"complex64": "float32", "complex128": "float64"}.get(x.type.dtype, x.type.dtype)
        return tm.sum(tm.cast(tm.neq(x, 0), real), axis=axis)
    if ord == 1:
        return tm.sum(tm.abs(x), axis=axis)
    p = float(ord)
    return tm.pow(tm.sum(tm.pow(tm.abs(x), p), axis=axis), 1.0 / p)


def _matrix_norm(x: Variable, ord: Any, axes: tuple[int, int]) -> Variable:
    row, col = axes
    if ord is None or ord == "fro":
        return tm.sqrt(tm.sum(_abs_sq(x), axis=axes))
    if ord in (1, -1, np.inf, -np.inf):
        reduce = tm.max if ord > 0 else tm.min
        inner, outer = (row, col) if ord in (1, -1) else (col, row)
        sums = tm.sum(tm.abs(x), axis=inner)
        return reduce(sums, axis=outer - 1 if outer > inner else outer)
    if ord in (2, -2, "nuc"):
        if x.type.ndim != 2:
            raise ValueError(
                f"norm: ord={ord!r} (singular values) is implemented for 2-d inputs only, "
                f"got {x.describe()}"
            )
        m = x if (row, col) == (0, 1) else x.T
        s = svd(m, compute_uv=False)
        if ord == "nuc":
            return tm.sum(s)
        return tm.max(s) if ord == 2 else tm.min(s)
    raise ValueError(f"norm: invalid norm order {ord!r} for matrices")
