"""Elementwise kernels on the tested device: fused graphs, casts, broadcasting, strided
and negatively strided operands, 0-d and empty arrays, in place; each checked against
Op.perform by DebugMode and against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit.tensor as T
from tensorjit.core.memory import In
from tensorjit.core.rewrites.transfer import host_nodes_of_device_function
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.type import TensorType
from tensorjit.testing.device_under_test import (
    BACKEND,
    DEBUG_DEVICE,
    DEVICE,
    NEEDS_DEVICE,
    all_nodes_on_device,
    names_all,
    on_device,
    runs_on_device,
    strided_views,
)

pytestmark = NEEDS_DEVICE
rng = np.random.default_rng(0)


def device_matrix(name, dtype="float64"):
    return TensorType(dtype, (None, None), device=DEVICE)(name)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_fused_graph_runs_as_one_device_kernel(dtype):
    x, y = T.matrix("x", dtype=dtype), T.matrix("y", dtype=dtype)
    f = on_device([x, y], T.tanh(x * y + 1) - T.exp(-x) / (1 + y**2))
    runs_on_device(f, Elemwise, "elemwise")
    a, b = (rng.standard_normal((5, 7)).astype(dtype) for _ in range(2))
    want = np.tanh(a * b + 1) - np.exp(-a) / (1 + b**2)
    tol = 1e-12 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(f(a, b), want, rtol=tol, atol=tol)
    if all_nodes_on_device(("elemwise",)):
        assert host_nodes_of_device_function(f.fgraph, DEVICE) == []


SCALAR_CASES = {
    "floordiv": (lambda x, y: x // y, lambda a, b: a // b),
    "mod": (lambda x, y: x % y, lambda a, b: a % b),
    "maximum": (T.maximum, np.maximum),
    "switch": (lambda x, y: T.switch(x > y, x, y * 2), lambda a, b: np.where(a > b, a, b * 2)),
    "clip": (lambda x, y: T.clip(x, -0.5, 0.5) * y, lambda a, b: np.clip(a, -0.5, 0.5) * b),
    "sigmoid_softplus": (
        lambda x, y: T.sigmoid(x) + T.softplus(y),
        lambda a, b: 1 / (1 + np.exp(-a)) + np.logaddexp(0, b),
    ),
    "casts": (
        lambda x, y: T.cast(x * 10, "int32") + T.cast(y > 0, "int8"),
        lambda a, b: (a * 10).astype("int32") + (b > 0).astype("int8"),
    ),
    "pow": (lambda x, y: abs(x) ** 3 + T.sqr(y), lambda a, b: abs(a) ** 3 + b * b),
}


@pytest.mark.parametrize("case", sorted(SCALAR_CASES))
def test_scalar_ops_agree_with_numpy_on_the_device(case):
    symbolic, numeric = SCALAR_CASES[case]
    x, y = T.matrix("x"), T.matrix("y")
    f = on_device([x, y], symbolic(x, y))  # DebugMode: each kernel against Op.perform
    runs_on_device(f, Elemwise, "elemwise")
    a, b = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    out = f(a, b)
    want = numeric(a, b)
    assert out.dtype == want.dtype
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)


LAYOUTS = [
    (shape, layout)
    for shape in [(3, 4), (1, 5), (0, 3), ()]
    for layout in ["contiguous", "stepped", "negative"]
    # a 0-d array has one layout; an empty one no reversed one
    if not (shape == () and layout != "contiguous") and not (0 in shape and layout == "negative")
]


@pytest.mark.parametrize(("shape", "layout"), LAYOUTS)
def test_strided_broadcast_empty_and_0d_operands(layout, shape):
    ndim = len(shape)
    x = TensorType("float64", (None,) * ndim, device=DEVICE)("x")
    row = TensorType("float64", (1,) * ndim, device=DEVICE)("row")
    f = on_device([x, row], x * 2 + row)
    value = rng.standard_normal(shape)
    views = strided_views(value)
    r = rng.standard_normal((1,) * ndim)
    out = f(views[layout], strided_views(r)["contiguous"])
    np.testing.assert_allclose(out, value * 2 + r)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(40, 70), (2, 33, 31), (1, 5)])
def test_maps_of_operands_whose_fast_axes_differ(dtype, shape):
    """Transposed and contiguous operands in one map, with a cast, a broadcast row and
    a transposed output's worth of values (a GPU stages such operands through tiles)."""
    n = len(shape)
    x = TensorType(dtype, (None,) * n, device=DEVICE)("x")
    y = TensorType(dtype, (None,) * n, device=DEVICE)("y")
    row = TensorType(dtype, (None,) * (n - 1) + (1,), device=DEVICE)("row")
    flip = (*range(n - 2), n - 1, n - 2)
    swapped = y.dimshuffle(*flip)
    # (the float32 products cast, then float64 math: both sides round alike)
    out = T.cast(x * swapped - row.dimshuffle(*flip), "float64") + T.exp(T.cast(swapped, "float64"))
    f = on_device([x, y, row], out)
    a = rng.standard_normal(shape).astype(dtype)
    b = rng.standard_normal(np.array(shape)[list(flip)]).astype(dtype)
    r = rng.standard_normal((*shape[:-2], shape[-1], 1)).astype(dtype)
    bt, rt = np.swapaxes(b, -1, -2), np.swapaxes(r, -1, -2)
    want = (a * bt - rt).astype("float64") + np.exp(bt.astype("float64"))
    tol = 1e-5 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(f(a, b, r), want, rtol=tol, atol=tol)


def test_in_place_on_a_mutable_strided_input_writes_through_its_strides():
    x = device_matrix("x")
    f = on_device([In(x, mutable=True)], T.exp(x) + 1)
    value = rng.standard_normal((3, 4))
    arg = strided_views(value)["stepped"]
    out = f(arg)
    np.testing.assert_allclose(out, np.exp(value) + 1)


def test_broadcast_mismatch_is_a_clear_error():
    x, y = T.matrix("x"), T.matrix("y")
    f = on_device(
        [x, y], x + y, mode=DEBUG_DEVICE.with_backends(*dict.fromkeys((BACKEND, "c", "python")))
    )
    with pytest.raises(ValueError, match="broadcast") as error:
        f(np.ones((2, 3)), np.ones((3, 2)))
    assert names_all(error.value, "(2, 3)", "(3, 2)"), error.value


def test_conversions_to_bool_test_for_nonzero_as_on_the_host():
    x, i = T.vector("x"), T.ivector("i")
    outs = [T.cast(x, "bool"), T.switch(x, 1.0, -1.0), T.cast(i, "bool"), T.switch(i, 1.0, -1.0)]
    outs.append(T.cast(x, "bool").sum())
    f = on_device([x, i], outs)
    runs_on_device(f, Elemwise, "elemwise")
    xv = np.array([0.5, -0.25, 256.0, -1.0, 0.0, np.nan])  # NaN is true, as in NumPy
    iv = np.array([256, 512, -256, 1, 0, 3], "int32")
    got = f(xv, iv)
    want = [xv.astype(bool), np.where(xv, 1.0, -1.0), iv.astype(bool), np.where(iv, 1.0, -1.0)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert got[-1] == 5
