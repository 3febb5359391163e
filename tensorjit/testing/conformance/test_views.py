"""Views and allocations on the tested device: DimShuffle, Reshape and basic Subtensor
return views of their input's buffer (no copy), Alloc and Second fill new arrays; each
checked against Op.perform by DebugMode and against NumPy, on strided, negatively
strided, broadcast, 0-d and empty inputs."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit.tensor as T
from tensorjit.tensor.allocation import Second, fill
from tensorjit.tensor.elemwise import DimShuffle
from tensorjit.tensor.math import Alloc
from tensorjit.tensor.shape_ops import Reshape
from tensorjit.tensor.subtensor import Subtensor
from tensorjit.testing.device_under_test import (
    FAST_DEVICE,
    NEEDS_DEVICE,
    SHARED_FAMILIES,
    buffer_address,
    device_var,
    names_all,
    needs_kernel,
    on_device,
    runs_on_device,
    strided_views,
    target,
    to_device,
    to_host,
)

pytestmark = NEEDS_DEVICE
rng = np.random.default_rng(0)
DTYPES = ["float64", "float32"]


def layouts_of(value):
    return sorted(strided_views(value).items())


def run_node(f, op_class, inputs):
    """Run the kernel ``f`` chose for its ``op_class`` node on ``inputs`` (host values,
    each moved to the device its input lives on), and return the output as the kernel
    left it (a device array, maybe a view)."""
    (node,) = [n for n in f.kernels if isinstance(n.op, op_class)]
    values = [
        v if not isinstance(v, np.ndarray) or var.type.device == "cpu" else to_device(v)
        for v, var in zip(inputs, node.inputs)
    ]
    storage = [[None]]
    f.kernels[node].factory(node)(values, storage)
    return storage[0][0]


def same_buffer(a, b):
    return buffer_address(a) is not None and buffer_address(a) == buffer_address(b)


# ---------------------------------------------------------------- DimShuffle
DIMSHUFFLES = {
    "transpose": ((None, None), (1, 0), lambda a: a.T),
    "new_axes": ((None, None), ("x", 1, "x", 0), lambda a: a.T[None, :, None, :]),
    "drop": ((1, None), (1,), lambda a: a[0]),
    "drop_and_add": ((None, 1, None), (2, "x", 0), lambda a: a[:, 0, :].T[:, None, :]),
    "scalar_to_matrix": ((), ("x", "x"), lambda a: a.reshape(1, 1)),
}


@pytest.mark.parametrize("case", sorted(DIMSHUFFLES))
@pytest.mark.parametrize("dtype", DTYPES)
def test_dimshuffle_views_agree_with_numpy_in_every_layout(case, dtype):
    static, order, numeric = DIMSHUFFLES[case]
    x = device_var("x", static, dtype)
    f = on_device([x], x.dimshuffle(*order))
    runs_on_device(f, DimShuffle, "dimshuffle")
    shape = tuple(3 + a if s is None else s for a, s in enumerate(static))
    value = rng.standard_normal(shape).astype(dtype)
    for layout, arg in layouts_of(value):
        out = f(arg)
        assert out.dtype == dtype, layout
        np.testing.assert_array_equal(out, numeric(value), err_msg=layout)


@needs_kernel("dimshuffle")
def test_dimshuffle_of_an_empty_array_and_its_output_is_a_view():
    x = device_var("x", (None, None))
    f = on_device([x], x.dimshuffle(1, "x", 0))
    assert f(to_device(np.zeros((0, 3)))).shape == (3, 1, 0)
    arg = strided_views(rng.standard_normal((3, 4)))["negative"]
    out = run_node(f, DimShuffle, [arg])
    assert same_buffer(out, arg) and out.strides == (arg.strides[1], 0, arg.strides[0])


@SHARED_FAMILIES
def test_dimshuffle_dropping_a_dimension_of_length_other_than_1_raises():
    from tensorjit.plugins.device_kernels.views import dimshuffle_view

    op = DimShuffle(2, (1,))
    with pytest.raises(ValueError, match="length 1"):
        dimshuffle_view(target(), op, to_device(np.zeros((2, 3))), "DimShuffle{1}")


# ---------------------------------------------------------------- Reshape
@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_with_constant_and_inferred_shapes_in_every_layout(dtype):
    x = device_var("x", (None, None), dtype)
    f = on_device([x], [x.reshape((2, -1, 3)), x.reshape((-1,)), x.T.reshape((6, 2))])
    runs_on_device(f, Reshape, "reshape")
    value = rng.standard_normal((4, 3)).astype(dtype)
    for layout, arg in layouts_of(value):
        a, b, c = f(arg)
        np.testing.assert_array_equal(a, value.reshape(2, -1, 3), err_msg=layout)
        np.testing.assert_array_equal(b, value.reshape(-1), err_msg=layout)
        np.testing.assert_array_equal(c, value.T.reshape(6, 2), err_msg=layout)


def test_reshape_to_a_symbolic_shape_fetches_it_from_the_device():
    x, like = device_var("x", (None,)), device_var("like", (None, None))
    f = on_device([x, like], x.reshape((like.shape[1], like.shape[0])))
    runs_on_device(f, Reshape, "reshape")
    value = rng.standard_normal(6)
    out = f(to_device(value), to_device(np.zeros((2, 3))))
    np.testing.assert_array_equal(out, value.reshape(3, 2))


def test_reshape_of_0d_and_empty_arrays():
    s, e = device_var("s", ()), device_var("e", (None, None))
    outs = [s.reshape((1, 1)), e.reshape((-1, 2)), e.reshape((4, 0)), s.reshape((1,)).reshape(())]
    f = on_device([s, e], outs)
    a, b, c, d = f(to_device(np.float64(2.5)), to_device(np.zeros((0, 4))))
    np.testing.assert_array_equal(a, [[2.5]])
    assert b.shape == (0, 2) and c.shape == (4, 0) and d.shape == () and d == 2.5


@needs_kernel("reshape")
def test_reshape_is_a_view_of_a_contiguous_input_and_copies_a_strided_one():
    x = device_var("x", (None, None))
    f = on_device([x], x.reshape((-1,)))
    value = rng.standard_normal((3, 4))
    views = strided_views(value)
    shp = np.array([-1])  # (a shape is read on the host: Op.host_inputs)
    contiguous = run_node(f, Reshape, [views["contiguous"], shp])
    assert same_buffer(contiguous, views["contiguous"])
    stepped = run_node(f, Reshape, [views["stepped"], shp])
    assert not same_buffer(stepped, views["stepped"]) and stepped.flags.c_contiguous
    np.testing.assert_array_equal(to_host(stepped), value.reshape(-1))


def test_reshape_to_a_wrong_size_is_a_clear_error():
    x, n = device_var("x", (None,)), T.lscalar("n")
    f = on_device([x, n], x.reshape((n, 4)))
    with pytest.raises(ValueError, match=r"reshape.*\(6,\)"):
        f(to_device(np.zeros(6)), 2)


# ---------------------------------------------------------------- Subtensor
SUBTENSORS = {
    "int_and_slice": (lambda x: x[1, 1:], lambda a: a[1, 1:]),
    "negative_int": (lambda x: x[-1], lambda a: a[-1]),
    "negative_step": (lambda x: x[::-2, -1:0:-1], lambda a: a[::-2, -1:0:-1]),
    "full_int_0d": (lambda x: x[2, -3], lambda a: a[2, -3]),
    "empty_slice": (lambda x: x[3:1, :], lambda a: a[3:1, :]),
    "clamped": (lambda x: x[-100:100, 2:], lambda a: a[-100:100, 2:]),
}


@pytest.mark.parametrize("case", sorted(SUBTENSORS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_basic_subtensor_with_constant_indices_in_every_layout(case, dtype):
    symbolic, numeric = SUBTENSORS[case]
    x = device_var("x", (None, None), dtype)
    f = on_device([x], symbolic(x))
    runs_on_device(f, Subtensor, "subtensor")
    value = rng.standard_normal((4, 5)).astype(dtype)
    for layout, arg in layouts_of(value):
        out = f(arg)
        assert out.shape == numeric(value).shape, layout
        np.testing.assert_array_equal(out, numeric(value), err_msg=layout)


def test_subtensor_with_symbolic_indices_from_the_host():
    x = device_var("x", (None, None, None))
    i, start, step = T.lscalar("i"), T.lscalar("start"), T.lscalar("step")
    f = on_device([x, i, start, step], x[i, start::step, ::-1])
    runs_on_device(f, Subtensor, "subtensor")
    value = rng.standard_normal((3, 6, 2))
    for args in [(1, 0, 2), (-1, 5, -2), (0, -2, 1), (2, 9, 1)]:
        want = value[args[0], args[1] :: args[2], ::-1]
        for layout, arg in layouts_of(value):
            np.testing.assert_array_equal(f(arg, *args), want, err_msg=f"{layout} {args}")


@needs_kernel("subtensor")
def test_subtensor_is_a_view_of_its_input():
    x = device_var("x", (None, None))
    f = on_device([x], x[1:, ::-1])
    arg = strided_views(rng.standard_normal((3, 4)))["stepped"]
    out = run_node(f, Subtensor, [arg, np.int64(1), np.int64(-1)])
    assert same_buffer(out, arg) and out.shape == (2, 4)


def test_subtensor_out_of_range_integer_is_an_index_error():
    x, i = device_var("x", (None, None)), T.lscalar("i")
    f = on_device([x, i], x[i])
    value = to_device(np.zeros((3, 2)))
    for bad in (3, -4):
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds for axis 0"):
            f(value, bad)
    g = on_device([x, i], x[::i])
    with pytest.raises(ValueError, match="step"):
        g(value, 0)


# ---------------------------------------------------------------- Alloc and Second
@pytest.mark.parametrize("dtype", DTYPES)
def test_alloc_broadcasts_a_strided_value_to_a_symbolic_shape(dtype):
    row, n = device_var("row", (1, None), dtype), T.lscalar("n")
    f = on_device([row, n], T.alloc(row, 2, n, row.shape[1]))
    runs_on_device(f, Alloc, "alloc")
    value = rng.standard_normal((1, 4)).astype(dtype)
    for layout, arg in layouts_of(value):
        out = f(arg, 3)
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, np.broadcast_to(value, (2, 3, 4)), err_msg=layout)


def test_alloc_of_a_scalar_zeros_like_and_empty_shapes():
    x = device_var("x", (None, None), "float32")
    f = on_device([x], [T.zeros_like(x), T.alloc(np.float32(1.5), x.shape[0])])
    runs_on_device(f, Alloc, "alloc")
    a, b = f(to_device(np.ones((2, 3), "float32")))
    np.testing.assert_array_equal(a, np.zeros((2, 3), "float32"))
    np.testing.assert_array_equal(b, [1.5, 1.5])
    a, b = f(to_device(np.ones((0, 3), "float32")))
    assert a.shape == (0, 3) and b.shape == (0,)


def test_alloc_errors_name_the_op_and_shapes():
    v, n = device_var("v", (None,)), T.lscalar("n")
    f = on_device([v, n], T.alloc(v, 2, n), mode=FAST_DEVICE)
    with pytest.raises(ValueError) as error:
        f(to_device(np.zeros(3)), 4)
    assert names_all(error.value, "Alloc", "(3,)", "(2, 4)"), error.value
    with pytest.raises(ValueError, match="negative"):
        f(to_device(np.zeros(3)), -3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_second_fills_the_model_shape_with_the_value(dtype):
    x, r = device_var("x", (None, None), dtype), device_var("r", (1, None), dtype)
    f = on_device([x, r], fill(x, r))
    runs_on_device(f, Second, "second")
    model = np.zeros((3, 4), dtype)
    value = rng.standard_normal((1, 4)).astype(dtype)
    for layout, arg in layouts_of(value):
        out = f(to_device(model), arg)
        np.testing.assert_array_equal(out, np.broadcast_to(value, (3, 4)), err_msg=layout)
    assert f(to_device(np.zeros((0, 4), dtype)), to_device(value)).shape == (0, 4)


def test_second_shape_mismatch_is_a_clear_error():
    x, y = device_var("x", (None,)), device_var("y", (None,))
    f = on_device([x, y], fill(x, y), mode=FAST_DEVICE)
    with pytest.raises(ValueError, match=r"\(3,\) and \(2,\)"):
        f(to_device(np.zeros(3)), to_device(np.zeros(2)))
