"""C kernels that build or rearrange whole arrays (alloc, second/fill, eye, tri/tril/triu,
arange, join, one_hot, cumsum/cumprod, sort) against Op.perform under DebugMode, and
exactly against NumPy, on contiguous, Fortran, strided, reversed, broadcast (stride 0),
0-d and empty inputs; errors come from Op.perform (NumPy's)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers.c_backend import C_ONLY, NEEDS_C, compiled_with

import tensorjit
import tensorjit.tensor as T
from tensorjit.plugins.c_backend.generators import construct
from tensorjit.tensor import nnet

pytestmark = [NEEDS_C, pytest.mark.usefixtures("module_compile_cache")]

RNG = np.random.default_rng(7)


compiled = functools.partial(compiled_with, "construct", construct.OPS)


def values(shape, dtype):
    if np.dtype(dtype).kind == "b":
        return RNG.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(0, 9, shape).astype(dtype)
    return (RNG.standard_normal(shape) * 4).astype(dtype)


def layouts(value):
    """``value`` as differently laid out arrays of the same contents."""
    value = np.asarray(value)
    out = {"contiguous": np.ascontiguousarray(value)}
    if value.ndim:
        every = tuple(slice(None, None, 2) for _ in range(value.ndim))
        back = tuple(slice(None, None, -1) for _ in range(value.ndim))
        big = np.zeros(tuple(2 * s for s in value.shape), value.dtype)
        big[every] = value
        out["strided"] = big[every]
        out["negative"] = np.ascontiguousarray(value[back])[back]
        out["fortran"] = np.asfortranarray(value)
    return out


def unaligned(value):
    """A copy of ``value`` whose data starts one byte past an aligned address."""
    raw = np.zeros(value.nbytes + 1, np.uint8)
    a = raw[1:].view(value.dtype).reshape(value.shape)
    a[...] = value
    assert not a.flags.aligned or value.dtype.itemsize == 1
    return a


# ---------------------------------------------------------------- alloc / fill
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int8", "uint64", "bool"])
def test_alloc_broadcasts_any_layout(dtype):
    v, n = T.tensor(dtype, shape=(None, None), name="v"), T.lscalar("n")
    f = compiled([v, n], T.alloc(v, n, v.shape[0], v.shape[1]))
    base = values((3, 4), dtype)
    cases = {**layouts(base), "broadcast": np.broadcast_to(base[1], (3, 4))}
    for layout, value in cases.items():
        got = f(value, 2)
        np.testing.assert_array_equal(got, np.broadcast_to(value, (2, 3, 4)), err_msg=layout)
        assert got.dtype == np.dtype(dtype) and got.flags.c_contiguous


def test_alloc_scalar_fill_0d_empty_and_runtime_length_one():
    s, n, m = T.dscalar("s"), T.lscalar("n"), T.lscalar("m")
    f = compiled([s, n, m], [T.alloc(s, n, m), T.zeros((n, m)), T.full((n, m), s)])
    for shape in [(3, 5), (1, 1), (0, 4), (4, 0)]:
        a, z, full = f(2.5, *shape)
        np.testing.assert_array_equal(a, np.full(shape, 2.5))
        np.testing.assert_array_equal(z, np.zeros(shape))
        np.testing.assert_array_equal(full, np.full(shape, 2.5))
    t = T.dscalar("t")
    zero_d = compiled([s, t], T.second(s, t))  # 0-d in and out
    assert zero_d(4.0, 1.5).shape == () and zero_d(4.0, 1.5) == 1.5
    # A 0-d Alloc is rewritten away in a graph; its kernel still handles one.
    storage = [[None]]
    construct.factory(T.alloc(s).owner)([np.array(4.0)], storage)
    assert storage[0][0].shape == () and storage[0][0] == 4.0
    # A value of run-time length 1 broadcasts like NumPy's assignment (perform does it).
    v = T.vector("v")
    g = compiled([v, n, m], T.alloc(v, n, m))
    np.testing.assert_array_equal(g(np.array([7.0]), 2, 3), np.full((2, 3), 7.0))
    np.testing.assert_array_equal(g(np.arange(3.0)[::-1], 2, 3), [[2, 1, 0]] * 2)


def test_alloc_errors_are_numpys():
    v, n, m = T.vector("v"), T.lscalar("n"), T.lscalar("m")
    f = compiled([v, n, m], T.alloc(v, n, m))
    with pytest.raises(ValueError, match="negative"):
        f(np.zeros(3), -1, 3)
    with pytest.raises(ValueError, match="broadcast"):
        f(np.zeros(3), 2, 4)
    with pytest.raises(ValueError, match="broadcast"):
        f(np.zeros(3), 0, 4)  # even when the result would be empty


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "bool"])
def test_second_and_fill(dtype):
    x, r = T.matrix("x"), T.tensor(dtype, shape=(1, None), name="r")
    s = T.scalar("s", dtype=dtype)
    f = compiled([x, r, s], [T.second(x, r), T.fill(x, s)])
    row, scalar = values((1, 4), dtype), values((), dtype)
    for layout, xv in layouts(values((3, 4), "float64")).items():
        for rv in layouts(row).values():
            got, filled = f(xv, rv, scalar)
            np.testing.assert_array_equal(got, np.broadcast_to(row, (3, 4)), err_msg=layout)
            np.testing.assert_array_equal(filled, np.full((3, 4), scalar), err_msg=layout)
            assert got.dtype == filled.dtype == np.dtype(dtype)
    got, filled = f(np.zeros((0, 4)), row, scalar)
    assert got.shape == filled.shape == (0, 4)


def test_second_shapes_and_errors():
    a, b = T.row("a"), T.matrix("b")
    f = compiled([a, b], T.second(a, b))  # a broadcastable: the shape is b's
    bv = values((3, 4), "float64")
    for value in layouts(bv).values():
        np.testing.assert_array_equal(f(np.zeros((1, 4)), value), bv)
    x, y = T.matrix("x"), T.matrix("y")
    g = compiled([x, y], T.second(x, y))
    np.testing.assert_array_equal(g(np.zeros((2, 3)), bv[:2, :3][::-1]), bv[:2, :3][::-1])
    with pytest.raises(ValueError, match="can not be broadcast"):
        g(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="does not declare it broadcastable"):
        g(np.zeros((2, 3)), np.zeros((1, 3)))
    with pytest.raises(ValueError):
        f(np.zeros((1, 5)), bv)


# ---------------------------------------------------------------- eye / tri
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "uint8", "bool"])
def test_eye_and_tri(dtype):
    n, m, k = T.lscalar("n"), T.lscalar("m"), T.lscalar("k")
    f = compiled([n, m, k], [T.eye(n, m, k, dtype=dtype), T.tri(n, m, k, dtype=dtype)])
    for shape in [(4, 4), (3, 6), (6, 3), (1, 1), (0, 3), (3, 0), (0, 0)]:
        for kv in [0, 1, -1, 2, -5, 7, 10**18, -(10**18), 2**63 - 1, -(2**63)]:
            try:
                want = np.tri(*shape, kv, dtype=dtype)
            except OverflowError:  # NumPy's arange(-k, m - k) overflows: the same error
                with pytest.raises(OverflowError):
                    f(*shape, kv)
                continue
            eye, tri = f(*shape, kv)
            np.testing.assert_array_equal(eye, np.eye(*shape, kv, dtype=dtype))
            np.testing.assert_array_equal(tri, want)
            assert eye.dtype == tri.dtype == np.dtype(dtype)
    with pytest.raises(ValueError, match="negative dimensions"):
        f(-1, 3, 0)


def test_tril_triu_and_identity_like():
    x, k = T.matrix("x"), T.lscalar("k")
    f = compiled([x, k], [T.tril(x, k), T.triu(x, k), T.identity_like(x)])
    xv = values((4, 6), "float64")
    for value in layouts(xv).values():
        for kv in (-2, 0, 3):
            lo, up, ident = f(value, kv)
            np.testing.assert_array_equal(lo, np.tril(xv, kv))
            np.testing.assert_array_equal(up, np.triu(xv, kv))
            np.testing.assert_array_equal(ident, np.eye(4, 6))
    t = T.tensor3("t")
    g = compiled([t, k], T.tril(t, k))
    tv = values((2, 3, 5), "float64")
    np.testing.assert_array_equal(g(tv, 1), np.tril(tv, 1))


# ---------------------------------------------------------------- arange
@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8", "uint64"])
def test_arange_integers(dtype):
    a, b, c = T.lscalar("a"), T.lscalar("b"), T.lscalar("c")
    f = compiled([a, b, c], T.arange(a, b, c, dtype=dtype))
    low = 0 if dtype.startswith("u") else -20
    for start, stop, step in [(0, 10, 1), (3, 40, 7), (10, 0, -3), (5, 5, 1), (5, 0, 1)]:
        np.testing.assert_array_equal(f(start, stop, step), np.arange(start, stop, step, dtype))
    for _ in range(40):
        start, stop = (int(v) for v in RNG.integers(low, 100, 2))
        step = int(RNG.choice([1, 2, 5, -1, -3]))
        got = f(start, stop, step)
        np.testing.assert_array_equal(got, np.arange(start, stop, step, dtype=dtype))
        assert got.dtype == np.dtype(dtype)
    with pytest.raises(ValueError, match="zero"):
        f(0, 5, 0)
    if dtype in ("int8", "uint8"):  # a wrapping fill, as NumPy's
        np.testing.assert_array_equal(f(0, 300, 1), np.arange(0, 300, 1, dtype=dtype))
        with pytest.raises(OverflowError):
            f(1000, 1200, 1)  # the first value does not fit: NumPy's error


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_arange_floats(dtype):
    a, b, c = T.dscalar("a"), T.dscalar("b"), T.dscalar("c")
    f = compiled([a, b, c], T.arange(a, b, c, dtype=dtype))
    cases = [(0.0, 1.0, 0.1), (-3.5, 7.25, 1 / 3), (10.0, -10.0, -0.7), (1.0, 1.0, 1.0)]
    cases += [(0.0, 1e6, 0.37), (2.0, 1.0, 0.5)]
    for _ in range(40):
        start, stop = RNG.uniform(-100, 100, 2)
        cases.append((start, stop, float(RNG.choice([0.3, -0.45, 2.5, 1 / 7]))))
    for start, stop, step in cases:
        got = f(start, stop, step)
        np.testing.assert_array_equal(got, np.arange(start, stop, step, dtype=dtype))
        assert got.dtype == np.dtype(dtype)
    with pytest.raises(ValueError):
        f(0.0, np.nan, 1.0)
    with pytest.raises((OverflowError, ValueError)):
        f(0.0, np.inf, 1.0)
    n = T.lscalar("n")  # integer bounds into floats
    g = compiled([n], T.arange(n, dtype=dtype))
    np.testing.assert_array_equal(g(7), np.arange(7, dtype=dtype))
    assert g(0).shape == (0,)


# ---------------------------------------------------------------- join
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_join_any_layout_and_mixed_dtypes(axis):
    x, y = T.tensor3("x"), T.tensor3("y", dtype="int32")
    z = T.tensor3("z", dtype="float32")
    f = compiled([x, y, z], [T.join(axis, x, y, z), T.join(axis, y, y)])
    shapes = [[2, 3, 4] for _ in range(3)]
    for i, s in enumerate(shapes):
        s[axis] = i + 1
    xv, yv, zv = (values(s, d) for s, d in zip(shapes, ["float64", "int32", "float32"]))
    for lx, xl in layouts(xv).items():
        for ly, yl in layouts(yv).items():
            joined, same = f(xl, yl, zv[::-1])
            want = np.concatenate([xv, yv, zv[::-1]], axis=axis)
            np.testing.assert_array_equal(joined, want, err_msg=f"{lx}, {ly}")
            np.testing.assert_array_equal(same, np.concatenate([yv, yv], axis=axis))
            assert joined.dtype == np.float64 and same.dtype == np.int32
    for layout in ("fortran", "negative", "strided"):  # every input alike
        parts = [layouts(v)[layout] for v in (xv, yv, zv)]
        joined, same = f(*parts)
        np.testing.assert_array_equal(joined, np.concatenate([xv, yv, zv], axis=axis))
        np.testing.assert_array_equal(same, np.concatenate([yv, yv], axis=axis))
    empty = [list(s) for s in shapes]
    empty[1][axis] = 0
    ev = np.zeros(empty[1], "int32")
    np.testing.assert_array_equal(f(xv, ev, zv)[0], np.concatenate([xv, ev, zv], axis=axis))


def test_join_broadcast_inputs_stack_concatenate_and_errors():
    x, y = T.matrix("x"), T.matrix("y")
    f = compiled([x, y], [T.stack([x, y], axis=1), T.concatenate([x, y], axis=None)])
    xv, yv = values((3, 4), "float64"), np.broadcast_to(np.arange(4.0), (3, 4))
    st, flat = f(xv, yv)
    np.testing.assert_array_equal(st, np.stack([xv, yv], axis=1))
    np.testing.assert_array_equal(flat, np.concatenate([xv, yv], axis=None))
    v = T.vector("v")
    one = compiled([v], T.join(0, v))
    got = one(np.arange(5.0)[::-2])
    np.testing.assert_array_equal(got, [4.0, 2.0, 0.0])
    g = compiled([x, y], T.join(1, x, y))
    assert g(np.zeros((0, 2)), np.zeros((0, 3))).shape == (0, 5)
    with pytest.raises(ValueError, match="can not join arrays of shapes"):
        g(np.zeros((2, 2)), np.zeros((3, 2)))


# ---------------------------------------------------------------- one_hot
@pytest.mark.parametrize("index_dtype", ["int64", "int32", "uint8"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "bool"])
def test_one_hot(index_dtype, dtype):
    y, n = T.tensor(index_dtype, shape=(None, None), name="y"), T.lscalar("n")
    f = compiled([y, n], nnet.to_one_hot(y, n, dtype=dtype))
    yv = RNG.integers(0, 5, (3, 4)).astype(index_dtype)
    for layout, value in layouts(yv).items():
        got = f(value, 5)
        np.testing.assert_array_equal(got, np.eye(5, dtype=dtype)[yv], err_msg=layout)
        assert got.dtype == np.dtype(dtype)
    assert f(np.zeros((0, 3), index_dtype), 4).shape == (0, 3, 4)
    assert f(np.zeros((2, 0), index_dtype), 0).shape == (2, 0, 0)


def test_one_hot_0d_vector_and_out_of_range():
    s, v, n = T.lscalar("s"), T.lvector("v"), T.lscalar("n")
    f = compiled([s, v, n], [nnet.to_one_hot(s, n), nnet.to_one_hot(v, n)])
    hot, rows = f(2, np.array([0, 3, 1])[::-1], 4)
    np.testing.assert_array_equal(hot, [0, 0, 1, 0])
    np.testing.assert_array_equal(rows, np.eye(4)[[1, 3, 0]])
    with pytest.raises(IndexError, match="class index 4 is out of range for 4 classes"):
        f(0, np.array([0, 4]), 4)
    with pytest.raises(IndexError, match="class index -1 is out of range for 4 classes"):
        f(-1, np.array([0]), 4)
    with pytest.raises(IndexError, match="out of range for 0 classes"):
        f(0, np.array([0]), 0)
    g = compiled([v, n], nnet.to_one_hot(v, n), mode=C_ONLY)
    with pytest.raises(IndexError, match="class index 9 is out of range for 3 classes"):
        g(np.array([1, 9, -2]), 3)


# ---------------------------------------------------------------- cumsum / cumprod
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32", "uint8", "bool"])
def test_cumsum_cumprod_each_axis(dtype):
    x = T.tensor(dtype, shape=(None, None, None), name="x")
    outs = [fn(x, axis=a) for fn in (T.cumsum, T.cumprod) for a in (0, 1, 2)]
    f = compiled([x], [*outs, T.cumsum(x), T.cumprod(x)])
    xv = values((3, 4, 5), dtype)
    if dtype.startswith("float"):
        xv = (xv / 4 + 1).astype(dtype)  # products stay in range
    for layout, value in layouts(xv).items():
        got = f(value)
        want = [fn(xv, axis=a) for fn in (np.cumsum, np.cumprod) for a in (0, 1, 2)]
        want += [np.cumsum(xv), np.cumprod(xv)]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, err_msg=layout)  # exactly: same order
            assert g.dtype == w.dtype
    assert all(r.shape == (0, 4, 5) for r in f(np.zeros((0, 4, 5), dtype))[:6])


def test_cum_of_broadcast_input_and_integer_overflow():
    v = T.lvector("v")
    f = compiled([v], [T.cumsum(v), T.cumprod(v)])
    big = np.full(5, 2**62, np.int64)
    s, p = f(big)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(s, np.cumsum(big))  # wraps around, as NumPy
        np.testing.assert_array_equal(p, np.cumprod(big))
    s, p = f(np.broadcast_to(np.int64(3), (4,)))
    np.testing.assert_array_equal(s, [3, 6, 9, 12])
    np.testing.assert_array_equal(p, [3, 9, 27, 81])


# ---------------------------------------------------------------- sort
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32", "uint8", "bool"])
def test_sort_each_axis_and_layout(dtype):
    x = T.tensor(dtype, shape=(None, None, None), name="x")
    f = compiled([x], [T.sort(x, axis=a) for a in (0, 1, 2)] + [T.sort(x, axis=None)])
    xv = values((5, 6, 40), dtype)
    for layout, value in layouts(xv).items():
        for a, got in enumerate(f(value)):
            want = np.sort(xv, axis=None if a == 3 else a)
            np.testing.assert_array_equal(got, want, err_msg=f"{layout}, axis {a}")
            assert got.dtype == np.dtype(dtype)
    assert f(np.zeros((0, 3, 2), dtype))[2].shape == (0, 3, 2)


@pytest.mark.parametrize("kind", ["quicksort", "stable", "heapsort"])
def test_sort_long_rows_nans_and_patterns(kind):
    v = T.vector("v")
    f = compiled([v], T.sort(v, kind=kind))
    n = 5000
    patterns = {
        "random": RNG.standard_normal(n),
        "sorted": np.arange(n, dtype=float),
        "reversed": np.arange(n, dtype=float)[::-1],
        "equal": np.ones(n),
        "few": RNG.integers(0, 3, n).astype(float),
        "organ": np.concatenate([np.arange(n // 2), np.arange(n // 2)[::-1]]).astype(float),
        "sawtooth": (np.arange(n) % 17).astype(float),
    }
    special = RNG.standard_normal(n)
    special[RNG.integers(0, n, 300)] = np.nan
    special[RNG.integers(0, n, 50)] = np.inf
    special[RNG.integers(0, n, 50)] = -np.inf
    patterns["nan_inf"] = special
    patterns["all_nan"] = np.full(7, np.nan)
    for name, value in patterns.items():
        for layout, lv in layouts(value).items():
            got = f(lv)
            np.testing.assert_array_equal(got, np.sort(value, kind=kind), err_msg=name + layout)


def test_stable_sort_keeps_signed_zeros_in_order():
    v = T.vector("v")
    f = compiled([v], T.sort(v, kind="stable"))
    value = np.array([0.0, -1.0, -0.0, 2.0, 0.0, -0.0, np.nan, -3.0] * 5)
    got = f(value)
    want = np.sort(value, kind="stable")
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# ---------------------------------------------------------------- fallbacks, reuse
def test_unaligned_inputs_use_perform():
    x, y, n = T.matrix("x"), T.lvector("y"), T.lscalar("n")
    outs = [T.cumsum(x, axis=1), T.sort(x, axis=0), T.join(0, x, x), T.join(1, x, x)]
    outs += [T.alloc(x, n, 3, 4), T.second(x, x), nnet.to_one_hot(y, n)]
    f = compiled([x, y, n], outs)
    xv, yv = values((3, 4), "float64"), np.array([1, 0, 3])
    cs, so, j0, j1, al, se, oh = f(unaligned(xv), unaligned(yv), 4)
    np.testing.assert_array_equal(cs, np.cumsum(xv, axis=1))
    np.testing.assert_array_equal(so, np.sort(xv, axis=0))
    np.testing.assert_array_equal(j0, np.concatenate([xv, xv]))
    np.testing.assert_array_equal(j1, np.concatenate([xv, xv], axis=1))
    np.testing.assert_array_equal(al, np.broadcast_to(xv, (4, 3, 4)))
    np.testing.assert_array_equal(se, xv)
    np.testing.assert_array_equal(oh, np.eye(4)[yv])


def test_repeated_calls_with_changing_shapes_and_layouts():
    x, n, m = T.matrix("x"), T.lscalar("n"), T.lscalar("m")
    outs = [T.cumsum(x, axis=0), T.sort(x), T.join(1, x, x), T.alloc(1.5, n, m), T.eye(n, m)]
    f = compiled([x, n, m], outs, mode=C_ONLY)
    for shape, order in [((3, 4), "C"), ((3, 4), "F"), ((3, 4), "F"), ((5, 2), "C"), ((0, 2), "F")]:
        xv = np.asarray(values(shape, "float64"), order=order)
        cs, so, jo, al, ey = (np.array(r) for r in f(xv, *shape))
        np.testing.assert_array_equal(cs, np.cumsum(xv, axis=0))
        np.testing.assert_array_equal(so, np.sort(xv))
        np.testing.assert_array_equal(jo, np.concatenate([xv, xv], axis=1))
        np.testing.assert_array_equal(al, np.full(shape, 1.5))
        np.testing.assert_array_equal(ey, np.eye(*shape))


def test_unsupported_variants_stay_in_python():
    x = T.tensor("float16", shape=(None,), name="x")
    a, b = T.dscalar("a"), T.dscalar("b")
    f = tensorjit.function([x, a, b], [T.cumsum(x), T.arange(a, b, dtype="int64")], mode=C_ONLY)
    names = {type(n.op).__name__: f.kernels[n].name for n in f.kernels}
    assert names["CumOp"] == names["ARange"] == "perform"
    cs, ar = f(np.ones(3, "float16"), 0.5, 4.0)
    np.testing.assert_array_equal(cs, [1, 2, 3])
    np.testing.assert_array_equal(ar, np.arange(0.5, 4.0, dtype="int64"))
