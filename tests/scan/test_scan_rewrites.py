"""Rewrites of ``Scan`` nodes: unused outputs, loop-invariant hoisting, last state only."""

import tracemalloc

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.graph.traversal import toposort
from tensorjit.core.hooks import registries
from tensorjit.scan import Scan, rewriting, scan
from tensorjit.tensor.elemwise import Elemwise

pytestmark = pytest.mark.usefixtures("scan_rewrites")
RNG = np.random.default_rng(2024)
NO_SCAN_REWRITES = tensorjit.FAST_RUN.excluding("scan")
NO_PUSH_OUT = tensorjit.FAST_RUN.excluding("scan_push_out")


def scan_nodes(f):
    return [n for n in f.fgraph.toposort() if isinstance(n.op, Scan)]


def only_scan(f):
    (node,) = scan_nodes(f)
    return node


def inner_nodes(op):
    return toposort(op.inner_outputs, set(op.inner_inputs))


def both(inputs, outputs, **kw):
    return (
        tensorjit.function(inputs, outputs, **kw),
        tensorjit.function(inputs, outputs, mode=NO_SCAN_REWRITES, **kw),
    )


def assert_same(f, g, *args):
    a, b = f(*args), g(*args)
    for x, y in zip(a if isinstance(a, list) else [a], b if isinstance(b, list) else [b]):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12)


def has_scalar_op(nodes, name):
    for n in nodes:
        if isinstance(n.op, Elemwise) and name in str(n.op).lower():
            return True
    return False


# ======================================================================= registration
def test_rewrites_registered_with_tags():
    db = registries().rewrites
    for name, _, phase, tags in rewriting.REWRITES:
        entry = db.entries[name]
        assert {"fast_run", "scan", phase, *tags} <= entry.tags


# ======================================================================= unused outputs
def test_unused_outputs_are_removed():
    x, h0 = T.matrix("x"), T.vector("h0")
    (hs, ys, zs), _ = scan(
        lambda xt, h: (T.tanh(h + xt), (h * xt).sum(), T.exp(xt)),
        sequences=[x],
        outputs_info=[h0, None, None],
    )
    f, g = both([x, h0], ys)
    node, ref = only_scan(f), only_scan(g)
    assert len(ref.outputs) == 3
    # ys reads the recurrent h, so hs's recurrence stays; zs goes.
    assert len(node.outputs) == 2
    assert node.op.n_mit == 1 and node.op.n_nit == 1
    assert len(inner_nodes(node.op)) < len(inner_nodes(ref.op))
    assert_same(f, g, RNG.normal(size=(6, 3)), RNG.normal(size=3))


def test_unused_recurrence_and_input_are_removed():
    x, h0, w, v = T.matrix("x"), T.vector("h0"), T.vector("w"), T.vector("v")
    (hs, ys), _ = scan(
        lambda xt, h, w, v: (T.tanh(h * v + xt), xt * w),
        sequences=[x],
        outputs_info=[h0, None],
        non_sequences=[w, v],
    )
    f, g = both([x, h0, w, v], ys, on_unused_input="ignore")
    assert not scan_nodes(f)  # what is left, x_t * w, runs before the loop: no loop at all
    f = tensorjit.function([x, h0, w, v], ys, on_unused_input="ignore", mode=NO_PUSH_OUT)
    node = only_scan(f)
    assert node.op.n_mit == 0 and node.op.n_nit == 1
    assert node.op.n_nonseqs == 1  # v only fed the dropped recurrence
    args = [RNG.normal(size=(5, 2)), RNG.normal(size=2), RNG.normal(size=2), RNG.normal(size=2)]
    assert_same(f, g, *args)


def test_shared_updates_stay():
    acc = tensorjit.shared(np.zeros(3), name="acc")
    x = T.matrix("x")
    ys, upd = scan(lambda xt: (2 * xt, {acc: acc + xt}), sequences=[x])
    f = tensorjit.function([x], ys, updates=upd)
    g = tensorjit.function([x], ys, updates=upd, mode=NO_SCAN_REWRITES)
    xv = RNG.normal(size=(4, 3))
    np.testing.assert_allclose(f(xv), g(xv))
    np.testing.assert_allclose(acc.get_value(), 2 * xv.sum(0))
    # the state only accumulates: its sum is computed after the loop, as is 2 * x_t
    assert not scan_nodes(f)
    # without the updates the state is dropped from the loop
    h = tensorjit.function([x], ys, mode=NO_PUSH_OUT)
    assert only_scan(h).op.n_carry == 0
    np.testing.assert_allclose(h(xv), 2 * xv)


# ======================================================================= hoisting
def test_invariant_nodes_are_hoisted():
    x, h0, W = T.matrix("x"), T.vector("h0"), T.matrix("W")
    hs, _ = scan(
        lambda xt, h, W: T.tanh(xt + T.dot(h, T.exp(W) * 2)),
        sequences=[x],
        outputs_info=[h0],
        non_sequences=[W],
    )
    f, g = both([x, h0, W], hs)
    node, ref = only_scan(f), only_scan(g)
    assert has_scalar_op(inner_nodes(ref.op), "exp")
    assert not has_scalar_op(inner_nodes(node.op), "exp")
    outside = [n for n in f.fgraph.toposort() if not isinstance(n.op, Scan)]
    assert any("exp" in str(n.op).lower() for n in outside)
    assert len(inner_nodes(node.op)) < len(inner_nodes(ref.op))
    assert_same(f, g, RNG.normal(size=(7, 3)), RNG.normal(size=3), 0.3 * RNG.normal(size=(3, 3)))


def test_hoisting_invariant_output():
    w = T.vector("w")
    ys, _ = scan(lambda w: T.sin(w) + 1, non_sequences=[w], n_steps=4)
    f, g = both([w], ys)
    assert not inner_nodes(only_scan(f).op)
    assert_same(f, g, RNG.normal(size=3))


# ======================================================================= last state only
def rnn_last(x, h0, W):
    hs, _ = scan(
        lambda xt, h, W: T.tanh(xt + T.dot(h, W)),
        sequences=[x],
        outputs_info=[h0],
        non_sequences=[W],
    )
    return hs


def test_only_last_state_kept():
    x, h0, W = T.matrix("x"), T.vector("h0"), T.matrix("W")
    hs = rnn_last(x, h0, W)
    f, g = both([x, h0, W], hs[-1])
    node, ref = only_scan(f), only_scan(g)
    assert ref.op.n_mit == 1 and ref.outputs[0].type.ndim == 2
    assert node.op.n_mit == 0 and node.op.n_carry == 1
    assert node.outputs[0].type.ndim == 1  # a (3,) state, not an (n + 1, 3) history
    assert f.fgraph.outputs[0].type == g.fgraph.outputs[0].type
    assert_same(f, g, RNG.normal(size=(9, 3)), RNG.normal(size=3), 0.4 * RNG.normal(size=(3, 3)))


def test_history_used_keeps_history():
    x, h0, W = T.matrix("x"), T.vector("h0"), T.matrix("W")
    hs = rnn_last(x, h0, W)
    f, g = both([x, h0, W], [hs[-1], hs.sum()])
    assert only_scan(f).op.n_mit == 1
    assert_same(f, g, RNG.normal(size=(4, 3)), RNG.normal(size=3), RNG.normal(size=(3, 3)))


def test_last_state_with_two_taps():
    h0 = T.vector("h0")
    n = T.lscalar("n")
    fib, _ = scan(
        lambda a, b: a + b,
        outputs_info=[dict(initial=h0, taps=[-2, -1])],
        n_steps=n,
    )
    f, g = both([h0, n], fib[-1])
    node = only_scan(f)
    assert node.op.n_mit == 0 and node.op.n_carry == 1
    h0v = np.array([0.0, 1.0])
    assert f(h0v, 10) == 89.0
    assert_same(f, g, RNG.normal(size=2), 7)


def test_last_state_static_shape():
    h0 = T.tensor(dtype="float64", shape=(3,), name="h0")
    hs, _ = scan(lambda h: T.tanh(h) * 0.5 + 1, outputs_info=[h0], n_steps=5)
    f, g = both([h0], hs[-1])
    assert only_scan(f).op.n_mit == 0
    assert f.fgraph.outputs[0].type == g.fgraph.outputs[0].type
    assert_same(f, g, RNG.normal(size=3))


def test_last_state_saves_memory():
    h0 = T.vector("h0")
    n_steps, width = 2000, 500  # the full history would be 8 MB
    hs, _ = scan(lambda h: h * 0.5 + 1.0, outputs_info=[h0], n_steps=n_steps)
    f, g = both([h0], hs[-1])
    h0v = np.zeros(width)

    def peak(fn):
        fn(h0v)  # compile the inner function outside the measurement
        tracemalloc.start()
        try:
            out = fn(h0v)
            return tracemalloc.get_traced_memory()[1], out
        finally:
            tracemalloc.stop()

    small, a = peak(f)
    big, b = peak(g)
    np.testing.assert_allclose(a, b)
    assert big > n_steps * width * 8
    assert small < big / 10


# ======================================================================= gradients
def test_verify_grad_through_rewritten_forward():
    def cost(x, h0, W):
        hs, _ = scan(
            lambda xt, h, W: T.tanh(xt + T.dot(h, T.exp(W) * 0.5)),
            sequences=[x],
            outputs_info=[h0],
            non_sequences=[W],
        )
        return hs[-1]

    pt = [RNG.normal(size=(5, 3)), RNG.normal(size=3), 0.3 * RNG.normal(size=(3, 3))]
    tensorjit.verify_grad(cost, pt)


def test_grad_graph_same_values_with_and_without_rewrites():
    x, h0, W = T.matrix("x"), T.vector("h0"), T.matrix("W")
    hs = rnn_last(x, h0, W)
    cost = (hs[-1] ** 2).sum()
    grads = tensorjit.grad(cost, [h0, W])
    f, g = both([x, h0, W], [cost, *grads])
    # the gradient reads the history: the forward scan keeps it
    assert all(n.op.n_mit + n.op.n_nit + n.op.n_carry >= 1 for n in scan_nodes(f))
    fired = f.rewrite_stats.applied
    assert fired["scan_remove_unused_outputs"] + fired["scan_hoist_invariants"] >= 1
    assert_same(f, g, RNG.normal(size=(6, 3)), RNG.normal(size=3), 0.4 * RNG.normal(size=(3, 3)))


def test_last_state_zero_steps_like_unrewritten():
    h0, n = T.vector("h0"), T.lscalar("n")
    hs, _ = scan(lambda h: h * 0.5 + 1.0, outputs_info=[h0], n_steps=n)
    f, g = both([h0, n], hs[-1])
    assert only_scan(f).op.n_mit == 0
    assert_same(f, g, np.ones(2), 3)
    for fn in (f, g):  # no step ran: ``hs`` is empty, so ``hs[-1]`` fails in both
        with pytest.raises(IndexError):
            fn(np.ones(2), 0)
    full = hs.owner.inputs[0]  # the buffer with the initial row: its last row is h0
    f, g = both([h0, n], full[-1])
    assert only_scan(f).op.n_mit == 0
    np.testing.assert_allclose(f(np.ones(2), 0), g(np.ones(2), 0))
