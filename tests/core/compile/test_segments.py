"""A function with a node no program covers still runs its covered stretches as
programs (core/compile/segments.py), with the per-node results, errors and updates."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.c_backend import NEEDS_C

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.compile.program import ProgramVM
from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op

pytestmark = NEEDS_C


class PythonOnlyDouble(Op):
    """An op only Op.perform runs, in place: no backend has a kernel or a program step
    for it, and a program does not run it as a Python step either (an in-place update
    must be one the program can order, check and undo)."""

    __props__ = ()
    destroy_map = {0: [0]}

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        x *= 2
        output_storage[0][0] = x

    def infer_shape(self, fgraph, node, input_shapes):
        return input_shapes


double = PythonOnlyDouble()


def _build(x, y):
    before = T.exp(x) * 2 + y
    middle = double(before)
    after = T.tanh(middle) + middle * 3
    return [after.sum(), after]


def _expected(xv, yv):
    middle = (np.exp(xv) * 2 + yv) * 2
    after = np.tanh(middle) + middle * 3
    return [after.sum(), after]


def test_the_covered_stretches_run_as_programs_with_the_same_results():
    x, y = T.vectors("x", "y")
    f = tensorjit.function([x, y], _build(x, y), accept_inplace=True)
    assert not isinstance(f.vm, ProgramVM)  # the whole graph is not one program
    assert f.vm.segment_nodes >= 2  # but the stretch after the Python op is
    with tensorjit.config.change_flags(whole_graph=False):
        per_node = tensorjit.function([x, y], _build(x, y), accept_inplace=True)
    assert per_node.vm.segment_nodes == 0
    rng = np.random.default_rng(0)
    for n in (5, 1, 0):
        xv, yv = rng.standard_normal(n), rng.standard_normal(n)
        for got, per, want in zip(f(xv, yv), per_node(xv, yv), _expected(xv, yv)):
            np.testing.assert_allclose(got, want, rtol=1e-12)
            np.testing.assert_allclose(per, want, rtol=1e-12)


def test_an_error_inside_a_segment_names_the_node_that_failed():
    x, y = T.vectors("x", "y")
    f = tensorjit.function([x, y], _build(x, y), accept_inplace=True)
    assert f.vm.segment_nodes
    with pytest.raises(ValueError, match="while computing") as excinfo:
        f(np.ones(3), np.ones(2))
    message = str(excinfo.value)
    assert "add" in message or "Composite" in message, message
    np.testing.assert_allclose(
        f(np.zeros(2), np.zeros(2))[1], _expected(np.zeros(2), np.zeros(2))[1]
    )


def test_updates_stay_all_or_nothing_around_segments():
    a = tensorjit.shared(np.zeros(3), name="a")
    b = tensorjit.shared(np.zeros(3), name="b")
    x, y = T.vectors("x", "y")
    middle = double(T.exp(x) + 1)
    outputs = [middle.sum(), T.exp(middle).max() * 2, (middle**2).mean()]
    updates = [(a, a + T.tanh(middle) * 2), (b, b + y * 3)]
    f = tensorjit.function([x, y], outputs, updates=updates, accept_inplace=True)
    assert f.vm.segment_nodes
    with pytest.raises(ValueError):
        f(np.zeros(3), np.ones(2))
    np.testing.assert_array_equal(a.get_value(), np.zeros(3))
    np.testing.assert_array_equal(b.get_value(), np.zeros(3))
    f(np.zeros(3), np.ones(3))
    np.testing.assert_allclose(a.get_value(), np.tanh(4.0) * 2)
    np.testing.assert_allclose(b.get_value(), 3.0)


def test_random_draws_next_to_an_uncovered_node_run_in_segments():
    srng = T.random.RandomStreams(3)
    x = T.matrix("x")
    mask = srng.binomial(size=x.shape, n=1, p=0.5, dtype="float64")
    out = (double(T.exp(x)) * 0.5 * mask + 1).sum(axis=1) * 2
    f = tensorjit.function([x], out, accept_inplace=True)
    assert f.vm.segment_nodes >= 2
    xv = np.random.default_rng(1).standard_normal((4, 3))
    got = f(xv)
    assert got.shape == (4,) and np.all(got >= 6.0 - 1e-12)
