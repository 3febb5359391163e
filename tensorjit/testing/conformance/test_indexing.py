"""Indexed writes and integer-array indexing on the tested device: set/inc_subtensor of
basic indices (in place or not), the class selection of classification costs and its
gradient, row gathers and scatter-adds (repeated indices accumulating in NumPy's order)
and the ``[rows, cols]`` pair pattern; each checked against Op.perform by DebugMode and
against NumPy, with NumPy's IndexError for out-of-range indices."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.memory import In
from tensorjit.tensor import nnet
from tensorjit.tensor.elemwise import DimShuffle
from tensorjit.tensor.math import Alloc
from tensorjit.tensor.nnet.basic import SelectClass, SelectClassGrad
from tensorjit.tensor.subtensor import AdvancedIncSubtensor, AdvancedSubtensor, IncSubtensor
from tensorjit.testing.device_under_test import (
    FAST_DEVICE,
    NEEDS_DEVICE,
    covers,
    device_var,
    names_all,
    on_device,
    runs_on_device,
    strided_views,
    to_device,
)
from tensorjit.testing.device_under_test import (
    to_host as host,
)

pytestmark = NEEDS_DEVICE
rng = np.random.default_rng(0)
DTYPES = ["float64", "float32"]


def layouts_of(value):
    return sorted(strided_views(value).items())


def tolerance(dtype):
    return {"rtol": 1e-12, "atol": 1e-12} if dtype == "float64" else {"rtol": 1e-5, "atol": 1e-5}


# ---------------------------------------------------------------- IncSubtensor (basic)
INC_CASES = {
    "rows_scalar": (lambda x: x[1:3], (), lambda a: a[1:3]),
    "reversed_columns_row": (lambda x: x[:, ::-2], (1, 3), lambda a: a[:, ::-2]),
    "one_row": (lambda x: x[-1], (5,), lambda a: a[-1]),
    "one_element": (lambda x: x[2, 3], (), lambda a: a[2, 3, ...]),
    "empty": (lambda x: x[3:1], (0, 5), lambda a: a[3:1]),
}


@pytest.mark.parametrize("case", sorted(INC_CASES))
@pytest.mark.parametrize("set_value", [False, True], ids=["inc", "set"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_set_and_inc_subtensor_in_every_layout(case, set_value, dtype):
    index, y_shape, numeric = INC_CASES[case]
    x = device_var("x", (None, None), dtype)
    y = device_var("y", tuple(1 if n == 1 else None for n in y_shape), dtype)
    build = T.set_subtensor if set_value else T.inc_subtensor
    f = on_device([x, y], build(index(x), y))
    runs_on_device(f, IncSubtensor, "inc_subtensor")
    value = rng.standard_normal((4, 5)).astype(dtype)
    delta = rng.standard_normal(y_shape).astype(dtype)
    want = value.copy()
    if set_value:
        numeric(want)[...] = delta
    else:
        numeric(want)[...] += delta
    for layout, arg in layouts_of(value):
        np.testing.assert_allclose(
            f(arg, to_device(delta)), want, err_msg=layout, **tolerance(dtype)
        )
        np.testing.assert_array_equal(host(arg), value, err_msg=f"{layout}: input changed")


def test_inc_subtensor_with_symbolic_indices_and_integers():
    x, y = device_var("x", (None, None), "int32"), device_var("y", (None,), "int32")
    i, stop = T.lscalar("i"), T.lscalar("stop")
    f = on_device([x, y, i, stop], T.inc_subtensor(x[i, :stop], y))
    runs_on_device(f, IncSubtensor, "inc_subtensor")
    value = rng.integers(-50, 50, (3, 4)).astype("int32")
    for i_value, stop_value in [(0, 2), (-1, -1), (2, 4)]:
        delta = rng.integers(-5, 5, len(range(4)[:stop_value])).astype("int32")
        want = value.copy()
        want[i_value, :stop_value] += delta
        got = f(to_device(value), to_device(delta), i_value, stop_value)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0"):
        f(to_device(value), to_device(delta), 3, 4)


def test_inc_subtensor_in_place_writes_into_a_strided_mutable_input():
    x, y = device_var("x", (None, None)), device_var("y", (1, None))
    f = on_device([In(x, mutable=True), y], T.inc_subtensor(x[::2, 1:], y))
    (node,) = [n for n in f.kernels if isinstance(n.op, IncSubtensor)]
    assert node.op.inplace
    runs_on_device(f, IncSubtensor, "inc_subtensor")
    value, delta = rng.standard_normal((5, 4)), rng.standard_normal((1, 3))
    arg = strided_views(value)["negative"]
    want = value.copy()
    want[::2, 1:] += delta
    np.testing.assert_allclose(f(arg, to_device(delta)), want)
    if covers("inc_subtensor"):  # the backend's own kernel writes in place
        np.testing.assert_allclose(host(arg), want)  # written through its strides


def test_inc_subtensor_value_of_a_wrong_shape_is_a_clear_error():
    x, y = device_var("x", (None, None)), device_var("y", (None,))
    f = on_device([x, y], T.inc_subtensor(x[1:], y), mode=FAST_DEVICE)
    with pytest.raises(ValueError) as error:
        f(to_device(np.zeros((3, 4))), to_device(np.zeros(3)))
    assert names_all(error.value, "IncSubtensor", "(3,)", "(2, 4)"), error.value


# ---------------------------------------------------------------- SelectClass
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("y_dtype", ["int64", "int32"])
def test_select_class_and_its_gradient_in_every_layout(dtype, y_dtype):
    p = device_var("p", (None, None), dtype)
    y = device_var("y", (None,), y_dtype)
    picked = SelectClass()(p, y)
    f = on_device([p, y], [picked, tensorjit.grad((picked**2).sum(), p)])
    runs_on_device(f, SelectClass, "select_class")
    runs_on_device(f, SelectClassGrad, "select_class_grad")
    value = rng.standard_normal((6, 4)).astype(dtype)
    labels = np.array([0, 3, 3, 1, 2, 0], y_dtype)
    rows = np.arange(6)
    want_grad = np.zeros_like(value)
    want_grad[rows, labels] = 2 * value[rows, labels]
    for layout, arg in layouts_of(value):
        for y_layout, y_arg in layouts_of(labels):
            got, grad = f(arg, y_arg)
            assert got.dtype == dtype and grad.dtype == dtype
            np.testing.assert_array_equal(got, value[rows, labels], err_msg=layout + y_layout)
            np.testing.assert_allclose(grad, want_grad, err_msg=layout, **tolerance(dtype))


def test_select_class_over_more_leading_axes_and_empty_batches():
    x, y = device_var("x", (None, None, None)), device_var("y", (None, None), "int64")
    g = device_var("g", (None, None))
    f = on_device([x, y, g], [SelectClass()(x, y), SelectClassGrad()(x, g, y)])
    value = rng.standard_normal((2, 3, 4))
    labels = rng.integers(0, 4, (2, 3))
    grads = rng.standard_normal((2, 3))
    got, grad = f(to_device(value), strided_views(labels)["negative"], to_device(grads))
    np.testing.assert_array_equal(got, np.take_along_axis(value, labels[..., None], -1)[..., 0])
    want = np.zeros_like(value)
    np.put_along_axis(want, labels[..., None], grads[..., None], -1)
    np.testing.assert_array_equal(grad, want)
    empty = f(
        to_device(np.zeros((0, 3, 4))),
        to_device(np.zeros((0, 3), "int64")),
        to_device(np.zeros((0, 3))),
    )
    assert empty[0].shape == (0, 3) and empty[1].shape == (0, 3, 4)


@pytest.mark.parametrize("bad", [4, -1])
def test_select_class_out_of_range_is_an_index_error(bad):
    p, y = device_var("p", (None, None)), device_var("y", (None,), "int64")
    g = device_var("g", (None,))
    f = on_device([p, y], SelectClass()(p, y))
    fg = on_device([p, g, y], SelectClassGrad()(p, g, y))
    value, labels = to_device(np.ones((3, 4))), to_device(np.array([0, bad, 1]))
    with pytest.raises(IndexError, match=f"class index {bad} is out of range for 4 classes"):
        f(value, labels)
    with pytest.raises(IndexError, match=f"class index {bad} is out of range"):
        fg(value, to_device(np.ones(3)), labels)
    # the error flag is cleared: a good call afterwards succeeds
    np.testing.assert_array_equal(f(value, to_device(np.array([0, 3, 1]))), [1, 1, 1])


def test_select_class_shape_mismatch_is_a_clear_error():
    p, y = device_var("p", (None, None)), device_var("y", (None,), "int64")
    f = on_device([p, y], SelectClass()(p, y), mode=FAST_DEVICE)
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        f(to_device(np.ones((3, 4))), to_device(np.array([0, 1])))


def test_a_classifier_training_step_runs_its_views_and_selections_on_the_device():
    x, y = T.matrix("x"), T.lvector("y")
    w = tensorjit.shared(np.zeros((5, 3)), name="w")
    b = tensorjit.shared(np.zeros(3), name="b")
    p = nnet.softmax(T.dot(x, w) + b)
    cost = nnet.categorical_crossentropy(p, y).mean()
    gw, gb = tensorjit.grad(cost, [w, b])
    f = on_device([x, y], cost, updates=[(w, w - 0.1 * gw), (b, b - 0.1 * gb)])
    runs_on_device(f, DimShuffle, "dimshuffle")
    # The stable gradient of log(p) selects the mean's gradient (a vector of -1/n, an
    # alloc) straight into the scores' shape: no division by p. Everything on the device.
    runs_on_device(f, Alloc, "alloc")
    for node in f.fgraph.toposort():
        assert "true_div" not in str(node.op) or node.outputs[0].type.ndim == 0, node.op
    runs_on_device(f, SelectClass, "select_class")
    runs_on_device(f, SelectClassGrad, "select_class_grad")
    data, labels = rng.standard_normal((4, 5)), np.array([0, 2, 1, 2])
    np.testing.assert_allclose(f(data, labels), np.log(3))
    probs = np.full((4, 3), 1 / 3)
    probs[np.arange(4), labels] -= 1
    np.testing.assert_allclose(w.get_value(), -0.1 * data.T @ probs / 4)


# ---------------------------------------------------------------- advanced indexing
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape", [(5,), (5, 3), (5, 2, 3)])
def test_gather_rows_by_an_index_vector_in_every_layout(dtype, x_shape):
    x = device_var("x", (None,) * len(x_shape), dtype)
    idx = device_var("idx", (None,), "int64")
    f = on_device([x, idx], x[idx])
    runs_on_device(f, AdvancedSubtensor, "advanced_subtensor")
    value = rng.standard_normal(x_shape).astype(dtype)
    rows = np.array([4, 0, -1, 2, 2, -5])
    for layout, arg in layouts_of(value):
        for i_layout, i_arg in layouts_of(rows):
            np.testing.assert_array_equal(f(arg, i_arg), value[rows], err_msg=layout + i_layout)
    assert f(to_device(value), to_device(np.zeros(0, "int64"))).shape == (0, *x_shape[1:])


def test_gather_by_row_and_column_vectors_broadcasts_a_length_1_vector():
    x = device_var("x", (None, None))
    rows, cols = device_var("rows", (None,), "int32"), device_var("cols", (None,), "int64")
    f = on_device([x, rows, cols], x[rows, cols])
    runs_on_device(f, AdvancedSubtensor, "advanced_subtensor")
    value = rng.standard_normal((4, 3))
    for r, c in [([0, 1, 2, 3], [2, 0, -1, 1]), ([3], [0, 1, 2]), ([1, 1], [2])]:
        r, c = np.array(r, "int32"), np.array(c)
        for layout, arg in layouts_of(value):
            got = f(arg, to_device(r), to_device(c))
            np.testing.assert_array_equal(got, value[r, c], err_msg=layout)


@pytest.mark.parametrize("mode", [FAST_DEVICE, None], ids=["fast", "debug"])
def test_index_vectors_that_broadcast_to_nothing_are_not_checked(mode):
    # NumPy broadcasts the index arrays first: x[[], [7]] selects nothing, so 7 is never
    # checked against the axis (and the inc writes nothing).
    x = device_var("x", (None, None))
    rows, cols = device_var("rows", (None,), "int64"), device_var("cols", (None,), "int64")
    kwargs = {} if mode is None else {"mode": mode}
    f = on_device([x, rows, cols], [x[rows, cols], T.inc_subtensor(x[rows, cols], 1.0)], **kwargs)
    value = rng.standard_normal((4, 5))
    empty, seven = np.zeros(0, "int64"), np.array([7])
    got, updated = f(to_device(value), to_device(empty), to_device(seven))
    assert np.asarray(got).shape == (0,)
    np.testing.assert_array_equal(updated, value)
    with pytest.raises(IndexError, match="7"):
        f(to_device(value), to_device(np.array([0, 1])), to_device(seven))


def test_p_arange_y_runs_on_the_device():
    p, y = device_var("p", (None, None)), device_var("y", (None,), "int64")
    f = on_device([p, y], p[T.arange(y.shape[0]), y])
    ops = [type(n.op) for n in f.kernels]
    picked = AdvancedSubtensor if AdvancedSubtensor in ops else SelectClass
    runs_on_device(
        f, picked, "advanced_subtensor" if picked is AdvancedSubtensor else "select_class"
    )
    value, labels = rng.standard_normal((5, 3)), np.array([2, 0, 1, 1, 2])
    np.testing.assert_array_equal(
        f(to_device(value), to_device(labels)), value[np.arange(5), labels]
    )


def test_gather_out_of_range_is_an_index_error():
    x, idx = device_var("x", (None, None)), device_var("idx", (None,), "int64")
    f = on_device([x, idx], x[idx])
    value = to_device(np.zeros((3, 2)))
    for bad in (3, -4):
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds for dimension 0"):
            f(value, to_device(np.array([0, bad])))
    with pytest.raises(IndexError, match="index 7 is out of bounds"):
        f(to_device(np.zeros((3, 0))), to_device(np.array([7])))
    assert f(value, to_device(np.array([2, -3]))).shape == (2, 2)


@pytest.mark.parametrize("set_value", [False, True], ids=["inc", "set"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_rows_with_repeated_indices_in_every_layout(set_value, dtype):
    x = device_var("x", (None, None), dtype)
    y = device_var("y", (None, None), dtype)
    idx = device_var("idx", (None,), "int64")
    build = T.set_subtensor if set_value else T.inc_subtensor
    f = on_device([x, y, idx], build(x[idx], y))
    runs_on_device(f, AdvancedIncSubtensor, "advanced_inc_subtensor")
    value = rng.standard_normal((4, 3)).astype(dtype)
    rows = np.array([1, 3, 1, -1, 0, 1])
    delta = rng.standard_normal((6, 3)).astype(dtype)
    want = value.copy()
    if set_value:
        want[rows] = delta
    else:
        np.add.at(want, rows, delta)
    for layout, arg in layouts_of(value):
        for d_layout, d_arg in layouts_of(delta):
            got = f(arg, d_arg, to_device(rows))
            np.testing.assert_allclose(got, want, err_msg=layout + d_layout, **tolerance(dtype))


def test_scatter_broadcasts_the_value_and_scatters_pairs():
    x = device_var("x", (None, None))
    row = device_var("row", (1, None))
    rows, cols = device_var("rows", (None,), "int64"), device_var("cols", (None,), "int64")
    v = device_var("v", (None,))
    f = on_device(
        [x, row, rows, cols, v], [T.inc_subtensor(x[rows], row), T.inc_subtensor(x[rows, cols], v)]
    )
    runs_on_device(f, AdvancedIncSubtensor, "advanced_inc_subtensor")
    value, r = rng.standard_normal((3, 4)), rng.standard_normal((1, 4))
    i, j, d = np.array([0, 2, 0, 0]), np.array([1, -1, 1, 3]), rng.standard_normal(4)
    a, b = f(to_device(value), to_device(r), to_device(i), to_device(j), to_device(d))
    want_a, want_b = value.copy(), value.copy()
    np.add.at(want_a, i, r)
    np.add.at(want_b, (i, j), d)
    np.testing.assert_allclose(a, want_a, rtol=1e-12)
    np.testing.assert_allclose(b, want_b, rtol=1e-12)


def test_scatter_in_place_checks_every_index_before_writing():
    x, y = device_var("x", (None, None)), device_var("y", (None, None))
    idx = device_var("idx", (None,), "int64")
    f = on_device([In(x, mutable=True), y, idx], T.inc_subtensor(x[idx], y))
    (node,) = [n for n in f.kernels if isinstance(n.op, AdvancedIncSubtensor)]
    assert node.op.inplace
    value = rng.standard_normal((3, 2))
    arg = to_device(value)
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0"):
        f(arg, to_device(np.ones((3, 2))), to_device(np.array([0, 1, 5])))
    np.testing.assert_array_equal(host(arg), value)
    with pytest.raises(ValueError, match=r"\(2, 2\).*\(3, 2\)"):
        f(arg, to_device(np.ones((2, 2))), to_device(np.array([0, 1, 2])))
    np.testing.assert_array_equal(host(arg), value)
    np.testing.assert_allclose(
        f(arg, to_device(np.ones((2, 2))), to_device(np.array([2, 2]))),
        value + [[0, 0], [0, 0], [2, 2]],
    )
