"""C kernels for matmul (batched GEMM with broadcast batches, its loop in C and split
over the thread pool), batched_dot and tensordot against Op.perform under DebugMode, on
every layout BLAS can and can not address."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers.c_backend import NEEDS_C, compiled_with

import tensorjit.tensor as T
from tensorjit.plugins.c_backend.linalg import blas_batched
from tensorjit.tensor import linalg

pytestmark = [NEEDS_C, pytest.mark.usefixtures("module_compile_cache")]

RNG = np.random.default_rng(2)


compiled = functools.partial(compiled_with, "blas", blas_batched.OPS)


def variants(a):
    """The same values: contiguous, Fortran-ordered, strided, reversed."""
    padded = np.zeros(tuple(2 * s + 1 for s in a.shape), a.dtype)
    strided = padded[tuple(slice(None, None, 2) for _ in a.shape)][
        tuple(slice(0, s) for s in a.shape)
    ]
    strided[...] = a
    return {
        "contiguous": a,
        "fortran": np.asfortranarray(a),
        "strided": strided,
        "reversed": np.ascontiguousarray(a[..., ::-1, ::-1])[..., ::-1, ::-1],
    }


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matmul_stacks_all_layouts(dtype):
    a, b = T.tensor3("a", dtype=dtype), T.tensor3("b", dtype=dtype)
    f = compiled([a, b], linalg.matmul(a, b))
    av = RNG.standard_normal((3, 4, 5)).astype(dtype)
    bv = RNG.standard_normal((3, 5, 2)).astype(dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for name, x in variants(av).items():
        for other, y in variants(bv).items():
            got = f(x, y)
            np.testing.assert_allclose(got, av @ bv, rtol=tol, atol=tol, err_msg=name + other)
            assert got.dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_stack_times_a_matrix_is_one_product_and_so_is_its_gradient(dtype):
    # A sequence model's projection: no product per batch index, and the weight's
    # gradient is one GEMM over every row of the stack, not a stack of products summed.
    import tensorjit

    x, w = T.tensor3("x", dtype=dtype), T.matrix("w", dtype=dtype)
    y = linalg.matmul(x, w)
    gx, gw = tensorjit.grad((y * y).sum(), [x, w])
    f = compiled([x, w], [y, gx, gw])
    assert not [n for n in f.fgraph.toposort() if isinstance(n.op, linalg.MatMul)]
    assert len([n for n in f.fgraph.toposort() if isinstance(n.op, linalg.TensorDot)]) == 3
    xv = RNG.standard_normal((4, 6, 5)).astype(dtype)
    wv = RNG.standard_normal((5, 3)).astype(dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for layout, xs in variants(xv).items():
        got_y, got_gx, got_gw = f(xs, wv)
        np.testing.assert_allclose(got_y, xv @ wv, rtol=tol, atol=tol, err_msg=layout)
        np.testing.assert_allclose(got_gx, 2 * (xv @ wv) @ wv.T, rtol=tol, atol=tol)
        gw_want = np.einsum("bti,btj->ij", xv, 2 * (xv @ wv))
        np.testing.assert_allclose(got_gw, gw_want, rtol=tol, atol=10 * tol)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_stack_split_over_two_threads_gives_the_products_of_one(dtype):
    """With config threads 2 the stack's products are split over the pool (two or more a
    thread, each on one BLAS thread): every layout, a broadcast batch and a reversed
    one, against one thread's products."""
    import tensorjit

    a = T.tensor(dtype, shape=(None, 1, None, None), name="a")
    b = T.tensor3("b", dtype=dtype)
    av = RNG.standard_normal((3, 1, 6, 5)).astype(dtype)
    bv = RNG.standard_normal((4, 5, 7)).astype(dtype)
    with tensorjit.config.change_flags(threads=1):
        want = compiled([a, b], linalg.matmul(a, b))(av, bv)
    with tensorjit.config.change_flags(threads=2):
        f = compiled([a, b], linalg.matmul(a, b))
        tol = 1e-5 if dtype == "float32" else 1e-12
        for name, x in variants(av).items():
            for other, y in variants(bv).items():
                got = f(x, y)
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name + other)
        np.testing.assert_allclose(f(av[::-1], bv[::-1]), np.matmul(av[::-1], bv[::-1]), rtol=tol)


def test_a_split_stack_without_a_per_thread_blas_count_restores_the_library_count():
    """Where OpenBLAS has no per-thread count (NumPy 2.5's scipy-openblas64), the split
    stack sets the library's count to one for the call and restores it after
    (linalg/blas_threads.py); run here by initialising the kernels without the setter."""
    import tensorjit
    from tensorjit.plugins.c_backend.build import threads
    from tensorjit.plugins.c_backend.linalg import blas

    chosen = blas.provider()
    local, setter, getter = threads.blas_thread_controls(chosen.where)
    if not (setter and getter):
        pytest.skip(f"the BLAS at {chosen.where} has no thread-count setter and getter")
    a, b = T.tensor3("a"), T.tensor3("b")
    av, bv = RNG.standard_normal((8, 9, 4)), RNG.standard_normal((8, 4, 3))
    ffi, lib = blas.library()
    lib.tj_blas_threads(*(ffi.cast("void *", p) for p in (0, setter, getter)))
    try:
        with tensorjit.config.change_flags(threads=2):
            before = threads.blas_threads()
            got = compiled([a, b], linalg.matmul(a, b))(av, bv)
            assert threads.blas_threads() == before == 2
    finally:
        lib.tj_blas_threads(*(ffi.cast("void *", p) for p in (local, setter, getter)))
    np.testing.assert_allclose(got, av @ bv, rtol=1e-12, atol=1e-12)


def test_matmul_broadcast_batches_and_empty():
    a = T.tensor("float64", shape=(None, 1, None, None), name="a")
    b = T.tensor3("b")
    f = compiled([a, b], linalg.matmul(a, b))
    av, bv = RNG.standard_normal((2, 1, 3, 4)), RNG.standard_normal((5, 4, 2))
    np.testing.assert_allclose(f(av, bv), np.matmul(av, bv))
    assert f(np.zeros((2, 1, 3, 0)), np.zeros((5, 0, 2))).shape == (2, 5, 3, 2)
    np.testing.assert_array_equal(f(np.zeros((2, 1, 3, 0)), np.zeros((5, 0, 2))), 0)
    assert f(np.zeros((0, 1, 3, 4)), bv).shape == (0, 5, 3, 2)


def test_matmul_shape_errors_are_numpys():
    a, b = T.tensor3("a"), T.tensor3("b")
    f = compiled([a, b], linalg.matmul(a, b))
    with pytest.raises(ValueError):
        f(np.zeros((2, 3, 4)), np.zeros((2, 5, 2)))
    with pytest.raises(ValueError):
        f(np.zeros((2, 3, 4)), np.zeros((3, 4, 2)))


def test_batched_dot():
    a, b = T.tensor3("a"), T.tensor3("b")
    f = compiled([a, b], linalg.batched_dot(a, b))
    av, bv = RNG.standard_normal((4, 2, 3)), RNG.standard_normal((4, 3, 5))
    np.testing.assert_allclose(f(av, bv), np.einsum("bij,bjk->bik", av, bv))


@pytest.mark.parametrize(
    "axes, b_shape", [(1, (5, 2, 3)), (2, (4, 5, 2)), (((0, 2), (1, 0)), (5, 3, 2))], ids=str
)
def test_tensordot_axes_and_layouts(axes, b_shape):
    a, b = T.tensor3("a"), T.tensor3("b")
    av, bv = RNG.standard_normal((3, 4, 5)), RNG.standard_normal(b_shape)
    f = compiled([a, b], linalg.tensordot(a, b, axes=axes))
    expected = np.tensordot(av, bv, axes=axes)
    for name, x in variants(av).items():
        for other, y in variants(bv).items():
            got = f(x, y)
            np.testing.assert_allclose(got, expected, atol=1e-12, err_msg=name + other)
    with pytest.raises(ValueError, match="tensordot: shape mismatch"):
        f(av, np.zeros((7, 7, 7)))
