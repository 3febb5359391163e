"""tensorjit.tensor.nnet: activations, softmax, losses, conv2d, pooling, FFTs and the
examples, checked against NumPy/SciPy reference implementations written here."""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.signal
import scipy.special

import tensorjit
import tensorjit.tensor as T
from tensorjit.tensor import nnet
from tensorjit.tensor.nnet import conv as conv_mod
from tensorjit.tensor.nnet import pool as pool_mod

# (the package's ``fft`` attribute is the function: the module is reached by its path)
fft_mod = importlib.import_module("tensorjit.tensor.nnet.fft")


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def away_from_zero(shape, seed=0):
    r = rng(seed)
    return r.uniform(0.2, 2.0, size=shape) * r.choice([-1.0, 1.0], size=shape)


def vgrad(fn, points, **kwargs):
    tensorjit.verify_grad(fn, [np.asarray(p, dtype="float64") for p in points], rng=rng(), **kwargs)


def sym_like(value: np.ndarray, name: str = "v"):
    return T.tensor(value.dtype, shape=(None,) * value.ndim, name=name)


def evaluate(build, values, mode="DebugMode"):
    """Compile ``build(*symbolic inputs)`` (in DebugMode by default) and run it."""
    inputs = [sym_like(v, f"in{i}") for i, v in enumerate(values)]
    out = build(*inputs)
    return tensorjit.function(inputs, out, mode=mode)(*values)


def check_infer_shape(build, values, op_class):
    """The output shape comes from ``infer_shape`` (the op is not run) and is right."""
    inputs = [sym_like(v, f"in{i}") for i, v in enumerate(values)]
    out = build(*inputs)
    f = tensorjit.function(inputs, out.shape)
    assert not any(isinstance(n.op, op_class) for n in f.fgraph.toposort()), "op still run"
    expected = tensorjit.function(inputs, out)(*values).shape
    assert tuple(f(*values)) == expected
    # And the op's infer_shape itself, called with constant input shapes.
    node = out.owner
    while not isinstance(node.op, op_class):
        node = next(i.owner for i in node.inputs if i.owner is not None)
    shapes = [tuple(T.constant(np.int64(s)) for s in v.shape) for v in values]
    if len(node.inputs) == len(values):
        got = node.op.infer_shape(None, node, shapes)[0]
        got = tuple(int(tensorjit.function([], T.as_tensor_variable(s))()) for s in got)
        assert got == expected


# ================================================================ activations
ACT_SHAPES = [(), (0,), (5,), (3, 4)]


@pytest.mark.parametrize("shape", ACT_SHAPES)
def test_activations_match_numpy(shape):
    x = rng().standard_normal(shape) * 3
    checks = {
        nnet.sigmoid: scipy.special.expit(x),
        nnet.softplus: np.log1p(np.exp(x)),
        nnet.hard_sigmoid: np.clip(0.2 * x + 0.5, 0, 1),
        nnet.relu: np.where(x > 0, x, 0),
        (lambda v: nnet.relu(v, alpha=0.1)): np.where(x > 0, x, 0.1 * x),
        nnet.elu: np.where(x > 0, x, np.expm1(x)),
        (lambda v: nnet.elu(v, alpha=0.5)): np.where(x > 0, x, 0.5 * np.expm1(x)),
    }
    for fn, expected in checks.items():
        got = evaluate(fn, [x])
        assert got.shape == expected.shape and got.dtype == np.float64
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)


def test_relu_symbolic_alpha_and_int_input():
    x, a = T.vector("x"), T.scalar("a")
    f = tensorjit.function([x, a], nnet.relu(x, alpha=a), mode="DebugMode")
    np.testing.assert_allclose(f(np.array([-2.0, 3.0]), 0.25), [-0.5, 3.0])
    xi = T.lvector("xi")
    out = tensorjit.function([xi], nnet.relu(xi))(np.array([-2, 0, 5]))
    assert out.dtype == np.int64 and out.tolist() == [0, 0, 5]
    fv = T.fvector("f")
    out = tensorjit.function([fv], nnet.elu(fv))(np.float32([-1.0, 2.0]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [np.expm1(-1.0), 2.0], rtol=1e-6)


def test_elu_grad_finite_for_huge_inputs():
    x = T.vector("x")
    g = tensorjit.grad(nnet.elu(x).sum(), x)
    out = tensorjit.function([x], g)(np.array([800.0, -800.0, 1.0]))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, [1.0, 0.0, 1.0])


@pytest.mark.parametrize(
    "fn",
    [
        nnet.sigmoid,
        nnet.softplus,
        nnet.relu,
        lambda v: nnet.relu(v, 0.1),
        nnet.elu,
        lambda v: nnet.elu(v, 2.0),
        nnet.hard_sigmoid,
    ],
)
def test_activation_grads(fn):
    vgrad(fn, [away_from_zero((3, 4))])


# ================================================================ softmax
def ref_softmax(x, axis):
    return scipy.special.softmax(x, axis=axis)


def ref_log_softmax(x, axis):
    return scipy.special.log_softmax(x, axis=axis)


SOFTMAX_CASES = [
    ((5,), -1),
    ((3, 4), -1),
    ((3, 4), 0),
    ((2, 3, 4), 1),
    ((2, 3, 4), (0, 2)),
    ((2, 3), None),
    ((0, 4), -1),
    ((3, 1), -1),
]


@pytest.mark.parametrize("shape,axis", SOFTMAX_CASES)
def test_softmax_and_log_softmax_match_scipy(shape, axis):
    x = rng().standard_normal(shape) * 4
    sm = evaluate(lambda v: nnet.softmax(v, axis=axis), [x])
    lsm = evaluate(lambda v: nnet.log_softmax(v, axis=axis), [x])
    np.testing.assert_allclose(sm, ref_softmax(x, axis), rtol=1e-12)
    np.testing.assert_allclose(lsm, ref_log_softmax(x, axis), rtol=1e-12, atol=1e-12)
    assert sm.shape == lsm.shape == shape


def test_softmax_is_stable_and_keeps_float32():
    x = np.array([[1000.0, 0.0, -1000.0], [-1e4, -1e4, -1e4]])
    sm = evaluate(nnet.softmax, [x])
    lsm = evaluate(nnet.log_softmax, [x])
    assert np.all(np.isfinite(sm)) and np.all(np.isfinite(lsm))
    np.testing.assert_allclose(sm, [[1, 0, 0], [1 / 3] * 3], atol=1e-15)
    np.testing.assert_allclose(lsm[0], [0.0, -1000.0, -2000.0])
    xf = np.float32([[1.0, 2.0, 3.0]])
    out = evaluate(nnet.softmax, [xf])
    assert out.dtype == np.float32
    assert nnet.softmax(T.lmatrix()).dtype == "float64"


@pytest.mark.parametrize("axis", [-1, 0, (0, 1)])
def test_softmax_grads(axis):
    x = rng(1).standard_normal((3, 4))
    vgrad(lambda v: nnet.softmax(v, axis=axis), [x])
    vgrad(lambda v: nnet.log_softmax(v, axis=axis), [x])


def test_softmax_second_order_grad():
    x = rng(2).standard_normal((2, 3))

    def first(v):
        return tensorjit.grad((nnet.softmax(v) ** 2).sum() + nnet.log_softmax(v)[0, 1], v)

    vgrad(first, [x])


def test_softmax_infer_shape():
    x = rng().standard_normal((3, 5))
    check_infer_shape(nnet.softmax, [x], nnet.Softmax)
    check_infer_shape(lambda v: nnet.log_softmax(v, axis=0), [x], nnet.LogSoftmax)


def test_softmax_errors():
    with pytest.raises(ValueError, match="0-d"):
        nnet.softmax(T.scalar("s"))
    with pytest.raises(ValueError, match="out of range"):
        nnet.softmax(T.matrix("m"), axis=2)
    with pytest.raises(TypeError, match="complex input .*zz"):
        nnet.log_softmax(T.zmatrix("zz"))


# ================================================================ losses
def ref_cce_index(p, y):
    return -np.log(p[np.arange(len(y)), y])


def test_categorical_crossentropy_index_and_onehot():
    r = rng(3)
    logits = r.standard_normal((5, 4))
    p = ref_softmax(logits, -1)
    y = r.integers(0, 4, size=5)
    onehot = np.eye(4)[y]
    got = evaluate(nnet.categorical_crossentropy, [p, y])
    np.testing.assert_allclose(got, ref_cce_index(p, y), rtol=1e-12)
    got = evaluate(nnet.categorical_crossentropy, [p, onehot])
    np.testing.assert_allclose(got, ref_cce_index(p, y), rtol=1e-12)
    soft = ref_softmax(r.standard_normal((5, 4)), -1)
    got = evaluate(nnet.categorical_crossentropy, [p, soft])
    np.testing.assert_allclose(got, -(soft * np.log(p)).sum(axis=1), rtol=1e-12)
    # empty batch
    got = evaluate(nnet.categorical_crossentropy, [np.ones((0, 4)) / 4, np.zeros(0, "int64")])
    assert got.shape == (0,)


def test_softmax_crossentropy_with_logits_is_stable():
    logits = np.array([[1000.0, 0.0, -1000.0], [0.5, 0.25, 3.0]])
    y = np.array([2, 1])
    got = evaluate(nnet.softmax_crossentropy_with_logits, [logits, y])
    expected = -ref_log_softmax(logits, -1)[np.arange(2), y]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert got[0] == pytest.approx(2000.0)
    probs = ref_softmax(rng().standard_normal((2, 3)), -1)
    got = evaluate(nnet.softmax_crossentropy_with_logits, [logits, probs])
    np.testing.assert_allclose(got, -(probs * ref_log_softmax(logits, -1)).sum(1), rtol=1e-12)


def test_crossentropy_grads():
    r = rng(4)
    y = r.integers(0, 4, size=3)
    x = r.standard_normal((3, 4))
    vgrad(lambda v: nnet.categorical_crossentropy(nnet.softmax(v), y), [x])
    vgrad(lambda v: nnet.categorical_crossentropy(nnet.softmax(v), np.eye(4)[y]), [x])
    vgrad(lambda v: nnet.softmax_crossentropy_with_logits(v, y), [x])
    vgrad(lambda v: nnet.softmax_crossentropy_with_logits(v, np.eye(4)[y] * 0.5 + 0.125), [x])
    # second order through SelectClass / SelectClassGrad
    vgrad(lambda v: tensorjit.grad(nnet.softmax_crossentropy_with_logits(v, y).sum(), v), [x])


CROSS_ENTROPY_FORMS = {
    # the tutorials' form: log of the probabilities, then the labels' entries
    "log_then_index": lambda p, y: -T.mean(T.log(p)[T.arange(y.shape[0]), y]),
    "index_then_log": lambda p, y: -T.mean(T.log(p[T.arange(y.shape[0]), y])),
    "select_class": lambda p, y: nnet.categorical_crossentropy(p, y).mean(),
    "one_hot": lambda p, y: nnet.categorical_crossentropy(p, nnet.to_one_hot(y, 3)).mean(),
    "with_another_use": lambda p, y: (
        -T.mean(T.log(p)[T.arange(y.shape[0]), y]) + 0.5 * (p**2).sum()
    ),
}


# DebugMode also runs the cost's log(p) (log(0) there), whose shape alone the gradient
# takes; compiled normally, the gradient computes no log (test below).
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("form", sorted(CROSS_ENTROPY_FORMS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cross_entropy_gradient_of_a_saturated_softmax_is_finite(form, dtype):
    """The gradient of log(softmax(x)) is softmax(x) - one_hot, also where the label's
    probability underflows to 0 (a confidently wrong prediction): (g / p) * p would be
    inf * 0 = NaN there."""
    x, y = T.matrix("x", dtype=dtype), T.lvector("y")
    p = nnet.softmax(x)
    cost = CROSS_ENTROPY_FORMS[form](p, y)
    f = tensorjit.function([x, y], tensorjit.grad(cost, x), mode="DebugMode")
    logits = np.array([[0.0, 1000.0, 0.0], [1.0, 2.0, 3.0]], dtype)
    labels = np.array([0, 2])
    got = f(logits, labels)
    probs = ref_softmax(logits.astype("float64"), -1)
    want = (probs - np.eye(3)[labels]) / 2
    if form == "with_another_use":  # d/dx of 0.5 * sum(p**2): p * (p - sum(p**2))
        want += probs * (probs - (probs**2).sum(axis=1, keepdims=True))
    tol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    # the same graph against finite differences where the cost is finite
    vgrad(lambda v: CROSS_ENTROPY_FORMS[form](nnet.softmax(v), labels), [logits * 1e-3])


def test_a_scatter_into_zeros_of_another_shape_is_not_taken_for_a_log_gradient():
    """g = inc(zeros((1, 5))[i, j], gz / p[i, j]) broadcasts against p (3 x 5): the
    softmax gradient must use the general form, not h - p * sum(h)."""
    x, gz = T.matrix("x"), T.vector("gz")
    i, j = np.array([0, 2, 2]), np.array([1, 4, 4])
    p = nnet.softmax(x)
    g = T.inc_subtensor(T.zeros((1, 5))[i * 0, j], gz / p[i, j])
    (gx,) = tensorjit.grad(None, [x], known_grads={p: g})
    xv, gzv = rng(5).standard_normal((3, 5)), np.array([0.5, -1.0, 2.0])
    sm = ref_softmax(xv, -1)
    gv = np.zeros((1, 5))
    np.add.at(gv, (i * 0, j), gzv / sm[i, j])
    want = (gv - (gv * sm).sum(axis=1, keepdims=True)) * sm
    np.testing.assert_allclose(tensorjit.function([x, gz], gx)(xv, gzv), want, rtol=1e-12)


def test_tutorial_cross_entropy_computes_no_softmax():
    """With the cost taking only log(p), the forward pass computes log_softmax alone and
    the gradient reads it (exp(log_softmax)): no separate softmax row pass."""
    x, y = T.matrix("x"), T.lvector("y")
    cost = CROSS_ENTROPY_FORMS["log_then_index"](nnet.softmax(x), y)
    f = tensorjit.function([x, y], [cost, tensorjit.grad(cost, x)])
    ops = [type(node.op) for node in f.maker.fgraph.toposort()]
    assert nnet.LogSoftmax in ops and nnet.Softmax not in ops
    # no log(p), no division by p (the mean's 1/n is the only quotient, a scalar)
    for node in f.maker.fgraph.toposort():
        name = str(node.op)
        assert not name.startswith("log"), name
        assert "true_div" not in name or node.outputs[0].type.ndim == 0, name
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no log(0), no 0 * inf
        _, grad = f(np.array([[0.0, 1000.0, 0.0]]), np.array([0]))
    np.testing.assert_allclose(grad, [[-1.0, 1.0, 0.0]])


def test_select_class_ops():
    r = rng(5)
    x = r.standard_normal((2, 3, 4))
    y = r.integers(0, 4, size=(2, 3))
    got = evaluate(lambda a, b: nnet.SelectClass()(a, b), [x, y])
    np.testing.assert_array_equal(got, np.take_along_axis(x, y[..., None], -1)[..., 0])
    g = r.standard_normal((2, 3))
    got = evaluate(lambda a, b, c: nnet.SelectClassGrad()(a, b, c), [x, g, y])
    expected = np.zeros_like(x)
    for i, j in np.ndindex(2, 3):
        expected[i, j, y[i, j]] = g[i, j]
    np.testing.assert_array_equal(got, expected)
    check_infer_shape(lambda a, b: nnet.SelectClass()(a, b), [x, y], nnet.SelectClass)
    check_infer_shape(
        lambda a, b, c: nnet.SelectClassGrad()(a, b, c), [x, g, y], nnet.SelectClassGrad
    )


def test_crossentropy_errors():
    p, y = T.matrix("p"), T.lvector("y")
    f = tensorjit.function([p, y], nnet.categorical_crossentropy(p, y))
    with pytest.raises(IndexError, match="class index 7 is out of range for 3 classes"):
        f(np.ones((2, 3)) / 3, np.array([0, 7]))
    with pytest.raises(ValueError, match="does not match"):
        f(np.ones((2, 3)) / 3, np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="true_dist .*bad"):
        nnet.categorical_crossentropy(p, T.tensor3("bad"))
    with pytest.raises(TypeError, match="integer dtype"):
        nnet.SelectClass()(p, T.vector("fy"))
    with pytest.raises(ValueError, match="labels .*lab"):
        nnet.softmax_crossentropy_with_logits(p, T.tensor3("lab"))


def test_to_one_hot():
    y = np.array([2, 0, 3])
    got = evaluate(lambda v: nnet.to_one_hot(v, 4), [y])
    np.testing.assert_array_equal(got, np.eye(4)[y])
    assert got.dtype == np.float64
    yv = T.lvector("y")
    out = nnet.to_one_hot(yv, 4, dtype="int8")
    assert out.type.shape == (None, 4) and out.dtype == "int8"
    n = T.lscalar("n")
    check_infer_shape(lambda v: nnet.to_one_hot(v, 5), [y], nnet.OneHot)
    f = tensorjit.function([yv, n], nnet.to_one_hot(yv, n))
    with pytest.raises(IndexError, match="class index 2 is out of range for 2 classes"):
        f(y, 2)
    with pytest.raises(TypeError, match="must be integers"):
        nnet.to_one_hot(T.vector("fv"), 3)


def test_binary_crossentropy():
    r = rng(6)
    out = r.uniform(0.05, 0.95, size=(4, 3))
    target = r.uniform(0, 1, size=(4, 3))
    got = evaluate(nnet.binary_crossentropy, [out, target])
    expected = -(target * np.log(out) + (1 - target) * np.log(1 - out))
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    vgrad(nnet.binary_crossentropy, [out, target])


def ref_hinge(pred, y, delta=1.0):
    n = len(y)
    correct = pred[np.arange(n), y]
    rest = np.where(np.eye(pred.shape[1], dtype=bool)[y], -np.inf, pred).max(axis=1)
    return np.maximum(rest - correct + delta, 0)


def test_multiclass_hinge_loss():
    r = rng(7)
    pred = r.standard_normal((6, 4))
    y = r.integers(0, 4, size=6)
    got = evaluate(nnet.multiclass_hinge_loss, [pred, y])
    np.testing.assert_allclose(got, ref_hinge(pred, y), rtol=1e-12)
    got = evaluate(nnet.multiclass_hinge_loss, [pred, np.eye(4)[y]])
    np.testing.assert_allclose(got, ref_hinge(pred, y), rtol=1e-12)
    got = evaluate(lambda a, b: nnet.multiclass_hinge_loss(a, b, delta=0.1), [pred, y])
    np.testing.assert_allclose(got, ref_hinge(pred, y, 0.1), rtol=1e-12)
    # away from the kinks: make every margin clearly non-zero or clearly clipped
    pred = np.array([[3.0, 0.5, -1.0], [0.2, 0.1, 0.4], [-2.0, 1.0, 0.3]])
    vgrad(lambda a: nnet.multiclass_hinge_loss(a, np.array([0, 2, 1])), [pred])
    with pytest.raises(ValueError, match="must be a matrix"):
        nnet.multiclass_hinge_loss(T.vector("pv"), T.lvector())


# ================================================================ conv2d
def ref_pads(mode, k):
    if mode == "valid":
        return (0, 0)
    if mode == "full":
        return (k - 1, k - 1)
    if mode == "half":
        return (k // 2, k // 2)
    if mode == "same":
        return ((k - 1) // 2, (k - 1) - (k - 1) // 2)
    return (mode, mode)


def ref_conv2d(x, w, border_mode="valid", subsample=(1, 1), flip=True):
    modes = border_mode if isinstance(border_mode, tuple) else (border_mode, border_mode)
    (pt, pb), (pl, pr) = ref_pads(modes[0], w.shape[2]), ref_pads(modes[1], w.shape[3])
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    fn = scipy.signal.convolve2d if flip else scipy.signal.correlate2d
    n, c, f = x.shape[0], x.shape[1], w.shape[0]
    rows = xp.shape[2] - w.shape[2] + 1
    cols = xp.shape[3] - w.shape[3] + 1
    out = np.zeros((n, f, rows, cols))
    for i, j in itertools.product(range(n), range(f)):
        for k in range(c):
            out[i, j] += fn(xp[i, k], w[j, k], mode="valid")
    return out[:, :, :: subsample[0], :: subsample[1]]


CONV_MODES = ["valid", "full", "half", "same", (1, 2), ("half", 0)]


@pytest.mark.parametrize("border_mode", CONV_MODES)
@pytest.mark.parametrize("subsample", [(1, 1), (2, 3)])
@pytest.mark.parametrize("flip", [True, False])
def test_conv2d_matches_scipy(border_mode, subsample, flip):
    r = rng(8)
    x = r.standard_normal((2, 3, 7, 6))
    w = r.standard_normal((4, 3, 3, 2))
    got = evaluate(lambda a, b: nnet.conv2d(a, b, border_mode, subsample, flip), [x, w])
    np.testing.assert_allclose(got, ref_conv2d(x, w, border_mode, subsample, flip), atol=1e-12)


@pytest.mark.parametrize("border_mode", CONV_MODES)
def test_conv2d_infer_shape_and_static_shape(border_mode):
    r = rng(9)
    x = r.standard_normal((2, 3, 7, 6))
    w = r.standard_normal((4, 3, 3, 2))
    check_infer_shape(lambda a, b: nnet.conv2d(a, b, border_mode, (2, 1)), [x, w], nnet.Conv2d)
    xs = T.tensor("float64", shape=(2, 3, 7, 6))
    ws = T.tensor("float64", shape=(4, 3, 3, 2))
    out = nnet.conv2d(xs, ws, border_mode, (2, 1))
    assert out.type.shape == ref_conv2d(x, w, border_mode, (2, 1)).shape


def test_conv2d_edge_cases_and_dtypes():
    r = rng(10)
    # empty batch, 1x1 filters, filter as large as the image
    x = r.standard_normal((0, 2, 4, 4))
    w = r.standard_normal((3, 2, 2, 2))
    assert evaluate(nnet.conv2d, [x, w]).shape == (0, 3, 3, 3)
    x = r.standard_normal((1, 2, 4, 5))
    w1 = r.standard_normal((3, 2, 1, 1))
    np.testing.assert_allclose(evaluate(nnet.conv2d, [x, w1]), ref_conv2d(x, w1), atol=1e-12)
    wbig = r.standard_normal((1, 2, 4, 5))
    np.testing.assert_allclose(evaluate(nnet.conv2d, [x, wbig]), ref_conv2d(x, wbig), atol=1e-12)
    xf, wf = x.astype("float32"), w1.astype("float32")
    out = evaluate(nnet.conv2d, [xf, wf])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref_conv2d(x, w1), rtol=1e-5, atol=1e-5)
    assert nnet.conv2d(T.ftensor4(), T.tensor4()).dtype == "float64"


@pytest.mark.parametrize(
    "border_mode,subsample,flip",
    [("valid", (1, 1), True), ("full", (2, 1), False), ("same", (1, 2), True), (1, (2, 2), True)],
)
def test_conv2d_grads(border_mode, subsample, flip):
    r = rng(11)
    x = r.standard_normal((2, 2, 5, 4))
    w = r.standard_normal((3, 2, 3, 2))
    vgrad(lambda a, b: nnet.conv2d(a, b, border_mode, subsample, flip), [x, w])


def test_conv2d_grad_ops_match_reference_and_have_grads():
    r = rng(12)
    x = r.standard_normal((2, 2, 6, 5))
    w = r.standard_normal((3, 2, 3, 3))
    params = ("half", (2, 1), True)
    g = r.standard_normal(ref_conv2d(x, w, *params).shape)
    # <conv(x, w), g> = <x, gi(w, g)> = <w, gw(x, g)>
    inner = float((ref_conv2d(x, w, *params) * g).sum())
    gi = evaluate(lambda a, b: nnet.conv2d_grad_wrt_inputs(b, a, x.shape, *params), [w, g])
    gw = evaluate(lambda a, b: nnet.conv2d_grad_wrt_weights(a, b, w.shape, *params), [x, g])
    assert gi.shape == x.shape and gw.shape == w.shape
    assert float((x * gi).sum()) == pytest.approx(inner, rel=1e-10)
    assert float((w * gw).sum()) == pytest.approx(inner, rel=1e-10)
    # Their own gradients (second derivatives of conv2d).
    small_x, small_w = x[:1, :, :4, :4], w[:2, :, :2, :2]
    small_g = r.standard_normal(ref_conv2d(small_x, small_w, *params).shape)
    vgrad(lambda a, b: nnet.conv2d_grad_wrt_inputs(b, a, (4, 4), *params), [small_w, small_g])
    vgrad(lambda a, b: nnet.conv2d_grad_wrt_weights(a, b, (2, 2), *params), [small_x, small_g])
    check_infer_shape(
        lambda a, b: nnet.conv2d_grad_wrt_inputs(b, a, (6, 5), *params),
        [w, g],
        nnet.Conv2dGradInputs,
    )
    check_infer_shape(
        lambda a, b: nnet.conv2d_grad_wrt_weights(a, b, (3, 3), *params),
        [x, g],
        nnet.Conv2dGradWeights,
    )


def test_conv2d_errors():
    x, w = T.tensor4("img"), T.tensor4("filt")
    with pytest.raises(TypeError, match="4-d .*mat"):
        nnet.conv2d(T.matrix("mat"), w)
    with pytest.raises(TypeError, match="float dtype.*ints"):
        nnet.conv2d(T.ltensor4("ints"), w)
    with pytest.raises(ValueError, match="3 channels .*expect 2"):
        nnet.conv2d(
            T.tensor("float64", shape=(None, 3, None, None), name="a"),
            T.tensor("float64", shape=(None, 2, None, None), name="b"),
        )
    with pytest.raises(ValueError, match="border_mode"):
        nnet.conv2d(x, w, border_mode="wide")
    with pytest.raises(ValueError, match="subsample"):
        nnet.conv2d(x, w, subsample=(0, 1))
    f = tensorjit.function([x, w], nnet.conv2d(x, w))
    with pytest.raises(ValueError, match="3 channels but the filters expect 2"):
        f(np.zeros((1, 3, 5, 5)), np.zeros((2, 2, 3, 3)))
    with pytest.raises(ValueError, match="larger than the padded image"):
        f(np.zeros((1, 2, 2, 5)), np.zeros((2, 2, 3, 3)))


# ================================================================ pooling
def ref_pool(x, ws, ignore_border, stride, pad, mode):
    """Theano's Pool.perform algorithm, except that max pooling ignores the padding."""
    stride = stride or ws

    def n_out(n, w, s, p):
        if ignore_border:
            return max((n + 2 * p - w) // s + 1, 0)
        if s >= w:
            return (n - 1) // s + 1
        return min(n, max(0, (n - 1 - w + s) // s) + 1)

    h, wd = x.shape[-2:]
    oh, ow = n_out(h, ws[0], stride[0], pad[0]), n_out(wd, ws[1], stride[1], pad[1])
    out = np.zeros(x.shape[:-2] + (oh, ow))
    for r, c in itertools.product(range(oh), range(ow)):
        rs, cs = r * stride[0], c * stride[1]
        re, ce = min(rs + ws[0], h + 2 * pad[0]), min(cs + ws[1], wd + 2 * pad[1])
        block = x[..., max(rs - pad[0], 0) : re - pad[0], max(cs - pad[1], 0) : ce - pad[1]]
        if mode == "max":
            out[..., r, c] = block.max(axis=(-2, -1))
        elif mode == "sum":
            out[..., r, c] = block.sum(axis=(-2, -1))
        elif mode == "average_inc_pad":
            out[..., r, c] = block.sum(axis=(-2, -1)) / ((re - rs) * (ce - cs))
        else:
            out[..., r, c] = block.mean(axis=(-2, -1))
    return out


POOL_MODES = ["max", "sum", "average_inc_pad", "average_exc_pad"]
POOL_GEOMETRIES = [
    ((2, 2), True, None, (0, 0)),
    ((2, 2), False, None, (0, 0)),
    ((3, 2), True, (1, 1), (0, 0)),
    ((3, 2), False, (2, 1), (0, 0)),
    ((2, 3), False, (3, 3), (0, 0)),
    ((3, 3), True, (2, 2), (1, 2)),
    ((2, 2), True, (1, 3), (1, 0)),
]


@pytest.mark.parametrize("mode", POOL_MODES)
@pytest.mark.parametrize("ws,ignore_border,stride,pad", POOL_GEOMETRIES)
def test_pool_matches_reference(mode, ws, ignore_border, stride, pad):
    x = rng(13).standard_normal((2, 3, 7, 5))
    got = evaluate(lambda v: nnet.pool_2d(v, ws, ignore_border, stride, pad, mode), [x])
    np.testing.assert_allclose(got, ref_pool(x, ws, ignore_border, stride, pad, mode), atol=1e-12)
    check_infer_shape(
        lambda v: nnet.pool_2d(v, ws, ignore_border, stride, pad, mode), [x], nnet.Pool
    )


@pytest.mark.parametrize("mode", POOL_MODES)
@pytest.mark.parametrize("ws,ignore_border,stride,pad", POOL_GEOMETRIES[2:6])
def test_pool_grads(mode, ws, ignore_border, stride, pad):
    # distinct values: a well-defined maximum in every window
    x = (rng(14).permutation(2 * 6 * 5) * 0.1).reshape(2, 6, 5)
    vgrad(lambda v: nnet.pool_2d(v, ws, ignore_border, stride, pad, mode), [x])


def test_pool_other_ranks_dtypes_and_wrappers():
    r = rng(15)
    x2 = r.standard_normal((5, 6))
    np.testing.assert_allclose(
        evaluate(lambda v: nnet.max_pool_2d(v, (2, 3)), [x2]),
        ref_pool(x2, (2, 3), True, None, (0, 0), "max"),
    )
    x5 = r.standard_normal((2, 1, 2, 4, 4))
    np.testing.assert_allclose(
        evaluate(lambda v: nnet.avg_pool_2d(v, (2, 2), pad=(1, 1), include_padding=True), [x5]),
        ref_pool(x5, (2, 2), True, None, (1, 1), "average_inc_pad"),
    )
    np.testing.assert_allclose(
        evaluate(lambda v: nnet.avg_pool_2d(v, (2, 2), pad=(1, 1)), [x5]),
        ref_pool(x5, (2, 2), True, None, (1, 1), "average_exc_pad"),
    )
    xi = r.integers(-50, 50, size=(3, 4, 4))
    got = evaluate(lambda v: nnet.max_pool_2d(v, (2, 2)), [xi])
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, ref_pool(xi, (2, 2), True, None, (0, 0), "max"))
    got = evaluate(lambda v: nnet.pool_2d(v, (2, 2), mode="average_exc_pad"), [xi])
    assert got.dtype == np.float64
    xf = r.standard_normal((1, 4, 4)).astype("float32")
    assert evaluate(lambda v: nnet.avg_pool_2d(v, (2, 2)), [xf]).dtype == np.float32
    # empty inputs and images smaller than the window
    assert evaluate(lambda v: nnet.max_pool_2d(v, (2, 2)), [np.zeros((0, 3, 4))]).shape == (0, 1, 2)
    assert evaluate(lambda v: nnet.max_pool_2d(v, (3, 3)), [np.zeros((2, 2, 2))]).shape == (2, 0, 0)
    empty = np.zeros((2, 0, 0))
    assert evaluate(lambda v: nnet.max_pool_2d(v, (2, 2), False), [empty]).shape == (2, 0, 0)
    # static shapes
    assert nnet.max_pool_2d(T.tensor("float64", shape=(2, 7, 5)), (2, 2), False).type.shape == (
        2,
        4,
        3,
    )


def test_pool_grad_ops_directly():
    r = rng(16)
    x = r.standard_normal((2, 5, 4))
    x[0, 0, 0] = x[0, 0, 1] = 9.0  # a tie: both get the gradient, as in Theano
    params = ((2, 2), True, None, (0, 0))
    z = ref_pool(x, *params, "max")
    g = r.standard_normal(z.shape)
    got = evaluate(lambda a, b, c: nnet.MaxPoolGrad(*params, "max")(a, b, c), [x, z, g])
    assert got[0, 0, 0] == got[0, 0, 1] == g[0, 0, 0]
    assert got.shape == x.shape and got[:, 4].sum() == 0  # the dropped row
    got = evaluate(lambda a, b: nnet.AveragePoolGrad(*params, "average_inc_pad")(a, b), [x, g])
    np.testing.assert_allclose(got[:, :4], np.repeat(np.repeat(g, 2, -2), 2, -1) / 4)
    check_infer_shape(
        lambda a, b: nnet.AveragePoolGrad(*params, "sum")(a, b), [x, g], nnet.AveragePoolGrad
    )
    check_infer_shape(
        lambda a, b, c: nnet.MaxPoolGrad(*params, "max")(a, b, c), [x, z, g], nnet.MaxPoolGrad
    )
    # second derivatives: the gradients are linear in the output gradient
    xs = (r.permutation(20) * 0.1 - 1).reshape(1, 4, 5)
    vgrad(lambda v: tensorjit.grad((nnet.avg_pool_2d(v, (2, 2), pad=(1, 1)) ** 2).sum(), v), [xs])
    for ib in (True, False):
        vgrad(
            lambda v, ib=ib: tensorjit.grad((nnet.max_pool_2d(v, (2, 2), ib) ** 2).sum(), v), [xs]
        )
    a = r.standard_normal(x.shape)
    gg = evaluate(lambda p, q, s: nnet.MaxPoolGradGrad(*params, "max")(p, q, s), [x, z, a])
    assert gg.shape == z.shape
    assert gg[0, 0, 0] == pytest.approx(a[0, 0, 0] + a[0, 0, 1])
    gx = evaluate(lambda p, q, s: nnet.MaxPoolGrad(*params, "max")(p, q, s), [x, z, g])
    # adjoints: <MaxPoolGrad(g), a> = <g, MaxPoolGradGrad(a)>
    assert float((gx * a).sum()) == pytest.approx(float((g * gg).sum()), rel=1e-12)
    check_infer_shape(
        lambda p, q, s: nnet.MaxPoolGradGrad(*params, "max")(p, q, s),
        [x, z, a],
        nnet.MaxPoolGradGrad,
    )


def test_pool_errors():
    x = T.tensor3("imgs")
    with pytest.raises(ValueError, match="pad .* smaller than the window"):
        nnet.pool_2d(x, (2, 2), pad=(2, 0))
    with pytest.raises(ValueError, match="ignore_border=True"):
        nnet.pool_2d(x, (3, 3), ignore_border=False, pad=(1, 1))
    with pytest.raises(ValueError, match="mode must be one of"):
        nnet.pool_2d(x, (2, 2), mode="median")
    with pytest.raises(ValueError, match="ws must be a pair"):
        nnet.max_pool_2d(x, (0, 2))
    with pytest.raises(TypeError, match="vec.*needs at least 2 dimensions"):
        nnet.max_pool_2d(T.vector("vec"), (2, 2))
    with pytest.raises(TypeError, match="cplx.*must be real-valued"):
        nnet.max_pool_2d(T.zmatrix("cplx"), (2, 2))


# ================================================================ FFT
def pairs(c):
    return np.stack([c.real, c.imag], axis=-1)


def cplx(p):
    return p[..., 0] + 1j * p[..., 1]


NORMS = [None, "ortho", "forward"]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("shape", [(1,), (5,), (6,), (3, 4), (2, 3, 7)])
def test_fft_family_matches_numpy(norm, shape):
    r = rng(17)
    real = r.standard_normal(shape)
    c = pairs(r.standard_normal(shape) + 1j * r.standard_normal(shape))
    got = evaluate(lambda v: nnet.fft(v, norm), [c])
    np.testing.assert_allclose(got, pairs(np.fft.fft(cplx(c), norm=norm)), atol=1e-12)
    got = evaluate(lambda v: nnet.ifft(v, norm), [c])
    np.testing.assert_allclose(got, pairs(np.fft.ifft(cplx(c), norm=norm)), atol=1e-12)
    spec = evaluate(lambda v: nnet.rfft(v, norm), [real])
    np.testing.assert_allclose(spec, pairs(np.fft.rfft(real, norm=norm)), atol=1e-12)
    n = shape[-1]
    if n > 1:
        back = evaluate(lambda v: nnet.irfft(v, norm, is_odd=n % 2 == 1), [spec])
        np.testing.assert_allclose(back, real, atol=1e-12)
        noisy = spec + r.standard_normal(spec.shape)
        got = evaluate(lambda v: nnet.irfft(v, norm, is_odd=n % 2 == 1), [noisy])
        np.testing.assert_allclose(got, np.fft.irfft(cplx(noisy), n=n, norm=norm), atol=1e-12)


def test_fft_dtypes_and_static_shapes():
    xf = T.tensor("float32", shape=(3, 8))
    spec = nnet.rfft(xf)
    assert spec.dtype == "float32" and spec.type.shape == (3, 5, 2)
    assert nnet.irfft(spec, is_odd=True).type.shape == (3, 9)
    assert nnet.fft(T.tensor("float64", shape=(4, None))).type.shape == (4, 2)
    assert nnet.rfft(T.lvector()).dtype == "float64"
    v = np.float32(rng().standard_normal((2, 6)))
    out = evaluate(nnet.rfft, [v])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, pairs(np.fft.rfft(v)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("norm", NORMS)
def test_fft_grads(norm):
    r = rng(18)
    vgrad(lambda v: nnet.fft(v, norm), [r.standard_normal((2, 5, 2))])
    vgrad(lambda v: nnet.ifft(v, norm), [r.standard_normal((2, 4, 2))])
    for n in (5, 6, 1):
        vgrad(lambda v: nnet.rfft(v, norm), [r.standard_normal((2, n))])
    for m, odd in ((4, False), (4, True), (2, False), (1, True)):
        op = fft_mod.IRFFT(norm, odd)
        vgrad(op, [r.standard_normal((2, m, 2))])


def test_fft_adjoint_ops_and_second_order():
    r = rng(19)
    x = r.standard_normal((2, 6))
    spec_g = r.standard_normal((2, 4, 2))
    # <rfft(x), G> = <x, RFFTAdjoint(G)>
    adj = evaluate(lambda a: fft_mod.RFFTAdjoint("forward")(a, 6), [spec_g])
    lhs = float((pairs(np.fft.rfft(x)) * spec_g).sum())
    assert float((x * adj).sum()) == pytest.approx(lhs, rel=1e-10)
    # <irfft(S), g> = <S, IRFFTAdjoint(g)>
    g = r.standard_normal((2, 6))
    adj = evaluate(lambda a: fft_mod.IRFFTAdjoint("forward", False)(a), [g])
    lhs = float((np.fft.irfft(cplx(spec_g), n=6) * g).sum())
    assert float((spec_g * adj).sum()) == pytest.approx(lhs, rel=1e-10)
    vgrad(lambda a: fft_mod.RFFTAdjoint("ortho")(a, 5), [r.standard_normal((2, 3, 2))])
    vgrad(lambda a: fft_mod.IRFFTAdjoint(None, True)(a), [r.standard_normal((2, 5))])
    for build, value, op in [
        (lambda v: nnet.fft(v), r.standard_normal((2, 5, 2)), nnet.FFT),
        (lambda v: nnet.rfft(v), r.standard_normal((3, 7)), nnet.RFFT),
        (lambda v: nnet.irfft(v, is_odd=True), r.standard_normal((3, 4, 2)), nnet.IRFFT),
        (lambda v: fft_mod.IRFFTAdjoint()(v), r.standard_normal((3, 6)), nnet.IRFFTAdjoint),
        (lambda v: fft_mod.RFFTAdjoint()(v, v.shape[1] * 2 - 2), spec_g, nnet.RFFTAdjoint),
    ]:
        check_infer_shape(build, [value], op)


def test_fft_errors():
    with pytest.raises(ValueError, match=r"notpairs.*\(re, im\) pairs"):
        nnet.fft(T.tensor("float64", shape=(None, 3), name="notpairs"))
    with pytest.raises(TypeError, match="zc.*must be real"):
        nnet.rfft(T.zvector("zc"))
    with pytest.raises(ValueError, match="norm must be"):
        nnet.fft(T.tensor3(), norm="unitary")
    m = T.matrix("m")
    f = tensorjit.function([m], nnet.ifft(m))
    with pytest.raises(ValueError, match=r"\(re, im\) pairs, got shape \(2, 3\)"):
        f(np.zeros((2, 3)))
    g = tensorjit.function([m], nnet.irfft(m.dimshuffle(0, "x", 1), is_odd=False))
    with pytest.raises(ValueError, match="give no output"):
        g(np.zeros((2, 2)))


# ================================================================ whole networks
def test_small_convnet_training_steps_in_debugmode():
    """Every op, its gradient ops and the rewrites around them, checked by DebugMode."""
    r = rng(20)
    x, y = T.tensor4("x"), T.lvector("y")
    w = tensorjit.shared(r.standard_normal((3, 1, 3, 3)) * 0.3, name="w")
    v = tensorjit.shared(r.standard_normal((27, 4)) * 0.1, name="v")
    h = nnet.max_pool_2d(nnet.relu(nnet.conv2d(x, w, "half")), (2, 2), ignore_border=False)
    logits = T.dot(h.flatten(2), v)
    cost = nnet.categorical_crossentropy(nnet.softmax(logits), y).mean()
    cost = cost + nnet.multiclass_hinge_loss(logits, y).mean()
    gw, gv = tensorjit.grad(cost, [w, v])
    updates = [(w, w - 0.1 * gw), (v, v - 0.1 * gv)]
    f = tensorjit.function([x, y], cost, updates=updates, mode="DebugMode")
    xs, ys = r.standard_normal((5, 1, 5, 5)), r.integers(0, 4, 5)
    costs = [float(f(xs, ys)) for _ in range(3)]
    assert costs[2] < costs[0]


# ================================================================ registry / examples
def test_op_classes_listed():
    assert len(nnet.OP_CLASSES) == len(set(nnet.OP_CLASSES)) == 17
    for cls in (conv_mod.Conv2d, pool_mod.Pool, fft_mod.FFT, nnet.Softmax):
        assert cls in nnet.OP_CLASSES
    for name in nnet.__all__:
        assert hasattr(nnet, name), name


def _load_example(name: str):
    path = Path(__file__).resolve().parents[2] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mlp_example_trains():
    mlp = _load_example("mlp")
    losses = mlp.main(epochs=3, n_examples=600, max_batches=10, verbose=False)
    assert len(losses) == 3 and losses[-1] < losses[0]


def test_convnet_example_trains():
    convnet = _load_example("convnet")
    losses = convnet.main(epochs=3, n_examples=400, verbose=False)
    assert len(losses) == 3 and losses[-1] < losses[0]
