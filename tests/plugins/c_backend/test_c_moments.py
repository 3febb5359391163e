"""The C kernel of Moments (generators/moments.py): a group's sum and the sum of squared
deviations from the mean it gives, x read once, checked against exact rational
arithmetic; groups read again (amplified, overflowing, inf, NaN), empty and one-element
groups, every layout (a transposed matrix's rows side by side), both dtypes, one and two
threads, inside row-blocked programs."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from helpers.c_backend import C_ONLY, DEBUG_C, NEEDS_C, compiled_with

import tensorjit
import tensorjit.tensor as T
from tensorjit.tensor.moments import Moments, max_amplification

pytestmark = NEEDS_C
ONE_PASS = "local_sum_and_squared_deviations"


def exact_squares(row: np.ndarray, mean: float) -> Fraction:
    """sum((row - mean) ** 2) of finite floats, exactly."""
    m = Fraction(float(mean))
    return sum(((Fraction(float(v)) - m) ** 2 for v in row), Fraction(0))


def moments_function(dtype: str, ndim: int = 2, axis: int = -1, mode=DEBUG_C):
    """f(x) -> (total, squares) about x's mean along ``axis``."""
    x = T.tensor(dtype=dtype, shape=(None,) * ndim, name="x")
    n = T.cast(x.shape[axis % ndim], dtype).dimshuffle(*["x"] * ndim)
    outputs = list(Moments(axis % ndim)(x, n))
    return compiled_with("moments", Moments, [x], outputs, mode=mode)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("side_by_side", [False, True], ids=["rows", "columns"])
def test_totals_means_and_squares_are_exact_arithmetic_rounded(dtype, side_by_side):
    """Each group three times: rows (a vector loop along each), or columns (a vector
    loop across them, and a second one for the groups read again)."""
    rows = moments_function(dtype, mode=C_ONLY)
    columns = moments_function(dtype, axis=0, mode=C_ONLY)

    def f(value):
        return columns(np.ascontiguousarray(value.T)) if side_by_side else rows(value)

    groups = [
        np.random.default_rng(21).standard_normal(1000),  # one pass
        1e4 + np.random.default_rng(22).standard_normal(300),  # amplified 1e8 times: again
        np.full(77, 3.25),  # no deviation at all
        np.r_[1e6, np.ones(40)],  # one outlier
        np.random.default_rng(23).standard_normal(5) * 1e-30,  # tiny values
        np.array([7.0]),
        np.array([1e15, 1e15 + 0.125, 1e15]),  # the mean's rounding matters
    ]
    eps, tiniest = np.finfo(dtype).eps, np.finfo(dtype).smallest_subnormal
    for group in groups:
        value = group.astype(dtype)[None, :].repeat(3, axis=0)
        n = value.shape[1]
        total, squares = f(value)
        # the float64 sum (within n float64 roundings of the magnitudes), rounded once
        exact_total = sum((Fraction(float(v)) for v in value[0]), Fraction(0))
        slack = Fraction(n * 2.0**-52) * sum(Fraction(abs(float(v))) for v in value[0])
        for got in total:
            assert abs(Fraction(float(got)) - exact_total) <= (
                abs(exact_total) * Fraction(float(eps)) + slack + Fraction(float(tiniest))
            )
        mean = np.true_divide(total[0], value.dtype.type(n), dtype=dtype)
        want = exact_squares(value[0], mean)
        # within n float64 roundings of the one pass's terms (at most the amplification
        # kept times the squares), then rounded once into the dtype
        kept = (n + 8) * 2.0**-53 * (max_amplification(dtype, n) + 4)
        for got in squares:
            assert abs(Fraction(float(got)) - want) <= (
                want * Fraction(float(eps) + kept) + Fraction(float(tiniest))
            )
        assert squares[0] == squares[1] == squares[2]


def test_amplification_limits_follow_the_input_precision():
    assert max_amplification("float64", 10**6) == 8.0
    assert max_amplification("float32", 1024) == 2.0**17
    assert max_amplification("float32", 2**27) == 8.0  # never below the float64 limit


def test_squares_of_finite_deviations_whose_sum_of_x2_overflows_stay_finite():
    f = moments_function("float64", mode=C_ONLY)
    big = np.sqrt(1.5) * np.sqrt(np.finfo(np.float64).max)
    total, squares = f(np.array([[big, 0.0]]))
    assert np.isfinite(squares[0])
    np.testing.assert_allclose(squares, [big * (big / 2)], rtol=1e-15)


def assert_like_two_passes(got: list, want: list, values: np.ndarray, axis: int) -> None:
    """The same inf and NaN; finite sums within the rounding that summing in another
    order allows (a row of 1, 1e308, -1e308 sums to 0 or to 3, exactly 1), finite
    variances within a few roundings."""
    (sums, variances), (want_sums, want_variances) = got, want
    for a, b in ((sums, want_sums), (variances, want_variances)):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        np.testing.assert_array_equal(np.where(np.isinf(a), a, 0), np.where(np.isinf(b), b, 0))
    with np.errstate(all="ignore"):
        slack = 8 * np.finfo(np.float64).eps * np.sum(np.abs(values), axis=axis)
        finite = np.isfinite(sums) & np.isfinite(want_sums)
        assert np.all(np.abs(sums - want_sums)[finite] <= slack[finite])
        finite = np.isfinite(variances) & np.isfinite(want_variances)
        finite &= np.isfinite(slack) & (slack < 1e200)  # (no cancelled huge terms)
        np.testing.assert_allclose(variances[finite], want_variances[finite], rtol=1e-14)


def test_inf_and_nan_as_the_two_passes_give_them():
    """Every 3-element row, and column, of specials and extremes: the values of the graph
    written out (sum, then the squared deviations from its mean), NaN where it gives
    NaN, inf where it gives inf."""
    x = T.matrix("x")
    specials = [0.0, 1.0, -2.0, 1e308, -1e308, 1e200, np.inf, -np.inf, np.nan]
    rows = np.array(list(itertools.product(specials, repeat=3)))
    for axis, values in ((1, rows), (0, np.ascontiguousarray(rows.T))):
        outputs = [T.sum(x, axis=axis), T.var(x, axis=axis)]
        one = tensorjit.function([x], outputs, mode=C_ONLY)
        with tensorjit.config.change_flags(excluded_rewrites=ONE_PASS):
            two = tensorjit.function([x], outputs, mode=C_ONLY)
        assert [n for n in one.kernels if isinstance(n.op, Moments)]
        with np.errstate(all="ignore"):
            assert_like_two_passes(one(values), two(values), values, axis)


def test_empty_and_single_element_groups():
    f = moments_function("float64", mode=C_ONLY)
    total, squares = f(np.zeros((4, 0)))
    np.testing.assert_array_equal(total, np.zeros(4))
    np.testing.assert_array_equal(squares, np.zeros(4))
    total, squares = f(np.zeros((0, 5)))
    assert total.shape == squares.shape == (0,)
    total, squares = f(np.array([[2.5], [-1.0]]))
    np.testing.assert_array_equal(total, [2.5, -1.0])
    np.testing.assert_array_equal(squares, [0.0, 0.0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_layout_and_axis_against_op_perform(dtype):
    """DebugMode compares each call with Op.perform within the op's rounding bounds;
    a transposed layout runs the groups side by side (columns)."""
    value = (np.random.default_rng(24).standard_normal((6, 40, 300)) * 3 + 1).astype(dtype)
    for axis in (2, 1, 0):
        f = moments_function(dtype, ndim=3, axis=axis)
        for layout in (value, value[::2, ::-1, ::3], value.transpose(2, 0, 1), value.T.copy().T):
            total, squares = f(layout)
            ref = layout.astype(np.float64)
            n = ref.shape[axis]
            # a rounding into the dtype, after float64 sums of n terms amplified at most
            # as much as the kernel keeps
            kept = max_amplification(dtype, n) + 4
            tol = 4 * np.finfo(dtype).eps + (n + 4) * np.finfo(np.float64).eps * kept
            np.testing.assert_allclose(total, ref.sum(axis=axis), rtol=tol, atol=tol)
            np.testing.assert_allclose(squares, ref.var(axis=axis) * n, rtol=tol)


def test_transposed_rows_and_two_threads_give_the_values_of_one():
    value = np.random.default_rng(25).standard_normal((300, 4096)).astype(np.float32)
    results = []
    for threads in (1, 2):
        with tensorjit.config.change_flags(threads=threads):
            f = moments_function("float32", mode=C_ONLY)
        results.append(f(value.T))
        results.append(f(np.ascontiguousarray(value.T)))
    for outputs in results[1:]:
        for got, want in zip(outputs, results[0], strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_layer_norm_reads_its_rows_once_in_row_blocks(threads):
    """The program runs Moments inside a row-blocked group (its second output moves by
    rows like its first): the values equal those of every step over all rows. (The
    map would become a MomentsMap: kept apart here, as a graph reading the statistics
    elsewhere keeps it.)"""
    from tensorjit.plugins.c_backend.whole_graph.program import _interpreter

    x = T.matrix("x", dtype="float32")
    mean = T.mean(x, axis=1, keepdims=True)
    d = x - mean
    y = d / T.sqrt(T.mean(d * d, axis=1, keepdims=True) + 1e-5)
    functions = []
    for block in (4096, 0):
        flags = {"row_block_bytes": block, "threads": threads}
        with tensorjit.config.change_flags(excluded_rewrites="local_moments_map", **flags):
            functions.append(tensorjit.function([x], y, mode=C_ONLY))
    blocked, whole = functions
    assert [n for n in blocked.kernels if isinstance(n.op, Moments)]
    value = (np.random.default_rng(26).standard_normal((200, 64)) * 2 + 5).astype(np.float32)
    before = _interpreter().row_block_info()[0]
    got = blocked(value)
    assert _interpreter().row_block_info()[0] > before
    np.testing.assert_array_equal(got, whole(value))
    ref = value.astype(np.float64)
    ref = (ref - ref.mean(1, keepdims=True)) / np.sqrt(ref.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_static_length_mean_is_a_product_by_its_reciprocal(dtype):
    """With a static length the graph's mean is ``total * (1/n)``: Moments computes it
    the same way (mean_by="mul"), so its values are those of the two passes within
    their rounding (DebugMode checks the bound on each call)."""
    x = T.tensor(dtype=dtype, shape=(None, 48), name="x")
    outputs = [T.var(x, axis=1), T.mean(x, axis=1)]
    f = compiled_with("moments", Moments, [x], outputs)
    (node,) = [n for n in f.kernels if isinstance(n.op, Moments)]
    assert node.op.mean_by == "mul"
    with tensorjit.config.change_flags(excluded_rewrites=ONE_PASS):
        two = tensorjit.function([x], outputs, mode=C_ONLY)
    value = (np.random.default_rng(27).standard_normal((40, 48)) * 2 + 1).astype(dtype)
    got, want = f(value), two(value)
    rtol = 1e-6 if dtype == "float32" else 1e-14  # (float64 totals are summed otherwise)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=rtol)
    np.testing.assert_allclose(got[0], value.astype(np.float64).var(axis=1), rtol=rtol * 4)


def test_bad_inputs_name_the_variable():
    m = T.matrix("m")
    with pytest.raises(TypeError, match="expected float32 or float64 x.*counts.*int32"):
        Moments(1)(T.matrix("counts", dtype="int32"), T.constant(np.ones((1, 1), "int32")))
    with pytest.raises(ValueError, match="axis 2 out of range.*'m'"):
        Moments(2)(m, T.constant(np.ones((1, 1))))
    with pytest.raises(TypeError, match="divisor must broadcast over every axis"):
        Moments(1)(m, T.col("n"))
    with pytest.raises(TypeError, match="expected a float64 divisor"):
        Moments(1)(m, T.constant(np.ones((1, 1), "float32")))
    with pytest.raises(ValueError, match="mean_by must be one of"):
        Moments(1, "sub")
