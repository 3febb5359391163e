"""C kernels of the Table 1 scalar ops (exp2 ... erfinv, psi) against NumPy / scipy.special,
under a DebugMode that also compares every C kernel with Op.perform."""

from __future__ import annotations

import ctypes
import functools
import platform

import numpy as np
import pytest
import scipy.special
from helpers.c_backend import DEBUG_C, NEEDS_C, compiled_with

import tensorjit
import tensorjit.tensor as T
from tensorjit.plugins.c_backend.generators import codegen
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.scalar import SCALAR_OPS

pytestmark = [
    NEEDS_C,
    pytest.mark.usefixtures("module_compile_cache"),
    pytest.mark.filterwarnings("ignore:.*encountered:RuntimeWarning"),
]

RNG = np.random.default_rng(0)
INF, NAN = np.inf, np.nan


compile_c = functools.partial(compiled_with, "elemwise", Elemwise)


def _round_away(x):
    return SCALAR_OPS["round_half_away_from_zero"].impl(x)  # what NumPy has no ufunc for


def _halves(n):
    return RNG.integers(-20, 21, n) / 2  # ties for the rounding ops


# name -> (NumPy reference, sample(n) inside the domain, edge values).
HALVES = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994, -0.3, 2.0**52 + 1, 1e300]
OPS = {
    "exp2": (np.exp2, lambda n: RNG.uniform(-20, 20, n), [1023.9, 1024, -1074, -1075, -1022.5]),
    "log2": (np.log2, lambda n: RNG.uniform(0, 10, n), [1e-310, 5e-324, 1e308, 8.0, -1e-300]),
    "log10": (np.log10, lambda n: RNG.uniform(0, 10, n), [1e-310, 5e-324, 1e308, 1e3, -3.0]),
    "arcsin": (np.arcsin, lambda n: RNG.uniform(-1.1, 1.1, n), [1 + 2.0**-52, 1e-300, 3.0]),
    "arccos": (np.arccos, lambda n: RNG.uniform(-1.1, 1.1, n), [1 + 2.0**-52, 1e-300, 3.0]),
    "arctan": (np.arctan, lambda n: RNG.uniform(-10, 10, n), [1e300, -1e300, 1e-300]),
    "sinh": (np.sinh, lambda n: RNG.uniform(-10, 10, n), [710.0, 711.0, -711.0, 90.0, 1e-300]),
    "cosh": (np.cosh, lambda n: RNG.uniform(-10, 10, n), [710.0, 711.0, -711.0, 90.0, 1e-300]),
    "arcsinh": (np.arcsinh, lambda n: RNG.uniform(-10, 10, n), [1e300, -1e300, -1e-300]),
    "arccosh": (np.arccosh, lambda n: RNG.uniform(0.5, 10, n), [1 + 2.0**-52, 1e300, 0.9]),
    "arctanh": (np.arctanh, lambda n: RNG.uniform(-1.05, 1.05, n), [0.999999, 1e-300, 3.0]),
    "round_half_to_even": (np.round, _halves, HALVES),
    "round_half_away_from_zero": (_round_away, _halves, HALVES),
    "trunc": (np.trunc, lambda n: RNG.uniform(-10, 10, n), HALVES),
    "erf": (scipy.special.erf, lambda n: RNG.uniform(-6, 6, n), [6.0, -6.0, 30.0, 1e-300]),
    "erfc": (scipy.special.erfc, lambda n: RNG.uniform(-6, 6, n), [26.5, 27.5, -30.0, 1e-300]),
    "gamma": (
        scipy.special.gamma,
        lambda n: RNG.uniform(-10, 30, n),
        [171.6, 172.0, -171.5, -180.5, 1e-300, -1e-300, -3.0, 3.0, 10.0],
    ),
    "gammaln": (
        scipy.special.gammaln,
        lambda n: RNG.uniform(-10, 50, n),
        [1e300, 1e-300, -2.457024738220800, -3.0, 3.0, 1 + 1e-9, 2 - 1e-9],
    ),
    "psi": (
        scipy.special.psi,
        lambda n: RNG.uniform(-10, 30, n),
        [1e-300, -1e-300, 1.4616321449683622, -0.5040830082644554, 1e15, -0.4, -0.6, 1e300],
    ),
    "erfinv": (
        scipy.special.erfinv,
        lambda n: RNG.uniform(-1.05, 1.05, n),
        [1 - 2.0**-53, -(1 - 2.0**-53), 1e-300, 5e-324, 1e-9, 0.9999, 3.0],
    ),
}
EDGES = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0]
EXACT = {"round_half_to_even", "round_half_away_from_zero", "trunc"}
# Absolute tolerances (besides rtol 1e-12 / 1e-5) where the references differ from libm:
ATOL64 = {
    # scipy's erfc underflows to 0 above x ~ 26.6 where libm's erfc still gives subnormals.
    "erfc": 1e-300,
    # scipy's gamma gives +-0 for x < -171.x where libm's tgamma gives subnormals.
    "gamma": 1e-300,
    # scipy's (cephes) gammaln loses relative accuracy near the zeros of log|gamma| (at 1,
    # 2 and the negative ones: 14% near -2.457, 1e-11 near 2), where libm's lgamma stays
    # accurate; both are accurate in absolute terms there.
    "gammaln": 1e-13,
    # For x < 0 both use the reflection formula, which loses relative (not absolute)
    # accuracy near the zeros of psi below -1 (the one in (-1, 0) has a series in both).
    "psi": 1e-13,
}
# float32: subnormal results (erfc, exp2, gamma) differ in their last of few bits; near
# the zeros of log|gamma|, lgammaf's absolute error is that of float32 arithmetic.
ATOL32 = {"gammaln": 1e-6}


def sample(name, dtype):
    _, draw, extra = OPS[name]
    values = np.concatenate([draw(40), EDGES, extra]).astype(dtype)
    pad = -len(values) % 8
    return np.concatenate([values, values[:pad]]).reshape(8, -1)


def layouts(value):
    """The same logical values contiguous, Fortran-ordered, strided and reversed."""
    yield "contiguous", value
    yield "fortran", np.asfortranarray(value)
    big = np.zeros((2 * value.shape[0], 3 * value.shape[1]), value.dtype)
    big[::2, ::3] = value
    yield "strided", big[::2, ::3]
    yield "negative", np.ascontiguousarray(value[::-1, ::-1])[::-1, ::-1]


def assert_close(got, expected, name, dtype):
    assert got.dtype == expected.dtype, (name, got.dtype, expected.dtype)
    if name in EXACT:
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    elif dtype == "float64":
        atol = ATOL64.get(name, 0.0)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=atol, equal_nan=True)
    else:
        atol = ATOL32.get(name, 1e-37)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=atol, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_unary_op_matches_numpy_in_every_layout(name, dtype):
    ref = OPS[name][0]
    x = T.tensor(dtype, shape=(None, None), name="x")
    f = compile_c([x], getattr(T, name)(x))
    value = sample(name, dtype)
    with np.errstate(all="ignore"):
        expected = ref(value)
    for layout, v in layouts(value):
        assert not v.flags.c_contiguous or layout == "contiguous"
        assert_close(f(v), expected, name, dtype)
    assert_close(f(value[:0]), ref(value[:0]), name, dtype)  # empty


@pytest.mark.parametrize("dtype", ["int64", "int16"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_integer_input(name, dtype):
    # NumPy computes these in the float type it picks for the integer (float64 for int64;
    # float32 or float64 for int16); rounding keeps integers as they are.
    ref = OPS[name][0]
    x = T.tensor(dtype, shape=(None,), name="x")
    f = compile_c([x], getattr(T, name)(x))
    value = np.array([-3, -2, -1, 0, 1, 2, 3, 7, 100, 1000], dtype=dtype)
    with np.errstate(all="ignore"):
        expected = ref(value)
    assert f(value).dtype == expected.dtype
    assert_close(f(value), expected, name, expected.dtype.name)
    assert_close(f(value[::-2]), ref(value[::-2]), name, expected.dtype.name)


def test_float16_results_fall_back_to_python():
    # exp2 of int8 is float16 in NumPy: C has no float16, so the Python kernel runs.
    x = T.tensor("int8", shape=(None,), name="x")
    f = tensorjit.function([x], T.exp2(x), mode=DEBUG_C)
    assert [k.name for k in f.kernels.values()] == ["debug:perform"]
    value = np.array([-2, 0, 3], dtype="int8")
    np.testing.assert_array_equal(f(value), np.exp2(value))


SPECIAL_ATAN2 = [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 1e-300, -5e-324, 1e300]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_arctan2_signed_zeros_infinities_and_broadcasting(dtype):
    y, x = T.tensor(dtype, shape=(None, None)), T.tensor(dtype, shape=(1, None))
    f = compile_c([y, x], T.arctan2(y, x))
    special = np.array(SPECIAL_ATAN2, dtype)
    ys = np.repeat(special[:, None], len(special), axis=1)  # every (y, x) pair
    xs = special[None, :]
    got = f(ys, xs)
    assert got.dtype == np.dtype(dtype)
    # NumPy's own atan2 loops can be an ulp from libm's (atan2(1e-300, -5e-324) is pi/2
    # rounded up there; atan2f(1, 1) rounded down): exact zeros, infinities and signs.
    rtol = 1e-12 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(got, np.arctan2(ys, xs), rtol=rtol, atol=0, equal_nan=True)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.arctan2(ys, xs)))
    value = RNG.uniform(-5, 5, (6, 9)).astype(dtype)
    row = RNG.uniform(-5, 5, (1, 9)).astype(dtype)
    for _, v in layouts(value):
        np.testing.assert_allclose(f(v, row[:, ::-1]), np.arctan2(v, row[:, ::-1]), rtol=rtol)
    i = T.tensor("int64", shape=(None,))
    g = compile_c([i], T.arctan2(i, i[::-1] + 1))
    iv = np.arange(-4, 5)
    np.testing.assert_allclose(g(iv), np.arctan2(iv, iv[::-1] + 1), rtol=1e-12)


def test_clip_nan_bounds_ties_and_inverted_bounds():
    x, lo, hi = (T.vector(n) for n in "x lo hi".split())
    f = compile_c([x, lo, hi], T.clip(x, lo, hi))
    cases = [
        # x, lo, hi: a NaN anywhere gives NaN, lo > hi gives hi, the bound wins a tie
        (NAN, 0.0, 1.0),
        (0.5, NAN, 1.0),
        (0.5, 0.0, NAN),
        (2.0, NAN, 1.0),
        (-1.0, 0.0, NAN),
        (5.0, 3.0, 1.0),
        (0.0, 3.0, 1.0),
        (-0.0, 0.0, 1.0),
        (0.0, -0.0, 1.0),
        (1.0, 0.0, 1.0),
        (-0.0, -1.0, 0.0),
        (0.0, -1.0, -0.0),
        (INF, 0.0, 1.0),
        (-INF, 0.0, INF),
        (0.25, -INF, INF),
    ]
    xs, los, his = (np.array(c) for c in zip(*cases))
    got, expected = f(xs, los, his), np.clip(xs, los, his)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    got = f(xs[::-1], los[::-1], his[::-1])  # the strided entry point
    np.testing.assert_array_equal(got, np.clip(xs[::-1], los[::-1], his[::-1]))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "uint8"])
def test_clip_constant_and_broadcast_bounds(dtype):
    x = T.tensor(dtype, shape=(None, None), name="x")
    lo = T.tensor(dtype, shape=(1, None), name="lo")
    f = compile_c([x, lo], [T.clip(x, 2, 5), T.clip(x, lo, 4)])
    value = RNG.uniform(0, 8, (5, 7)).astype(dtype)
    low = RNG.uniform(1, 6, (1, 7)).astype(dtype)
    for _, v in layouts(value):
        got = f(v, low[:, ::-1])
        for g, e in zip(got, [np.clip(v, 2, 5), np.clip(v, low[:, ::-1], 4)]):
            np.testing.assert_array_equal(g.astype(e.dtype), e)


def test_clip_mixed_dtypes_compute_in_the_result_type():
    x = T.tensor("float32", shape=(None,), name="x")
    lo = T.tensor("float64", shape=(None,), name="lo")
    i = T.tensor("int64", shape=(None,), name="i")
    u = T.tensor("uint64", shape=(None,), name="u")
    f = compile_c([x, lo, i, u], [T.clip(x, lo, 1.5), T.clip(i, u, 10)])
    xv = np.array([0.1, 2.0, -3.0, np.nan], dtype="float32")
    lv = np.array([0.2, 0.0, -1.0, 0.0])
    iv = np.array([-5, 3, 2**62, 12])
    uv = np.array([0, 4, 1, 2**63], dtype="uint64")
    got = f(xv, lv, iv, uv)
    expected = [np.clip(xv, lv, 1.5), np.clip(iv, uv, 10)]
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


def test_fused_composite_of_new_ops():
    x = T.tensor("float64", shape=(None, None), name="x")
    y = T.tensor("float64", shape=(None, None), name="y")
    z = T.log10(T.cosh(x)) + T.arctan2(x, y) * T.erf(y) - T.clip(T.exp2(x), 0.5, 4.0)
    w = T.psi(T.cosh(y) + 1) + T.erfinv(T.tanh(y)) + T.gammaln(T.arcsinh(x) + 5)
    f = compile_c([x, y], [z, w])
    nodes = [n for n in f.kernels if isinstance(n.op, Elemwise)]
    assert len(nodes) == 2 and all("Composite" in str(n.op) for n in nodes), nodes

    def ref(a, b):
        s = scipy.special
        return [
            np.log10(np.cosh(a)) + np.arctan2(a, b) * s.erf(b) - np.clip(np.exp2(a), 0.5, 4),
            s.psi(np.cosh(b) + 1) + s.erfinv(np.tanh(b)) + s.gammaln(np.arcsinh(a) + 5),
        ]

    a, b = RNG.uniform(-3, 3, (6, 5)), RNG.uniform(-3, 3, (6, 5))
    for (_, va), (_, vb) in zip(layouts(a), layouts(b)):
        for g, e in zip(f(va, vb), ref(va, vb)):
            np.testing.assert_allclose(g, e, rtol=1e-12)
    # float32 fuses and compiles the same way (psi and erfinv go through double).
    x32 = T.tensor("float32", shape=(None,), name="x")
    h = compile_c([x32], T.log2(T.sinh(x32) ** 2 + 1) * T.psi(T.exp2(x32)) - T.erfinv(x32 / 4))
    (node,) = [n for n in h.kernels if isinstance(n.op, Elemwise)]
    assert "Composite" in str(node.op)
    v = RNG.uniform(-3, 3, 50).astype("float32")
    s = scipy.special
    e = np.log2(np.sinh(v) ** 2 + 1) * s.psi(np.exp2(v)) - s.erfinv(v / np.float32(4))
    got = h(v[::-1])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, e[::-1], rtol=1e-5, atol=1e-5)


def test_psi_and_erfinv_accuracy():
    # Near the zeros of psi (series about them) and close to +-1 for erfinv (Halley steps
    # on erfc), relative to scipy.special; random points over their whole range.
    pos, neg = 1.4616321449683622, -0.5040830082644554
    steps = np.arange(-40, 41)
    xs = np.concatenate(
        [
            pos + steps * 2.2e-16,
            neg + steps * 1.1e-16,
            pos + RNG.uniform(-0.6, 0.6, 500),
            neg + RNG.uniform(-0.3, 0.3, 500),
            RNG.uniform(0, 12, 500),
            10.0 ** RNG.uniform(-300, 300, 500),
            np.arange(1.0, 30.0),
        ]
    )
    x = T.vector("x")
    f = compile_c([x], [T.psi(x), T.erfinv(x)])
    np.testing.assert_allclose(f(xs)[0], scipy.special.psi(xs), rtol=1e-12)
    ys = np.concatenate(
        [
            RNG.uniform(-1, 1, 2000),
            1 - 10.0 ** RNG.uniform(-16, 0, 500),
            -(10.0 ** RNG.uniform(-300, 0, 500)),
            [np.nextafter(1, 0), np.nextafter(-1, 0), 0.5, -0.5, np.nextafter(0.5, 1)],
        ]
    )
    np.testing.assert_allclose(f(ys)[1], scipy.special.erfinv(ys), rtol=1e-12)


def test_special_function_helpers_are_only_in_kernels_that_call_them():
    def source(name):
        op = SCALAR_OPS[name]
        return codegen.elemwise_source(op, ["float64"], ["float64"], ["full"], [(False,)], {}, None)

    assert "tj_psi_d(double x)" in source("psi")[0]
    assert "tj_erfinv_d(double y)" in source("erfinv")[0]
    for name in ("exp", "gammaln"):
        src = source(name)[0]
        assert "tj_psi_d" not in src and "tj_erfinv_d" not in src


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="signgam is glibc's")
def test_gammaln_leaves_signgam_alone():
    # lgamma writes the global signgam (a data race between threads): gammaln's kernel
    # uses lgamma_r, so signgam keeps the sign that lgamma(0.5) left there.
    libm = ctypes.CDLL("libm.so.6")
    libm.lgamma.restype, libm.lgamma.argtypes = ctypes.c_double, [ctypes.c_double]
    signgam = ctypes.c_int.in_dll(libm, "signgam")
    x = T.vector("x")
    f = compile_c([x], T.gammaln(x))
    libm.lgamma(0.5)
    assert signgam.value == 1
    np.testing.assert_allclose(f(np.array([-0.5])), scipy.special.gammaln([-0.5]), rtol=1e-12)
    assert signgam.value == 1  # lgamma(-0.5) would have set -1


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_small_integer_powers_are_written_out_and_exact(dtype):
    # x**n for a constant 0 <= n <= 64 becomes products by squaring (vectorisable).
    x = T.vector("x", dtype=dtype)
    powers = [0, 1, 2, 3, 10, 17, 64]
    f = tensorjit.function([x], [x**n for n in powers])
    values = np.array([0.0, -0.0, 1.5, -2.0, 0.5, np.inf, -np.inf, np.nan, 1e-20], dtype=dtype)
    with np.errstate(all="ignore"):
        for n, got in zip(powers, f(values)):
            expected = np.ones_like(values)
            power = values.copy()
            k = n
            while k:  # the same products, in the same order
                if k & 1:
                    expected = expected * power
                k >>= 1
                power = power * power
            np.testing.assert_array_equal(got, expected.astype(dtype), err_msg=f"x**{n}")
            np.testing.assert_allclose(got, values**n, rtol=1e-5 if dtype == "float32" else 1e-13)
