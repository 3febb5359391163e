"""The C kernel of Moments (generators/moments.py): a group's sum and sum of squared
deviations from its mean, x read once, checked against exact rational arithmetic; the
groups read again about their mean (amplified, inf, NaN), empty and one-element groups,
every layout, both dtypes, one and two threads, inside row-blocked programs."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from helpers.c_backend import C_ONLY, DEBUG_C, NEEDS_C, compiled_with

import tensorjit
import tensorjit.tensor as T
from tensorjit.tensor.moments import Moments, max_amplification

pytestmark = NEEDS_C
RNG = np.random.default_rng(23)


def exact(row: np.ndarray) -> tuple[Fraction, Fraction]:
    """The sum and m2 of a row of finite floats, exactly."""
    values = [Fraction(float(v)) for v in row]
    total = sum(values, Fraction(0))
    mean = total / len(values)
    return total, sum(((v - mean) ** 2 for v in values), Fraction(0))


def moments_function(dtype: str, ndim: int = 2, axis: int = -1, mode=DEBUG_C):
    x = T.tensor(dtype=dtype, shape=(None,) * ndim, name="x")
    return compiled_with("moments", Moments, [x], list(Moments(axis % ndim)(x)), mode=mode)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sums_and_squared_deviations_are_those_of_exact_arithmetic_rounded(dtype):
    f = moments_function(dtype, mode=C_ONLY)
    rows = [
        RNG.standard_normal(1000),  # one pass
        1e4 + RNG.standard_normal(300),  # amplified 1e8 times: read again about its mean
        np.full(77, 3.25),  # no deviation at all
        np.r_[1e6, np.ones(40)],  # one outlier
        RNG.standard_normal(5) * 1e-30,  # tiny values
        np.array([7.0]),
    ]
    for row in rows:
        value = row.astype(dtype)[None, :].repeat(3, axis=0)
        total, m2 = f(value)
        want_total, want_m2 = exact(value[0])
        n = value.shape[1]
        for got in total:
            assert abs(Fraction(float(got)) - want_total) <= abs(want_total) * 1e-15 + 1e-300
        # the bound of the module's docstring: a few times n float64 roundings, relative
        for got in m2:
            assert abs(Fraction(float(got)) - want_m2) <= want_m2 * (n + 8) * 2.0**-52
        assert m2[0] == m2[1] == m2[2]


def test_amplification_limits_follow_the_input_precision():
    assert max_amplification("float64", 10**6) == 8.0
    assert max_amplification("float32", 1024) == 2.0**20
    assert max_amplification("float32", 2**30) == 8.0  # never below the float64 limit


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inf_and_nan_give_numpys_sum_and_nan_deviations(dtype):
    f = moments_function(dtype, mode=C_ONLY)
    inf, nan = np.inf, np.nan
    value = np.array(
        [[1.0, inf, 2.0, 3.0], [1.0, -inf, inf, 0.0], [nan, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0]],
        dtype,
    )
    total, m2 = f(value)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(total, value.astype(np.float64).sum(axis=1))
    np.testing.assert_array_equal(m2[:3], [nan, nan, nan])
    assert m2[3] == 5.0


def test_empty_and_single_element_groups():
    f = moments_function("float64", mode=C_ONLY)
    total, m2 = f(np.zeros((4, 0)))
    np.testing.assert_array_equal(total, np.zeros(4))
    np.testing.assert_array_equal(m2, np.zeros(4))
    total, m2 = f(np.zeros((0, 5)))
    assert total.shape == m2.shape == (0,)
    total, m2 = f(np.array([[2.5], [-1.0]]))
    np.testing.assert_array_equal(total, [2.5, -1.0])
    np.testing.assert_array_equal(m2, [0.0, 0.0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_layout_and_axis_against_op_perform(dtype):
    """DebugMode compares each call with Op.perform within the op's rounding bounds."""
    value = (RNG.standard_normal((6, 40, 33)) * 3 + 1).astype(dtype)
    for axis in (2, 1, 0):
        f = moments_function(dtype, ndim=3, axis=axis)
        for layout in (value, value[::2, ::-1, ::3], value.transpose(2, 0, 1), value.T.copy().T):
            total, m2 = f(layout)
            ref = layout.astype(np.float64)
            np.testing.assert_allclose(total, ref.sum(axis=axis), rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(m2, ref.var(axis=axis) * ref.shape[axis], rtol=1e-10)


def test_two_threads_give_the_values_of_one():
    value = RNG.standard_normal((4096, 96)).astype(np.float32)
    results = []
    for threads in (1, 2):
        with tensorjit.config.change_flags(threads=threads):
            f = moments_function("float32", mode=C_ONLY)
        results.append(f(value))
    for one, two in zip(*results, strict=True):
        np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_layer_norm_reads_its_rows_once_in_row_blocks(threads):
    """The program runs Moments inside a row-blocked group (its second output moves by
    rows like its first): the values equal those of every step over all rows."""
    from tensorjit.plugins.c_backend.whole_graph.program import _interpreter

    x = T.matrix("x", dtype="float32")
    mean = T.mean(x, axis=1, keepdims=True)
    d = x - mean
    y = d / T.sqrt(T.mean(d * d, axis=1, keepdims=True) + 1e-5)
    functions = []
    for block in (4096, 0):
        with tensorjit.config.change_flags(row_block_bytes=block, threads=threads):
            functions.append(tensorjit.function([x], y, mode=C_ONLY))
    blocked, whole = functions
    assert [n for n in blocked.kernels if isinstance(n.op, Moments)]
    value = (RNG.standard_normal((200, 64)) * 2 + 5).astype(np.float32)
    before = _interpreter().row_block_info()[0]
    got = blocked(value)
    assert _interpreter().row_block_info()[0] > before
    np.testing.assert_array_equal(got, whole(value))
    ref = value.astype(np.float64)
    ref = (ref - ref.mean(1, keepdims=True)) / np.sqrt(ref.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_bad_input_types_name_the_variable():
    with pytest.raises(TypeError, match="expected float32 or float64.*int32"):
        Moments(1)(T.matrix("counts", dtype="int32"))
    with pytest.raises(ValueError, match="axis 2 out of range"):
        Moments(2)(T.matrix("m"))
