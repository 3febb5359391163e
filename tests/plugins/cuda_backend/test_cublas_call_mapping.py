"""The CUDA backend's products map row-major operands of any supported layout onto
column-major BLAS calls (blas_calls.py): here each call is made by the host's BLAS
(SciPy's, the same Fortran interface cuBLAS follows: ops, leading dimensions, element
increments) on host buffers with the same layouts, and must equal NumPy. On a GPU the
same call objects go to cuBLAS (the device tests)."""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest

from tensorjit.plugins.c_backend.linalg.blas import ROUTINES, _scipy_blas
from tensorjit.plugins.cuda_backend.blas_calls import (
    Matrix,
    column_major,
    gemm_call,
    gemv_call,
    ger_call,
)

rng = np.random.default_rng(0)
P = ctypes.c_void_p
ROUTINE = dict(zip(ROUTINES, _scipy_blas().pointers))
FUNCTIONS = {
    "gemm": ctypes.CFUNCTYPE(None, *[P] * 13),
    "gemv": ctypes.CFUNCTYPE(None, *[P] * 11),
    "ger": ctypes.CFUNCTYPE(None, *[P] * 9),
}
C_TYPE = {"float64": ctypes.c_double, "float32": ctypes.c_float}


def routine(kind: str, dtype: str):
    prefix = "d" if dtype == "float64" else "s"
    return FUNCTIONS[kind](ROUTINE[prefix + kind])


def ref(value, ctype=ctypes.c_int):
    """A by-reference Fortran argument (kept alive by the caller)."""
    return ctypes.byref(ctype(value)) if not isinstance(value, bytes) else ctypes.c_char_p(value)


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def matrix(a: np.ndarray) -> Matrix:
    size = a.itemsize
    return Matrix(address(a), a.shape[0], a.shape[1], a.strides[0] // size, a.strides[1] // size)


def layouts(rows: int, cols: int, dtype: str) -> dict[str, np.ndarray]:
    """A (rows x cols) matrix laid out as C, Fortran, a slice of a wider C matrix, a
    slice of a taller Fortran one, and a transposed C matrix."""
    value = rng.standard_normal((rows, cols)).astype(dtype)
    wide = np.zeros((rows + 2, cols + 3), dtype)
    wide[1 : rows + 1, 2 : cols + 2] = value
    tall = np.asfortranarray(np.zeros((rows + 3, cols + 1), dtype))
    tall[2 : rows + 2, :cols] = value
    return {
        "C": np.ascontiguousarray(value),
        "F": np.asfortranarray(value),
        "C-slice": wide[1 : rows + 1, 2 : cols + 2],
        "F-slice": tall[2 : rows + 2, :cols],
        "transposed": np.ascontiguousarray(value.T).T,
    }


def blas_gemm(call, alpha, beta, dtype):
    t = C_TYPE[dtype]
    routine("gemm", dtype)(
        ctypes.c_char_p(call.transa.encode()),
        ctypes.c_char_p(call.transb.encode()),
        *(ref(v) for v in (call.m, call.n, call.k)),
        ref(alpha, t),
        P(call.a),
        ref(call.lda),
        P(call.b),
        ref(call.ldb),
        ref(beta, t),
        P(call.c),
        ref(call.ldc),
    )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("m,n,k", [(3, 4, 5), (1, 4, 3), (3, 1, 2), (2, 3, 1), (1, 1, 4)])
def test_gemm_calls_give_numpys_product_for_every_layout_of_each_operand(dtype, m, n, k):
    tol = 1e-12 if dtype == "float64" else 1e-5
    a_layouts, b_layouts = layouts(m, k, dtype), layouts(k, n, dtype)
    for (la, a), (lb, b), lc in itertools.product(a_layouts.items(), b_layouts.items(), "CF"):
        c0 = rng.standard_normal((m, n)).astype(dtype)
        c = np.array(c0, order=lc)
        call = gemm_call(matrix(c), matrix(a), matrix(b))
        assert call is not None
        blas_gemm(call, 1.5, -0.5, dtype)
        want = 1.5 * (a.astype("float64") @ b) - 0.5 * c0
        np.testing.assert_allclose(c, want, rtol=tol, atol=tol, err_msg=f"A {la}, B {lb}, C {lc}")


def test_a_target_blas_can_not_address_is_reported_not_guessed():
    base = np.zeros((4, 6))
    for bad in (base[:, ::-1], base[::-1, :], np.broadcast_to(np.ones(3), (4, 3)), base[::2, ::2]):
        assert column_major(matrix(bad)) is None, bad.strides
        assert gemm_call(matrix(bad), matrix(np.ones((4, 2))), matrix(np.ones((2, 3)))) is None


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gemv_calls_give_numpys_matrix_vector_products(dtype):
    tol = 1e-12 if dtype == "float64" else 1e-5
    t = C_TYPE[dtype]
    for (name, a), step in itertools.product(layouts(4, 3, dtype).items(), (1, 2)):
        x = rng.standard_normal(3 * step).astype(dtype)[::step]
        y0 = rng.standard_normal(8).astype(dtype)
        y = y0.copy()[::2]
        call = gemv_call(address(y), 2, matrix(a), address(x), step)
        routine("gemv", dtype)(
            ctypes.c_char_p(call.trans.encode()),
            ref(call.m),
            ref(call.n),
            ref(2.0, t),
            P(call.a),
            ref(call.lda),
            P(call.x),
            ref(call.incx),
            ref(1.0, t),
            P(call.y),
            ref(call.incy),
        )
        want = 2.0 * (a.astype("float64") @ x) + y0[::2]
        np.testing.assert_allclose(y, want, rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_ger_calls_give_numpys_rank_one_updates(dtype):
    tol = 1e-12 if dtype == "float64" else 1e-5
    t = C_TYPE[dtype]
    x, y = rng.standard_normal(4).astype(dtype), rng.standard_normal(6).astype(dtype)[::2]
    for name, a in layouts(4, 3, dtype).items():
        before = a.copy()
        call = ger_call(matrix(a), address(x), 1, address(y), 2)
        routine("ger", dtype)(
            ref(call.m),
            ref(call.n),
            ref(0.5, t),
            P(call.x),
            ref(call.incx),
            P(call.y),
            ref(call.incy),
            P(call.a),
            ref(call.lda),
        )
        np.testing.assert_allclose(
            a, before + 0.5 * np.outer(x, y), rtol=tol, atol=tol, err_msg=name
        )
