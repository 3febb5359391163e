"""C BLAS kernels (Dot, Gemm, Ger) against NumPy and Op.perform under DebugMode."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers.c_backend import C_ONLY, DEBUG_C, NEEDS_C

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.compile.mode import Mode
from tensorjit.plugins.c_backend.linalg import blas
from tensorjit.tensor.blas import Gemm, Ger
from tensorjit.tensor.math import Dot

pytestmark = [NEEDS_C, pytest.mark.usefixtures("module_compile_cache")]

RNG = np.random.default_rng(0)
BLAS_OPS = (Dot, Gemm, Ger)
TOL = {"float64": {"rtol": 1e-12, "atol": 1e-12}, "float32": {"rtol": 2e-5, "atol": 2e-5}}
# Layouts BLAS addresses as they are (a matrix needs a unit stride, a vector a positive
# increment); the others are copied.
NO_COPY = {
    1: {"contiguous", "submatrix", "strided"},
    2: {"contiguous", "fortran", "transposed", "submatrix"},
}


@pytest.fixture
def copies(monkeypatch):
    """The status of every kernel call that asked for operand copies."""
    seen: list[int] = []
    original = blas._fix

    def recording(status, arrays, bits):
        seen.append(status)
        return original(status, arrays, bits)

    monkeypatch.setattr(blas, "_fix", recording)
    return seen


def compile_c(inputs, outputs, mode=DEBUG_C, **kwargs):
    f = tensorjit.function(inputs, outputs, mode=mode, **kwargs)
    names = [k.name for n, k in f.kernels.items() if isinstance(n.op, BLAS_OPS)]
    assert names and all(name.endswith("c:blas") for name in names), names
    return f


LAYOUTS_2D = ("contiguous", "fortran", "transposed", "submatrix", "strided", "negative")
LAYOUTS_1D = ("contiguous", "submatrix", "strided", "negative")


def lay_out(value: np.ndarray, layout: str) -> np.ndarray:
    """A new array holding ``value``'s elements, laid out as ``layout`` says."""
    pad = tuple(s + 2 for s in value.shape)
    inner = tuple(slice(1, s + 1) for s in value.shape)
    if layout == "contiguous":
        return value.copy()
    if layout == "fortran":
        return np.asfortranarray(value)
    if layout == "transposed":  # the transpose of a C-ordered submatrix
        base = np.zeros(pad[::-1], value.dtype)
        base[inner[::-1]] = value.T
        return base[inner[::-1]].T
    if layout == "submatrix":  # rows (or elements) inside a larger buffer
        base = np.zeros(pad, value.dtype)
        base[inner] = value
        return base[inner]
    if layout == "strided":
        base = np.zeros(tuple(2 * s for s in value.shape), value.dtype)
        view = base[tuple(slice(None, None, 2) for _ in value.shape)]
        view[...] = value
        return view
    assert layout == "negative"
    flip = tuple(slice(None, None, -1) for _ in value.shape)
    return value[flip].copy()[flip]


def operands(shape, dtype):
    value = RNG.uniform(-2, 2, size=shape).astype(dtype)
    return {lay: lay_out(value, lay) for lay in (LAYOUTS_2D if len(shape) == 2 else LAYOUTS_1D)}


def expect_copies(seen, *operands, one_element=False):
    """``operands``: (layout, array) pairs of one call; copies only where needed."""
    layouts = [layout for layout, _ in operands]
    if all(layout in NO_COPY[a.ndim] for layout, a in operands):
        assert seen == [], (layouts, seen)
    elif not one_element:
        assert seen, layouts  # the operand BLAS can not address was copied
    seen.clear()


# ---------------------------------------------------------------- Dot
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("nx,ny", [(2, 2), (2, 1), (1, 2), (1, 1)])
def test_dot_forms_and_layouts(dtype, nx, ny, copies):
    x = T.tensor(dtype, shape=(None,) * nx, name="x")
    y = T.tensor(dtype, shape=(None,) * ny, name="y")
    f = compile_c([x, y], T.dot(x, y))
    for m, k, n in [(5, 7, 4), (1, 7, 1), (5, 1, 4)]:
        for lx, xv in operands((m, k) if nx == 2 else (k,), dtype).items():
            for ly, yv in operands((k, n) if ny == 2 else (k,), dtype).items():
                got = f(xv, yv)
                want = np.dot(xv, yv)
                assert got.dtype == want.dtype and got.shape == want.shape
                np.testing.assert_allclose(got, want, **TOL[dtype])
                expect_copies(copies, (lx, xv), (ly, yv), one_element=True)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_dot_empty_dims(dtype):
    a, b = T.tensor(dtype, shape=(None, None)), T.tensor(dtype, shape=(None, None))
    mm = compile_c([a, b], T.dot(a, b))
    u, v = T.tensor(dtype, shape=(None,)), T.tensor(dtype, shape=(None,))
    mv = compile_c([a, u], T.dot(a, u))
    vm = compile_c([u, b], T.dot(u, b))
    vv = compile_c([u, v], T.dot(u, v))
    z = np.zeros
    cases = [
        (mm, z((0, 3), dtype), z((3, 4), dtype)),
        (mm, z((3, 0), dtype), z((0, 4), dtype)),  # k == 0: zeros, not garbage
        (mm, z((3, 2), dtype), z((2, 0), dtype)),
        (mv, z((0, 3), dtype), z(3, dtype)),
        (mv, z((3, 0), dtype), z(0, dtype)),
        (vm, z(0, dtype), z((0, 3), dtype)),
        (vm, z(2, dtype), z((2, 0), dtype)),
        (vv, z(0, dtype), z(0, dtype)),
    ]
    for f, xv, yv in cases:
        for _ in range(2):  # the second call may reuse the first's buffer
            got = f(xv, yv)
            want = np.dot(xv, yv)
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_dot_shape_mismatch_is_the_reference_error():
    a, b = T.matrix("a"), T.matrix("b")
    f = compile_c([a, b], T.dot(a, b))
    with pytest.raises(ValueError, match="not aligned"):
        f(np.ones((2, 3)), np.ones((4, 2)))


def test_dot_other_dtypes_fall_back_to_python():
    for dx, dy in [("float32", "float64"), ("complex128", "complex128"), ("int64", "int64")]:
        x, y = T.tensor(dx, shape=(None, None)), T.tensor(dy, shape=(None, None))
        f = tensorjit.function([x, y], T.dot(x, y), mode=DEBUG_C)
        assert [k.name for k in f.kernels.values()] == ["debug:perform"]


# ---------------------------------------------------------------- Gemm
def gemm_function(dtype, matrix, inplace):
    z = T.tensor(dtype, shape=(None, None) if matrix else (None,), name="z")
    x = T.tensor(dtype, shape=(None, None), name="x")
    y = T.tensor(dtype, shape=(None, None) if matrix else (None,), name="y")
    alpha, beta = T.scalar("alpha"), T.scalar("beta")
    out = Gemm(inplace=inplace)(z, alpha, x, y, beta)
    if inplace:
        return compile_c(
            [tensorjit.In(z, mutable=True), alpha, x, y, beta], out, accept_inplace=True
        )
    return compile_c([z, alpha, x, y, beta], out)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("matrix", [True, False], ids=["gemm", "gemv"])
@pytest.mark.parametrize("inplace", [False, True], ids=["copy", "inplace"])
def test_gemm_forms_and_layouts(dtype, matrix, inplace, copies):
    f = gemm_function(dtype, matrix, inplace)
    m, k, n = 4, 6, 3
    z_shape = (m, n) if matrix else (m,)
    y_shape = (k, n) if matrix else (k,)
    zs, xs, ys = operands(z_shape, dtype), operands((m, k), dtype), operands(y_shape, dtype)
    cases = [(lx, ly, "contiguous") for lx in xs for ly in ys]
    cases += [("contiguous", "contiguous", lz) for lz in zs]
    for alpha, beta in [(0.5, -1.5), (2.0, 0.0), (1.0, 1.0)]:
        for lx, ly, lz in cases:
            zv, xv, yv = lay_out(zs[lz], lz), xs[lx], ys[ly]
            want = beta * zs[lz] + alpha * np.dot(xv, yv)
            got = f(zv, np.float64(alpha), xv, yv, np.float64(beta))
            assert got.dtype == np.dtype(dtype) and got.shape == z_shape
            np.testing.assert_allclose(got, want, **TOL[dtype])
            if inplace:  # the mutable input holds the result
                np.testing.assert_allclose(zv, want, **TOL[dtype])
            else:
                np.testing.assert_array_equal(zv, zs[lz])
            target = [(lz, zv)] if inplace else []  # else z is copied into a fresh buffer
            expect_copies(copies, (lx, xv), (ly, yv), *target)


@pytest.mark.parametrize("matrix", [True, False], ids=["gemm", "gemv"])
def test_gemm_empty_dims(matrix):
    f = gemm_function("float64", matrix, inplace=False)
    shapes = [(0, 3, 2), (3, 0, 2), (3, 2, 0)] if matrix else [(0, 3, 1), (3, 0, 1)]
    for m, k, n in shapes:
        zv = np.full((m, n) if matrix else (m,), 2.0)
        xv = np.ones((m, k))
        yv = np.ones((k, n) if matrix else (k,))
        for beta in (3.0, 0.0):
            got = f(zv, np.float64(0.5), xv, yv, np.float64(beta))
            np.testing.assert_array_equal(got, beta * zv + 0.5 * np.dot(xv, yv))


def test_gemm_shape_mismatch_is_the_reference_error():
    f = gemm_function("float64", True, inplace=False)
    with pytest.raises(ValueError, match="not aligned"):
        f(np.ones((2, 2)), np.float64(1), np.ones((2, 3)), np.ones((2, 2)), np.float64(1))


def test_gemm_rewritten_from_expression():
    z, x, y = T.matrix("z"), T.matrix("x"), T.matrix("y")
    f = compile_c([z, x, y], 2.0 * z - 0.25 * T.dot(x, y))
    assert any(isinstance(n.op, Gemm) for n in f.kernels)
    zv, xv, yv = (RNG.standard_normal(s) for s in [(3, 5), (3, 4), (4, 5)])
    np.testing.assert_allclose(f(zv, xv, yv), 2.0 * zv - 0.25 * xv @ yv, rtol=1e-12)


# ---------------------------------------------------------------- Ger
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("inplace", [False, True], ids=["copy", "inplace"])
def test_ger_layouts(dtype, inplace, copies):
    z, alpha = T.tensor(dtype, shape=(None, None)), T.scalar()
    x, y = T.tensor(dtype, shape=(None,)), T.tensor(dtype, shape=(None,))
    out = Ger(inplace=inplace)(z, alpha, x, y)
    if inplace:
        f = compile_c([tensorjit.In(z, mutable=True), alpha, x, y], out, accept_inplace=True)
    else:
        f = compile_c([z, alpha, x, y], out)
    m, n = 5, 3
    zs, xs, ys = operands((m, n), dtype), operands((m,), dtype), operands((n,), dtype)
    cases = [("contiguous", lx, ly) for lx in xs for ly in ys]
    cases += [(lz, "contiguous", "contiguous") for lz in zs]
    for lz, lx, ly in cases:
        zv = lay_out(zs[lz], lz)
        want = zs[lz] + 0.75 * np.outer(xs[lx], ys[ly])
        got = f(zv, np.float64(0.75), xs[lx], ys[ly])
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got, want, **TOL[dtype])
        if inplace:
            np.testing.assert_allclose(zv, want, **TOL[dtype])
        target = [(lz, zv)] if inplace else []
        expect_copies(copies, *target, (lx, xs[lx]), (ly, ys[ly]))
    # empty dims
    for shape in [(0, 3), (3, 0)]:
        zv = np.ones(shape, dtype)
        got = f(zv, np.float64(2), np.ones(shape[0], dtype), np.ones(shape[1], dtype))
        np.testing.assert_array_equal(got, np.ones(shape, dtype))


# ---------------------------------------------------------------- buffers
def test_output_buffer_reused_when_it_fits():
    x, y, z = T.matrix("x"), T.matrix("y"), T.matrix("z")
    u, v = T.vector("u"), T.vector("v")
    alpha = T.scalar("alpha")
    xv, yv, zv = np.ones((3, 4)), np.ones((4, 2)), np.ones((3, 2))
    uv, vv, two = np.ones(3), np.ones(2), np.float64(2)
    cases = [
        (T.dot(x, y), [xv, yv], np.full((3, 2), 4.0)),
        (Gemm()(z, alpha, x, y, alpha), [zv, two, xv, yv, two], np.full((3, 2), 10.0)),
        (Ger()(z, alpha, u, v), [zv, two, uv, vv], np.full((3, 2), 3.0)),
    ]
    for out, values, want in cases:
        run = blas.factory(out.owner)
        buf = np.full((3, 2), np.nan)
        storage = [buf]
        run(values, [storage])
        assert storage[0] is buf
        np.testing.assert_array_equal(buf, want)
        readonly = np.empty((3, 2))
        readonly.flags.writeable = False
        unfits = [np.empty((2, 3)), np.empty((3, 2), order="F"), np.empty((3, 2), "f4"), readonly]
        for unfit in unfits:
            cell = [unfit]
            run(values, [cell])
            assert cell[0] is not unfit and cell[0].flags.c_contiguous
            np.testing.assert_array_equal(cell[0], want)
        np.testing.assert_array_equal(zv, np.ones((3, 2)))  # not inplace: z untouched


NUMPY_BLAS = blas._numpy_openblas()


@pytest.mark.parametrize(
    "choice",
    [
        "scipy",
        pytest.param(
            "numpy",
            marks=pytest.mark.skipif(
                NUMPY_BLAS is None, reason="this NumPy bundles no scipy-openblas64 library"
            ),
        ),
    ],
)
def test_each_blas_provider_computes_every_product_without_warnings(choice):
    # SciPy's BLAS takes 32-bit integers (pointers from cython_blas capsules), NumPy's
    # bundled OpenBLAS 64-bit ones (symbols scipy_*_64_): both builds of the kernels.
    with tensorjit.config.change_flags(blas=choice):
        chosen = blas.provider()
        assert chosen.name == choice and chosen.ilp64 == (choice == "numpy")
        pointers = blas.blas_pointers()
        assert len(pointers) == len(blas.ROUTINES) and all(pointers)
        for dtype in ("float64", "float32"):
            a, b = T.matrix("a", dtype=dtype), T.matrix("b", dtype=dtype)
            u, w = T.vector("u", dtype=dtype), T.vector("w", dtype=dtype)
            outputs = [T.dot(a, b), T.dot(a, u), T.dot(u, w), T.exp(a) + T.outer(u, w)]
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                f = compile_c([a, b, u, w], outputs)
            am = RNG.standard_normal((8, 8)).astype(dtype)[::2, ::2]  # strided: a copy
            bm = np.asfortranarray(RNG.standard_normal((4, 3)).astype(dtype))
            uv, wv = RNG.standard_normal(8).astype(dtype)[::2], np.ones(4, dtype)
            got = f(am, bm, uv, wv)
            tol = 1e-5 if dtype == "float32" else 1e-12
            np.testing.assert_allclose(got[0], am @ bm, rtol=tol)
            np.testing.assert_allclose(got[1], am @ uv, rtol=tol)
            np.testing.assert_allclose(got[2], uv @ wv, rtol=tol)
            np.testing.assert_allclose(got[3], np.exp(am) + np.outer(uv, wv), rtol=tol)


# ---------------------------------------------------------------- training steps
def test_sgd_updates_run_inplace_in_the_shared_buffer():
    w0 = RNG.standard_normal((4, 3))
    w = tensorjit.shared(w0.copy(), name="w")
    x, g = T.matrix("x"), T.matrix("g")
    u, v = T.vector("u"), T.vector("v")
    step = compile_c([x, g], [], updates={w: w - 0.1 * T.dot(x.T, g)})
    assert any(isinstance(n.op, Gemm) and n.op.inplace for n in step.kernels)
    rank1 = compile_c([u, v], [], updates={w: w + 0.5 * T.outer(u, v)})
    assert any(isinstance(n.op, Ger) and n.op.inplace for n in rank1.kernels)
    buf = w.get_value(borrow=True)
    xv, gv, uv, vv = RNG.standard_normal((5, 4)), RNG.standard_normal((5, 3)), w0[:, 0], w0[0]
    step(xv, gv)
    step(xv, gv[::-1])
    rank1(uv, vv)
    assert w.get_value(borrow=True) is buf
    want = w0 - 0.1 * xv.T @ gv - 0.1 * xv.T @ gv[::-1] + 0.5 * np.outer(uv, vv)
    np.testing.assert_allclose(w.get_value(), want, rtol=1e-12)


def mlp_step(mode, dtype, data, steps=4):
    xv, yv, w1v, w2v = data
    w1 = tensorjit.shared(w1v.copy(), name="w1")
    b1 = tensorjit.shared(np.zeros(w1v.shape[1], dtype), name="b1")
    w2 = tensorjit.shared(w2v.copy(), name="w2")
    x, y = T.tensor(dtype, shape=(None, None), name="x"), T.tensor(dtype, shape=(None,))
    h = T.tanh(T.dot(x, w1) + b1)
    p = T.sigmoid(T.dot(h, w2))
    cost = (-y * T.log(p) - (1 - y) * T.log(1 - p)).mean() + 0.001 * (w1**2).sum()
    g1, gb1, g2 = tensorjit.grad(cost, [w1, b1, w2])
    lr = np.asarray(0.5, dtype)
    train = tensorjit.function(
        [x, y], cost, updates=[(w1, w1 - lr * g1), (b1, b1 - lr * gb1), (w2, w2 - lr * g2)],
        mode=mode,
    )  # fmt: skip
    costs = [train(xv, yv) for _ in range(steps)]
    return train, costs, [s.get_value() for s in (w1, b1, w2)]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_mlp_training_step_matches_the_python_backend(dtype):
    x = RNG.standard_normal((20, 12)).astype(dtype)
    y = (RNG.uniform(size=20) > 0.5).astype(dtype)
    data = (x, y, 0.3 * RNG.standard_normal((12, 8)).astype(dtype))
    data += (0.3 * RNG.standard_normal(8).astype(dtype),)
    train_c, costs_c, params_c = mlp_step(C_ONLY, dtype, data)
    _, costs_py, params_py = mlp_step(tensorjit.FAST_RUN, dtype, data)
    c_blas = [n for n, k in train_c.kernels.items() if isinstance(n.op, BLAS_OPS)]
    assert len(c_blas) >= 3
    assert all(train_c.kernels[n].name == "c:blas" for n in c_blas)
    tol = {"rtol": 1e-11, "atol": 1e-12} if dtype == "float64" else {"rtol": 1e-4, "atol": 1e-5}
    np.testing.assert_allclose(costs_c, costs_py, **tol)
    for a, b in zip(params_c, params_py):
        np.testing.assert_allclose(a, b, **tol)
    assert costs_c[-1] < costs_c[0]
    # And under DebugMode every C kernel agrees with Op.perform along the way.
    mlp_step(DEBUG_C, dtype, data, steps=2)


def _misaligned(shape):
    """A C-contiguous float64 array whose data starts one byte past an aligned address."""
    n = int(np.prod(shape))
    raw = np.zeros(8 * n + 1, dtype=np.uint8)
    out = np.frombuffer(raw[1:].data, dtype=np.float64).reshape(shape)
    assert not out.flags.aligned and out.flags.c_contiguous
    out[...] = RNG.standard_normal(shape)
    return out


@NEEDS_C
def test_misaligned_operands_are_copied_not_refused():
    a, b = T.dmatrices("a", "b")
    v = T.dvector("v")
    f = tensorjit.function([a, b, v], [T.dot(a, b), T.dot(a, v)], mode=C_ONLY)
    assert {k.name for n, k in f.kernels.items() if isinstance(n.op, Dot)} == {"c:blas"}
    x, y, z = _misaligned((4, 5)), _misaligned((5, 3)), _misaligned((5,))
    got_m, got_v = f(x, y, z)
    np.testing.assert_allclose(got_m, x @ y, **TOL["float64"])
    np.testing.assert_allclose(got_v, x @ z, **TOL["float64"])


# ---------------------------------------------------------------- few columns (skinny.py)
SKINNY_SHAPES = [(600, 784, 10), (61, 777, 16), (9, 4000, 1), (300, 130, 3), (257, 129, 13)]


@pytest.mark.parametrize("dtype", ["float64", "float32"])  # float32: sgemm, the same layouts
@pytest.mark.parametrize("m,k,n", SKINNY_SHAPES)
def test_products_with_few_columns_read_the_matrix_once_and_agree(dtype, m, k, n):
    """X . W and X^T . G with n <= 16 columns (skinny.py), against NumPy in float64 and
    against Op.perform (DebugMode): every layout of X, odd tails of rows and lengths."""
    x, w, g = T.matrix("x", dtype=dtype), T.matrix("w", dtype=dtype), T.matrix("g", dtype=dtype)
    f = compile_c([x, w, g], [T.dot(x, w), T.dot(x.T, g)])
    xv = RNG.standard_normal((m, k)).astype(dtype)
    wv, gv = RNG.standard_normal((k, n)).astype(dtype), RNG.standard_normal((m, n)).astype(dtype)
    tol = TOL[dtype]["rtol"] * np.sqrt(max(m, k)) * 4
    for layout in (xv, np.asfortranarray(xv), xv[:, ::-1], np.pad(xv, ((0, 0), (0, 3)))[:, :k]):
        forward, backward = f(layout, wv, gv)
        exact = layout.astype(np.float64)
        np.testing.assert_allclose(forward, exact @ wv, rtol=tol, atol=tol)
        np.testing.assert_allclose(backward, exact.T @ gv, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_few_column_updates_keep_blas_semantics(dtype):
    """Gemm's beta (0 does not read the target, others scale it), alpha 0 (reference
    BLAS's rule, which tensorjit keeps on every CPU: x and y are not read, so their NaNs do
    not show; OpenBLAS's AVX-512 small-matrix kernels would read them) and NaN/inf in X
    propagating as BLAS's."""
    z, x, w = T.matrix("z", dtype=dtype), T.matrix("x", dtype=dtype), T.matrix("w", dtype=dtype)
    a, b = T.scalar("a", dtype=dtype), T.scalar("b", dtype=dtype)
    f = compile_c([z, a, x, w, b], Gemm()(z, a, x, w, b))
    m, k, n = 200, 300, 7
    zv = RNG.standard_normal((m, n)).astype(dtype)
    xv, wv = RNG.standard_normal((m, k)).astype(dtype), RNG.standard_normal((k, n)).astype(dtype)
    tol = TOL[dtype]["rtol"] * 100
    for alpha, beta in ((1.5, 0.0), (-0.5, 0.25), (2.0, 1.0)):
        want = alpha * (xv.astype(np.float64) @ wv) + beta * zv
        np.testing.assert_allclose(f(zv, alpha, xv, wv, beta), want, rtol=tol, atol=tol)
    nan_target = np.full_like(zv, np.nan)
    assert np.isfinite(f(nan_target, 1.0, xv, wv, 0.0)).all()  # beta 0: target not read
    xn = xv.copy()
    xn[3, 5] = np.nan
    xn[7, 0] = np.inf
    got = f(zv, 1.0, xn, wv, 1.0)
    assert np.isnan(got[3]).all() and not np.isfinite(got[7]).any()
    assert np.isfinite(np.delete(got, [3, 7], axis=0)).all()
    np.testing.assert_allclose(f(zv, 0.0, xn, wv, 1.0), zv)  # alpha 0: BLAS's answer
    assert (f(nan_target, 0.0, xn, wv, 0.0) == 0).all()  # neither operand nor target read


@pytest.mark.parametrize("backend", ["python", "perform"])
@pytest.mark.parametrize("y_ndim", [1, 2])
def test_gemm_with_alpha_zero_reads_no_operand_on_every_backend(backend, y_ndim):
    """The alpha-0 rule holds for Op.perform (SciPy's BLAS) and the Python backend's
    NumPy kernel as for the C kernels: the same answer whichever BLAS the CPU picks."""
    z, x, a, b = T.dmatrix("z"), T.dmatrix("x"), T.dscalar("a"), T.dscalar("b")
    y = T.dmatrix("y") if y_ndim == 2 else T.dvector("y")
    z = z if y_ndim == 2 else T.dvector("z")
    mode = tensorjit.FAST_RUN.with_backends("python")
    if backend == "perform":
        mode = Mode("DebugMode", tensorjit.FAST_RUN.query, backends=("python",), debug=True)
    f = tensorjit.function([z, a, x, y, b], Gemm()(z, a, x, y, b), mode=mode)
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((9, 8))
    xv[2, 3] = np.nan
    yv = np.full((8, 3) if y_ndim == 2 else (8,), np.inf)
    zv = rng.standard_normal((9, 3) if y_ndim == 2 else (9,))
    np.testing.assert_array_equal(f(zv, 0.0, xv, yv, 0.5), 0.5 * zv)
    assert (f(np.full_like(zv, np.nan), 0.0, xv, yv, 0.0) == 0).all()


def test_few_column_products_on_two_threads_are_blas_s_and_agree():
    """With two threads the products go back to BLAS (its threads share the work)."""
    x, w = T.matrix("x"), T.matrix("w")
    xv, wv = RNG.standard_normal((600, 784)), RNG.standard_normal((784, 10))
    one = compile_c([x, w], [T.dot(x, w), T.dot(x.T, T.dot(x, w))])(xv, wv)
    with tensorjit.config.change_flags(threads=2):
        two = compile_c([x, w], [T.dot(x, w), T.dot(x.T, T.dot(x, w))])(xv, wv)
    for a, b in zip(one, two):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-9)


@pytest.fixture
def library_count_only():
    """The BLAS kernels initialised without OpenBLAS's per-thread count (as with NumPy
    2.5's scipy-openblas64): a stack of products split over the pool sets the library's
    count for its call."""
    from tensorjit.plugins.c_backend.build import threads

    chosen = blas.provider()
    local, setter, getter = threads.blas_thread_controls(chosen.where)
    if not (setter and getter):
        pytest.skip(f"the BLAS at {chosen.where} has no thread-count setter and getter")
    ffi, lib = blas.library()
    lib.tj_blas_threads(*(ffi.cast("void *", p) for p in (0, setter, getter)))
    try:
        yield threads
    finally:
        lib.tj_blas_threads(*(ffi.cast("void *", p) for p in (local, setter, getter)))


def _products_on_a_thread(f, args, stop):
    import threading

    def loop():
        while not stop.is_set():
            f(*args)

    worker = threading.Thread(target=loop)
    worker.start()
    return worker


def _set_threads_while_products_run(f, args, count) -> None:
    """config ``threads`` set to ``count`` while another thread calls ``f`` in a loop."""
    import threading

    stop = threading.Event()
    worker = _products_on_a_thread(f, args, stop)
    try:
        tensorjit.config.threads = count
    finally:
        stop.set()
        worker.join()


def _split_stack():
    """A compiled matmul of 8 products a call, split over the pool at two threads."""
    from tensorjit.tensor import linalg

    a, b = T.tensor3("a"), T.tensor3("b")
    f = tensorjit.function([a, b], linalg.matmul(a, b), mode=C_ONLY)
    return f, (RNG.standard_normal((8, 150, 150)), RNG.standard_normal((8, 150, 150)))


def test_a_fork_while_another_thread_runs_split_products_keeps_the_blas_count(
    library_count_only,
):
    """The library's count is one only while split products are in flight; a fork waits
    for them (thread_pool.c's guard), so no child starts with the BLAS on one thread.
    Run alone, the process's first guarded calls are among those forked over: the fork
    handler is installed when the pool loads, not by the first call (glibc runs only the
    handlers registered when a fork began); in a whole run, earlier tests installed it."""
    import os
    import select
    import signal
    import threading

    def child_count() -> int:
        """A forked child's BLAS count (the child writes it and leaves at once); -1 if it
        says nothing within 30 s (a hang, killed)."""
        read, write = os.pipe()
        with warnings.catch_warnings():  # (3.12+: fork of a process with threads)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            try:
                os.write(write, bytes([threads.blas_threads() or 0]))
            finally:
                os._exit(0)  # never back into pytest
        os.close(write)
        ready = select.select([read], [], [], 30)[0]
        count = os.read(read, 1)[0] if ready else -1
        os.close(read)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return count

    threads = library_count_only
    with tensorjit.config.change_flags(threads=2):
        f, args = _split_stack()
        stop = threading.Event()
        worker = _products_on_a_thread(f, args, stop)
        try:
            counts = [child_count() for _ in range(100)]
        finally:
            stop.set()
            worker.join()
        assert threads.blas_threads() == 2
    assert set(counts) == {2}, counts


def test_config_threads_set_while_split_products_run_is_the_count_left(library_count_only):
    """A count config sets while another thread's products have the library's count at
    one is the one they put back (not the count they found)."""
    threads = library_count_only
    with tensorjit.config.change_flags(threads=2):
        f, args = _split_stack()
        for _ in range(5):
            _set_threads_while_products_run(f, args, 1)
            assert threads.blas_threads() == 1
            tensorjit.config.threads = 2
            assert threads.blas_threads() == 2


def test_config_threads_set_from_auto_while_split_products_run_remembers_the_blas_count(
    library_count_only,
):
    """config ``threads`` going from "auto" to a number remembers the BLAS's count, to
    put back when it returns to "auto": the count products in flight will restore, not
    the 1 they set for their call."""
    threads = library_count_only
    if threads.available_cores() < 2:
        pytest.skip("one core: 'auto' is one thread, and no products are split")
    found = threads.blas_threads()
    with tensorjit.config.change_flags(threads="auto"):
        try:
            threads.set_blas_threads(3)  # the BLAS's own count, before config sets one
            own = threads.blas_threads()  # (a BLAS built for fewer cores may take less)
            if own < 2:
                pytest.skip(f"this BLAS takes one thread only (asked for 3: {own})")
            f, args = _split_stack()
            f(*args)
            for _ in range(5):
                _set_threads_while_products_run(f, args, 2)
                tensorjit.config.threads = "auto"
                assert threads.blas_threads() == own
        finally:  # before the flags go back (a number would remember this count)
            threads.set_blas_threads(found)
