"""Operators and methods of TensorVariables, compared with NumPy through compiled functions."""

import operator

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T

RNG = np.random.default_rng(20240601)


def run(inputs, outputs, *values):
    return tensorjit.function(inputs, outputs)(*values)


def check_same(got, expected):
    """Same dtype, same shape, same values (NaNs equal)."""
    got = np.asarray(got)
    expected = np.asarray(expected)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if expected.dtype.kind in "fc":
        # float32 sums in another order (the C backend accumulates in double) differ by
        # a few ulps of the largest term
        low = expected.dtype.itemsize <= 4
        rtol, atol = (1e-5, 1e-5) if low else (1e-6, 1e-12)
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


def sym_and_value(dtype, shape, low=-5, high=5, name=None):
    var = T.tensor(dtype, shape=tuple(1 if s == 1 else None for s in shape), name=name)
    if np.dtype(dtype).kind == "b":
        # all True when zeros must be avoided (e.g. divisors)
        value = np.ones(shape, bool) if low >= 1 else RNG.integers(0, 2, size=shape).astype(bool)
    elif np.dtype(dtype).kind in "iu":
        value = RNG.integers(low, high, size=shape).astype(dtype)
    else:
        value = RNG.uniform(low, high, size=shape).astype(dtype)
    return var, value


# ---------------------------------------------------------------- arithmetic operators
BINARY_OPERATORS = [
    ("add", operator.add),
    ("sub", operator.sub),
    ("mul", operator.mul),
    ("truediv", operator.truediv),
    ("floordiv", operator.floordiv),
    ("mod", operator.mod),
    ("pow", operator.pow),
]


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "int64"])
@pytest.mark.parametrize("name, op", BINARY_OPERATORS, ids=[n for n, _ in BINARY_OPERATORS])
def test_binary_operator_matches_numpy(name, op, dtype):
    x, xv = sym_and_value(dtype, (3, 4), 1, 4, "x")
    y, yv = sym_and_value(dtype, (3, 4), 1, 4, "y")
    if name in ("sub", "mod", "floordiv", "add", "mul", "truediv"):
        xv = xv - 2  # include negative numerators
    check_same(run([x, y], op(x, y), xv, yv), op(xv, yv))


@pytest.mark.parametrize("name, op", BINARY_OPERATORS, ids=[n for n, _ in BINARY_OPERATORS])
def test_reflected_operators_with_python_scalars(name, op):
    x, xv = sym_and_value("float64", (5,), 1, 3)
    check_same(run([x], op(3.0, x), xv), op(3.0, xv))
    check_same(run([x], op(x, 2.0), xv), op(xv, 2.0))
    i, iv = sym_and_value("int32", (5,), 1, 4)
    check_same(run([i], op(7, i), iv), op(np.int32(7), iv))
    check_same(run([i], op(i, 3), iv), op(iv, np.int32(3)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int64"])
def test_unary_operators(dtype):
    x, xv = sym_and_value(dtype, (2, 3), -4, 4)
    check_same(run([x], -x, xv), -xv)
    check_same(run([x], abs(x), xv), np.abs(xv))
    check_same(run([x], T.abs(x), xv), np.abs(xv))
    assert +x is x


def test_matmul_operator():
    a, av = sym_and_value("float64", (2, 3))
    b, bv = sym_and_value("float64", (3, 4))
    check_same(run([a, b], a @ b, av, bv), av @ bv)
    check_same(run([a], T.constant(av.T) @ a, av), av.T @ av)


@pytest.mark.parametrize(
    "fn",
    [operator.add, operator.sub, operator.mul, operator.truediv, operator.lt, operator.matmul],
    ids=["add", "sub", "mul", "truediv", "lt", "matmul"],
)
def test_numpy_array_on_the_left_defers_to_the_symbolic_operand(fn):
    # ``ndarray <op> TensorVariable`` must build one symbolic graph (as Theano's
    # __array_priority__ does), not an object array of per-element graphs.
    a = np.arange(1.0, 10.0).reshape(3, 3)
    x, xv = sym_and_value("float64", (3, 3), 1, 4)
    out = fn(a, x)
    assert isinstance(out, T.TensorVariable), type(out)
    check_same(run([x], out, xv), fn(a, xv))


@pytest.mark.parametrize(
    "name, op",
    [("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge)],
)
@pytest.mark.parametrize(
    "dtypes", [("float64", "float64"), ("int8", "float32"), ("int32", "int64")]
)
def test_comparison_operators_give_bool(name, op, dtypes):
    x, xv = sym_and_value(dtypes[0], (4, 3), -2, 3)
    y, yv = sym_and_value(dtypes[1], (4, 3), -2, 3)
    xv[0] = yv[0]  # make some elements equal
    out = op(x, y)
    assert out.dtype == "bool"
    check_same(run([x, y], out, xv, yv), op(xv, yv))
    # with a Python scalar on either side
    check_same(run([x], op(x, 1), xv), op(xv, 1))
    check_same(run([x], op(1, x), xv), op(1, xv))


def test_eq_neq_functions_and_identity_equality():
    x, xv = sym_and_value("int32", (6,), 0, 3)
    y, yv = sym_and_value("int32", (6,), 0, 3)
    check_same(run([x, y], T.eq(x, y), xv, yv), xv == yv)
    check_same(run([x, y], T.neq(x, y), xv, yv), xv != yv)
    # ``==`` stays Python identity, as in Theano
    assert (x == x) is True
    assert (x == y) is False


@pytest.mark.parametrize("dtype", ["bool", "int8", "int32", "int64", "uint8"])
def test_bitwise_operators(dtype):
    x, xv = sym_and_value(dtype, (3, 3), 0, 100)
    y, yv = sym_and_value(dtype, (3, 3), 0, 100)
    check_same(run([x, y], x & y, xv, yv), xv & yv)
    check_same(run([x, y], x | y, xv, yv), xv | yv)
    check_same(run([x, y], x ^ y, xv, yv), xv ^ yv)
    check_same(run([x], ~x, xv), ~xv)
    check_same(run([x], T.bitwise_not(x), xv), np.invert(xv))


def test_bitwise_operators_with_python_scalars_and_bool_conditions():
    x, xv = sym_and_value("float64", (8,), -3, 3)
    mask = (x > 0) & (x < 2) | ~(x > -1)
    check_same(run([x], mask, xv), ((xv > 0) & (xv < 2)) | ~(xv > -1))
    i, iv = sym_and_value("int16", (8,), 0, 50)
    check_same(run([i], (i & 7) ^ 3 | 16, iv), (iv & 7) ^ 3 | 16)
    check_same(run([i], 5 & i, iv), 5 & iv)


def test_bitwise_on_floats_is_a_type_error():
    x, y = T.dvectors("x", "y")
    with pytest.raises(
        TypeError, match=r"and_ is not defined for inputs of dtype float64, float64: 'x'"
    ):
        x & y
    with pytest.raises(TypeError, match=r"invert is not defined for inputs of dtype float32"):
        ~T.fmatrix()


# ---------------------------------------------------------------- attributes
def test_ndim_dtype_and_broadcastable_attributes():
    x = T.tensor("int16", shape=(1, None, 3))
    assert x.ndim == 3
    assert x.dtype == "int16"
    assert x.broadcastable == (True, False, False)
    assert T.fscalar().ndim == 0


def test_shape_attribute():
    x, xv = sym_and_value("float64", (2, 5, 3))
    shp = x.shape
    assert shp.dtype == "int64" and shp.ndim == 1
    check_same(run([x], shp, xv), np.array([2, 5, 3], dtype="int64"))
    check_same(run([x], x.shape[1], xv), np.int64(5))
    check_same(run([x], x.shape[-1] * x.shape[0], xv), np.int64(6))
    # a fully static shape is a constant
    s = T.tensor("float32", shape=(4, 2)).shape
    assert isinstance(s, T.TensorConstant)
    np.testing.assert_array_equal(s.data, [4, 2])


def test_size_attribute():
    x, xv = sym_and_value("float64", (2, 5, 3))
    check_same(run([x], x.size, xv), np.int64(30))


@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 3, 4)])
def test_transpose_attribute(shape):
    x, xv = sym_and_value("float32", shape)
    check_same(run([x], x.T, xv), xv.T)
    assert x.T.type.shape == tuple(reversed(x.type.shape))


def test_transpose_method_with_axes():
    x, xv = sym_and_value("float64", (2, 3, 4))
    check_same(run([x], x.transpose(1, 2, 0), xv), xv.transpose(1, 2, 0))
    check_same(run([x], x.transpose((2, 0, 1)), xv), xv.transpose(2, 0, 1))
    check_same(run([x], T.transpose(x), xv), xv.T)
    with pytest.raises(ValueError, match=r"transpose: axes \(0, 0, 1\) are not a permutation"):
        x.transpose(0, 0, 1)


# ---------------------------------------------------------------- dtype promotion
PROMOTION_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "float32", "float64"]
PROMOTION_OPS = {
    "add": np.add,
    "mul": np.multiply,
    "true_div": np.true_divide,
    "maximum": np.maximum,
    "lt": np.less,
}


@pytest.mark.parametrize("op_name", sorted(PROMOTION_OPS))
@pytest.mark.parametrize("dt1", PROMOTION_DTYPES)
@pytest.mark.parametrize("dt2", PROMOTION_DTYPES)
def test_binary_dtype_promotion_matches_numpy(op_name, dt1, dt2):
    np_fn = PROMOTION_OPS[op_name]
    x, xv = sym_and_value(dt1, (3,), 1, 5)
    y, yv = sym_and_value(dt2, (3,), 1, 5)
    expected = np_fn(xv, yv)
    if op_name == "add" and dt1 == dt2 == "bool":
        expected = np.logical_or(xv, yv)
    out = getattr(T, op_name)(x, y)
    assert out.dtype == expected.dtype.name
    check_same(run([x, y], out, xv, yv), expected)


@pytest.mark.parametrize(
    "dtypes, fn, expected_dtype",
    [
        (("int8", "float32"), operator.add, "float32"),
        (("int32", "int32"), operator.truediv, "float64"),
        (("int16", "float32"), operator.mul, "float32"),
        (("int32", "float32"), operator.add, "float64"),
        (("int64", "float32"), operator.sub, "float64"),
        (("uint8", "int8"), operator.add, "int16"),
        (("int8", "int8"), operator.floordiv, "int8"),
        (("float32", "float32"), operator.pow, "float32"),
        (("bool", "int8"), operator.mul, "int8"),
        (("complex64", "float64"), operator.add, "complex128"),
    ],
)
def test_documented_promotions(dtypes, fn, expected_dtype):
    x, xv = sym_and_value(dtypes[0], (4,), 1, 4)
    y, yv = sym_and_value(dtypes[1], (4,), 1, 4)
    out = fn(x, y)
    assert out.dtype == expected_dtype
    check_same(run([x, y], out, xv, yv), fn(xv, yv))


@pytest.mark.parametrize(
    "fn_name, dtype, expected_dtype",
    [
        ("exp", "int16", "float32"),
        ("exp", "int8", "float16"),
        ("exp", "int32", "float64"),
        ("sqrt", "int64", "float64"),
        ("log", "float32", "float32"),
        ("sin", "uint8", "float16"),
        ("tanh", "bool", "float16"),
        ("abs", "int8", "int8"),
        ("sign", "int32", "int32"),
        ("floor", "float32", "float32"),
        ("sqr", "int16", "int16"),
        ("neg", "int64", "int64"),
    ],
)
def test_unary_dtype_matches_numpy(fn_name, dtype, expected_dtype):
    np_fn = {"sqr": lambda v: v * v, "neg": np.negative}.get(fn_name, getattr(np, fn_name, None))
    x, xv = sym_and_value(dtype, (5,), 1, 5)
    out = getattr(T, fn_name)(x)
    assert out.dtype == expected_dtype
    check_same(run([x], out, xv), np_fn(xv))


@pytest.mark.parametrize(
    "dtype, fn, expected_dtype",
    [
        ("float32", lambda v: v * 2.0, "float32"),
        ("float32", lambda v: 2.0 * v, "float32"),
        ("float32", lambda v: v + 1, "float32"),
        ("float32", lambda v: v / 3, "float32"),
        ("float32", lambda v: v**2, "float32"),
        ("float16", lambda v: v - 0.5, "float16"),
        ("int8", lambda v: v + 1, "int8"),
        ("int8", lambda v: v * 2.5, "float64"),
        ("int16", lambda v: v * True, "int16"),
        ("int32", lambda v: v // 2, "int32"),
        ("int32", lambda v: v / 2, "float64"),
        ("int32", lambda v: 1 - v, "int32"),
        ("uint8", lambda v: v + 3, "uint8"),
        ("bool", lambda v: v + 1, "int64"),
        ("complex64", lambda v: v * 2.0, "complex64"),
        ("float32", lambda v: v * 1j, "complex64"),
    ],
)
def test_python_scalars_are_weak(dtype, fn, expected_dtype):
    x, xv = sym_and_value(dtype, (4,), 1, 4)
    out = fn(x)
    assert out.dtype == expected_dtype
    expected = fn(xv)
    assert expected.dtype == expected_dtype  # NumPy 2 (NEP 50) agrees
    check_same(run([x], out, xv), expected)


def test_numpy_scalars_and_arrays_are_strong():
    x, xv = sym_and_value("float32", (3,))
    out = x * np.float64(2.0)
    assert out.dtype == "float64"
    check_same(run([x], out, xv), xv * np.float64(2.0))
    out = x + np.arange(3, dtype="int64")
    assert out.dtype == "float64"
    check_same(run([x], out, xv), xv + np.arange(3, dtype="int64"))


def test_python_int_too_large_for_the_array_dtype_is_not_silently_wrapped():
    # A Python int int8 can not hold must not wrap around: the result keeps its value.
    x, xv = sym_and_value("int8", (3,), 1, 4)
    out = run([x], x + 1000, xv)
    np.testing.assert_array_equal(out, xv.astype(np.int64) + 1000)


# ---------------------------------------------------------------- dot
@pytest.mark.parametrize(
    "xshape, yshape",
    [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4))],
    ids=["vv", "mv", "vm", "mm"],
)
@pytest.mark.parametrize(
    "dtypes", [("float64", "float64"), ("float32", "float64"), ("int32", "int32")]
)
def test_dot_vector_matrix_combinations(xshape, yshape, dtypes):
    x, xv = sym_and_value(dtypes[0], xshape)
    y, yv = sym_and_value(dtypes[1], yshape)
    out = T.dot(x, y)
    assert out.ndim == len(xshape) + len(yshape) - 2
    check_same(run([x, y], out, xv, yv), np.dot(xv, yv))
    check_same(run([x, y], x.dot(y), xv, yv), np.dot(xv, yv))


def test_dot_static_shape_and_scalar_operand():
    x = T.tensor("float64", shape=(2, 3))
    y = T.tensor("float64", shape=(3, None))
    assert T.dot(x, y).type.shape == (2, None)
    s, sv = sym_and_value("float64", ())
    m, mv = sym_and_value("float64", (2, 2))
    check_same(run([s, m], T.dot(s, m), sv, mv), np.dot(sv, mv))


def test_dot_static_inner_dimension_mismatch():
    x = T.tensor("float64", shape=(2, 3), name="a")
    y = T.tensor("float64", shape=(4, 5), name="b")
    with pytest.raises(
        ValueError,
        match=r"dot: shapes \(2, 3\) and \(4, 5\) are not aligned: 3 \(last dimension of "
        r"'a' .*\) != 4 \(first dimension of 'b'",
    ):
        T.dot(x, y)
    with pytest.raises(ValueError, match=r"are not aligned"):
        T.tensor("float64", shape=(3,)) @ T.tensor("float64", shape=(2,))


def test_dot_and_matmul_of_rank_3_are_numpys():
    """dot of N-d operands is NumPy's (and Theano's) tensordot; ``@`` is NumPy's matmul."""
    t, m = T.tensor3("t"), T.matrix("m")
    tv, mv = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 3))
    f = tensorjit.function([t, m], [T.dot(t, m), m @ t, t @ m])
    for got, want in zip(f(tv, mv), [np.dot(tv, mv), mv @ tv, tv @ mv]):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(ValueError, match="the second operand 's'.* is a scalar"):
        m @ T.scalar("s")  # as NumPy's matmul (dot would multiply)


def test_dot_runtime_shape_mismatch():
    x, y = T.dmatrices("x", "y")
    f = tensorjit.function([x, y], T.dot(x, y))
    with pytest.raises(ValueError, match=r"dot: shapes \(2, 3\) and \(2, 3\) not aligned"):
        f(np.ones((2, 3)), np.ones((2, 3)))


def test_outer():
    x, xv = sym_and_value("float64", (3,))
    y, yv = sym_and_value("float64", (4,))
    check_same(run([x, y], T.outer(x, y), xv, yv), np.outer(xv, yv))


# ---------------------------------------------------------------- reductions
AXES = [None, 0, 1, -1, (0, 2), (2, 0), (), (0, 1, 2)]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("method", ["sum", "mean", "max", "min", "all", "any"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "int32"])
def test_reduction_methods(method, axis, keepdims, dtype):
    x, xv = sym_and_value(dtype, (2, 3, 4), -5, 5)
    out = getattr(x, method)(axis=axis, keepdims=keepdims)
    expected = getattr(np, method)(xv, axis=axis, keepdims=keepdims)
    expected = np.asarray(expected)
    assert out.dtype == expected.dtype.name
    assert out.ndim == expected.ndim
    check_same(run([x], out, xv), expected)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)], ids=str)
@pytest.mark.parametrize("dtype", ["float64", "int16", "bool"])
def test_prod_and_sum_functions(axis, keepdims, dtype):
    x, xv = sym_and_value(dtype, (3, 4), -3, 4)
    check_same(
        run([x], T.prod(x, axis=axis, keepdims=keepdims), xv),
        np.prod(xv, axis=axis, keepdims=keepdims),
    )
    check_same(
        run([x], T.sum(x, axis=axis, keepdims=keepdims), xv),
        np.sum(xv, axis=axis, keepdims=keepdims),
    )


def test_prod_method_like_numpy():
    # ndarray (and Theano's TensorVariable) have .prod() next to .sum()
    x, xv = sym_and_value("float64", (3, 4), 1, 3)
    check_same(run([x], x.prod(axis=1, keepdims=True), xv), xv.prod(axis=1, keepdims=True))


def test_sum_with_dtype():
    x, xv = sym_and_value("int8", (50,), 100, 127)
    out = x.sum(dtype="int64")
    assert out.dtype == "int64"
    check_same(run([x], out, xv), xv.sum(dtype="int64"))
    out = x.sum(dtype="float32")
    check_same(run([x], out, xv), xv.sum(dtype="float32"))


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, -1], ids=str)
@pytest.mark.parametrize("method", ["argmax", "argmin"])
def test_argmax_argmin(method, axis, keepdims):
    x = T.dtensor3("x")
    xv = RNG.permutation(24).reshape(2, 3, 4).astype("float64")
    out = getattr(x, method)(axis=axis, keepdims=keepdims)
    assert out.dtype == "int64"
    check_same(run([x], out, xv), getattr(np, method)(xv, axis=axis, keepdims=keepdims))
    check_same(
        run([x], getattr(T, method)(x, axis=axis, keepdims=keepdims), xv),
        getattr(np, method)(xv, axis=axis, keepdims=keepdims),
    )


def test_reductions_static_shapes():
    x = T.tensor("float64", shape=(2, None, 4))
    assert x.sum(axis=1).type.shape == (2, 4)
    assert x.max(axis=(0, 2), keepdims=True).type.shape == (1, None, 1)
    assert x.mean().type.shape == ()
    assert x.argmax(axis=0).type.shape == (None, 4)


def test_mean_of_integers_is_float64_like_numpy():
    x, xv = sym_and_value("int32", (3, 5), 0, 10)
    out = x.mean(axis=0)
    assert out.dtype == "float64"
    check_same(run([x], out, xv), xv.mean(axis=0))


@pytest.mark.parametrize(
    "call, exc, message",
    [
        (lambda x: x.sum(axis=2), ValueError, r"sum: axis 2 is out of range for a 2-d input"),
        (lambda x: x.max(axis=-3), ValueError, r"max: axis -3 is out of range for a 2-d input"),
        (lambda x: x.mean(axis=(0, 0)), ValueError, r"mean: repeated axis in \(0, 0\)"),
        (lambda x: x.sum(axis=(1, -1)), ValueError, r"sum: repeated axis in \(1, -1\)"),
        (lambda x: x.argmax(axis=5), ValueError, r"argmax: axis 5 is out of range"),
        (lambda x: x.sum(axis=1.5), TypeError, r"sum: axis must be an int, .* got 1\.5"),
    ],
)
def test_reduction_axis_errors(call, exc, message):
    with pytest.raises(exc, match=message):
        call(T.dmatrix("x"))


def test_max_of_static_zero_size_is_rejected():
    with pytest.raises(ValueError, match=r"max of .*axis 0.*: zero-size array to reduction"):
        T.tensor("float64", shape=(0, 3)).max()


# ---------------------------------------------------------------- reshape / dimshuffle / flatten
@pytest.mark.parametrize(
    "shape, new",
    [
        ((2, 3, 4), (6, 4)),
        ((2, 3, 4), (4, -1)),
        ((2, 3, 4), (-1,)),
        ((6,), (2, 1, 3)),
        ((2, 3), (3, 2)),
        ((1,), ()),
    ],
)
def test_reshape(shape, new):
    x, xv = sym_and_value("float64", shape)
    check_same(run([x], x.reshape(new), xv), xv.reshape(new))
    if new:
        check_same(run([x], x.reshape(*new), xv), xv.reshape(new))
    check_same(run([x], T.reshape(x, new), xv), xv.reshape(new))


def test_reshape_with_symbolic_shape():
    x, xv = sym_and_value("float64", (4, 6))
    out = x.reshape((x.shape[1], -1))
    assert out.ndim == 2
    check_same(run([x], out, xv), xv.reshape(6, -1))
    n = T.lscalar("n")
    out = x.reshape((n, 3, -1))
    check_same(tensorjit.function([x, n], out)(xv, 2), xv.reshape(2, 3, -1))
    out = x.reshape(x.shape[::-1], ndim=2)
    check_same(run([x], out, xv), xv.reshape(6, 4))


def test_reshape_static_shape():
    x = T.tensor("float64", shape=(2, 6))
    assert x.reshape((3, 4)).type.shape == (3, 4)
    assert x.reshape((3, -1)).type.shape == (3, None)
    assert x.reshape((1, 12)).broadcastable == (True, False)


def test_reshape_errors():
    x = T.tensor("float64", shape=(2, 3), name="x")
    with pytest.raises(
        ValueError, match=r"reshape: can not reshape 'x' .* of static shape \(2, 3\) into \(4, 2\)"
    ):
        x.reshape((4, 2))
    with pytest.raises(ValueError, match=r"reshape: only one dimension can be -1, got \(-1, -1\)"):
        x.reshape((-1, -1))
    with pytest.raises(TypeError, match=r"reshape: the shape must be an integer vector"):
        x.reshape(T.tensor("float64", shape=(2,)))
    y = T.dmatrix("y")
    f = tensorjit.function([y], y.reshape((5, -1)))
    with pytest.raises(ValueError, match=r"reshape: can not reshape array of shape \(2, 3\)"):
        f(np.ones((2, 3)))


@pytest.mark.parametrize(
    "shape, static, pattern, np_fn",
    [
        ((2, 3), (None, None), (1, 0), lambda v: v.T),
        ((2, 3), (None, None), ("x", 0, 1), lambda v: v[None]),
        ((2, 3), (None, None), (0, "x", 1), lambda v: v[:, None]),
        ((2, 3), (None, None), (1, "x", 0, "x"), lambda v: v.T[:, None, :, None]),
        ((1, 3), (1, None), (1,), lambda v: v[0]),
        ((3, 1, 2), (None, 1, None), (2, 0), lambda v: v[:, 0, :].T),
        ((4,), (None,), ("x", 0), lambda v: v[None]),
        ((), (), ("x", "x"), lambda v: v[None, None]),
    ],
)
def test_dimshuffle(shape, static, pattern, np_fn):
    x = T.tensor("float64", shape=static)
    xv = RNG.normal(size=shape)
    check_same(run([x], x.dimshuffle(*pattern), xv), np_fn(xv))
    check_same(run([x], x.dimshuffle(pattern), xv), np_fn(xv))
    check_same(run([x], T.dimshuffle(x, pattern), xv), np_fn(xv))


def test_dimshuffle_errors():
    x = T.dmatrix("x")
    with pytest.raises(ValueError, match=r"dimshuffle: 2 is not 'x' or a dimension of a 2-d input"):
        x.dimshuffle(0, 2)
    with pytest.raises(ValueError, match=r"dimshuffle: dimensions repeat in \(0, 0\)"):
        x.dimshuffle(0, 0)
    with pytest.raises(
        ValueError, match=r"can not drop dimension 1 of 'x' .*only dimensions of static length 1"
    ):
        x.dimshuffle(0)


@pytest.mark.parametrize("shape", [(2, 3, 4), (5,), (3, 1), (2, 0, 3)])
@pytest.mark.parametrize("ndim", [1, 2])
def test_flatten(shape, ndim):
    if ndim > len(shape):
        ndim = 1
    x, xv = sym_and_value("float32", shape)
    expected = xv.reshape(xv.shape[: ndim - 1] + (-1,))
    out = x.flatten(ndim)
    assert out.ndim == ndim
    check_same(run([x], out, xv), expected)
    check_same(run([x], T.flatten(x, ndim), xv), expected)


def test_flatten_errors():
    with pytest.raises(ValueError, match=r"flatten: ndim=3 is out of range for 'x'"):
        T.dmatrix("x").flatten(3)
    with pytest.raises(ValueError, match=r"flatten: ndim=0 is out of range"):
        T.dmatrix("x").flatten(0)


def test_astype_and_cast():
    x, xv = sym_and_value("float64", (5,), -3, 3)
    check_same(run([x], x.astype("int32"), xv), xv.astype("int32"))
    check_same(run([x], T.cast(x, "float32"), xv), xv.astype("float32"))
    assert T.cast(x, "float64") is x


# ---------------------------------------------------------------- indexing
INDEX_CASES = {
    1: [
        1,
        -1,
        slice(None),
        slice(1, None),
        slice(None, -1),
        slice(None, None, -1),
        slice(None, None, 2),
        slice(None, None, -2),
        slice(5, 1, -1),
        slice(-2, None, -3),
        slice(10, 20),
        slice(-100, 3),
        (None,),
        (None, 2),
        (Ellipsis,),
        (Ellipsis, None),
        (slice(1, 5), None),
    ],
    2: [
        0,
        -1,
        (1, 2),
        (-1, -3),
        (slice(None), 1),
        (slice(None, None, -1), slice(1, None, 2)),
        (slice(3, 0, -1), -1),
        (Ellipsis, 0),
        (0, Ellipsis),
        (Ellipsis, slice(None, None, -2)),
        (None, slice(1, 3)),
        (slice(None), None, slice(None, None, -1)),
        (0, None),
        (1, 2, None),
    ],
    3: [
        (1, slice(None, None, -2), 3),
        (slice(1, None), slice(None, None, -2), 3),
        (Ellipsis, 1),
        (1, Ellipsis),
        (slice(None), Ellipsis, None),
        (None, 0, Ellipsis, slice(None, None, -1)),
        (slice(None, None, -1), slice(None, None, -1), slice(None, None, -1)),
        (-1, -1, -1),
        (slice(0, 1), None, slice(2, 3), Ellipsis),
    ],
}
SHAPES = {1: (7,), 2: (4, 5), 3: (3, 4, 5)}


def _index_id(index):
    return repr(index).replace(" ", "")


@pytest.mark.parametrize(
    "ndim, index",
    [(n, i) for n, cases in INDEX_CASES.items() for i in cases],
    ids=[f"{n}d-{_index_id(i)}" for n, cases in INDEX_CASES.items() for i in cases],
)
@pytest.mark.parametrize("static", [False, True])
def test_basic_slicing_matches_numpy(ndim, index, static):
    shape = SHAPES[ndim]
    x = T.tensor("float64", shape=shape if static else (None,) * ndim, name="x")
    xv = RNG.normal(size=shape)
    expected = xv[index]
    out = x[index]
    assert out.ndim == np.ndim(expected)
    if static:
        assert out.type.shape == np.shape(expected)
    check_same(run([x], out, xv), expected)


def test_indexing_with_symbolic_integers():
    x, xv = sym_and_value("float64", (5, 6))
    i = T.lscalar("i")
    j = T.iscalar("j")
    f = tensorjit.function([x, i, j], [x[i], x[i:j, ::-1], x[::j, i], x[-i]])
    for iv, jv in [(1, 3), (2, 5), (0, 1)]:
        got = f(xv, iv, jv)
        for g, e in zip(got, [xv[iv], xv[iv:jv, ::-1], xv[::jv, iv], xv[-iv]]):
            check_same(g, e)


def test_indexing_an_integer_vector_and_a_shape():
    v, vv = sym_and_value("int32", (6,), 0, 9)
    check_same(run([v], v[::-1][1:4], vv), vv[::-1][1:4])
    check_same(run([v], v[2] + v[-1], vv), vv[2] + vv[-1])


def test_indexing_result_is_not_aliased_to_input():
    x = T.dvector("x")
    xv = np.arange(5.0)
    out = run([x], x[1:3], xv)
    out[:] = -1
    np.testing.assert_array_equal(xv, np.arange(5.0))


def test_too_many_indices():
    x = T.dmatrix("x")
    with pytest.raises(IndexError, match=r"too many indices for 'x' .*: 2 dimensions, 3 indexed"):
        x[1, 2, 3]
    with pytest.raises(IndexError, match=r"too many indices .* 1 dimensions, 2 indexed"):
        T.dvector("v")[Ellipsis, 0, None, 1]
    with pytest.raises(IndexError, match=r"too many indices .* 0 dimensions, 1 indexed"):
        T.dscalar("s")[0]


def test_other_indexing_errors():
    x = T.tensor("float64", shape=(3, None), name="x")
    with pytest.raises(IndexError, match=r"single ellipsis"):
        x[..., ...]
    with pytest.raises(
        IndexError, match=r"index 3 is out of bounds for dimension 0 of 'x' .*static length 3"
    ):
        x[3]
    with pytest.raises(IndexError, match=r"index -4 is out of bounds for dimension 0"):
        x[-4]
    with pytest.raises(ValueError, match=r"slice step can not be zero"):
        x[::0]
    with pytest.raises(TypeError, match=r"float"):
        x[np.array([0.5])]  # advanced indexing exists, but not with float indices
    with pytest.raises(TypeError, match=r"slice components must be integers, got 1\.5"):
        x[1.5:]
    with pytest.raises(TypeError, match=r"only integers, slices, None and \.\.\."):
        x[True]


def test_runtime_index_out_of_bounds():
    x = T.dvector("x")
    f = tensorjit.function([x], x[5])
    with pytest.raises(IndexError, match=r"index 5 is out of bounds"):
        f(np.zeros(3))


# ---------------------------------------------------------------- set/inc_subtensor
SUBTENSOR_CASES = [
    ((5,), 1, 9.0),
    ((5,), slice(1, 4), np.array([7.0, 8.0, 9.0])),
    ((5,), slice(None, None, -2), 3.0),
    ((4, 3), 0, np.array([1.0, 2.0, 3.0])),
    ((4, 3), (slice(1, 3), slice(None)), np.array([10.0, 20.0, 30.0])),
    ((4, 3), (slice(None, None, -1), 2), np.array([1.0, 2.0, 3.0, 4.0])),
    ((4, 3), (Ellipsis, 1), 5.0),
    ((2, 3, 4), (1, slice(None, None, -1), slice(1, 3)), np.ones((3, 2))),
    ((2, 3, 4), (slice(None), 0), np.arange(4.0)),
]


@pytest.mark.parametrize(
    "shape, index, y", SUBTENSOR_CASES, ids=[repr(c[1]) for c in SUBTENSOR_CASES]
)
def test_set_and_inc_subtensor(shape, index, y):
    x, xv = sym_and_value("float64", shape)
    yv = np.asarray(y)
    ys = T.tensor("float64", shape=(None,) * yv.ndim, name="y")
    xv_before = xv.copy()

    expected_set = xv.copy()
    expected_set[index] = yv
    expected_inc = xv.copy()
    expected_inc[index] += yv
    f = tensorjit.function([x, ys], [T.set_subtensor(x[index], ys), T.inc_subtensor(x[index], ys)])
    got_set, got_inc = f(xv, yv)
    check_same(got_set, expected_set)
    check_same(got_inc, expected_inc)
    np.testing.assert_array_equal(xv, xv_before)  # the input is never modified


def test_set_subtensor_with_python_scalar_and_casting():
    x, xv = sym_and_value("float32", (3, 4))
    out = T.set_subtensor(x[1:, ::2], 0)
    assert out.dtype == "float32"
    expected = xv.copy()
    expected[1:, ::2] = 0
    check_same(run([x], out, xv), expected)
    i, iv = sym_and_value("int32", (6,), 0, 5)
    out = T.inc_subtensor(i[::2], T.constant(np.array([1, 2, 3], dtype="int64")))
    assert out.dtype == "int32"
    expected = iv.copy()
    expected[::2] += np.array([1, 2, 3], dtype="int32")
    check_same(run([i], out, iv), expected)


def test_inc_subtensor_with_symbolic_index():
    x, xv = sym_and_value("float64", (6,))
    k = T.lscalar("k")
    f = tensorjit.function([x, k], T.inc_subtensor(x[k:], 1.0))
    expected = xv.copy()
    expected[2:] += 1.0
    check_same(f(xv, 2), expected)


def test_set_subtensor_errors():
    x = T.dmatrix("x")
    with pytest.raises(TypeError, match=r"set_subtensor/inc_subtensor take an indexed tensor"):
        T.set_subtensor(x, 1.0)
    with pytest.raises(TypeError, match=r"take an indexed tensor such as x\[1:3\], got <unnamed>"):
        T.inc_subtensor(x.T, 1.0)
    with pytest.raises(
        ValueError, match=r"value .* has more dimensions than the indexed region \(1\)"
    ):
        T.set_subtensor(x[0], T.dmatrix("y"))


# ---------------------------------------------------------------- switch / where / misc elementwise
@pytest.mark.parametrize(
    "dtypes", [("float64", "float64"), ("float32", "int8"), ("int16", "int32")]
)
def test_switch(dtypes):
    c, cv = sym_and_value("float64", (3, 4))
    a, av = sym_and_value(dtypes[0], (3, 4))
    b, bv = sym_and_value(dtypes[1], (1, 4))
    out = T.switch(c > 0, a, b)
    expected = np.where(cv > 0, av, bv)
    assert out.dtype == expected.dtype.name
    check_same(run([c, a, b], out, cv, av, bv), expected)
    check_same(run([c, a, b], T.where(c < 0, a, b), cv, av, bv), np.where(cv < 0, av, bv))


def test_switch_with_python_scalars_and_numeric_condition():
    x, xv = sym_and_value("float32", (6,))
    out = T.switch(x > 0, x, 0)
    assert out.dtype == "float32"
    check_same(run([x], out, xv), np.where(xv > 0, xv, np.float32(0)))
    i, iv = sym_and_value("int8", (6,), -1, 2)
    out = T.switch(i, 1.5, -1.5)
    check_same(run([i], out, iv), np.where(iv, 1.5, -1.5))


@pytest.mark.parametrize(
    "fn_name, np_fn, low, high",
    [
        ("exp", np.exp, -3, 3),
        ("exp2", np.exp2, -3, 3),
        ("expm1", np.expm1, -3, 3),
        ("log", np.log, 0.1, 5),
        ("log2", np.log2, 0.1, 5),
        ("log10", np.log10, 0.1, 5),
        ("log1p", np.log1p, -0.9, 5),
        ("sqrt", np.sqrt, 0, 5),
        ("sqr", np.square, -3, 3),
        ("sin", np.sin, -3, 3),
        ("cos", np.cos, -3, 3),
        ("tan", np.tan, -1.2, 1.2),
        ("tanh", np.tanh, -3, 3),
        ("sigmoid", lambda v: 1 / (1 + np.exp(-v)), -5, 5),
        ("softplus", lambda v: np.log1p(np.exp(v)), -5, 5),
        ("floor", np.floor, -3, 3),
        ("ceil", np.ceil, -3, 3),
        ("sign", np.sign, -3, 3),
        ("abs", np.abs, -3, 3),
        ("neg", np.negative, -3, 3),
    ],
)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_unary_math_functions(fn_name, np_fn, low, high, dtype):
    x, xv = sym_and_value(dtype, (3, 4), low, high)
    got = run([x], getattr(T, fn_name)(x), xv)
    expected = np_fn(xv)
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-5 if dtype == "float32" else 1e-12)


def test_binary_math_functions():
    x, xv = sym_and_value("float64", (3, 4), 0.5, 3)
    y, yv = sym_and_value("float64", (3, 4), 0.5, 3)
    for name, np_fn in [
        ("maximum", np.maximum),
        ("minimum", np.minimum),
        ("power", np.power),
        ("divide", np.divide),
        ("floor_divide", np.floor_divide),
        ("mod", np.mod),
        ("true_div", np.true_divide),
        ("int_div", np.floor_divide),
    ]:
        check_same(run([x, y], getattr(T, name)(x, y), xv, yv), np_fn(xv, yv))


def test_constructors_zeros_ones_alloc_like():
    x, xv = sym_and_value("float32", (2, 3))
    check_same(run([x], T.zeros_like(x), xv), np.zeros_like(xv))
    check_same(run([x], T.ones_like(x, dtype="int8"), xv), np.ones((2, 3), dtype="int8"))
    n = T.lscalar("n")
    out = T.zeros((n, 2), dtype="int32")
    check_same(tensorjit.function([n], out)(3), np.zeros((3, 2), dtype="int32"))
    check_same(run([], T.ones((2, 2))), np.ones((2, 2)))
    v, vv = sym_and_value("float64", (3,))
    check_same(tensorjit.function([v, n], T.alloc(v, n, 3))(vv, 2), np.broadcast_to(vv, (2, 3)))
    with pytest.raises(TypeError, match=r"alloc: shape entries must be integer scalars"):
        T.alloc(v, 2.5)
    with pytest.raises(ValueError, match=r"alloc: value .* has more dimensions than shape 0"):
        T.alloc(v)


def test_stack_and_as_tensor_of_list():
    a, b = T.dscalars("a", "b")
    out = T.as_tensor([a, 2.0, b])
    assert out.ndim == 1 and out.type.shape == (3,)
    check_same(tensorjit.function([a, b], out)(1.0, 3.0), np.array([1.0, 2.0, 3.0]))
    s = T.stack([T.iscalar("i"), T.bscalar("j")])
    assert s.dtype == "int32"


# ---------------------------------------------------------------- broadcasting
def test_broadcasting_with_declared_length_one_dims():
    r, rv = sym_and_value("float64", (1, 4))
    c, cv = sym_and_value("float64", (3, 1))
    m, mv = sym_and_value("float64", (3, 4))
    v, vv = sym_and_value("float64", (4,))
    s, sv = sym_and_value("float64", ())
    out = r * c + m - v / (s + 10)
    assert out.type.shape == (None, None)
    check_same(run([r, c, m, v, s], out, rv, cv, mv, vv, sv), rv * cv + mv - vv / (sv + 10))


def test_static_shape_propagation_through_broadcasting():
    a = T.tensor("float64", shape=(1, 3))
    b = T.tensor("float64", shape=(5, 1))
    c = T.tensor("float64", shape=(None, 3))
    assert (a + b).type.shape == (5, 3)
    assert (a + c).type.shape == (None, 3)
    assert (a * T.tensor("float64", shape=(1, 1))).type.shape == (1, 3)
    assert (T.dvector() + T.tensor("float64", shape=(2, 1))).type.shape == (2, None)


def test_conflicting_static_shapes():
    a = T.tensor("float64", shape=(2, 3), name="a")
    b = T.tensor("float64", shape=(4, 3), name="b")
    with pytest.raises(
        ValueError,
        match=r"add: shapes \(2, 3\), \(4, 3\) can not be broadcast together \(dimension 0: "
        r"lengths \[2, 4\]\); inputs: 'a' .*, 'b'",
    ):
        a + b
    with pytest.raises(ValueError, match=r"mul: .*dimension 1: lengths \[3, 5\]"):
        a * T.tensor("float64", shape=(5,))
    with pytest.raises(ValueError, match=r"switch: .*can not be broadcast together"):
        T.switch(T.tensor("bool", shape=(2,)), T.tensor("float64", shape=(3,)), 0.0)


def test_undeclared_runtime_broadcast_is_an_error():
    x, y = T.dmatrices("x", "y")
    f = tensorjit.function([x, y], x + y)
    with pytest.raises(
        ValueError,
        match=r"add: input 'x' \(TensorType\(float64, shape=\(\?, \?\)\).*\) has length 1 in "
        r"dimension 0 at run time but its type does not declare that dimension broadcastable",
    ):
        f(np.ones((1, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"operands could not be broadcast|shape mismatch"):
        f(np.ones((2, 3)), np.ones((3, 3)))


# ---------------------------------------------------------------- python protocol guards
def test_bool_of_symbolic_variable():
    x = T.dscalar("x")
    with pytest.raises(
        TypeError,
        match=r"the truth value of symbolic x is unknown until the function runs; use "
        r"tensorjit\.tensor\.switch",
    ):
        bool(x)
    with pytest.raises(TypeError, match=r"truth value of symbolic"):
        if x > 0:
            pass  # pragma: no cover - never reached
    with pytest.raises(TypeError, match=r"truth value of symbolic"):
        _ = x and x
    with pytest.raises(TypeError, match=r"truth value of symbolic"):
        _ = 0 < x < 1  # a chained comparison needs bool() of the first result


def test_len_and_iter_of_symbolic_variable():
    v = T.dvector("v")
    with pytest.raises(TypeError, match=r"len\(\) of symbolic v is unknown; use \.shape\[0\]"):
        len(v)
    with pytest.raises(TypeError, match=r"symbolic v is not iterable; index it with \[i\]"):
        list(v)
    with pytest.raises(TypeError, match=r"symbolic v is not iterable"):
        a, b = v


def test_as_tensor_variable_errors():
    with pytest.raises(TypeError, match=r"can not convert str 'abc' to a tensor"):
        T.as_tensor_variable("abc")
    with pytest.raises(TypeError, match=r"expected a 2-d tensor, got 'v'"):
        T.as_tensor_variable(T.dvector("v"), ndim=2)
    with pytest.raises(TypeError, match=r"add takes 2 inputs, got 3"):
        T.add(1, 2, 3)


def test_compile_with_constants_only_and_eval():
    out = T.constant(np.arange(4.0)) * 2 + 1
    check_same(tensorjit.function([], out)(), np.arange(4.0) * 2 + 1)
    x = T.dvector("x")
    check_same((x**2).eval({x: np.array([1.0, 3.0])}), np.array([1.0, 9.0]))
