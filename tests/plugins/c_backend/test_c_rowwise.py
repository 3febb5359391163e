"""C kernels along one axis (softmax, log_softmax, argmax/argmin, class selection) against
Op.perform under DebugMode, on contiguous, transposed, strided, reversed, empty inputs."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers.c_backend import C_ONLY, NEEDS_C, compiled_with
from helpers.layouts import matrix_layouts

import tensorjit
import tensorjit.tensor as T
from tensorjit.plugins.c_backend.generators import rowwise
from tensorjit.tensor import nnet

pytestmark = [NEEDS_C, pytest.mark.usefixtures("module_compile_cache")]

RNG = np.random.default_rng(1)


compiled = functools.partial(compiled_with, "rowwise", rowwise.OPS)


def layouts(shape, dtype):
    base = RNG.standard_normal((2 * shape[0] + 1, 2 * shape[1] + 1)).astype(dtype) * 4
    return matrix_layouts(base, shape)


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("layout", ["contiguous", "fortran", "strided", "reversed"])
def test_softmax_and_log_softmax(dtype, axis, layout):
    x = T.matrix("x", dtype=dtype)
    f = compiled([x], [nnet.softmax(x, axis=axis), nnet.log_softmax(x, axis=axis)])
    value = layouts((5, 7), dtype)[layout]
    sm, lsm = f(value)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(sm, np_softmax(value.astype("float64"), axis), rtol=tol, atol=tol)
    np.testing.assert_allclose(np.exp(lsm), sm, rtol=10 * tol, atol=tol)
    assert sm.dtype == lsm.dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("layout", ["contiguous", "fortran", "strided", "reversed"])
@pytest.mark.parametrize("shape", [(19, 10), (8, 32), (3, 10), (3, 33), (2, 150)])
def test_softmax_blocks_of_short_rows_and_chunks_of_long_rows(dtype, layout, shape):
    """Rows up to SHORT_ROW long run BLOCK_ROWS at a time (19 rows: two blocks and a
    partial one) when there are at least half a block of them (3 rows run alone); longer
    rows run alone, their exponentials in chunks of ROW_CHUNK."""
    x = T.matrix("x", dtype=dtype)
    f = compiled([x], [nnet.softmax(x), nnet.log_softmax(x)])
    value = layouts(shape, dtype)[layout]
    value[-1, 1] = np.nan  # the last row (a partial block's) is NaN, the others are not
    value[0, 0] = np.nan  # (a NaN first element keeps the max NaN; the sums carry NaN)
    sm, lsm = f(value)
    want = np_softmax(value.astype("float64"), 1)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(sm, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(np.exp(lsm), sm, rtol=10 * tol, atol=tol)
    for row in (0, -1):
        assert np.isnan(sm[row]).all() and np.isnan(lsm[row]).all()
    assert np.isfinite(sm[1:-1]).all() and np.isfinite(lsm[1:-1]).all()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n", [128, 129, 1000])
def test_softmax_of_long_contiguous_rows_in_one_loop(dtype, n):
    """Rows of stride 1 and at least UNIT_MIN_ROW elements: exponentials, stores and sum
    in one vector loop (tj_vexp_normal when the row's minimum allows it, else tj_vexp),
    a tail shorter than a vector padded; the same values as the strided rows' chunks
    within the sums' rounding, NaN, inf, zero and denormal results as NumPy gives them."""
    x = T.matrix("x", dtype=dtype)
    f = compiled([x], [nnet.softmax(x), nnet.log_softmax(x)])
    # (the kernel has the one-loop body, taken for rows of stride 1 from this length)
    node = [v for v in f.fgraph.toposort() if isinstance(v.op, nnet.Softmax)][0]
    assert f"if (n >= {rowwise.UNIT_MIN_ROW})" in rowwise.source_of(node)[0]
    assert n >= rowwise.UNIT_MIN_ROW
    tiny = np.finfo(dtype).smallest_subnormal
    denormal = -95.0 if dtype == "float32" else -720.0  # e^(x - max): a denormal number
    value = (RNG.standard_normal((7, n)) * 3).astype(dtype)
    value[1, 5] = -800.0  # e^(x - max) rounds to 0: the general exponential
    value[6, 9] = value[6].max() + denormal
    value[2, 0] = np.nan  # (a first NaN keeps the max NaN; the sums carry NaN anyway)
    value[3, 7] = np.inf  # inf - inf: NaN, as NumPy
    value[4, :] = -np.inf  # -inf - -inf: NaN, as NumPy
    value[5, : n // 2] = -60.0  # wide rows of normal results
    with np.errstate(all="ignore"):  # (NumPy's and DebugMode's perform: inf - inf)
        want = np_softmax(value.astype("float64"), 1)
        sm, lsm = f(value)
        strided_sm, strided_lsm = f(np.asfortranarray(value))  # (the chunks)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for got in (sm, strided_sm):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(np.exp(lsm), sm, rtol=10 * tol, atol=tol)
    np.testing.assert_allclose(lsm, strided_lsm, rtol=tol, atol=tol)
    assert np.isnan(sm[2:5]).all() and np.isfinite(sm[[0, 1, 5, 6]]).all()
    assert sm[1, 5] == want[1, 5] == 0.0
    # a denormal result within a few of its spacings (tiny) of the exact one
    assert 0 < sm[6, 9] and abs(float(sm[6, 9]) - want[6, 9]) <= 4 * tiny + 1e-3 * want[6, 9]


def test_softmax_extremes_and_3d():
    x = T.tensor3("x")
    f = compiled([x], [nnet.softmax(x, axis=1), nnet.log_softmax(x, axis=1)])
    value = RNG.standard_normal((3, 4, 5))
    value[0, :, 0] = [1000.0, -1000.0, 0.0, 1000.0]  # no overflow, ties
    value[1, :, 1] = [-np.inf, 0.0, 0.0, -np.inf]
    value[2, 2, 2] = np.nan  # NaN spreads to its row, as in NumPy
    sm, lsm = f(value)
    assert np.isnan(sm[2, :, 2]).all() and np.isfinite(sm[0]).all()
    np.testing.assert_allclose(sm[0, :, 0], [0.5, 0, 0, 0.5])
    np.testing.assert_allclose(sm[1, :, 1], [0, 0.5, 0.5, 0])
    assert lsm[1, 0, 1] == -np.inf


def test_softmax_of_single_element_rows_and_empty_input():
    x = T.matrix("x")
    f = compiled([x], nnet.softmax(x))
    np.testing.assert_array_equal(f(np.full((3, 1), 7.0)), np.ones((3, 1)))
    assert f(np.zeros((0, 4))).shape == (0, 4)


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32"])
def test_argmax_argmin_each_axis(kind, dtype):
    x = T.matrix("x", dtype=dtype)
    fn = getattr(T, kind)
    f = compiled([x], [fn(x, axis=0), fn(x, axis=1)])
    for layout, value in layouts((6, 4), "float64").items():
        value = np.round(value).astype(dtype)  # ties: the first one wins
        a0, a1 = f(value)
        npfn = getattr(np, kind)
        np.testing.assert_array_equal(a0, npfn(value, axis=0), err_msg=layout)
        np.testing.assert_array_equal(a1, npfn(value, axis=1), err_msg=layout)
        assert a0.dtype == np.int64


def test_argmax_of_vector_and_nan_rows():
    v = T.vector("v")
    f = compiled([v], [T.argmax(v), T.argmin(v)])
    value = np.array([1.0, 3.0, np.nan, 3.0, np.nan])
    assert [int(r) for r in f(value)] == [2, 2]
    assert [int(r) for r in f(np.array([2.0, -1.0, 5.0]))] == [2, 1]
    with pytest.raises(ValueError):
        f(np.zeros(0))  # NumPy's error for an empty argmax


def test_cross_entropy_selection_and_its_gradient():
    x, y = T.matrix("x"), T.lvector("y")
    cost = nnet.categorical_crossentropy(nnet.softmax(x), y).mean()
    f = compiled([x, y], [cost, tensorjit.grad(cost, x)])
    for layout, value in layouts((6, 5), "float64").items():
        labels = RNG.integers(0, 5, 6)
        c, g = f(value, labels)
        p = np_softmax(value, 1)
        np.testing.assert_allclose(c, -np.log(p[np.arange(6), labels]).mean(), err_msg=layout)
        expected = (p - np.eye(5)[labels]) / 6
        np.testing.assert_allclose(g, expected, atol=1e-12, err_msg=layout)


def test_class_index_out_of_range_is_a_clear_error():
    x, y = T.matrix("x"), T.lvector("y")
    f = tensorjit.function([x, y], nnet.categorical_crossentropy(nnet.softmax(x), y), mode=C_ONLY)
    assert any(isinstance(n.op, rowwise.OPS) for n in f.kernels)
    with pytest.raises(IndexError, match="class index 9 is out of range for 5 classes"):
        f(np.zeros((2, 5)), np.array([0, 9]))
