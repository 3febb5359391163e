"""The sparse plugin's C kernels (backend "c") for sparse x dense products, against scipy:
CSR/CSC, float32/float64, int32/int64 indices, empty rows, explicit zeros, unsorted and
duplicate indices, 0-size shapes, non-contiguous dense operands, output-buffer reuse,
malformed matrices; all under DebugMode (which compares each kernel with Op.perform);
gradients compiled with the C backend."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as ss

import tensorjit
import tensorjit.sparse as S
import tensorjit.tensor as T
from tensorjit.core.hooks import registries
from tensorjit.plugins.sparse import c_kernels
from tensorjit.plugins.sparse.basic import DenseSparseDot, StructuredDot


def _c_unavailable() -> str | None:
    try:
        return registries().backends.unavailable_reason("c")
    except Exception as exc:  # the C backend is not registered
        return str(exc)


_REASON = _c_unavailable()
pytestmark = pytest.mark.skipif(
    _REASON is not None, reason=f"no C compiler for the C backend: {_REASON}"
)

DEBUG_C = tensorjit.Mode(
    "DebugMode", tensorjit.FAST_RUN.query, backends=("c", "python"), debug=True
)
FAST_C = tensorjit.FAST_RUN.with_backends("c", "python")
SD = "sparse:c_structured_dot"
DSD = "sparse:c_dense_sparse_dot"
FORMATS = ["csr", "csc"]
DTYPES = ["float64", "float32"]


def messy(fmt, shape, dtype="float64", index="int32", seed=0, density=0.3):
    """A random matrix with empty rows and columns, explicit zeros, duplicate entries
    and unsorted indices, stored with ``index`` index arrays."""
    rng = np.random.default_rng(seed)
    m, n = shape
    nnz = int(density * m * n)
    rows = rng.integers(0, m, nnz) if m else np.zeros(0, int)
    cols = rng.integers(0, n, nnz) if n else np.zeros(0, int)
    if m > 2:
        keep = rows != 1  # row 1 is empty
        rows, cols = rows[keep], cols[keep]
    if n > 2:
        keep = cols != 2  # column 2 is empty
        rows, cols = rows[keep], cols[keep]
    data = rng.uniform(-2, 2, len(rows))
    data[::5] = 0.0  # explicit zeros
    if len(rows) > 3:  # duplicates
        rows = np.concatenate([rows, rows[:3]])
        cols = np.concatenate([cols, cols[:3]])
        data = np.concatenate([data, [0.5, -1.0, 2.0]])
    order = rng.permutation(len(rows))  # unsorted within each row/column
    rows, cols, data = rows[order], cols[order], data[order]
    major, minor = (rows, cols) if fmt == "csr" else (cols, rows)
    nmajor = m if fmt == "csr" else n
    perm = np.argsort(major, kind="stable")
    indptr = np.zeros(nmajor + 1, np.int64)
    np.add.at(indptr, major + 1, 1)
    indptr = np.cumsum(indptr)
    cls = ss.csr_matrix if fmt == "csr" else ss.csc_matrix
    x = cls((data[perm].astype(dtype), minor[perm], indptr), shape=shape)
    x.indices, x.indptr = x.indices.astype(index), x.indptr.astype(index)  # scipy downcasts
    x.has_sorted_indices = False
    assert x.indices.dtype == np.dtype(index) and x.dtype == np.dtype(dtype)
    return x


def sparse_var(fmt, dtype, name="x"):
    return (S.csr_matrix if fmt == "csr" else S.csc_matrix)(name, dtype=dtype)


def kernel_names(f):
    return {k.name for k in f.kernels.values()}


def tol(dtype):
    return {"rtol": 1e-5, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-12}


def test_registered_for_c_backend():
    table = registries().kernels
    assert table.lookup("c", StructuredDot()).name == SD
    assert table.lookup("c", DenseSparseDot()).name == DSD
    assert table.lookup("c", StructuredDot()).plugin == "sparse"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sparse_dense_vs_scipy(fmt, dtype):
    x, ym, yv = sparse_var(fmt, dtype), T.matrix("ym", dtype=dtype), T.vector("yv", dtype=dtype)
    f = tensorjit.function([x, ym, yv], [S.dot(x, ym), S.dot(x, yv)], mode=DEBUG_C)
    assert kernel_names(f) == {"debug:" + SD}
    rng = np.random.default_rng(1)
    for index in ("int32", "int64"):
        # n of 1, 3, 8 (CSC: CSR conversion), 40 (CSR: a full column block and a tail)
        for (m, k), n in [((30, 20), 40), ((30, 20), 8), ((7, 5), 3), ((200, 3), 1)]:
            a = messy(fmt, (m, k), dtype, index, seed=m + n)
            ym_v = rng.standard_normal((k, n)).astype(dtype)
            yv_v = rng.standard_normal(k).astype(dtype)
            got_m, got_v = f(a, ym_v, yv_v)
            assert got_m.dtype == dtype and got_m.flags.c_contiguous
            np.testing.assert_allclose(got_m, a @ ym_v, **tol(dtype))
            np.testing.assert_allclose(got_v, a @ yv_v, **tol(dtype))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", [(0, 4), (4, 0), (0, 0), (3, 5)])
@pytest.mark.parametrize("n", [0, 2, 9])
def test_zero_sizes(fmt, shape, n):
    x, y = sparse_var(fmt, "float64"), T.matrix("y")
    f = tensorjit.function([x, y], S.dot(x, y), mode=DEBUG_C)
    a = ss.csr_matrix(shape).asformat(fmt)  # no stored values (3 x 5: all rows empty)
    b = np.ones((shape[1], n))
    got = f(a, b)
    assert got.shape == (shape[0], n)
    np.testing.assert_array_equal(got, a @ b)
    g = tensorjit.function([y, x], S.dot(y, x), mode=DEBUG_C)
    c = np.ones((n, shape[0]))
    np.testing.assert_array_equal(g(c, a), c @ a)


@pytest.mark.parametrize("fmt", FORMATS)
def test_non_contiguous_dense(fmt):
    x, y = sparse_var(fmt, "float64"), T.matrix("y")
    f = tensorjit.function([x, y], S.dot(x, y), mode=DEBUG_C)
    a = messy(fmt, (25, 12))
    big = np.random.default_rng(2).standard_normal((40, 30))
    for b in [
        big[:12, :10].T.T,  # row-strided view: passed with its row stride
        big[::3, 5:15][:12],  # row step 3
        big[:10, :12].T,  # Fortran order: copied to C order
        big[:24:2, ::-1][:, :9],  # negative column stride: copied
        big[:12, ::2],  # column step 2: copied
    ]:
        assert not b.flags.c_contiguous
        np.testing.assert_allclose(f(a, b), a @ b, rtol=1e-12, atol=1e-12)
    # dense x sparse reads its dense operand through both strides
    y2 = T.matrix("a")
    g = tensorjit.function([y2, x], S.dot(y2, x), mode=DEBUG_C)
    for b in [big[:25, :7].T, big[::2, ::-1][:6, :25], big[:5, 1:26]]:
        np.testing.assert_allclose(g(b, a), b @ a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_sparse_vs_scipy(fmt, dtype):
    am, av, x = T.matrix("am", dtype=dtype), T.vector("av", dtype=dtype), sparse_var(fmt, dtype)
    f = tensorjit.function([am, av, x], [S.dot(am, x), S.dot(av, x)], mode=DEBUG_C)
    assert kernel_names(f) == {"debug:" + DSD}
    rng = np.random.default_rng(3)
    for index in ("int32", "int64"):
        for (k, n), m in [((20, 30), 6), ((5, 7), 1), ((3, 40), 11)]:
            a = messy(fmt, (k, n), dtype, index, seed=k * m)
            am_v = rng.standard_normal((m, k)).astype(dtype)
            av_v = rng.standard_normal(k).astype(dtype)
            got_m, got_v = f(am_v, av_v, a)
            np.testing.assert_allclose(got_m, am_v @ a, **tol(dtype))
            np.testing.assert_allclose(got_v, av_v @ a, **tol(dtype))


def test_mixed_and_unsupported_dtypes():
    # float32 sparse x float64 dense -> float64 (the C kernel casts the float32 values)
    x, y = S.csr_matrix("x", dtype="float32"), T.matrix("y", dtype="float64")
    f = tensorjit.function([x, y], S.dot(x, y), mode=DEBUG_C)
    a = messy("csr", (9, 6), "float32")
    b = np.random.default_rng(4).standard_normal((6, 5))
    got = f(a, b)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)
    # integer products: the factory returns Op.perform's run (same kernel entry)
    xi, yi = S.csc_matrix("xi", dtype="int64"), T.matrix("yi", dtype="int64")
    g = tensorjit.function([xi, yi], S.dot(xi, yi), mode=DEBUG_C)
    assert not c_kernels.supported(next(iter(g.kernels)))
    ai = ss.csc_matrix(np.array([[1, 0], [0, 3], [2, 0]], dtype=np.int64))
    bi = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int64)
    np.testing.assert_array_equal(g(ai, bi), ai @ bi)


@pytest.mark.parametrize("fmt", FORMATS)
def test_output_buffer_reused(fmt):
    x, y = sparse_var(fmt, "float64"), T.matrix("y")
    node = S.dot(x, y).owner
    run = c_kernels.structured_dot_factory(node)
    a = messy(fmt, (12, 7))
    b = np.random.default_rng(5).standard_normal((7, 10))
    storage = [[np.full((12, 10), np.nan)]]
    buf = storage[0][0]
    run([a, b], storage)
    assert storage[0][0] is buf
    np.testing.assert_allclose(buf, a @ b, rtol=1e-12, atol=1e-12)
    storage = [[np.empty((12, 10), np.float32)]]  # wrong dtype: a new buffer
    run([a, b], storage)
    assert storage[0][0].dtype == np.float64
    np.testing.assert_allclose(storage[0][0], a @ b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fmt", FORMATS)
def test_malformed_matrix_raises(fmt):
    x, y = sparse_var(fmt, "float64"), T.matrix("y")
    run = c_kernels.structured_dot_factory(S.dot(x, y).owner)
    a = messy(fmt, (6, 5))
    a.indices[0] = 99  # out of range: scipy would read out of bounds
    with pytest.raises(ValueError, match="malformed"):
        run([a, np.ones((5, 4))], [[None]])
    a = messy(fmt, (6, 5))
    a.indptr[2], a.indptr[3] = a.indptr[3], a.indptr[2] + 100
    with pytest.raises(ValueError, match="malformed"):
        run([a, np.ones((5, 4))], [[None]])


def test_shape_mismatch_raises_perform_error():
    x, y = S.csr_matrix("x"), T.matrix("y")
    f = tensorjit.function([x, y], S.dot(x, y), mode=FAST_C)
    with pytest.raises(ValueError, match="not aligned"):
        f(messy("csr", (4, 3)), np.ones((5, 2)))


@pytest.mark.parametrize("fmt", FORMATS)
def test_gradients_with_c_backend(fmt):
    x, y = sparse_var(fmt, "float64"), T.matrix("y")
    cost = T.sum(T.tanh(S.dot(x, y)) ** 2)
    gx, gy = tensorjit.grad(cost, [x, y])
    outs = [cost, S.dense_from_sparse(gx), gy]
    f = tensorjit.function([x, y], outs, mode=DEBUG_C)
    names = kernel_names(f)
    # dot(x.T, g) reads x's arrays in the other format (x.T is a view): both products
    # are StructuredDot's kernel, the second through the other format's loop.
    assert "debug:" + SD in names
    ref = tensorjit.function([x, y], outs, mode=tensorjit.FAST_RUN.with_backends("python"))
    a = messy(fmt, (15, 8))
    b = np.random.default_rng(6).standard_normal((8, 9))
    for got, want in zip(f(a, b), ref(a, b)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    rng = np.random.default_rng(7)
    S.verify_grad_sparse(S.dot, [messy(fmt, (5, 4)), rng.uniform(size=(4, 3))], mode=FAST_C)
    S.verify_grad_sparse(S.dot, [rng.uniform(size=(2, 5)), messy(fmt, (5, 4))], mode=FAST_C)
