"""Table 1: allocation (fill/second, full, eye, arange, tri...) and advanced indexing
(integer arrays, boolean masks, take, set/inc_subtensor), against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.gradient import DisconnectedInputError
from tensorjit.printing import pprint
from tensorjit.tensor.allocation import (
    ARange,
    Eye,
    Second,
    Tri,
    arange,
    eye,
    fill,
    full,
    full_like,
    identity_like,
    second,
    tri,
    tril,
    triu,
)
from tensorjit.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedSubtensor,
    Subtensor,
    advanced_incsubtensor_inplace_variant,
    inc_subtensor,
    set_subtensor,
    take,
)

RNG = np.random.default_rng(20240617)
DEBUG = "DebugMode"


def run(inputs, outputs, *values, mode=DEBUG):
    return tensorjit.function(inputs, outputs, mode=mode)(*values)


def check_same(got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-12)
    else:
        np.testing.assert_array_equal(got, expected)


def node_ops(f) -> list:
    return [n.op for n in f.fgraph.toposort()]


def vgrad(fn, values):
    tensorjit.verify_grad(fn, values, rng=np.random.default_rng(0))


def check_shape_without(inputs, out, op_class, values, expected_shape):
    """``out.shape`` compiles to a graph without ``op_class`` (infer_shape) and is right."""
    f = tensorjit.function(inputs, out.shape, on_unused_input="ignore")
    assert not any(isinstance(op, op_class) for op in node_ops(f)), node_ops(f)
    np.testing.assert_array_equal(f(*values), expected_shape)
    g = tensorjit.function(inputs, out.shape, mode=DEBUG, on_unused_input="ignore")
    np.testing.assert_array_equal(g(*values), expected_shape)


# ================================================================ fill / second
@pytest.mark.parametrize(
    "a_shape, b_shape, a_static, b_static",
    [
        ((3, 4), (), (None, None), ()),
        ((3, 4), (1, 4), (None, None), (1, None)),
        ((3, 4), (4,), (None, None), (None,)),
        ((3, 1), (3, 5), (None, 1), (None, None)),
        ((0, 4), (1, 4), (None, None), (1, None)),
        ((), (), (), ()),
        ((2, 3), (2, 3), (2, 3), (None, None)),
    ],
)
def test_second_and_fill_match_numpy_broadcasting(a_shape, b_shape, a_static, b_static):
    a = T.tensor("float32", shape=a_static, name="a")
    b = T.tensor("float64", shape=b_static, name="b")
    av = RNG.normal(size=a_shape).astype("float32")
    bv = RNG.normal(size=b_shape)
    expected = np.broadcast_to(bv, np.broadcast_shapes(a_shape, b_shape)).copy()
    out1, out2 = second(a, b), fill(a, b)
    assert out1.type.dtype == "float64"
    f = tensorjit.function([a, b], [out1, out2], mode=DEBUG)
    got1, got2 = f(av, bv)
    check_same(got1, expected)
    check_same(got2, expected)
    got1[...] = 0  # a new array: writing to it leaves b alone
    assert not np.shares_memory(got1, bv)


def test_fill_with_python_scalar_takes_the_model_dtype_and_static_shape():
    x = T.tensor("float32", shape=(None, 3), name="x")
    out = fill(x, 0)
    assert out.type.dtype == "float32" and out.type.shape == (None, 3)
    check_same(run([x], out, np.ones((2, 3), "float32")), np.zeros((2, 3), "float32"))
    i = T.imatrix("i")
    assert fill(i, 1.5).type.dtype == "float64"  # 1.5 does not fit int32
    assert Second() == Second() and str(Second()) == "Second"


def test_second_errors():
    a = T.tensor("float64", shape=(2, 3), name="a")
    b = T.tensor("float64", shape=(2, 4), name="b")
    with pytest.raises(ValueError, match=r"second: shapes \(2, 3\) and \(2, 4\) .*'a'.*'b'"):
        second(a, b)
    m, v = T.dmatrix("m"), T.dvector("v")
    f = tensorjit.function([m, v], second(m, v))
    with pytest.raises(ValueError, match=r"'v' .* has length 1 in dimension 0 at run time"):
        f(np.zeros((2, 3)), np.zeros(1))
    with pytest.raises(ValueError, match=r"can not be broadcast together"):
        f(np.zeros((2, 3)), np.zeros(4))


def test_second_grad_and_infer_shape():
    vgrad(lambda a, b: second(a, b), [RNG.normal(size=(3, 4)), RNG.normal(size=(1, 4))])
    vgrad(lambda a, b: fill(a, b), [RNG.normal(size=(2, 3, 4)), RNG.normal(size=(4,))])
    vgrad(lambda a, b: fill(a, b), [RNG.normal(size=(2, 3)), RNG.normal(size=())])
    a, b = T.dmatrix("a"), T.drow("b")
    with pytest.raises(DisconnectedInputError):
        tensorjit.grad(second(a, b).sum(), a)
    ga, gb = tensorjit.grad(second(a, b).sum(), [a, b], disconnected_inputs="ignore")
    got = run([a, b], [ga, gb], np.ones((3, 2)), np.ones((1, 2)))
    check_same(got[0], np.zeros((3, 2)))
    check_same(got[1], np.full((1, 2), 3.0))
    check_shape_without([a, b], second(a, b), Second, [np.ones((5, 2)), np.ones((1, 2))], [5, 2])


# ================================================================ full / full_like
def test_full_matches_numpy():
    n = T.lscalar("n")
    k = T.iscalar("k")
    check_same(run([], full((2, 3), 1.5)), np.full((2, 3), 1.5))
    check_same(run([], full(4, 7)), np.full(4, 7))
    check_same(run([], full((), 2.0)), np.full((), 2.0))
    check_same(run([], full((0, 3), 2.0)), np.full((0, 3), 2.0))
    check_same(run([n, k], full((n, k), 3, dtype="int16"), 2, 3), np.full((2, 3), 3, "int16"))
    check_same(run([], full([2, 3], [1.0, 2.0, 3.0])), np.full((2, 3), [1.0, 2.0, 3.0]))
    check_same(run([], full(np.array([2, 2]), True)), np.full((2, 2), True))
    shp = T.constant(np.array([3, 1]))
    check_same(run([], full(shp, 0.5, dtype="float32")), np.full((3, 1), 0.5, "float32"))
    assert full((2, 3), 1.0).type.shape == (2, 3)
    assert full((n, 3), 1.0).type.shape == (None, 3)
    v = T.dscalar("v")
    vgrad(lambda v: full((2, 3), v), [np.array(0.5)])
    check_shape_without([n, v], full((n, 4), v), T.Alloc, [5, 1.0], [5, 4])


def test_full_errors():
    with pytest.raises(ValueError, match=r"full: a shape entry must not be negative, got -1"):
        full((2, -1), 0.0)
    with pytest.raises(TypeError, match=r"full: shape entry must be an integer scalar, got 'x'"):
        full((2, T.dscalar("x")), 0.0)
    with pytest.raises(TypeError, match=r"full: shape entry must be an integer, got True"):
        full((True, 2), 0.0)
    with pytest.raises(ValueError, match=r"fill_value .* more dimensions than the shape \(1\)"):
        full(3, np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"shape vector 'v' .* needs a static length"):
        full(T.lvector("v"), 0.0)


def test_full_like_matches_numpy():
    x = T.tensor("int32", shape=(None, 3), name="x")
    xv = np.arange(6, dtype="int32").reshape(2, 3)
    check_same(run([x], full_like(x, 7), xv), np.full_like(xv, 7))
    check_same(run([x], full_like(x, 2.7), xv), np.full_like(xv, 2.7))
    check_same(run([x], full_like(x, 2.5, dtype="float32"), xv), np.full_like(xv, 2.5, "float32"))
    check_same(run([x], full_like(x, [1, 2, 3]), xv), np.full_like(xv, [1, 2, 3]))
    e = T.dvector("e")
    check_same(run([e], full_like(e, 1.0), np.zeros(0)), np.zeros(0) + 1.0)
    assert full_like(x, 1).type.shape == (None, 3)
    with pytest.raises(ValueError, match=r"full_like: fill_value .* more dimensions than 'e'"):
        full_like(e, np.ones((2, 2)))


# ================================================================ eye / identity_like / tri
EYE_CASES = [(3, None, 0), (3, 5, 1), (4, 2, -1), (3, 3, 5), (3, 3, -5), (0, 3, 0), (1, 1, 0)]


@pytest.mark.parametrize("n, m, k", EYE_CASES)
def test_eye_and_tri_match_numpy(n, m, k):
    check_same(run([], eye(n, m, k, dtype="float64")), np.eye(n, m, k))
    check_same(run([], tri(n, m, k, dtype="int32")), np.tri(n, m, k, dtype="int32"))
    assert eye(n, m, k).type.shape == np.eye(n, m, k).shape
    sn, sm, sk = T.lscalar("n"), T.iscalar("m"), T.bscalar("k")
    m_val = n if m is None else m
    f = tensorjit.function([sn, sm, sk], [eye(sn, sm, sk, "int8"), tri(sn, sm, sk)], mode=DEBUG)
    got_eye, got_tri = f(n, m_val, k)
    check_same(got_eye, np.eye(n, m_val, k, dtype="int8"))
    check_same(got_tri, np.tri(n, m_val, k, dtype=tensorjit.config.floatX))


def test_eye_defaults_static_shape_infer_shape_and_errors():
    assert eye(3).type.dtype == tensorjit.config.floatX
    n = T.lscalar("n")
    assert eye(n, 4).type.shape == (None, 4)
    assert Eye("float64") != Tri("float64") and Eye("int8") == Eye("int8")
    assert str(Eye("int8")) == "Eye{int8}"
    check_shape_without([n], eye(n, n + 2), Eye, [3], [3, 5])
    with pytest.raises(TypeError, match=r"eye: the number of rows must be an integer scalar"):
        eye(2.5)
    with pytest.raises(TypeError, match=r"eye: the number of columns .* got 'x'"):
        eye(3, T.dscalar("x"))
    with pytest.raises(ValueError, match=r"eye: the number of rows must not be negative, got -2"):
        eye(-2)
    f = tensorjit.function([n], eye(n))
    with pytest.raises(ValueError, match=r"negative dimensions are not allowed: -1 rows"):
        f(-1)
    with pytest.raises(TypeError, match=r"tri: the diagonal offset k must be an integer"):
        tri(3, 3, 0.5)


@pytest.mark.parametrize("n, m, k", [(-1, 3, 0), (3, -2, 1), (-2, -2, -1), (-4, 2, 5)])
def test_tri_of_a_negative_size_has_none_of_those_rows_as_numpys(n, m, k):
    """np.tri(-1, 3) is a (0, 3) matrix (np.eye raises): constant and symbolic sizes,
    the static shape and the inferred one."""
    want = np.tri(n, m, k, dtype="int32")
    constant_sizes = tri(n, m, k, dtype="int32")
    assert constant_sizes.type.shape == want.shape
    check_same(run([], constant_sizes), want)
    sn, sm = T.lscalar("n"), T.lscalar("m")
    made = tri(sn, sm, k, dtype="int32")
    f = tensorjit.function([sn, sm], [made, made.shape], mode=DEBUG)
    got, shape = f(n, m)
    check_same(got, want)
    assert tuple(shape) == want.shape
    check_shape_without([sn, sm], made, Tri, [n, m], list(want.shape))


@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (4, 1), (0, 3)])
def test_identity_like(shape):
    x = T.tensor("float32", shape=(None, None), name="x")
    check_same(run([x], identity_like(x), np.ones(shape, "float32")), np.eye(*shape, dtype="f4"))
    i = T.lmatrix("i")
    check_same(run([i], identity_like(i), np.ones(shape, "int64")), np.eye(*shape, dtype="i8"))


def test_identity_like_errors_and_grad():
    with pytest.raises(TypeError, match=r"identity_like: expected a matrix, got 'v'"):
        identity_like(T.dvector("v"))
    x = T.dmatrix("x")
    assert identity_like(T.tensor("float64", shape=(2, 3))).type.shape == (2, 3)
    (g,) = tensorjit.grad((identity_like(x) * x).sum(), [x])
    check_same(run([x], g, np.ones((2, 3))), np.eye(2, 3))


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 2), (2, 3, 4), (0, 3), (2, 0, 0)])
@pytest.mark.parametrize("k", [0, 1, -1, 3, -4])
def test_tril_triu_match_numpy(shape, k):
    x = T.tensor("float64", shape=(None,) * len(shape), name="x")
    xv = RNG.normal(size=shape)
    got_l, got_u = tensorjit.function([x], [tril(x, k), triu(x, k)], mode=DEBUG)(xv)
    check_same(got_l, np.tril(xv, k))
    check_same(got_u, np.triu(xv, k))


def test_tril_triu_details():
    x = T.dmatrix("x")
    xv = np.array([[1.0, np.inf], [np.nan, 2.0]])
    check_same(run([x], tril(x), xv), np.tril(xv))  # no 0 * inf = nan
    check_same(run([x], triu(x), xv), np.triu(xv))
    b = T.tensor("bool", shape=(None, None), name="b")
    bv = RNG.integers(0, 2, size=(3, 4)).astype(bool)
    check_same(run([b], tril(b, 1), bv), np.tril(bv, 1))
    k = T.lscalar("k")
    f = tensorjit.function([x, k], [tril(x, k), triu(x, k)], mode=DEBUG)
    xv = RNG.normal(size=(3, 4))
    for kv in (-1, 0, 2):
        got = f(xv, kv)
        check_same(got[0], np.tril(xv, kv))
        check_same(got[1], np.triu(xv, kv))
    assert tril(T.tensor("float32", shape=(2, 3))).type.shape == (2, 3)
    vgrad(lambda a: tril(a, 1) * 2.0 + triu(a, -1), [RNG.normal(size=(3, 4))])
    vgrad(lambda a: triu(a), [RNG.normal(size=(2, 3, 3))])
    with pytest.raises(TypeError, match=r"tril: expected at least 2 dimensions, got 'v'"):
        tril(T.dvector("v"))
    with pytest.raises(TypeError, match=r"triu: k must be an integer"):
        triu(x, 1.5)


# ================================================================ arange
ARANGE_CASES = [
    (5,),
    (0,),
    (-3,),
    (2, 10),
    (2, 10, 3),
    (10, 2, -3),
    (5, 1),
    (0.5, 3.2, 0.7),
    (3.0,),
    (1, 2.5, 0.25),
    (-1.5, -4, -0.5),
]


@pytest.mark.parametrize("args", ARANGE_CASES, ids=repr)
def test_arange_constant_bounds(args):
    expected = np.arange(*args)
    out = arange(*args)
    assert out.type.shape == expected.shape
    check_same(run([], out), expected)
    check_same(run([], arange(*args, dtype="float32")), np.arange(*args, dtype="float32"))


@pytest.mark.parametrize(
    "dtypes",
    [
        ("int64", "int64", "int64"),
        ("int32", "int32", "int32"),
        ("int8", "int16", "uint8"),
        ("float32", "float32", "float32"),
        ("int32", "float32", "int64"),
        ("float64", "int64", "float64"),
        ("uint64", "uint64", "uint64"),
    ],
)
def test_arange_symbolic_bounds_dtype_and_values_like_numpy(dtypes):
    start, stop, step = (T.tensor(d, shape=(), name=n) for d, n in zip(dtypes, "abc"))
    out = arange(start, stop, step)
    f = tensorjit.function([start, stop, step], [out, out.shape], mode=DEBUG)
    cases = [(1, 9, 2), (0, 7, 7), (5, 5, 1), (1, 5, 3)]
    if not dtypes[0].startswith("uint"):  # NumPy's own uint64 stop - start wraps around
        cases.append((2, 0, 1))
    for values in cases:
        typed = [np.dtype(d).type(v) for d, v in zip(dtypes, values)]
        expected = np.arange(*typed)
        assert out.type.dtype == expected.dtype
        got, got_shape = f(*typed)
        check_same(got, expected)
        np.testing.assert_array_equal(got_shape, expected.shape)


def test_arange_infer_shape_with_negative_and_float_steps():
    a, b, c = T.lscalars("a", "b", "c")
    out = arange(a, b, c)
    f = tensorjit.function([a, b, c], out.shape)
    assert not any(isinstance(op, ARange) for op in node_ops(f))
    for values in [(0, 10, 3), (10, 0, -3), (10, 0, -1), (0, 10, -1), (-7, 8, 5), (3, 3, 2)]:
        assert f(*values)[0] == len(np.arange(*values)), values
    x, y, z = T.dscalars("x", "y", "z")
    g = tensorjit.function([x, y, z], arange(x, y, z).shape)
    assert not any(isinstance(op, ARange) for op in node_ops(g))
    for values in [(0.0, 1.0, 0.1), (1.0, -2.5, -0.3), (0.0, 1.0, -0.1), (0.5, 3.2, 0.7)]:
        assert g(*values)[0] == len(np.arange(*values)), values
    n = T.lscalar("n")
    check_shape_without([n], arange(n), ARange, [6], [6])


def test_arange_grad():
    vgrad(lambda a, c: arange(a, 4.0, c), [np.array(0.3), np.array(0.7)])
    vgrad(lambda a, b: arange(a, b, 0.5), [np.array(-1.2), np.array(2.1)])
    start = T.dscalar("start")
    n = T.lscalar("n")
    (g,) = tensorjit.grad(arange(start, n, 1.0).sum(), [start])
    assert run([start, n], g, 0.0, 4) == 4.0


def test_arange_errors():
    with pytest.raises(ValueError, match=r"arange: step can not be zero"):
        arange(0, 5, 0)
    step = T.lscalar("step")
    f = tensorjit.function([step], arange(0, 5, step))
    with pytest.raises(ValueError, match=r"arange: step 'step' .* is zero at run time"):
        f(0)
    with pytest.raises(TypeError, match=r"arange: stop must be a real .* got 'v'"):
        arange(T.dvector("v"))
    with pytest.raises(TypeError, match=r"arange: start must be a real .* got 'z'"):
        arange(T.zscalar("z"), 4)
    with pytest.raises(TypeError, match=r"arange: step must be a number, got 'one'"):
        arange(0, 4, "one")
    assert arange(True).type.dtype == "int64"


# ================================================================ advanced indexing (reading)
# Index tuples for a (3, 4, 5) tensor; arrays here become constants, and each is also
# tried with its integer arrays as symbolic inputs.
ADV_CASES = [
    ([0, 2, -1, 0],),
    (np.array([[0, 1], [2, 2]]),),
    (slice(None), [3, 0]),
    (Ellipsis, [4, 4, 0]),
    ([0, 2], [1, 3]),
    ([0, 2], slice(None), [1, 3]),
    (1, slice(None), [0, 4]),
    (slice(None), 1, [0, 4]),
    ([[0], [2]], [1, 2, 3]),
    ([0, 1], None, [1, 2]),
    (None, [0, 1], [1, 2]),
    (slice(1, None), [0, 0], slice(None, None, -2)),
    (slice(None, None, -1), [[1, 2]], 2),
    ([],),
    (slice(None), np.zeros((0, 2), "int64")),
    (np.array([True, False, True]),),
    (np.array([[True, False, False, True]] * 3),),
    (slice(None), np.array([False, True, False, True])),
    (np.array([True, False, True]), slice(None), [1, 0]),
    (1, np.array([True, False, False, True]), [0, 4]),
    (np.zeros((3, 4, 5), bool),),
    (Ellipsis, np.array([True, False, True, True, False]), None),
]


def _adv_id(index) -> str:
    return "-".join(
        repr(i.tolist()) if isinstance(i, np.ndarray) else repr(i) for i in index
    ).replace(" ", "")


@pytest.mark.parametrize("index", ADV_CASES, ids=[_adv_id(i) for i in ADV_CASES])
@pytest.mark.parametrize("symbolic", [False, True])
def test_advanced_indexing_matches_numpy(index, symbolic):
    x = T.tensor("float64", shape=(None, None, None), name="x")
    xv = RNG.normal(size=(3, 4, 5))
    expected = xv[index]
    sym_index, inputs, values = [], [x], [xv]
    for item in index:
        arr = np.asarray(item) if isinstance(item, (list, np.ndarray)) else None
        if symbolic and arr is not None and arr.size:
            var = T.tensor(arr.dtype, shape=(None,) * arr.ndim, name=f"i{len(inputs)}")
            inputs.append(var)
            values.append(arr)
            sym_index.append(var)
        else:
            sym_index.append(item)
    out = x[tuple(sym_index)]
    assert isinstance(out.owner.op, AdvancedSubtensor)
    assert out.ndim == expected.ndim
    f = tensorjit.function(inputs, [out, out.shape], mode=DEBUG)
    got, got_shape = f(*values)
    check_same(got, expected)
    np.testing.assert_array_equal(got_shape, expected.shape)
    got[...] = 0  # a copy, never a view of x
    assert np.all(xv[index] == expected)
    if not symbolic:
        xs = T.tensor("float64", shape=(3, 4, 5), name="xs")
        assert xs[index].type.shape == expected.shape


def test_advanced_indexing_1d_int_dtypes_and_static_shapes():
    v = T.tensor("int32", shape=(None,), name="v")
    vv = np.arange(10, dtype="int32") * 3
    for dtype in ["int8", "uint8", "int32", "int64", "uint64"]:
        i = T.tensor(dtype, shape=(None,), name="i")
        iv = np.array([1, 0, 9, 9], dtype=dtype)
        check_same(run([v, i], v[i], vv, iv), vv[iv])
    i = T.tensor("int64", shape=(4, None), name="i")
    assert v[i].type.shape == (4, None)
    j = T.tensor("int64", shape=(1, 5), name="j")
    x = T.tensor("float64", shape=(3, 7), name="x")
    assert x[i, j].type.shape == (4, 5)
    assert x[j, :].type.shape == (1, 5, 7)
    assert x[:, [[0, 1]]].type.shape == (3, 1, 2)
    assert x[np.array([True, False, True]), 2:].type.shape == (2, 5)
    m = T.tensor("bool", shape=(3,), name="m")
    assert x[m].type.shape == (None, 7)


def test_advanced_index_with_symbolic_int_and_list_of_symbolic_scalars():
    x = T.dmatrix("x")
    xv = RNG.normal(size=(4, 5))
    a, b = T.lscalars("a", "b")
    f = tensorjit.function([x, a, b], [x[[a, b, a]], x[a, [b, 0]], x[a:, [b]]], mode=DEBUG)
    got = f(xv, 1, 3)
    for g, e in zip(got, [xv[[1, 3, 1]], xv[1, [3, 0]], xv[1:, [3]]]):
        check_same(g, e)


def test_advanced_indexing_infer_shape():
    x = T.tensor3("x")
    xv = RNG.normal(size=(3, 4, 5))
    i = T.lmatrix("i")
    iv = np.array([[0, 1, 2]])
    check_shape_without([x, i], x[:, i], AdvancedSubtensor, [xv, iv], (3, 1, 3, 5))
    j = T.lvector("j")
    jv = np.array([1, 2, 0])
    check_shape_without([x, i, j], x[i, :, j], AdvancedSubtensor, [xv, iv, jv], (1, 3, 4))
    check_shape_without([x, i, j], x[j, i], AdvancedSubtensor, [xv, iv, jv], (1, 3, 5))
    check_shape_without(
        [x, j], x[j, None, ::2], AdvancedSubtensor, [xv, np.array([1])], (1, 1, 2, 5)
    )
    m = T.tensor("bool", shape=(None, None), name="m")
    mv = xv[:, :, 0] > 0
    check_shape_without([x, m], x[m], AdvancedSubtensor, [xv, mv], xv[mv].shape)
    # a partial slice with a symbolic bound: the length is asked at run time, still right
    k = T.lscalar("k")
    f = tensorjit.function([x, j, k], x[j, k:].shape, mode=DEBUG)
    np.testing.assert_array_equal(f(xv, jv, 1), xv[jv, 1:].shape)


def test_advanced_indexing_errors():
    x = T.tensor("float64", shape=(3, None), name="x")
    with pytest.raises(TypeError, match=r"index 1\.5 into 'x' .* is not valid: only integers"):
        x[1.5]
    with pytest.raises(TypeError, match=r"index \[0\.5, 1\.0\] into 'x' .*dtype float64"):
        x[[0.5, 1.0]]
    with pytest.raises(TypeError, match=r"index 'f' .* into 'x' .* is not valid \(dtype float64"):
        x[T.dvector("f")]
    with pytest.raises(TypeError, match=r"index 'b' .* into 'x' .*0-d boolean index"):
        x[T.tensor("bool", shape=(), name="b")]
    with pytest.raises(TypeError, match=r"index True into 'x' .*a boolean scalar"):
        x[True]
    with pytest.raises(TypeError, match=r"index 'hello' into 'x'"):
        x["hello"]
    with pytest.raises(TypeError, match=r"not a rectangular array"):
        x[[[0, 1], [2]]]
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for dimension 0 of 'x'"):
        x[[0, 3]]
    with pytest.raises(IndexError, match=r"index -4 is out of bounds for dimension 0 of 'x'"):
        x[[-4], 0]
    with pytest.raises(IndexError, match=r"boolean index .* has length 2 in its dimension 0, .*"):
        x[np.array([True, False])]
    with pytest.raises(IndexError, match=r"too many indices for 'x' .*: 2 dimensions, 3 indexed"):
        x[np.ones((3, 2), bool), 0]
    with pytest.raises(IndexError, match=r"shape mismatch: the index arrays of 'x'"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match=r"single ellipsis"):
        x[..., [0], ...]
    with pytest.raises(TypeError, match=r"slice components must be integers"):
        x[[0], 1.0:]
    with pytest.raises(ValueError, match=r"slice step can not be zero"):
        x[[0], ::0]
    with pytest.raises(ValueError, match=r"needs an integer-array or boolean-mask entry"):
        AdvancedSubtensor(("i",))
    with pytest.raises(TypeError, match=r"index input 'j' .* must be an integer array"):
        AdvancedSubtensor(("a",))(x, T.dscalar("j"))
    with pytest.raises(TypeError, match=r"takes 1 index inputs, got 2"):
        AdvancedSubtensor(("a",))(x, [0], [1])


def test_advanced_indexing_runtime_errors():
    x = T.dmatrix("x")
    i, j = T.lvectors("i", "j")
    f = tensorjit.function([x, i, j], x[i, j])
    with pytest.raises(IndexError, match=r"index 7 is out of bounds for dimension 1 \(length 3\)"):
        f(np.zeros((2, 3)), np.array([0, 1]), np.array([0, 7]))
    with pytest.raises(IndexError, match=r"shape mismatch: the index arrays of 'x'"):
        f(np.zeros((2, 3)), np.array([0, 1]), np.array([0, 1, 2]))
    m = T.tensor("bool", shape=(None,), name="m")
    g = tensorjit.function([x, m], x[m])
    with pytest.raises(IndexError, match=r"boolean index 'm' .* has shape \(3,\), .* \(2,\)"):
        g(np.zeros((2, 3)), np.ones(3, bool))


def test_advanced_subtensor_str_and_pprint():
    x = T.dmatrix("x")
    i = T.lvector("i")
    out = x[i, 1:]
    assert str(out.owner.op) == "AdvancedSubtensor{int_array, ?:}"
    assert pprint(out).endswith("x[i, 1:]")
    assert AdvancedSubtensor(("a",)) == AdvancedSubtensor(("a",))
    assert AdvancedSubtensor(("a",)) != AdvancedSubtensor(("b",))
    assert str(AdvancedIncSubtensor(("b", "n"), True, inplace=True)) == (
        "AdvancedSetSubtensor_inplace{bool_mask, None}"
    )


# ================================================================ take
@pytest.mark.parametrize(
    "shape, indices, axis",
    [
        ((3, 4), [0, 5, -1], None),
        ((3, 4), [[0, 1], [2, 2]], 0),
        ((3, 4), [3, 0, -4], 1),
        ((3, 4), [1], -1),
        ((2, 3, 4), 2, 1),
        ((2, 3, 4), np.array([0, 1, 1], "int32"), 2),
        ((5,), [], 0),
        ((), [0, 0], None),
    ],
)
def test_take_matches_numpy(shape, indices, axis):
    x = T.tensor("float64", shape=(None,) * len(shape), name="x")
    xv = RNG.normal(size=shape)
    expected = np.take(xv, indices, axis=axis)
    check_same(run([x], take(x, indices, axis), xv), expected)
    idx = np.asarray(indices)
    if idx.ndim and idx.size:
        i = T.tensor(idx.dtype, shape=(None,) * idx.ndim, name="i")
        check_same(run([x, i], take(x, i, axis), xv, idx), expected)


def test_take_errors_and_grad():
    x = T.dmatrix("x")
    with pytest.raises(TypeError, match=r"take: indices must be integers .*got 'm'"):
        take(x, T.tensor("bool", shape=(None,), name="m"), 0)
    with pytest.raises(TypeError, match=r"index \[0\.5\] into"):
        take(x, [0.5])
    with pytest.raises(ValueError, match=r"take: axis 2 is out of range"):
        take(x, [0], axis=2)
    with pytest.raises(ValueError, match=r"take: axis 0 is out of range for the 0-d 's'"):
        take(T.dscalar("s"), [0], axis=0)
    vgrad(lambda a: take(a, [0, 5, 5, -1]), [RNG.normal(size=(2, 3))])
    vgrad(lambda a: take(a, [[2, 0], [2, 2]], axis=1), [RNG.normal(size=(2, 3))])


# ================================================================ set/inc with advanced indices
SET_INC_CASES = [
    ((6,), ([0, 2, 2, 5],), (4,)),
    ((6,), ([1, -1],), ()),
    ((4, 3), ([0, 0, 3],), (3, 3)),
    ((4, 3), ([0, 0, 3],), (1, 3)),
    ((4, 3), (slice(None), [2, 2]), (4, 2)),
    ((4, 3), ([1, 1], [2, 2]), (2,)),
    ((2, 3, 4), (1, slice(None), [0, 0, 3]), (3, 3)),
    ((2, 3, 4), ([0, 1], slice(None, None, -1), [0, 0]), (2, 3)),
    ((2, 3, 4), ([[0], [1]], None, [1, 2]), (2, 1, 1, 4)),
    ((4, 3), (np.array([True, False, True, True]),), (3, 3)),
    ((4, 3), (np.array([True, False, True, True]), [0, 0, 1]), (3,)),
    ((4, 3), ([],), (0, 3)),
]


@pytest.mark.parametrize(
    "shape, index, y_shape", SET_INC_CASES, ids=[_adv_id(c[1]) for c in SET_INC_CASES]
)
def test_advanced_set_and_inc_subtensor(shape, index, y_shape):
    x = T.tensor("float64", shape=(None,) * len(shape), name="x")
    y = T.tensor("float64", shape=tuple(1 if s == 1 else None for s in y_shape), name="y")
    xv = RNG.normal(size=shape)
    yv = RNG.normal(size=y_shape)
    xv_before = xv.copy()
    expected_set = xv.copy()
    expected_set[index] = yv
    expected_inc = xv.copy()
    np.add.at(expected_inc, index, yv)  # repeated indices accumulate
    set_out, inc_out = set_subtensor(x[index], y), inc_subtensor(x[index], y)
    assert isinstance(set_out.owner.op, AdvancedIncSubtensor)
    f = tensorjit.function([x, y], [set_out, inc_out, inc_out.shape], mode=DEBUG)
    got_set, got_inc, got_shape = f(xv, yv)
    check_same(got_set, expected_set)
    check_same(got_inc, expected_inc)
    np.testing.assert_array_equal(got_shape, shape)
    np.testing.assert_array_equal(xv, xv_before)


def test_advanced_inc_with_symbolic_indices_and_casting():
    x = T.tensor("int32", shape=(None,), name="x")
    i = T.lvector("i")
    out = inc_subtensor(x[i], 1.7)
    assert out.type.dtype == "int32"
    xv = np.zeros(5, "int32")
    expected = xv.copy()
    np.add.at(expected, [0, 0, 4], np.int32(1))
    check_same(run([x, i], out, xv, np.array([0, 0, 4])), expected)
    m = T.tensor("bool", shape=(None,), name="m")
    mv = np.array([True, False, True, False, False])
    check_same(run([x, m], set_subtensor(x[m], 9), xv, mv), np.where(mv, 9, 0).astype("int32"))


def test_advanced_set_inc_errors():
    x = T.tensor("float64", shape=(None, 3), name="x")
    with pytest.raises(ValueError, match=r"value 'y' .* more dimensions than the indexed region"):
        set_subtensor(x[[0, 1], 0], T.dmatrix("y"))
    with pytest.raises(ValueError, match=r"static shape \(4,\) can not be broadcast .* \(2, 3\)"):
        inc_subtensor(x[[0, 1]], T.tensor("float64", shape=(4,), name="y"))
    y = T.dvector("y")
    i = T.lvector("i")
    f = tensorjit.function([x, i, y], inc_subtensor(x[i, 0], y))
    with pytest.raises(ValueError, match=r"'y' .* has length 1 in dimension 0 at run time"):
        f(np.zeros((4, 3)), np.array([0, 1]), np.ones(1))
    with pytest.raises(ValueError, match=r"'y' .* of shape \(3,\) does not match .* \(2,\)"):
        f(np.zeros((4, 3)), np.array([0, 1]), np.ones(3))
    with pytest.raises(IndexError, match=r"index 4 is out of bounds for dimension 0 \(length 4\)"):
        f(np.zeros((4, 3)), np.array([0, 4]), np.ones(2))


def test_inplace_advanced_inc_subtensor():
    x, y = T.dvector("x"), T.dvector("y")
    i = T.lvector("i")
    out = set_subtensor(x[i], y)
    op = advanced_incsubtensor_inplace_variant(out.owner, [0])
    assert op == AdvancedIncSubtensor(out.owner.op.entries, True, inplace=True)
    assert op.destroy_map == {0: [0]} and AdvancedIncSubtensor(("a",), True).destroy_map == {}
    assert advanced_incsubtensor_inplace_variant(out.owner, [1]) is None
    for set_ in (True, False):
        inplace_out = AdvancedIncSubtensor(("a",), set_, inplace=True)(x, y, i)
        f = tensorjit.function([x, y, i], inplace_out, mode=DEBUG, accept_inplace=True)
        xv = np.zeros(4)
        expected = xv.copy()
        if set_:
            expected[[1, 3]] = [5.0, 6.0]
        else:
            np.add.at(expected, [1, 1], [5.0, 6.0])
        got = f(xv, np.array([5.0, 6.0]), np.array([1, 3] if set_ else [1, 1]))
        check_same(got, expected)


# ================================================================ gradients
@pytest.mark.parametrize(
    "index",
    [
        ([0, 2, 2, -1],),
        (slice(None), [[1, 1], [0, 3]]),
        ([0, 2], slice(None, None, -1), [4, 4]),
        (1, slice(None), [0, 4, 0]),
        ([1], None, [2, 3]),
        (np.array([True, False, True]),),
        (slice(None), np.array([[True, False, False, True, True]] * 4)),
    ],
    ids=_adv_id,
)
def test_advanced_subtensor_grad(index):
    vgrad(lambda a: a[index], [RNG.normal(size=(3, 4, 5))])


def test_advanced_subtensor_grad_with_symbolic_index_and_repeats():
    x = T.dvector("x")
    i = T.lvector("i")
    (g,) = tensorjit.grad((x[i] * 2.0).sum(), [x])
    got = run([x, i], g, np.zeros(4), np.array([0, 3, 3, 3, -1]))
    check_same(got, np.array([2.0, 0.0, 0.0, 8.0]))


@pytest.mark.parametrize(
    "index, y_shape",
    [
        (([0, 2, 2],), (3, 4)),
        (([0, 2, 2],), (1, 4)),
        ((slice(None), [3, 0]), (3, 2)),
        (([1, 0], [[2], [3]]), (2, 2)),
        ((np.array([True, False, True]), 1), (2,)),
        (([0, 2], slice(None, None, -2)), ()),
    ],
    ids=lambda v: _adv_id(v) if isinstance(v, tuple) and v and not isinstance(v[0], int) else None,
)
def test_advanced_inc_subtensor_grad(index, y_shape):
    xv, yv = RNG.normal(size=(3, 4)), RNG.normal(size=y_shape)
    vgrad(lambda a, b: inc_subtensor(a[index], b), [xv, yv])
    repeats = any(isinstance(i, list) and len(np.unique(i)) < np.size(i) for i in index)
    if not repeats:  # set_subtensor's gradient w.r.t. y counts every repeat, as in Theano
        vgrad(lambda a, b: set_subtensor(a[index], b), [xv, yv])


def test_advanced_set_subtensor_grad_of_x_is_zero_where_set():
    x, y = T.dvector("x"), T.dvector("y")
    gx, gy = tensorjit.grad((set_subtensor(x[[1, 3]], y) * 3.0).sum(), [x, y])
    got = run([x, y], [gx, gy], np.zeros(5), np.zeros(2))
    check_same(got[0], np.array([3.0, 0.0, 3.0, 0.0, 3.0]))
    check_same(got[1], np.array([3.0, 3.0]))


def test_integer_inputs_have_no_gradient_path():
    x = T.lvector("x")
    f = T.dscalar("f")
    cost = (take(x, [0, 1]) * f).sum() + (inc_subtensor(x[[0]], 1) * f).sum()
    (g,) = tensorjit.grad(cost, [f])
    assert run([x, f], g, np.array([2, 3, 4]), 1.0) == 5.0 + 10.0


# ================================================================ basic slicing gradients
@pytest.mark.parametrize(
    "index",
    [
        (slice(None, None, -1),),
        (slice(None, None, -2), slice(1, None), slice(None, None, -3)),
        (-1, slice(None, None, -1)),
        (slice(2, 0, -1), 1, slice(None, 1, -2)),
        (Ellipsis, slice(-1, -5, -2)),
        (slice(None, None, -1), slice(None, None, -1), slice(None, None, -1)),
        (0, -2, slice(None, None, -4)),
    ],
    ids=_adv_id,
)
def test_basic_slicing_grad_negative_steps_rank3(index):
    xv = RNG.normal(size=(3, 4, 5))
    x = T.dtensor3("x")
    assert isinstance(x[index].owner.op, Subtensor)
    vgrad(lambda a: a[index], [xv])
    region = xv[index]
    vgrad(lambda a, b: inc_subtensor(a[index], b), [xv, RNG.normal(size=region.shape)])
    vgrad(lambda a, b: set_subtensor(a[index], b), [xv, RNG.normal(size=region.shape)])


def test_basic_slicing_grad_negative_step_values():
    x = T.dtensor3("x")
    w = RNG.normal(size=(2, 4, 2))
    (g,) = tensorjit.grad((x[::-2, :, ::-3] * w).sum(), [x])
    expected = np.zeros((3, 4, 5))
    expected[::-2, :, ::-3] = w
    check_same(run([x], g, np.zeros((3, 4, 5))), expected)


def test_basic_slice_shapes_are_inferred_without_computing_the_value():
    from tensorjit.tensor.elemwise import Elemwise

    x = T.vector("x")
    a, b, c = T.lscalars("a", "b", "c")
    lengths = [x[a:b:c].shape[0], x[a::c].shape[0], x[:b:c].shape[0], x[::c].shape[0]]
    f = tensorjit.function([x, a, b, c], lengths)
    for n in (0, 1, 5):
        v = np.zeros(n)
        for start in range(-7, 8, 2):
            for stop in range(-7, 8, 3):
                for step in (-2, -1, 1, 3):
                    expected = [
                        len(range(*slice(start, stop, step).indices(n))),
                        len(range(*slice(start, None, step).indices(n))),
                        len(range(*slice(None, stop, step).indices(n))),
                        len(range(*slice(None, None, step).indices(n))),
                    ]
                    assert [int(r) for r in f(v, start, stop, step)] == expected
    g = tensorjit.function([x], T.exp(x)[1:-1:2].shape)
    assert not any(
        isinstance(node.op, Elemwise) and node.op.scalar_op.name == "exp"
        for node in g.fgraph.apply_nodes
    )
    np.testing.assert_array_equal(g(np.zeros(7)), [3])
