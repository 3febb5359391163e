"""Dot, Gemm (GEMM and GEMV), Ger and MatMul on the tested device: every operand
layout (transposed, stepped, negatively strided), empty dimensions, constant and device
alpha/beta, in place; each kernel checked against Op.perform by DebugMode and the
results against NumPy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.memory import In
from tensorjit.tensor import nnet
from tensorjit.tensor.blas import Gemm, Ger
from tensorjit.tensor.linalg import MatMul
from tensorjit.tensor.math import Dot
from tensorjit.testing.device_under_test import (
    DEVICE,
    FAST_DEVICE,
    NEEDS_DEVICE,
    ONLY_OPENCL,
    SEPARATE_MEMORY,
    covers,
    on_device,
    runs_on_device,
    runs_on_the_device,
    strided_views,
    to_device,
    view,
)
from tensorjit.testing.device_under_test import (
    to_host as host,
)

pytestmark = NEEDS_DEVICE
rng = np.random.default_rng(0)
DTYPES = ["float64", "float32"]


def dev(ndim: int, dtype: str, name: str):
    return T.TensorType(dtype, (None,) * ndim, device=DEVICE)(name)


def tol(dtype: str) -> float:
    return 1e-10 if dtype == "float64" else 2e-4


def data(shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def layouts(value):
    """Device views of ``value`` and of its transpose's transpose (a Fortran layout)."""
    views = strided_views(value)
    if value.ndim == 2:
        transposed = np.ascontiguousarray(value.T)
        t = to_device(transposed)
        views["transposed"] = view(t, value.shape, transposed.strides[::-1], 0)
    return views


# (x shape, y shape): small (one element per work-item) and packed (register blocks,
# edges not multiples of the block; above blas.CPU_BLOCKING's direct_max multiply-adds)
# products of every rank Dot takes.
@ONLY_OPENCL
def test_the_packed_cases_are_above_the_direct_kernel_limit():
    from tensorjit.plugins.opencl_backend.blas import CPU_BLOCKING, GPU_BLOCKING

    for (m, k), (_, n) in (DOT_SHAPES["mm_packed"], GEMM_SHAPES["gemm_packed"]):
        for table in (CPU_BLOCKING, GPU_BLOCKING):
            assert all(m * k * n > blk.direct_max for blk in table.values())


DOT_SHAPES = {
    "mm_small": ((3, 4), (4, 5)),
    "mm_packed": ((37, 170), (170, 145)),
    "mv": ((41, 33), (33,)),
    "vm": ((33,), (33, 41)),
    "vv": ((50,), (50,)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(DOT_SHAPES))
def test_dot_of_every_rank_and_layout(case, dtype):
    sx, sy = DOT_SHAPES[case]
    x, y = dev(len(sx), dtype, "x"), dev(len(sy), dtype, "y")
    f = on_device([x, y], T.dot(x, y))
    runs_on_device(f, Dot, "dot")
    a, b = data(sx, dtype), data(sy, dtype)
    want = np.dot(a.astype("float64"), b.astype("float64"))
    for (la, va), (lb, vb) in itertools.product(layouts(a).items(), layouts(b).items()):
        out = f(va, vb)
        assert out.dtype == dtype and out.shape == want.shape, (la, lb)
        np.testing.assert_allclose(out, want, rtol=tol(dtype), atol=tol(dtype), err_msg=la + lb)


@pytest.mark.parametrize(
    ("sx", "sy"),
    [((3, 0), (0, 4)), ((0, 5), (5, 4)), ((3, 5), (5, 0)), ((0,), (0,)), ((2, 0), (0,))],
)
def test_dot_with_empty_dimensions(sx, sy):
    x, y = dev(len(sx), "float64", "x"), dev(len(sy), "float64", "y")
    f = on_device([x, y], T.dot(x, y))
    runs_on_device(f, Dot, "dot")
    a, b = np.zeros(sx), np.zeros(sy)
    out = f(to_device(a), to_device(b))
    np.testing.assert_array_equal(out, np.dot(a, b))


def test_dot_shape_mismatch_is_a_clear_error():
    x, y = dev(2, "float64", "x"), dev(2, "float64", "y")
    f = on_device([x, y], T.dot(x, y), mode=FAST_DEVICE)
    with pytest.raises(ValueError, match=r"not aligned"):
        f(to_device(np.ones((2, 3))), to_device(np.ones((4, 2))))


@SEPARATE_MEMORY  # on a host backend everything stays on the host
def test_integer_dot_stays_on_the_host():
    x, y = T.lmatrix("x"), T.lmatrix("y")
    f = on_device([x, y], T.dot(x, y))
    node = next(n for n in f.kernels if isinstance(n.op, Dot))
    assert not runs_on_the_device(f.kernels[node].name)
    a = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(f(a, a.T), a @ a.T)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_of_matrices(dtype):
    x, y = dev(2, dtype, "x"), dev(2, dtype, "y")
    f = on_device([x, y], MatMul()(x, y))
    runs_on_device(f, MatMul, "matmul")
    a, b = data((40, 30), dtype), data((30, 50), dtype)
    np.testing.assert_allclose(
        f(layouts(a)["negative"], b), a @ b, rtol=tol(dtype), atol=tol(dtype)
    )


# ---------------------------------------------------------------- Gemm
GEMM_SHAPES = {
    "gemm_small": ((4, 3), (3, 5)),
    "gemm_packed": ((70, 131), (131, 71)),
    "gemv": ((23, 19), (19,)),
}


def gemm_graph(shapes, dtype, scalars: str):
    """Gemm(z, alpha, x, y, beta) with constant alpha/beta or device scalar inputs."""
    sx, sy = shapes
    z = dev(len(sy), dtype, "z")
    x, y = dev(2, dtype, "x"), dev(len(sy), dtype, "y")
    if scalars == "constant":
        alpha, beta, extra = np.asarray(-1.5, dtype), np.asarray(0.5, dtype), []
    else:
        alpha, beta = dev(0, dtype, "alpha"), dev(0, dtype, "beta")
        extra = [alpha, beta]
    return [z, x, y, *extra], Gemm()(z, alpha, x, y, beta)


@pytest.mark.parametrize("scalars", ["constant", "device"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(GEMM_SHAPES))
def test_gemm_and_gemv(case, dtype, scalars):
    sx, sy = GEMM_SHAPES[case]
    inputs, out = gemm_graph((sx, sy), dtype, scalars)
    f = on_device(inputs, out)
    runs_on_device(f, Gemm, "gemm")
    sz = sx[:1] + sy[1:]
    c, a, b = data(sz, dtype), data(sx, dtype), data(sy, dtype)
    want = -1.5 * (a.astype("float64") @ b) + 0.5 * c
    extra = (
        []
        if scalars == "constant"
        else [to_device(np.asarray(-1.5, dtype)), to_device(np.asarray(0.5, dtype))]
    )
    for layout in ("contiguous", "stepped", "negative"):
        views = [layouts(v)[layout] for v in (c, a, b)]
        got = f(*views, *extra)
        np.testing.assert_allclose(got, want, rtol=tol(dtype), atol=tol(dtype), err_msg=layout)
    got = f(layouts(c)["transposed"] if c.ndim == 2 else c, layouts(a)["transposed"], b, *extra)
    np.testing.assert_allclose(got, want, rtol=tol(dtype), atol=tol(dtype))


@pytest.mark.parametrize("case", sorted(GEMM_SHAPES))
def test_gemm_in_place_writes_into_z_through_its_strides(case):
    sx, sy = GEMM_SHAPES[case]
    z, x, y = dev(len(sy), "float64", "z"), dev(2, "float64", "x"), dev(len(sy), "float64", "y")
    out = Gemm()(z, np.asarray(2.0), x, y, np.asarray(-1.0))
    f = on_device([In(z, mutable=True), x, y], out)
    runs_on_device(f, Gemm, "gemm")
    assert any(n.op.inplace for n in f.kernels if isinstance(n.op, Gemm))
    c, a, b = data(sx[:1] + sy[1:], "float64"), data(sx, "float64"), data(sy, "float64")
    target = layouts(c)["stepped"]
    got = f(target, a, b)
    want = 2 * a @ b - c
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    if covers("gemm"):  # the backend's own GEMM writes in place
        np.testing.assert_allclose(host(target), want, rtol=1e-12, atol=1e-12)


def test_gemm_reads_float64_device_scalars_for_float32_operands():
    z, x, y = (dev(n, "float32", name) for n, name in ((1, "z"), (2, "x"), (1, "y")))
    alpha, beta = dev(0, "float64", "alpha"), dev(0, "int64", "beta")
    f = on_device([z, alpha, x, y, beta], Gemm()(z, alpha, x, y, beta))
    runs_on_device(f, Gemm, "gemm")
    c, a, b = data(6, "float32"), data((6, 4), "float32"), data(4, "float32")
    got = f(c, to_device(np.asarray(0.5)), a, b, to_device(np.asarray(3)))
    np.testing.assert_allclose(got, 0.5 * a @ b + 3 * c, rtol=1e-5, atol=1e-5)


def test_gemm_with_an_empty_inner_dimension_scales_z():
    inputs, out = gemm_graph(((3, 0), (0, 4)), "float64", "device")
    f = on_device(inputs, out)
    runs_on_device(f, Gemm, "gemm")
    c = data((3, 4), "float64")
    scalars = [to_device(np.asarray(v)) for v in (-1.5, 0.5)]
    got = f(c, np.zeros((3, 0)), np.zeros((0, 4)), *scalars)
    np.testing.assert_allclose(got, 0.5 * c)


def test_gemm_shape_mismatch_is_a_clear_error():
    inputs, out = gemm_graph(((3, 4), (4, 5)), "float64", "constant")
    f = on_device(inputs, out, mode=FAST_DEVICE)
    with pytest.raises(ValueError, match=r"Gemm.*not aligned"):
        f(np.ones((3, 5)), np.ones((3, 4)), np.ones((3, 5)))


# ---------------------------------------------------------------- Ger
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("inplace", [False, True])
def test_ger(dtype, inplace):
    z, x, y, alpha = dev(2, dtype, "z"), dev(1, dtype, "x"), dev(1, dtype, "y"), dev(0, dtype, "a")
    f = on_device([In(z, mutable=inplace), alpha, x, y], Ger()(z, alpha, x, y))
    runs_on_device(f, Ger, "ger")
    if covers("ger"):  # the backend's own Ger works in place when z may be destroyed
        assert any(n.op.inplace == inplace for n in f.kernels if isinstance(n.op, Ger))
    c, a, b = data((7, 300), dtype), data(7, dtype), data(300, dtype)
    want = c + 0.25 * np.outer(a, b)
    for layout in ("contiguous", "stepped", "negative"):
        views = [layouts(v)[layout] for v in (c, a, b)]
        got = f(views[0], to_device(np.asarray(0.25, dtype)), *views[1:])
        np.testing.assert_allclose(got, want, rtol=tol(dtype), atol=tol(dtype), err_msg=layout)


def test_ger_with_empty_vectors():
    z, x, y = dev(2, "float64", "z"), dev(1, "float64", "x"), dev(1, "float64", "y")
    f = on_device([z, x, y], Ger()(z, np.asarray(2.0), x, y))
    runs_on_device(f, Ger, "ger")
    assert f(np.zeros((0, 3)), np.zeros(0), np.ones(3)).shape == (0, 3)


# ---------------------------------------------------------------- a training step
def test_a_logistic_regression_step_runs_its_products_on_the_device():
    x, y = T.matrix("x"), T.lvector("y")
    w = tensorjit.shared(np.zeros((5, 3)), name="w")
    b = tensorjit.shared(np.zeros(3), name="b")
    p = nnet.softmax(T.dot(x, w) + b)
    cost = nnet.categorical_crossentropy(p, y).mean()
    gw, gb = tensorjit.grad(cost, [w, b])
    f = on_device([x, y], cost, updates=[(w, w - 0.1 * gw), (b, b - 0.1 * gb)])
    runs_on_device(f, Dot, "dot")
    runs_on_device(f, Gemm, "gemm")
    xs, ys = data((8, 5), "float64"), np.array([0, 1, 2, 1, 0, 2, 2, 1])
    w_host, b_host = np.zeros((5, 3)), np.zeros(3)
    for _ in range(3):
        f(xs, ys)
        logits = xs @ w_host + b_host
        e = np.exp(logits - logits.max(1, keepdims=True))
        prob = e / e.sum(1, keepdims=True)
        prob[np.arange(8), ys] -= 1
        w_host -= 0.1 * xs.T @ prob / 8
        b_host -= 0.1 * prob.sum(0) / 8
    np.testing.assert_allclose(w.get_value(), w_host, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.get_value(), b_host, rtol=1e-10, atol=1e-12)
