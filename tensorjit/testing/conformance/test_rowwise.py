"""Softmax and LogSoftmax on the tested device: along any axes, on strided, negatively
strided, 0-row and empty inputs, float32, float64 and integers, numerically stable; and
the softmax / cross-entropy training graph runs its rows, reductions and argmax on the
device. DebugMode checks every kernel against Op.perform."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.tensor import nnet
from tensorjit.tensor.math import Argmax, Reduce
from tensorjit.tensor.nnet.basic import LogSoftmax, Softmax
from tensorjit.tensor.type import TensorType
from tensorjit.testing.device_under_test import (
    DEVICE,
    NEEDS_DEVICE,
    on_device,
    runs_on_device,
    strided_views,
)

pytestmark = NEEDS_DEVICE
rng = np.random.default_rng(0)
ROW_OPS = (Softmax, LogSoftmax)


def device_tensor(ndim, dtype="float64", name="x"):
    return TensorType(dtype, (None,) * ndim, device=DEVICE)(name)


def np_log_softmax(x, axis):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def np_softmax(x, axis):
    return np.exp(np_log_softmax(x, axis))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("axis", [-1, 0, 1, (0, 2), (1, 2), None], ids=str)
def test_softmax_and_log_softmax_along_any_axes_and_layouts(axis, dtype):
    x = device_tensor(3, dtype)
    f = on_device([x], [nnet.softmax(x, axis=axis), nnet.log_softmax(x, axis=axis)])
    runs_on_device(f, ROW_OPS, "softmax")
    value = (rng.standard_normal((3, 4, 5)) * 4).astype(dtype)
    np_axis = tuple(range(3)) if axis is None else axis
    tol = 1e-12 if dtype == "float64" else 2e-6
    for arg in strided_views(value).values():
        sm, lsm = f(arg)
        assert sm.dtype == lsm.dtype == np.dtype(dtype)
        np.testing.assert_allclose(sm, np_softmax(value, np_axis), rtol=tol, atol=tol)
        np.testing.assert_allclose(lsm, np_log_softmax(value, np_axis), rtol=tol, atol=tol)


def test_long_rows_of_a_matrix():
    x = device_tensor(2, "float32")
    f = on_device([x], [nnet.softmax(x), nnet.log_softmax(x, axis=0)])
    value = rng.standard_normal((7, 5000)).astype("float32")
    sm, lsm = f(value)
    np.testing.assert_allclose(sm, np_softmax(value.astype("float64"), 1), rtol=1e-5)
    np.testing.assert_allclose(
        lsm, np_log_softmax(value.astype("float64"), 0), rtol=1e-5, atol=1e-5
    )


def test_large_inputs_are_stable_and_nan_rows_stay_nan():
    x = device_tensor(2)
    f = on_device([x], [nnet.softmax(x), nnet.log_softmax(x)])
    value = np.array([[1000.0, 999.0, -1000.0], [1.0, np.nan, 2.0], [-5.0, -5.0, -5.0]])
    sm, lsm = f(value)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(sm, np_softmax(value, 1), rtol=1e-12)
        np.testing.assert_allclose(lsm, np_log_softmax(value, 1), rtol=1e-12)
    assert np.isfinite(sm[0]).all() and np.isnan(sm[1]).all()


def test_integer_inputs_give_float64():
    x = device_tensor(2, "int32")
    f = on_device([x], [nnet.softmax(x), nnet.log_softmax(x, axis=0)])
    runs_on_device(f, ROW_OPS, "softmax")
    value = rng.integers(-3, 3, (4, 6)).astype("int32")
    sm, lsm = f(value)
    assert sm.dtype == lsm.dtype == np.float64
    np.testing.assert_allclose(sm, np_softmax(value.astype(float), 1), rtol=1e-12)
    np.testing.assert_allclose(lsm, np_log_softmax(value.astype(float), 0), rtol=1e-12)


@pytest.mark.parametrize("shape", [(0, 5), (3, 0), (1, 1), (5,)], ids=str)
def test_empty_and_single_element_rows(shape):
    x = device_tensor(len(shape))
    f = on_device([x], [nnet.softmax(x), nnet.log_softmax(x)])
    value = rng.standard_normal(shape)
    sm, lsm = f(value)
    assert sm.shape == lsm.shape == shape
    if not value.size:
        return  # (NumPy's reference has no max of an empty row)
    np.testing.assert_allclose(sm, np_softmax(value, -1), rtol=1e-12)
    np.testing.assert_allclose(lsm, np_log_softmax(value, -1), rtol=1e-12, atol=1e-15)


def test_cross_entropy_training_graph_runs_rows_and_reductions_on_the_device():
    x, y = T.matrix("x"), T.lvector("y")
    w = tensorjit.shared(rng.standard_normal((5, 3)), name="w")
    b = tensorjit.shared(np.zeros(3), name="b")
    p = nnet.softmax(T.dot(x, w) + b)
    cost = nnet.categorical_crossentropy(p, y).mean()
    gw, gb = tensorjit.grad(cost, [w, b])
    train = on_device([x, y], [cost, gw, gb])
    runs_on_device(train, ROW_OPS, "softmax")
    runs_on_device(train, Reduce, "reduce")
    predict = on_device([x], T.argmax(p, axis=1))
    runs_on_device(predict, Softmax, "softmax")
    runs_on_device(predict, Argmax, "argmax")

    a, labels = rng.standard_normal((8, 5)), rng.integers(0, 3, 8)
    w0 = w.get_value()
    probs = np_softmax(a @ w0, 1)
    want_cost = -np.log(probs[np.arange(8), labels]).mean()
    delta = (probs - np.eye(3)[labels]) / 8
    c, g_w, g_b = train(a, labels)
    np.testing.assert_allclose(c, want_cost, rtol=1e-12)
    np.testing.assert_allclose(g_w, a.T @ delta, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(g_b, delta.sum(axis=0), rtol=1e-10, atol=1e-14)
    np.testing.assert_array_equal(predict(a), probs.argmax(axis=1))


def test_softmax_of_many_rows_matches_numpy_with_strided_output_rows():
    x = device_tensor(2)
    f = on_device([x], nnet.softmax(x.T, axis=1))  # rows along the input's columns
    value = rng.standard_normal((6, 300))
    np.testing.assert_allclose(f(value), np_softmax(value.T, 1), rtol=1e-12)
