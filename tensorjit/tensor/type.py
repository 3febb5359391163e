"""TensorType and the Theano-style variable constructors."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorjit.core.config import config
from tensorjit.core.devices import HOST, array_kind, kind_of
from tensorjit.core.graph.basic import Variable
from tensorjit.core.graph.type import PYTHON_SCALARS, Type

# Theano's one-letter dtype prefixes: bmatrix, wvector, ivector, lvector, fmatrix, ...
DTYPE_PREFIXES = {
    "b": "int8",
    "w": "int16",
    "i": "int32",
    "l": "int64",
    "f": "float32",
    "d": "float64",
    "c": "complex64",
    "z": "complex128",
}

StaticShape = tuple[int | None, ...]


def normalize_dtype(dtype: Any) -> str:
    if dtype is None or dtype == "floatX":
        return config.floatX
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{dtype!r} is not a NumPy dtype") from None
    if dt.kind not in "biufc":
        raise TypeError(f"tensors of dtype {dt} are not supported (bool/int/uint/float/complex)")
    return dt.name


class NotNumericError(TypeError, ValueError):
    """A value that is no number (a string, an object array) where numbers are needed.
    Both a TypeError (tensorjit's word for a value of the wrong kind) and a ValueError
    (NumPy's and Theano's word for a conversion that failed), so code written against
    either catches it."""


# Values that are host values whatever devices are loaded (no array kind is asked).
_PYTHON_VALUES = (*PYTHON_SCALARS, list, tuple)
_APPROX_ATOL = {"float16": 1e-3, "float32": 1e-5, "complex64": 1e-5}


class TensorType(Type):
    """Dense N-d arrays of one dtype, with a static shape: an int per known dimension,
    None where unknown. A static length of 1 is what makes a dimension broadcastable.
    ``device``: where the values live ("cpu": NumPy arrays; another device's values are
    handled only through its array kind, see core/devices.py)."""

    __props__ = ("dtype", "shape", "device")

    def __init__(
        self,
        dtype: Any = None,
        shape: Sequence[int | None] | None = None,
        broadcastable: Sequence[bool] | None = None,
        device: str = HOST,
    ):
        if not isinstance(device, str):
            raise TypeError(f"TensorType device must be a device name, got {device!r}")
        self.device = device
        self.dtype = normalize_dtype(dtype)
        if shape is None and broadcastable is None:
            raise TypeError("TensorType needs a shape (or a broadcastable pattern)")
        if shape is not None and broadcastable is not None:
            raise TypeError("give TensorType either shape or broadcastable, not both")
        if broadcastable is not None:
            shape = tuple(1 if b else None for b in broadcastable)
        norm: list[int | None] = []
        for s in shape:  # type: ignore[union-attr]
            if s is not None and (not isinstance(s, (int, np.integer)) or s < 0):
                raise TypeError(f"static shape entries must be None or ints >= 0, got {shape}")
            norm.append(None if s is None else int(s))
        self.shape: StaticShape = tuple(norm)
        self.ndim = len(self.shape)
        self.broadcastable = tuple(s == 1 for s in self.shape)
        self.numpy_dtype = np.dtype(self.dtype)

    def __str__(self) -> str:
        shape = ", ".join("?" if s is None else str(s) for s in self.shape)
        where = "" if self.device == HOST else f", device={self.device}"
        return f"TensorType({self.dtype}, shape=({shape}{',' if self.ndim == 1 else ''}){where})"

    __repr__ = __str__

    def short_str(self) -> str:
        names = {0: "scalar", 1: "vector", 2: "matrix"}
        kind = names.get(self.ndim, f"tensor{self.ndim}")
        if self.ndim == 2 and self.shape[0] == 1 and self.shape[1] != 1:
            kind = "row"
        where = "" if self.device == HOST else f" on {self.device}"
        return f"{self.dtype} {kind}{where}"

    def clone(self, dtype: Any = None, shape: Sequence[int | None] | None = None) -> TensorType:
        return TensorType(
            dtype or self.dtype, self.shape if shape is None else shape, device=self.device
        )

    def on_device(self, device: str) -> TensorType:
        if device == self.device:
            return self
        return TensorType(self.dtype, self.shape, device=device)

    def host_value(self, value: Any) -> Any:
        if self.device == HOST:
            return value
        return array_kind(self.device).to_host(value)

    # ---------------------------------------------------------------- values
    def filter(self, value: Any, strict: bool = False, allow_downcast: bool | None = None):
        """Return ``value`` as an ndarray of this type; raise TypeError/ValueError if not.

        Never copies a matching ndarray (so ``shared(v, borrow=True)`` can alias it).
        Converting to a smaller dtype needs ``allow_downcast``; Python scalars convert
        if they keep their value. A device type takes its device's values as they are
        and copies host values there (not with ``strict``).
        """
        if self.device != HOST:
            return self._filter_on_device(value, strict, allow_downcast)
        if type(value) in PYTHON_SCALARS and not self.ndim and not strict:
            return self._convert(value, allow_downcast)  # a minibatch index, a rate
        if type(value) is not np.ndarray and isinstance(value, np.ndarray):
            value = _base_array(value)
        if isinstance(value, np.ndarray) and value.dtype == self.numpy_dtype:
            arr = value
        elif strict:
            raise TypeError(
                f"expected an ndarray of dtype {self.dtype}, got {_value_kind(value)} "
                "(strict=True allows no conversion)"
            )
        else:
            arr = self._convert(value, allow_downcast)
        if arr.ndim != self.ndim:
            raise ValueError(f"expected {self.ndim} dimensions, got {arr.ndim} (shape {arr.shape})")
        for axis, (want, got) in enumerate(zip(self.shape, arr.shape)):
            if want is not None and want != got:
                raise ValueError(
                    f"dimension {axis} has length {got}, but the type's static shape "
                    f"{self.shape} requires {want}"
                )
        return arr

    def _check_shape(self, shape: tuple, where: Any) -> None:
        """``where``: the value's description, or a function making it (only called to
        word an error: this check runs on every call of a compiled function)."""
        if len(shape) != self.ndim:
            where = where() if callable(where) else where
            raise ValueError(f"expected {self.ndim} dimensions, got {len(shape)} ({where})")
        for axis, (want, got) in enumerate(zip(self.shape, shape)):
            if want is not None and want != got:
                where = where() if callable(where) else where
                raise ValueError(
                    f"dimension {axis} has length {got}, but the type's static shape "
                    f"{self.shape} requires {want} ({where})"
                )

    def _filter_on_device(self, value: Any, strict: bool, allow_downcast: bool | None) -> Any:
        kind = array_kind(self.device)
        if kind.is_value(value):
            if np.dtype(value.dtype) == self.numpy_dtype:
                self._check_shape(tuple(value.shape), lambda: kind.describe(value))
                return value
            if strict:
                raise TypeError(
                    f"expected a value of dtype {self.dtype} on {self.device}, got "
                    f"{kind.describe(value)} (strict=True allows no conversion)"
                )
            value = kind.to_host(value)  # converted on the host, as a host value would be
        if strict:
            raise TypeError(
                f"expected a {kind.type_name} of dtype {self.dtype} on {self.device}, got "
                f"{_value_kind(value)} (strict=True allows no conversion)"
            )
        host = self.on_device(HOST).filter(value, False, allow_downcast)
        return kind.from_host(host)

    def _convert(self, value: Any, allow_downcast: bool | None) -> np.ndarray:
        if isinstance(value, np.generic) and value.dtype == self.numpy_dtype:
            return np.asarray(value)  # a NumPy scalar of this dtype: no cast to check
        if isinstance(value, Variable):
            raise TypeError(f"expected a value, got the symbolic variable {value.describe()}")
        plain = isinstance(value, (np.ndarray, np.generic, *_PYTHON_VALUES))
        source_kind = None if plain else kind_of(value)
        if source_kind is not None and source_kind.device != HOST:
            value = source_kind.to_host(value)  # another device's value, fetched
        # Exact types: np.float64 subclasses float but is a NumPy value with a dtype.
        is_python = type(value) in (bool, int, float, complex, list, tuple)
        try:
            src = value if isinstance(value, np.ndarray) else np.asarray(value)
        except (ValueError, TypeError) as exc:
            raise NotNumericError(
                f"can not convert {_value_kind(value)} to an array: {exc}"
            ) from None
        if src.dtype.kind not in "biufc":
            raise NotNumericError(
                f"expected numeric data of dtype {self.dtype}, got {_value_kind(value)}"
            )
        return self._cast(src, value, is_python or (src.ndim == 0 and allow_downcast is None),
                          allow_downcast)  # fmt: skip

    def _cast(
        self, src: np.ndarray, value: Any, trial: bool, allow_downcast: bool | None
    ) -> np.ndarray:
        """``src`` as this dtype: a safe cast (any cast with ``allow_downcast``), or, where
        ``trial``, a cast that keeps the value."""
        if allow_downcast or np.can_cast(src.dtype, self.numpy_dtype, "safe"):
            return src.astype(self.numpy_dtype)
        if trial:
            # Overflow/complex warnings would only precede our error. (catch_warnings
            # costs tens of microseconds a call: only complex sources need it.)
            with np.errstate(all="ignore"):
                if src.dtype.kind == "c":
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
                        converted = src.astype(self.numpy_dtype)
                else:
                    converted = src.astype(self.numpy_dtype)
            if _same_values(converted, src):
                return converted
        raise TypeError(
            f"converting {_value_kind(value)} to {self.dtype} would lose precision; "
            f"pass a value of dtype {self.dtype}"
        )

    def values_eq(self, a: Any, b: Any) -> bool:
        if self.device != HOST:
            return TensorType(self.dtype, self.shape).values_eq(
                self.host_value(a), self.host_value(b)
            )
        return (
            a.shape == b.shape
            and a.dtype == b.dtype
            and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
        )

    def values_eq_approx(
        self, a: Any, b: Any, rtol: float = 1e-5, atol: float | None = None
    ) -> bool:
        if atol is None:
            # Two correct float32 kernels that sum in different orders differ by a few ulps
            # of the largest term, so small results need an absolute tolerance (Theano's).
            atol = _APPROX_ATOL.get(self.dtype, 1e-8)
        if self.device != HOST:
            a, b = self.host_value(a), self.host_value(b)
        return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))

    def may_share_memory(self, a: Any, b: Any) -> bool:
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return bool(np.may_share_memory(a, b))
        if self.device != HOST:
            kind = array_kind(self.device)
            if kind.is_value(a) and kind.is_value(b):
                return kind.may_share_memory(a, b)
        return a is b  # values of different devices never share memory

    def shares_memory(self, a: Any, b: Any) -> bool:
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return bool(np.shares_memory(a, b, max_work=10**6))
        if self.device != HOST:
            kind = array_kind(self.device)
            if kind.is_value(a) and kind.is_value(b):
                return kind.shares_memory(a, b)
        return a is b

    def copy_value(self, value: Any) -> Any:
        if self.device != HOST:
            return array_kind(self.device).copy(value)
        return np.array(value, copy=True)

    # ---------------------------------------------------------------- types
    def is_super(self, other: Type) -> bool:
        return (
            isinstance(other, TensorType)
            and other.device == self.device
            and other.dtype == self.dtype
            and other.ndim == self.ndim
            and all(s is None or s == o for s, o in zip(self.shape, other.shape))
        )

    def convert_variable(self, var: Variable) -> Variable | None:
        if var.type == self or self.is_super(var.type):
            return var
        other = getattr(var.type, "device", HOST)
        if other != self.device and self.on_device(other).is_super(var.type):
            # The same values on another device: a copy stands in (placement later
            # removes copies that are not needed).
            from tensorjit.core.memory.transfer_op import transfer

            return transfer(var, self.device)
        return None

    def make_variable(self, name: str | None = None) -> Variable:
        from tensorjit.tensor.variable import TensorVariable

        return TensorVariable(self, None, None, name)

    def make_constant(self, value: Any, name: str | None = None):
        from tensorjit.tensor.variable import TensorConstant

        return TensorConstant(self, self.filter(value, allow_downcast=True), name)

    def filter_variable(self, other: Any) -> Variable:
        from tensorjit.tensor.variable import as_tensor_variable

        var = as_tensor_variable(other)
        converted = self.convert_variable(var)  # a copy to this type's device, if needed
        if converted is None and var.type.dtype != self.dtype and var.type.ndim == self.ndim:
            from tensorjit.tensor.math import cast

            cast_var = cast(var, self.dtype)
            if np.can_cast(var.type.dtype, self.dtype, "same_kind") or isinstance(
                other, (int, float)
            ):
                converted = self.convert_variable(cast_var)
        if converted is None:
            raise TypeError(f"expected a variable of type {self}, got {var.describe()}")
        return converted

    def filter_update(self, value: Any) -> Variable:
        if not isinstance(value, Variable):  # data: a constant of this very type
            try:
                return self.make_constant(value)
            except ValueError as exc:
                raise TypeError(f"the update {value!r} is no value of {self}: {exc}") from None
        var = self.filter_variable(value)
        if var.type.broadcastable != self.broadcastable:
            # Theano's rule: a length-1 dimension that broadcasts is part of the type; a
            # (1, 1) update of a (10, 10) variable would change what the graph means.
            raise TypeError(
                f"the update {var.describe()} has broadcast pattern {var.type.broadcastable}, "
                f"the shared variable's type {self} has {self.broadcastable}: an update must "
                "keep the variable's type: unbroadcast(update, *axes) makes length-1 axes "
                "non-broadcastable (and addbroadcast the reverse, checked when it runs)"
            )
        return var

    # ---------------------------------------------------------------- gradients
    def grad_zeros_like(self, var: Variable) -> Variable:
        from tensorjit.tensor.math import zeros_like

        return zeros_like(var, dtype=_grad_dtype(self.dtype))

    def grad_one_like(self, cost: Variable) -> Variable:
        from tensorjit.tensor.math import ones_like

        return ones_like(cost, dtype=_grad_dtype(self.dtype))

    def grad_sum(self, terms: list[Variable]) -> Variable:
        from tensorjit.tensor.math import add

        total = terms[0]
        for t in terms[1:]:
            total = add(total, t)
        return total

    def grad_as_type_of(self, var: Variable, g: Variable) -> Variable:
        from tensorjit.tensor.math import cast

        g_ndim = getattr(g.type, "ndim", None)
        if g_ndim != self.ndim:
            origin = g.owner.op if g.owner is not None else "a known gradient"
            raise TypeError(
                f"gradient of {var.describe()} from {origin} has {g_ndim} dimensions, "
                f"expected {self.ndim}"
            )
        want = _grad_dtype(self.dtype)
        if g.type.dtype != want and self.numpy_dtype.kind in "fc":
            g = cast(g, want)
        return g


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """``np.array_equal(a, b)``, NaN equal to NaN, compared as NumPy compares (2**53 + 1
    equals its float32 rounding, as in a list's check); a 0-d pair without
    array_equal's ~10 us."""
    if a.ndim == 0 and b.ndim == 0:
        return bool(a == b) or bool(a != a) and bool(b != b)
    return bool(np.array_equal(a, b, equal_nan=b.dtype.kind in "fc"))


def _base_array(value: np.ndarray) -> np.ndarray:
    """A NumPy subclass as a plain array sharing its memory (np.matrix would keep vectors
    2-d; a subclass's own arithmetic is not what the graph computes). A masked array with
    masked elements is refused: its mask would silently be lost."""
    if isinstance(value, np.ma.MaskedArray) and np.ma.getmaskarray(value).any():
        raise TypeError(
            f"got a masked array ({_value_kind(value.data)}): its mask would be lost; pass "
            "value.filled(fill) or value.data"
        )
    return value.view(np.ndarray)


def _grad_dtype(dtype: str) -> str:
    return dtype if np.dtype(dtype).kind in "fc" else config.floatX


def _value_kind(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"ndarray of dtype {value.dtype} and shape {value.shape}"
    return f"{type(value).__name__} {value!r}"[:120]


# ---------------------------------------------------------------- constructors
def tensor(
    dtype: Any = None,
    shape: Sequence[int | None] | None = None,
    name: str | None = None,
    *,
    broadcastable: Sequence[bool] | None = None,
) -> Variable:
    """A symbolic tensor: ``tensor("float32", shape=(None, 3), name="x")``."""
    if isinstance(dtype, TensorType):
        raise TypeError("tensor() takes a dtype; call the TensorType itself to make a variable")
    if shape is None and broadcastable is None:
        raise TypeError("tensor() needs shape=(...) (None for an unknown length)")
    return TensorType(dtype, shape, broadcastable).make_variable(name)


def _make_constructor(ndim_shape: StaticShape, dtype: str | None, kind: str):
    def constructor(name: str | None = None, dtype: Any = dtype, shape=None) -> Variable:
        static = ndim_shape if shape is None else tuple(shape)
        if len(static) != len(ndim_shape):
            raise ValueError(f"{kind}() has {len(ndim_shape)} dimensions, got shape={shape}")
        return TensorType(dtype, static).make_variable(name)

    constructor.__name__ = constructor.__qualname__ = kind
    constructor.__doc__ = f"A symbolic {kind} (static shape {ndim_shape})."
    return constructor


_KINDS: dict[str, StaticShape] = {
    "scalar": (),
    "vector": (None,),
    "matrix": (None, None),
    "row": (1, None),
    "col": (None, 1),
    "tensor3": (None,) * 3,
    "tensor4": (None,) * 4,
    "tensor5": (None,) * 5,
}

CONSTRUCTORS: dict[str, Any] = {}
for _kind, _shape in _KINDS.items():
    CONSTRUCTORS[_kind] = _make_constructor(_shape, None, _kind)
    for _prefix, _dtype in DTYPE_PREFIXES.items():
        CONSTRUCTORS[_prefix + _kind] = _make_constructor(_shape, _dtype, _prefix + _kind)


def _make_plural(single):
    def plural(*names: str, dtype: Any = None) -> list[Variable]:
        if len(names) == 1 and isinstance(names[0], int):
            names = (None,) * names[0]  # type: ignore[assignment]
        kwargs = {} if dtype is None else {"dtype": dtype}
        return [single(n, **kwargs) for n in names]

    plural.__name__ = plural.__qualname__ = single.__name__ + "s"
    plural.__doc__ = (
        f"Several ``{single.__name__}`` variables at once, one per name: "
        f"``a, b = {single.__name__}s('a', 'b')`` (``dtype`` as for ``{single.__name__}``)."
    )
    return plural


#: plural constructor name -> the constructor it makes several of
PLURAL_OF: dict[str, str] = {}
for _kind, _plural in [
    ("scalar", "scalars"),
    ("vector", "vectors"),
    ("matrix", "matrices"),
    ("row", "rows"),
    ("col", "cols"),
    ("tensor3", "tensor3s"),
    ("tensor4", "tensor4s"),
]:
    for _prefix in ("", *DTYPE_PREFIXES):
        PLURAL_OF[_prefix + _plural] = _prefix + _kind
for _plural, _kind in PLURAL_OF.items():
    CONSTRUCTORS[_plural] = _make_plural(CONSTRUCTORS[_kind])
