"""The C kernel of MaxExpSum (generators/max_exp_sum.py): a group's maximum and the sum
of the exponentials shifted by it, each group read from memory once. Checked against the
graph written out (its own host kernels: the same numbers, bit for bit), against float64
arithmetic, on groups whose exponentials take either form (normal results only, or
denormal ones, -inf, inf, NaN), every layout, one and two threads, inside row-blocked
programs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers.c_backend import C_ONLY, DEBUG_C, NEEDS_C, compiled_with

import tensorjit
import tensorjit.tensor as T
from tensorjit.tensor.max_exp_sum import MaxExpSum

pytestmark = NEEDS_C
ONE_PASS = "local_max_and_shifted_exp_sum"


def max_exp_sum_function(dtype: str, ndim: int = 2, axis: int = -1, mode=DEBUG_C):
    """f(x) -> (max, sum(exp(x - max))) along ``axis``."""
    x = T.tensor(dtype=dtype, shape=(None,) * ndim, name="x")
    outputs = list(MaxExpSum(axis % ndim)(x))
    return compiled_with("max_exp_sum", MaxExpSum, [x], outputs, mode=mode)


def written_out(dtype: str):
    """The same statistics as the graph written out, on the host's own reductions."""
    x = T.matrix("x", dtype=dtype)
    top = T.max(x, axis=1)
    total = T.sum(T.exp(x - T.max(x, axis=1, keepdims=True)), axis=1)
    with tensorjit.config.change_flags(excluded_rewrites=ONE_PASS):
        f = tensorjit.function([x], [top, total], mode=C_ONLY)
    assert not [n for n in f.kernels if isinstance(n.op, MaxExpSum)]
    return f


def groups(dtype: str) -> list[np.ndarray]:
    """Rows of every length class of the runs (lanes, their remainder, a tail) whose
    exponentials are normal numbers, and rows reaching denormal results and zeros."""
    g = np.random.default_rng(31)
    rows = [g.standard_normal(n) * 3 for n in (1, 7, 8, 9, 31, 32, 33, 40, 1000, 4099)]
    tiny = -700.0 if dtype == "float64" else -95.0  # e^tiny: a denormal number
    rows += [np.r_[g.standard_normal(50), tiny], np.r_[0.0, tiny - 60, tiny, tiny / 2]]
    return [r.astype(dtype) for r in rows]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_numbers_of_the_graph_written_out(dtype):
    """Each row in a matrix of three copies: the maximum and the sum equal the separate
    reductions' own, bit for bit (the same runs, and an exponential of the same value
    in either form), and float64 arithmetic within the summation's rounding."""
    f = max_exp_sum_function(dtype, mode=C_ONLY)
    g = written_out(dtype)
    for row in groups(dtype):
        value = np.repeat(row[None, :], 3, axis=0)
        top, total = f(value)
        want_top, want_total = g(value)
        np.testing.assert_array_equal(top, want_top)
        np.testing.assert_array_equal(total, want_total)
        assert top[0] == row.max()
        shifted = (row - row.max()).astype(np.float64)  # (exact for these rows)
        exact = np.sum(np.exp(shifted))
        n, eps = row.size, np.finfo(dtype).eps
        np.testing.assert_allclose(total, exact, rtol=4 * eps + (n + 8) * 2.0**-52)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inf_and_nan_as_the_graph_gives_them(dtype):
    """Every 3-element row of specials and extremes: the maximum (NumPy's, its first NaN)
    and the sum (NaN where a row has NaN, or +inf: inf - inf) as written out."""
    big = float(np.finfo(dtype).max)
    specials = [0.0, 1.0, -2.0, big, -big, -200.0, np.inf, -np.inf, np.nan]
    rows = np.array(list(itertools.product(specials, repeat=3)), dtype=dtype)
    f, g = max_exp_sum_function(dtype, mode=C_ONLY), written_out(dtype)
    with np.errstate(all="ignore"):
        for got, want in zip(f(rows), g(rows), strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_layout_and_axis_against_op_perform(dtype):
    """DebugMode compares each call with Op.perform within the op's rounding bounds;
    strided groups (a transposed matrix's rows) are copied in chunks first."""
    value = (np.random.default_rng(32).standard_normal((5, 30, 700)) * 4).astype(dtype)
    for axis in (2, 1, 0):
        f = max_exp_sum_function(dtype, ndim=3, axis=axis)
        for layout in (value, value[::2, ::-1, ::3], value.transpose(2, 0, 1), value.T.copy().T):
            top, total = f(layout)
            np.testing.assert_array_equal(top, layout.max(axis=axis))
            ref = np.exp(layout.astype(np.float64) - np.expand_dims(top, axis)).sum(axis=axis)
            n = layout.shape[axis]
            np.testing.assert_allclose(total, ref, rtol=8 * np.finfo(dtype).eps + n * 2.0**-52)


def test_transposed_rows_and_two_threads_give_the_values_of_one():
    """Rows of up to a chunk: a strided row gives the contiguous row's numbers."""
    value = np.random.default_rng(33).standard_normal((300, 256)).astype(np.float32)
    results = []
    for threads in (1, 2):
        with tensorjit.config.change_flags(threads=threads):
            f = max_exp_sum_function("float32", mode=C_ONLY)
        results.append(f(np.ascontiguousarray(value.T).T))
        results.append(f(value))
    for outputs in results[1:]:
        for got, want in zip(outputs, results[0], strict=True):
            np.testing.assert_array_equal(got, want)


def test_empty_groups_raise_numpys_error_and_no_groups_give_empty_outputs():
    f = max_exp_sum_function("float64", mode=C_ONLY)
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        f(np.zeros((4, 0)))
    top, total = f(np.zeros((0, 5)))
    assert top.shape == total.shape == (0,)
    with pytest.raises(ValueError, match="x.*over axis 1, of static length 0"):
        MaxExpSum(1)(T.tensor(dtype="float64", shape=(3, 0), name="x"))


@pytest.mark.parametrize("threads", [1, 2])
def test_a_log_softmax_written_out_reads_its_rows_once_in_row_blocks(threads):
    """The program runs MaxExpSum inside a row-blocked group (its second output moves by
    rows like its first): the values equal those of every step over all rows."""
    from tensorjit.plugins.c_backend.whole_graph.program import _interpreter

    x = T.matrix("x", dtype="float32")
    top = T.max(x, axis=1, keepdims=True)
    y = x - top - T.log(T.sum(T.exp(x - top), axis=1, keepdims=True))
    functions = []
    for block in (4096, 0):
        with tensorjit.config.change_flags(row_block_bytes=block, threads=threads):
            functions.append(tensorjit.function([x], y, mode=C_ONLY))
    blocked, whole = functions
    assert [n for n in blocked.kernels if isinstance(n.op, MaxExpSum)]
    value = (np.random.default_rng(34).standard_normal((200, 64)) * 3).astype(np.float32)
    before = _interpreter().row_block_info()[0]
    got = blocked(value)
    assert _interpreter().row_block_info()[0] > before
    np.testing.assert_array_equal(got, whole(value))
    ref = value.astype(np.float64) - value.max(1, keepdims=True)
    ref -= np.log(np.exp(ref).sum(1, keepdims=True))
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


def test_bad_inputs_name_the_variable():
    with pytest.raises(TypeError, match="expected float32 or float64 x.*counts.*int32"):
        MaxExpSum(1)(T.matrix("counts", dtype="int32"))
    with pytest.raises(ValueError, match="axis 2 out of range.*'m'"):
        MaxExpSum(2)(T.matrix("m"))
    with pytest.raises(TypeError, match="expected an integer axis, got 1.7"):
        MaxExpSum(1.7)
