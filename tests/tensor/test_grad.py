"""Gradients of every differentiable tensor op (checked numerically) and grad() errors."""

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.gradient import (
    DisconnectedInputError,
    GradientError,
    NotDifferentiableError,
    NullGradError,
    grad_undefined,
)
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.scalar import SCALAR_OPS, ScalarOp


def rng():
    return np.random.default_rng(1234)


def uniform(shape, low, high, seed=0):
    return np.random.default_rng(seed).uniform(low, high, size=shape)


def away_from_zero(shape, seed=0):
    r = np.random.default_rng(seed)
    return r.uniform(0.5, 2.0, size=shape) * r.choice([-1.0, 1.0], size=shape)


def off_integers(shape, seed=0):
    """Values whose fractional part is in [0.2, 0.8]: far from floor/ceil jumps."""
    r = np.random.default_rng(seed)
    return r.integers(-3, 3, size=shape) + r.uniform(0.2, 0.8, size=shape)


def distinct(shape, seed=0):
    """Values that differ pairwise by at least 0.1 (a well-defined max/argmax)."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) * 0.1 - n * 0.05).reshape(shape)


def compile_grad(cost, wrt, inputs, **kwargs):
    g = tensorjit.grad(cost, wrt, **kwargs)
    return tensorjit.function(inputs, g, on_unused_input="ignore")


# ---------------------------------------------------------------- every elementwise op
SHAPE = (2, 3)


def _mod_points():
    y = uniform(SHAPE, 1.0, 2.0, seed=1)
    return [off_integers(SHAPE, seed=2) * y, y]


ELEMWISE_GRAD_CASES = {
    # name: (function of symbolic inputs, point)
    "add": (T.add, [uniform(SHAPE, -2, 2, 1), uniform(SHAPE, -2, 2, 2)]),
    "sub": (T.sub, [uniform(SHAPE, -2, 2, 1), uniform(SHAPE, -2, 2, 2)]),
    "mul": (T.mul, [uniform(SHAPE, -2, 2, 1), uniform(SHAPE, -2, 2, 2)]),
    "true_div": (T.true_div, [uniform(SHAPE, -2, 2, 1), away_from_zero(SHAPE, 2)]),
    "int_div": (T.int_div, _mod_points()),
    "mod": (T.mod, _mod_points()),
    "pow": (T.pow, [uniform(SHAPE, 0.5, 2, 1), uniform(SHAPE, -2, 2, 2)]),
    "maximum": (T.maximum, [distinct(SHAPE, 1), distinct(SHAPE, 2) + 0.05]),
    "minimum": (T.minimum, [distinct(SHAPE, 1), distinct(SHAPE, 2) + 0.05]),
    "neg": (T.neg, [uniform(SHAPE, -2, 2)]),
    "abs": (T.abs, [away_from_zero(SHAPE)]),
    "sign": (T.sign, [away_from_zero(SHAPE)]),
    "exp": (T.exp, [uniform(SHAPE, -2, 2)]),
    "exp2": (T.exp2, [uniform(SHAPE, -2, 2)]),
    "expm1": (T.expm1, [uniform(SHAPE, -2, 2)]),
    "log": (T.log, [uniform(SHAPE, 0.5, 3)]),
    "log2": (T.log2, [uniform(SHAPE, 0.5, 3)]),
    "log10": (T.log10, [uniform(SHAPE, 0.5, 3)]),
    "log1p": (T.log1p, [uniform(SHAPE, -0.5, 3)]),
    "sqrt": (T.sqrt, [uniform(SHAPE, 0.5, 3)]),
    "sqr": (T.sqr, [uniform(SHAPE, -2, 2)]),
    "sin": (T.sin, [uniform(SHAPE, -3, 3)]),
    "cos": (T.cos, [uniform(SHAPE, -3, 3)]),
    "tan": (T.tan, [uniform(SHAPE, -1.2, 1.2)]),
    "tanh": (T.tanh, [uniform(SHAPE, -2, 2)]),
    "sigmoid": (T.sigmoid, [uniform(SHAPE, -4, 4)]),
    "softplus": (T.softplus, [uniform(SHAPE, -4, 4)]),
    "floor": (T.floor, [off_integers(SHAPE)]),
    "ceil": (T.ceil, [off_integers(SHAPE)]),
    "arcsin": (T.arcsin, [uniform(SHAPE, -0.9, 0.9)]),
    "arccos": (T.arccos, [uniform(SHAPE, -0.9, 0.9)]),
    "arctan": (T.arctan, [uniform(SHAPE, -3, 3)]),
    "arctan2": (T.arctan2, [uniform(SHAPE, -2, 2, 1), away_from_zero(SHAPE, 2)]),
    "sinh": (T.sinh, [uniform(SHAPE, -2, 2)]),
    "cosh": (T.cosh, [uniform(SHAPE, -2, 2)]),
    "arcsinh": (T.arcsinh, [uniform(SHAPE, -3, 3)]),
    "arccosh": (T.arccosh, [uniform(SHAPE, 1.2, 4)]),
    "arctanh": (T.arctanh, [uniform(SHAPE, -0.9, 0.9)]),
    "deg2rad": (T.deg2rad, [uniform(SHAPE, -90, 90)]),
    "rad2deg": (T.rad2deg, [uniform(SHAPE, -3, 3)]),
    "reciprocal": (T.reciprocal, [away_from_zero(SHAPE)]),
    "logaddexp": (T.logaddexp, [uniform(SHAPE, -3, 3, 1), uniform(SHAPE, -3, 3, 2)]),
    "clip": (
        T.clip,
        [off_integers(SHAPE, 1), uniform(SHAPE, -0.9, -0.1, 2), uniform(SHAPE, 0.1, 0.9, 3)],
    ),
    "real": (T.real, [uniform(SHAPE, -2, 2)]),
    "imag": (T.imag, [uniform(SHAPE, -2, 2)]),
    "conj": (T.conj, [uniform(SHAPE, -2, 2)]),
    "angle": (T.angle, [away_from_zero(SHAPE)]),
    "erf": (T.erf, [uniform(SHAPE, -2, 2)]),
    "erfc": (T.erfc, [uniform(SHAPE, -2, 2)]),
    "erfinv": (T.erfinv, [uniform(SHAPE, -0.9, 0.9)]),
    "gamma": (T.gamma, [uniform(SHAPE, 0.5, 4)]),
    "gammaln": (T.gammaln, [uniform(SHAPE, 0.5, 4)]),
    "psi": (T.psi, [uniform(SHAPE, 0.5, 4)]),
    "tri_gamma": (T.tri_gamma, [uniform(SHAPE, 0.5, 4)]),
    "switch": (
        lambda a, b, c: T.switch(a > 0, b, c),
        [away_from_zero(SHAPE, 1), uniform(SHAPE, -2, 2, 2), uniform(SHAPE, -2, 2, 3)],
    ),
}


def test_grad_cases_cover_every_differentiable_scalar_op():
    differentiable = {name for name, op in SCALAR_OPS.items() if op.differentiable}
    assert differentiable == set(ELEMWISE_GRAD_CASES)


@pytest.mark.parametrize("name", sorted(ELEMWISE_GRAD_CASES))
def test_verify_grad_elementwise(name):
    fn, point = ELEMWISE_GRAD_CASES[name]
    tensorjit.verify_grad(fn, point, rng=rng())


@pytest.mark.parametrize("name", ["add", "mul", "true_div", "pow", "maximum", "exp", "tanh"])
def test_verify_grad_elementwise_float32(name):
    fn, point = ELEMWISE_GRAD_CASES[name]
    tensorjit.verify_grad(fn, [p.astype("float32") for p in point], rng=rng())


@pytest.mark.parametrize(
    "name, fn_expected",
    [
        ("neg", lambda v: -np.ones_like(v)),
        ("exp", np.exp),
        ("log", lambda v: 1 / v),
        ("sqrt", lambda v: 0.5 / np.sqrt(v)),
        ("tanh", lambda v: 1 - np.tanh(v) ** 2),
        ("sigmoid", lambda v: np.exp(-v) / (1 + np.exp(-v)) ** 2),
        ("sign", np.zeros_like),
        ("floor", np.zeros_like),
    ],
)
def test_unary_gradient_values(name, fn_expected):
    x = T.dvector("x")
    xv = ELEMWISE_GRAD_CASES[name][1][0].ravel()
    g = compile_grad(getattr(T, name)(x).sum(), x, [x])(xv)
    np.testing.assert_allclose(g, fn_expected(xv), rtol=1e-10, atol=1e-12)


def test_pow_with_constant_exponents():
    tensorjit.verify_grad(lambda x: x**3, [uniform(SHAPE, -2, 2)], rng=rng())
    tensorjit.verify_grad(lambda x: 2.0**x, [uniform(SHAPE, -2, 2)], rng=rng())
    tensorjit.verify_grad(lambda x: x**0.5, [uniform(SHAPE, 0.5, 2)], rng=rng())
    tensorjit.verify_grad(
        lambda x: x ** T.constant(np.int32(2)), [uniform(SHAPE, -2, 2)], rng=rng()
    )


def test_switch_with_constant_condition_and_scalar_branch():
    mask = np.array([[True, False, True], [False, False, True]])
    tensorjit.verify_grad(
        lambda a, b: T.switch(mask, a, b), [uniform(SHAPE, -1, 1), uniform((), -1, 1)], rng=rng()
    )


# ---------------------------------------------------------------- broadcasting
@pytest.mark.parametrize(
    "shapes",
    [
        ((1, 3), (2, 3)),  # row + matrix
        ((2, 3), (1, 3)),
        ((2, 1), (2, 3)),  # col + matrix
        ((3,), (2, 3)),  # vector padded on the left
        ((), (2, 3)),  # scalar
        ((1, 3), (2, 1)),  # row + col: both broadcast
        ((1, 1), (2, 3)),
        ((1, 3, 1), (2, 3, 4)),
        ((4,), (2, 3, 1)),
    ],
    ids=str,
)
@pytest.mark.parametrize("op", [T.add, T.sub, T.mul, T.true_div, T.maximum])
def test_verify_grad_broadcasting(shapes, op):
    a = away_from_zero(shapes[0], seed=1)
    b = away_from_zero(shapes[1], seed=2) * 1.3
    tensorjit.verify_grad(op, [a, b], rng=rng())


def test_broadcast_gradient_is_summed_over_the_broadcast_axes():
    r = T.drow("r")
    m = T.dmatrix("m")
    g = compile_grad((r * m).sum(), r, [r, m])(np.ones((1, 3)), np.arange(6.0).reshape(2, 3))
    assert g.shape == (1, 3)
    np.testing.assert_allclose(g, [[3.0, 5.0, 7.0]])


# ---------------------------------------------------------------- reductions
REDUCE_AXES = [None, 0, 1, -1, (0, 2), (0, 1, 2)]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", REDUCE_AXES, ids=str)
@pytest.mark.parametrize("method", ["sum", "mean", "max", "min"])
def test_verify_grad_reductions(method, axis, keepdims):
    tensorjit.verify_grad(
        lambda x: getattr(x, method)(axis=axis, keepdims=keepdims),
        [distinct((2, 3, 4), seed=3)],
        rng=rng(),
    )


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", REDUCE_AXES, ids=str)
def test_verify_grad_prod(axis, keepdims):
    tensorjit.verify_grad(
        lambda x: T.prod(x, axis=axis, keepdims=keepdims),
        [away_from_zero((2, 3, 2), seed=4)],
        rng=rng(),
    )


def test_max_gradient_goes_to_the_maximum():
    x = T.dmatrix("x")
    xv = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    g = compile_grad(x.max(axis=1).sum(), x, [x])(xv)
    np.testing.assert_array_equal(g, [[0, 1, 0], [1, 0, 0]])


def test_verify_grad_sum_with_dtype_and_argmax_indexing():
    tensorjit.verify_grad(lambda x: x.sum(axis=0, dtype="float64") * 2, [uniform(SHAPE, -1, 1)])
    tensorjit.verify_grad(lambda x: x[T.argmax(x)] * 3, [distinct((5,), seed=5)], rng=rng())
    tensorjit.verify_grad(
        lambda x: x.sum() / x.shape[0] + x.size, [uniform(SHAPE, -1, 1)], rng=rng()
    )


# ---------------------------------------------------------------- dot
@pytest.mark.parametrize(
    "xshape, yshape",
    [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4))],
    ids=["vector.vector", "matrix.vector", "vector.matrix", "matrix.matrix"],
)
def test_verify_grad_dot(xshape, yshape):
    point = [uniform(xshape, -1, 1, seed=6), uniform(yshape, -1, 1, seed=7)]
    tensorjit.verify_grad(T.dot, point, rng=rng())
    tensorjit.verify_grad(lambda a, b: (a @ b) ** 2, point, rng=rng())


def test_dot_gradient_values():
    x = T.dmatrix("x")
    w = T.dvector("w")
    xv = np.arange(6.0).reshape(2, 3)
    wv = np.array([1.0, -1.0, 2.0])
    gx, gw = compile_grad(T.dot(x, w).sum(), [x, w], [x, w])(xv, wv)
    np.testing.assert_allclose(gx, np.tile(wv, (2, 1)))
    np.testing.assert_allclose(gw, xv.sum(axis=0))


def test_verify_grad_outer():
    tensorjit.verify_grad(T.outer, [uniform((3,), -1, 1, 1), uniform((2,), -1, 1, 2)], rng=rng())


# ---------------------------------------------------------------- shape ops
@pytest.mark.parametrize(
    "fn, shape",
    [
        (lambda x: x.reshape((3, 4)), (2, 6)),
        (lambda x: x.reshape((-1,)), (2, 3, 2)),
        (lambda x: x.reshape((2, 1, -1)), (4, 3)),
        (lambda x: x.reshape((x.shape[1], x.shape[0])), (2, 3)),
        (lambda x: x.T, (2, 3)),
        (lambda x: x.T, (2, 3, 4)),
        (lambda x: x.transpose(1, 2, 0), (2, 3, 4)),
        (lambda x: x.dimshuffle("x", 0, 1), (2, 3)),
        (lambda x: x.dimshuffle(1, "x", 0), (2, 3)),
        (lambda x: x.dimshuffle(1), (1, 3)),
        (lambda x: x.dimshuffle("x", 2, 0), (3, 1, 2)),
        (lambda x: x.flatten(), (2, 3, 4)),
        (lambda x: x.flatten(2), (2, 3, 4)),
        (lambda x: T.stack([x[0], x[1] * 2, x.sum()]), (3,)),
    ],
)
def test_verify_grad_shape_ops(fn, shape):
    tensorjit.verify_grad(fn, [uniform(shape, -1, 1, seed=8)], rng=rng())


# ---------------------------------------------------------------- indexing
@pytest.mark.parametrize(
    "index, shape",
    [
        (1, (4,)),
        (-1, (4, 3)),
        (slice(None, None, -1), (5,)),
        (slice(1, None, 2), (6,)),
        ((slice(1, 3), slice(None, None, -2)), (4, 5)),
        ((Ellipsis, 0), (3, 4)),
        ((None, slice(1, None)), (4, 3)),
        ((-1, None, slice(None, None, 2)), (2, 3, 5)),
        ((1, slice(None, None, -1), 2), (2, 3, 4)),
        ((slice(None), slice(None)), (2, 3)),
    ],
    ids=repr,
)
def test_verify_grad_subtensor(index, shape):
    tensorjit.verify_grad(lambda x: x[index] * 3, [uniform(shape, -1, 1, seed=9)], rng=rng())


def test_subtensor_gradient_values():
    x = T.dvector("x")
    g = compile_grad((x[1:4] * x[::-2]).sum() + x[0], x, [x])(np.arange(5.0))
    # d/dx [x1*x4 + x2*x2 + x3*x0 ... ] built with NumPy for comparison
    xv = np.arange(5.0)
    expected = np.zeros(5)
    a_idx, b_idx = np.arange(1, 4), np.arange(4, -1, -2)
    for i, j in zip(a_idx, b_idx):
        expected[i] += xv[j]
        expected[j] += xv[i]
    expected[0] += 1
    np.testing.assert_allclose(g, expected)


@pytest.mark.parametrize(
    "index, xshape, yshape",
    [
        (slice(1, 3), (4,), (2,)),
        (slice(None, None, -2), (5,), ()),
        ((slice(1, 3),), (4, 3), (3,)),  # y broadcast over the indexed rows
        ((slice(1, 3),), (4, 3), (1, 3)),
        ((slice(None), 1), (3, 4), (3,)),
        ((Ellipsis, slice(None, None, -1)), (2, 3), (2, 3)),
        ((0, slice(1, None)), (2, 3, 4), (1, 4)),
    ],
    ids=repr,
)
@pytest.mark.parametrize("kind", ["set", "inc"])
def test_verify_grad_set_and_inc_subtensor(kind, index, xshape, yshape):
    fn = T.set_subtensor if kind == "set" else T.inc_subtensor
    tensorjit.verify_grad(
        lambda x, y: fn(x[index], y) ** 2,
        [uniform(xshape, -1, 1, seed=10), uniform(yshape, -1, 1, seed=11)],
        rng=rng(),
    )


def test_set_subtensor_gradient_values():
    x = T.dvector("x")
    y = T.dscalar("y")
    out = T.set_subtensor(x[1:3], y)
    gx, gy = compile_grad((out * np.arange(1.0, 6.0)).sum(), [x, y], [x, y])(np.zeros(5), 0.0)
    np.testing.assert_allclose(gx, [1.0, 0.0, 0.0, 4.0, 5.0])
    np.testing.assert_allclose(gy, 5.0)


# ---------------------------------------------------------------- alloc, cast, switch
@pytest.mark.parametrize(
    "vshape, shape",
    [((), (2, 3)), ((3,), (2, 3)), ((1, 3), (2, 3)), ((2, 1), (2, 3)), ((3,), (4, 2, 3))],
    ids=str,
)
def test_verify_grad_alloc(vshape, shape):
    tensorjit.verify_grad(
        lambda v: T.alloc(v, *shape) * np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape),
        [uniform(vshape, -1, 1, seed=12)],
        rng=rng(),
    )


def test_verify_grad_alloc_with_symbolic_shape():
    def fn(v, m):
        return T.alloc(v, m.shape[0], m.shape[1]) * m

    tensorjit.verify_grad(fn, [uniform((3,), -1, 1, 1), uniform((2, 3), -1, 1, 2)], rng=rng())


def test_verify_grad_zeros_like_and_ones_like():
    tensorjit.verify_grad(
        lambda x: x + T.ones_like(x) * 2 + T.zeros_like(x), [uniform(SHAPE, 0, 1)]
    )


def test_verify_grad_cast():
    tensorjit.verify_grad(
        lambda x: T.cast(x, "float64") * 2, [uniform(SHAPE, -1, 1).astype("float32")], rng=rng()
    )
    tensorjit.verify_grad(
        lambda x: T.cast(T.cast(x, "float32"), "float64") ** 2,
        [uniform(SHAPE, -1, 1)],
        rng=rng(),
        eps=1e-2,
        abs_tol=1e-4,
        rel_tol=1e-4,
    )


def test_cast_gradient_dtype():
    x = T.fvector("x")
    g = tensorjit.grad(T.cast(x, "float64").sum(), x)
    assert g.dtype == "float32"
    y = T.dvector("y")
    g = tensorjit.grad((T.cast(y, "float32") * 2).sum(), y)
    assert g.dtype == "float64"
    np.testing.assert_allclose(tensorjit.function([y], g)(np.ones(3)), [2.0, 2.0, 2.0])


def test_verify_grad_switch_both_branches_broadcast():
    tensorjit.verify_grad(
        lambda c, a, b: T.switch(c > 0, a * 2, b**2),
        [away_from_zero((2, 3), 1), uniform((1, 3), -1, 1, 2), uniform((2, 1), -1, 1, 3)],
        rng=rng(),
    )


def test_verify_grad_composite_expression():
    def fn(x, w, b):
        h = T.tanh(T.dot(x, w) + b)
        return T.softplus(h).mean(axis=0) - T.log(T.sigmoid(h)).sum()

    tensorjit.verify_grad(
        fn, [uniform((4, 3), -1, 1, 1), uniform((3, 2), -1, 1, 2), uniform((2,), -1, 1, 3)]
    )


def test_second_derivative():
    x = T.dvector("x")
    g = tensorjit.grad((x**3).sum(), x)
    h = tensorjit.grad(g.sum(), x)
    np.testing.assert_allclose(tensorjit.function([x], h)(np.array([1.0, -2.0])), [6.0, -12.0])


def test_grad_wrt_shared_variable_and_float32_dtype():
    w = tensorjit.shared(np.array([1.0, 2.0], dtype="float32"), name="w")
    x = T.fvector("x")
    g = tensorjit.grad((w * x).sum(), w)
    assert g.dtype == "float32"
    np.testing.assert_allclose(tensorjit.function([x], g)(np.array([3, 4], "float32")), [3, 4])


# ---------------------------------------------------------------- verify_grad itself
def test_verify_grad_detects_a_wrong_gradient():
    bad_sin = Elemwise(ScalarOp("bad_sin", 1, np.sin, grad=lambda i, o, gz: [gz[0]]))
    with pytest.raises(
        GradientError,
        match=r"verify_grad: gradient w\.r\.t\. input 0 \(shape \(2, 3\)\) is wrong at",
    ):
        tensorjit.verify_grad(bad_sin, [uniform(SHAPE, 0.5, 1.5)], rng=rng())


def test_verify_grad_rejects_integer_points():
    with pytest.raises(TypeError, match=r"verify_grad: point 0 must be a float array, got dtype"):
        tensorjit.verify_grad(T.exp, [np.arange(3)])


# ---------------------------------------------------------------- grad() errors and options
def test_non_scalar_cost():
    x = T.dvector("x")
    with pytest.raises(
        TypeError,
        match=r"grad: the cost must be a scalar, but .* has 1 dimensions; reduce it first",
    ):
        tensorjit.grad(x * 2, x)


def test_cost_and_wrt_must_be_variables():
    x = T.dvector("x")
    with pytest.raises(TypeError, match=r"grad: cost must be a symbolic Variable, got 3\.0"):
        tensorjit.grad(3.0, x)
    with pytest.raises(TypeError, match=r"grad: wrt must contain symbolic Variables, got"):
        tensorjit.grad(x.sum(), [x, np.ones(3)])
    with pytest.raises(ValueError, match=r"grad: give a cost or known_grads"):
        tensorjit.grad(None, x)
    with pytest.raises(ValueError, match=r"disconnected_inputs must be raise/warn/ignore"):
        tensorjit.grad(x.sum(), x, disconnected_inputs="nope")
    with pytest.raises(ValueError, match=r"return_disconnected must be 'zero' or 'None'"):
        tensorjit.grad(x.sum(), x, return_disconnected="nope")


def test_disconnected_input_raises_by_default():
    x = T.dvector("x")
    y = T.dmatrix("y")
    with pytest.raises(
        DisconnectedInputError,
        match=r"grad: the cost does not depend on 'y' .*\(it is disconnected\); pass "
        r"disconnected_inputs='ignore' or 'warn'",
    ):
        tensorjit.grad((x**2).sum(), [x, y])


def test_disconnected_input_ignore_returns_zeros():
    x = T.dvector("x")
    y = T.dmatrix("y")
    gx, gy = tensorjit.grad((x**2).sum(), [x, y], disconnected_inputs="ignore")
    f = tensorjit.function([x, y], [gx, gy])
    gxv, gyv = f(np.array([1.0, 2.0]), np.ones((2, 4)))
    np.testing.assert_allclose(gxv, [2.0, 4.0])
    assert gyv.shape == (2, 4) and gyv.dtype == np.float64
    np.testing.assert_array_equal(gyv, 0)


def test_disconnected_input_warn():
    x = T.dvector("x")
    y = T.fvector("y")
    with pytest.warns(UserWarning, match=r"the cost does not depend on 'y'"):
        gy = tensorjit.grad(x.sum(), y, disconnected_inputs="warn")
    assert gy.dtype == "float32"
    np.testing.assert_array_equal(tensorjit.function([y], gy)(np.ones(3, "float32")), [0, 0, 0])


def test_disconnected_input_return_none():
    x = T.dvector("x")
    y = T.dvector("y")
    gx, gy = tensorjit.grad(
        x.sum(), [x, y], disconnected_inputs="ignore", return_disconnected="None"
    )
    assert gy is None
    assert gx is not None


def test_consider_constant_blocks_the_gradient():
    x = T.dvector("x")
    h = x**2
    cost = (h * x).sum()
    xv = np.array([1.0, 2.0, 3.0])
    full = compile_grad(cost, x, [x])(xv)
    np.testing.assert_allclose(full, 3 * xv**2)
    blocked = compile_grad(cost, x, [x], consider_constant=[h])(xv)
    np.testing.assert_allclose(blocked, xv**2)
    # blocking every path to x disconnects it
    with pytest.raises(DisconnectedInputError, match=r"does not depend on 'x'"):
        tensorjit.grad(h.sum(), x, consider_constant=[h])


def test_known_grads():
    x = T.dvector("x")
    h = 3 * x
    hg = T.dvector("hg")
    g = tensorjit.grad(None, x, known_grads={h: hg})
    f = tensorjit.function([x, hg], g, on_unused_input="ignore")
    np.testing.assert_allclose(f(np.ones(2), np.array([1.0, -2.0])), [3.0, -6.0])
    # known_grads adds to the gradient that flows from the cost
    g2 = tensorjit.grad(x.sum(), x, known_grads={h: hg})
    f2 = tensorjit.function([x, hg], g2, on_unused_input="ignore")
    np.testing.assert_allclose(f2(np.ones(2), np.array([1.0, -2.0])), [4.0, -5.0])


def test_known_grads_wrong_ndim():
    x = T.dvector("x")
    h = 3 * x
    with pytest.raises(TypeError, match=r"expected a variable of type TensorType\(float64"):
        tensorjit.grad(None, x, known_grads={h: T.dmatrix("g")})


def test_grad_wrt_an_intermediate_and_its_input():
    x = T.dvector("x")
    h = 3 * x
    cost = (h**2).sum()
    gh, gx = tensorjit.grad(cost, [h, x])
    ghv, gxv = tensorjit.function([x], [gh, gx])(np.array([1.0, 2.0]))
    np.testing.assert_allclose(ghv, [6.0, 12.0])
    np.testing.assert_allclose(gxv, [18.0, 36.0])


def test_grad_wrt_an_intermediate_only():
    x = T.dvector("x")
    h = T.exp(x)
    gh = tensorjit.grad((h * 2).sum() + h[0], h)
    np.testing.assert_allclose(tensorjit.function([x], gh)(np.zeros(3)), [3.0, 2.0, 2.0])


def test_grad_of_the_cost_itself_is_one():
    x = T.dscalar("x")
    cost = x * 2
    g = tensorjit.grad(cost, cost)
    f = tensorjit.function([x], g, on_unused_input="ignore")
    assert f(5.0) == 1.0 and f(5.0).dtype == np.float64


class Opaque(Op):
    """A test op that has a perform but no gradient."""

    __props__ = ()

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0] * 2


class UndefinedGradOp(Opaque):
    def grad(self, inputs, output_grads):
        return [grad_undefined(self, 0, inputs[0], "it is a test op")]


def test_not_differentiable_op_is_named():
    x = T.dvector("x")
    y = Opaque()(x)
    np.testing.assert_allclose(tensorjit.function([x], y)(np.ones(2)), [2.0, 2.0])
    with pytest.raises(
        NotDifferentiableError,
        match=r"grad: Opaque \(node created at .*test_grad\.py:\d+\) is not differentiable: "
        r"Opaque does not implement a gradient",
    ):
        tensorjit.grad((y * x).sum(), x)


def test_not_differentiable_scalar_op_is_named():
    mystery = Elemwise(ScalarOp("mystery", 1, np.sin))
    x = T.dvector("x")
    with pytest.raises(
        NotDifferentiableError, match=r"grad: mystery .* is not differentiable: mystery has no"
    ):
        tensorjit.grad(mystery(x).sum(), x)
    # a path around the op is fine if the op's input is not asked about
    y = T.dvector("y")
    g = tensorjit.grad((mystery(x) * y).sum(), y)
    np.testing.assert_allclose(
        tensorjit.function([x, y], g)(np.array([0.5]), np.array([1.0])), np.sin([0.5])
    )


def test_undefined_gradient_raises_null_grad_error():
    x = T.dvector("x")
    with pytest.raises(
        NullGradError,
        match=r"grad w\.r\.t\. 'x' .*: UndefinedGradOp: gradient w\.r\.t\. input 0 .* is "
        r"undefined\. it is a test op",
    ):
        tensorjit.grad(UndefinedGradOp()(x).sum(), x)


# ---------------------------------------------------------------- integer-valued paths
def test_gradient_through_integer_operand_is_float():
    x = T.dvector("x")
    i = T.ivector("i")
    g = tensorjit.grad((x * i).sum(), x)
    assert g.dtype == "float64"
    out = tensorjit.function([x, i], g)(np.ones(3), np.array([1, -2, 5], dtype="int32"))
    np.testing.assert_array_equal(out, [1.0, -2.0, 5.0])


def test_gradient_through_a_boolean_mask():
    x = T.dvector("x")
    g = tensorjit.grad((x * (x > 0)).sum(), x)
    out = tensorjit.function([x], g)(np.array([-1.0, 2.0, -3.0, 4.0]))
    np.testing.assert_array_equal(out, [0.0, 1.0, 0.0, 1.0])


def test_gradient_through_an_integer_cast_is_zero():
    # x is connected to the cost, only through a piecewise-constant integer path: as in
    # Theano/PyTensor its gradient is zero, not "disconnected".
    x = T.dvector("x")
    cost = (T.cast(x, "int32") * 1.5).sum()
    g = tensorjit.grad(cost, x)
    np.testing.assert_array_equal(tensorjit.function([x], g)(np.array([1.2, 3.7])), [0.0, 0.0])


def test_gradient_wrt_integer_input_is_float_zeros_when_ignored():
    x = T.dvector("x")
    i = T.ivector("i")
    gi = tensorjit.grad((x * i).sum(), i, disconnected_inputs="ignore")
    assert gi.dtype == tensorjit.config.floatX
    with tensorjit.config.change_flags(floatX="float32"):
        gi32 = tensorjit.grad((x * i).sum(), i, disconnected_inputs="ignore")
        assert gi32.dtype == "float32"
    out = tensorjit.function([i], gi)(np.array([1, 2], dtype="int32"))
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [0.0, 0.0])


def test_integer_cost_seed_is_float():
    x = T.dvector("x")
    g = tensorjit.grad(T.cast(x * 2, "float64").sum(), x)
    np.testing.assert_array_equal(tensorjit.function([x], g)(np.ones(2)), [2.0, 2.0])
    i = T.lvector("i")
    # the cost is an integer sum of a float path: the gradient is still defined
    cost = (x * 2).sum() + i.sum()
    g = tensorjit.grad(cost, x)
    out = tensorjit.function([x, i], g, on_unused_input="ignore")(np.ones(2), np.array([1, 2]))
    np.testing.assert_array_equal(out, [2.0, 2.0])
