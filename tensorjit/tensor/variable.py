"""TensorVariable (NumPy-like operators), TensorConstant, TensorSharedVariable."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tensorjit.core.config import config
from tensorjit.core.devices import HOST, default_device, kind_of, split_ordinal
from tensorjit.core.diagnostics import TensorjitRuntimeWarning
from tensorjit.core.graph.basic import Constant, Variable
from tensorjit.core.memory.shared import SharedVariable
from tensorjit.tensor.type import TensorType


def _defer_to_other_families(method):
    """A binary operator returns NotImplemented for a Variable of another family (e.g. a
    sparse matrix), so that Python tries that operand's reflected operator."""

    def wrapper(self, other):
        if isinstance(other, Variable) and not isinstance(other.type, TensorType):
            return NotImplemented
        return method(self, other)

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class _TensorMethods:
    """Operators and methods shared by symbolic tensors, constants and shared tensors."""

    __slots__ = ()
    type: TensorType
    # NumPy must defer to our reflected operators: ndarray + x builds a graph.
    __array_ufunc__ = None
    __array_priority__ = 1000

    # -- arithmetic
    @_defer_to_other_families
    def __add__(self, other):
        return _m().add(self, other)

    @_defer_to_other_families
    def __radd__(self, other):
        return _m().add(other, self)

    @_defer_to_other_families
    def __sub__(self, other):
        return _m().sub(self, other)

    @_defer_to_other_families
    def __rsub__(self, other):
        return _m().sub(other, self)

    @_defer_to_other_families
    def __mul__(self, other):
        return _m().mul(self, other)

    @_defer_to_other_families
    def __rmul__(self, other):
        return _m().mul(other, self)

    @_defer_to_other_families
    def __truediv__(self, other):
        return _m().true_div(self, other)

    @_defer_to_other_families
    def __rtruediv__(self, other):
        return _m().true_div(other, self)

    @_defer_to_other_families
    def __floordiv__(self, other):
        return _m().int_div(self, other)

    @_defer_to_other_families
    def __rfloordiv__(self, other):
        return _m().int_div(other, self)

    @_defer_to_other_families
    def __mod__(self, other):
        return _m().mod(self, other)

    @_defer_to_other_families
    def __rmod__(self, other):
        return _m().mod(other, self)

    @_defer_to_other_families
    def __pow__(self, other):
        return _m().pow(self, other)

    @_defer_to_other_families
    def __rpow__(self, other):
        return _m().pow(other, self)

    def __neg__(self):
        return _m().neg(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _m().abs(self)

    @_defer_to_other_families
    def __matmul__(self, other):
        return _matmul(self, other)

    @_defer_to_other_families
    def __rmatmul__(self, other):
        return _matmul(other, self)

    # -- comparisons (``==`` stays identity, as in Theano: use eq()/neq())
    @_defer_to_other_families
    def __lt__(self, other):
        return _m().lt(self, other)

    @_defer_to_other_families
    def __le__(self, other):
        return _m().le(self, other)

    @_defer_to_other_families
    def __gt__(self, other):
        return _m().gt(self, other)

    @_defer_to_other_families
    def __ge__(self, other):
        return _m().ge(self, other)

    # -- bitwise / logical
    @_defer_to_other_families
    def __and__(self, other):
        return _m().and_(self, other)

    @_defer_to_other_families
    def __rand__(self, other):
        return _m().and_(other, self)

    @_defer_to_other_families
    def __or__(self, other):
        return _m().or_(self, other)

    @_defer_to_other_families
    def __ror__(self, other):
        return _m().or_(other, self)

    @_defer_to_other_families
    def __xor__(self, other):
        return _m().xor(self, other)

    @_defer_to_other_families
    def __rxor__(self, other):
        return _m().xor(other, self)

    def __invert__(self):
        return _m().invert(self)

    # -- python protocol guards: symbolic values have no truth value or length
    def __bool__(self):
        if THEANO_TRUTH_RULE[0] and not _is_comparison(self):
            return True  # Theano's rule (under tensorjit.compat): ``if not W`` tests None
        raise TypeError(
            f"the truth value of symbolic {self} is unknown until the function runs; "
            "use tensorjit.tensor.switch or ifelse for symbolic conditions"
        )

    def __len__(self):
        raise TypeError(f"len() of symbolic {self} is unknown; use .shape[0]")

    def __iter__(self):
        raise TypeError(f"symbolic {self} is not iterable; index it with [i]")

    # -- attributes
    @property
    def ndim(self) -> int:
        return self.type.ndim

    @property
    def dtype(self) -> str:
        return self.type.dtype

    @property
    def broadcastable(self) -> tuple[bool, ...]:
        return self.type.broadcastable

    @property
    def shape(self):
        return _b().shape(self)

    @property
    def T(self):
        return _b().transpose(self)

    @property
    def size(self):
        return _m().prod_of_shape(self)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return _b().transpose(self, axes or None)

    def dimshuffle(self, *pattern):
        if len(pattern) == 1 and isinstance(pattern[0], (tuple, list)):
            pattern = tuple(pattern[0])
        return _b().dimshuffle(self, pattern)

    def reshape(self, *shape, ndim: int | None = None):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, Variable)):
            shape = shape[0]
        return _b().reshape(self, shape, ndim=ndim)

    def flatten(self, ndim: int = 1):
        return _b().flatten(self, ndim)

    def astype(self, dtype):
        return _m().cast(self, dtype)

    def __getitem__(self, index):
        from tensorjit.tensor.subtensor import getitem

        return getitem(self, index)

    # -- reductions (Theano's keywords: dtype is the result's, acc_dtype the accumulator's)
    def sum(self, axis=None, dtype=None, keepdims: bool = False, acc_dtype=None):
        return _m().sum(self, axis=axis, keepdims=keepdims, dtype=dtype, acc_dtype=acc_dtype)

    def mean(self, axis=None, dtype=None, keepdims: bool = False, acc_dtype=None):
        return _m().mean(self, axis=axis, keepdims=keepdims, dtype=dtype, acc_dtype=acc_dtype)

    def prod(self, axis=None, dtype=None, keepdims: bool = False, acc_dtype=None):
        return _m().prod(self, axis=axis, keepdims=keepdims, dtype=dtype, acc_dtype=acc_dtype)

    def var(self, axis=None, ddof: int = 0, keepdims: bool = False):
        return _m().var(self, axis=axis, keepdims=keepdims, ddof=ddof)

    def std(self, axis=None, ddof: int = 0, keepdims: bool = False):
        return _m().std(self, axis=axis, keepdims=keepdims, ddof=ddof)

    def ptp(self, axis=None, keepdims: bool = False):
        return _m().ptp(self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims: bool = False):
        return _m().max(self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, keepdims: bool = False):
        return _m().min(self, axis=axis, keepdims=keepdims)

    def argmax(self, axis=None, keepdims: bool = False):
        return _m().argmax(self, axis=axis, keepdims=keepdims)

    def argmin(self, axis=None, keepdims: bool = False):
        return _m().argmin(self, axis=axis, keepdims=keepdims)

    def all(self, axis=None, keepdims: bool = False):
        return _m().all(self, axis=axis, keepdims=keepdims)

    def any(self, axis=None, keepdims: bool = False):
        return _m().any(self, axis=axis, keepdims=keepdims)

    def dot(self, other):
        return _m().dot(self, other)

    # -- the other ndarray methods that have a tensor function (NumPy's signatures)
    def cumsum(self, axis=None):
        return _t().cumsum(self, axis=axis)

    def cumprod(self, axis=None):
        return _t().cumprod(self, axis=axis)

    def clip(self, a_min, a_max):
        return _m().clip(self, a_min, a_max)

    def round(self, mode: str = "half_to_even"):
        return _m().round(self, mode=mode)

    def conj(self):
        return _m().conj(self)

    conjugate = conj

    @property
    def real(self):
        return _m().real(self)

    @property
    def imag(self):
        return _m().imag(self)

    def trace(self, offset: int = 0, axis1: int = 0, axis2: int = 1):
        return _t().trace(self, offset=offset, axis1=axis1, axis2=axis2)

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1):
        return _t().diagonal(self, offset=offset, axis1=axis1, axis2=axis2)

    def sort(self, axis=-1, kind: str = "quicksort"):
        return _t().sort(self, axis=axis, kind=kind)

    def argsort(self, axis=-1, kind: str = "quicksort"):
        return _t().argsort(self, axis=axis, kind=kind)

    def repeat(self, repeats, axis=None):
        return _t().repeat(self, repeats, axis=axis)

    def take(self, indices, axis=None):
        return _t().take(self, indices, axis=axis)

    def searchsorted(self, v, side: str = "left", sorter=None):
        return _t().searchsorted(self, v, side=side, sorter=sorter)

    def squeeze(self, axis=None):
        return _b().squeeze(self, axis=axis)

    def swapaxes(self, axis1, axis2):
        return _b().swapaxes(self, axis1, axis2)

    def ravel(self):
        return _b().flatten(self, 1)

    def norm(self, L, axis=None, keepdims: bool = False):
        """Theano's ``x.norm(L, axis)``: ``sum(|x| ** L, axis) ** (1 / L)`` (over every
        element by default; never a matrix norm)."""
        if L == 0 or not np.isfinite(L):
            # Theano's limit too: the 0- and inf-"norms" are no sums of powers
            raise NotImplementedError(
                f"norm of {self.describe()}: L must be finite and nonzero, got {L}"
            )
        m = _m()
        if L == 1:
            return m.sum(m.abs(self), axis=axis, keepdims=keepdims)
        if L == 2:
            return m.sqrt(m.sum(m.sqr(self), axis=axis, keepdims=keepdims))
        return m.pow(m.sum(m.pow(m.abs(self), L), axis=axis, keepdims=keepdims), 1.0 / L)

    def fill(self, value):
        return _t().fill(self, value)

    def zeros_like(self, dtype=None):
        return _m().zeros_like(self, dtype=dtype)

    def ones_like(self, dtype=None):
        return _m().ones_like(self, dtype=dtype)

    def copy(self, name: str | None = None):
        """A new variable with this one's value (Theano's ``tensor_copy``)."""
        from tensorjit.core.memory.copy_op import deep_copy

        out = deep_copy(self)
        out.name = name
        return out


def _matmul(a: Any, b: Any) -> Variable:
    """``a @ b`` as NumPy's: ``dot`` up to matrices, ``matmul`` (stacks of matrices with
    broadcast batch axes) beyond, where ``dot`` would be a tensordot."""
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    for side, v in (("first", a), ("second", b)):
        if v.type.ndim == 0:  # NumPy's matmul refuses scalars (dot would multiply)
            raise ValueError(f"a @ b: the {side} operand {v.describe()} is a scalar")
    if a.type.ndim > 2 or b.type.ndim > 2:
        return _t().matmul(a, b)
    return _m().dot(a, b)


def _m():
    from tensorjit.tensor import math

    return math


def _b():
    from tensorjit.tensor import shape_ops

    return shape_ops


def _t():
    import tensorjit.tensor

    return tensorjit.tensor


#: ``[True]`` while ``tensorjit.compat`` is installed: a variable that is not a
#: comparison is then truthy, as in Theano (``W = W or default``); a comparison still
#: raises, since its truth is only known when the function runs.
THEANO_TRUTH_RULE = [False]
_COMPARISONS = frozenset({"lt", "gt", "le", "ge", "eq", "neq"})


def _is_comparison(var: Variable) -> bool:
    scalar_op = getattr(getattr(var.owner, "op", None), "scalar_op", None)
    return getattr(scalar_op, "name", None) in _COMPARISONS


class TensorVariable(_TensorMethods, Variable):
    """A symbolic N-d array."""

    __slots__ = ()


class TensorConstant(_TensorMethods, Constant):
    """A constant N-d array. ``weak`` marks constants made from Python scalars: like
    NumPy's Python scalars (NEP 50) they take the dtype of the arrays they combine with."""

    __slots__ = ("weak",)

    def __init__(self, type: TensorType, data: Any, name=None, weak: bool = False):
        data = np.array(data, copy=True)  # never freeze or alias the caller's array
        data.setflags(write=False)  # a constant can never be modified in place
        super().__init__(type, data, name)
        self.weak = weak

    def clone(self):
        cp = TensorConstant(self.type, self.data, self.name, self.weak)
        cp.created_at = self.created_at
        return cp

    def signature(self):
        return (super().signature(), self.weak)


class TensorSharedVariable(_TensorMethods, SharedVariable):
    """A shared N-d array."""


def constant(value: Any, name: str | None = None, dtype: Any = None) -> TensorConstant:
    """A TensorConstant for a Python or NumPy value (Python scalars become weak)."""
    weak = (
        dtype is None
        and isinstance(value, (bool, int, float, complex))
        and not isinstance(value, np.generic)
    )
    try:
        if dtype is not None:
            arr = np.asarray(value, dtype=dtype)
        elif weak:
            arr = np.asarray(value, dtype=python_scalar_dtype(value))
        else:
            arr = np.asarray(value)
    except OverflowError:
        raise ValueError(
            f"constant {value!r} does not fit in dtype {dtype or python_scalar_dtype(value)}"
        ) from None
    if arr.dtype.kind not in "biufc":
        raise TypeError(f"can not make a tensor constant from {type(value).__name__} {value!r}")
    ttype = TensorType(arr.dtype, arr.shape)
    return TensorConstant(ttype, arr, name, weak=weak)


def python_scalar_dtype(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return config.floatX if config.floatX != "float16" else "float64"
    return "complex128"


def as_tensor_variable(x: Any, name: str | None = None, ndim: int | None = None) -> Variable:
    """``x`` as a tensor Variable: Variables pass through, values become constants."""
    if isinstance(x, Variable):
        if not isinstance(x.type, TensorType):
            raise TypeError(f"expected a tensor, got {x.describe()}")
        var = x
    elif isinstance(x, (list, tuple)) and any(isinstance(e, Variable) for e in x):
        from tensorjit.tensor.shape_ops import stack

        var = stack([as_tensor_variable(e) for e in x])
    else:
        try:
            var = constant(x, name=name)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"can not convert {type(x).__name__} {x!r} to a tensor: {exc}"
            ) from None
    if ndim is not None and var.type.ndim != ndim:
        raise TypeError(f"expected a {ndim}-d tensor, got {var.describe()}")
    return var


def tensor_shared_constructor(
    value: Any,
    name: str | None = None,
    borrow: bool = False,
    strict: bool = False,
    allow_downcast: bool | None = None,
    shape: tuple | None = None,
    broadcastable: tuple | None = None,
    target: str | None = None,
) -> TensorSharedVariable:
    """The shared constructor the tensor family registers for ndarrays and scalars.
    ``target``: the device holding the value (default ``config.device``)."""
    kind = None if isinstance(value, np.ndarray) else kind_of(value)
    if kind is not None and kind.device != HOST:
        arr = value  # a device value: shared on its device unless told otherwise
        target = kind.device if target is None else target
    else:
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
        if arr.ndim == 0 and not isinstance(value, np.ndarray):
            value = arr  # a number is held as a 0-d array (which strict=True accepts)
    if shape is None and broadcastable is None:
        shape = (None,) * arr.ndim  # shared values may change shape, as in Theano
    if target is None:
        device = usable_default_device(name)
    else:
        device = split_ordinal(target)[0]
        check_usable(device, f"shared variable {name!r}: target={target!r}")
    ttype = TensorType(arr.dtype, shape, broadcastable, device=device)
    return TensorSharedVariable(ttype, value, name, borrow, strict, allow_downcast)


def _why_unusable(device: str) -> str | None:
    """None when some backend of ``device`` can run here, else every backend's reason
    (an unknown device is left to TensorType, which names the known ones)."""
    if device == HOST:
        return None  # (the common case: no registry lookups)
    from tensorjit.core.hooks import get_plugin_system

    registry = get_plugin_system().registries.backends
    mine = [b.name for b in registry.backends.values() if b.device == device]
    if not mine or registry.for_device(device):
        return None
    return "; ".join(f"{name}: {registry.unavailable_reason(name)}" for name in mine)


def check_usable(device: str, what: str) -> None:
    """Raise a clear error when values can not live on ``device`` here."""
    reason = _why_unusable(device)
    if reason is not None:
        raise RuntimeError(f"{what} can not hold values on this machine ({reason})")


def usable_default_device(name: str | None) -> str:
    """``config.device``'s device, or the host (with a warning) when none of its backends
    can run here: functions compiled with that config run on the host too."""
    device = default_device()
    reason = _why_unusable(device)
    if reason is None:
        return device
    warnings.warn(
        f"config.device={config.device} is unusable here ({reason}): shared variable "
        f"{name!r} lives on the host",
        TensorjitRuntimeWarning,
        stacklevel=4,
    )
    return HOST


def accepts_tensor_value(value: Any) -> bool:
    if isinstance(value, (np.ndarray, np.generic, bool, int, float, complex)):
        return np.asarray(value).dtype.kind in "biufc"
    kind = kind_of(value)  # a device's array
    return kind is not None and np.dtype(value.dtype).kind in "biufc"
