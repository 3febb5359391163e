"""Reductions on the tested device: Reduce (sum, prod, max, min, all, any) over any set of
axes and Argmax (argmax, argmin), on contiguous, strided, negatively strided, broadcast,
0-d and empty inputs; each kernel checked against Op.perform by DebugMode and against
NumPy, with the reduced range split over several work-items and not."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit.tensor as T
from tensorjit.core.config import config
from tensorjit.plugins.device_kernels import reductions
from tensorjit.tensor.math import Argmax, Reduce
from tensorjit.tensor.type import TensorType
from tensorjit.testing.device_under_test import (
    DEVICE,
    NEEDS_DEVICE,
    ONLY_OPENCL,
    on_device,
    runs_on_device,
    strided_views,
    to_device,
    view,
)

pytestmark = NEEDS_DEVICE
rng = np.random.default_rng(0)

KINDS = ["sum", "prod", "max", "min", "all", "any"]
AXES = [None, 0, 1, 2, (0, 1), (0, 2), (1, 2), ()]


def device_tensor(ndim, dtype="float64", name="x"):
    return TensorType(dtype, (None,) * ndim, device=DEVICE)(name)


@pytest.fixture(params=["whole", "split"])
def split(request, monkeypatch):
    """Run each case as is and with every reduced range split into segments (so the
    partial-result kernels and the combine run on small inputs too)."""
    if request.param == "split":
        monkeypatch.setattr(reductions, "CPU_MIN_SEGMENT", 2)
        monkeypatch.setattr(reductions, "GPU_MIN_SEGMENT", 2)
    return request.param


def tolerance(dtype):
    return 1e-12 if dtype == "float64" else 1e-5


@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("kind", KINDS)
def test_reduce_any_axes_any_layout_matches_numpy(kind, axis, split):
    x = device_tensor(3)
    f = on_device([x], getattr(T, kind)(x, axis=axis))
    runs_on_device(f, Reduce, "reduce")
    value = rng.standard_normal((3, 4, 5))
    value[0, 1, 2] = 0.0  # all() is False somewhere
    want = getattr(np, kind)(value, axis=axis)
    for layout, arg in strided_views(value).items():
        out = f(arg)
        assert out.dtype == want.dtype, layout
        np.testing.assert_allclose(out, want, rtol=1e-12, err_msg=layout)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["sum", "prod", "max", "min"])
def test_float_reductions_of_long_rows_and_columns(kind, dtype, split):
    x = device_tensor(2, dtype)
    outs = [getattr(T, kind)(x, axis=0), getattr(T, kind)(x, axis=1), getattr(T, kind)(x)]
    f = on_device([x], outs)
    runs_on_device(f, Reduce, "reduce")
    value = rng.uniform(0.9, 1.1, (37, 300)).astype(dtype)  # products stay finite
    for out, axis in zip(f(value), [0, 1, None]):
        want = getattr(np, kind)(value, axis=axis)
        assert out.dtype == want.dtype
        np.testing.assert_allclose(out, want, rtol=tolerance(dtype) * 10)


def test_a_large_float32_sum_is_accurate():
    x = device_tensor(1, "float32")
    f = on_device([x], T.sum(x))
    value = rng.uniform(0, 1, 2_000_003).astype("float32")
    np.testing.assert_allclose(f(value), value.astype("float64").sum(), rtol=1e-6)


@pytest.mark.parametrize(
    ("dtype", "kinds"),
    [
        ("int32", KINDS),
        ("int8", ["sum", "prod", "max", "min"]),
        ("int16", ["sum", "max", "min"]),  # a type whose C limits are spelled SHRT_*
        ("uint8", ["sum", "max", "min", "any"]),
        ("uint64", ["sum", "max", "min"]),
        ("int64", ["max", "min"]),  # start values at the type's extremes
        ("bool", ["sum", "max", "min", "all", "any"]),
    ],
)
def test_integer_and_bool_reductions_follow_numpy_dtypes(dtype, kinds, split):
    x = device_tensor(2, dtype)
    f = on_device([x], [getattr(T, k)(x, axis=a) for k in kinds for a in (0, 1, None)])
    runs_on_device(f, Reduce, "reduce")
    value = rng.integers(0, 5, (6, 7)).astype(dtype)
    for out, (kind, axis) in zip(f(value), [(k, a) for k in kinds for a in (0, 1, None)]):
        want = getattr(np, kind)(value, axis=axis)
        assert out.dtype == want.dtype, (kind, axis)
        np.testing.assert_array_equal(out, want, err_msg=f"{kind} {axis}")


def test_integer_sums_and_products_wrap_like_numpy():
    x = device_tensor(1, "int64")
    f = on_device([x], [T.sum(x), T.prod(x)])
    value = np.array([2**62, 2**62, 2**62, 3], dtype="int64")
    with np.errstate(over="ignore"):
        want = [np.sum(value), np.prod(value)]
    for out, w in zip(f(value), want):
        assert out == w


def test_explicit_sum_dtype_and_mean():
    x = device_tensor(2, "int32")
    y = device_tensor(2, "float32", "y")
    f = on_device([x, y], [T.sum(x, axis=1, dtype="int16"), T.mean(y, axis=0), T.mean(x)])
    runs_on_device(f, Reduce, "reduce")
    a = rng.integers(-1000, 1000, (4, 300)).astype("int32")
    b = rng.standard_normal((4, 300)).astype("float32")
    s16, mean_y, mean_x = f(a, b)
    np.testing.assert_array_equal(s16, np.sum(a, axis=1, dtype="int16"))
    assert s16.dtype == np.int16
    np.testing.assert_allclose(mean_y, b.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(mean_x, a.mean(), rtol=1e-12)


def test_a_sum_into_bool_is_an_or_and_a_product_an_and():
    """NumPy adds booleans as or: 256 true elements sum to True (a byte that counted
    them would wrap to 0)."""
    x = device_tensor(1, "int8")
    f = on_device([x], [T.sum(x, dtype="bool"), T.prod(x, dtype="bool")])
    for value in (np.ones(256, "int8"), np.ones(2048, "int8"), np.zeros(300, "int8")):
        s, p = f(value)
        assert s == np.sum(value, dtype=bool) and p == np.prod(value, dtype=bool)


def test_an_integer_mean_is_summed_in_float64():
    """NumPy's mean of integers accumulates in float64: values near 2**62 do not wrap."""
    x = device_tensor(1, "int64")
    f = on_device([x], T.mean(x))
    value = np.full(3, 2**62, dtype="int64")
    np.testing.assert_allclose(f(value), value.mean(), rtol=1e-15)


def test_each_element_enters_a_narrower_sum_as_the_result_dtype_holds_it():
    """NumPy casts each element to the sum's dtype before adding it (cstyle/reductions.py):
    2**24 + 1 is 2**24 in float32, so [2**24 + 1, -2**24] sums to 0 in float32, not 1."""
    x = device_tensor(1, "float64")
    f = on_device([x], T.sum(x, dtype="float32"))
    value = np.array([2.0**24 + 1, -(2.0**24)])
    out = f(value)
    assert out.dtype == np.float32
    assert out == np.sum(value, dtype="float32") == 0


def test_nan_propagates_through_max_and_min_and_counts_as_true():
    x = device_tensor(2)
    f = on_device([x], [T.max(x, axis=1), T.min(x, axis=0), T.all(x, axis=1), T.any(x)])
    value = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -np.inf], [0.0, 0.0, np.nan]])
    for out, want in zip(
        f(value),
        [value.max(axis=1), value.min(axis=0), value.all(axis=1), value.any()],
    ):
        np.testing.assert_array_equal(out, want)


def broadcast_view(row):
    """A (4, n) device matrix whose rows all read the same buffer (row stride 0)."""
    base = to_device(row)
    return view(base, (4, len(row)), (0, row.strides[0]), 0)


def test_broadcast_inputs_with_stride_zero(split):
    x = device_tensor(2)
    f = on_device([x], [T.sum(x, axis=0), T.max(x, axis=1), T.prod(x), T.argmax(x, axis=0)])
    row = rng.standard_normal(5)
    full = np.broadcast_to(row, (4, 5))
    outs = f(broadcast_view(row))
    wants = [full.sum(axis=0), full.max(axis=1), full.prod(), full.argmax(axis=0)]
    for out, want in zip(outs, wants):
        np.testing.assert_allclose(out, want, rtol=1e-12)


def test_zero_d_inputs():
    x = device_tensor(0)
    f = on_device([x], [T.sum(x), T.max(x), T.all(x), T.argmax(x), T.argmin(x)])
    for out, want in zip(f(np.array(-2.5)), [-2.5, -2.5, True, 0, 0]):
        assert out.shape == () and out == want


@pytest.mark.parametrize("kind", ["sum", "prod", "all", "any"])
def test_empty_reductions_give_the_identity(kind):
    x = device_tensor(2)
    f = on_device([x], [getattr(T, kind)(x, axis=0), getattr(T, kind)(x, axis=1)])
    value = np.empty((0, 3))
    for out, axis in zip(f(value), [0, 1]):
        want = getattr(np, kind)(value, axis=axis)
        assert out.shape == want.shape and out.dtype == want.dtype
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("kind", ["max", "min"])
def test_max_of_an_empty_range_is_numpys_error(kind):
    x = device_tensor(2)
    f = on_device([x], getattr(T, kind)(x, axis=0))
    assert f(np.empty((3, 0))).shape == (0,)  # nothing to reduce into: fine
    with pytest.raises(ValueError, match="zero-size array"):
        f(np.empty((0, 3)))
    with pytest.raises(ValueError, match="zero-size array"):
        f(np.empty((0, 0)))  # nothing to reduce into either: still NumPy's error


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "bool"])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, (0, 2), (1, 2)], ids=str)
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_argmax_any_axes_any_layout_first_of_ties(kind, axis, dtype, split):
    x = device_tensor(3, dtype)
    f = on_device([x], getattr(T, kind)(x, axis=axis))
    runs_on_device(f, Argmax, "argmax")
    value = rng.integers(0, 3, (3, 4, 5)).astype(dtype)  # many ties
    for layout, arg in strided_views(value).items():
        out = f(arg)
        host = np.asarray(value)
        if isinstance(axis, tuple):  # the index into the reduced axes flattened
            kept = tuple(a for a in range(3) if a not in axis)
            host = host.transpose(kept + axis).reshape([host.shape[a] for a in kept] + [-1])
            want = getattr(np, kind)(host, axis=-1)
        else:
            want = getattr(np, kind)(host, axis=axis)
        assert out.dtype == np.int64
        np.testing.assert_array_equal(out, want, err_msg=layout)


def test_argmax_stops_at_the_first_nan_like_numpy(split):
    x = device_tensor(2)
    f = on_device([x], [T.argmax(x, axis=1), T.argmin(x, axis=1), T.argmax(x)])
    value = np.array([[1.0, np.nan, 7.0, np.nan], [-np.inf, -np.inf, 2.0, 2.0]])
    wants = [value.argmax(axis=1), value.argmin(axis=1), value.argmax()]
    for out, want in zip(f(value), wants):
        np.testing.assert_array_equal(out, want)


def test_argmax_of_a_long_vector_and_columns(split):
    x = device_tensor(2)
    f = on_device([x], [T.argmax(x, axis=0), T.argmin(x)])
    value = rng.standard_normal((500, 7))
    value[300, 3] = value[100, 3] = 9.0  # a tie across segments: the first wins
    a0, a = f(value)
    np.testing.assert_array_equal(a0, value.argmax(axis=0))
    assert a == value.argmin()


def test_argmax_of_an_empty_range_is_numpys_error():
    x = device_tensor(2)
    f = on_device([x], T.argmax(x, axis=1))
    assert f(np.empty((0, 4))).shape == (0,)
    with pytest.raises(ValueError, match="empty sequence"):
        f(np.empty((3, 0)))


@ONLY_OPENCL
def test_chunks_of_work_items_configured_explicitly():
    x = device_tensor(2)
    with config.change_flags(opencl_work_per_item="3"):
        f = on_device([x], [T.sum(x, axis=1), T.sum(x, axis=0), T.argmax(x, axis=1)])
        value = rng.standard_normal((11, 13))
        s1, s0, am = f(value)
    np.testing.assert_allclose(s1, value.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(s0, value.sum(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(am, value.argmax(axis=1))


def test_collapse_merges_contiguous_axes_and_drops_length_one():
    dims = [(2, (96,)), (1, (8,)), (3, (32,)), (4, (8,))]
    assert reductions.collapse(dims) == [(24, (8,))]
    assert reductions.collapse([(2, (8,)), (3, (16,))]) == [(2, (8,)), (3, (16,))]
