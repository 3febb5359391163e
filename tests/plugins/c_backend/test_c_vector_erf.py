"""The C backend's vectorisable float32 erf and erfc and float64 erf
(c_backend/generators/vector_erf.py): float32 at most 1 ulp from SciPy's double precision values
rounded to float32, float64 at most 1 ulp (2 without FMA) from the correctly rounded
value (mpmath, 30 digits), over every region of the approximations and their joins,
special values exactly; fused into other elementwise work (the normal CDF of option
pricing, the exact GELU) without a libm call, in loops gcc vectorises; checked against
Op.perform by DebugMode. float64 erfc keeps libm's."""

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

pytestmark = [NEEDS_C, pytest.mark.usefixtures("module_compile_cache")]

REFERENCE = {"erf": scipy.special.erf, "erfc": scipy.special.erfc}
SYMBOLIC = {"erf": T.erf, "erfc": T.erfc}


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in float32 steps (same sign, or both zero, counted through zero)."""

    def ordered(a: np.ndarray) -> np.ndarray:
        bits = a.view(np.int32).astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)

    both_nan = np.isnan(got) & np.isnan(want)
    return np.where(both_nan, 0, np.abs(ordered(got) - ordered(want)))


STEPS = 1_000_001  # the grid's first values, evenly over [-11, 11]


def _grid() -> np.ndarray:
    """Steps over [-11, 11] (erfc's underflow at 10.06 included), every float32 around
    the joins of the pieces (|x| = 1 and 2, erf's clamp at 4) and in [0.9, 1], and tiny
    magnitudes."""
    joins = []
    for point in (1.0, 2.0, 4.0, 3.9192059, 10.0546875):
        centre = np.float32(point).view(np.int32)
        around = np.arange(centre - 2000, centre + 2000, dtype=np.int32).view(np.float32)
        joins += [around, -around]
    # every float32 in [0.9, 1]: where erf's |x| <= 1 piece rounds most (a first form
    # was 2 ulp off at 27 of them)
    top = np.arange(*np.float32([0.9, 1]).view(np.int32), dtype=np.int32).view(np.float32)
    joins += [top, -top]
    tiny = np.geomspace(1e-45, 1e-3, 20001).astype(np.float32)
    steps = np.linspace(-11, 11, STEPS, dtype=np.float32)
    return np.concatenate([steps, *joins, tiny, -tiny])


@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_float32_is_within_one_ulp_of_the_double_result_everywhere(name):
    x = T.vector("x", dtype="float32")
    f = tensorjit.function([x], SYMBOLIC[name](x))
    assert [k.name for k in f.kernels.values()] == ["c:elemwise"]
    values = _grid()
    got = f(values)
    want = REFERENCE[name](values.astype(np.float64)).astype(np.float32)
    distance = _ulps(got, want)
    worst = int(distance.argmax())
    assert distance.max() <= 1, (values[worst], got[worst], want[worst])
    # nearly always the correctly rounded value (over every 64th float32 in [-11, 11]:
    # erf 0.74% 1 ulp off, erfc 0.0002%; benchmarks/RESULTS.md)
    assert np.count_nonzero(distance[:STEPS]) < 0.03 * STEPS


@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_special_values_exactly(name):
    x = T.vector("x", dtype="float32")
    f = tensorjit.function([x], SYMBOLIC[name](x))
    values = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 20.0, -20.0], "float32")
    got = f(values)
    want = REFERENCE[name](values.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    numbers = ~np.isnan(want)  # (a NaN's sign means nothing)
    assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_debug_mode_checks_the_kernels_against_perform(dtype):
    x = T.vector("x", dtype=dtype)
    f = tensorjit.function([x], [T.erf(x), T.erfc(x)], mode=DEBUG_C)
    values = np.linspace(-6, 6, 1001).astype(dtype)
    got_erf, got_erfc = f(values)
    tol = 2e-7 if dtype == "float32" else 1e-15
    np.testing.assert_allclose(got_erf, scipy.special.erf(values), rtol=tol, atol=tol)
    np.testing.assert_allclose(got_erfc, scipy.special.erfc(values), rtol=4 * tol, atol=1e-30)


def _float64_grid() -> np.ndarray:
    """Seeded values over [-7, 7], around the join at |x| = 1 and the clamp at 6, tiny
    magnitudes (denormals included)."""
    rng = np.random.default_rng(3)
    joins = [p + np.ldexp(np.arange(-300, 300), -52) for p in (1.0, 6.0)]
    parts = [rng.uniform(-7, 7, 6000), rng.uniform(-1.2, 1.2, 6000), *joins]
    tiny = np.exp2(rng.uniform(-1074, -10, 2000))
    values = np.concatenate([*parts, tiny])
    return np.concatenate([values, -values])


def test_float64_erf_is_within_one_ulp_of_the_correctly_rounded_value():
    import mpmath

    x = T.vector("x", dtype="float64")
    f = tensorjit.function([x], T.erf(x))
    assert [k.name for k in f.kernels.values()] == ["c:elemwise"]
    values = _float64_grid()
    got = f(values)
    with mpmath.workdps(30):
        want = np.array([float(mpmath.erf(mpmath.mpf(float(v)))) for v in values])

    def ordered(a: np.ndarray) -> np.ndarray:
        bits = a.view(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFFFFFFFFFF), bits)

    distance = np.abs(ordered(got) - ordered(want))
    worst = int(distance.argmax())
    # without FMA, a u S1(u) is added to a rounded a c0 (vector_erf.py)
    bound = 1 if "__FMA__" in compiler_macros() else 2
    assert distance.max() <= bound, (values[worst], got[worst], want[worst])
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5.93, -30.0])
    np.testing.assert_array_equal(f(special), scipy.special.erf(special))
    assert np.signbit(f(special)[1])


def test_float64_gelu_is_one_vectorised_loop_without_libm_erf():
    x = T.matrix("x", dtype="float64")
    f = tensorjit.function([x], x * (0.5 * (1 + T.erf(x * (1 / np.sqrt(2))))))
    assert [k.name for k in f.kernels.values()] == ["c:elemwise"]
    values = np.linspace(-5, 5, 600).reshape(20, 30)
    want = values * 0.5 * (1 + scipy.special.erf(values / np.sqrt(2)))
    # 1 + erf(x) cancels for negative x: an ulp of erf near -1 (and SciPy's) times |x| <= 5
    eps = np.finfo(np.float64).eps
    np.testing.assert_allclose(f(values), want, rtol=4 * eps, atol=4 * 5 * eps)
    entries = cached_sources("tj_erf_d(")
    assert entries
    macros = compiler_macros()
    for base, text in entries:
        code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        assert not re.search(r"(?<!\w)erf\(", code), base
        if "__GNUC__" in macros and "__clang__" not in macros:
            loops = [i + 1 for i, line in enumerate(text.splitlines()) if "[i] = tj_f(" in line]
            assert loops and set(loops) <= vectorised_lines(base), base


def _normal_cdf(x):
    return 0.5 * (1 + T.erf(x * np.float32(1 / np.sqrt(2))))


def _gelu(x):
    return x * _normal_cdf(x)


def _fused_sources(model) -> list[tuple[str, str]]:
    """Compiles ``model`` of a float32 matrix (one fused loop, NumPy's values) and returns
    the cached sources that define the vectorised erf."""
    x = T.matrix("x", dtype="float32")
    f = tensorjit.function([x], model(x))
    assert [k.name for k in f.kernels.values()] == ["c:elemwise"]  # one fused loop
    values = np.linspace(-5, 5, 600, dtype="float32").reshape(20, 30)
    want = values.astype(np.float64)
    want = 0.5 * (1 + scipy.special.erf(want / np.sqrt(2))) * (want if model is _gelu else 1)
    np.testing.assert_allclose(f(values), want, rtol=1e-6, atol=1e-7)
    entries = cached_sources("tj_erf_f(")
    assert entries
    return entries


@pytest.mark.parametrize("model", [_normal_cdf, _gelu])
def test_fused_graphs_with_erf_call_no_libm_erf(model):
    for base, text in _fused_sources(model):
        code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        assert not re.search(r"(?<!\w)erff?\(", code), base


@pytest.mark.parametrize("model", [_normal_cdf, _gelu])
def test_fused_graphs_with_erf_are_vectorised(model):
    macros = compiler_macros()
    if "__GNUC__" not in macros or "__clang__" in macros:
        pytest.skip("only gcc reports vectorised loops (-fopt-info-vec); the compiler is not gcc")
    for base, text in _fused_sources(model):
        vectorised = vectorised_lines(base)
        loops = [i + 1 for i, line in enumerate(text.splitlines()) if "[i] = tj_f(" in line]
        assert loops and set(loops) <= vectorised, (loops, sorted(vectorised))
