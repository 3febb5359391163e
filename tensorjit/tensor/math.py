"""Elementwise math, reductions, dot and allocation: the NumPy-like functions."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.op import Op
from tensorjit.tensor.elemwise import DimShuffle, Elemwise
from tensorjit.tensor.rounding import abs_float64, product_bound, summation_bound
from tensorjit.tensor.scalar import SCALAR_OPS, Cast, Polygamma
from tensorjit.tensor.type import TensorType, normalize_dtype
from tensorjit.tensor.variable import as_tensor_variable, constant

# ---------------------------------------------------------------- elementwise
_ELEMWISE = {name: Elemwise(op) for name, op in SCALAR_OPS.items()}


def _elemwise(name: str):
    op = _ELEMWISE[name]

    def fn(*args):
        return op(*args)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} with NumPy broadcasting and dtype promotion."
    return fn


add = _elemwise("add")
sub = _elemwise("sub")
mul = _elemwise("mul")
true_div = _elemwise("true_div")
int_div = _elemwise("int_div")
mod = _elemwise("mod")
pow = _elemwise("pow")
maximum = _elemwise("maximum")
minimum = _elemwise("minimum")
lt = _elemwise("lt")
le = _elemwise("le")
gt = _elemwise("gt")
ge = _elemwise("ge")
eq = _elemwise("eq")
neq = _elemwise("neq")
and_ = _elemwise("and_")
or_ = _elemwise("or_")
xor = _elemwise("xor")
invert = _elemwise("invert")
neg = _elemwise("neg")
abs = _elemwise("abs")
sign = _elemwise("sign")
exp = _elemwise("exp")
exp2 = _elemwise("exp2")
expm1 = _elemwise("expm1")
log = _elemwise("log")
log2 = _elemwise("log2")
log10 = _elemwise("log10")
log1p = _elemwise("log1p")
sqrt = _elemwise("sqrt")
sqr = _elemwise("sqr")
sin = _elemwise("sin")
cos = _elemwise("cos")
tan = _elemwise("tan")
tanh = _elemwise("tanh")
sigmoid = _elemwise("sigmoid")
softplus = _elemwise("softplus")
floor = _elemwise("floor")
ceil = _elemwise("ceil")
switch = _elemwise("switch")
where = switch
divide = true_div
floor_divide = int_div
power = pow
bitwise_and, bitwise_or, bitwise_xor, bitwise_not = and_, or_, xor, invert
abs_ = abs

# Table 1 elementwise functions (NumPy semantics, dtypes and broadcasting).
arcsin = _elemwise("arcsin")
arccos = _elemwise("arccos")
arctan = _elemwise("arctan")
arctan2 = _elemwise("arctan2")
sinh = _elemwise("sinh")
cosh = _elemwise("cosh")
arcsinh = _elemwise("arcsinh")
arccosh = _elemwise("arccosh")
arctanh = _elemwise("arctanh")
deg2rad = _elemwise("deg2rad")
rad2deg = _elemwise("rad2deg")
reciprocal = _elemwise("reciprocal")
logaddexp = _elemwise("logaddexp")
trunc = _elemwise("trunc")
isnan = _elemwise("isnan")
isinf = _elemwise("isinf")
isfinite = _elemwise("isfinite")
real = _elemwise("real")
imag = _elemwise("imag")
conj = _elemwise("conj")
angle = _elemwise("angle")
erf = _elemwise("erf")
erfc = _elemwise("erfc")
erfinv = _elemwise("erfinv")
gamma = _elemwise("gamma")
gammaln = _elemwise("gammaln")
psi = _elemwise("psi")
tri_gamma = _elemwise("tri_gamma")
inv = reciprocal
floor_div = int_div
conjugate = conj
digamma = psi
sgn = sign  # Theano's name
arcsin.__doc__ = "Elementwise inverse sine (``numpy.arcsin``); the gradient needs |x| < 1."
real.__doc__ = "Real part (``numpy.real``): complex64 -> float32, complex128 -> float64."
imag.__doc__ = "Imaginary part (``numpy.imag``): zeros for real inputs."
angle.__doc__ = "Argument of a complex number (``numpy.angle``), in radians."
psi.__doc__ = "The digamma function, derivative of ``gammaln`` (``scipy.special.psi``)."
tri_gamma.__doc__ = "The trigamma function, derivative of ``psi``."

_ROUND_MODES = ("half_to_even", "half_away_from_zero")


def round(x: Any, mode: str = "half_to_even") -> Variable:
    """Round to the nearest integer value, keeping the dtype as ``numpy.round`` does.

    ``mode="half_to_even"`` (NumPy's rule) rounds 2.5 to 2; ``"half_away_from_zero"``
    rounds 2.5 to 3 and -2.5 to -3. The gradient is zero.
    """
    if mode not in _ROUND_MODES:
        raise ValueError(
            f"round: mode must be one of {_ROUND_MODES}, got {mode!r} "
            f"(rounding {as_tensor_variable(x).describe()})"
        )
    return _ELEMWISE[f"round_{mode}"](x)


def round_half_to_even(x: Any) -> Variable:
    """Round to the nearest integer, halves to the even one (NumPy's ``round``: 2.5 -> 2)."""
    return round(x, "half_to_even")


def round_half_away_from_zero(x: Any) -> Variable:
    """Round to the nearest integer, halves away from zero (2.5 -> 3, -2.5 -> -3)."""
    return round(x, "half_away_from_zero")


def iround(x: Any, mode: str = "half_to_even") -> Variable:
    """``round(x, mode)`` as int64."""
    return cast(round(x, mode), "int64")


def clip(x: Any, lo: Any, hi: Any) -> Variable:
    """``numpy.clip(x, lo, hi)`` with broadcasting; ``lo`` or ``hi`` may be None.

    The gradient w.r.t. ``x`` is 1 where ``lo <= x <= hi`` and 0 elsewhere; w.r.t. ``lo``
    (``hi``) it is 1 where the result is ``lo`` (``hi``).
    """
    if lo is None and hi is None:
        return as_tensor_variable(x)
    if lo is None:
        return minimum(x, hi)
    if hi is None:
        return maximum(x, lo)
    return _ELEMWISE["clip"](x, lo, hi)


def polygamma(n: int, x: Any) -> Variable:
    """The ``n``-th derivative of ``psi`` (``scipy.special.polygamma``), ``n >= 0``."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise ValueError(f"polygamma: n must be a non-negative Python int, got {n!r}")
    if n == 0:
        return psi(x)
    return Elemwise(Polygamma(int(n)))(x)


def cast(x: Any, dtype: Any) -> Variable:
    """``x`` converted to ``dtype`` (a no-op if it already has it)."""
    x = as_tensor_variable(x)
    dtype = normalize_dtype(dtype)
    if x.type.dtype == dtype:
        return x
    return Elemwise(Cast(dtype))(x)


def reusable_buffer(buf: Any, shape: tuple, dtype: np.dtype) -> np.ndarray | None:
    """``buf`` if a kernel may write a result of ``shape``/``dtype`` into it, else None.

    The VM (or Out(borrow=True)) leaves such a buffer in an output cell for reuse.
    """
    if (
        isinstance(buf, np.ndarray)
        and buf.shape == shape
        and buf.dtype == dtype
        and buf.flags.c_contiguous
        and buf.flags.writeable
    ):
        return buf
    return None


# ---------------------------------------------------------------- allocation
class Alloc(Op):
    """A new array of the given shape filled with (broadcast) ``value``."""

    __props__ = ()
    constant_folding = False  # folding would embed a possibly huge array in the graph

    def host_inputs(self, node: Apply) -> range:
        return range(1, len(node.inputs))  # the lengths

    def make_node(self, value: Any, *shape: Any) -> Apply:
        value = as_tensor_variable(value)
        dims = [as_tensor_variable(s) for s in shape]
        for d in dims:
            if d.type.ndim != 0 or np.dtype(d.type.dtype).kind not in "iu":
                raise TypeError(f"alloc: shape entries must be integer scalars, got {d.describe()}")
        if value.type.ndim > len(dims):
            raise ValueError(
                f"alloc: value {value.describe()} has more dimensions than shape {len(dims)}"
            )
        static = tuple(_constant_int(d) for d in dims)
        return Apply(self, [value] + dims, [TensorType(value.type.dtype, static).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(node.inputs[1:])]

    def perform(self, node, inputs, output_storage):
        value, *shape = inputs
        shape = tuple(int(s) for s in shape)
        out = reusable_buffer(output_storage[0][0], shape, node.outputs[0].type.numpy_dtype)
        if out is None:
            out = np.empty(shape, dtype=node.outputs[0].type.numpy_dtype)
        out[...] = value
        output_storage[0][0] = out

    def grad(self, inputs, output_grads):
        value = inputs[0]
        (g,) = output_grads
        n_new = g.type.ndim - value.type.ndim
        axes = list(range(n_new))
        axes += [n_new + a for a, b in enumerate(value.type.broadcastable) if b]
        gv = sum(g, axis=tuple(axes), keepdims=True) if axes else g
        if n_new:
            gv = DimShuffle(gv.type.ndim, tuple(range(n_new, gv.type.ndim)))(gv)
        return [gv] + [None] * (len(inputs) - 1)


def _constant_int(var: Variable) -> int | None:
    data = getattr(var, "data", None)
    return None if data is None else int(data)


def alloc(value: Any, *shape: Any) -> Variable:
    """``value`` broadcast to a new tensor of ``shape`` (symbolic or int lengths)."""
    return Alloc()(value, *shape)


def _shape_of(x: Variable) -> list:
    from tensorjit.tensor.shape_ops import shape_entries

    return shape_entries(x)


def zeros_like(x: Any, dtype: Any = None) -> Variable:
    """Zeros of ``x``'s shape (and dtype unless ``dtype`` is given)."""
    x = as_tensor_variable(x)
    return alloc(constant(np.zeros((), normalize_dtype(dtype or x.type.dtype))), *_shape_of(x))


def ones_like(x: Any, dtype: Any = None) -> Variable:
    """Ones of ``x``'s shape (and dtype unless ``dtype`` is given)."""
    x = as_tensor_variable(x)
    return alloc(constant(np.ones((), normalize_dtype(dtype or x.type.dtype))), *_shape_of(x))


def zeros(shape: Sequence[Any], dtype: Any = None) -> Variable:
    """A tensor of ``shape`` filled with zeros (``dtype`` default ``config.floatX``)."""
    return alloc(constant(np.zeros((), normalize_dtype(dtype))), *_as_shape_list(shape))


def ones(shape: Sequence[Any], dtype: Any = None) -> Variable:
    """A tensor of ``shape`` filled with ones (``dtype`` default ``config.floatX``)."""
    return alloc(constant(np.ones((), normalize_dtype(dtype))), *_as_shape_list(shape))


def _as_shape_list(shape: Any) -> list:
    if isinstance(shape, (int, np.integer, Variable)) and not (
        isinstance(shape, Variable) and shape.type.ndim == 1
    ):
        return [shape]
    if isinstance(shape, Variable):
        from tensorjit.tensor.subtensor import getitem

        n = shape.type.shape[0]
        if n is None:
            raise ValueError(f"shape vector {shape.describe()} must have a static length")
        return [getitem(shape, i) for i in range(n)]
    return list(shape)


# ---------------------------------------------------------------- reductions
def normalize_axis(axis: Any, ndim: int, what: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axes: tuple = (axis,)
    elif isinstance(axis, (tuple, list)):
        axes = tuple(axis)
    else:
        raise TypeError(f"{what}: axis must be an int, a tuple of ints or None, got {axis!r}")
    result = []
    for a in axes:
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise TypeError(f"{what}: axis entries must be ints, got {a!r} in {axis!r}")
        if not -ndim <= a < builtins.max(ndim, 1):
            raise ValueError(f"{what}: axis {a!r} is out of range for a {ndim}-d input")
        result.append(int(a) % builtins.max(ndim, 1))
    if len(set(result)) != len(result):
        raise ValueError(f"{what}: repeated axis in {axis!r}")
    return tuple(sorted(result))


# The ufuncs' own reduce (not np.sum & co., whose Python wrappers cost microseconds).
_REDUCERS = {
    "sum": np.add.reduce,
    "prod": np.multiply.reduce,
    "max": np.maximum.reduce,
    "min": np.minimum.reduce,
    "all": np.logical_and.reduce,
    "any": np.logical_or.reduce,
}


_NUMPY_NAMES = {"max": "maximum", "min": "minimum"}


class Reduce(Op):
    """A NumPy reduction (sum, prod, max, min, all, any) over ``axis``."""

    __props__ = ("kind", "axis", "dtype")

    def __init__(self, kind: str, axis: tuple[int, ...], dtype: str | None = None):
        if kind not in _REDUCERS:
            raise ValueError(f"unknown reduction {kind!r}")
        self.kind, self.axis, self.dtype = kind, tuple(axis), dtype
        self.fn = _REDUCERS[kind]

    def __str__(self) -> str:
        return f"{self.kind}{{axis={self.axis}}}"

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        for a in self.axis:
            if a >= x.type.ndim:
                raise ValueError(f"{self.kind}: axis {a} out of range for {x.describe()}")
        probe = np.ones((1,) * x.type.ndim, dtype=x.type.dtype)
        empty = [a for a in self.axis if x.type.shape[a] == 0]
        if self.kind in ("max", "min") and empty:
            # only a reduction over an empty axis lacks a value (NumPy's error); the
            # other axes may be empty: max over axis 0 of a (3, 0, 2) array is (0, 2)
            raise ValueError(
                f"{self.kind} of {x.describe()} over axis {empty[0]}, of static length 0: "
                f"zero-size array to reduction operation {_NUMPY_NAMES[self.kind]} which "
                "has no identity"
            )
        kwargs = {"dtype": self.dtype} if self.dtype and self.kind in ("sum", "prod") else {}
        dtype = np.asarray(self.fn(probe, axis=self.axis, **kwargs)).dtype
        shape = tuple(s for a, s in enumerate(x.type.shape) if a not in self.axis)
        return Apply(self, [x], [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(s for a, s in enumerate(input_shapes[0]) if a not in self.axis)]

    def perform(self, node, inputs, output_storage):
        out_type = node.outputs[0].type
        x = inputs[0]
        kwargs = {"dtype": out_type.numpy_dtype} if self.kind in ("sum", "prod") else {}
        shape = tuple(n for a, n in enumerate(x.shape) if a not in self.axis)
        out = reusable_buffer(output_storage[0][0], shape, out_type.numpy_dtype)
        if out is not None and shape:
            output_storage[0][0] = self.fn(x, axis=self.axis, out=out, **kwargs)
            return
        result = self.fn(x, axis=self.axis, **kwargs)
        output_storage[0][0] = np.asarray(result, dtype=out_type.numpy_dtype)

    def rounding_bounds(self, node, inputs):
        if self.kind != "sum":
            return None  # max/min/all/any are exact; a product's error is relative
        x = REDUCE_MAPS[self.map](inputs[0]) if isinstance(self, MappedReduce) else inputs[0]
        n_terms = int(np.prod([x.shape[a] for a in self.axis]))
        abs_sum = np.sum(abs_float64(x), axis=self.axis)
        return [summation_bound(abs_sum, n_terms, node.outputs[0].type.dtype)]

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        (g,) = output_grads
        if np.dtype(x.type.dtype).kind not in "fc" or self.kind in ("all", "any"):
            return [None]
        keep = _keepdims_pattern(x.type.ndim, self.axis)
        g_full = DimShuffle(g.type.ndim, keep)(g)
        if self.kind == "sum":
            return [alloc(g_full, *_shape_of(x))]
        if self.kind in ("max", "min"):
            z_full = DimShuffle(outputs[0].type.ndim, keep)(outputs[0])
            return [mul(g_full, eq(x, z_full))]
        if self.kind == "prod":
            return [mul(g_full, self._prod_of_others(x, keep))]
        return [None]

    def _prod_of_others(self, x: Variable, keep: tuple) -> Variable:
        """For each element, the product of the other elements of its reduction group.

        Written without dividing by zero: with no zero in the group it is
        prod / x; with exactly one zero it is the product of the non-zeros at the zero
        and 0 elsewhere; with two or more zeros it is 0 everywhere.
        """
        is_zero = eq(x, 0)
        nonzero = switch(is_zero, constant(np.ones((), x.type.dtype)), x)
        prod_nz = Reduce("prod", self.axis)(nonzero)
        prod_nz = DimShuffle(prod_nz.type.ndim, keep)(prod_nz)
        n_zero = Reduce("sum", self.axis)(cast(is_zero, "int64"))
        n_zero = DimShuffle(n_zero.type.ndim, keep)(n_zero)
        zero = constant(np.zeros((), x.type.dtype))
        return switch(
            eq(n_zero, 0),
            true_div(prod_nz, nonzero),
            switch(eq(n_zero, 1), switch(is_zero, prod_nz, zero), zero),
        )


# A mapped reduction's elementwise map: its NumPy form.
REDUCE_MAPS = {"sqr": np.square, "abs": np.abs}


class MappedReduce(Reduce):
    """``Reduce(kind, axis)`` of ``sqr(x)`` or ``abs(x)`` in one pass, with no array of
    mapped values (an L2 or L1 penalty's ``sum(w ** 2)``). Made by the rewrite
    ``local_reduce_of_map`` from graphs whose gradients are already built."""

    __props__ = ("kind", "axis", "dtype", "map")

    def __init__(self, kind: str, axis: tuple[int, ...], dtype: str | None, map: str):
        if map not in REDUCE_MAPS:
            raise ValueError(f"unknown map {map!r} of a reduction; known: {sorted(REDUCE_MAPS)}")
        super().__init__(kind, axis, dtype)
        self.map = map

    def __str__(self) -> str:
        return f"{self.kind}{{{self.map}, axis={self.axis}}}"

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        if np.dtype(x.type.dtype).kind not in "fi":
            raise TypeError(f"{self}: a real input is needed, got {x.describe()}")
        return super().make_node(x)

    def perform(self, node, inputs, output_storage):
        super().perform(node, [REDUCE_MAPS[self.map](inputs[0])], output_storage)

    def L_op(self, inputs, outputs, output_grads):
        from tensorjit.core.gradient import grad

        (x,) = inputs
        mapped = _elemwise(self.map)(x)
        unfused = Reduce(self.kind, self.axis, self.dtype)(mapped)
        return grad(None, [x], known_grads={unfused: output_grads[0]})


def _keepdims_pattern(ndim: int, axis: tuple[int, ...]) -> tuple:
    pattern: list[Any] = []
    k = 0
    for a in range(ndim):
        if a in axis:
            pattern.append("x")
        else:
            pattern.append(k)
            k += 1
    return tuple(pattern)


def _reduce(kind: str, x: Any, axis: Any, keepdims: bool, dtype: Any = None) -> Variable:
    x = as_tensor_variable(x)
    axes = normalize_axis(axis, x.type.ndim, kind)
    out = Reduce(kind, axes, None if dtype is None else normalize_dtype(dtype))(x)
    if keepdims:
        out = DimShuffle(out.type.ndim, _keepdims_pattern(x.type.ndim, axes))(out)
    return out


def _accumulated(
    kind: str, x: Any, axis: Any, keepdims: bool, dtype: Any, acc_dtype: Any
) -> Variable:
    """A sum or product accumulated in ``acc_dtype``, then cast to ``dtype`` (Theano's
    pair of keywords); without ``acc_dtype``, NumPy's ``dtype`` alone."""
    if acc_dtype is None:
        return _reduce(kind, x, axis, keepdims, dtype)
    x = as_tensor_variable(x)
    acc = normalize_dtype(acc_dtype)
    if np.result_type(x.type.dtype, acc) != np.dtype(acc):
        raise TypeError(
            f"{kind} of {x.describe()}: acc_dtype {acc} is less precise than the input's "
            f"dtype {x.type.dtype}; the accumulator must hold every value of the input "
            "(as Theano requires)"
        )
    out = _reduce(kind, x, axis, keepdims, acc)
    want = normalize_dtype(dtype) if dtype is not None else _reduce(kind, x, axis, keepdims).dtype
    return out if want == acc else cast(out, want)


def sum(
    x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None, acc_dtype: Any = None
) -> Variable:
    """Sum over ``axis`` (int, tuple or None for all), like ``numpy.sum``. ``dtype``: the
    result's; ``acc_dtype`` (Theano's): the accumulator's, at least as precise."""
    return _accumulated("sum", x, axis, keepdims, dtype, acc_dtype)


def prod(
    x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None, acc_dtype: Any = None
) -> Variable:
    """Product along ``axis`` (int, tuple or None for all), like ``numpy.prod``; its gradient
    is exact with zeros. ``dtype`` and ``acc_dtype`` as ``sum``'s."""
    return _accumulated("prod", x, axis, keepdims, dtype, acc_dtype)


def ptp(x: Any, axis: Any = None, keepdims: bool = False) -> Variable:
    """Range (maximum - minimum) along ``axis``, like ``numpy.ptp``."""
    return sub(max(x, axis, keepdims), min(x, axis, keepdims))


def max(x: Any, axis: Any = None, keepdims: bool = False) -> Variable:
    """Largest element along ``axis`` (int, tuple or None for all), like ``numpy.max``."""
    return _reduce("max", x, axis, keepdims)


def min(x: Any, axis: Any = None, keepdims: bool = False) -> Variable:
    """Smallest element along ``axis`` (int, tuple or None for all), like ``numpy.min``."""
    return _reduce("min", x, axis, keepdims)


def all(x: Any, axis: Any = None, keepdims: bool = False) -> Variable:
    """Whether every element is true along ``axis`` (int, tuple or None for all), like
    ``numpy.all``."""
    return _reduce("all", x, axis, keepdims)


def any(x: Any, axis: Any = None, keepdims: bool = False) -> Variable:
    """Whether some element is true along ``axis`` (int, tuple or None for all), like
    ``numpy.any``."""
    return _reduce("any", x, axis, keepdims)


def mean(
    x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None, acc_dtype: Any = None
) -> Variable:
    """Arithmetic mean over ``axis``; integer inputs give float64, as in NumPy.
    ``dtype``: the sum's and the result's (NumPy's ``mean(dtype=)``; an MCMC sampler's
    ``accept.mean(dtype=floatX)``); ``acc_dtype``: the sum's accumulator, as ``sum``'s."""
    x = as_tensor_variable(x)
    axes = normalize_axis(axis, x.type.ndim, "mean")
    dtype = None if dtype is None else normalize_dtype(dtype)
    # NumPy sums an integer mean in float64 (an int64 sum of values near 2**62 wraps)
    integer = dtype is None and np.dtype(x.type.dtype).kind in "biu"
    sum_dtype = "float64" if integer else dtype
    total = sum(x, axis=axes, keepdims=keepdims, dtype=sum_dtype, acc_dtype=acc_dtype)
    count = _count(x, axes)
    if dtype is not None and np.dtype(dtype).kind not in "fc":
        # NumPy: an integer mean is computed in float64, then truncated to dtype
        count = constant(np.int64(1)) if count is None else count
        return cast(true_div(total, cast(count, "float64")), dtype)
    if count is None:
        return total
    return true_div(total, cast(count, total.type.dtype))


def _count(x: Variable, axes: tuple[int, ...]) -> Variable | None:
    shape = _shape_of(x)
    count: Any = None
    for a in axes:
        count = shape[a] if count is None else mul(count, shape[a])
    return count


def _axes_of(x: Variable, axis: Any, what: str) -> tuple[int, ...]:
    """``normalize_axis`` whose errors also name the variable."""
    try:
        return normalize_axis(axis, x.type.ndim, what)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{exc} ({x.describe()})") from None


def var(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Variable:
    """Variance over ``axis`` like ``numpy.var``: ``sum(|x - mean|**2) / (n - ddof)``.

    Integer and bool inputs give float64, complex inputs their real dtype.
    """
    x = as_tensor_variable(x)
    axes = _axes_of(x, axis, "var")
    if not isinstance(ddof, (int, np.integer, float, np.floating)) or isinstance(ddof, bool):
        raise TypeError(f"var: ddof must be a number, got {ddof!r} for {x.describe()}")
    kind = np.dtype(x.type.dtype).kind
    if kind not in "fc":
        x = cast(x, "float64")
    centered = sub(x, mean(x, axis=axes, keepdims=True))
    if kind == "c":
        squares = real(mul(centered, conj(centered)))
    else:
        squares = sqr(centered)
    total = sum(squares, axis=axes, keepdims=keepdims)
    count = _count(x, axes)
    if count is None:
        count = constant(np.int64(1))
    denominator = maximum(sub(count, ddof), 0)  # as NumPy: n <= ddof divides by 0
    return true_div(total, cast(denominator, total.type.dtype))


def std(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Variable:
    """Standard deviation over ``axis``: ``sqrt(var(x, axis, keepdims, ddof))``."""
    x = as_tensor_variable(x)
    _axes_of(x, axis, "std")  # errors name std, not var
    return sqrt(var(x, axis=axis, keepdims=keepdims, ddof=ddof))


def prod_of_shape(x: Any) -> Variable:
    count: Any = constant(np.int64(1))
    for s in _shape_of(as_tensor_variable(x)):
        count = mul(count, s)
    return count


class Argmax(Op):
    """Index of the maximum (or minimum, ``kind='argmin'``) along one axis or all.

    ``axis`` may also be a sorted tuple of axes: the index is then into those axes
    flattened in C order (as Theano's argmax over several axes).
    """

    __props__ = ("kind", "axis")

    def __init__(self, kind: str, axis: int | tuple[int, ...] | None):
        self.kind, self.axis = kind, axis
        self.fn = np.argmax if kind == "argmax" else np.argmin

    def _reduced(self, ndim: int) -> tuple[int, ...]:
        if self.axis is None:
            return tuple(range(ndim))
        return self.axis if isinstance(self.axis, tuple) else (self.axis,)

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        reduced = self._reduced(x.type.ndim)
        for a in reduced:
            if not 0 <= a < builtins.max(x.type.ndim, 1):
                raise ValueError(f"{self.kind}: axis {a} out of range for {x.describe()}")
        shape = tuple(s for a, s in enumerate(x.type.shape) if a not in reduced)
        return Apply(self, [x], [TensorType("int64", shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        reduced = self._reduced(len(input_shapes[0]))
        return [tuple(s for a, s in enumerate(input_shapes[0]) if a not in reduced)]

    def perform(self, node, inputs, output_storage):
        x = inputs[0]
        axis = self.axis
        if isinstance(axis, tuple):
            kept = tuple(a for a in range(x.ndim) if a not in axis)
            x = x.transpose(kept + axis)
            x = x.reshape(x.shape[: len(kept)] + (-1,))
            axis = -1
        output_storage[0][0] = np.asarray(self.fn(x, axis=axis), dtype="int64")

    def grad(self, inputs, output_grads):
        # Piecewise constant in x: the gradient is zero wherever it is defined.
        return [zeros_like(inputs[0])]


def _arg(kind: str, x: Any, axis: Any, keepdims: bool) -> Variable:
    x = as_tensor_variable(x)
    if axis is None:
        axes = tuple(range(x.type.ndim))
    else:
        axes = _axes_of(x, axis, kind)
        if not axes:
            raise ValueError(f"{kind}: axis={axis!r} selects no axis of {x.describe()}")
    if axis is None:
        op_axis: Any = None
    elif len(axes) == 1:
        op_axis = axes[0]
    elif axes == tuple(range(x.type.ndim)):
        op_axis = None  # every axis: the index into the flattened array
    else:
        op_axis = axes
    out = Argmax(kind, op_axis)(x)
    if keepdims:
        out = DimShuffle(out.type.ndim, _keepdims_pattern(x.type.ndim, axes))(out)
    return out


def argmax(x: Any, axis: Any = None, keepdims: bool = False) -> Variable:
    """Index of the largest element along ``axis`` (None: of the flattened tensor), int64."""
    return _arg("argmax", x, axis, keepdims)


def argmin(x: Any, axis: Any = None, keepdims: bool = False) -> Variable:
    """Index of the smallest element along ``axis`` (None: of the flattened tensor), int64."""
    return _arg("argmin", x, axis, keepdims)


# ---------------------------------------------------------------- dot
class Dot(Op):
    """``numpy.dot`` for vectors and matrices (use tensordot for higher ranks)."""

    __props__ = ()

    def make_node(self, x: Any, y: Any) -> Apply:
        x, y = as_tensor_variable(x), as_tensor_variable(y)
        if x.type.ndim not in (1, 2) or y.type.ndim not in (1, 2):
            raise TypeError(
                f"dot: inputs must be vectors or matrices, got {x.type.ndim}-d "
                f"{x.describe()} and {y.type.ndim}-d {y.describe()}"
            )
        kx, ky = x.type.shape[-1], y.type.shape[0]
        if kx is not None and ky is not None and kx != ky:
            raise ValueError(
                f"dot: shapes {x.type.shape} and {y.type.shape} are not aligned: "
                f"{kx} (last dimension of {x.describe()}) != {ky} (first dimension of "
                f"{y.describe()})"
            )
        dtype = np.result_type(x.type.dtype, y.type.dtype)
        shape = x.type.shape[:-1] + y.type.shape[1:]
        return Apply(self, [x, y], [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        x_shape, y_shape = input_shapes
        return [tuple(x_shape[:-1]) + tuple(y_shape[1:])]

    @staticmethod
    def check_shapes(x: Any, y: Any, where: str = "") -> None:
        """NumPy's rule for vectors and matrices, in the words every backend uses;
        ``where`` names the node (device kernels add it)."""
        if x.shape[-1] != y.shape[0] or x.ndim > 2 or y.ndim > 2:
            raise ValueError(
                f"dot: shapes {x.shape} and {y.shape} not aligned: {x.shape[-1]} "
                f"(dim {x.ndim - 1}) != {y.shape[0]} (dim 0)" + (f", in {where}" if where else "")
            )

    def perform(self, node, inputs, output_storage):
        x, y = inputs
        self.check_shapes(x, y)
        dtype = node.outputs[0].type.numpy_dtype
        shape = x.shape[:-1] + y.shape[1:]
        out = reusable_buffer(output_storage[0][0], shape, dtype)
        if out is not None and shape and x.dtype == y.dtype == dtype:
            output_storage[0][0] = np.dot(x, y, out=out)  # BLAS writes into the buffer
            return
        output_storage[0][0] = np.asarray(np.dot(x, y), dtype=dtype)

    def rounding_bounds(self, node, inputs):
        return [product_bound(*inputs, node.outputs[0].type.dtype)]

    def grad(self, inputs, output_grads):
        x, y = inputs
        (g,) = output_grads
        nx, ny = x.type.ndim, y.type.ndim
        if nx == 1 and ny == 1:
            gx, gy = mul(g, y), mul(g, x)
        elif nx == 2 and ny == 2:
            gx, gy = dot(g, y.T), dot(x.T, g)
        elif nx == 1:  # (k) . (k, n) -> (n)
            gx, gy = dot(y, g), outer(x, g)
        else:  # (m, k) . (k) -> (m)
            gx, gy = outer(g, y), dot(x.T, g)
        return [gx, gy]

    def pprint(self, input_strs):
        return f"dot({input_strs[0]}, {input_strs[1]})"


def dot(x: Any, y: Any) -> Variable:
    """``numpy.dot``: matrix/vector products; scalars multiply elementwise; N-d operands
    sum over the last axis of ``x`` and the second-to-last of ``y`` (the last for a
    vector), as Theano's and PyTensor's ``dot`` (a tensordot)."""
    x, y = as_tensor_variable(x), as_tensor_variable(y)
    if x.type.ndim == 0 or y.type.ndim == 0:
        return mul(x, y)
    if x.type.ndim > 2 or y.type.ndim > 2:
        from tensorjit.tensor.linalg import tensordot

        return tensordot(x, y, [[x.type.ndim - 1], [builtins.max(0, y.type.ndim - 2)]])
    return Dot()(x, y)


def outer(x: Any, y: Any) -> Variable:
    """Outer product of two vectors: ``x[:, None] * y[None, :]``."""
    x, y = as_tensor_variable(x), as_tensor_variable(y)
    return mul(DimShuffle(1, (0, "x"))(x), DimShuffle(1, ("x", 0))(y))
