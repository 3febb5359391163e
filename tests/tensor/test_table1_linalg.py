"""Linear algebra ops (tensorjit.tensor.linalg) against NumPy/SciPy: values, dtypes,
static and inferred shapes, gradients, DebugMode and error messages."""

import numpy as np
import pytest
import scipy.linalg

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.gradient import NullGradError
from tensorjit.tensor import linalg as L


def rng(seed=0):
    return np.random.default_rng(seed)


def randn(*shape, seed=0, dtype="float64"):
    return rng(seed).normal(size=shape).astype(dtype)


def spd(n, seed=0, dtype="float64"):
    a = randn(n, n, seed=seed)
    return (a @ a.T + n * np.eye(n)).astype(dtype)


def well_conditioned(n, seed=0):
    return randn(n, n, seed=seed) + 3 * n**0.5 * np.eye(n)


def sym_in(tag, value):
    """A symbolic input with unknown static shape for ``value``."""
    return T.tensor(value.dtype, shape=(None,) * value.ndim, name=tag)


def run(outputs, inputs, values, mode="DebugMode"):
    return tensorjit.function(inputs, outputs, mode=mode)(*values)


def check(fn, values, ref, op_classes, rtol=1e-7, atol=1e-9, static=False):
    """``fn`` of symbolic inputs vs ``ref`` of the values: DebugMode run, dtypes, static
    shapes and shapes inferred without running the op."""
    ins = [
        T.tensor(v.dtype, shape=v.shape if static else (None,) * v.ndim, name=f"in{i}")
        for i, v in enumerate(values)
    ]
    outs = fn(*ins)
    single = not isinstance(outs, (tuple, list))
    outs = [outs] if single else list(outs)
    refs = [ref(*values)] if single else list(ref(*values))
    got = run(outs, ins, values)
    for out, g, r in zip(outs, got, refs):
        r = np.asarray(r)
        assert isinstance(g, np.ndarray)
        assert g.dtype == r.dtype, (g.dtype, r.dtype)
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)
        assert all(s is None or s == n for s, n in zip(out.type.shape, g.shape))
        assert out.type.dtype == g.dtype.name
        if static:
            assert out.type.shape == r.shape
    # infer_shape: the shapes come without computing the op
    f = tensorjit.function(ins, [o.shape for o in outs], mode="FAST_RUN", on_unused_input="ignore")
    for s, r in zip(f(*values), refs):
        assert tuple(s) == np.shape(r)
    assert not any(isinstance(n.op, op_classes) for n in f.fgraph.apply_nodes)
    return got


def vgrad(fn, values, **kwargs):
    T.verify_grad(fn, values, rng=rng(1), **kwargs)


# ---------------------------------------------------------------- matmul
MATMUL_SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3, 4)),
    ((1, 1), (1, 1)),
    ((5, 2, 3), (5, 3, 4)),
    ((5, 2, 3), (3, 4)),
    ((3,), (5, 3, 4)),
    ((5, 2, 3), (3,)),
    ((2, 1, 2, 3), (4, 3, 2)),
    ((0, 2, 3), (3, 4)),
    ((2, 0), (0, 3)),
    ((4, 2, 0), (4, 0, 3)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_values(sa, sb):
    a, b = randn(*sa, seed=1), randn(*sb, seed=2)
    check(L.matmul, [a, b], np.matmul, (L.MatMul, T.Dot, L.TensorDot), static=True)
    if (2, 1, 2, 3) != sa:  # run-time-only length 1 does not broadcast (see the errors test)
        check(L.matmul, [a, b], np.matmul, (L.MatMul, T.Dot, L.TensorDot))


@pytest.mark.parametrize("da,db", [("float32", "float32"), ("int32", "float32"), ("int8", "int8")])
def test_matmul_dtypes(da, db):
    a = (randn(2, 3, 4) * 3).astype(da)
    b = (randn(2, 4, 2, seed=1) * 3).astype(db)
    check(L.matmul, [a, b], np.matmul, L.MatMul, rtol=1e-5)


@pytest.mark.parametrize("sa,sb", [((2, 3), (3, 4)), ((5, 2, 3), (5, 3, 4)), ((2, 3), (4, 3, 2))])
def test_matmul_grad(sa, sb):
    vgrad(L.matmul, [randn(*sa, seed=1), randn(*sb, seed=2)])


def test_matmul_grad_vectors_and_static_broadcast():
    vgrad(lambda a, b: L.matmul(a, b), [randn(3, seed=1), randn(2, 3, 4, seed=2)])
    vgrad(lambda a, b: L.matmul(a, b), [randn(2, 3, 4, seed=1), randn(4, seed=2)])
    # a batch dimension of static length 1 broadcasts (and its gradient is summed)
    vgrad(lambda a, b: L.matmul(a, b), [randn(1, 2, 3, seed=1), randn(4, 3, 2, seed=2)])


def test_matmul_errors():
    a, b = T.tensor3("a"), T.tensor("float64", shape=(None, 4, 2), name="b")
    with pytest.raises(ValueError, match="scalar operands"):
        L.matmul(T.scalar("s"), a)
    c = T.tensor("float64", shape=(None, 2, 3), name="c")
    with pytest.raises(ValueError, match="not aligned.*'c'"):
        L.matmul(c, b)
    d = T.tensor("float64", shape=(3, 2, 4), name="d")
    with pytest.raises(ValueError, match="batch dimensions.*'d'.*'e'"):
        L.matmul(d, T.tensor("float64", shape=(5, 4, 2), name="e"))
    f = tensorjit.function([a, b], L.matmul(a, b))
    with pytest.raises(ValueError, match="not aligned.*'a'"):
        f(randn(2, 2, 3), randn(2, 4, 2))
    with pytest.raises(ValueError, match="batch dimensions .* do not match"):
        f(randn(2, 2, 4), randn(3, 4, 2))
    with pytest.raises(ValueError, match="batch dimensions .* do not match"):
        f(randn(1, 2, 4), randn(3, 4, 2))  # length 1 only at run time: no broadcasting


# ---------------------------------------------------------------- tensordot
TENSORDOT_CASES = [
    ((2, 3, 4), (3, 4, 5), 2),
    ((2, 3), (3, 4), 1),
    ((2, 3), (4, 5), 0),
    ((3,), (3,), 1),
    ((2, 3, 4), (4, 2, 5), ([0, 2], [1, 0])),
    ((5, 2, 3), (3, 2, 5), ([0, 2, 1], [2, 0, 1])),
    ((2, 3), (3, 2), ([-1], [0])),
    ((2, 0), (0, 3), 1),
    ((1, 1), (1, 1), 2),
]


@pytest.mark.parametrize("sa,sb,axes", TENSORDOT_CASES)
def test_tensordot(sa, sb, axes):
    a, b = randn(*sa, seed=1), randn(*sb, seed=2)
    check(lambda x, y: L.tensordot(x, y, axes), [a, b], lambda x, y: np.tensordot(x, y, axes),
          L.TensorDot, static=True)  # fmt: skip
    if a.size and b.size:
        vgrad(lambda x, y: L.tensordot(x, y, axes), [a, b])


def test_tensordot_dtype_and_errors():
    a = np.arange(6, dtype="int16").reshape(2, 3)
    b = np.arange(12, dtype="int8").reshape(3, 4)
    check(lambda x, y: L.tensordot(x, y, 1), [a, b], lambda x, y: np.tensordot(x, y, 1),
          L.TensorDot)  # fmt: skip
    x = T.tensor("float64", shape=(2, 3), name="x")
    y = T.tensor("float64", shape=(4, 5), name="y")
    with pytest.raises(ValueError, match="shape mismatch.*'x'.*'y'"):
        L.tensordot(x, y, 1)
    with pytest.raises(ValueError, match="out of range"):
        L.tensordot(x, y, 3)
    with pytest.raises(ValueError, match="out of range"):
        L.tensordot(x, y, ([2], [0]))
    with pytest.raises(ValueError, match="pair 2 axes"):
        L.tensordot(x, y, ([0, 1], [0]))
    with pytest.raises(TypeError, match="axes must be"):
        L.tensordot(x, y, "ab")
    m, n = T.matrix("m"), T.matrix("n")
    f = tensorjit.function([m, n], L.tensordot(m, n, 1))
    with pytest.raises(ValueError, match="shape mismatch.*'m'"):
        f(randn(2, 3), randn(4, 2))


# ---------------------------------------------------------------- batched_dot
BATCHED_CASES = [
    ((4, 2, 3), (4, 3, 5)),
    ((4, 3), (4, 3)),
    ((4, 2, 3), (4, 3)),
    ((4, 3), (4, 3, 5)),
    ((1, 1, 1), (1, 1, 1)),
    ((0, 2, 3), (0, 3, 5)),
]


def np_batched_dot(a, b):
    if len(a):
        return np.stack([np.dot(x, y) for x, y in zip(a, b)])
    return np.zeros((0,) + a.shape[1:-1] + b.shape[2:])


@pytest.mark.parametrize("sa,sb", BATCHED_CASES)
def test_batched_dot(sa, sb):
    a, b = randn(*sa, seed=1), randn(*sb, seed=2)
    check(L.batched_dot, [a, b], np_batched_dot, L.MatMul)
    check(L.batched_dot, [a, b], np_batched_dot, L.MatMul, static=True)
    if a.size:
        vgrad(L.batched_dot, [a, b])


def test_batched_dot_errors():
    with pytest.raises(ValueError, match="batched_dot: the first argument must be 2-d or 3-d"):
        L.batched_dot(T.vector("v"), T.matrix())
    with pytest.raises(ValueError, match="batch sizes differ.*'p'"):
        L.batched_dot(T.tensor("float64", shape=(3, 2), name="p"), T.tensor("float64", (4, 2)))
    with pytest.raises(ValueError, match="not aligned"):
        L.batched_dot(T.tensor("float64", (3, 2)), T.tensor("float64", (3, 4)))


# ---------------------------------------------------------------- diagonals
@pytest.mark.parametrize("n,k", [(3, 0), (3, 1), (3, -2), (1, 0), (0, 0), (0, 2)])
def test_diag_vector_to_matrix(n, k):
    v = randn(n)
    check(lambda x: L.diag(x, k), [v], lambda x: np.diag(x, k), L.AllocDiag, static=True)
    check(lambda x: L.diag(x, k), [v], lambda x: np.diag(x, k), L.AllocDiag)
    if n:
        vgrad(lambda x: L.diag(x, k), [v])


@pytest.mark.parametrize(
    "shape,k", [((3, 4), 0), ((3, 4), 2), ((4, 3), -1), ((2, 2), 5), ((0, 3), 0)]
)
def test_diag_matrix_to_vector(shape, k):
    m = randn(*shape)
    check(lambda x: L.diag(x, k), [m], lambda x: np.diag(x, k), L.ExtractDiag, static=True)
    check(lambda x: L.diag(x, k), [m], lambda x: np.diag(x, k), L.ExtractDiag)
    if m.size:
        vgrad(lambda x: L.diag(x, k), [m])


@pytest.mark.parametrize(
    "shape,offset,a1,a2",
    [((3, 4), 0, 0, 1), ((2, 3, 4), 1, 0, 2), ((2, 3, 4), -1, 2, 1), ((3, 2, 2), 0, -1, -2)],
)
def test_diagonal_and_trace(shape, offset, a1, a2):
    x = randn(*shape)
    ref = lambda v: np.diagonal(v, offset, a1, a2)  # noqa: E731
    out = check(lambda v: L.diagonal(v, offset, a1, a2), [x], ref, L.ExtractDiag)
    out[0][...] = 7.0  # a new array, not a read-only view
    tref = lambda v: np.trace(v, offset, a1, a2)  # noqa: E731
    check(lambda v: L.trace(v, offset, a1, a2), [x], tref, L.ExtractDiag)
    vgrad(lambda v: L.diagonal(v, offset, a1, a2), [x])
    vgrad(lambda v: L.trace(v, offset, a1, a2), [x])


def test_trace_dtypes_and_grad_of_grad():
    xi = np.arange(9, dtype="int8").reshape(3, 3)
    check(L.trace, [xi], np.trace, L.ExtractDiag)
    check(L.trace, [spd(3, dtype="float32")], np.trace, L.ExtractDiag, rtol=1e-6)
    # IncDiagonal (the gradient of diagonal) is itself differentiable
    x = T.matrix("x")
    g = tensorjit.grad((L.diagonal(x) ** 3).sum(), x)
    vgrad(lambda v: tensorjit.grad((L.diagonal(v) ** 3).sum(), v), [randn(3, 3)])
    assert g.type.ndim == 2


def test_diag_errors():
    with pytest.raises(ValueError, match="diag: the input must be 1-d or 2-d.*'t'"):
        L.diag(T.tensor3("t"))
    with pytest.raises(ValueError, match="at least 2-d.*'v'"):
        L.diagonal(T.vector("v"))
    with pytest.raises(ValueError, match="can not be the same"):
        L.diagonal(T.matrix(), axis1=1, axis2=-1)
    with pytest.raises(ValueError, match="out of range"):
        L.trace(T.matrix(), axis1=2)


# ---------------------------------------------------------------- cholesky & solves
@pytest.mark.parametrize("n", [1, 2, 5])
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky(n, lower):
    a = spd(n)
    ref = lambda x: scipy.linalg.cholesky(x, lower=lower)  # noqa: E731
    check(lambda x: L.cholesky(x, lower=lower), [a], ref, L.Cholesky)
    # the gradient of the op itself (it reads one triangle) and through a symmetric input
    vgrad(lambda x: L.cholesky(x, lower=lower), [a])
    vgrad(lambda x: L.cholesky(L.matmul(x, x.T) + n * np.eye(n), lower=lower), [randn(n, n)])


def test_cholesky_dtypes_empty_and_errors():
    check(L.cholesky, [spd(3, dtype="float32")], np.linalg.cholesky, L.Cholesky, rtol=1e-5)
    check(L.cholesky, [np.zeros((0, 0))], np.linalg.cholesky, L.Cholesky)
    with pytest.raises(ValueError, match="cholesky: expected a square matrix, but 'r'"):
        L.cholesky(T.tensor("float64", shape=(2, 3), name="r"))
    with pytest.raises(ValueError, match="cholesky: expected a square matrix.*'v'"):
        L.cholesky(T.vector("v"))
    x = T.matrix("x")
    f = tensorjit.function([x], L.cholesky(x))
    with pytest.raises(ValueError, match="square matrix for 'x'.*shape \\(2, 3\\)"):
        f(randn(2, 3))
    with pytest.raises(np.linalg.LinAlgError, match="cholesky of 'x'"):
        f(-np.eye(2))


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1])
@pytest.mark.parametrize("bshape", [(4,), (4, 2)])
def test_solve_triangular(lower, trans, bshape):
    a, b = well_conditioned(4), randn(*bshape, seed=3)

    def ref(x, y):
        return scipy.linalg.solve_triangular(x, y, lower=lower, trans=trans)

    fn = lambda x, y: L.solve_triangular(x, y, lower=lower, trans=trans)  # noqa: E731
    check(fn, [a, b], ref, L.SolveTriangular)
    vgrad(fn, [a, b])


@pytest.mark.parametrize("n,bshape", [(1, (1,)), (3, (3,)), (4, (4, 2)), (2, (2, 0)), (0, (0,))])
def test_solve(n, bshape):
    a, b = well_conditioned(n), randn(*bshape, seed=3)
    check(L.solve, [a, b], np.linalg.solve, L.Solve)
    check(L.solve, [a, b], np.linalg.solve, L.Solve, static=True)
    if a.size and b.size:
        vgrad(L.solve, [a, b])


def test_solve_dtypes_and_errors():
    a32 = well_conditioned(3).astype("float32")
    check(L.solve, [a32, randn(3, 2, dtype="float32")], np.linalg.solve, L.Solve, rtol=1e-5)
    ai = np.array([[2, 1], [1, 3]], dtype="int32")
    check(L.solve, [ai, np.array([1, 2], dtype="int64")], np.linalg.solve, L.Solve)
    a = T.tensor("float64", shape=(3, 3), name="a")
    with pytest.raises(ValueError, match="not aligned.*'a'.*'b'"):
        L.solve(a, T.tensor("float64", shape=(4,), name="b"))
    with pytest.raises(ValueError, match="right-hand side must be 1-d or 2-d"):
        L.solve(a, T.tensor3())
    with pytest.raises(ValueError, match="solve: expected a square matrix, but 'w'"):
        L.solve(T.tensor("float64", shape=(3, 2), name="w"), T.vector())
    x, y = T.matrix("x"), T.vector("y")
    f = tensorjit.function([x, y], L.solve(x, y))
    with pytest.raises(ValueError, match="'y'.* has 2 rows.*'x'"):
        f(np.eye(3), np.ones(2))
    with pytest.raises(np.linalg.LinAlgError, match="solve of 'x'.*[Ss]ingular"):
        f(np.zeros((2, 2)), np.ones(2))


# ---------------------------------------------------------------- inv, pinv, det, slogdet
@pytest.mark.parametrize("n", [1, 3, 5])
def test_inv_det_slogdet(n):
    a = well_conditioned(n, seed=n)
    a[0] *= -1  # a negative determinant
    check(L.inv, [a], np.linalg.inv, L.MatrixInverse)
    check(L.det, [a], np.linalg.det, L.Det)
    check(L.slogdet, [a], lambda x: tuple(np.linalg.slogdet(x)), L.SLogDet)
    vgrad(L.inv, [a])
    vgrad(L.det, [a])
    vgrad(lambda x: L.slogdet(x)[1], [a])
    vgrad(lambda x: L.slogdet(x)[0] * L.slogdet(x)[1], [a])


def test_inv_det_dtypes_and_empty():
    for fn, ref, op in [
        (L.inv, np.linalg.inv, L.MatrixInverse),
        (L.det, np.linalg.det, L.Det),
        (L.slogdet, lambda x: tuple(np.linalg.slogdet(x)), L.SLogDet),
        (L.pinv, np.linalg.pinv, L.MatrixPinv),
    ]:
        check(fn, [well_conditioned(3).astype("float32")], ref, op, rtol=1e-4, atol=1e-5)
        check(fn, [np.array([[2, 1], [1, 3]], dtype="int16")], ref, op)
        check(fn, [np.zeros((0, 0))], ref, op)


def test_inv_det_errors():
    for fn in (L.inv, L.det, L.slogdet, L.eigh):
        name = fn.__name__
        with pytest.raises(ValueError, match=f"{name}: expected a square matrix, but 'r'"):
            fn(T.tensor("float64", shape=(2, 3), name="r"))
        with pytest.raises(ValueError, match=f"{name}: expected a square matrix.*'t'"):
            fn(T.tensor3("t"))
        x = T.matrix("x")
        out = fn(x)
        f = tensorjit.function([x], list(out) if isinstance(out, tuple) else out)
        with pytest.raises(ValueError, match=f"{name}: expected a square matrix for 'x'"):
            f(randn(3, 2))
    x = T.matrix("x")
    with pytest.raises(np.linalg.LinAlgError, match="inv of 'x'.*[Ss]ingular"):
        tensorjit.function([x], L.inv(x))(np.ones((2, 2)))
    with pytest.raises(TypeError, match="inv: inputs of dtype float16 are not supported"):
        L.inv(T.matrix(dtype="float16"))
    with pytest.raises(ValueError, match="pinv: the input must be 2-d"):
        L.pinv(T.vector())


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (4, 2), (2, 4), (0, 3)])
def test_pinv(shape):
    a = randn(*shape, seed=4)
    check(L.pinv, [a], np.linalg.pinv, L.MatrixPinv)
    check(L.pinv, [a], np.linalg.pinv, L.MatrixPinv, static=True)
    if a.size:
        vgrad(L.pinv, [a])


# ---------------------------------------------------------------- eigh
@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(n, uplo):
    a = spd(n, seed=n) - n * np.eye(n)  # distinct eigenvalues, some negative
    x = T.matrix("x")
    w, v = L.eigh(x, uplo)
    got_w, got_v = run([w, v], [x], [a])
    ref_w, ref_v = np.linalg.eigh(a, uplo)
    np.testing.assert_allclose(got_w, ref_w)
    np.testing.assert_allclose(np.abs(got_v), np.abs(ref_v), atol=1e-10)
    np.testing.assert_allclose(a @ got_v, got_v * got_w, atol=1e-10)
    check(lambda t: L.eigh(t, uplo), [a], lambda t: tuple(np.linalg.eigh(t, uplo)), L.Eigh)
    # gradients of the op itself (one triangle read) and through symmetric inputs
    vgrad(lambda t: L.eigh(t, uplo)[0], [a])
    vgrad(lambda t: L.eigh(t, uplo)[1], [a])
    vgrad(lambda t: L.eigh(t + t.T, uplo)[0], [a])
    vgrad(lambda t: L.eigh(t + t.T, uplo)[1] ** 2, [a])


def test_eigh_dtypes_empty_errors():
    check(L.eigh, [spd(3, dtype="float32")], lambda t: tuple(np.linalg.eigh(t)), L.Eigh,
          rtol=1e-4, atol=1e-4)  # fmt: skip
    check(L.eigh, [np.zeros((0, 0))], lambda t: tuple(np.linalg.eigh(t)), L.Eigh)
    with pytest.raises(ValueError, match="UPLO must be"):
        L.eigh(T.matrix(), "X")


# ---------------------------------------------------------------- qr
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (5, 3), (3, 5), (0, 2)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_values(shape, mode):
    a = randn(*shape, seed=5)

    def ref(x):
        out = np.linalg.qr(x, mode=mode)
        return out if mode == "r" else tuple(out)

    check(lambda t: L.qr(t, mode), [a], ref, L.QR)
    check(lambda t: L.qr(t, mode), [a], ref, L.QR, static=True)


@pytest.mark.parametrize("shape", [(3, 3), (5, 3), (1, 1)])
def test_qr_grad(shape):
    a = randn(*shape, seed=6)
    vgrad(lambda t: L.qr(t)[0], [a])
    vgrad(lambda t: L.qr(t)[1], [a])
    vgrad(lambda t: L.qr(t, "r"), [a])
    if shape[0] == shape[1]:
        vgrad(lambda t: L.qr(t, "complete")[0], [a])


def test_qr_grad_limits():
    wide = T.tensor("float64", shape=(2, 4), name="wide")
    with pytest.raises(NullGradError, match="m >= n"):
        tensorjit.grad(L.qr(wide)[1].sum(), wide)
    tall = T.tensor("float64", shape=(4, 2), name="tall")
    with pytest.raises(NullGradError, match="not unique"):
        tensorjit.grad(L.qr(tall, "complete")[0].sum(), tall)
    x = T.matrix("x")
    f = tensorjit.function([x], tensorjit.grad(L.qr(x)[1].sum(), x))
    with pytest.raises(ValueError, match="gradient is implemented for .* m >= n"):
        f(randn(2, 4))
    with pytest.raises(ValueError, match="mode must be"):
        L.qr(x, "raw")


# ---------------------------------------------------------------- svd
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (5, 3), (3, 5), (0, 2)])
@pytest.mark.parametrize("full", [True, False])
def test_svd_values(shape, full):
    a = randn(*shape, seed=7)
    x = T.matrix("x")
    u, s, vh = L.svd(x, full_matrices=full)
    got_u, got_s, got_vh = run([u, s, vh], [x], [a])
    ref_u, ref_s, ref_vh = np.linalg.svd(a, full_matrices=full)
    assert got_u.shape == ref_u.shape and got_vh.shape == ref_vh.shape
    np.testing.assert_allclose(got_s, ref_s)
    k = len(ref_s)
    np.testing.assert_allclose((got_u[:, :k] * got_s) @ got_vh[:k], a, atol=1e-10)
    check(lambda t: L.svd(t, full), [a], lambda t: tuple(np.linalg.svd(t, full)), L.SVD)
    check(lambda t: L.svd(t, full, False), [a], lambda t: np.linalg.svd(t, full, False), L.SVD)


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)])
def test_svd_grad(shape):
    a = randn(*shape, seed=8)
    vgrad(lambda t: L.svd(t, compute_uv=False), [a])
    for i in range(3):
        vgrad(lambda t, i=i: L.svd(t, full_matrices=False)[i], [a])
    if shape[0] == shape[1]:
        vgrad(lambda t: L.svd(t)[0], [a])


def test_svd_grad_full_matrices_undefined():
    x = T.tensor("float64", shape=(4, 2), name="x")
    with pytest.raises(NullGradError, match="full_matrices"):
        tensorjit.grad(L.svd(x)[0].sum(), x)
    y = T.matrix("y")
    f = tensorjit.function([y], tensorjit.grad(L.svd(y)[2].sum(), y))
    with pytest.raises(ValueError, match="full_matrices=True is implemented for square"):
        f(randn(4, 2))
    with pytest.raises(ValueError, match="svd: the input must be 2-d"):
        L.svd(T.vector())


# ---------------------------------------------------------------- norm
VECTOR_ORDS = [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5]


@pytest.mark.parametrize("ord", VECTOR_ORDS)
def test_vector_norms(ord):
    v = randn(5, seed=9)
    ref = lambda t: np.linalg.norm(t, ord)  # noqa: E731
    check(lambda t: L.norm(t, ord), [v], ref, ())
    m = randn(3, 4, seed=10)
    for axis in (0, 1, -1):
        for keep in (False, True):
            fn = lambda t, axis=axis, keep=keep: L.norm(t, ord, axis, keep)  # noqa: E731
            check(fn, [m], lambda t, axis=axis, keep=keep: np.linalg.norm(t, ord, axis, keep), ())
    if ord != 0:
        vgrad(lambda t: L.norm(t, ord), [v])
        vgrad(lambda t: L.norm(t, ord, axis=1), [m])


MATRIX_ORDS = [None, "fro", 1, -1, np.inf, -np.inf, 2, -2, "nuc"]


@pytest.mark.parametrize("ord", MATRIX_ORDS)
def test_matrix_norms(ord):
    m = randn(3, 4, seed=11)
    for axis in (None, (0, 1), (1, 0)):
        for keep in (False, True):
            fn = lambda t, axis=axis, keep=keep: L.norm(t, ord, axis, keep)  # noqa: E731
            check(
                fn, [m], lambda t, axis=axis, keep=keep: np.linalg.norm(t, ord, axis, keep), L.SVD
            )
        vgrad(lambda t, axis=axis: L.norm(t, ord, axis), [m])
    if ord not in (2, -2, "nuc"):
        t3 = randn(2, 3, 4, seed=12)
        fn = lambda t: L.norm(t, ord, (2, 0))  # noqa: E731
        check(fn, [t3], lambda t: np.linalg.norm(t, ord, (2, 0)), ())
        vgrad(fn, [t3])


def test_norm_flatten_dtypes_and_errors():
    t = randn(2, 3, 2, seed=13)
    check(L.norm, [t], np.linalg.norm, ())
    check(lambda x: L.norm(x, keepdims=True), [t], lambda x: np.linalg.norm(x, keepdims=True), ())
    check(L.norm, [np.arange(6, dtype="int32")], np.linalg.norm, ())
    check(lambda x: L.norm(x, 1), [np.arange(6, dtype="int8")], lambda x: np.linalg.norm(x, 1), ())
    check(L.norm, [randn(4, dtype="float32")], np.linalg.norm, (), rtol=1e-6)
    check(L.norm, [np.zeros((0,))], np.linalg.norm, ())
    vgrad(L.norm, [t])
    with pytest.raises(ValueError, match="invalid norm order 'fro' for vectors"):
        L.norm(T.vector(), "fro")
    with pytest.raises(ValueError, match="invalid norm order 3 for matrices"):
        L.norm(T.matrix(), 3)
    with pytest.raises(ValueError, match="must be 1-d or 2-d.*'t3'"):
        L.norm(T.tensor3("t3"), 1)
    with pytest.raises(ValueError, match="1 or 2 axes"):
        L.norm(T.tensor3(), None, (0, 1, 2))
    with pytest.raises(ValueError, match="repeated axis"):
        L.norm(T.matrix(), None, (1, 1))
    with pytest.raises(ValueError, match="out of range"):
        L.norm(T.matrix(), None, 2)


def test_public_names():
    for name in L.__all__:
        if name == "inv":  # Theano's T.inv is the elementwise 1/x; linalg.inv is the matrix one
            continue
        assert getattr(T, name) is getattr(L, name)
    assert T.linalg.inv is L.matrix_inverse


def test_gradient_graphs_under_debugmode():
    x, y = T.matrix("x"), T.matrix("y")
    a, b = well_conditioned(3), randn(3, 2, seed=3)
    costs = [
        L.cholesky(L.matmul(x, x.T) + 3 * np.eye(3)).sum(),
        L.eigh(x + x.T)[1].sum() + L.eigh(x + x.T)[0].sum(),
        L.qr(x)[0].sum() + L.qr(x)[1].sum(),
        sum(o.sum() for o in L.svd(x, full_matrices=True)),
        L.svd(y, compute_uv=False).sum(),
        L.solve(x, y).sum() + L.solve_triangular(x, y, lower=True).sum(),
        L.inv(x).sum() + L.det(x) + L.slogdet(x)[1] + L.pinv(y).sum(),
        L.tensordot(x, y, 1).sum() + L.batched_dot(y, y).sum() + L.trace(x),
        L.diag(L.diag(x)).sum() + L.norm(y) + L.norm(x, "nuc"),
    ]
    for cost in costs:
        grads = tensorjit.grad(cost, [x, y], disconnected_inputs="ignore")
        debug = tensorjit.function([x, y], grads, mode="DebugMode", on_unused_input="ignore")
        fast = tensorjit.function([x, y], grads, mode="FAST_RUN", on_unused_input="ignore")
        for g_debug, g_fast in zip(debug(a, b), fast(a, b)):
            np.testing.assert_allclose(g_debug, g_fast, rtol=1e-7, atol=1e-10)


def test_integer_and_complex_inputs_gradients():
    xi = T.itensor3("xi")
    x = T.tensor3("x")
    assert tensorjit.grad(L.matmul(x, xi).sum(), x) is not None
    with pytest.raises(tensorjit.gradient.DisconnectedInputError):
        tensorjit.grad(L.matmul(x, xi).sum(), xi)
    x, z = T.matrix("x"), T.zmatrix("z")
    with pytest.raises(NullGradError, match="complex"):
        tensorjit.grad(abs(L.inv(z)).sum(), z)
    with pytest.raises(NullGradError, match="complex"):
        tensorjit.grad(abs(L.solve(x, z)).sum(), x)
