"""Work moved out of ``Scan`` loops (``tensorjit.scan.pushout``): before the loop
(sequence-only nodes), after it (outputs computed from recorded rows) and accumulations
(summed, or one product for accumulated outer products). Every case is checked against
the same graph compiled without these rewrites."""

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.graph.traversal import toposort
from tensorjit.scan import Scan, scan
from tensorjit.tensor.math import Dot

pytestmark = pytest.mark.usefixtures("scan_rewrites")
RNG = np.random.default_rng(7)
NO_PUSH_OUT = tensorjit.FAST_RUN.excluding("scan_push_out")


def both(inputs, outputs, **kw):
    return (
        tensorjit.function(inputs, outputs, **kw),
        tensorjit.function(inputs, outputs, mode=NO_PUSH_OUT, **kw),
    )


def scans(f):
    return [n for n in f.fgraph.toposort() if isinstance(n.op, Scan)]


def inner_ops(node):
    return [type(n.op).__name__ for n in toposort(node.op.inner_outputs, node.op.inner_inputs)]


def assert_same(f, g, *args, rtol=1e-10):
    a, b = f(*args), g(*args)
    for x, y in zip(a if isinstance(a, list) else [a], b if isinstance(b, list) else [b]):
        assert np.shape(x) == np.shape(y)
        np.testing.assert_allclose(x, y, rtol=rtol, atol=1e-12)


def elman(dtype="float64"):
    """The tutorials' RNN: sigmoid state, a softmax per step, its gradient."""
    x, h0 = T.matrix("x", dtype=dtype), T.vector("h0", dtype=dtype)
    wx, wh = T.matrix("wx", dtype=dtype), T.matrix("wh", dtype=dtype)
    w, b = T.matrix("w", dtype=dtype), T.vector("b", dtype=dtype)
    y = T.lvector("y")

    def step(x_t, h):
        h_t = T.nnet.sigmoid(T.dot(x_t, wx) + T.dot(h, wh))
        return [h_t, T.nnet.softmax(T.dot(h_t, w) + b)]

    (hs, p), _ = scan(step, sequences=[x], outputs_info=[h0, None])
    cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
    params = [wx, wh, w, b, h0]
    return [x, y, *params], [cost, hs, *tensorjit.grad(cost, params)]


def elman_values(n, dtype="float64", n_in=3, hidden=4, classes=5):
    def r(*shape):
        return (0.5 * RNG.standard_normal(shape)).astype(dtype)

    return [r(n, n_in), RNG.integers(0, classes, n), r(n_in, hidden), r(hidden, hidden),
            r(hidden, classes), r(classes), r(hidden)]  # fmt: skip


def test_rnn_loops_keep_only_the_recurrence():
    inputs, outputs = elman()
    f, g = both(inputs, outputs)
    forward, backward = scans(f)
    # forward: the input product runs before the loop, the softmax after it
    assert forward.op.n_nit == 0 and inner_ops(forward).count("Dot") == 1
    assert "Softmax" not in inner_ops(forward)
    # backward: the weights' gradients are products after the loop, not accumulators
    assert backward.op.n_carry == 1  # only the adjoint of the previous state
    assert inner_ops(backward).count("Dot") == 1
    outside = [n for n in f.fgraph.toposort() if not isinstance(n.op, Scan)]
    assert sum(type(n.op).__name__ in ("Dot", "Gemm") for n in outside) >= 4
    for n in (9, 1):
        assert_same(f, g, *elman_values(n))


def test_rnn_float32_and_zero_steps():
    inputs, outputs = elman("float32")
    f, g = both(inputs, outputs)
    assert_same(f, g, *elman_values(6, "float32"), rtol=2e-4)
    empty = elman_values(0, "float32")
    with np.errstate(all="ignore"):  # the mean over no steps is NaN, as NumPy's
        assert np.isnan(g(*empty)[0])
        assert_same(f, g, *empty)
    # the gradients alone are defined for no step: zeros, shaped like the weights
    x, h0, wh = T.matrix("x"), T.vector("h0"), T.matrix("wh")
    hs, _ = scan(lambda x_t, h: T.tanh(x_t + T.dot(h, wh)), sequences=[x], outputs_info=[h0])
    grads = tensorjit.grad(hs.sum(), [wh, h0])
    f, g = both([x, h0, wh], grads)
    for n in (0, 3):
        assert_same(f, g, RNG.standard_normal((n, 4)), RNG.standard_normal(4),
                    RNG.standard_normal((4, 4)) / 2)  # fmt: skip


def test_accumulated_outer_product_becomes_one_product():
    x, z = T.matrix("x"), T.matrix("z")
    acc0 = T.matrix("acc0")
    total, _ = scan(
        lambda x_t, z_t, acc: acc + T.outer(T.tanh(x_t), z_t * 2),
        sequences=[x, z],
        outputs_info=[acc0],
    )
    f, g = both([x, z, acc0], total[-1])
    assert not scans(f)  # nothing is left to loop over
    assert any(isinstance(n.op, Dot) or "Gemm" in str(n.op) for n in f.fgraph.toposort())
    args = [RNG.standard_normal((6, 3)), RNG.standard_normal((6, 2)), RNG.standard_normal((3, 2))]
    assert_same(f, g, *args)


def test_accumulation_of_a_state_dependent_term_records_it():
    x, h0, acc0 = T.matrix("x"), T.vector("h0"), T.vector("acc0")
    (hs, acc), _ = scan(
        lambda x_t, h, a: [T.tanh(x_t + h), a + T.exp(h) * 0.5],
        sequences=[x],
        outputs_info=[h0, acc0],
    )
    f, g = both([x, h0, acc0], [hs, acc[-1]])
    (node,) = scans(f)
    assert node.op.n_carry == 0
    assert_same(f, g, RNG.standard_normal((5, 3)), RNG.standard_normal(3), np.ones(3))


def test_accumulator_read_inside_the_loop_stays():
    x, acc0 = T.matrix("x"), T.vector("acc0")
    (accs, ys), _ = scan(
        lambda x_t, a: [a + x_t, T.sin(a)],  # the running sum is read by another output
        sequences=[x],
        outputs_info=[acc0, None],
    )
    f, g = both([x, acc0], [accs[-1], ys])
    assert scans(f)
    assert_same(f, g, RNG.standard_normal((4, 2)), np.zeros(2))


def test_sequences_longer_than_the_steps_and_backwards():
    x, w, h0, n = T.matrix("x"), T.matrix("w"), T.vector("h0"), T.lscalar("n")
    for backwards in (False, True):
        hs, _ = scan(
            lambda x_t, h: T.tanh(T.dot(x_t, w) * 2 + h),
            sequences=[x],
            outputs_info=[h0],
            n_steps=n,
            go_backwards=backwards,
        )
        f, g = both([x, w, h0, n], [hs, tensorjit.grad(hs.sum(), w)])
        (fwd, *_) = scans(f)
        assert "Dot" not in inner_ops(fwd)
        args = [RNG.standard_normal((7, 3)), RNG.standard_normal((3, 2)), RNG.standard_normal(2)]
        for steps in (4, 7, 0):
            assert_same(f, g, *args, steps)


def test_output_after_the_loop_from_two_taps():
    x, h0 = T.matrix("x"), T.matrix("h0")

    def step(x_t, h2, h1):
        h = T.tanh(x_t + h1 - 0.5 * h2)
        return [h, T.exp(h)]

    (hs, ys), _ = scan(
        step,
        sequences=[x],
        outputs_info=[{"initial": h0, "taps": [-2, -1]}, None],
    )
    f, g = both([x, h0], [hs, ys])
    (node,) = scans(f)
    assert node.op.n_nit == 0
    assert_same(f, g, RNG.standard_normal((5, 3)), RNG.standard_normal((2, 3)))


def test_output_sharing_nodes_with_the_state_stays_in_the_loop():
    x, h0 = T.matrix("x"), T.vector("h0")

    def step(x_t, h):
        pre = T.dot(h, T.ones((3, 3))) + x_t  # needed by the state and by the output
        return [T.tanh(pre), pre * 2]

    (hs, ys), _ = scan(step, sequences=[x], outputs_info=[h0, None])
    f, g = both([x, h0], [hs, ys])
    (node,) = scans(f)
    assert node.op.n_nit == 1
    assert_same(f, g, RNG.standard_normal((4, 3)), RNG.standard_normal(3))


def test_unbatchable_nodes_stay():
    x, h0 = T.matrix("x"), T.vector("h0")
    hs, _ = scan(
        lambda x_t, h: T.tanh(h + T.sort(x_t)),  # no batching rule for sort
        sequences=[x],
        outputs_info=[h0],
    )
    f, g = both([x, h0], hs)
    (node,) = scans(f)
    assert any("Sort" in op for op in inner_ops(node))
    assert_same(f, g, RNG.standard_normal((4, 3)), RNG.standard_normal(3))


def test_truncated_gradient_and_verify_grad():
    x, h0, w = T.matrix("x"), T.vector("h0"), T.matrix("w")
    hs, _ = scan(
        lambda x_t, h: T.tanh(T.dot(x_t, w) + T.dot(h, w)),
        sequences=[x],
        outputs_info=[h0],
        truncate_gradient=3,
    )
    cost = (hs**2).sum()
    f, g = both([x, h0, w], tensorjit.grad(cost, [w, h0, x]))
    assert_same(f, g, RNG.standard_normal((6, 3)), RNG.standard_normal(3),
                RNG.standard_normal((3, 3)) / 2)  # fmt: skip

    def full_cost(x, h0, w):
        hs, _ = scan(
            lambda x_t, h: T.nnet.softmax(T.dot(x_t, w) + h),
            sequences=[x],
            outputs_info=[h0],
        )
        return (hs * T.arange(3)).sum()

    tensorjit.verify_grad(
        full_cost,
        [RNG.standard_normal((4, 3)), RNG.standard_normal(3), RNG.standard_normal((3, 3))],
    )


def test_rows_that_lost_a_static_length_leave_the_loop_alone():
    """An output with a kept axis of length 1 (static inside the step, unknown in the
    loop's rows) that a dimshuffle drops: no batched form, the loop stays as it was."""
    x, h0 = T.matrix("x"), T.vector("h0")

    def step(x_t, h):
        hn = T.tanh(h + x_t).sum(keepdims=True)
        return [hn, T.exp(hn.dimshuffle(()))]

    (hs, ys), _ = scan(step, sequences=[x], outputs_info=[h0, None])
    f, g = both([x, h0], [hs, ys])
    assert_same(f, g, RNG.standard_normal((4, 1)), np.ones(1))


def test_float32_terms_accumulate_in_the_float64_state():
    x = T.matrix("x", dtype="float32")
    acc0 = T.vector("acc0", dtype="float64")
    total, _ = scan(lambda x_t, a: a + T.cast(x_t * 3, "float64"), sequences=[x],
                    outputs_info=[acc0])  # fmt: skip
    f, g = both([x, acc0], total[-1])
    xv = (RNG.standard_normal((500, 3)) * 1e4).astype("float32")
    assert_same(f, g, xv, np.zeros(3), rtol=1e-13)


def test_a_minibatch_per_step_is_one_product_before_the_loop():
    """x_t a (batch x inputs) matrix: dot(x_t, W) for all t is one product of the
    sequence's rows (reshaped), a node with no batched form (dot(h, U) reads the
    state) does not stop the others from leaving, and the backward loop's weight
    gradients become products after it."""
    x, h0 = T.tensor3("x"), T.matrix("h0")
    w, u, v = T.matrix("w"), T.matrix("u"), T.vector("v")

    def step(x_t, h):
        return T.tanh(T.dot(x_t, w) + T.dot(h, u) + T.dot(x_t, v).dimshuffle(0, "x"))

    hs, _ = scan(step, sequences=[x], outputs_info=[h0])
    cost = (hs**2).sum()
    f, g = both([x, h0, w, u, v], [cost, *tensorjit.grad(cost, [w, u, h0, v])])
    forward, backward = scans(f)
    assert inner_ops(forward).count("Dot") == 1
    # the weights' gradients sum_t x_t^T d_t are products of the stacked rows, after it
    assert backward.op.n_carry == 1 and inner_ops(backward).count("Dot") == 1
    args = [RNG.standard_normal((7, 5, 3)), RNG.standard_normal((5, 4)),
            RNG.standard_normal((3, 4)) / 2, RNG.standard_normal((4, 4)) / 2,
            RNG.standard_normal(3)]  # fmt: skip
    assert_same(f, g, *args)
    assert_same(f, g, args[0][:0], *args[1:])
