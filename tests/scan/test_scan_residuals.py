"""The forward loop records what its gradient's loop reads (residuals), and one loop
runs where a gradient extended it (``scan_merge_subsumed``)."""

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.graph.traversal import clone_replace, toposort
from tensorjit.scan import Scan, scan
from tensorjit.scan.residuals import residuals
from tensorjit.tensor.math import Dot

pytestmark = pytest.mark.usefixtures("scan_rewrites")
RNG = np.random.default_rng(7)


def gru_cost(x, h0, W, U, b):
    """A GRU-like cell: gates from products with the state, the state's mean square."""

    def step(xt, h, W, U, b):
        z = T.nnet.sigmoid(T.dot(xt, W) + T.dot(h, U) + b)
        c = T.tanh(T.dot(xt, W) + T.dot(z * h, U))
        return (1 - z) * h + z * c

    hs, _ = scan(step, sequences=[x], outputs_info=[h0], non_sequences=[W, U, b])
    return (hs**2).mean()


def symbols():
    return T.tensor3("x"), T.matrix("h0"), T.matrix("W"), T.matrix("U"), T.vector("b")


def values():
    return [
        RNG.normal(size=(7, 3, 4)),
        RNG.normal(size=(3, 5)),
        0.5 * RNG.normal(size=(4, 5)),
        0.4 * RNG.normal(size=(5, 5)),
        RNG.normal(size=5),
    ]


def compiled(record: bool, excluded: tuple = ()):
    with tensorjit.config.change_flags(scan_record_residuals=record, excluded_rewrites=excluded):
        inputs = symbols()
        cost = gru_cost(*inputs)
        grads = tensorjit.grad(cost, list(inputs[1:]))
        return tensorjit.function(list(inputs), [cost, *grads])


def scans(f):
    return [n for n in f.fgraph.toposort() if isinstance(n.op, Scan)]


def products(f) -> int:
    """Dot nodes in the function's graph and in its loops' steps."""
    count = 0
    for node in f.fgraph.toposort():
        count += isinstance(node.op, Dot)
        if isinstance(node.op, Scan):
            inner = toposort(node.op.inner_outputs, set(node.op.inner_inputs))
            count += sum(isinstance(n.op, Dot) for n in inner)
    return count


def test_gradients_agree_with_recomputing_and_with_finite_differences():
    args = values()
    recorded, recomputed = compiled(True)(*args), compiled(False)(*args)
    for a, b in zip(recorded, recomputed):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)
    with tensorjit.config.change_flags(scan_record_residuals=True):
        tensorjit.verify_grad(gru_cost, args)


def test_the_forward_loop_runs_once_and_the_backward_does_not_recompute_products():
    f, g = compiled(True), compiled(False)
    # a forward loop recording the gates and the backward loop: the gradient's extended
    # forward loop replaced the original
    assert len(scans(f)) == len(scans(g)) == 2
    forward = scans(f)[0]
    assert forward.op.n_nit > scans(g)[0].op.n_nit
    # the products with U that the backward loop recomputed from the recorded states
    # (pushed out of it as products over all steps) are gone
    assert products(f) < products(g)


def test_without_the_merge_the_extended_loop_runs_beside_the_original():
    f = compiled(True, excluded=("scan_merge_subsumed",))
    assert len(scans(f)) == 3
    args = values()
    for a, b in zip(f(*args), compiled(True)(*args)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_residuals_are_the_costly_values_the_gradient_reads():
    """z = sigmoid(x + h U) is recorded (a product with a per-step value); 1 - z, which
    the gradient also reads, is derived from the recorded z; a value of non-sequences
    only is not recorded."""
    x, h, U, V = T.vector("x"), T.vector("h"), T.matrix("U"), T.matrix("V")
    z = T.nnet.sigmoid(x + T.dot(h, U))
    invariant = T.dot(U, V)
    out = (1 - z) * h + T.dot(h, invariant)
    step_x, step_h = T.vector("x_t"), T.vector("h_t")
    (clone,), clones = clone_replace([out], {x: step_x, h: step_h})
    g = T.vector("g")
    grads = tensorjit.grad(None, [step_h], known_grads={clone: g})
    found = residuals(clones, grads, {step_x, step_h, g, U, V}, {step_x, step_h}, {U, V})
    assert [fwd for fwd, _ in found] == [z]


def cost_and_gradient(step, record: bool, args: list):
    with tensorjit.config.change_flags(scan_record_residuals=record):
        x, h0, W = T.matrix("x"), T.vector("h0"), T.matrix("W")
        hs, _ = scan(step, sequences=[x], outputs_info=[h0], non_sequences=[W])
        cost = (hs**2).sum()
        f = tensorjit.function([x, h0, W], [cost, tensorjit.grad(cost, W)])
    return f, f(*args)


def test_a_value_whose_shape_follows_the_data_is_recomputed_not_recorded():
    """A boolean mask's selection has another length each step: the rows of one stacked
    output cannot hold it, so the backward step computes it again."""

    def step(xt, h, W):
        v = T.dot(W, h)
        return T.tanh(xt + T.sum(T.tanh(v[v > 0])) * h)

    args = [RNG.normal(size=(6, 3)), RNG.normal(size=3), RNG.normal(size=(8, 3))]
    f, recorded = cost_and_gradient(step, True, args)
    _, recomputed = cost_and_gradient(step, False, args)
    for a, b in zip(recorded, recomputed):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_a_product_of_non_sequences_scaled_per_step_is_not_recorded():
    """dot(W.T, W) * x_t[0]: the product is loop-invariant work (hoisted), the per-step
    part elementwise: recording it would store a matrix per step and save nothing."""

    def step(xt, h, W):
        a = T.dot(W.T, W) * xt[0]
        return T.tanh(T.dot(a, h))

    args = [RNG.normal(size=(5, 3)), RNG.normal(size=3), 0.3 * RNG.normal(size=(4, 3))]
    f, recorded = cost_and_gradient(step, True, args)
    _, recomputed = cost_and_gradient(step, False, args)
    for a, b in zip(recorded, recomputed):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    forward = scans(f)[0]
    assert all(o.type.ndim < 3 for o in forward.outputs), forward.outputs


def test_loops_over_different_sequences_are_not_merged():
    x, y, h0 = T.matrix("x"), T.matrix("y"), T.vector("h0")

    def run(seq):
        hs, _ = scan(lambda xt, h: T.tanh(xt + h), sequences=[seq], outputs_info=[h0])
        return hs

    loop = run(x).owner.inputs[0].owner  # hs is the buffer after its initial row
    assert isinstance(loop.op, Scan)
    n_steps, _, *rest = loop.inputs
    over_y = loop.op(n_steps, y, *rest)  # the same step (inner variables) over y
    f = tensorjit.function([x, y, h0], [loop.outputs[0], over_y])
    assert len(scans(f)) == 2
    a, b, h = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3)), RNG.normal(size=3)
    out_x, out_y = f(a, b, h)
    assert not np.allclose(out_x, out_y)
