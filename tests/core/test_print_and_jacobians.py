"""The Print op, and Lop / Rop / jacobian / hessian against NumPy and finite differences."""

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.compile.function import UnusedInputError
from tensorjit.core.gradient import Lop as core_Lop
from tensorjit.core.gradient import Rop as core_Rop
from tensorjit.gradient import DisconnectedInputError, Lop, Rop, hessian, jacobian
from tensorjit.printing import Print


def vec(n, name):
    return T.tensor("float64", shape=(n,), name=name)


def numeric_jacobian(fn, x, eps=1e-6):
    """d fn / d x by central differences, shape fn(x).shape + x.shape."""
    x = np.asarray(x, dtype=float)
    f0 = np.asarray(fn(x))
    jac = np.zeros(f0.shape + x.shape)
    for idx in np.ndindex(*x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        jac[(...,) + idx] = (np.asarray(fn(x + d)) - np.asarray(fn(x - d))) / (2 * eps)
    return jac


RNG = np.random.default_rng(0)
W0 = RNG.normal(size=(2, 3))
X0 = RNG.normal(size=3)


# ====================================================================== Print
def test_print_returns_its_input_and_prints_at_run_time(capsys):
    x = T.vector("x")
    y = Print("x is")(x) * 2
    f = tensorjit.function([x], y)
    assert capsys.readouterr().out == ""  # nothing printed while compiling
    out = f(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(out, [2.0, 4.0, 6.0])
    assert capsys.readouterr().out == "x is __str__ = [1. 2. 3.]\n"
    f(np.array([5.0]))
    assert capsys.readouterr().out == "x is __str__ = [5.]\n"


def test_print_attrs(capsys):
    x = T.matrix("x")
    f = tensorjit.function([x], Print("m", attrs=("shape", "sum"))(x))
    f(np.ones((2, 3)))
    assert capsys.readouterr().out == "m shape = (2, 3)\nm sum = 6.0\n"


def test_print_is_a_view_never_folded_and_gradient_passes(capsys):
    op = Print("c")
    assert op.view_map == {0: [0]} and op.constant_folding is False
    folded = tensorjit.function([], op(T.constant(np.arange(3.0))) + 1.0)
    capsys.readouterr()
    np.testing.assert_array_equal(folded(), [1.0, 2.0, 3.0])
    assert capsys.readouterr().out == "c __str__ = [0. 1. 2.]\n"

    x = T.vector("x")
    g = tensorjit.grad((Print("x")(x) ** 2).sum(), x)
    f = tensorjit.function([x], g)
    np.testing.assert_allclose(f(np.array([1.0, -2.0])), [2.0, -4.0])
    assert "x __str__ = [ 1. -2.]" in capsys.readouterr().out


def test_print_output_does_not_alias_the_argument_and_passes_debugmode(capsys):
    x = T.vector("x")
    for mode in ("FAST_RUN", "FAST_COMPILE", "DebugMode"):
        f = tensorjit.function([x], Print("p")(x), mode=mode)
        arg = np.array([1.0, 2.0])
        out = f(arg)
        np.testing.assert_array_equal(out, arg)
        assert not np.shares_memory(out, arg)
        assert "p __str__ = [1. 2.]" in capsys.readouterr().out


def test_print_custom_function_and_equality():
    seen = []
    x = T.vector("x")
    op = Print("msg", global_fn=lambda op, v: seen.append((op.message, v.copy())))
    tensorjit.function([x], op(x))(np.array([3.0]))
    assert seen[0][0] == "msg" and seen[0][1].tolist() == [3.0]
    assert Print("a") == Print("a") and Print("a") != Print("b")
    assert Print("a", attrs="shape").attrs == ("shape",)


# ====================================================================== Lop / Rop
def test_lop_is_vector_jacobian_product():
    W, x, u = T.matrix("W"), vec(3, "x"), T.vector("u")
    y = T.tanh(T.dot(W, x))
    f = tensorjit.function([W, x, u], [Lop(y, x, u), *Lop(y, [W, x], u)])
    u0 = np.array([0.3, -1.2])
    lx, lW, lx2 = f(W0, X0, u0)
    J = numeric_jacobian(lambda xx: np.tanh(W0 @ xx), X0)
    JW = numeric_jacobian(lambda ww: np.tanh(ww @ X0), W0)
    np.testing.assert_allclose(lx, u0 @ J, rtol=1e-6)
    np.testing.assert_allclose(lx2, u0 @ J, rtol=1e-6)
    np.testing.assert_allclose(lW, np.tensordot(u0, JW, axes=1), rtol=1e-6)
    assert core_Lop is Lop


def test_rop_is_jacobian_vector_product():
    W, x, v = T.matrix("W"), T.vector("x"), T.vector("v")
    y = T.tanh(T.dot(W, x))
    f = tensorjit.function([W, x, v], Rop(y, x, v))
    v0 = np.array([1.0, 0.5, -2.0])
    J = numeric_jacobian(lambda xx: np.tanh(W0 @ xx), X0)
    np.testing.assert_allclose(f(W0, X0, v0), J @ v0, rtol=1e-6)
    # finite difference along v directly
    eps = 1e-6
    fd = (np.tanh(W0 @ (X0 + eps * v0)) - np.tanh(W0 @ (X0 - eps * v0))) / (2 * eps)
    np.testing.assert_allclose(f(W0, X0, v0), fd, rtol=1e-6)
    assert core_Rop is Rop


def test_rop_several_wrt_and_several_outputs():
    W, x = T.matrix("W"), T.vector("x")
    vW, vx = T.matrix("vW"), T.vector("vx")
    y = T.tanh(T.dot(W, x))
    z = (x**3).sum()
    ry, rz = Rop([y, z], [W, x], [vW, vx])
    f = tensorjit.function([W, x, vW, vx], [ry, rz])
    vW0, vx0 = RNG.normal(size=(2, 3)), RNG.normal(size=3)
    got_y, got_z = f(W0, X0, vW0, vx0)
    JW = numeric_jacobian(lambda ww: np.tanh(ww @ X0), W0)
    Jx = numeric_jacobian(lambda xx: np.tanh(W0 @ xx), X0)
    expected_y = np.tensordot(JW, vW0, axes=2) + Jx @ vx0
    np.testing.assert_allclose(got_y, expected_y, rtol=1e-6)
    np.testing.assert_allclose(got_z, np.dot(3 * X0**2, vx0), rtol=1e-10)
    assert got_z.shape == ()


def test_rop_of_an_elementwise_cube_and_of_a_disconnected_wrt():
    x, v, other = T.vector("x"), T.vector("v"), T.vector("other")
    f = tensorjit.function([x, v], Rop(x**3, x, v))
    x0, v0 = np.array([1.0, -2.0, 0.5]), np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(f(x0, v0), 3 * x0**2 * v0)
    # an affine function: the result does not depend on the dummy variable at all
    g = tensorjit.function([x, v], Rop(2 * x + 1, x, v), on_unused_input="ignore")
    np.testing.assert_allclose(g(x0, v0), 2 * v0)
    with pytest.raises(DisconnectedInputError):
        Rop(x * 2, other, v)
    zero = Rop(x * 2, other, v, disconnected_inputs="ignore")
    h = tensorjit.function([x], zero)
    np.testing.assert_array_equal(h(x0), np.zeros(3))
    with pytest.raises(ValueError, match="eval_points"):
        Rop(x, [x, other], [v])


# ====================================================================== jacobian / hessian
def test_jacobian_of_tanh_wx():
    W = T.tensor("float64", shape=(2, 3), name="W")
    x = vec(3, "x")
    y = T.tanh(T.dot(W, x))
    jx = jacobian(y, x)
    jW, jx2 = jacobian(y, [W, x])
    f = tensorjit.function([W, x], [jx, jW, jx2])
    got_x, got_W, got_x2 = f(W0, X0)
    assert got_x.shape == (2, 3) and got_W.shape == (2, 2, 3)
    np.testing.assert_allclose(got_x, numeric_jacobian(lambda xx: np.tanh(W0 @ xx), X0), rtol=1e-6)
    np.testing.assert_allclose(got_W, numeric_jacobian(lambda w: np.tanh(w @ X0), W0), rtol=1e-6)
    np.testing.assert_array_equal(got_x, got_x2)
    analytic = (1 - np.tanh(W0 @ X0) ** 2)[:, None] * W0
    np.testing.assert_allclose(got_x, analytic, rtol=1e-12)


def test_jacobian_of_cube_scalar_and_matrix_expressions():
    x = vec(4, "x")
    x0 = np.array([1.0, -1.0, 2.0, 0.5])
    f = tensorjit.function([x], [jacobian(x**3, x), jacobian((x**3).sum(), x)])
    jac, grad = f(x0)
    np.testing.assert_allclose(jac, np.diag(3 * x0**2))
    np.testing.assert_allclose(grad, 3 * x0**2)
    M = T.tensor("float64", shape=(2, 2), name="M")
    y = T.tensor("float64", shape=(3,), name="y")
    outer = T.outer(M.flatten(), y).reshape((2, 2, 3)).sum(axis=2)  # M * sum(y)
    jm = tensorjit.function([M, y], jacobian(outer, y))
    m0 = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(jm(m0, np.ones(3)), np.repeat(m0.reshape(4, 1), 3, axis=1))


def test_jacobian_needs_a_static_length_and_checks_connection():
    x = T.vector("x")
    with pytest.raises(ValueError, match="static length"):
        jacobian(x**2, x)
    with pytest.raises(ValueError, match="static length"):
        hessian((x**2).sum(), x)
    a, b = vec(2, "a"), vec(2, "b")
    with pytest.raises(DisconnectedInputError):
        jacobian(a * 2, b)
    with pytest.warns(UserWarning, match="disconnected"):
        warned = jacobian(a * 2, b, disconnected_inputs="warn")
    f = tensorjit.function([a, b], warned, on_unused_input="ignore")
    np.testing.assert_array_equal(f(np.ones(2), np.ones(2)), np.zeros((2, 2)))
    # an element that does not depend on wrt gives a zero row, not an error
    partly = T.stack([a[0] * 3.0, T.constant(1.0)])
    g = tensorjit.function([a], jacobian(partly, a), on_unused_input="ignore")
    np.testing.assert_array_equal(g(np.ones(2)), [[3.0, 0.0], [0.0, 0.0]])
    with pytest.raises(UnusedInputError):
        tensorjit.function([a, b], jacobian(a * 2, b, disconnected_inputs="ignore"))


def test_hessian_of_cube_and_quadratic():
    x = vec(3, "x")
    A0 = RNG.normal(size=(3, 3))
    A = T.constant(A0)
    quad = T.dot(x, T.dot(A, x))
    h_cube, h_quad = hessian((x**3).sum(), x), hessian(quad, [x])[0]
    h_lin = hessian((x * 2.0).sum(), x)
    f = tensorjit.function([x], [h_cube, h_quad, h_lin])
    hc, hq, hl = f(X0)
    np.testing.assert_allclose(hc, np.diag(6 * X0))
    np.testing.assert_allclose(hq, A0 + A0.T, rtol=1e-12)
    np.testing.assert_array_equal(hl, np.zeros((3, 3)))
    # against finite differences of the (NumPy) gradient of tanh(W x) . c
    c0 = np.array([0.7, -0.4])
    cost = T.dot(T.tanh(T.dot(T.constant(W0), x)), T.constant(c0))
    h = tensorjit.function([x], hessian(cost, x))(X0)

    def np_grad(xx):
        return W0.T @ ((1 - np.tanh(W0 @ xx) ** 2) * c0)

    np.testing.assert_allclose(h, numeric_jacobian(np_grad, X0), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(h, h.T, rtol=1e-12)
    with pytest.raises(TypeError, match="vectors"):
        hessian((x**2).sum(), T.matrix("m"))


def test_gradient_module_exports():
    import tensorjit.gradient as G

    for name in ("Lop", "Rop", "jacobian", "hessian", "grad", "verify_grad"):
        assert name in G.__all__ and callable(getattr(G, name))
