"""Scalar operations that Elemwise maps over arrays: their NumPy implementation, output
dtype (NumPy's own promotion rules, found by asking NumPy) and symbolic gradient."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import scipy.special

GradFn = Callable[[Sequence[Any], Sequence[Any], Sequence[Any]], list]


def _t():
    from tensorjit.tensor import math

    return math


@lru_cache(maxsize=4096)
def numpy_result_dtype(impl: Callable, dtypes: tuple[str, ...]) -> str:
    """The dtype NumPy gives ``impl`` applied to arrays of ``dtypes`` (raises TypeError)."""
    probes = [np.ones(1, dtype=d) for d in dtypes]
    with np.errstate(all="ignore"):
        try:
            out = impl(*probes)
        except TypeError as exc:
            raise TypeError(str(exc)) from None
    return np.asarray(out).dtype.name


class ScalarOp:
    """An elementwise operation on scalars; equal if same class and name."""

    def __init__(
        self,
        name: str,
        nin: int,
        impl: Callable,
        grad: GradFn | None = None,
        symbol: str | None = None,
        precedence: int = 100,
        differentiable: bool = True,
    ):
        self.name = name
        self.nin = nin
        self.impl = impl
        self._grad = grad
        self.symbol = symbol
        self.precedence = precedence
        self.differentiable = differentiable

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.name == other.name  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self.name))

    def __repr__(self) -> str:
        return self.name

    def __reduce_ex__(self, protocol: Any) -> Any:
        # A registered op pickles as its name (its impl and gradient are functions that
        # need not be picklable); other ops pickle their state.
        if SCALAR_OPS.get(self.name) is self:
            return (scalar_op_named, (self.name,))
        return object.__reduce_ex__(self, protocol)

    def output_dtype(self, dtypes: Sequence[str]) -> str:
        return numpy_result_dtype(self.impl, tuple(dtypes))

    def impl_into(self, inputs: Sequence[Any], out: np.ndarray) -> np.ndarray:
        """Compute into the existing array ``out`` (which may be one of the inputs)."""
        if isinstance(self.impl, np.ufunc):
            return self.impl(*inputs, out=out, casting="unsafe")
        out[...] = self.impl(*inputs)
        return out

    def grad(self, inputs: Sequence[Any], outputs: Sequence[Any], gz: Sequence[Any]) -> list:
        if not self.differentiable:
            return [zero_grad(x) for x in inputs]
        if self._grad is None:
            from tensorjit.core.gradient import NotDifferentiableError

            raise NotDifferentiableError(f"{self.name} has no gradient")
        return self._grad(inputs, outputs, gz)


class Cast(ScalarOp):
    """Conversion to ``dtype`` (NumPy ``astype`` semantics)."""

    def __init__(self, dtype: str):
        self.dtype = np.dtype(dtype).name
        super().__init__(f"cast_{self.dtype}", 1, self._cast, self._cast_grad)

    def _cast(self, x):
        return np.asarray(x).astype(self.dtype)

    def output_dtype(self, dtypes: Sequence[str]) -> str:
        return self.dtype

    @staticmethod
    def _cast_grad(inputs, outputs, gz):
        (x,) = inputs
        if np.dtype(x.dtype).kind not in "fc" or np.dtype(outputs[0].dtype).kind not in "fc":
            return [zero_grad(x)]
        return [_t().cast(gz[0], x.dtype)]


def _is_float(var) -> bool:
    return np.dtype(var.dtype).kind in "fc"


# Gradient rules. Each gets (inputs, outputs, output_grads) and returns input grads;
# None marks an input the output does not depend on differentiably (e.g. integers).
def zero_grad(x):
    """The gradient of a piecewise-constant dependence: zeros (of a float dtype)."""
    from tensorjit.core.config import config

    return _t().zeros_like(x, dtype=x.dtype if _is_float(x) else config.floatX)


def _only_float(inputs, grads):
    # Integer-valued inputs change only in steps: their gradient is zero, not undefined.
    return [g if _is_float(x) else zero_grad(x) for x, g in zip(inputs, grads)]


def _g_add(i, o, gz):
    return _only_float(i, [gz[0], gz[0]])


def _g_sub(i, o, gz):
    return _only_float(i, [gz[0], -gz[0]])


def _g_mul(i, o, gz):
    x, y = i
    return _only_float(i, [gz[0] * y, gz[0] * x])


def _g_true_div(i, o, gz):
    x, y = i
    return _only_float(i, [gz[0] / y, -gz[0] * o[0] / y])


def _g_mod(i, o, gz):
    x, y = i
    return _only_float(i, [gz[0], -gz[0] * _t().int_div(x, y)])


def _g_int_div(i, o, gz):
    t = _t()
    return _only_float(i, [t.zeros_like(x, dtype=gz[0].dtype) for x in i])


def _g_pow(i, o, gz):
    t = _t()
    x, y = i
    gx = gz[0] * y * t.pow(x, y - 1)
    gy = gz[0] * o[0] * t.log(t.switch(t.gt(x, 0), x, 1))
    return _only_float(i, [gx, gy])


def _g_unary(rule):
    def grad(i, o, gz):
        return _only_float(i, [rule(i[0], o[0], gz[0])])

    return grad


def _g_maximum(i, o, gz):
    t = _t()
    x, y = i
    return _only_float(i, [gz[0] * t.ge(x, y), gz[0] * t.lt(x, y)])


def _g_minimum(i, o, gz):
    t = _t()
    x, y = i
    return _only_float(i, [gz[0] * t.le(x, y), gz[0] * t.gt(x, y)])


def _g_switch(i, o, gz):
    t = _t()
    cond, a, b = i
    zero = t.zeros_like(gz[0])
    return [zero_grad(cond)] + _only_float(
        [a, b], [t.switch(cond, gz[0], zero), t.switch(cond, zero, gz[0])]
    )


def _sigmoid(x):
    return scipy.special.expit(x)


def _softplus(x):
    # log(1 + exp(x)) without overflow for large x
    return np.logaddexp(0, x)


def _sqr(x):
    return np.multiply(x, x)


def _round_half_away_from_zero(x):
    # trunc(x) + sign(x) where the dropped fraction is >= 1/2; x - trunc(x) is exact, so
    # unlike floor(x + 0.5) this never rounds 0.49999999999999994 up.
    x = np.asarray(x)
    if x.dtype.kind not in "fc":
        return np.round(x)  # integers (and bools) as numpy.round does
    t = np.trunc(x)
    return t + np.where(np.abs(x - t) >= 0.5, np.sign(x), 0).astype(t.dtype)


def _real(x):
    return np.array(np.real(x))  # a copy: np.real returns a view (or x itself)


def _imag(x):
    return np.array(np.imag(x))


def _angle(x):
    return np.asarray(np.angle(x))


def _clip(x, lo, hi):
    return np.clip(x, lo, hi)


class Polygamma(ScalarOp):
    """The ``n``-th derivative of the digamma function (``n=1``: trigamma)."""

    def __init__(self, n: int):
        self.n = int(n)
        name = "tri_gamma" if self.n == 1 else f"polygamma_{self.n}"
        super().__init__(name, 1, self._polygamma, _g_unary(self._rule))

    def _polygamma(self, x):
        x = np.asarray(x)
        dtype = numpy_result_dtype(scipy.special.psi, (x.dtype.name,))
        with np.errstate(all="ignore"):
            return np.asarray(scipy.special.polygamma(self.n, x)).astype(dtype, copy=False)

    def _rule(self, x, z, g):
        from tensorjit.tensor.elemwise import Elemwise

        return g * Elemwise(Polygamma(self.n + 1))(x)


def _complex_input(name, x):
    if np.dtype(x.dtype).kind == "c":
        from tensorjit.core.gradient import NotDifferentiableError

        raise NotDifferentiableError(
            f"{name} of the complex {x.describe()} has no gradient: gradients with respect "
            "to complex inputs are not implemented"
        )


def _g_real_part(name, real_rule):
    def grad(i, o, gz):
        _complex_input(name, i[0])
        return _only_float(i, [real_rule(i[0], o[0], gz[0])])

    return grad


def _g_arctan2(i, o, gz):
    y, x = i
    r2 = x * x + y * y
    return _only_float(i, [gz[0] * x / r2, -gz[0] * y / r2])


def _g_logaddexp(i, o, gz):
    t = _t()
    x, y = i
    return _only_float(i, [gz[0] * t.exp(x - o[0]), gz[0] * t.exp(y - o[0])])


def _g_clip(i, o, gz):
    # clip(x, lo, hi) == minimum(maximum(x, lo), hi), with the same tie rules.
    t = _t()
    x, lo, hi = i
    m = t.maximum(x, lo)
    below_hi = t.le(m, hi)
    g = gz[0]
    return _only_float(
        i, [g * (t.ge(x, lo) & below_hi), g * (t.lt(x, lo) & below_hi), g * t.gt(m, hi)]
    )


_SQRT_PI = float(np.sqrt(np.pi))


def _u(name, impl, rule=None, symbol=None, differentiable=True):
    return ScalarOp(
        name, 1, impl, _g_unary(rule) if rule else None, symbol, differentiable=differentiable
    )


def _b(name, impl, grad=None, symbol=None, precedence=100, differentiable=True):
    return ScalarOp(name, 2, impl, grad, symbol, precedence, differentiable)


SCALAR_OPS: dict[str, ScalarOp] = {
    op.name: op
    for op in [
        _b("add", np.add, _g_add, "+", 10),
        _b("sub", np.subtract, _g_sub, "-", 10),
        _b("mul", np.multiply, _g_mul, "*", 20),
        _b("true_div", np.true_divide, _g_true_div, "/", 20),
        _b("int_div", np.floor_divide, _g_int_div, "//", 20),
        _b("mod", np.mod, _g_mod, "%", 20),
        _b("pow", np.power, _g_pow, "**", 40),
        _b("maximum", np.maximum, _g_maximum),
        _b("minimum", np.minimum, _g_minimum),
        _b("lt", np.less, None, "<", 5, differentiable=False),
        _b("le", np.less_equal, None, "<=", 5, differentiable=False),
        _b("gt", np.greater, None, ">", 5, differentiable=False),
        _b("ge", np.greater_equal, None, ">=", 5, differentiable=False),
        _b("eq", np.equal, None, "==", 5, differentiable=False),
        _b("neq", np.not_equal, None, "!=", 5, differentiable=False),
        _b("and_", np.bitwise_and, None, "&", 4, differentiable=False),
        _b("or_", np.bitwise_or, None, "|", 2, differentiable=False),
        _b("xor", np.bitwise_xor, None, "^", 3, differentiable=False),
        _u("invert", np.invert, symbol="~", differentiable=False),
        _u("neg", np.negative, lambda x, z, g: -g, symbol="-"),
        _u("abs", np.abs, lambda x, z, g: g * _t().sign(x)),
        _u("sign", np.sign, lambda x, z, g: _t().zeros_like(g)),
        _u("exp", np.exp, lambda x, z, g: g * z),
        _u("exp2", np.exp2, lambda x, z, g: g * z * float(np.log(2.0))),
        _u("expm1", np.expm1, lambda x, z, g: g * (z + 1)),
        _u("log", np.log, lambda x, z, g: g / x),
        _u("log2", np.log2, lambda x, z, g: g / (x * float(np.log(2.0)))),
        _u("log10", np.log10, lambda x, z, g: g / (x * float(np.log(10.0)))),
        _u("log1p", np.log1p, lambda x, z, g: g / (1 + x)),
        _u("sqrt", np.sqrt, lambda x, z, g: g * 0.5 / z),
        _u("sqr", _sqr, lambda x, z, g: g * 2 * x),
        _u("sin", np.sin, lambda x, z, g: g * _t().cos(x)),
        _u("cos", np.cos, lambda x, z, g: -g * _t().sin(x)),
        _u("tan", np.tan, lambda x, z, g: g * (1 + z * z)),
        _u("tanh", np.tanh, lambda x, z, g: g * (1 - z * z)),
        _u("sigmoid", _sigmoid, lambda x, z, g: g * z * (1 - z)),
        _u("softplus", _softplus, lambda x, z, g: g * _t().sigmoid(x)),
        _u("floor", np.floor, lambda x, z, g: _t().zeros_like(g)),
        _u("ceil", np.ceil, lambda x, z, g: _t().zeros_like(g)),
        ScalarOp("switch", 3, np.where, _g_switch),
        # Table 1 additions
        _u("arcsin", np.arcsin, lambda x, z, g: g / _t().sqrt(1 - x * x)),
        _u("arccos", np.arccos, lambda x, z, g: -g / _t().sqrt(1 - x * x)),
        _u("arctan", np.arctan, lambda x, z, g: g / (1 + x * x)),
        _b("arctan2", np.arctan2, _g_arctan2),
        _u("sinh", np.sinh, lambda x, z, g: g * _t().cosh(x)),
        _u("cosh", np.cosh, lambda x, z, g: g * _t().sinh(x)),
        _u("arcsinh", np.arcsinh, lambda x, z, g: g / _t().sqrt(x * x + 1)),
        _u("arccosh", np.arccosh, lambda x, z, g: g / _t().sqrt(x * x - 1)),
        _u("arctanh", np.arctanh, lambda x, z, g: g / (1 - x * x)),
        _u("deg2rad", np.deg2rad, lambda x, z, g: g * float(np.pi / 180.0)),
        _u("rad2deg", np.rad2deg, lambda x, z, g: g * float(180.0 / np.pi)),
        _u("reciprocal", np.reciprocal, lambda x, z, g: -g * z * z),
        _b("logaddexp", np.logaddexp, _g_logaddexp),
        _u("round_half_to_even", np.round, differentiable=False),
        _u("round_half_away_from_zero", _round_half_away_from_zero, differentiable=False),
        _u("trunc", np.trunc, differentiable=False),
        _u("isnan", np.isnan, differentiable=False),
        _u("isinf", np.isinf, differentiable=False),
        _u("isfinite", np.isfinite, differentiable=False),
        ScalarOp("clip", 3, _clip, _g_clip),
        ScalarOp("real", 1, _real, _g_real_part("real", lambda x, z, g: g)),
        ScalarOp("imag", 1, _imag, _g_real_part("imag", lambda x, z, g: zero_grad(x))),
        ScalarOp("conj", 1, np.conjugate, _g_real_part("conj", lambda x, z, g: g)),
        ScalarOp("angle", 1, _angle, _g_real_part("angle", lambda x, z, g: zero_grad(x))),
        _u("erf", scipy.special.erf, lambda x, z, g: g * (2 / _SQRT_PI) * _t().exp(-x * x)),
        _u("erfc", scipy.special.erfc, lambda x, z, g: g * (-2 / _SQRT_PI) * _t().exp(-x * x)),
        _u("erfinv", scipy.special.erfinv, lambda x, z, g: g * (_SQRT_PI / 2) * _t().exp(z * z)),
        _u("gamma", scipy.special.gamma, lambda x, z, g: g * z * _t().psi(x)),
        _u("gammaln", scipy.special.gammaln, lambda x, z, g: g * _t().psi(x)),
        _u("psi", scipy.special.psi, lambda x, z, g: g * _t().tri_gamma(x)),
        Polygamma(1),
    ]
}


def scalar_op_named(name: str) -> ScalarOp:
    """The registered scalar op ``name`` (what a pickled one comes back as)."""
    return SCALAR_OPS[name]
