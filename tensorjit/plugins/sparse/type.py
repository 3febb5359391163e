"""SparseType (CSR/CSC matrices on scipy.sparse), its variables and shared variables.

scipy is imported lazily (on first use of a value), so registering the plugin stays
cheap for programs that never touch a sparse matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.core.config import config
from tensorjit.core.graph.basic import Constant, Variable
from tensorjit.core.graph.type import Type
from tensorjit.core.memory.shared import SharedVariable

FORMATS = ("csr", "csc")


def sp():
    """The ``scipy.sparse`` module (imported on first use)."""
    import scipy.sparse

    return scipy.sparse


def is_sparse_value(value: Any) -> bool:
    """Whether ``value`` is a scipy.sparse matrix/array (without importing scipy)."""
    module = type(value).__module__ or ""
    if not module.startswith("scipy.sparse"):
        return False
    return bool(sp().issparse(value))


def _normalize_dtype(dtype: Any) -> str:
    if dtype is None or dtype == "floatX":
        return config.floatX
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{dtype!r} is not a NumPy dtype") from None
    if dt.kind not in "biuf":
        raise TypeError(f"sparse matrices of dtype {dt} are not supported (bool/int/uint/float)")
    return dt.name


def _value_kind(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"a dense ndarray of dtype {value.dtype} and shape {value.shape}"
    if is_sparse_value(value):
        return f"a scipy.sparse {value.format} matrix of dtype {value.dtype}, shape {value.shape}"
    return f"{type(value).__name__} {value!r}"[:120]


def _arrays(value: Any) -> list[np.ndarray]:
    """The buffers behind a value: data/indices/indptr of a sparse matrix, or an ndarray."""
    if isinstance(value, np.ndarray):
        return [value]
    if is_sparse_value(value):
        names = ("data", "indices", "indptr", "row", "col", "offsets")
        return [a for a in (getattr(value, n, None) for n in names) if isinstance(a, np.ndarray)]
    return []


def _canonical(value: Any, fmt: str = "csr"):
    """A copy in ``fmt`` with duplicates summed, indices sorted and zeros removed."""
    out = value.asformat(fmt, copy=True)
    out.sum_duplicates()
    out.eliminate_zeros()
    return out


class SparseType(Type):
    """2-d sparse matrices of one format ('csr' or 'csc') and one dtype.

    Values are scipy.sparse matrices; ``filter`` converts other sparse formats (and
    dtypes, when safe) but refuses dense values.
    """

    ndim = 2
    shape = (None, None)
    broadcastable = (False, False)

    __props__ = ("format", "dtype")

    def __init__(self, format: str, dtype: Any = None):
        if format not in FORMATS:
            raise ValueError(f"sparse format must be one of {FORMATS}, got {format!r}")
        self.format = format
        self.dtype = _normalize_dtype(dtype)
        self.numpy_dtype = np.dtype(self.dtype)

    def __str__(self) -> str:
        return f"SparseType({self.format}, {self.dtype})"

    def short_str(self) -> str:
        return f"{self.dtype} {self.format} matrix"

    def clone(self, format: str | None = None, dtype: Any = None) -> SparseType:
        return SparseType(format or self.format, dtype or self.dtype)

    # ---------------------------------------------------------------- values
    def filter(self, value: Any, strict: bool = False, allow_downcast: bool | None = None):
        """``value`` as a scipy.sparse matrix of this format and dtype (never copies a
        matching one, so ``shared(v, borrow=True)`` can alias it)."""
        if isinstance(value, Variable):
            raise TypeError(f"expected a value, got the symbolic variable {value.describe()}")
        if not is_sparse_value(value):
            raise TypeError(
                f"expected a scipy.sparse {self.format} matrix of dtype {self.dtype}, got "
                f"{_value_kind(value)}; dense values are not converted implicitly (use "
                f"scipy.sparse.{self.format}_matrix(value), or tensorjit.sparse."
                f"{self.format}_from_dense in the graph)"
            )
        if len(value.shape) != 2:
            raise ValueError(f"expected a 2-d sparse matrix, got shape {value.shape}")
        if value.format == self.format and value.dtype == self.numpy_dtype:
            return value
        if strict:
            raise TypeError(
                f"expected a scipy.sparse {self.format} matrix of dtype {self.dtype}, got "
                f"{_value_kind(value)} (strict=True allows no conversion)"
            )
        if value.dtype != self.numpy_dtype:
            if not (allow_downcast or np.can_cast(value.dtype, self.numpy_dtype, "safe")):
                raise TypeError(
                    f"converting {_value_kind(value)} to {self.dtype} would lose precision; "
                    f"pass a matrix of dtype {self.dtype}"
                )
            value = value.astype(self.numpy_dtype)
        return value.asformat(self.format)

    def values_eq(self, a: Any, b: Any) -> bool:
        if not (is_sparse_value(a) and is_sparse_value(b)):
            return False
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        ca, cb = _canonical(a), _canonical(b)
        return (
            np.array_equal(ca.indptr, cb.indptr)
            and np.array_equal(ca.indices, cb.indices)
            and bool(np.array_equal(ca.data, cb.data, equal_nan=ca.dtype.kind == "f"))
        )

    def values_eq_approx(self, a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8) -> bool:
        if not (is_sparse_value(a) and is_sparse_value(b)) or a.shape != b.shape:
            return False
        ca, cb = _canonical(a).astype(np.float64), _canonical(b).astype(np.float64)
        nan_a, nan_b = ca.copy(), cb.copy()
        nan_a.data = np.isnan(ca.data).astype(np.float64)
        nan_b.data = np.isnan(cb.data).astype(np.float64)
        if (nan_a != nan_b).nnz:
            return False
        ca.data[np.isnan(ca.data)] = 0.0
        cb.data[np.isnan(cb.data)] = 0.0
        excess = abs(ca - cb) - rtol * abs(cb)
        return excess.nnz == 0 or float(excess.data.max()) <= atol

    def may_share_memory(self, a: Any, b: Any) -> bool:
        if a is b:
            return True
        return any(np.may_share_memory(x, y) for x in _arrays(a) for y in _arrays(b))

    def shares_memory(self, a: Any, b: Any) -> bool:
        if a is b:
            return True
        return any(
            x.size and y.size and np.shares_memory(x, y, max_work=10**6)
            for x in _arrays(a)
            for y in _arrays(b)
        )

    def copy_value(self, value: Any):
        return value.copy()  # copies data, indices and indptr

    # ---------------------------------------------------------------- variables
    def make_variable(self, name: str | None = None) -> Variable:
        return SparseVariable(self, None, None, name)

    def make_constant(self, value: Any, name: str | None = None):
        return SparseConstant(self, self.filter(value, allow_downcast=True), name)

    def filter_variable(self, other: Any) -> Variable:
        if isinstance(other, Variable):
            converted = self.convert_variable(other)
            if converted is None:
                raise TypeError(f"expected a variable of type {self}, got {other.describe()}")
            return converted
        return self.make_constant(other)

    # ---------------------------------------------------------------- gradients
    # The gradient of a cost w.r.t. a sparse variable is *structured*: a sparse matrix of
    # the same format whose pattern is (a subset of) the variable's own pattern, i.e. the
    # derivative w.r.t. each stored value.
    def grad_zeros_like(self, var: Variable) -> Variable:
        from tensorjit.plugins.sparse.basic import sp_zeros_like

        return sp_zeros_like(var, dtype=_grad_dtype(self.dtype))

    def grad_sum(self, terms: list[Variable]) -> Variable:
        from tensorjit.plugins.sparse.basic import add

        total = terms[0]
        for t in terms[1:]:
            total = add(total, t)
        return total

    def grad_one_like(self, cost: Variable) -> Variable:
        raise TypeError(
            f"can not differentiate the sparse matrix {cost.describe()}: the cost must be a "
            "scalar (e.g. tensorjit.sparse.sum(x))"
        )

    def grad_as_type_of(self, var: Variable, g: Variable) -> Variable:
        from tensorjit.plugins.sparse import basic

        want = _grad_dtype(self.dtype)
        if isinstance(g.type, SparseType):
            if g.type.format != self.format:
                g = basic.convert_format(g, self.format)
            if g.type.dtype != want:
                g = basic.sp_cast(g, want)
            return g
        if getattr(g.type, "ndim", None) != 2:
            origin = g.owner.op if g.owner is not None else "a known gradient"
            raise TypeError(
                f"gradient of sparse {var.describe()} from {origin} must be a matrix, got "
                f"{g.describe()}"
            )
        # A dense gradient keeps only the entries at the variable's pattern (structured).
        masked = basic.mul(basic.sp_ones_like(var), g)
        return masked if masked.type.dtype == want else basic.sp_cast(masked, want)


def _grad_dtype(dtype: str) -> str:
    return dtype if np.dtype(dtype).kind == "f" else config.floatX


class _SparseMethods:
    """Operators shared by sparse variables, constants and shared variables."""

    __slots__ = ()
    type: SparseType
    __array_ufunc__ = None  # ndarray (op) sparse-variable defers to our reflected ops
    __array_priority__ = 1001

    def __add__(self, other):
        return _b().add(self, other)

    def __radd__(self, other):
        return _b().add(other, self)

    def __sub__(self, other):
        return _b().sub(self, other)

    def __rsub__(self, other):
        return _b().sub(other, self)

    def __mul__(self, other):
        return _b().mul(self, other)

    def __rmul__(self, other):
        return _b().mul(other, self)

    def __neg__(self):
        return _b().neg(self)

    def __abs__(self):
        return _b().abs(self)

    def __matmul__(self, other):
        return _b().dot(self, other)

    def __rmatmul__(self, other):
        return _b().dot(other, self)

    def dot(self, other):
        return _b().dot(self, other)

    def sum(self, axis=None):
        return _b().sum(self, axis)

    def toarray(self):
        return _b().dense_from_sparse(self)

    def astype(self, dtype):
        return _b().sp_cast(self, dtype)

    @property
    def T(self):
        return _b().transpose(self)

    @property
    def shape(self):
        return _b().sp_shape(self)

    @property
    def ndim(self) -> int:
        return 2

    @property
    def dtype(self) -> str:
        return self.type.dtype

    @property
    def format(self) -> str:
        return self.type.format

    def __bool__(self):
        raise TypeError(f"the truth value of symbolic {self} is unknown until the function runs")

    def __len__(self):
        raise TypeError(f"len() of symbolic {self} is unknown; use .shape[0]")

    def __iter__(self):
        raise TypeError(f"symbolic sparse {self} is not iterable")


def _b():
    from tensorjit.plugins.sparse import basic

    return basic


class SparseVariable(_SparseMethods, Variable):
    """A symbolic sparse matrix."""

    __slots__ = ()


class SparseConstant(_SparseMethods, Constant):
    """A constant sparse matrix (a private copy of the value given)."""

    __slots__ = ()

    def __init__(self, type: SparseType, data: Any, name=None):
        super().__init__(type, data.copy(), name)

    def signature(self):
        c = _canonical(self.data)
        key = (c.shape, str(c.dtype), c.indptr.tobytes(), c.indices.tobytes(), c.data.tobytes())
        return (self.type, key)

    def clone(self):
        cp = SparseConstant(self.type, self.data, self.name)
        cp.created_at = self.created_at
        return cp

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        return f"SparseConstant{{{self.type.format}, {self.data.shape}, nnz={self.data.nnz}}}"


class SparseSharedVariable(_SparseMethods, SharedVariable):
    """A shared sparse matrix: same borrow contract as dense shared variables
    (``borrow=False`` copies data, indices and indptr)."""


# ---------------------------------------------------------------- constructors
def _check_enabled() -> None:
    from tensorjit.plugins.sparse import require_plugin

    require_plugin()


def matrix(format: str, name: str | None = None, dtype: Any = None) -> SparseVariable:
    """A symbolic sparse matrix of ``format`` ('csr' or 'csc')."""
    _check_enabled()
    return SparseType(format, dtype).make_variable(name)  # type: ignore[return-value]


def csr_matrix(name: str | None = None, dtype: Any = None) -> SparseVariable:
    """A symbolic CSR matrix (dtype defaults to config.floatX)."""
    return matrix("csr", name, dtype)


def csc_matrix(name: str | None = None, dtype: Any = None) -> SparseVariable:
    """A symbolic CSC matrix (dtype defaults to config.floatX)."""
    return matrix("csc", name, dtype)


def as_sparse_variable(x: Any, name: str | None = None) -> Variable:
    """``x`` as a sparse Variable: sparse Variables pass through, scipy values become
    constants; anything else is a TypeError."""
    if isinstance(x, Variable):
        if not isinstance(x.type, SparseType):
            raise TypeError(f"expected a sparse matrix, got {x.describe()}")
        return x
    if is_sparse_value(x):
        fmt = x.format if x.format in FORMATS else "csr"
        return SparseType(fmt, x.dtype).make_constant(x, name)
    raise TypeError(f"can not convert {_value_kind(x)} to a sparse variable")


def sparse_shared_constructor(
    value: Any,
    name: str | None = None,
    borrow: bool = False,
    strict: bool = False,
    allow_downcast: bool | None = None,
    format: str | None = None,
) -> SparseSharedVariable:
    """The shared constructor the sparse plugin registers for scipy.sparse values."""
    _check_enabled()
    fmt = format or (value.format if value.format in FORMATS else "csr")
    stype = SparseType(fmt, value.dtype)
    return SparseSharedVariable(stype, value, name, borrow, strict, allow_downcast)
