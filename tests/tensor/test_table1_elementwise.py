"""Table 1 elementwise functions and reductions against NumPy/SciPy: values, dtypes,
broadcasting, gradients (verify_grad), DebugMode and error messages."""

import warnings

import numpy as np
import pytest
import scipy.special

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.gradient import NotDifferentiableError
from tensorjit.tensor import math as M

SHAPES = [(), (0,), (5,), (2, 3), (1, 0, 2)]
DTYPES = ["float32", "float64", "int8", "int32", "int64", "uint8"]


def rng(seed=0):
    return np.random.default_rng(seed)


def sym(dtype, shape, name="x"):
    """A symbolic input for arrays of ``shape`` (length-1 dimensions declared)."""
    return T.tensor(dtype, shape=tuple(1 if s == 1 else None for s in shape), name=name)


def sample(dtype, shape, domain, seed=0):
    lo, hi = domain
    r = rng(seed)
    if np.dtype(dtype).kind in "iu":
        lo = int(np.ceil(lo))
        hi = int(np.floor(hi))
        if np.dtype(dtype).kind == "u":
            lo = max(lo, 0)
        return r.integers(lo, hi + 1, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return r.integers(0, 2, size=shape).astype(bool)
    return r.uniform(lo, hi, size=shape).astype(dtype)


def check_close(got, want):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "fc":
        rtol = 1e-6 if want.dtype in (np.float32, np.complex64, np.float16) else 1e-12
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def _trigamma(x):
    return scipy.special.polygamma(1, x).astype(scipy.special.psi(x).dtype)


def _half_away(x):
    x = np.asarray(x)
    if x.dtype.kind not in "fc":
        return np.round(x)
    t = np.trunc(x)
    return (t + np.where(np.abs(x - t) >= 0.5, np.sign(x), 0)).astype(t.dtype)


ANY = (-3.0, 3.0)
POS = (0.2, 4.0)
UNIT = (-0.9, 0.9)
# name: (tensorjit function, reference, domain of the value tests, domain of the gradient
# test or None where the function is piecewise constant / not differentiable)
UNARY = {
    "exp": (M.exp, np.exp, ANY, ANY),
    "exp2": (M.exp2, np.exp2, ANY, ANY),
    "expm1": (M.expm1, np.expm1, ANY, ANY),
    "log": (M.log, np.log, POS, POS),
    "log2": (M.log2, np.log2, POS, POS),
    "log10": (M.log10, np.log10, POS, POS),
    "log1p": (M.log1p, np.log1p, (0.0, 3.0), (-0.5, 3.0)),
    "sqrt": (M.sqrt, np.sqrt, POS, POS),
    "sqr": (M.sqr, lambda x: x * x, ANY, ANY),
    "sin": (M.sin, np.sin, ANY, ANY),
    "cos": (M.cos, np.cos, ANY, ANY),
    "tan": (M.tan, np.tan, (-1.2, 1.2), (-1.2, 1.2)),
    "arcsin": (M.arcsin, np.arcsin, (-1.0, 1.0), UNIT),
    "arccos": (M.arccos, np.arccos, (-1.0, 1.0), UNIT),
    "arctan": (M.arctan, np.arctan, ANY, ANY),
    "sinh": (M.sinh, np.sinh, ANY, ANY),
    "cosh": (M.cosh, np.cosh, ANY, ANY),
    "tanh": (M.tanh, np.tanh, ANY, ANY),
    "arcsinh": (M.arcsinh, np.arcsinh, ANY, ANY),
    "arccosh": (M.arccosh, np.arccosh, (1.0, 4.0), (1.2, 4.0)),
    "arctanh": (M.arctanh, np.arctanh, (0.0, 0.0), UNIT),
    "neg": (M.neg, np.negative, ANY, ANY),
    "abs": (M.abs, np.abs, ANY, (0.3, 3.0)),
    "sign": (M.sign, np.sign, ANY, None),
    "floor": (M.floor, np.floor, ANY, None),
    "ceil": (M.ceil, np.ceil, ANY, None),
    "trunc": (M.trunc, np.trunc, ANY, None),
    "round": (M.round, np.round, ANY, None),
    "round_half_away": (lambda x: M.round(x, mode="half_away_from_zero"), _half_away, ANY, None),
    "reciprocal": (M.reciprocal, np.reciprocal, (1.0, 3.0), (0.5, 3.0)),
    "inv": (M.inv, np.reciprocal, (1.0, 3.0), (0.5, 3.0)),
    "deg2rad": (M.deg2rad, np.deg2rad, ANY, ANY),
    "rad2deg": (M.rad2deg, np.rad2deg, ANY, ANY),
    "real": (M.real, np.real, ANY, ANY),
    "imag": (M.imag, np.imag, ANY, ANY),
    "conj": (M.conj, np.conjugate, ANY, ANY),
    "angle": (M.angle, np.angle, ANY, None),
    "erf": (M.erf, scipy.special.erf, ANY, ANY),
    "erfc": (M.erfc, scipy.special.erfc, ANY, ANY),
    "erfinv": (M.erfinv, scipy.special.erfinv, (0.0, 0.0), UNIT),
    "gamma": (M.gamma, scipy.special.gamma, POS, POS),
    "gammaln": (M.gammaln, scipy.special.gammaln, POS, POS),
    "psi": (M.psi, scipy.special.psi, POS, POS),
    "tri_gamma": (M.tri_gamma, _trigamma, POS, POS),
    "isnan": (M.isnan, np.isnan, ANY, None),
    "isinf": (M.isinf, np.isinf, ANY, None),
    "isfinite": (M.isfinite, np.isfinite, ANY, None),
}
# Float domains where the integer domain above would be too narrow.
FLOAT_DOMAIN = {"arctanh": UNIT, "erfinv": UNIT}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values_and_dtypes(name):
    fn, ref, domain, _ = UNARY[name]
    for dtype in DTYPES:
        dom = FLOAT_DOMAIN.get(name, domain) if dtype.startswith("float") else domain
        values = [sample(dtype, s, dom, seed=i) for i, s in enumerate(SHAPES)]
        try:
            with np.errstate(all="ignore"):
                expected = [np.asarray(ref(v)) for v in values]
        except TypeError:
            with pytest.raises(TypeError, match=f"not defined for inputs of dtype {dtype}"):
                fn(sym(dtype, ()))
            continue
        xs = [sym(dtype, s, f"x{i}") for i, s in enumerate(SHAPES)]
        f = tensorjit.function(xs, [fn(x) for x in xs])
        for got, want in zip(f(*values), expected):
            check_close(got, want)


def test_unary_specials_on_nonfinite_inputs():
    x = sym("float64", (6,))
    v = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300])
    outs = [M.isnan(x), M.isinf(x), M.isfinite(x), M.sign(x), M.trunc(x), M.round(x)]
    refs = [np.isnan, np.isinf, np.isfinite, np.sign, np.trunc, np.round]
    for got, ref in zip(tensorjit.function([x], outs)(v), refs):
        check_close(got, ref(v))


BINARY = {
    "arctan2": (M.arctan2, np.arctan2, ANY, ANY),
    "logaddexp": (M.logaddexp, np.logaddexp, ANY, ANY),
    "maximum": (M.maximum, np.maximum, ANY, ANY),
    "minimum": (M.minimum, np.minimum, ANY, ANY),
    "floor_div": (M.floor_div, np.floor_divide, ANY, (1.0, 3.0)),
}
SHAPE_PAIRS = [((), (3,)), ((2, 1), (1, 4)), ((0,), (1,)), ((2, 3), (2, 3)), ((4,), ())]
DTYPE_PAIRS = [
    ("float32", "float32"),
    ("float64", "float32"),
    ("int8", "float32"),
    ("int32", "int64"),
    ("int8", "int8"),
    ("uint8", "int16"),
]


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_values_dtypes_and_broadcasting(name):
    fn, ref, dom_x, dom_y = BINARY[name]
    for dx, dy in DTYPE_PAIRS:
        xs, ys, vals, expected = [], [], [], []
        for i, (sx, sy) in enumerate(SHAPE_PAIRS):
            vx, vy = sample(dx, sx, dom_x, seed=i), sample(dy, sy, dom_y, seed=10 + i)
            with np.errstate(all="ignore"):
                expected.append(np.asarray(ref(vx, vy)))
            xs.append(sym(dx, sx, f"x{i}"))
            ys.append(sym(dy, sy, f"y{i}"))
            vals += [vx, vy]
        inputs = [v for pair in zip(xs, ys) for v in pair]
        f = tensorjit.function(inputs, [fn(x, y) for x, y in zip(xs, ys)])
        for got, want in zip(f(*vals), expected):
            check_close(got, want)


def test_binary_with_python_scalars_keeps_array_dtype():
    x = sym("float32", (3,))
    v = np.array([0.5, -1.0, 2.0], dtype="float32")
    outs = [M.arctan2(x, 2.0), M.logaddexp(1.0, x), M.floor_div(x, 2), M.clip(x, 0, 1.0)]
    refs = [np.arctan2(v, 2.0), np.logaddexp(1.0, v), np.floor_divide(v, 2), np.clip(v, 0, 1.0)]
    for got, want in zip(tensorjit.function([x], outs)(v), refs):
        check_close(got, want)


CLIP_CASES = [
    # (dtypes of x, lo, hi), (shapes of x, lo, hi)
    (("float64", "float64", "float64"), ((2, 3), (), ())),
    (("float32", "float32", "float32"), ((2, 3), (2, 1), (1, 3))),
    (("float32", "float64", "float32"), ((4,), (4,), ())),
    (("int32", "int32", "int32"), ((5,), (), (5,))),
    (("int8", "int16", "int8"), ((0,), (), ())),
    (("float64", "float64", "float64"), ((), (), ())),
    (("int64", "float32", "float32"), ((3, 1), (1, 2), ())),
]


@pytest.mark.parametrize("dtypes, shapes", CLIP_CASES)
def test_clip_values_and_dtypes(dtypes, shapes):
    domains = [(-3, 3), (-2, 0), (0, 2)]
    vals = [sample(d, s, dom, seed=i) for i, (d, s, dom) in enumerate(zip(dtypes, shapes, domains))]
    syms = [sym(d, s, n) for d, s, n in zip(dtypes, shapes, "xab")]
    f = tensorjit.function(syms, M.clip(*syms))
    check_close(f(*vals), np.clip(*vals))


def test_clip_with_none_bounds_and_inverted_bounds():
    x = sym("float64", (5,))
    v = np.linspace(-2, 2, 5)
    outs = [M.clip(x, None, 0.5), M.clip(x, -0.5, None), M.clip(x, None, None), M.clip(x, 1, -1)]
    f = tensorjit.function([x], outs)
    refs = [np.clip(v, None, 0.5), np.clip(v, -0.5, None), v, np.clip(v, 1, -1)]
    for got, want in zip(f(v), refs):
        check_close(got, want)


def test_clip_gradient_is_one_inside_zero_outside():
    x, lo, hi = sym("float64", (6,)), T.dscalar("lo"), T.dscalar("hi")
    cost = M.sum(M.clip(x, lo, hi) * np.arange(1.0, 7.0))
    gx, glo, ghi = tensorjit.function([x, lo, hi], tensorjit.grad(cost, [x, lo, hi]))(
        np.array([-2.0, -0.5, 0.0, 0.5, 1.5, 3.0]), -1.0, 1.0
    )
    np.testing.assert_array_equal(gx, [0.0, 2.0, 3.0, 4.0, 0.0, 0.0])
    assert glo == 1.0
    assert ghi == 5.0 + 6.0
    # Integer bounds do not depend differentiably on anything.
    xi = sym("float64", (3,))
    g = tensorjit.grad(M.sum(M.clip(xi, 0, 1)), xi)
    np.testing.assert_array_equal(tensorjit.function([xi], g)(np.array([-1, 0.5, 2])), [0, 1, 0])


def test_round_modes():
    halves = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999999999999994, -0.49999999999999994]
    halves += [3.7, -3.7, 0.0, 1e16 + 2]
    away = [-3, -2, -1, 1, 2, 3, 0, 0, 4, -4, 0, 1e16 + 2]
    for dtype in ["float32", "float64"]:
        v = np.array(halves, dtype=dtype)
        x = sym(dtype, v.shape)
        even, away_got, even2, iround = tensorjit.function(
            [x],
            [
                M.round(x),
                M.round(x, mode="half_away_from_zero"),
                M.round_half_to_even(x),
                M.iround(x, "half_away_from_zero"),
            ],
        )(v)
        check_close(even, np.round(v))
        check_close(even2, np.round(v))
        expected_away = np.array(away, dtype=dtype)
        if dtype == "float32":  # float32(0.49999999999999994) is 0.5
            expected_away[6:8] = [1, -1]
        check_close(away_got, expected_away)
        check_close(iround, expected_away.astype("int64"))
    xi = sym("int32", (3,))
    vi = np.array([-3, 0, 7], dtype="int32")
    got = tensorjit.function([xi], [M.round(xi), M.round_half_away_from_zero(xi)])(vi)
    for g in got:
        check_close(g, vi)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_parts(dtype):
    z = sym(dtype, (2, 3), "z")
    v = (rng().normal(size=(2, 3)) + 1j * rng(1).normal(size=(2, 3))).astype(dtype)
    fns = [M.real, M.imag, M.conj, M.angle, M.abs]
    refs = [np.real, np.imag, np.conjugate, np.angle, np.abs]
    f = tensorjit.function([z], [fn(z) for fn in fns])
    for got, ref in zip(f(v), refs):
        check_close(got, ref(v))
    real_dtype = "float32" if dtype == "complex64" else "float64"
    assert M.real(z).dtype == M.imag(z).dtype == M.angle(z).dtype == real_dtype
    assert M.conj(z).dtype == dtype
    # real/imag results are copies: overwriting the input must not change them
    r = tensorjit.function([z], M.real(z))(v)
    v[...] = 0
    assert np.any(r != 0)


@pytest.mark.parametrize("fn", [M.real, M.imag, M.conj, M.angle])
def test_complex_gradients_are_refused_with_a_reason(fn):
    z = T.zvector("z")
    with pytest.raises(NotDifferentiableError, match="of the complex 'z'.* has no gradient"):
        tensorjit.grad(M.sum(M.abs(fn(z))), z)


def _point(domain, shape=(2, 3), seed=0):
    return rng(seed).uniform(*domain, size=shape)


@pytest.mark.parametrize("name", sorted(n for n, spec in UNARY.items() if spec[3] is not None))
def test_unary_gradients(name):
    fn, _, _, domain = UNARY[name]
    tensorjit.verify_grad(fn, [_point(domain)], rng=rng())


def test_piecewise_constant_gradients_are_zero():
    x = sym("float64", (4,))
    v = np.array([-1.3, 0.2, 0.7, 2.5])
    for fn in [M.floor, M.ceil, M.trunc, M.round, M.sign, M.angle, M.imag]:
        g = tensorjit.function([x], tensorjit.grad(M.sum(fn(x) * 3.0), x))(v)
        np.testing.assert_array_equal(g, np.zeros(4))
    g = tensorjit.function([x], tensorjit.grad(M.sum(M.round(x, "half_away_from_zero")), x))(v)
    np.testing.assert_array_equal(g, np.zeros(4))


def test_second_derivatives_of_special_functions():
    # psi' = tri_gamma, tri_gamma' = polygamma(2, .)
    tensorjit.verify_grad(lambda x: tensorjit.grad(M.sum(M.psi(x)), x), [_point(POS)], rng=rng())
    tensorjit.verify_grad(lambda x: tensorjit.grad(M.sum(M.gamma(x)), x), [_point(POS)], rng=rng())
    x = sym("float64", (3,))
    v = np.array([0.5, 1.0, 3.0])
    f = tensorjit.function([x], [M.polygamma(2, x), M.polygamma(0, x), M.polygamma(1, x)])
    for got, n in zip(f(v), [2, 0, 1]):
        check_close(got, scipy.special.polygamma(n, v))


def test_binary_gradients():
    r = rng(3)
    y = r.uniform(-2, 2, size=(2, 3))
    x = r.uniform(0.5, 2, size=(2, 3)) * r.choice([-1, 1], size=(2, 3))
    tensorjit.verify_grad(M.arctan2, [y, x], rng=rng())
    tensorjit.verify_grad(M.logaddexp, [y, x], rng=rng())
    tensorjit.verify_grad(M.logaddexp, [np.array([[800.0], [-3.0]]), x[0]], rng=rng())
    a = np.array([[0.0, 1.0, 2.0], [3.0, -1.0, 0.5]])
    b = np.array([[0.5, 0.7, 2.4], [2.1, -1.6, 0.0]])
    tensorjit.verify_grad(M.maximum, [a, b], rng=rng())
    tensorjit.verify_grad(M.minimum, [a, b], rng=rng())


def test_clip_gradients_wrt_all_inputs():
    x = np.linspace(-2.05, 2.05, 12).reshape(3, 4)
    lo = np.array([[-1.0], [-0.4], [0.3]])
    hi = np.array([1.0, 0.6, 1.55, 2.3])
    tensorjit.verify_grad(M.clip, [x, lo, hi], rng=rng())
    tensorjit.verify_grad(lambda x: M.clip(x, -0.5, 0.75), [x], rng=rng())


# ---------------------------------------------------------------- reductions
AXES = [None, 0, -1, (0, 2), (1,), [0, 1, 2], ()]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bool", "complex128"])
def test_var_std_values_and_dtypes(dtype):
    shape = (2, 3, 4)
    v = sample(dtype, shape, (-3, 3), seed=1)
    if dtype == "complex128":
        v = v + 1j * sample("float64", shape, (-3, 3), seed=2)
    x = sym(dtype, shape)
    outs, refs = [], []
    for axis in AXES:
        for keepdims in (False, True):
            for ddof in (0, 1):
                outs += [M.var(x, axis, keepdims, ddof), M.std(x, axis, keepdims, ddof)]
                ax = tuple(axis) if isinstance(axis, list) else axis
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    refs += [
                        np.var(v, axis=ax, keepdims=keepdims, ddof=ddof),
                        np.std(v, axis=ax, keepdims=keepdims, ddof=ddof),
                    ]
    with warnings.catch_warnings():
        # ddof=1 over no axis (axis=()) divides by zero, in NumPy too
        warnings.simplefilter("ignore", RuntimeWarning)
        results = tensorjit.function([x], outs)(v)
    for got, want in zip(results, refs):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape
        rtol = 1e-5 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True)


@pytest.mark.parametrize("shape", [(), (0,), (4,), (0, 3)])
def test_var_of_empty_and_scalar_inputs(shape):
    x = sym("float64", shape)
    v = sample("float64", shape, ANY)
    outs = [M.var(x), M.std(x, ddof=1), M.var(x, axis=None, keepdims=True)]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # mean of empty, ddof >= n
        f = tensorjit.function([x], outs)
        refs = [np.var(v), np.std(v, ddof=1), np.var(v, keepdims=True)]
        got = f(v)
    for g, want in zip(got, refs):
        check_close(g, want)


@pytest.mark.parametrize(
    "axis, keepdims, ddof", [(None, False, 0), (1, True, 1), ((0, 2), False, 1), (-1, False, 0)]
)
def test_var_std_gradients(axis, keepdims, ddof):
    v = _point(ANY, shape=(2, 3, 4))
    tensorjit.verify_grad(lambda x: M.var(x, axis, keepdims, ddof), [v], rng=rng())
    tensorjit.verify_grad(lambda x: M.std(x, axis, keepdims, ddof), [v], rng=rng())


def _prod_of_others(v, axis):
    """Brute force: each element's gradient of prod over ``axis``."""
    out = np.zeros_like(v)
    for idx in np.ndindex(*v.shape):
        group = [slice(None) if a in axis else idx[a] for a in range(v.ndim)]
        block = v[tuple(group)].copy()
        pos = tuple(idx[a] for a in range(v.ndim) if a in axis)
        block[pos] = 1.0
        out[idx] = np.prod(block)
    return out


@pytest.mark.parametrize("axis", [1, 0, None, (0, 1)])
def test_prod_gradient_with_zeros(axis):
    v = np.array([[0.0, 2.0, 3.0], [1.5, 0.0, 0.0], [1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    x = sym("float64", v.shape)
    g = tensorjit.grad(M.sum(M.prod(x, axis=axis)), x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by zero on the way
        got = tensorjit.function([x], g)(v)
    axes = tuple(range(2)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    np.testing.assert_allclose(got, _prod_of_others(v, axes), rtol=1e-12)
    tensorjit.verify_grad(lambda x: M.prod(x, axis=axis), [v], rng=rng())
    tensorjit.verify_grad(lambda x: M.prod(x, axis=axis, keepdims=True), [v + 0.5], rng=rng())


def test_prod_gradient_second_order_and_float32():
    v = rng().uniform(0.5, 1.5, size=(3, 4))
    tensorjit.verify_grad(
        lambda x: tensorjit.grad(M.sum(M.prod(x, axis=1) ** 2), x), [v], rng=rng()
    )
    v32 = np.array([[0.0, 2.0], [1.0, 3.0]], dtype="float32")
    x = sym("float32", v32.shape)
    g = tensorjit.grad(M.sum(M.prod(x, axis=0)), x)
    assert g.dtype == "float32"
    np.testing.assert_allclose(tensorjit.function([x], g)(v32), [[1, 3], [0, 2]])


def _arg_ref(fn, v, axis, keepdims):
    if axis is None:
        axes = tuple(range(v.ndim))
    else:
        axes = tuple(sorted(a % v.ndim for a in (axis if isinstance(axis, tuple) else (axis,))))
    kept = tuple(a for a in range(v.ndim) if a not in axes)
    moved = v.transpose(kept + axes)
    res = fn(moved.reshape(moved.shape[: len(kept)] + (-1,)), axis=-1)
    if keepdims:
        res = res.reshape(tuple(1 if a in axes else v.shape[a] for a in range(v.ndim)))
    return res


ARG_AXES = [None, 0, -1, (0, 2), (1, 2), (0, 1, 2), (2, 0)]


def test_argmax_argmin_all_any_with_axis_tuples_and_keepdims():
    v = rng().integers(0, 4, size=(2, 3, 4)).astype("float64")
    b = v > 1
    x, xb = sym("float64", v.shape), sym("bool", v.shape, "b")
    outs, refs = [], []
    for axis in ARG_AXES:
        for keepdims in (False, True):
            outs += [M.argmax(x, axis, keepdims), M.argmin(x, axis, keepdims)]
            refs += [_arg_ref(np.argmax, v, axis, keepdims), _arg_ref(np.argmin, v, axis, keepdims)]
            for fn, ref in [(M.all, np.all), (M.any, np.any)]:
                outs += [fn(x, axis, keepdims), fn(xb, axis, keepdims)]
                refs += [ref(v, axis=axis, keepdims=keepdims), ref(b, axis=axis, keepdims=keepdims)]
    for got, want in zip(tensorjit.function([x, xb], outs)(v, b), refs):
        check_close(got, want)
    # One axis or None: the same as NumPy's own argmax/argmin.
    check_close(tensorjit.function([x], M.argmax(x, axis=1))(v), np.argmax(v, axis=1))
    s = sym("float64", ())
    check_close(tensorjit.function([s], M.argmax(s))(np.float64(3.0)), np.argmax(3.0))
    i = sym("int32", (5,))
    check_close(
        tensorjit.function([i], M.all(i, axis=0, keepdims=True))(np.arange(5, dtype="int32")),
        np.all(np.arange(5), axis=0, keepdims=True),
    )


def test_argmax_over_axis_tuple_has_zero_gradient():
    x = sym("float64", (2, 3))
    cost = M.sum(M.argmax(x, axis=(0, 1)) * x)
    g = tensorjit.function([x], tensorjit.grad(cost, x))(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(g, np.full((2, 3), 5.0))


# ---------------------------------------------------------------- DebugMode
def test_debugmode_runs():
    x = sym("float64", (3, 4))
    v = rng().uniform(-0.9, 0.9, size=(3, 4))
    outs = [
        M.arcsin(x),
        M.clip(x * 2, -0.5, 0.5),
        M.var(x, axis=1, ddof=1),
        M.round(x * 3, "half_away_from_zero"),
        M.erfinv(x),
        M.logaddexp(x, M.arctan2(x, 1.0)),
        M.argmax(x, axis=(0, 1)),
    ]
    refs = [
        np.arcsin(v),
        np.clip(v * 2, -0.5, 0.5),
        np.var(v, axis=1, ddof=1),
        _half_away(v * 3),
        scipy.special.erfinv(v),
        np.logaddexp(v, np.arctan2(v, 1.0)),
        np.argmax(v),
    ]
    f = tensorjit.function([x], outs, mode="DebugMode")
    for got, want in zip(f(v), refs):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    v0 = np.array([[0.0, 2.0, 3.0, 0.5], [1.5, 0.0, 0.0, 1.0], [1.0, 2.0, 3.0, 0.5]])
    tensorjit.verify_grad(lambda x: M.prod(x, axis=1), [v0], rng=rng(), mode="DebugMode")
    tensorjit.verify_grad(lambda x: M.std(x, axis=0), [v], rng=rng(), mode="DebugMode")
    tensorjit.verify_grad(M.gammaln, [v + 2], rng=rng(), mode="DebugMode")


def test_inplace_variants_of_new_ops():
    from tensorjit.tensor import inplace

    x = sym("float64", (4,))
    v = np.array([0.1, 0.2, -0.3, 0.9])
    y = inplace.arcsin_inplace(x * 1.0)
    z = inplace.clip_inplace(x * 2.0, -0.5, 0.5)
    got = tensorjit.function([x], [y, z], accept_inplace=True)(v)
    check_close(got[0], np.arcsin(v))
    check_close(got[1], np.clip(v * 2, -0.5, 0.5))


def test_aliases():
    x = sym("float64", (3,))
    assert M.inv(x).owner.op == M.reciprocal(x).owner.op
    assert M.floor_div(x, 2).owner.op == M.int_div(x, 2).owner.op
    assert M.conjugate(x).owner.op == M.conj(x).owner.op
    assert M.digamma(x).owner.op == M.psi(x).owner.op
    assert M.sgn(x).owner.op == M.sign(x).owner.op


# ---------------------------------------------------------------- errors
def test_clip_with_incompatible_static_shapes():
    x = T.tensor("float64", shape=(3,), name="x")
    lo = T.tensor("float64", shape=(4,), name="lo")
    with pytest.raises(ValueError, match=r"clip: shapes .*can not be broadcast.*x.*lo"):
        M.clip(x, lo, 1.0)


def test_var_std_bad_axis():
    x = T.matrix("data")
    with pytest.raises(ValueError, match=r"var: axis 2 is out of range for a 2-d input.*data"):
        M.var(x, axis=2)
    with pytest.raises(ValueError, match=r"std: axis -3 is out of range.*data"):
        M.std(x, axis=(0, -3))
    with pytest.raises(ValueError, match=r"var: repeated axis.*data"):
        M.var(x, axis=(1, -1))
    with pytest.raises(TypeError, match=r"std: axis must be an int.*data"):
        M.std(x, axis=1.5)
    with pytest.raises(TypeError, match=r"var: ddof must be a number.*data"):
        M.var(x, ddof="1")


def test_other_invalid_calls():
    x = T.matrix("m")
    with pytest.raises(ValueError, match=r"round: mode must be one of.*'half_up'.*m"):
        M.round(x, mode="half_up")
    with pytest.raises(ValueError, match=r"argmax: axis=\(\) selects no axis of.*m"):
        M.argmax(x, axis=())
    with pytest.raises(ValueError, match=r"argmin: axis 5 is out of range.*m"):
        M.argmin(x, axis=(0, 5))
    with pytest.raises(ValueError, match="polygamma: n must be a non-negative"):
        M.polygamma(-1, x)
    z = T.zvector("z")
    with pytest.raises(
        TypeError, match="gammaln is not defined for inputs of dtype complex128: 'z'"
    ):
        M.gammaln(z)
    with pytest.raises(TypeError, match="trunc is not defined for inputs of dtype complex128: 'z'"):
        M.trunc(z)
    with pytest.raises(TypeError, match="clip takes 3 inputs"):
        M._ELEMWISE["clip"](x, x)
