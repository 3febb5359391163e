"""Elementwise kernels on the tested device: fused graphs, casts, broadcasting, strided
and negatively strided operands, 0-d and empty arrays, in place, maps with several
outputs (MultiOutputElemwise, where the backend has kernels for it); each checked
against Op.perform by DebugMode and against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.hooks import get_plugin_system
from tensorjit.core.memory import In
from tensorjit.core.rewrites.transfer import host_nodes_of_device_function
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.multi_output_elemwise import MultiOutputElemwise
from tensorjit.tensor.type import TensorType
from tensorjit.testing.device_under_test import (
    BACKEND,
    DEBUG_DEVICE,
    DEVICE,
    FAST_DEVICE,
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
    # NumPy's bool sum and product are "or" and "and" (a byte holding 2 would cast to 2)
    "bool_sum_product": (
        lambda x, y: T.cast((x > 0) + (x > 0), "float64") + T.cast((x > 0) * (y > 0), "int8"),
        lambda a, b: ((a > 0) + (a > 0)).astype("float64") + ((a > 0) * (b > 0)).astype("int8"),
    ),
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


# ---------------------------------------------------------------- several outputs
def _multi_output_nodes(f) -> list:
    """The function's MultiOutputElemwise nodes, which the backend must run where it has
    kernels for them (without, multi-output fusion leaves its graphs alone)."""
    nodes = [n for n in f.fgraph.toposort() if isinstance(n.op, MultiOutputElemwise)]
    kernels = get_plugin_system().registries.kernels
    if kernels.lookup_class(BACKEND, MultiOutputElemwise) is not None:
        assert nodes, "values read by several outputs were not joined into one map"
        runs_on_device(f, MultiOutputElemwise, "elemwise")
    return nodes


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_values_read_by_several_outputs_are_one_map(dtype):
    """a is an output and read by two more; a transposed operand and a broadcast row
    (the strided kernel), and the contiguous one."""
    x, y = T.matrix("x", dtype=dtype), T.matrix("y", dtype=dtype)
    row = T.row("row", dtype=dtype)
    a = T.exp(x) * 2 + row
    b = T.tanh(y.T) * a
    f = on_device([x, y, row], [a, b + 1, a * b])
    _multi_output_nodes(f)
    xv = rng.standard_normal((5, 7)).astype(dtype)
    yv = rng.standard_normal((7, 5)).astype(dtype)
    rv = rng.standard_normal((1, 7)).astype(dtype)
    av = np.exp(xv) * 2 + rv
    bv = np.tanh(yv.T) * av
    tol = 1e-12 if dtype == "float64" else 2e-6
    for args in [(xv, yv, rv), (xv, np.ascontiguousarray(yv.T).T, rv)]:
        for got, want in zip(f(*args), [av, bv + 1, av * bv], strict=True):
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_updates_of_two_shared_values_write_both_in_place_on_the_device():
    """An optimiser's moment and parameter from one gradient: one map writing the new
    moment into the old one's buffer and the new parameter into the parameter's."""
    start_m, start_p = rng.standard_normal(6), rng.standard_normal(6)
    m = tensorjit.shared(start_m, name="m", target=DEVICE)
    p = tensorjit.shared(start_p, name="p", target=DEVICE)
    g = T.vector("g")
    m_new = 0.9 * m + 0.1 * g
    p_new = p - 0.01 * m_new / (1 + abs(m_new))
    f = on_device([g], [], updates=[(m, m_new), (p, p_new)], mode=FAST_DEVICE)
    nodes = _multi_output_nodes(f)
    if nodes:
        assert len(nodes[0].op.inplace) == 2, nodes[0].op
    gs = [rng.standard_normal(6) for _ in range(3)]
    for gv in gs:
        f(gv)
        start_m = 0.9 * start_m + 0.1 * gv
        start_p = start_p - 0.01 * start_m / (1 + abs(start_m))
    np.testing.assert_allclose(m.get_value(), start_m, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(p.get_value(), start_p, rtol=1e-13, atol=1e-15)


def test_several_outputs_of_empty_and_0d_operands():
    for shape in [(0, 3), ()]:
        x = TensorType("float64", (None,) * len(shape), device=DEVICE)("x")
        a = T.exp(x) + 1
        f = on_device([x], [a, a * x])
        value = rng.standard_normal(shape)
        got = f(value)
        for g, w in zip(got, [np.exp(value) + 1, (np.exp(value) + 1) * value], strict=True):
            assert np.shape(g) == shape
            np.testing.assert_allclose(g, w)
