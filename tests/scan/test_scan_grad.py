"""Gradients through ``scan`` (backpropagation through time)."""

import numpy as np

import tensorjit
import tensorjit.tensor as T
from tensorjit.scan import scan
from tensorjit.tensor.random import RandomStreams

RNG = np.random.default_rng(99)


def rnn(X, h0, W, U, **kw):
    hs, _ = scan(
        lambda xt, h, W, U: T.tanh(T.dot(xt, W) + T.dot(h, U)),
        sequences=[X],
        outputs_info=[h0],
        non_sequences=[W, U],
        **kw,
    )
    return hs


def test_rnn_verify_grad_all_inputs():
    pt = [
        RNG.normal(size=(6, 3)),
        RNG.normal(size=4),
        RNG.normal(size=(3, 4)),
        0.4 * RNG.normal(size=(4, 4)),
    ]
    tensorjit.verify_grad(rnn, pt)


def test_cumsum_grad_and_last_step_only():
    def f(x, s0):
        out, _ = scan(lambda xt, acc: acc * 1.1 + xt * xt, sequences=[x], outputs_info=[s0])
        return out[-1]

    tensorjit.verify_grad(f, [RNG.normal(size=7), np.array(0.3)])


def test_taps_grad():
    def f(x, h0, a):
        out, _ = scan(
            lambda xm1, x1, hm2, hm1, a: T.tanh(a * hm1 + xm1 * x1) + 0.5 * hm2,
            sequences=[dict(input=x, taps=[-1, 1])],
            outputs_info=[dict(initial=h0, taps=[-2, -1])],
            non_sequences=[a],
        )
        return out

    tensorjit.verify_grad(f, [RNG.normal(size=(8, 2)), RNG.normal(size=(2, 2)), np.array(0.7)])


def test_go_backwards_and_nit_outputs_grad():
    def f(x, h0, w):
        (hs, ys), _ = scan(
            lambda xt, h, w: (T.sin(h * w + xt), (h * xt).sum()),
            sequences=[x],
            outputs_info=[h0, None],
            non_sequences=[w],
            go_backwards=True,
        )
        return hs.sum() + (ys**2).sum()

    tensorjit.verify_grad(f, [RNG.normal(size=(5, 3)), RNG.normal(size=3), RNG.normal(size=3)])


def test_grad_of_shared_weights_and_n_steps():
    w = tensorjit.shared(np.array([[0.5, -0.2], [0.1, 0.3]]), name="w")
    h0 = T.vector("h0")
    n = T.lscalar("n")
    hs, _ = scan(lambda h: T.tanh(T.dot(w, h)) + 0.1, outputs_info=[h0], n_steps=n)
    cost = (hs**2).sum()
    gw, gh = tensorjit.grad(cost, [w, h0])
    f = tensorjit.function([h0, n], [cost, gw, gh])
    h0v = np.array([0.3, -0.8])
    _, gwv, ghv = f(h0v, 5)

    def numpy_cost(wv, hv):
        total = 0.0
        for _ in range(5):
            hv = np.tanh(wv @ hv) + 0.1
            total += (hv**2).sum()
        return total

    eps = 1e-6
    wv = w.get_value()
    num_w = np.zeros_like(wv)
    for idx in np.ndindex(*wv.shape):
        d = np.zeros_like(wv)
        d[idx] = eps
        num_w[idx] = (numpy_cost(wv + d, h0v) - numpy_cost(wv - d, h0v)) / (2 * eps)
    num_h = np.array(
        [(numpy_cost(wv, h0v + d) - numpy_cost(wv, h0v - d)) / (2 * eps) for d in np.eye(2) * eps]
    )
    np.testing.assert_allclose(gwv, num_w, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ghv, num_h, rtol=1e-5, atol=1e-7)


def test_truncate_gradient():
    X, W, U = T.matrix("X"), T.matrix("W"), T.matrix("U")
    h0 = T.vector("h0")
    cost = rnn(X, h0, W, U, truncate_gradient=3)[-1].sum()
    full = rnn(X, h0, W, U)[-1].sum()
    f = tensorjit.function([X, h0, W, U], tensorjit.grad(cost, [X, h0]) + [tensorjit.grad(full, X)])
    Xv, h0v = RNG.normal(size=(10, 3)), RNG.normal(size=4)
    gX, gh0, gX_full = f(Xv, h0v, RNG.normal(size=(3, 4)), 0.5 * RNG.normal(size=(4, 4)))
    assert np.all(gX[:7] == 0.0)  # beyond the window of 3 steps: zero
    assert np.all(np.abs(gX[7:]).sum(axis=1) > 0)
    np.testing.assert_allclose(gX[7:], gX_full[7:])  # inside the window: exact
    assert np.all(gh0 == 0.0)
    assert np.all(np.abs(gX_full[:7]).sum(axis=1) > 0)


def test_truncate_gradient_longer_than_loop_is_full():
    X, W, U = T.matrix("X"), T.matrix("W"), T.matrix("U")
    h0 = T.vector("h0")
    args = [X, h0, W, U]
    g_t = tensorjit.grad(rnn(*args, truncate_gradient=50).sum(), [X, h0, W, U])
    g_f = tensorjit.grad(rnn(*args).sum(), [X, h0, W, U])
    f = tensorjit.function(args, g_t + g_f)
    vals = f(RNG.normal(size=(5, 3)), RNG.normal(size=4), RNG.normal(size=(3, 4)), np.eye(4) * 0.5)
    for a, b in zip(vals[:4], vals[4:]):
        np.testing.assert_allclose(a, b)


def test_grad_with_random_numbers_in_loop_reuses_the_draws():
    rs = RandomStreams(seed=5)
    h0, W = T.vector("h0"), T.matrix("W")
    hs, updates = scan(
        lambda h, W: T.tanh(T.dot(W, h)) * rs.uniform(size=(3,), low=0.5, high=1.5),
        outputs_info=[h0],
        non_sequences=[W],
        n_steps=4,
    )
    cost = (hs**2).sum()
    f = tensorjit.function([h0, W], [cost, tensorjit.grad(cost, W)], updates=updates)
    h0v, Wv = RNG.normal(size=3), RNG.normal(size=(3, 3))
    rs.seed(11)
    _, g = f(h0v, Wv)
    eps = 1e-6
    num = np.zeros_like(Wv)
    for idx in np.ndindex(3, 3):
        d = np.zeros_like(Wv)
        d[idx] = eps
        rs.seed(11)
        plus = f(h0v, Wv + d)[0]
        rs.seed(11)
        minus = f(h0v, Wv - d)[0]
        num[idx] = (plus - minus) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-7)


def test_rop_through_scan():
    h0, W, V = T.vector("h0"), T.matrix("W"), T.matrix("V")
    hs, _ = scan(lambda h, W: T.tanh(T.dot(W, h)), outputs_info=[h0], non_sequences=[W], n_steps=4)
    jv = tensorjit.function([h0, W, V], tensorjit.Rop(hs, W, V))
    fh = tensorjit.function([h0, W], hs)
    h0v, Wv, Vv = RNG.normal(size=3), RNG.normal(size=(3, 3)), RNG.normal(size=(3, 3))
    eps = 1e-6
    num = (fh(h0v, Wv + eps * Vv) - fh(h0v, Wv - eps * Vv)) / (2 * eps)
    np.testing.assert_allclose(jv(h0v, Wv, Vv), num, rtol=1e-5, atol=1e-7)
