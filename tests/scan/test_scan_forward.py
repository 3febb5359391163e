"""``scan`` agrees with plain NumPy loops."""

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.scan import Scan, scan
from tensorjit.tensor.random import RandomStreams

RNG = np.random.default_rng(1234)


def test_cumulative_sum():
    x = T.vector("x")
    s0 = T.scalar("s0")
    out, updates = scan(lambda xt, acc: acc + xt, sequences=[x], outputs_info=[s0])
    assert updates == {}
    f = tensorjit.function([x, s0], out)
    xv = RNG.normal(size=17)
    np.testing.assert_allclose(f(xv, 0.5), 0.5 + np.cumsum(xv))
    assert f(np.zeros(0), 1.0).shape == (0,)


def test_linear_recurrence_two_taps():
    x0 = T.vector("x0")
    a, b = T.scalars("a", "b")
    out, _ = scan(
        lambda xm2, xm1, a, b: a * xm1 + b * xm2,
        outputs_info=[dict(initial=x0, taps=[-2, -1])],
        non_sequences=[a, b],
        n_steps=10,
    )
    f = tensorjit.function([x0, a, b], out)
    got = f(np.array([1.0, 2.0]), 0.7, -0.3)
    hist = [1.0, 2.0]
    for _ in range(10):
        hist.append(0.7 * hist[-1] - 0.3 * hist[-2])
    np.testing.assert_allclose(got, hist[2:])


def test_several_sequences_and_outputs():
    x, y = T.matrices("x", "y")
    h0 = T.vector("h0")

    def step(xt, yt, h):
        new_h = h * 0.5 + xt * yt
        return new_h, (new_h**2).sum()

    (hs, norms), _ = scan(step, sequences=[x, y], outputs_info=[h0, None])
    f = tensorjit.function([x, y, h0], [hs, norms])
    xv, yv = RNG.normal(size=(6, 3)), RNG.normal(size=(8, 3))  # y is longer: 6 steps
    h0v = RNG.normal(size=3)
    got_h, got_n = f(xv, yv, h0v)
    h, want_h, want_n = h0v, [], []
    for t in range(6):
        h = h * 0.5 + xv[t] * yv[t]
        want_h.append(h)
        want_n.append((h**2).sum())
    np.testing.assert_allclose(got_h, want_h)
    np.testing.assert_allclose(got_n, want_n)


def test_sequence_taps():
    x = T.vector("x")
    out, _ = scan(lambda a, b, c: a - 2 * b + c, sequences=[dict(input=x, taps=[-1, 0, 1])])
    xv = RNG.normal(size=9)
    got = tensorjit.function([x], out)(xv)
    np.testing.assert_allclose(got, xv[:-2] - 2 * xv[1:-1] + xv[2:])


def test_sequence_positive_tap_only():
    x = T.vector("x")
    out, _ = scan(lambda nxt, cur: nxt - cur, sequences=[dict(input=x, taps=[2]), x])
    xv = RNG.normal(size=7)
    np.testing.assert_allclose(tensorjit.function([x], out)(xv), xv[2:] - xv[:5])


def test_go_backwards():
    x = T.vector("x")
    s0 = T.scalar("s0")
    out, _ = scan(
        lambda xt, acc: 0.9 * acc + xt, sequences=[x], outputs_info=[s0], go_backwards=True
    )
    xv = RNG.normal(size=8)
    got = tensorjit.function([x, s0], out)(xv, 0.25)
    acc, want = 0.25, []
    for v in xv[::-1]:
        acc = 0.9 * acc + v
        want.append(acc)
    np.testing.assert_allclose(got, want)


def test_n_steps_only_symbolic():
    n = T.iscalar("n")
    a0 = T.vector("a0")
    out, _ = scan(lambda a: a * 2.0 + 1.0, outputs_info=[a0], n_steps=n)
    f = tensorjit.function([n, a0], out)
    got = f(5, np.array([0.0, 1.0]))
    a, want = np.array([0.0, 1.0]), []
    for _ in range(5):
        a = a * 2.0 + 1.0
        want.append(a)
    np.testing.assert_allclose(got, want)
    assert f(0, np.array([0.0, 1.0])).shape == (0, 2)


def test_n_steps_shorter_than_sequence():
    x = T.vector("x")
    out, _ = scan(lambda xt: xt * 3.0, sequences=[x], n_steps=4)
    xv = RNG.normal(size=10)
    np.testing.assert_allclose(tensorjit.function([x], out)(xv), xv[:4] * 3.0)


def test_outputs_without_recurrence():
    x = T.matrix("x")
    out, _ = scan(lambda row: [row.sum(), T.exp(row)], sequences=[x], outputs_info=[None, None])
    xv = RNG.normal(size=(5, 4))
    s, e = tensorjit.function([x], out)(xv)
    np.testing.assert_allclose(s, xv.sum(axis=1))
    np.testing.assert_allclose(e, np.exp(xv))


def test_shared_variables_inside_fn_and_shared_updates():
    w = tensorjit.shared(np.array([1.0, -2.0, 0.5]), name="w")
    count = tensorjit.shared(np.float64(0.0), name="count")
    x = T.matrix("x")

    def step(row):
        return (row * w).sum(), {count: count + row.sum()}

    out, updates = scan(step, sequences=[x])
    assert list(updates) == [count]
    node = out.owner
    assert isinstance(node.op, Scan) and w in node.inputs and count in node.inputs
    f = tensorjit.function([x], out, updates=updates)
    xv = RNG.normal(size=(4, 3))
    np.testing.assert_allclose(f(xv), xv @ w.get_value())
    np.testing.assert_allclose(count.get_value(), xv.sum())
    f(xv)
    np.testing.assert_allclose(count.get_value(), 2 * xv.sum())
    w.set_value(np.zeros(3))  # the loop reads the shared value at call time
    np.testing.assert_allclose(f(xv), np.zeros(4))


def test_outer_variables_used_implicitly_and_non_sequences():
    x = T.vector("x")
    c = T.scalar("c")
    d = T.scalar("d")
    out, _ = scan(lambda xt, dd: xt * c + dd, sequences=[x], non_sequences=[d])
    xv = RNG.normal(size=5)
    np.testing.assert_allclose(tensorjit.function([x, c, d], out)(xv, 2.0, 0.5), xv * 2.0 + 0.5)
    with pytest.raises(ValueError, match="strict"):
        scan(lambda xt, dd: xt * c + dd, sequences=[x], non_sequences=[d], strict=True)


def test_random_numbers_per_step():
    rs = RandomStreams(seed=7)
    x = T.vector("x")
    out, updates = scan(lambda xt: xt + rs.uniform(size=(2,)), sequences=[x])
    assert len(updates) == 1
    f = tensorjit.function([x], out, updates=updates)
    a = f(np.zeros(4))
    assert a.shape == (4, 2)
    assert len({tuple(r) for r in a}) == 4  # a new draw each step
    b = f(np.zeros(4))
    assert not np.allclose(a, b)  # the state advanced after the loop
    rs.seed(7)
    np.testing.assert_array_equal(f(np.zeros(4)), a)
    np.testing.assert_array_equal(f(np.zeros(4)), b)
    # the same draws as drawing 4 times from a generator in that state
    rs.seed(7)
    state = next(iter(updates)).get_value()
    want = np.stack([state.uniform(0.0, 1.0, size=2) for _ in range(4)])
    np.testing.assert_allclose(f(np.zeros(4)), want)


def test_small_rnn_matches_numpy():
    X = T.matrix("X")
    h0 = T.vector("h0")
    W, U = T.matrices("W", "U")
    b = T.vector("b")

    def step(xt, h, W, U, b):
        return T.tanh(T.dot(xt, W) + T.dot(h, U) + b)

    hs, _ = scan(step, sequences=[X], outputs_info=[h0], non_sequences=[W, U, b])
    f = tensorjit.function([X, h0, W, U, b], hs)
    Xv, h0v = RNG.normal(size=(20, 3)), RNG.normal(size=5)
    Wv, Uv, bv = RNG.normal(size=(3, 5)), 0.3 * RNG.normal(size=(5, 5)), RNG.normal(size=5)
    h, want = h0v, []
    for t in range(20):
        h = np.tanh(Xv[t] @ Wv + h @ Uv + bv)
        want.append(h)
    np.testing.assert_allclose(f(Xv, h0v, Wv, Uv, bv), want, rtol=1e-10)


def test_shape_inference_and_errors():
    x = T.matrix("x")
    h0 = T.vector("h0")
    hs, _ = scan(lambda xt, h: h + xt, sequences=[x], outputs_info=[h0])
    f = tensorjit.function([x, h0], hs.shape)
    np.testing.assert_array_equal(f(np.zeros((4, 3)), np.zeros(3)), [4, 3])
    g = tensorjit.function([x, h0], hs)
    with pytest.raises(ValueError, match="shape"):
        g(np.zeros((4, 3)), np.zeros(2))
    with pytest.raises(ValueError, match="outputs_info"):
        scan(lambda xt: [xt, xt], sequences=[x], outputs_info=[None])


def test_steps_returning_their_sequence_rows_keep_every_row():
    """The compiled loop moves one row view along each sequence while nobody else
    holds it; a step that returns its row (as a stacked output and as the carried
    state) must still see every row, in order."""
    X = T.matrix("X")
    h0 = T.vector("h0")
    (rows, last), _ = scan(
        lambda x_t, h: (x_t, x_t[::-1] + 0 * h),
        sequences=[X],
        outputs_info=[None, h0],
    )
    f = tensorjit.function([X, h0], [rows, last, rows.sum(axis=0)])
    (loop,) = [n.op for n in f.fgraph.toposort() if isinstance(n.op, Scan)]
    assert loop.compiled().program_loop() is not None  # the compiled loop runs it
    x = np.arange(12.0).reshape(4, 3)
    got_rows, got_last, total = f(x, np.zeros(3))
    np.testing.assert_array_equal(got_rows, x)
    np.testing.assert_array_equal(got_last[-1], x[-1, ::-1])
    np.testing.assert_array_equal(total, x.sum(axis=0))


def test_strided_and_transposed_invariants_are_read_from_one_contiguous_copy():
    # The recurrence reads u.T (a transposed view) and v[:, ::2] at every step: the loop
    # copies them once, C-ordered, and gives NumPy's values; a one-step loop and
    # contiguous or 1-d values are passed as they are.
    from tensorjit.scan.op import _contiguous_invariants

    h0, u, v = T.matrix("h0"), T.matrix("u"), T.matrix("v")
    out, _ = scan(
        lambda h, u_t, v_s: T.tanh(T.dot(h, u_t) + v_s),
        outputs_info=[h0],
        non_sequences=[u.T, v[:, ::2]],
        n_steps=5,
    )
    f = tensorjit.function([h0, u, v], out)
    h0v, uv, vv = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 4)), RNG.normal(size=(3, 8))
    want, h = [], h0v
    for _ in range(5):
        h = np.tanh(h @ uv.T + vv[:, ::2])
        want.append(h)
    np.testing.assert_allclose(f(h0v, uv, vv), np.array(want), rtol=1e-12)

    transposed, strided, plain, row = uv.T, vv[:, ::2], uv, vv[0]
    copied = _contiguous_invariants([transposed, strided, plain, row], 5)
    assert all(c.flags.c_contiguous for c in copied[:2])
    assert [np.shares_memory(c, w) for c, w in zip(copied, [transposed, strided])] == [0, 0]
    assert copied[2] is plain and copied[3] is row
    np.testing.assert_array_equal(copied[0], transposed)
    assert _contiguous_invariants([transposed], 1)[0] is transposed
