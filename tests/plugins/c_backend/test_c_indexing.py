"""C kernels for x[idx], take, inc_subtensor/set_subtensor on x[idx] (one integer vector
on the first axis) against Op.perform under DebugMode."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers.c_backend import NEEDS_C, compiled_with

import tensorjit
import tensorjit.tensor as T
from tensorjit.plugins.c_backend.generators import indexing

pytestmark = [NEEDS_C, pytest.mark.usefixtures("module_compile_cache")]

RNG = np.random.default_rng(3)


compiled = functools.partial(compiled_with, "indexing", indexing.OPS)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32"])
@pytest.mark.parametrize("idx_dtype", ["int64", "int32"])
def test_gather_rows(dtype, idx_dtype):
    x, idx = T.tensor3("x", dtype=dtype), T.vector("idx", dtype=idx_dtype)
    f = compiled([x, idx], [x[idx], T.take(x, idx, axis=0)])
    xv = (RNG.standard_normal((5, 3, 2)) * 10).astype(dtype)
    iv = np.array([4, 0, -1, 2, 2, -5], dtype=idx_dtype)
    for value in (xv, xv[::-1], np.asfortranarray(xv), xv[:, ::2]):
        got, taken = f(value, iv)
        np.testing.assert_array_equal(got, value[iv])
        np.testing.assert_array_equal(taken, value[iv])
    assert f(xv, np.zeros(0, idx_dtype))[0].shape == (0, 3, 2)


def test_gather_out_of_range_is_numpys_error():
    x, idx = T.matrix("x"), T.lvector("idx")
    f = compiled([x, idx], x[idx])
    with pytest.raises(IndexError):
        f(np.zeros((3, 2)), np.array([0, 3]))
    with pytest.raises(IndexError):
        f(np.zeros((3, 2)), np.array([-4]))


@pytest.mark.parametrize("set_", [False, True], ids=["inc", "set"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_scatter_rows_with_repeats(set_, dtype):
    x, y, idx = T.matrix("x", dtype=dtype), T.matrix("y", dtype=dtype), T.lvector("idx")
    fn = T.set_subtensor if set_ else T.inc_subtensor
    f = compiled([x, y, idx], fn(x[idx], y))
    xv = (RNG.standard_normal((6, 4)) * 10).astype(dtype)
    yv = (RNG.standard_normal((5, 4)) * 10).astype(dtype)
    iv = np.array([1, 3, 1, -1, 0])  # repeated: increments accumulate (numpy.add.at)
    expected = xv.copy()
    if set_:
        expected[iv] = yv
    else:
        np.add.at(expected, iv, yv)
    for value in (xv, np.asfortranarray(xv), xv[::-1][::-1]):
        before = value.copy()
        np.testing.assert_allclose(f(value, yv, iv), expected, rtol=1e-6)
        np.testing.assert_array_equal(value, before)  # the input is not modified


def test_scatter_broadcast_value_and_embedding_gradient():
    x, row, idx = T.matrix("x"), T.row("row"), T.lvector("idx")
    f = compiled([x, row, idx], T.inc_subtensor(x[idx], row))
    xv, rv = np.zeros((4, 3)), np.array([[1.0, 2.0, 3.0]])
    expected = xv.copy()
    np.add.at(expected, [2, 2, 0], np.broadcast_to(rv, (3, 3)))
    np.testing.assert_array_equal(f(xv, rv, np.array([2, 2, 0])), expected)
    # the gradient of an embedding lookup is a scatter-add of the output gradient
    emb = tensorjit.shared(RNG.standard_normal((10, 4)), name="emb")
    cost = (emb[idx] ** 2).sum()
    g = compiled([idx], tensorjit.grad(cost, emb))
    iv = np.array([1, 7, 1, 3])
    expected = np.zeros((10, 4))
    np.add.at(expected, iv, 2 * emb.get_value()[iv])
    np.testing.assert_allclose(g(iv), expected)


def test_scatter_errors_come_from_the_reference_kernel():
    x, y, idx = T.matrix("x"), T.matrix("y"), T.lvector("idx")
    f = compiled([x, y, idx], T.inc_subtensor(x[idx], y))
    with pytest.raises(IndexError):
        f(np.zeros((3, 2)), np.ones((1, 2)), np.array([5]))
    with pytest.raises(ValueError, match="does not match the indexed region"):
        f(np.zeros((3, 2)), np.ones((2, 2)), np.array([0]))
    with pytest.raises(ValueError, match="does not declare it broadcastable"):
        f(np.zeros((3, 2)), np.ones((1, 2)), np.array([0, 1]))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "bool"])
@pytest.mark.parametrize("offset", [0, 1, -2, 5, -7])
def test_diagonal_and_trace_of_any_layout(dtype, offset):
    x = T.matrix("x", dtype=dtype)
    f = compiled([x], [T.linalg.diagonal(x, offset), T.linalg.diagonal(x, offset, 1, 0)])
    base = RNG.standard_normal((9, 11)) * 10
    value = base.astype(dtype)[:4, :6]
    for layout in (value, value[::-1], np.asfortranarray(value), value[:, ::-2]):
        d01, d10 = f(layout)
        np.testing.assert_array_equal(d01, np.diagonal(layout, offset))
        np.testing.assert_array_equal(d10, np.diagonal(layout, offset, 1, 0))
        assert d01.dtype == np.dtype(dtype) and d01.flags.writeable
    t = compiled([x], T.linalg.trace(x)) if dtype == "float64" else None
    if t is not None:
        assert float(t(value)) == pytest.approx(np.trace(value))
