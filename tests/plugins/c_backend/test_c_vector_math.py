"""The C backend's vectorisable exp, expm1, log, log1p, tanh (and sigmoid, softplus on top):
errors in ulps against NumPy and an extended-precision reference over wide ranges and
special values, float64 and float32, contiguous, strided and broadcast operands; and that
the kernels really take the vector path (no libm call, loops vectorised by gcc)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.special
from helpers.c_backend import (
    DEBUG_C,
    NEEDS_C,
    cached_sources,
    compiler_macros,
    vectorised_lines,
)

import tensorjit
import tensorjit.tensor as T
from tensorjit.plugins.c_backend.build import compiler

pytestmark = [
    NEEDS_C,
    pytest.mark.usefixtures("module_compile_cache"),
    pytest.mark.filterwarnings("ignore:.*encountered:RuntimeWarning"),
]

RNG = np.random.default_rng(7)
INF, NAN = np.inf, np.nan
# np.longdouble is x87 extended (64-bit significand) on x86 Linux: a reference for float64.
EXTENDED = np.finfo(np.longdouble).nmant >= 63


def _expit(x):
    return scipy.special.expit(x)


def _softplus(x):
    return np.logaddexp(0, x)


# name -> (symbolic function, NumPy reference)
FUNCTIONS = {
    "exp": (T.exp, np.exp),
    "expm1": (T.expm1, np.expm1),
    "log": (T.log, np.log),
    "log1p": (T.log1p, np.log1p),
    "tanh": (T.tanh, np.tanh),
    "sigmoid": (T.sigmoid, _expit),
    "softplus": (T.softplus, _softplus),
}
# Largest error in ulps of the correctly rounded result (measured in float64: exp 0.76,
# expm1 1.29, log 0.66, log1p 0.66, tanh 1.99; float32 <= 1.94, exp 0.94 over every float
# where FMA is), and against NumPy, whose own error (up to ~3.5 ulp for float32 log) adds
# to ours.
MAX_ULP = {"exp": 1.0, "expm1": 1.5, "log": 1.0, "log1p": 1.0, "tanh": 2.5}
MAX_ULP_NUMPY = {"float64": 4.0, "float32": 5.0}


def _wide(name, dtype, n=20000):
    """Random values over the whole domain where results are finite and beyond."""
    single = dtype == "float32"
    top = 89.0 if single else 710.0
    low = -104.0 if single else -746.0
    lo_exp, hi_exp = (-149, 128) if single else (-1074, 1024)
    tiny = np.exp2(RNG.uniform(lo_exp, -10, n))  # denormals up to 1e-3
    sign = RNG.choice([-1.0, 1.0], n)
    parts = {
        "exp": [RNG.uniform(low, top, n), RNG.uniform(-1, 1, n), sign * tiny],
        "expm1": [RNG.uniform(low, top, n), RNG.uniform(-2, 2, n), sign * tiny],
        "tanh": [RNG.uniform(-25, 25, n), RNG.uniform(-1, 1, n), sign * tiny],
        "log": [np.exp2(RNG.uniform(lo_exp, hi_exp, n)), RNG.uniform(0.5, 2, n)],
        "log1p": [
            np.exp2(RNG.uniform(lo_exp, hi_exp, n)),
            RNG.uniform(-1, 1, n),
            -1 + np.exp2(RNG.uniform(-24 if single else -53, 0, n)),
            sign * tiny,
        ],
        "sigmoid": [RNG.uniform(low, top, n), RNG.uniform(-40, 40, n), sign * tiny],
        "softplus": [RNG.uniform(low, top, n), RNG.uniform(-40, 40, n), sign * tiny],
    }[name]
    with np.errstate(over="ignore"):
        return np.concatenate(parts).astype(dtype)


def _special(dtype):
    fi = np.finfo(dtype)
    values = [INF, -INF, NAN, 0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -0.5]
    values += [fi.smallest_subnormal, -fi.smallest_subnormal, fi.tiny, -fi.tiny, fi.tiny / 3]
    values += [fi.max, -fi.max, fi.eps, -fi.eps, 1 - fi.epsneg, -1 + fi.epsneg, 1 + fi.eps]
    if dtype == "float64":
        values += [1e300, -1e300, 1e-300, -1e-300, 1e-20, -1e-20]
        # exp's overflow and underflow thresholds, and around the smallest denormal result
        values += [709.782712893384, 709.7827128933841, 709.79, 710.0, 711.0]
        values += [-708.3964185322641, -708.4, -744.4400719213812, -745.1332191019411]
        values += [-745.1332191019412, -745.2, -746.0, -800.0]
        values += [19.5, 22.0, 22.5, -36.7, -37.5, -40.0, -41.0]  # tanh, expm1 ends
    else:
        values += [1e30, -1e30, 1e-30, -1e-30, 1e-20, -1e-20]
        values += [88.72283, 88.72284, 88.7228, 89.0, 90.0]
        values += [-87.33654, -87.3366, -103.27893, -103.97207, -103.97208, -104.0, -110.0]
        values += [9.5, 10.0, 10.5, -17.0, -17.4, -20.0, -21.0]
    return np.array(values, dtype=dtype)


def ulps(got, want, dtype):
    """|got - want| in ulps of ``want`` rounded to ``dtype``; 0 where both are the same
    inf or NaN or zero of the same sign, inf for a wrong special value."""
    got = np.asarray(got)
    rounded = np.asarray(want).astype(dtype)
    same = (got == rounded) & (np.signbit(got) == np.signbit(rounded))
    same |= np.isnan(got) & np.isnan(rounded)
    with np.errstate(all="ignore"):
        err = np.abs(got.astype(want.dtype) - want) / np.spacing(np.abs(rounded)).astype(want.dtype)
    err = np.where(np.isfinite(rounded) & np.isfinite(got), err, np.inf)
    return np.where(same, 0.0, np.nan_to_num(err, nan=np.inf))


def compile_fn(name, dtype, ndim=1, mode=None):
    x = T.TensorType(dtype, (None,) * ndim)("x")
    f = tensorjit.function([x], FUNCTIONS[name][0](x), mode=mode)
    [kernel] = f.kernels.values()
    assert kernel.name in ("c:elemwise", "debug:c:elemwise"), kernel.name
    return f


def numpy_ref(name, x):
    with np.errstate(all="ignore"):
        return FUNCTIONS[name][1](x)


def exact_ref(name, x):
    """The reference in a wider type: float64 for float32, long double for float64."""
    wide = np.float64 if x.dtype == np.float32 else np.longdouble
    with np.errstate(all="ignore"):
        return FUNCTIONS[name][1](x.astype(wide))


DTYPES = ["float64", "float32"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_against_numpy_in_ulps(name, dtype):
    f = compile_fn(name, dtype)
    x = np.concatenate([_wide(name, dtype), _special(dtype)])
    got = f(x)
    assert got.dtype == dtype
    err = ulps(got, numpy_ref(name, x).astype(dtype), dtype)
    worst = int(np.argmax(err))
    bound = MAX_ULP_NUMPY[dtype]
    assert err[worst] <= bound, (name, dtype, x[worst], got[worst], numpy_ref(name, x[worst]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(MAX_ULP))
def test_against_a_wider_reference_in_ulps(name, dtype):
    if dtype == "float64" and not EXTENDED:
        pytest.skip("np.longdouble is no wider than float64 here: no reference for float64")
    f = compile_fn(name, dtype)
    x = np.concatenate([_wide(name, dtype, 100000), _special(dtype)])
    got = f(x)
    err = ulps(got, exact_ref(name, x), dtype)
    worst = int(np.argmax(err))
    assert err[worst] <= MAX_ULP[name], (name, dtype, x[worst], got[worst], err[worst])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_special_values_exactly(name, dtype):
    # inf, nan, signed zeros and results that round to 0 or inf are NumPy's exactly.
    f = compile_fn(name, dtype)
    x = _special(dtype)
    got, want = f(x), numpy_ref(name, x).astype(dtype)
    pinned = ~np.isfinite(want) | (want == 0) | ~np.isfinite(x)
    np.testing.assert_array_equal(got[pinned], want[pinned])
    signed = pinned & ~np.isnan(want)  # a NaN's sign means nothing
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]))


def test_named_special_values():
    f64 = {name: compile_fn(name, "float64") for name in ("exp", "expm1", "log", "log1p", "tanh")}
    x = np.array([-0.0, 0.0, INF, -INF, NAN])
    np.testing.assert_array_equal(f64["exp"](x), [1, 1, INF, 0, NAN])
    np.testing.assert_array_equal(f64["expm1"](x), [-0.0, 0, INF, -1, NAN])
    np.testing.assert_array_equal(f64["tanh"](x), [-0.0, 0, 1, -1, NAN])
    np.testing.assert_array_equal(f64["log"](x), [-INF, -INF, INF, NAN, NAN])
    np.testing.assert_array_equal(f64["log1p"](x), [-0.0, 0, INF, NAN, NAN])
    assert np.signbit(f64["tanh"](x)[0]) and np.signbit(f64["expm1"](x)[0])
    assert np.signbit(f64["log1p"](x)[0])
    np.testing.assert_array_equal(f64["log1p"](np.array([-1.0, -2.0])), [-INF, NAN])
    np.testing.assert_array_equal(f64["log"](np.array([-1.0, 5e-324])), [NAN, np.log(5e-324)])
    np.testing.assert_array_equal(f64["exp"](np.array([709.79, -745.2])), [INF, 0.0])
    assert f64["exp"](np.array([-745.0]))[0] == 5e-324  # the smallest denormal
    tiny = np.array([5e-324, -5e-324, 1e-300, -1e-20])
    np.testing.assert_array_equal(f64["tanh"](tiny), tiny)
    np.testing.assert_array_equal(f64["tanh"](np.array([19.5, -25.0, 1e300])), [1, -1, 1])
    f32 = compile_fn("tanh", "float32")
    x32 = np.array([9.5, -12, 3e38, -1e-40], "f")
    np.testing.assert_array_equal(f32(x32), np.array([1, -1, 1, -1e-40], "f"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_and_broadcast_operands(dtype):
    # The MLP's Composite{add,tanh}: a row broadcast over a matrix, through tj_strided.
    x, b = T.TensorType(dtype, (None, None))("x"), T.TensorType(dtype, (None,))("b")
    f = tensorjit.function([x, b], [T.tanh(x + b), T.exp(x) * b, T.log1p(T.abs(x) * b)])
    big = RNG.uniform(-30, 30, (60, 1000)).astype(dtype)
    bv = RNG.uniform(0, 3, 1000).astype(dtype)
    for xv, bb in [
        (big[:, :500], bv[:500]),  # rows with a gap between them
        (big[:, ::2], bv[::2]),  # a stride of two elements
        (big[::-1, ::-2], bv[::-2]),  # negative strides
        (np.asfortranarray(big[:, :500]), bv[:500]),
        (big[:, :500].T.copy().T, bv[1::2]),
    ]:
        outs = f(xv, bb)
        with np.errstate(all="ignore"):
            wants = [np.tanh(xv + bb), np.exp(xv) * bb, np.log1p(np.abs(xv) * bb)]
        for got, want in zip(outs, wants):
            assert got.dtype == dtype
            assert ulps(got, want.astype(dtype), dtype).max() <= MAX_ULP_NUMPY[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_debug_mode_checks_the_kernels_against_perform(name, dtype):
    # DebugMode compares every C kernel's result with Op.perform's (NumPy, scipy).
    f = compile_fn(name, dtype, ndim=2, mode=DEBUG_C)
    x = np.concatenate([_wide(name, dtype, 500), _special(dtype)])
    x = x[: len(x) // 4 * 4].reshape(4, -1)
    f(x)
    f(x[:, ::3])


def _vector_functions(dtype):
    # float64 log is libm's on x86-64 without AVX2 (there 2-wide SSE2 is slower than libm).
    macros = compiler_macros()
    libm_log = dtype == "float64" and "__x86_64__" in macros and "__AVX2__" not in macros
    return [fn for fn in ("exp", "expm1", "log", "log1p", "tanh") if fn != "log" or not libm_log]


@pytest.mark.parametrize("dtype", DTYPES)
def test_kernels_call_no_libm_function(dtype):
    x, b = T.TensorType(dtype, (None, None))("x"), T.TensorType(dtype, (None,))("b")
    s = "d" if dtype == "float64" else "f"
    libm = "" if dtype == "float64" else "f"
    tensorjit.function([x, b], T.tanh(x + b))
    tensorjit.function([x], T.exp(x) + T.log(x) + T.log1p(x) + T.expm1(x))
    for needle in (f"tj_vtanh_{s}(", f"tj_vexp_{s}(", f"tj_vlog1p_{s}("):
        entries = cached_sources(needle)
        assert entries, needle
        for base, text in entries:
            code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)  # not the comments
            for fn in ("exp", "expm1", "log1p", "tanh"):
                assert not re.search(rf"(?<!\w){fn}{libm}\(", code), (fn, base)
            with open(base + ".so", "rb") as lib:
                names = lib.read()
            for fn in _vector_functions(dtype):  # no dynamic symbol either
                assert b"\0%s%s\0" % (fn.encode(), libm.encode()) not in names, fn


@pytest.mark.parametrize("dtype", DTYPES)
def test_gcc_vectorises_the_kernel_loops(dtype):
    macros = compiler_macros()
    if "__GNUC__" not in macros or "__clang__" in macros:
        pytest.skip("only gcc reports vectorised loops (-fopt-info-vec); the compiler is not gcc")
    x, b = T.TensorType(dtype, (None, None))("x"), T.TensorType(dtype, (None,))("b")
    s = "d" if dtype == "float64" else "f"
    tensorjit.function([x, b], T.tanh(x + b))
    terms = [T.sigmoid(x), T.softplus(x), T.expm1(x)]
    tensorjit.function([x], sum(terms, T.log(x) if "log" in _vector_functions(dtype) else 0))
    entries = cached_sources(f"tj_vtanh_{s}(") + cached_sources(f"tj_sigmoid_{s}(")
    assert entries
    for base, text in entries:
        vectorised = vectorised_lines(base)
        # Every loop that calls tj_f over contiguous elements: tj_contig's, tj_strided's,
        # tj_contig_stream's over a cache line and over the tail, and tj_strided_stream's
        # before the first line, over a line and after the last.
        lines = text.splitlines()
        loops = [i + 1 for i, line in enumerate(lines) if "[i] = tj_f(" in line]
        loops += [i + 1 for i, line in enumerate(lines) if "line[k] = tj_f(" in line]
        assert len(loops) == 7, loops
        assert set(loops) <= vectorised, (loops, sorted(vectorised))


def test_native_code_is_keyed_by_the_cpu(monkeypatch):
    # A cache directory may be shared by machines: code for -march=native (ours or from
    # config cflags) is keyed by the CPU, portable code is not.
    assert compiler.cpu_identity()
    source = "int tj_x(void) { return 1; }\n"
    key = compiler.cache_key(source)
    monkeypatch.setattr(compiler, "cpu_identity", lambda: "another CPU")
    native = any(flag.endswith("=native") for flag in compiler.compile_flags())
    assert (compiler.cache_key(source) != key) == native
    monkeypatch.setattr(compiler, "CFLAGS", tuple(f for f in compiler.CFLAGS if "native" not in f))
    portable = compiler.cache_key(source)
    with tensorjit.config.change_flags(cflags="-march=native"):
        user_native = compiler.cache_key(source)
    monkeypatch.setattr(compiler, "cpu_identity", lambda: "a third CPU")
    assert compiler.cache_key(source) == portable
    with tensorjit.config.change_flags(cflags="-march=native"):
        assert compiler.cache_key(source) != user_native
