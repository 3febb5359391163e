"""Allocation (Table 1): fill/second, full, full_like, eye, identity_like, arange, tri,
tril and triu.

``zeros``/``ones``/``zeros_like``/``ones_like``/``alloc`` live in ``tensorjit.tensor.math``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.op import Op
from tensorjit.core.memory.transfer_op import before_transfers
from tensorjit.tensor.elemwise import pad_left, resolve_weak_constants, unpadded
from tensorjit.tensor.math import (
    alloc,
    cast,
    ceil,
    int_div,
    maximum,
    mul,
    neg,
    reusable_buffer,
    sub,
    switch,
    true_div,
)
from tensorjit.tensor.math import sum as tsum
from tensorjit.tensor.shape_ops import shape_entries
from tensorjit.tensor.type import TensorType, normalize_dtype
from tensorjit.tensor.variable import as_tensor_variable, constant

__all__ = [
    "ARange",
    "Eye",
    "Second",
    "Tri",
    "arange",
    "eye",
    "fill",
    "full",
    "full_like",
    "identity_like",
    "second",
    "tri",
    "tril",
    "triu",
]


# ---------------------------------------------------------------- helpers
def _int_scalar(value: Any, what: str) -> Variable:
    """``value`` as an int64 scalar variable; a clear TypeError if it is not an integer."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} must be an integer, got {value!r}")
    if isinstance(value, (int, np.integer)):
        return constant(np.int64(value))
    try:
        var = as_tensor_variable(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer scalar, got {value!r}") from None
    if var.type.ndim != 0 or np.dtype(var.type.dtype).kind not in "iu":
        raise TypeError(f"{what} must be an integer scalar, got {var.describe()}")
    return var if var.type.dtype == "int64" else cast(var, "int64")


def _constant_int(var: Variable) -> int | None:
    return int(var.data) if isinstance(var, Constant) else None


def _check_length(var: Variable, what: str) -> int | None:
    n = _constant_int(var)
    if n is not None and n < 0:
        raise ValueError(f"{what} must not be negative, got {n}")
    return n


def _shape_list(shape: Any, what: str) -> list[Variable]:
    """A shape (an int, a sequence of ints/int scalars, or an int vector of static length)
    as a list of int64 scalars."""
    if isinstance(shape, Variable) and shape.type.ndim == 1:
        from tensorjit.tensor.subtensor import getitem

        if np.dtype(shape.type.dtype).kind not in "iu":
            raise TypeError(f"{what}: the shape must be integers, got {shape.describe()}")
        n = shape.type.shape[0]
        if n is None:
            raise ValueError(f"{what}: shape vector {shape.describe()} needs a static length")
        entries: list[Any] = [getitem(shape, i) for i in range(n)]
    elif isinstance(shape, (int, np.integer, Variable)):
        entries = [shape]
    elif isinstance(shape, (list, tuple, np.ndarray)):
        entries = list(shape)
    else:
        raise TypeError(f"{what}: the shape must be an int or a sequence of ints, got {shape!r}")
    result = [_int_scalar(e, f"{what}: shape entry") for e in entries]
    for r in result:
        _check_length(r, f"{what}: a shape entry")
    return result


# ---------------------------------------------------------------- fill / second
class Second(Op):
    """``second(a, b)``: ``b`` broadcast to the shape of ``a`` (elementwise broadcasting of
    both; a dimension broadcasts only where its static length is 1). Output dtype: b's."""

    __props__ = ()

    def make_node(self, a: Any, b: Any) -> Apply:
        a, b = resolve_weak_constants([as_tensor_variable(a), as_tensor_variable(b)])
        ndim = max(a.type.ndim, b.type.ndim)
        a, b = (pad_left(v, ndim) for v in (a, b))
        shape = []
        for axis, (n, m) in enumerate(zip(a.type.shape, b.type.shape)):
            if n is not None and m is not None and n != m and 1 not in (n, m):
                raise ValueError(
                    f"second: shapes {a.type.shape} and {b.type.shape} can not be broadcast "
                    f"together (dimension {axis}); inputs: {a.describe()}, {b.describe()}"
                )
            if n == 1:
                shape.append(m)
            elif m == 1 or m is None:
                shape.append(n)
            else:
                shape.append(m)
        return Apply(self, [a, b], [TensorType(b.type.dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        out = []
        for axis, static in enumerate(node.outputs[0].type.shape):
            if static is not None:
                out.append(static)
                continue
            for var, shape in zip(node.inputs, input_shapes):
                if not var.type.broadcastable[axis]:
                    out.append(shape[axis])
                    break
        return [tuple(out)]

    def perform(self, node, inputs, output_storage):
        a, b = inputs
        shape = second_shape(node, a.shape, b.shape)
        dtype = node.outputs[0].type.numpy_dtype
        out = reusable_buffer(output_storage[0][0], shape, dtype)
        if out is None:
            out = np.empty(shape, dtype=dtype)
        out[...] = b
        output_storage[0][0] = out

    def connection_pattern(self, node):
        return [[False], [True]]

    def grad(self, inputs, output_grads):
        a, b = inputs
        (g,) = output_grads
        if np.dtype(b.type.dtype).kind not in "fc":
            return [None, None]
        out_bcast = g.type.broadcastable
        axes = tuple(
            axis
            for axis, (bb, ob) in enumerate(zip(b.type.broadcastable, out_bcast))
            if bb and not ob
        )
        gb = tsum(g, axis=axes, keepdims=True) if axes else g
        return [None, gb]


def second(a: Any, b: Any) -> Variable:
    """``b`` broadcast to the shape of ``a`` (Theano's ``second``); the dtype is b's."""
    return Second()(a, b)


def fill(model: Any, value: Any) -> Variable:
    """A tensor of ``model``'s shape filled with ``value`` (Theano's ``fill``)."""
    return Second()(model, value)


# ---------------------------------------------------------------- full / full_like
def full(shape: Any, fill_value: Any, dtype: Any = None) -> Variable:
    """``numpy.full``: a new tensor of ``shape`` (ints or symbolic int scalars, or an int
    vector) filled with ``fill_value`` (broadcast), of ``dtype`` (default: the value's)."""
    dims = _shape_list(shape, "full")
    value = as_tensor_variable(fill_value)
    if dtype is not None:
        value = cast(value, normalize_dtype(dtype))
    if value.type.ndim > len(dims):
        raise ValueError(
            f"full: fill_value {value.describe()} has more dimensions than the shape ({len(dims)})"
        )
    return alloc(value, *dims)


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Variable:
    """``numpy.full_like``: a tensor of ``x``'s shape filled with ``fill_value``, of
    ``x``'s dtype unless ``dtype`` is given (the value is cast to it)."""
    x = as_tensor_variable(x)
    value = cast(as_tensor_variable(fill_value), normalize_dtype(dtype or x.type.dtype))
    if value.type.ndim > x.type.ndim:
        raise ValueError(
            f"full_like: fill_value {value.describe()} has more dimensions than {x.describe()}"
        )
    return alloc(value, *shape_entries(x))


# ---------------------------------------------------------------- eye / tri
class _MatrixMaker(Op):
    """A new (n, m) matrix from three int64 scalars n, m, k (a NumPy function)."""

    __props__ = ("dtype",)
    constant_folding = False  # folding would embed a possibly huge matrix in the graph
    fn: Any = None
    # NumPy's rule for a negative size: np.eye raises, np.tri gives no rows (columns)
    negative_is_empty = False

    def __init__(self, dtype: Any = None):
        self.dtype = normalize_dtype(dtype)

    def host_inputs(self, node: Apply) -> range:
        return range(3)  # the sizes and the offset

    def __str__(self) -> str:
        return f"{type(self).__name__}{{{self.dtype}}}"

    def make_node(self, n: Any, m: Any, k: Any) -> Apply:
        name = type(self).__name__.lower()
        n = _int_scalar(n, f"{name}: the number of rows")
        m = _int_scalar(m, f"{name}: the number of columns")
        k = _int_scalar(k, f"{name}: the diagonal offset k")
        if self.negative_is_empty:
            shape = tuple(
                None if (size := _constant_int(v)) is None else max(size, 0) for v in (n, m)
            )
        else:
            shape = (
                _check_length(n, f"{name}: the number of rows"),
                _check_length(m, f"{name}: the number of columns"),
            )
        return Apply(self, [n, m, k], [TensorType(self.dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        rows, cols = node.inputs[:2]
        if self.negative_is_empty:
            zero = constant(np.int64(0))
            return [(maximum(rows, zero), maximum(cols, zero))]
        return [(rows, cols)]

    def perform(self, node, inputs, output_storage):
        n, m, k = (int(v) for v in inputs)
        if (n < 0 or m < 0) and not self.negative_is_empty:
            raise ValueError(
                f"{self}: negative dimensions are not allowed: {n} rows, {m} columns "
                f"(from {node.inputs[0].describe()}, {node.inputs[1].describe()})"
            )
        output_storage[0][0] = type(self).fn(n, m, k, dtype=self.dtype)

    def grad(self, inputs, output_grads):
        return [None, None, None]


class Eye(_MatrixMaker):
    """``numpy.eye(n, m, k, dtype)``: ones on the k-th diagonal."""

    fn = staticmethod(np.eye)


class Tri(_MatrixMaker):
    """``numpy.tri(n, m, k, dtype)``: ones at and below the k-th diagonal; a negative
    size gives none of those rows (columns), as NumPy's."""

    fn = staticmethod(np.tri)
    negative_is_empty = True


def eye(n: Any, m: Any = None, k: Any = 0, dtype: Any = None) -> Variable:
    """``numpy.eye``; ``n``, ``m``, ``k`` may be symbolic integer scalars; the default
    dtype is ``config.floatX``."""
    return Eye(dtype)(n, n if m is None else m, k)


def tri(n: Any, m: Any = None, k: Any = 0, dtype: Any = None) -> Variable:
    """``numpy.tri``; ``n``, ``m``, ``k`` may be symbolic; default dtype floatX."""
    return Tri(dtype)(n, n if m is None else m, k)


def identity_like(x: Any) -> Variable:
    """A matrix of ``x``'s shape and dtype with ones on the diagonal."""
    x = as_tensor_variable(x)
    if x.type.ndim != 2:
        raise TypeError(f"identity_like: expected a matrix, got {x.describe()}")
    rows, cols = shape_entries(x)
    return Eye(x.type.dtype)(rows, cols, 0)


def _triangle(x: Any, k: Any, lower: bool, what: str) -> Variable:
    x = as_tensor_variable(x)
    if x.type.ndim < 2:
        raise TypeError(f"{what}: expected at least 2 dimensions, got {x.describe()}")
    k = _int_scalar(k, f"{what}: k")
    rows, cols = shape_entries(x)[-2:]
    zero = constant(np.zeros((), dtype=x.type.dtype))
    if lower:
        return switch(Tri("bool")(rows, cols, k), x, zero)
    return switch(Tri("bool")(rows, cols, sub(k, 1)), zero, x)


def tril(x: Any, k: Any = 0) -> Variable:
    """``numpy.tril``: ``x`` (of >= 2 dimensions) with elements above the k-th diagonal of
    its last two dimensions zeroed."""
    return _triangle(x, k, True, "tril")


def triu(x: Any, k: Any = 0) -> Variable:
    """``numpy.triu``: ``x`` with elements below the k-th diagonal zeroed."""
    return _triangle(x, k, False, "triu")


# ---------------------------------------------------------------- arange
class ARange(Op):
    """``numpy.arange(start, stop, step, dtype)`` from three numeric scalars."""

    __props__ = ("dtype",)
    constant_folding = False

    def __init__(self, dtype: Any):
        self.dtype = normalize_dtype(dtype)

    def __str__(self) -> str:
        return f"ARange{{{self.dtype}}}"

    def host_inputs(self, node: Apply) -> range:
        return range(3)  # the bounds and the step

    def make_node(self, start: Any, stop: Any, step: Any) -> Apply:
        inputs = [_arange_bound(v, what) for v, what in _named_bounds(start, stop, step)]
        values = [v.data.item() if isinstance(v, Constant) else None for v in inputs]
        if values[2] == 0:
            raise ValueError("arange: step can not be zero")
        length = None
        if None not in values:
            length = len(np.arange(*values))
        return Apply(self, inputs, [TensorType(self.dtype, (length,)).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        start, stop, step = node.inputs
        if all(np.dtype(v.type.dtype).kind in "iu" for v in node.inputs):
            start, stop, step = (cast(v, "int64") for v in (start, stop, step))
            # ceil((stop - start) / step) with floor division: -((start - stop) // step)
            length = neg(int_div(sub(start, stop), step))
        else:
            start, stop, step = (cast(v, "float64") for v in (start, stop, step))
            length = cast(ceil(true_div(sub(stop, start), step)), "int64")
        return [(maximum(length, constant(np.int64(0))),)]

    def perform(self, node, inputs, output_storage):
        start, stop, step = (v.item() for v in inputs)
        if step == 0:
            raise ValueError(f"arange: step {node.inputs[2].describe()} is zero at run time")
        output_storage[0][0] = np.arange(start, stop, step, dtype=self.dtype)

    def grad(self, inputs, output_grads):
        (g,) = output_grads
        if np.dtype(self.dtype).kind not in "fc":
            return [None, None, None]
        start, stop, step = inputs
        steps = ARange(g.type.dtype)(0, shape_entries(g)[0], 1)
        grads = [tsum(g), None, tsum(mul(g, steps))]
        if np.dtype(stop.type.dtype).kind in "fc":
            from tensorjit.tensor.math import zeros_like

            grads[1] = zeros_like(stop)  # zero wherever it is defined
        return [gr if np.dtype(v.type.dtype).kind in "fc" else None for gr, v in zip(grads, inputs)]


def _named_bounds(start: Any, stop: Any, step: Any) -> list:
    return [(start, "start"), (stop, "stop"), (step, "step")]


def _arange_bound(value: Any, what: str) -> Variable:
    if isinstance(value, bool):
        value = int(value)
    try:
        var = as_tensor_variable(value)
    except TypeError:
        raise TypeError(f"arange: {what} must be a number, got {value!r}") from None
    if var.type.ndim != 0 or np.dtype(var.type.dtype).kind not in "iuf":
        raise TypeError(
            f"arange: {what} must be a real (integer or float) scalar, got {var.describe()}"
        )
    return var


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Variable:
    """``numpy.arange``; the bounds may be symbolic scalars.

    The default dtype is NumPy's: int64 for integer bounds, float64 if any bound is a
    float (``np.arange`` computes in those whatever the bounds' own width is).
    """
    if stop is None:
        start, stop = 0, start
    inputs = [_arange_bound(v, what) for v, what in _named_bounds(start, stop, step)]
    if dtype is None:
        out_dtype = np.result_type(np.int64, *[v.type.dtype for v in inputs]).name
    else:
        out_dtype = normalize_dtype(dtype)
    return ARange(out_dtype)(*inputs)


def second_shape(node: Apply, a_shape: tuple, b_shape: tuple) -> tuple:
    """The shape of ``second(a, b)`` for inputs of these shapes: a length 1 of ``a``
    broadcasts only where its type declares it (every backend's kernels check this)."""
    static_a = node.inputs[0].type.shape
    shape = tuple(m if s == 1 else n for n, m, s in zip(a_shape, b_shape, static_a))
    for var, value_shape in zip(node.inputs, (a_shape, b_shape)):
        for axis, (n, m) in enumerate(zip(value_shape, shape)):
            if n == m:
                continue
            if n == 1 and var.type.shape[axis] != 1:
                user_var, user_axis = unpadded(before_transfers(var), axis)
                user_var = before_transfers(user_var)
                raise ValueError(
                    f"second: input {user_var.describe()} has length 1 in dimension "
                    f"{user_axis} at run time but its type does not declare it broadcastable "
                    f"(static length 1), and the output has length {m}"
                )
            if n != 1:
                users = ", ".join(before_transfers(v).describe() for v in node.inputs)
                raise ValueError(
                    f"second: shapes {a_shape} and {b_shape} can not be broadcast together "
                    f"(dimension {axis}); inputs: {users}"
                )
    return shape
