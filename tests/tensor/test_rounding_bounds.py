"""DebugMode's comparison of kernels with Op.perform allows exactly what summation order
explains (tensor/rounding.py): a kernel that sums in another order (another CPU's vector
width, another BLAS kernel) agrees, a wrong one does not, on every machine."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensorjit.tensor as T
from tensorjit.core.compile.debugmode import BadKernel, checked_kernel
from tensorjit.core.registries import Kernel
from tensorjit.tensor.rounding import product_bound, summation_bound


def _sequential_sum(values: np.ndarray) -> np.float32:
    total = np.float32(0)
    for v in values:
        total = np.float32(total + v)
    return total


def test_two_float32_summation_orders_stay_within_the_bound():
    rng = np.random.default_rng(11)
    half = (rng.standard_normal(10000) * 1e3).astype(np.float32)
    values = rng.permutation(np.concatenate([half, -half]))  # sums to 0 exactly
    exact = math.fsum(values.astype(np.float64))
    pairwise = float(np.sum(values))  # NumPy's pairwise order
    forward, backward = float(_sequential_sum(values)), float(_sequential_sum(values[::-1]))
    bound = summation_bound(np.abs(values.astype(np.float64)).sum(), values.size, "float32")
    for got in (pairwise, forward, backward):
        assert abs(got - exact) <= bound / 2
    assert abs(forward - backward) <= bound
    # the default float32 tolerance would not hold for these sums: it is the order
    assert abs(forward - backward) > 1e-5 * abs(exact) + 1e-5


def test_integer_sums_have_no_bound():
    assert summation_bound(10.0, 5, "int32") is None
    assert product_bound(np.ones((2, 3), "int64"), np.ones((3, 2), "int64"), "int64") is None


def _run_checked(node, compute):
    kernel = Kernel("reordered", "python", lambda n: _store(compute))
    run = checked_kernel(kernel).factory(node)
    storage = [[None]]
    return run, storage


def _store(compute):
    def run(inputs, output_storage):
        output_storage[0][0] = compute(*inputs)

    return run


@pytest.mark.parametrize("perturb", [0.0, 1.0])
def test_debugmode_accepts_another_order_and_refuses_a_wrong_value(perturb):
    """A float32 dot computed with its terms summed from the last to the first agrees
    with perform; the same plus one unit of the bound per element does not."""
    rng = np.random.default_rng(12)
    xv = rng.standard_normal((40, 3000)).astype(np.float32)
    yv = rng.standard_normal((3000, 3)).astype(np.float32)
    x, y = T.fmatrix("x"), T.fmatrix("y")
    node = T.dot(x, y).owner
    bound = product_bound(xv, yv, "float32")

    def reversed_order(a, b):
        acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
        for k in reversed(range(a.shape[1])):
            acc += a[:, k : k + 1] * b[k : k + 1, :]
        return acc + (perturb * 1.01 * bound).astype(np.float32)

    run, storage = _run_checked(node, reversed_order)
    if perturb:
        with pytest.raises(BadKernel, match="Op.perform gives"):
            run([xv, yv], storage)
    else:
        run([xv, yv], storage)
        diff = np.abs(storage[0][0] - np.dot(xv, yv))
        assert (diff > 1e-5 * np.abs(np.dot(xv, yv)) + 1e-5).any()  # the bound mattered


def test_sum_reduction_bound_follows_the_reduced_axis():
    x = T.fmatrix("x")
    node = T.sum(x, axis=1).owner
    xv = np.ones((2, 5000), np.float32)
    (bound,) = node.op.rounding_bounds(node, [xv])
    assert bound.shape == (2,)
    np.testing.assert_allclose(bound, summation_bound(5000.0, 5000, "float32"))
    assert T.max(x, axis=1).owner.op.rounding_bounds(None, [xv]) is None


def _gemm_node(dtype: str, inplace: bool):
    from tensorjit.tensor.blas import Gemm

    z, x, y = (T.matrix(n, dtype=dtype) for n in "zxy")
    a, b = T.scalar("a", dtype=dtype), T.scalar("b", dtype=dtype)
    return Gemm(inplace=inplace)(z, a, x, y, b).owner


@pytest.mark.parametrize("inplace", [False, True])
def test_a_wrong_inplace_gemm_is_caught(inplace):
    """The bound is taken before perform overwrites z: an in-place Gemm whose kernel
    writes zeros where the answer is 1e8 * z fails as the out-of-place one does."""
    node = _gemm_node("float32", inplace)
    zv, xv, yv = (
        np.ones((3, 2), np.float32),
        np.ones((3, 4), np.float32),
        np.ones((4, 2), np.float32),
    )
    run, storage = _run_checked(node, lambda z, a, x, y, b: np.zeros_like(z))
    with pytest.raises(BadKernel):
        run([zv, np.float32(1), xv, yv, np.float32(1e8)], storage)


def test_gemm_bounds_of_complex_and_of_unread_operands():
    complex_node = _gemm_node("complex128", False)
    zv = np.full((2, 2), 1j)
    (bound,) = complex_node.op.rounding_bounds(
        complex_node, [zv, np.complex128(1j), zv, zv, np.complex128(2)]
    )
    assert np.all(bound > 0)  # the moduli of complex terms, not their real parts
    node = _gemm_node("float32", False)
    nan = np.full((2, 2), np.nan, np.float32)
    with np.errstate(all="raise"):  # no warning from 0 * inf or 0 * NaN
        (bound,) = node.op.rounding_bounds(
            node,
            [
                nan,
                np.float32(1),
                np.ones((2, 2), np.float32),
                np.ones((2, 2), np.float32),
                np.float32(0),
            ],
        )
        assert np.isfinite(bound).all()  # beta 0: z is not read, its NaNs bound nothing
        (bound,) = node.op.rounding_bounds(
            node, [np.ones((2, 2), np.float32), np.float32(0), nan, nan, np.float32(1)]
        )
        assert np.isfinite(bound).all()  # alpha 0: neither x nor y is read
