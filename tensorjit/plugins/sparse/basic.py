"""The sparse ops: reference implementations on scipy.sparse, shapes and gradients.

Gradients w.r.t. a sparse input are *structured*: a sparse matrix whose pattern lies in
the input's own pattern, holding the derivative w.r.t. each stored value (entries the
input does not store are structurally zero and get no gradient). Gradients w.r.t. dense
operands are ordinary dense gradients.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import tensorjit.tensor as T
from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.op import Op
from tensorjit.plugins.sparse.type import (
    FORMATS,
    SparseType,
    as_sparse_variable,
    is_sparse_value,
    sp,
)

# ---------------------------------------------------------------- helpers


def _is_sparse(x: Any) -> bool:
    if isinstance(x, Variable):
        return isinstance(x.type, SparseType)
    return is_sparse_value(x)


def _dense(x: Any, what: str) -> Variable:
    if _is_sparse(x):
        raise TypeError(f"{what}: expected a dense tensor, got sparse {_describe(x)}")
    try:
        return T.as_tensor_variable(x)
    except TypeError as exc:
        raise TypeError(f"{what}: {exc}") from None


def _sparse(x: Any, what: str) -> Variable:
    try:
        return as_sparse_variable(x)
    except TypeError as exc:
        raise TypeError(f"{what}: {exc}") from None


def _describe(x: Any) -> str:
    return x.describe() if isinstance(x, Variable) else repr(x)[:80]


def _result_dtype(a: Variable, b: Variable) -> str:
    """NumPy's result dtype; a weak (Python scalar) constant takes the other's dtype."""
    if getattr(b, "weak", False):
        return np.result_type(np.dtype(a.type.dtype), b.data.item()).name  # type: ignore[attr-defined]
    if getattr(a, "weak", False):
        return np.result_type(a.data.item(), np.dtype(b.type.dtype)).name  # type: ignore[attr-defined]
    return np.result_type(a.type.dtype, b.type.dtype).name


def _sparse_cls(fmt: str):
    return sp().csr_matrix if fmt == "csr" else sp().csc_matrix


def _finish(value: Any, otype: SparseType):
    """``value`` (any scipy sparse) as a matrix of the output type's format and dtype."""
    out = value.asformat(otype.format)
    if out.dtype != otype.numpy_dtype:
        out = out.astype(otype.numpy_dtype)
    return out


def _ones(x: Any):
    """The stored pattern of ``x`` (duplicates summed, explicit zeros kept) as ones."""
    out = _canonical(x)
    out.data = np.ones(len(out.data))
    return out


def _canonical(x: Any):
    out = x.copy()
    out.sum_duplicates()
    return out


def _check_2d_dense(v: Variable, what: str) -> None:
    if v.type.ndim != 2:
        raise TypeError(f"{what}: expected a dense matrix, got {v.type.ndim}-d {v.describe()}")


def _int_vector(x: Any, what: str) -> Variable:
    v = T.as_tensor_variable(x)
    if v.type.ndim != 1 or np.dtype(v.type.dtype).kind not in "iu":
        raise TypeError(f"{what}: expected an integer vector, got {v.describe()}")
    return v


class SparseOp(Op):
    """Base class of the sparse family's ops (for dispatch and ``info``)."""


class DenseOutputOp(SparseOp):
    """A sparse op with sparse inputs and a dense output; its shape rule is
    ``sparse_infer_shape`` (the dense family's shape inference reads the output's shape
    at run time when an input is sparse, so the rule serves callers that pass shapes)."""

    def infer_shape(self, fgraph, node, input_shapes):
        return self.sparse_infer_shape(fgraph, node, input_shapes)


# ---------------------------------------------------------------- pack / unpack


class CSM(SparseOp):
    """Build a CSR/CSC matrix from (data, indices, indptr, shape)."""

    __props__ = ("format",)

    def __init__(self, format: str):
        if format not in FORMATS:
            raise ValueError(f"CSM: format must be one of {FORMATS}, got {format!r}")
        self.format = format

    def make_node(self, data, indices, indptr, shape) -> Apply:
        data = _dense(data, "CSM data")
        if data.type.ndim != 1:
            raise TypeError(f"CSM: data must be a vector, got {data.describe()}")
        indices = _int_vector(indices, "CSM indices")
        indptr = _int_vector(indptr, "CSM indptr")
        shape = _int_vector(shape, "CSM shape")
        if shape.type.shape[0] not in (None, 2):
            raise TypeError(f"CSM: shape must have 2 entries, got {shape.describe()}")
        out = SparseType(self.format, data.type.dtype).make_variable()
        return Apply(self, [data, indices, indptr, shape], [out])

    def perform(self, node, inputs, output_storage):
        data, indices, indptr, shape = inputs
        if len(shape) != 2:
            raise ValueError(f"CSM: shape must have 2 entries, got {list(shape)}")
        if len(data) != len(indices):
            raise ValueError(
                f"CSM: data ({len(data)} values) and indices ({len(indices)}) differ in length"
            )
        cls = _sparse_cls(self.format)
        shape = (int(shape[0]), int(shape[1]))
        output_storage[0][0] = cls((data, indices, indptr), shape=shape, copy=True)

    def infer_shape(self, fgraph, node, input_shapes):
        shape = node.inputs[3]
        return [(shape[0], shape[1])]

    def grad(self, inputs, output_grads):
        _data, indices, indptr, shape = inputs
        (g,) = output_grads
        g_data = CSMGrad(self.format)(indices, indptr, shape, g)
        return [g_data, None, None, None]


class CSMGrad(DenseOutputOp):
    """The values of a sparse gradient at the stored positions given by (indices, indptr)."""

    __props__ = ("format",)

    def __init__(self, format: str):
        self.format = format

    def make_node(self, indices, indptr, shape, g) -> Apply:
        g = _sparse(g, "CSMGrad")
        out = T.TensorType(g.type.dtype, (None,)).make_variable()
        return Apply(self, [_dense(indices, "indices"), _dense(indptr, "indptr"), shape, g], [out])

    def perform(self, node, inputs, output_storage):
        indices, indptr, shape, g = inputs
        counts = np.diff(indptr)
        major = np.repeat(np.arange(len(counts)), counts)
        rows, cols = (major, indices) if self.format == "csr" else (indices, major)
        dtype = node.outputs[0].type.numpy_dtype
        if len(rows) == 0:
            output_storage[0][0] = np.zeros(0, dtype=dtype)
            return
        values = np.asarray(g.tocsr()[rows, cols]).ravel()
        output_storage[0][0] = values.astype(dtype)

    def sparse_infer_shape(self, fgraph, node, input_shapes):
        return [(input_shapes[0][0],)]


class CSMProperties(DenseOutputOp):
    """Unpack a sparse matrix into (data, indices, indptr, shape) (copies, as stored)."""

    __props__ = ()

    def make_node(self, x) -> Apply:
        x = _sparse(x, "csm_properties")
        outs = [
            T.TensorType(x.type.dtype, (None,)).make_variable(),
            T.TensorType("int32", (None,)).make_variable(),
            T.TensorType("int32", (None,)).make_variable(),
            T.TensorType("int64", (2,)).make_variable(),
        ]
        return Apply(self, [x], outs)

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        output_storage[0][0] = np.array(x.data, dtype=node.outputs[0].type.numpy_dtype)
        output_storage[1][0] = np.array(x.indices, dtype="int32")
        output_storage[2][0] = np.array(x.indptr, dtype="int32")
        output_storage[3][0] = np.asarray(x.shape, dtype="int64")

    def sparse_infer_shape(self, fgraph, node, input_shapes):
        (xs,) = input_shapes
        major = xs[0] if node.inputs[0].type.format == "csr" else xs[1]
        return [None, None, (major + 1,), (2,)]

    def grad(self, inputs, output_grads):
        (x,) = inputs
        g_data = output_grads[0]
        _, indices, indptr, shape = csm_properties(x)
        return [CSM(x.type.format)(g_data, indices, indptr, shape)]


def csm_properties(x: Any) -> list[Variable]:
    """``[data, indices, indptr, shape]`` of a sparse matrix."""
    return CSMProperties()(x)


def csm_data(x: Any) -> Variable:
    return csm_properties(x)[0]


def csm_indices(x: Any) -> Variable:
    return csm_properties(x)[1]


def csm_indptr(x: Any) -> Variable:
    return csm_properties(x)[2]


def csm_shape(x: Any) -> Variable:
    return csm_properties(x)[3]


def CSR(data, indices, indptr, shape) -> Variable:
    """A CSR matrix from its (data, indices, indptr, shape)."""
    return CSM("csr")(data, indices, indptr, shape)


def CSC(data, indices, indptr, shape) -> Variable:
    """A CSC matrix from its (data, indices, indptr, shape)."""
    return CSM("csc")(data, indices, indptr, shape)


# ---------------------------------------------------------------- shape, format, dtype


class SparseShape(DenseOutputOp):
    """The shape of a sparse matrix as an int64 vector."""

    __props__ = ()

    def make_node(self, x) -> Apply:
        x = _sparse(x, "sp_shape")
        return Apply(self, [x], [T.TensorType("int64", (2,)).make_variable()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.asarray(inputs[0].shape, dtype="int64")

    def sparse_infer_shape(self, fgraph, node, input_shapes):
        return [(2,)]

    def grad(self, inputs, output_grads):
        return [None]


def sp_shape(x: Any) -> Variable:
    return SparseShape()(x)


class ConvertFormat(SparseOp):
    """csr <-> csc (a copy in the other format)."""

    __props__ = ("format",)

    def __init__(self, format: str):
        self.format = format

    def make_node(self, x) -> Apply:
        x = _sparse(x, "convert_format")
        return Apply(self, [x], [SparseType(self.format, x.type.dtype).make_variable()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0].asformat(self.format, copy=True)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        return [convert_format(output_grads[0], inputs[0].type.format)]


def convert_format(x: Any, format: str) -> Variable:
    x = _sparse(x, "convert_format")
    return x if x.type.format == format else ConvertFormat(format)(x)


def csr_from_csc(x):
    return convert_format(x, "csr")


def csc_from_csr(x):
    return convert_format(x, "csc")


class SparseCast(SparseOp):
    __props__ = ("dtype",)

    def __init__(self, dtype: str):
        self.dtype = np.dtype(dtype).name

    def make_node(self, x) -> Apply:
        x = _sparse(x, "sp_cast")
        return Apply(self, [x], [SparseType(x.type.format, self.dtype).make_variable()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0].astype(self.dtype, copy=True)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        (x,) = inputs
        if np.dtype(x.type.dtype).kind != "f":
            return [None]
        return [sp_cast(output_grads[0], x.type.dtype)]


def sp_cast(x: Any, dtype: Any) -> Variable:
    x = _sparse(x, "sp_cast")
    dtype = np.dtype(dtype).name
    return x if x.type.dtype == dtype else SparseCast(dtype)(x)


# ---------------------------------------------------------------- dense <-> sparse


class DenseFromSparse(DenseOutputOp):
    """A dense ndarray from a sparse matrix (duplicates summed)."""

    __props__ = ()

    def make_node(self, x) -> Apply:
        x = _sparse(x, "dense_from_sparse")
        return Apply(self, [x], [T.TensorType(x.type.dtype, (None, None)).make_variable()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0].toarray()

    def sparse_infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        (x,) = inputs
        return [mul(sp_ones_like(x), output_grads[0])]  # structured


def dense_from_sparse(x: Any) -> Variable:
    return DenseFromSparse()(x)


class SparseFromDense(SparseOp):
    """A CSR/CSC matrix from a dense matrix (zeros are not stored)."""

    __props__ = ("format",)

    def __init__(self, format: str):
        if format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
        self.format = format

    def make_node(self, x) -> Apply:
        x = _dense(x, f"{self.format}_from_dense")
        _check_2d_dense(x, f"{self.format}_from_dense")
        return Apply(self, [x], [SparseType(self.format, x.type.dtype).make_variable()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = _sparse_cls(self.format)(inputs[0])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        return [dense_from_sparse(output_grads[0])]


def csr_from_dense(x: Any) -> Variable:
    return SparseFromDense("csr")(x)


def csc_from_dense(x: Any) -> Variable:
    return SparseFromDense("csc")(x)


# ---------------------------------------------------------------- structure


class Transpose(SparseOp):
    """The transpose: a CSR matrix becomes a CSC view of the same arrays, and back."""

    __props__ = ()
    view_map = {0: [0]}

    def make_node(self, x) -> Apply:
        x = _sparse(x, "transpose")
        fmt = "csc" if x.type.format == "csr" else "csr"
        return Apply(self, [x], [SparseType(fmt, x.type.dtype).make_variable()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0].transpose()

    def infer_shape(self, fgraph, node, input_shapes):
        (s,) = input_shapes
        return [(s[1], s[0])]

    def grad(self, inputs, output_grads):
        return [transpose(output_grads[0])]


def transpose(x: Any) -> Variable:
    return Transpose()(x)


class SpOnesLike(SparseOp):
    """The pattern of ``x`` (duplicates summed) with every stored value set to one."""

    __props__ = ()

    def make_node(self, x) -> Apply:
        x = _sparse(x, "sp_ones_like")
        return Apply(self, [x], [x.type.make_variable()])

    def perform(self, node, inputs, output_storage):
        out = _canonical(inputs[0])
        out.data = np.ones_like(out.data)
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        return [sp_zeros_like(inputs[0])]


def sp_ones_like(x: Any) -> Variable:
    return SpOnesLike()(x)


class SpZerosLike(SparseOp):
    """An empty sparse matrix of ``x``'s shape and format."""

    __props__ = ("dtype",)

    def __init__(self, dtype: str | None = None):
        self.dtype = None if dtype is None else np.dtype(dtype).name

    def make_node(self, x) -> Apply:
        x = _sparse(x, "sp_zeros_like")
        dtype = self.dtype or x.type.dtype
        return Apply(self, [x], [SparseType(x.type.format, dtype).make_variable()])

    def perform(self, node, inputs, output_storage):
        otype = node.outputs[0].type
        output_storage[0][0] = _sparse_cls(otype.format)(inputs[0].shape, dtype=otype.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        return [sp_zeros_like(inputs[0])]


def sp_zeros_like(x: Any, dtype: Any = None) -> Variable:
    return SpZerosLike(dtype)(x)


def _mask(g: Variable, x: Variable) -> Variable:
    """``g`` restricted to the pattern of ``x`` (a structured gradient)."""
    return mul(g, sp_ones_like(x))


# ---------------------------------------------------------------- structured elementwise

_UNARY: dict[str, Any] = {
    "neg": np.negative,
    "abs": np.abs,
    "sqrt": np.sqrt,
    "sqr": np.square,
    "sin": np.sin,
    "tan": np.tan,
    "arcsin": np.arcsin,
    "arctan": np.arctan,
    "sinh": np.sinh,
    "tanh": np.tanh,
    "arcsinh": np.arcsinh,
    "arctanh": np.arctanh,
    "expm1": np.expm1,
    "log1p": np.log1p,
    "deg2rad": np.deg2rad,
    "rad2deg": np.rad2deg,
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "rint": np.rint,
    "sign": np.sign,
    # derivatives (applied to stored values only)
    "_one": np.ones_like,
    "_half_rsqrt": lambda v: 0.5 / np.sqrt(v),
    "_twice": lambda v: 2 * v,
    "_cos": np.cos,
    "_sec2": lambda v: 1 + np.tan(v) ** 2,
    "_darcsin": lambda v: 1 / np.sqrt(1 - v * v),
    "_darctan": lambda v: 1 / (1 + v * v),
    "_cosh": np.cosh,
    "_dtanh": lambda v: 1 - np.tanh(v) ** 2,
    "_darcsinh": lambda v: 1 / np.sqrt(1 + v * v),
    "_darctanh": lambda v: 1 / (1 - v * v),
    "_exp": np.exp,
    "_dlog1p": lambda v: 1 / (1 + v),
    "_deg2rad": lambda v: np.full_like(v, np.pi / 180),
    "_rad2deg": lambda v: np.full_like(v, 180 / np.pi),
}
# the derivative of each function (None: zero almost everywhere)
_DERIVATIVE: dict[str, str | None] = {
    "abs": "sign",
    "sqrt": "_half_rsqrt",
    "sqr": "_twice",
    "sin": "_cos",
    "tan": "_sec2",
    "arcsin": "_darcsin",
    "arctan": "_darctan",
    "sinh": "_cosh",
    "tanh": "_dtanh",
    "arcsinh": "_darcsinh",
    "arctanh": "_darctanh",
    "expm1": "_exp",
    "log1p": "_dlog1p",
    "deg2rad": "_deg2rad",
    "rad2deg": "_rad2deg",
    "floor": None,
    "ceil": None,
    "trunc": None,
    "rint": None,
    "sign": None,
}
STRUCTURED_UNARY = tuple(n for n in _UNARY if not n.startswith("_"))


class StructuredUnary(SparseOp):
    """``fn`` applied to the stored values only (duplicates summed first); the pattern is
    kept. The public functions use only ``fn`` with ``fn(0) == 0``, so the result equals
    the dense elementwise function."""

    __props__ = ("fn",)

    def __init__(self, fn: str):
        if fn not in _UNARY:
            raise ValueError(f"unknown structured function {fn!r}; known: {STRUCTURED_UNARY}")
        self.fn = fn

    def make_node(self, x) -> Apply:
        x = _sparse(x, self.fn)
        with np.errstate(all="ignore"):
            dtype = np.asarray(_UNARY[self.fn](np.zeros(1, dtype=x.type.dtype))).dtype
        if dtype.kind not in "biuf":
            raise TypeError(f"{self.fn}: unsupported result dtype {dtype} for {x.describe()}")
        return Apply(self, [x], [SparseType(x.type.format, dtype).make_variable()])

    def perform(self, node, inputs, output_storage):
        out = _canonical(inputs[0])
        dtype = node.outputs[0].type.numpy_dtype
        out.data = np.asarray(_UNARY[self.fn](out.data), dtype=dtype)
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        (x,) = inputs
        (g,) = output_grads
        if self.fn == "neg":
            return [neg(g)]
        deriv = _DERIVATIVE.get(self.fn)
        if deriv is None:
            return [sp_zeros_like(x, dtype=g.type.dtype)]
        return [mul(g, StructuredUnary(deriv)(x))]


def _unary(name: str):
    op = StructuredUnary(name)

    def fn(x: Any) -> Variable:
        return op(x)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Structured ``{name}``: applied to the stored values, pattern kept."
    return fn


neg = _unary("neg")
abs = _unary("abs")  # noqa: A001
sqrt = _unary("sqrt")
sqr = _unary("sqr")
sin = _unary("sin")
tan = _unary("tan")
arcsin = _unary("arcsin")
arctan = _unary("arctan")
sinh = _unary("sinh")
tanh = _unary("tanh")
arcsinh = _unary("arcsinh")
arctanh = _unary("arctanh")
expm1 = _unary("expm1")
log1p = _unary("log1p")
deg2rad = _unary("deg2rad")
rad2deg = _unary("rad2deg")
floor = _unary("floor")
ceil = _unary("ceil")
trunc = _unary("trunc")
rint = _unary("rint")
sign = _unary("sign")


# ---------------------------------------------------------------- mul / add


def _reduce_to(g: Variable, y: Variable) -> Variable:
    """A dense gradient ``g`` of a (broadcast) result, summed back to ``y``'s shape."""
    if y.type.ndim == 0:
        return T.sum(g)
    if y.type.ndim == 1:
        return T.sum(g, axis=0)
    axes = [i for i, s in enumerate(y.type.shape) if s == 1]
    return T.sum(g, axis=tuple(axes), keepdims=True) if axes else g


class MulSS(SparseOp):
    """Elementwise product of two sparse matrices (sparse result, format of x)."""

    __props__ = ()

    def make_node(self, x, y) -> Apply:
        x, y = _sparse(x, "mul"), _sparse(y, "mul")
        out = SparseType(x.type.format, _result_dtype(x, y)).make_variable()
        return Apply(self, [x, y], [out])

    def perform(self, node, inputs, output_storage):
        x, y = inputs
        if x.shape != y.shape:
            raise ValueError(f"mul: sparse shapes {x.shape} and {y.shape} differ")
        # The result stores every position both operands store (explicit zeros
        # included, unlike scipy's multiply), so a structured gradient reaches them.
        otype = node.outputs[0].type
        both = _ones(x).multiply(_ones(y)).asformat(otype.format)
        both.sort_indices()
        coo = both.tocoo()
        out = both.astype(otype.numpy_dtype)
        if coo.nnz:
            xv = np.asarray(x.tocsr()[coo.row, coo.col]).ravel()
            yv = np.asarray(y.tocsr()[coo.row, coo.col]).ravel()
            out.data = np.asarray(xv * yv, dtype=otype.numpy_dtype)
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        x, y = inputs
        (g,) = output_grads
        return [mul(g, y), mul(g, x)]


class MulSD(SparseOp):
    """Sparse x times dense y (scalar, row vector or matrix, NumPy broadcasting): a
    sparse result with x's pattern (scipy's ``x.multiply(y)``)."""

    __props__ = ()

    def make_node(self, x, y) -> Apply:
        x, y = _sparse(x, "mul"), _dense(y, "mul")
        if y.type.ndim > 2:
            raise TypeError(f"mul: dense operand must have at most 2 dims, got {y.describe()}")
        out = SparseType(x.type.format, _result_dtype(x, y)).make_variable()
        return Apply(self, [x, y], [out])

    def perform(self, node, inputs, output_storage):
        x, y = inputs
        otype = node.outputs[0].type
        if y.ndim == 0:
            out = _canonical(x).astype(otype.numpy_dtype)
            out.data = np.asarray(out.data * y, dtype=otype.numpy_dtype)
        else:
            if np.broadcast_shapes(x.shape, y.shape) != x.shape:
                raise ValueError(
                    f"mul: dense shape {y.shape} does not broadcast to the sparse {x.shape}"
                )
            out = _canonical(x).astype(otype.numpy_dtype)
            coo = out.tocoo()  # same order as out.data
            yb = np.broadcast_to(y, x.shape)
            out.data = np.asarray(out.data * yb[coo.row, coo.col], dtype=otype.numpy_dtype)
        output_storage[0][0] = _finish(out, otype)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        x, y = inputs
        (g,) = output_grads
        gx = mul(g, y)
        gxy = mul(g, x)  # sparse
        if y.type.ndim == 0:
            gy = sum(gxy)
        elif y.type.ndim == 1:
            gy = sum(gxy, axis=0)
        else:
            gy = _reduce_to(dense_from_sparse(gxy), y)
        return [gx, gy]


def mul(x: Any, y: Any) -> Variable:
    """Elementwise product: sparse*sparse and sparse*dense (or scalar) give a sparse
    matrix (scipy's ``multiply``)."""
    if _is_sparse(x) and _is_sparse(y):
        return MulSS()(x, y)
    if _is_sparse(x):
        return MulSD()(x, y)
    if _is_sparse(y):
        return MulSD()(y, x)
    raise TypeError(
        f"tensorjit.sparse.mul: one operand must be sparse, got {_describe(x)} and {_describe(y)}"
    )


class AddSS(SparseOp):
    """Sum of two sparse matrices (sparse result, format of x)."""

    __props__ = ()

    def make_node(self, x, y) -> Apply:
        x, y = _sparse(x, "add"), _sparse(y, "add")
        out = SparseType(x.type.format, _result_dtype(x, y)).make_variable()
        return Apply(self, [x, y], [out])

    def perform(self, node, inputs, output_storage):
        x, y = inputs
        if x.shape != y.shape:
            raise ValueError(f"add: sparse shapes {x.shape} and {y.shape} differ")
        # Sum of the stored entries of both (the union pattern, explicit zeros kept).
        otype = node.outputs[0].type
        a, b = x.tocoo(), y.tocoo()
        out = (
            sp()
            .coo_matrix(
                (
                    np.concatenate(
                        [a.data.astype(otype.numpy_dtype), b.data.astype(otype.numpy_dtype)]
                    ),
                    (np.concatenate([a.row, b.row]), np.concatenate([a.col, b.col])),
                ),
                shape=x.shape,
            )
            .asformat(otype.format)
        )
        out.sum_duplicates()
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        x, y = inputs
        (g,) = output_grads
        return [_mask(g, x), _mask(g, y)]


class AddSD(DenseOutputOp):
    """Sparse x plus dense y (NumPy broadcasting): a dense result (scipy semantics)."""

    __props__ = ()

    def make_node(self, x, y) -> Apply:
        x, y = _sparse(x, "add"), _dense(y, "add")
        if y.type.ndim > 2:
            raise TypeError(f"add: dense operand must have at most 2 dims, got {y.describe()}")
        out = T.TensorType(_result_dtype(x, y), (None, None)).make_variable()
        return Apply(self, [x, y], [out])

    def perform(self, node, inputs, output_storage):
        x, y = inputs
        if np.broadcast_shapes(x.shape, y.shape) != x.shape:
            raise ValueError(f"add: dense shape {y.shape} does not broadcast to sparse {x.shape}")
        dtype = node.outputs[0].type.numpy_dtype
        out = np.array(np.broadcast_to(y, x.shape), dtype=dtype)
        coo = x.tocoo()
        np.add.at(out, (coo.row, coo.col), coo.data.astype(dtype))
        output_storage[0][0] = out

    def sparse_infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        x, y = inputs
        (g,) = output_grads
        return [mul(sp_ones_like(x), g), _reduce_to(g, y)]


def add(x: Any, y: Any) -> Variable:
    """Sum: sparse+sparse gives a sparse matrix, sparse+dense (or scalar) a dense one."""
    if _is_sparse(x) and _is_sparse(y):
        return AddSS()(x, y)
    if _is_sparse(x):
        return AddSD()(x, y)
    if _is_sparse(y):
        return AddSD()(y, x)
    raise TypeError(
        f"tensorjit.sparse.add: one operand must be sparse, got {_describe(x)} and {_describe(y)}"
    )


def sub(x: Any, y: Any) -> Variable:
    """Difference (result types as for ``add``)."""
    if _is_sparse(y):
        return add(x, neg(y))
    return add(x, T.neg(_dense(y, "sub")))


# ---------------------------------------------------------------- products


class StructuredDot(DenseOutputOp):
    """Sparse matrix times dense vector/matrix -> dense."""

    __props__ = ()

    def make_node(self, x, y) -> Apply:
        x, y = _sparse(x, "structured_dot"), _dense(y, "structured_dot")
        if y.type.ndim not in (1, 2):
            raise TypeError(f"structured_dot: dense operand must be 1-d or 2-d: {y.describe()}")
        shape = (None,) if y.type.ndim == 1 else (None, y.type.shape[1])
        out = T.TensorType(_result_dtype(x, y), shape).make_variable()
        return Apply(self, [x, y], [out])

    def perform(self, node, inputs, output_storage):
        x, y = inputs
        if x.shape[1] != y.shape[0]:
            raise ValueError(
                f"structured_dot: shapes {x.shape} (sparse) and {y.shape} not aligned: "
                f"{x.shape[1]} != {y.shape[0]}"
            )
        dtype = node.outputs[0].type.numpy_dtype
        output_storage[0][0] = np.asarray(x @ y, dtype=dtype)

    def sparse_infer_shape(self, fgraph, node, input_shapes):
        xs, ys = input_shapes
        return [(xs[0],) + tuple(ys[1:])]

    def grad(self, inputs, output_grads):
        x, y = inputs
        (g,) = output_grads
        g2 = g if g.type.ndim == 2 else T.dimshuffle(g, (0, "x"))
        y2 = y if y.type.ndim == 2 else T.dimshuffle(y, (0, "x"))
        return [SamplingDot()(x, g2, y2), dot(transpose(x), g)]


class DenseSparseDot(DenseOutputOp):
    """Dense vector/matrix times sparse matrix -> dense."""

    __props__ = ()

    def make_node(self, a, x) -> Apply:
        a, x = _dense(a, "structured_dot"), _sparse(x, "structured_dot")
        if a.type.ndim not in (1, 2):
            raise TypeError(f"structured_dot: dense operand must be 1-d or 2-d: {a.describe()}")
        shape = (None,) if a.type.ndim == 1 else (a.type.shape[0], None)
        out = T.TensorType(_result_dtype(a, x), shape).make_variable()
        return Apply(self, [a, x], [out])

    def perform(self, node, inputs, output_storage):
        a, x = inputs
        if a.shape[-1] != x.shape[0]:
            raise ValueError(
                f"structured_dot: shapes {a.shape} and {x.shape} (sparse) not aligned: "
                f"{a.shape[-1]} != {x.shape[0]}"
            )
        dtype = node.outputs[0].type.numpy_dtype
        output_storage[0][0] = np.asarray((x.T @ a.T).T, dtype=dtype)

    def sparse_infer_shape(self, fgraph, node, input_shapes):
        a_s, xs = input_shapes
        return [tuple(a_s[:-1]) + (xs[1],)]

    def grad(self, inputs, output_grads):
        a, x = inputs
        (g,) = output_grads
        a2 = a if a.type.ndim == 2 else T.dimshuffle(a, ("x", 0))
        g2 = g if g.type.ndim == 2 else T.dimshuffle(g, ("x", 0))
        ga = dot(g, transpose(x))
        gx = SamplingDot()(x, T.dimshuffle(a2, (1, 0)), T.dimshuffle(g2, (1, 0)))
        return [ga, gx]


class SamplingDot(SparseOp):
    """``(p @ q.T)`` evaluated only at the stored positions of the sparse ``pattern``:
    a sparse matrix with that pattern (the structured gradient of a sparse product)."""

    __props__ = ()

    def make_node(self, pattern, p, q) -> Apply:
        pattern = _sparse(pattern, "sampling_dot")
        p, q = _dense(p, "sampling_dot"), _dense(q, "sampling_dot")
        _check_2d_dense(p, "sampling_dot")
        _check_2d_dense(q, "sampling_dot")
        dtype = np.result_type(p.type.dtype, q.type.dtype).name
        out = SparseType(pattern.type.format, dtype).make_variable()
        return Apply(self, [pattern, p, q], [out])

    def perform(self, node, inputs, output_storage):
        pattern, p, q = inputs
        otype = node.outputs[0].type
        if p.shape[0] != pattern.shape[0] or q.shape[0] != pattern.shape[1]:
            raise ValueError(
                f"sampling_dot: p {p.shape} and q {q.shape} do not match the pattern "
                f"{pattern.shape}"
            )
        out = _canonical(pattern).astype(otype.numpy_dtype)
        coo = out.tocoo()
        values = np.einsum("ij,ij->i", p[coo.row], q[coo.col]) if coo.nnz else out.data[:0]
        # tocoo keeps the order of the stored values (row by row for csr, column by
        # column for csc), so ``values`` lines up with ``out.data``.
        out.data = np.asarray(values, dtype=otype.numpy_dtype)
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        pattern, p, q = inputs
        (g,) = output_grads
        return [sp_zeros_like(pattern, dtype=g.type.dtype), dot(g, q), dot(transpose(g), p)]


class SpSpDot(SparseOp):
    """Sparse times sparse -> sparse (format of x)."""

    __props__ = ()

    def make_node(self, x, y) -> Apply:
        x, y = _sparse(x, "dot"), _sparse(y, "dot")
        out = SparseType(x.type.format, _result_dtype(x, y)).make_variable()
        return Apply(self, [x, y], [out])

    def perform(self, node, inputs, output_storage):
        x, y = inputs
        if x.shape[1] != y.shape[0]:
            raise ValueError(
                f"dot: sparse shapes {x.shape} and {y.shape} not aligned: "
                f"{x.shape[1]} != {y.shape[0]}"
            )
        # The structural pattern of the product (scipy drops entries that cancel to
        # zero; a structured gradient needs them), then its values at that pattern.
        otype = node.outputs[0].type
        pattern = (_ones(x) @ _ones(y)).asformat(otype.format)
        pattern.sort_indices()
        coo = pattern.tocoo()
        out = pattern.astype(otype.numpy_dtype)
        if coo.nnz:
            product = (x @ y).tocsr()
            out.data = np.asarray(product[coo.row, coo.col], dtype=otype.numpy_dtype).ravel()
        output_storage[0][0] = out

    def infer_shape(self, fgraph, node, input_shapes):
        xs, ys = input_shapes
        return [(xs[0], ys[1])]

    def grad(self, inputs, output_grads):
        x, y = inputs
        (g,) = output_grads
        return [_mask(dot(g, transpose(y)), x), _mask(dot(transpose(x), g), y)]


def dot(x: Any, y: Any) -> Variable:
    """Matrix product with at least one sparse operand: sparse x dense and dense x sparse
    give dense results, sparse x sparse a sparse one (format of x)."""
    xs, ys = _is_sparse(x), _is_sparse(y)
    if xs and ys:
        return SpSpDot()(x, y)
    if xs:
        return StructuredDot()(x, y)
    if ys:
        return DenseSparseDot()(x, y)
    raise TypeError(
        f"tensorjit.sparse.dot: one operand must be sparse, got {_describe(x)} and {_describe(y)}"
    )


def structured_dot(x: Any, y: Any) -> Variable:
    """``dot`` with a sparse operand; the gradient w.r.t. the sparse one is structured."""
    return dot(x, y)


# ---------------------------------------------------------------- reductions, diagonals


class Sum(DenseOutputOp):
    """Sum of all entries (axis=None) or along an axis: a dense scalar or vector."""

    __props__ = ("axis",)

    def __init__(self, axis: int | None = None):
        if axis not in (None, 0, 1):
            raise ValueError(f"sparse sum: axis must be None, 0 or 1, got {axis!r}")
        self.axis = axis

    def make_node(self, x) -> Apply:
        x = _sparse(x, "sum")
        dtype = np.zeros(1, dtype=x.type.dtype).sum().dtype
        shape = () if self.axis is None else (None,)
        return Apply(self, [x], [T.TensorType(dtype, shape).make_variable()])

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        dtype = node.outputs[0].type.numpy_dtype
        if self.axis is None:
            output_storage[0][0] = np.asarray(x.data.sum(dtype=dtype), dtype=dtype)
        else:
            output_storage[0][0] = np.asarray(x.sum(axis=self.axis), dtype=dtype).ravel()

    def sparse_infer_shape(self, fgraph, node, input_shapes):
        (s,) = input_shapes
        if self.axis is None:
            return [()]
        return [(s[1 - self.axis],)]

    def grad(self, inputs, output_grads):
        (x,) = inputs
        (g,) = output_grads
        if self.axis == 1:
            g = T.dimshuffle(g, (0, "x"))
        return [mul(sp_ones_like(x), g)]


def sum(x: Any, axis: int | None = None) -> Variable:  # noqa: A001
    """Sum of a sparse matrix: a dense scalar (axis=None) or vector (axis 0 or 1)."""
    if axis is not None and axis < 0:
        axis += 2
    return Sum(axis)(x)


class Diag(DenseOutputOp):
    """The diagonal of a square sparse matrix, as a dense vector."""

    __props__ = ()

    def make_node(self, x) -> Apply:
        x = _sparse(x, "diag")
        return Apply(self, [x], [T.TensorType(x.type.dtype, (None,)).make_variable()])

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        if x.shape[0] != x.shape[1]:
            raise ValueError(f"diag: the sparse matrix must be square, got shape {x.shape}")
        output_storage[0][0] = np.asarray(x.diagonal(), dtype=node.outputs[0].type.numpy_dtype)

    def sparse_infer_shape(self, fgraph, node, input_shapes):
        return [(input_shapes[0][0],)]

    def grad(self, inputs, output_grads):
        (x,) = inputs
        return [_mask(square_diagonal(output_grads[0], x.type.format), x)]


def diag(x: Any) -> Variable:
    return Diag()(x)


class SquareDiagonal(SparseOp):
    """A square sparse matrix with the dense vector ``v`` on its diagonal."""

    __props__ = ("format",)

    def __init__(self, format: str = "csr"):
        self.format = format

    def make_node(self, v) -> Apply:
        v = _dense(v, "square_diagonal")
        if v.type.ndim != 1:
            raise TypeError(f"square_diagonal: expected a vector, got {v.describe()}")
        return Apply(self, [v], [SparseType(self.format, v.type.dtype).make_variable()])

    def perform(self, node, inputs, output_storage):
        (v,) = inputs
        n = len(v)
        cls = _sparse_cls(self.format)
        output_storage[0][0] = cls((v.copy(), np.arange(n), np.arange(n + 1)), shape=(n, n))

    def infer_shape(self, fgraph, node, input_shapes):
        (s,) = input_shapes
        return [(s[0], s[0])]

    def grad(self, inputs, output_grads):
        return [diag(output_grads[0])]


def square_diagonal(v: Any, format: str = "csr") -> Variable:
    return SquareDiagonal(format)(v)


# ---------------------------------------------------------------- stacking, slicing


class SparseSlice(SparseOp):
    """Rows (axis 0) or columns (axis 1) ``start:stop`` of a sparse matrix."""

    __props__ = ("axis",)

    def __init__(self, axis: int):
        self.axis = axis

    def make_node(self, x, start, stop) -> Apply:
        x = _sparse(x, "sparse slice")
        start, stop = T.as_tensor_variable(start), T.as_tensor_variable(stop)
        return Apply(self, [x, start, stop], [x.type.make_variable()])

    def perform(self, node, inputs, output_storage):
        x, start, stop = inputs
        sl = slice(int(start), int(stop))
        out = x[sl, :] if self.axis == 0 else x[:, sl]
        output_storage[0][0] = _finish(out, node.outputs[0].type).copy()

    def infer_shape(self, fgraph, node, input_shapes):
        s = list(input_shapes[0])
        s[self.axis] = node.inputs[2] - node.inputs[1]
        return [tuple(s)]

    def grad(self, inputs, output_grads):
        from tensorjit.core.gradient import NotDifferentiableError

        raise NotDifferentiableError("the gradient of a sparse slice is not implemented")


class Stack(SparseOp):
    """hstack (axis 1) / vstack (axis 0) of sparse matrices."""

    __props__ = ("axis", "format", "dtype")

    def __init__(self, axis: int, format: str, dtype: str):
        self.axis, self.format, self.dtype = axis, format, np.dtype(dtype).name

    def make_node(self, *blocks) -> Apply:
        what = "hstack" if self.axis == 1 else "vstack"
        if not blocks:
            raise ValueError(f"{what}: needs at least one sparse matrix")
        blocks = tuple(_sparse(b, what) for b in blocks)
        return Apply(self, list(blocks), [SparseType(self.format, self.dtype).make_variable()])

    def perform(self, node, inputs, output_storage):
        what = "hstack" if self.axis == 1 else "vstack"
        other = 1 - self.axis
        sizes = {b.shape[other] for b in inputs}
        if len(sizes) != 1:
            raise ValueError(
                f"{what}: blocks differ in dimension {other}: {[b.shape for b in inputs]}"
            )
        fn = sp().hstack if self.axis == 1 else sp().vstack
        out = fn(list(inputs), format=self.format, dtype=self.dtype)
        output_storage[0][0] = _finish(out, node.outputs[0].type)

    def infer_shape(self, fgraph, node, input_shapes):
        total = input_shapes[0][self.axis]
        for s in input_shapes[1:]:
            total = total + s[self.axis]
        out = list(input_shapes[0])
        out[self.axis] = total
        return [tuple(out)]

    def grad(self, inputs, output_grads):
        (g,) = output_grads
        grads = []
        start: Any = T.constant(np.int64(0))
        for b in inputs:
            stop = start + sp_shape(b)[self.axis]
            grads.append(SparseSlice(self.axis)(g, start, stop))
            start = stop
        return grads


def _stack(axis: int, blocks: Sequence[Any], format: str | None, dtype: Any) -> Variable:
    what = "hstack" if axis == 1 else "vstack"
    blocks = [_sparse(b, what) for b in blocks]
    if not blocks:
        raise ValueError(f"{what}: needs at least one sparse matrix")
    fmt = format or blocks[0].type.format
    dtype = (
        np.dtype(dtype).name
        if dtype is not None
        else np.result_type(*[b.type.dtype for b in blocks]).name
    )
    return Stack(axis, fmt, dtype)(*blocks)


def hstack(blocks: Sequence[Any], format: str | None = None, dtype: Any = None) -> Variable:
    """Sparse matrices side by side (format defaults to the first block's)."""
    return _stack(1, blocks, format, dtype)


def vstack(blocks: Sequence[Any], format: str | None = None, dtype: Any = None) -> Variable:
    """Sparse matrices on top of each other (format defaults to the first block's)."""
    return _stack(0, blocks, format, dtype)


OP_CLASSES = (
    CSM,
    CSMGrad,
    CSMProperties,
    SparseShape,
    ConvertFormat,
    SparseCast,
    DenseFromSparse,
    SparseFromDense,
    Transpose,
    SpOnesLike,
    SpZerosLike,
    StructuredUnary,
    MulSS,
    MulSD,
    AddSS,
    AddSD,
    StructuredDot,
    DenseSparseDot,
    SamplingDot,
    SpSpDot,
    Sum,
    Diag,
    SquareDiagonal,
    SparseSlice,
    Stack,
)

__all__ = [
    "CSC",
    "CSR",
    "OP_CLASSES",
    "STRUCTURED_UNARY",
    "abs",
    "add",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctanh",
    "ceil",
    "convert_format",
    "csc_from_csr",
    "csc_from_dense",
    "csm_data",
    "csm_indices",
    "csm_indptr",
    "csm_properties",
    "csm_shape",
    "csr_from_csc",
    "csr_from_dense",
    "deg2rad",
    "dense_from_sparse",
    "diag",
    "dot",
    "expm1",
    "floor",
    "hstack",
    "log1p",
    "mul",
    "neg",
    "rad2deg",
    "rint",
    "sign",
    "sin",
    "sinh",
    "sp_cast",
    "sp_ones_like",
    "sp_shape",
    "sp_zeros_like",
    "sqr",
    "sqrt",
    "square_diagonal",
    "structured_dot",
    "sub",
    "sum",
    "tan",
    "tanh",
    "transpose",
    "trunc",
    "vstack",
    *[c.__name__ for c in OP_CLASSES],
    "SparseOp",
]
