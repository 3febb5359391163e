"""The lazy conditional: only the branch taken is computed."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit import Apply, Op
from tensorjit.ifelse import ifelse


class Probe(Op):
    """Identity that records that it ran."""

    __props__ = ("tag",)
    calls: list[str] = []

    def __init__(self, tag):
        self.tag = tag

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        Probe.calls.append(self.tag)
        output_storage[0][0] = inputs[0] * 1

    def grad(self, inputs, output_grads):
        return [output_grads[0]]


@pytest.fixture(autouse=True)
def _clear_calls():
    Probe.calls.clear()


def test_only_the_branch_taken_runs():
    a, b, x = T.scalar("a"), T.scalar("b"), T.vector("x")
    then = Probe("then")(T.exp(x)).sum()
    other = Probe("else")(T.log(x)).sum()
    f = tensorjit.function([a, b, x], ifelse(T.lt(a, b), then, other))
    v = np.array([1.0, 2.0])
    assert np.isclose(f(1, 2, v), np.exp(v).sum())
    assert Probe.calls == ["then"]
    Probe.calls.clear()
    assert np.isclose(f(3, 2, v), np.log(v).sum())
    assert Probe.calls == ["else"]


def test_nested_ifelse_and_shared_subexpressions():
    a, x = T.scalar("a"), T.vector("x")
    common = Probe("common")(x * 2)  # used by both branches: always computed
    inner = ifelse(T.gt(a, 0), Probe("inner_t")(common), Probe("inner_e")(common))
    out = ifelse(T.lt(a, 10), inner.sum(), Probe("outer_e")(x).sum() + common.sum())
    f = tensorjit.function([a, x], out)
    v = np.array([1.0, 2.0])
    assert f(1, v) == 6.0 and Probe.calls == ["common", "inner_t"]
    Probe.calls.clear()
    assert f(-1, v) == 6.0 and Probe.calls == ["common", "inner_e"]
    Probe.calls.clear()
    assert f(50, v) == 9.0 and sorted(Probe.calls) == ["common", "outer_e"]


def test_multiple_outputs_and_gradients():
    c, x = T.scalar("c"), T.vector("x")
    p, q = ifelse(T.gt(c, 0), [x**2, x.sum()], [x**3, x.prod()])
    f = tensorjit.function([c, x], [p, q])
    v = np.array([1.0, 2.0])
    np.testing.assert_allclose(f(1, v)[0], v**2)
    np.testing.assert_allclose(f(-1, v)[1], 2.0)
    g = tensorjit.function([c, x], tensorjit.grad(p.sum() + q, x))
    np.testing.assert_allclose(g(1, v), 2 * v + 1)
    np.testing.assert_allclose(g(-1, v), 3 * v**2 + v[::-1])


def test_outputs_are_fresh_and_branches_checked():
    c, x = T.scalar("c"), T.vector("x")
    f = tensorjit.function([c, x], ifelse(T.gt(c, 0), x, x * 0))
    v = np.ones(2)
    out = f(1, v)
    assert not np.shares_memory(out, v)
    with pytest.raises(TypeError, match="condition must be a scalar"):
        ifelse(x, x, x)
    with pytest.raises(TypeError, match="branches differ"):
        ifelse(c, x, T.matrix("m"))


def test_debugmode_accepts_ifelse():
    c, x = T.scalar("c"), T.vector("x")
    f = tensorjit.function([c, x], ifelse(T.gt(c, 0), T.exp(x), -x), mode="DebugMode")
    np.testing.assert_allclose(f(1, np.zeros(2)), [1.0, 1.0])
    np.testing.assert_allclose(f(-1, np.ones(2)), [-1.0, -1.0])
