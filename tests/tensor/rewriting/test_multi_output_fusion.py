"""Multi-output elementwise fusion (tensor/rewriting/multi_output_fusion.py): fused
elementwise nodes over one loop space that feed one another become one
MultiOutputElemwise node, with the values of the unfused graph, on the Python and the C
backends and on a device; never when a path leaves the group and comes back, across
broadcast patterns, or for a device whose backends have no kernels for it."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import tensorjit
import tensorjit.tensor as T
from tensorjit import FAST_RUN, Mode
from tensorjit.core.rewrites import RewriteQuery
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.multi_output_elemwise import MultiOutputElemwise
from tensorjit.testing.device_under_test import DEVICE, NEEDS_DEVICE, on_device

PYTHON = FAST_RUN.with_backends("python")
UNREWRITTEN = Mode("unrewritten", RewriteQuery(), backends=("python",))
WITHOUT = FAST_RUN.without("multi_output_fusion")
RNG = np.random.default_rng(5)


def multi_nodes(f) -> list:
    return [n for n in f.fgraph.toposort() if isinstance(n.op, MultiOutputElemwise)]


def elemwise_nodes(f) -> list:
    return [n for n in f.fgraph.toposort() if isinstance(n.op, Elemwise)]


def agree_with_unrewritten(inputs, outputs, args, atol=1e-14, modes=(FAST_RUN, PYTHON)):
    """Each mode's function and the unrewritten graph give the same values (within a
    few ulp of the magnitude ``atol`` stands for: C's exp, erf and tanh are not NumPy's,
    and a difference of such terms cancels); returns the functions."""
    want = tensorjit.function(inputs, outputs, mode=UNREWRITTEN)(*args)
    functions = []
    for mode in modes:
        f = tensorjit.function(inputs, outputs, mode=mode)
        got = f(*args)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=atol)
        functions.append(f)
    return functions


def option_prices(s, k, t, v):
    """Black-Scholes call and put: d1, d2 and the discount are each read twice."""
    root_t = T.sqrt(t)
    d1 = (T.log(s / k) + (0.03 + 0.5 * v * v) * t) / (v * root_t)
    d2 = d1 - v * root_t
    discount = k * T.exp(-0.03 * t)

    def cdf(d):
        return 0.5 * (1 + T.erf(d * 0.7071067811865476))

    return [s * cdf(d1) - discount * cdf(d2), discount * cdf(-d2) - s * cdf(-d1)]


def test_two_results_of_shared_intermediates_are_one_node_with_two_outputs():
    s, k, t, v = T.vectors("s", "k", "t", "v")
    n = 257  # not a multiple of any vector width
    args = [RNG.uniform(50, 150, n), RNG.uniform(50, 150, n), RNG.uniform(0.1, 3, n)]
    args.append(RNG.uniform(0.05, 0.6, n))
    # (prices are differences of terms up to 150: atol a few ulp of that)
    prices = option_prices(s, k, t, v)
    fused, python = agree_with_unrewritten([s, k, t, v], prices, args, atol=1e-12)
    for f in (fused, python):
        (node,) = multi_nodes(f)
        assert len(node.outputs) == 2 and not elemwise_nodes(f)
    # without the pass: the seven single-output nodes it replaces
    assert not multi_nodes(
        tensorjit.function([s, k, t, v], option_prices(s, k, t, v), mode=WITHOUT)
    )


def test_a_value_that_is_an_output_and_read_by_another_group_is_stored_once():
    x, y = T.matrices("x", "y")
    a = T.exp(x) * 2
    outputs = [a, T.tanh(a * y) + 1]
    args = [RNG.standard_normal((6, 5)), RNG.standard_normal((6, 5))]
    (f, _) = agree_with_unrewritten([x, y], outputs, args)
    (node,) = multi_nodes(f)
    assert set(node.outputs) == set(f.fgraph.outputs)


def test_values_recomputed_by_single_output_groups_are_computed_once():
    """Single-output fusion recomputes the cheap ``e + c`` in each group reading it;
    joined, the node computes each step once."""
    x, r = T.vectors("x", "r")
    e = T.exp(x) * r
    u = e + 3
    outputs = [u, u * x, e]
    (f, _) = agree_with_unrewritten([x, r], outputs, [RNG.standard_normal(6)] * 2)
    (node,) = multi_nodes(f)
    program = node.op.scalar_op.program
    assert len(set(program)) == len(program)


def test_an_optimiser_update_of_three_shared_variables_runs_as_one_node():
    """Adam's moment, second moment and parameter updates from one gradient."""
    g = T.vector("g")
    start = RNG.standard_normal(33)
    p = tensorjit.shared(start.copy(), name="p")
    m = tensorjit.shared(np.zeros(33), name="m")
    v = tensorjit.shared(np.zeros(33), name="v")
    m_new = 0.9 * m + 0.1 * g
    v_new = 0.999 * v + 0.001 * g * g
    p_new = p - 0.01 * m_new / (T.sqrt(v_new) + 1e-8)
    updates = [(m, m_new), (v, v_new), (p, p_new)]
    grads = [RNG.standard_normal(33) for _ in range(3)]
    given = [x.copy() for x in grads]
    for mode, whole_graph in ((FAST_RUN, True), (FAST_RUN, False), (PYTHON, False)):
        for shared, value in ((p, start), (m, np.zeros(33)), (v, np.zeros(33))):
            shared.set_value(value.copy())
        with tensorjit.config.change_flags(whole_graph=whole_graph):
            f = tensorjit.function([g], [], updates=updates, mode=mode)
        (node,) = multi_nodes(f)
        # each update written into its own variable's buffer (the in-place pass asks
        # the node again for each output)
        into = {node.outputs[k]: node.inputs[i] for k, i in node.op.inplace}
        assert sorted(v.name for v in into.values()) == ["m", "p", "v"]
        buffers = [s.get_value(borrow=True) for s in (p, m, v)]
        want_p, want_m, want_v = start.copy(), np.zeros(33), np.zeros(33)
        for grad in grads:
            f(grad)
            want_m = 0.9 * want_m + 0.1 * grad
            want_v = 0.999 * want_v + 0.001 * grad * grad
            want_p = want_p - 0.01 * want_m / (np.sqrt(want_v) + 1e-8)
        for shared, want, buffer in zip((p, m, v), (want_p, want_m, want_v), buffers):
            np.testing.assert_allclose(shared.get_value(), want, rtol=1e-12)
            assert shared.get_value(borrow=True) is buffer
        for grad, copy in zip(grads, given):  # the caller's arrays are not written
            np.testing.assert_array_equal(grad, copy)


def test_a_path_that_leaves_the_group_and_comes_back_keeps_the_nodes_apart():
    """``b`` reads ``a`` directly and through a reversal (not elementwise): one node
    computing both would have to read its own output."""
    x = T.vector("x")
    a = T.exp(x) + 1
    b = a * a[::-1]
    outputs = [a * 3, b + 2]
    (f, _) = agree_with_unrewritten([x], outputs, [RNG.standard_normal(9)])
    for node in multi_nodes(f):
        inputs = set(node.inputs)
        assert not any(out in inputs for out in node.outputs)


def test_groups_each_convex_alone_are_not_both_fused_into_a_cycle():
    """{a0, a1, a2} and {b1, b2} are each convex in the graph as built, but b1 feeds a1
    and a2 feeds b2 (through reversals): once the first is one node, the second must
    not be, or each node would read the other's output."""
    x, y = T.vectors("x", "y")
    a0 = T.exp(x) * 2
    b1 = T.tanh(y) + 1
    a1 = T.log1p(a0 * b1[::-1])
    a2 = T.sqrt(a0 + 3)
    b2 = T.exp(b1 * a2[::-1])
    outputs = [a1, a2 * 5, b2, b1 * 4]
    args = [RNG.standard_normal(8), RNG.standard_normal(8)]
    (f, _) = agree_with_unrewritten([x, y], outputs, args)
    assert multi_nodes(f)


def test_values_of_different_broadcast_patterns_are_not_merged():
    """A row read by a matrix expression is computed once per column, not per element."""
    x, r = T.matrix("x"), T.row("r")
    e = T.exp(r) * 2
    outputs = [e, x * e + 1, x - e]
    (f, _) = agree_with_unrewritten(
        [x, r], outputs, [RNG.standard_normal((4, 3)), RNG.standard_normal((1, 3))]
    )
    for node in multi_nodes(f):
        assert all(o.type.broadcastable == (False, False) for o in node.outputs)


def test_outputs_of_different_dtypes():
    x = T.matrix("x", dtype="float32")
    positive = x > 0
    outputs = [positive, T.where(positive, x, 0) * 2, T.cast(positive, "int64") + 3]
    args = [RNG.standard_normal((7, 3)).astype("float32")]
    (f, _) = agree_with_unrewritten([x], outputs, args)
    (node,) = multi_nodes(f)
    assert {o.type.dtype for o in node.outputs} == {"bool", "float32", "int64"}


def test_shapes_that_do_not_broadcast_raise_the_elementwise_error():
    x, y = T.vectors("x", "y")
    a = T.exp(x) * y
    f = tensorjit.function([x, y], [a, a * x + 1])
    assert multi_nodes(f)
    with pytest.raises(ValueError, match="broadcast|shape"):
        f(np.ones(3), np.ones(4))


@NEEDS_DEVICE
def test_on_a_device_whose_backends_have_kernels_for_it():
    """The shared device families run MultiOutputElemwise (OpenCL here, CUDA on a GPU):
    the device's graph is joined too, and runs there."""
    x = T.vector("x", dtype="float32")
    a = T.exp(x) * 2
    outputs = [a, a * x + 1]
    f = on_device([x], outputs, mode=FAST_RUN)
    (node,) = multi_nodes(f)
    assert node.outputs[0].type.device == DEVICE and f.kernels[node].backend != "python"
    arg = RNG.standard_normal(10).astype("float32")
    want = tensorjit.function([x], outputs, mode=UNREWRITTEN)(arg)
    for got, w in zip(f(arg), want):
        np.testing.assert_allclose(np.asarray(got), w, rtol=1e-6)


@NEEDS_DEVICE
def test_a_group_the_device_would_not_run_joined_stays_apart():
    """erfinv has no device kernel: joined with the tanh/exp group, the one node would
    run on the host, taking the group's work off the device; the group stays apart and
    on the device, only the erfinv part runs on the host."""
    from tensorjit.tensor.type import TensorType

    x = TensorType("float32", (None,), device=DEVICE)("x")
    a = T.tanh(x) * 3 + T.exp(x)
    b = T.erfinv(T.tanh(a) * 0.5)
    f = on_device([x], [a, b], mode=FAST_RUN)
    (x_in,) = f.fgraph.inputs
    reads_x = [n for n in f.fgraph.toposort() if x_in in n.inputs]
    assert reads_x and all(n.outputs[0].type.device == DEVICE for n in reads_x)
    arg = RNG.standard_normal(10).astype("float32")
    av = np.tanh(arg) * 3 + np.exp(arg)
    got_a, got_b = (np.asarray(v) for v in f(arg))
    np.testing.assert_allclose(got_a, av, rtol=1e-5)
    np.testing.assert_allclose(got_b, scipy.special.erfinv(np.tanh(av) * 0.5), rtol=1e-5)


@NEEDS_DEVICE
def test_beside_a_member_the_device_would_not_run_the_rest_is_joined_on_the_device():
    """The erfinv node runs on the host, whatever happens; the two values the device
    does run, both read outside (a and a * x + 1), are joined into one node there."""
    from tensorjit.tensor.type import TensorType

    x = TensorType("float32", (None,), device=DEVICE)("x")
    a = T.tanh(x) * 3 + T.exp(x)
    c = a * x + 1
    b = T.erfinv(T.tanh(a) * 0.5)
    f = on_device([x], [a, c, b], mode=FAST_RUN)
    joined = multi_nodes(f)
    assert len(joined) == 1 and joined[0].outputs[0].type.device == DEVICE
    assert len(joined[0].outputs) == 2
    arg = RNG.standard_normal(10).astype("float32")
    av = np.tanh(arg) * 3 + np.exp(arg)
    got_a, got_c, got_b = (np.asarray(v) for v in f(arg))
    np.testing.assert_allclose(got_a, av, rtol=1e-5)
    np.testing.assert_allclose(got_c, av * arg + 1, rtol=1e-5)
    np.testing.assert_allclose(got_b, scipy.special.erfinv(np.tanh(av) * 0.5), rtol=1e-5)


def test_not_on_a_device_whose_backends_lack_kernels_for_it():
    """The test plugin's second device runs Elemwise but not MultiOutputElemwise: its
    graphs keep their single-output nodes, all on the device (joined, the node would
    run on the host)."""
    import tensorjit_wrapdev  # noqa: F401  (installed for the session by tests/conftest.py)

    x = T.vector("x")
    a = T.exp(x) * 2
    outputs = [a, a * x + 1]
    with tensorjit.config.change_flags(device="wrapdev"):
        f = tensorjit.function([x], outputs, mode=FAST_RUN)
    assert not multi_nodes(f)
    assert all(n.outputs[0].type.device == "wrapdev" for n in elemwise_nodes(f))
    arg = RNG.standard_normal(10)
    for got, w in zip(f(arg), [np.exp(arg) * 2, np.exp(arg) * 2 * arg + 1]):
        np.testing.assert_allclose(got, w, rtol=1e-14)
