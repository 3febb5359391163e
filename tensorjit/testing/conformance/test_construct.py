"""Arrays built whole on the tested device: join (concatenate), eye, tri, arange,
one-hot, and cumulative sums and products; each checked against Op.perform by
DebugMode and against NumPy (to the bit: the running sums add in NumPy's order), on
strided inputs, empty sizes, and with NumPy's errors for sizes and indices it refuses."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit.tensor as T
from tensorjit.tensor import nnet
from tensorjit.tensor.allocation import ARange, Eye, Tri
from tensorjit.tensor.extra_ops import CumOp, Sort
from tensorjit.tensor.nnet.basic import OneHot
from tensorjit.tensor.shape_ops import Join
from tensorjit.testing.device_under_test import (
    FAST_DEVICE,
    NEEDS_DEVICE,
    device_var,
    names_all,
    on_device,
    runs_on_device,
    strided_views,
    to_device,
)

pytestmark = NEEDS_DEVICE
rng = np.random.default_rng(0)


def layouts_of(value):
    return sorted(strided_views(value).items())


# ---------------------------------------------------------------- join
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_join_of_strided_inputs_of_two_dtypes_along_each_axis(axis):
    a = device_var("a", (None, None, None), "float32")
    b = device_var("b", (None, None, None), "float64")
    f = on_device([a, b], T.concatenate([a, b, a], axis=axis))
    runs_on_device(f, Join, "join")
    shape_a = [2, 3, 4]
    shape_b = list(shape_a)
    shape_b[axis] = 1
    va = rng.standard_normal(shape_a).astype("float32")
    vb = rng.standard_normal(shape_b)
    want = np.concatenate([va, vb, va], axis=axis)
    for layout, arg in layouts_of(va):
        out = f(arg, to_device(vb))
        assert out.dtype == np.float64, layout
        np.testing.assert_array_equal(out, want, err_msg=layout)


def test_join_with_an_empty_input_and_of_integers():
    a, b = device_var("a", (None, None), "int32"), device_var("b", (None, None), "int32")
    f = on_device([a, b], T.concatenate([a, b], axis=0))
    va = np.arange(6, dtype="int32").reshape(2, 3)
    np.testing.assert_array_equal(f(to_device(va), to_device(np.zeros((0, 3), "int32"))), va)
    assert f(to_device(va[:0]), to_device(va[:0])).shape == (0, 3)


def test_join_of_mismatched_shapes_names_them():
    a, b = device_var("a", (None, None)), device_var("b", (None, None))
    f = on_device([a, b], T.concatenate([a, b], axis=0), mode=FAST_DEVICE)
    with pytest.raises(ValueError) as error:
        f(to_device(np.zeros((2, 3))), to_device(np.zeros((2, 4))))
    assert names_all(error.value, "join", "(2, 3)", "(2, 4)"), error.value


# ---------------------------------------------------------------- eye, tri
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "bool"])
def test_eye_and_tri_for_every_kind_of_offset(dtype):
    n, m, k = T.lscalar("n"), T.lscalar("m"), T.lscalar("k")
    f = on_device([n, m, k], [T.eye(n, m, k, dtype=dtype), T.tri(n, m, k, dtype=dtype)])
    runs_on_device(f, Eye, "eye")
    runs_on_device(f, Tri, "tri")
    for args in [(4, 4, 0), (3, 5, 2), (5, 3, -2), (4, 6, 9), (4, 6, -9), (0, 3, 0), (3, 0, 1)]:
        eye, tri = f(*args)
        assert eye.dtype == dtype and tri.dtype == dtype
        np.testing.assert_array_equal(eye, np.eye(*args, dtype=dtype), err_msg=str(args))
        np.testing.assert_array_equal(tri, np.tri(*args, dtype=dtype), err_msg=str(args))


def test_tri_at_the_extreme_offsets_and_a_negative_size():
    n, m, k = T.lscalar("n"), T.lscalar("m"), T.lscalar("k")
    f = on_device([n, m, k], T.tri(n, m, k))
    big = 2**62
    np.testing.assert_array_equal(f(3, 4, big), np.tri(3, 4, big))
    np.testing.assert_array_equal(f(3, 4, -big), np.tri(3, 4, -big))
    for args in [(-1, 4, 0), (3, -2, 1)]:  # as np.tri: no rows (columns), not an error
        got, want = np.asarray(f(*args)), np.tri(*args)
        assert got.shape == want.shape, args
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- arange
ARANGES = {
    "count": ((0, 7, 1), "int64"),
    "down": ((10, -3, -3), "int64"),
    "int32": ((-5, 20, 4), "int32"),
    "fractional": ((0.5, 3.0, 0.125), "float64"),
    "float32": ((-1.0, 1.0, 0.1), "float32"),
    "long_float32": ((0.0, 3.0e5, 0.7), "float32"),
    "empty": ((5, 2, 1), "int64"),
    "one": ((2.5, 3.0, 1.0), "float64"),
}


@pytest.mark.parametrize("case", sorted(ARANGES))
def test_arange_is_numpys_fill(case):
    (start, stop, step), dtype = ARANGES[case]
    kind = "float64" if isinstance(start, float) else "int64"
    a, b, c = T.scalar("a", kind), T.scalar("b", kind), T.scalar("c", kind)
    f = on_device([a, b, c], T.arange(a, b, c, dtype=dtype))
    runs_on_device(f, ARange, "arange")
    out = f(start, stop, step)
    want = np.arange(start, stop, step, dtype=dtype)
    assert out.dtype == want.dtype
    np.testing.assert_array_equal(out, want)


def test_arange_with_a_zero_step_is_an_error():
    n, step = T.lscalar("n"), T.lscalar("step")
    f = on_device([n, step], T.arange(0, n, step), mode=FAST_DEVICE)
    with pytest.raises(ValueError, match="step"):
        f(5, 0)


# ---------------------------------------------------------------- one-hot
@pytest.mark.parametrize("y_dtype", ["int64", "int32", "uint8"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int8"])
def test_one_hot_of_strided_labels(y_dtype, dtype):
    y = device_var("y", (None, None), y_dtype)
    f = on_device([y], nnet.to_one_hot(y, 5, dtype=dtype))
    runs_on_device(f, OneHot, "one_hot")
    labels = rng.integers(0, 5, (3, 4)).astype(y_dtype)
    want = (labels[..., None] == np.arange(5)).astype(dtype)
    for layout, arg in layouts_of(labels):
        out = f(arg)
        assert out.dtype == dtype, layout
        np.testing.assert_array_equal(out, want, err_msg=layout)


@pytest.mark.parametrize("bad", [5, -1])
def test_one_hot_of_a_label_out_of_range_names_it(bad):
    y = device_var("y", (None,), "int64")
    f = on_device([y], nnet.to_one_hot(y, 5), mode=FAST_DEVICE)
    with pytest.raises(IndexError) as error:
        f(to_device(np.array([0, bad, 2])))
    assert names_all(error.value, str(bad), "5"), error.value


# ---------------------------------------------------------------- cumsum, cumprod
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("mode", ["add", "mul"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cumulative_along_each_axis_is_numpys_to_the_bit(axis, mode, dtype):
    x = device_var("x", (None, None, None), dtype)
    f = on_device([x], CumOp(mode, axis)(x))
    runs_on_device(f, CumOp, "cumulative")
    # factors near 1 keep a running product in range along 40 steps
    value = (1 + 0.05 * rng.standard_normal((3, 40, 5))).astype(dtype)
    numpy_fn = np.cumsum if mode == "add" else np.cumprod
    want = numpy_fn(value, axis=axis)
    for layout, arg in layouts_of(value):
        out = f(arg)
        assert out.dtype == dtype, layout
        np.testing.assert_array_equal(out, want, err_msg=layout)


@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool"])
def test_cumulative_of_small_integers_accumulates_in_64_bits(dtype):
    x = device_var("x", (None, None), dtype)
    f = on_device([x], [T.cumsum(x, axis=1), T.cumprod(x, axis=0)])
    value = rng.integers(0, 2 if dtype == "bool" else 100, (6, 7)).astype(dtype)
    total, product = f(to_device(value))
    np.testing.assert_array_equal(total, np.cumsum(value, axis=1))
    np.testing.assert_array_equal(product, np.cumprod(value, axis=0))
    assert total.dtype == np.cumsum(value).dtype


def test_cumulative_of_an_empty_array():
    x = device_var("x", (None, None))
    f = on_device([x], T.cumsum(x, axis=0))
    assert np.asarray(f(to_device(np.zeros((0, 3))))).shape == (0, 3)


# ---------------------------------------------------------------- edges a review found
def test_arange_of_uint64_from_two_to_the_63():
    a, b, c = T.scalar("a", "uint64"), T.scalar("b", "uint64"), T.scalar("c", "uint64")
    f = on_device([a, b, c], T.arange(a, b, c, dtype="uint64"), mode=FAST_DEVICE)
    want = np.arange(2**63, 2**63 + 10, 3, dtype="uint64")
    np.testing.assert_array_equal(f(2**63, 2**63 + 10, 3), want)


@pytest.mark.parametrize("mode", [FAST_DEVICE, None], ids=["fast", "debug"])
def test_integer_arange_at_the_ends_of_int64_and_past_int32(mode):
    a, b, c = T.lscalar("a"), T.lscalar("b"), T.lscalar("c")
    kwargs = {} if mode is None else {"mode": mode}
    wide = on_device([a, b, c], T.arange(a, b, c), **kwargs)
    ends = (-(2**63), 2**63 - 1, 2**62)
    np.testing.assert_array_equal(wide(*ends), np.arange(*ends))
    narrow = on_device([a, b, c], T.arange(a, b, c, dtype="int32"), **kwargs)
    with pytest.raises(OverflowError):
        narrow(2**31 - 1, 2**31 + 2, 1)  # (NumPy's error: the second value is not an int32)


@pytest.mark.parametrize("dtype", ["float16", "complex128"])
def test_dtypes_a_device_can_not_spell_are_still_computed(dtype):
    # (a host input: placement leaves these nodes on the host)
    x = T.matrix("x", dtype=dtype)
    f = on_device([x], [T.concatenate([x, x], axis=1), T.cumsum(x, axis=0)])
    value = (rng.standard_normal((3, 4)) * 4).astype(dtype)
    joined, total = f(value)
    np.testing.assert_array_equal(joined, np.concatenate([value, value], axis=1))
    np.testing.assert_allclose(total, np.cumsum(value, axis=0), rtol=1e-3)


def test_integer_running_sums_and_products_wrap_as_numpys():
    x = device_var("x", (None, None), "int64")
    f = on_device([x], [T.cumsum(x, axis=1), T.cumprod(x, axis=0)])
    value = np.array([[2**62, 2**62, 2**62], [3**39, 7, -(2**61)]], dtype="int64")
    total, product = f(to_device(value))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(total, np.cumsum(value, axis=1))
        np.testing.assert_array_equal(product, np.cumprod(value, axis=0))


# ---------------------------------------------------------------- sort
@pytest.mark.parametrize("kind", ["quicksort", "stable"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int8", "bool"])
def test_sort_along_each_axis_of_strided_inputs(kind, axis, dtype):
    x = device_var("x", (None, None), dtype)
    f = on_device([x], T.sort(x, axis=axis, kind=kind))
    runs_on_device(f, Sort, "sort")
    value = (rng.standard_normal((37, 9)) * 10).astype(dtype)
    want = np.sort(value, axis=axis, kind=kind)
    for layout, arg in layouts_of(value):
        out = f(arg)
        assert out.dtype == dtype, layout
        np.testing.assert_array_equal(out, want, err_msg=layout)


def test_sort_puts_nans_last_and_a_stable_sort_keeps_signed_zeros_in_order():
    x = device_var("x", (None,))
    f = on_device([x], T.sort(x, kind="stable"))
    value = np.array([3.0, np.nan, -0.0, 1.0, 0.0, -np.inf, np.nan, -0.0, 2.0])
    out = np.asarray(f(to_device(value)))
    want = np.sort(value, kind="stable")
    np.testing.assert_array_equal(out, want)
    assert list(np.signbit(out[:5])) == list(np.signbit(want[:5]))
    assert np.asarray(f(to_device(np.zeros(0)))).shape == (0,)
