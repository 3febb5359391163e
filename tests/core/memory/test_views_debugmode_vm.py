"""Views in constant time, DebugMode's checks, and the VM's buffer reuse."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit import Apply, In, Op, Out
from tensorjit.core.compile.debugmode import (
    BadDestroyMap,
    BadKernel,
    BadOptimization,
    BadViewMap,
)
from tensorjit.core.hooks import get_plugin_system, hookimpl, register_plugin, registries
from tensorjit.core.rewrites import node_rewriter
from tensorjit.tensor import Elemwise

# ---------------------------------------------------------------- views


@pytest.mark.parametrize(
    "build, reference, shape",
    [
        (lambda x: x[1:, ::-1], lambda a: a[1:, ::-1], (3, 4)),
        (lambda x: x[2], lambda a: a[2], (3, 4)),
        (lambda x: x.T, lambda a: a.T, (3, 4)),
        (lambda x: x.dimshuffle(1, "x", 0), lambda a: a.T[:, None, :], (3, 4)),
        (lambda x: x.reshape((4, 3)), lambda a: a.reshape((4, 3)), (3, 4)),
        (lambda x: x.reshape((-1,)), lambda a: a.reshape(-1), (3, 4)),
        (lambda x: T.squeeze(x), lambda a: a[0], (1, 4)),
        (lambda x: T.expand_dims(x, (0, 2)), lambda a: a[None, :, None, :], (3, 4)),
    ],
    ids=["slice", "index", "transpose", "dimshuffle", "reshape", "flatten", "squeeze", "expand"],
)
def test_views_share_the_input_buffer(build, reference, shape):
    x = T.tensor("float64", shape=(1 if shape[0] == 1 else None, None), name="x")
    f = tensorjit.function([In(x, borrow=True)], Out(build(x), borrow=True))
    arg = np.arange(np.prod(shape), dtype="float64").reshape(shape)
    out = f(arg)
    np.testing.assert_array_equal(out, reference(arg))
    assert np.shares_memory(out, arg)  # no copy was made: a view in constant time


def test_default_out_of_a_view_is_a_copy():
    x = T.matrix("x")
    f = tensorjit.function([x], x.T)
    arg = np.ones((2, 3))
    assert not np.shares_memory(f(arg), arg)


# ---------------------------------------------------------------- DebugMode


class _SneakyDoubler(Op):
    """Doubles its input in place but declares no destroy_map."""

    __props__ = ()

    def make_node(self, a):
        a = T.as_tensor_variable(a)
        return Apply(self, [a], [a.type()])

    def perform(self, node, inputs, output_storage):
        inputs[0] *= 2
        output_storage[0][0] = inputs[0].copy()


class _UndeclaredView(Op):
    """Returns a view of its input but declares no view_map."""

    __props__ = ()

    def make_node(self, a):
        a = T.as_tensor_variable(a)
        return Apply(self, [a], [a.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0][::-1]


class _DeclaredView(_UndeclaredView):
    view_map = {0: [0]}


def test_debugmode_names_an_op_with_a_wrong_destroy_map():
    v = T.vector("v")
    f = tensorjit.function([v], _SneakyDoubler()(T.exp(v)), mode="DebugMode")
    with pytest.raises(BadDestroyMap, match=r"_SneakyDoubler .*modified input 0.*destroy_map"):
        f(np.ones(3))


def test_debugmode_names_an_op_with_a_missing_view_map():
    v = T.vector("v")
    f = tensorjit.function([v], _UndeclaredView()(T.exp(v)), mode="DebugMode")
    with pytest.raises(BadViewMap, match=r"_UndeclaredView .*shares memory with input 0"):
        f(np.ones(3))


def test_debugmode_accepts_a_declared_view_and_gives_fresh_outputs():
    v = T.vector("v")
    f = tensorjit.function([v], _DeclaredView()(T.exp(v)), mode="DebugMode")
    np.testing.assert_allclose(f(np.array([0.0, 1.0])), np.exp([1.0, 0.0]))


def test_debugmode_runs_the_paper_logistic_regression_step():
    rng = np.random.default_rng(0)
    x, y = T.matrix("x"), T.lvector("y")
    w = tensorjit.shared(0.01 * rng.standard_normal(5), name="w")
    b = tensorjit.shared(0.0, name="b")
    p = 1 / (1 + T.exp(-T.dot(x, w) - b))
    cost = (-y * T.log(p) - (1 - y) * T.log(1 - p)).mean() + 0.01 * (w**2).sum()
    gw, gb = tensorjit.grad(cost, [w, b])
    step = tensorjit.function(
        [x, y], cost, updates={w: w - 0.1 * gw, b: b - 0.1 * gb}, mode="DebugMode"
    )
    data = rng.standard_normal((8, 5)), rng.integers(0, 2, 8)
    first = step(*data)
    for _ in range(5):
        last = step(*data)
    assert last < first
    assert step.rewrite_stats.applied["inplace"] >= 1  # the inplace variants were checked


class _Wrong:
    """A plugin whose python-backend kernel for _KernelOp adds 1 to the right answer."""

    @hookimpl
    def tensorjit_register_kernels(self, registry):
        def factory(node):
            def run(inputs, output_storage):
                output_storage[0][0] = inputs[0] * 3 + 1

            return run

        registry.add("python", _KernelOp, factory, name="wrong-triple", plugin="wrong")


class _KernelOp(Op):
    __props__ = ()

    def make_node(self, a):
        a = T.as_tensor_variable(a)
        return Apply(self, [a], [a.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0] * 3


def test_debugmode_compares_a_kernel_with_op_perform():
    plugin = _Wrong()
    register_plugin(plugin, "wrong-kernel")
    table = registries().kernels.table
    try:
        v = T.vector("v")
        f = tensorjit.function([v], _KernelOp()(v), mode="DebugMode")
        with pytest.raises(BadKernel, match=r"_KernelOp .*kernel wrong-triple .*Op.perform"):
            f(np.ones(2))
    finally:
        get_plugin_system().pm.unregister(plugin)
        table.pop(("python", _KernelOp), None)


def test_debugmode_catches_a_rewrite_that_changes_values():
    @node_rewriter([Elemwise])
    def exp_is_double(fgraph, node):
        if node.op.scalar_op.name == "exp" and node.op.inplace is None:
            return [node.inputs[0] * 2]
        return None

    db = registries().rewrites
    db.register("test_exp_is_double", exp_is_double, "specialize", "fast_run", plugin="t")
    try:
        v = T.vector("v")
        f = tensorjit.function([v], T.exp(v) + 1, mode="DebugMode")
        with pytest.raises(BadOptimization, match=r"rewrite 'test_exp_is_double' replaced"):
            f(np.ones(3))
        plain = tensorjit.function([v], T.exp(v) + 1)
        np.testing.assert_allclose(plain(np.ones(3)), 3.0)  # FAST_RUN does not check
    finally:
        del db.entries["test_exp_is_double"]


# ---------------------------------------------------------------- VM buffer reuse


def test_a_view_outliving_its_temporary_is_never_overwritten_by_reuse():
    x = T.matrix("x")
    t = T.exp(x)  # a temporary...
    view = t.T  # ...whose view is read after t itself is last used
    other = x * 3 + 1  # a temporary of the same shape that could reuse t's buffer
    out = view.T + other
    f = tensorjit.function([x], out)
    rng = np.random.default_rng(0)
    for _ in range(4):
        arg = rng.standard_normal((3, 3))
        np.testing.assert_allclose(f(arg), np.exp(arg) + arg * 3 + 1)


def test_temporary_buffers_are_reused_across_calls_and_freed_on_request():
    x = T.vector("x")
    with tensorjit.config.change_flags(whole_graph=False):  # the per-node VM's pool
        f = tensorjit.function(
            [x], (T.exp(x) + T.sin(x)) * 2, mode=tensorjit.FAST_RUN.excluding("inplace", "fusion")
        )
    arg = np.linspace(0, 1, 1000)
    expected = (np.exp(arg) + np.sin(arg)) * 2
    for _ in range(3):
        np.testing.assert_allclose(f(arg), expected)
    assert sum(len(b) for b in f.vm.pool.values()) >= 1
    f.free()
    assert f.vm.pool == {}
    np.testing.assert_allclose(f(arg), expected)


@pytest.mark.host_memory
def test_out_borrow_reuses_the_output_buffer_across_calls():
    x = T.vector("x")
    f = tensorjit.function([x], Out(x * 2, borrow=True))
    first = f(np.ones(4))
    second = f(np.full(4, 3.0))
    assert second is first  # the same buffer, overwritten: what borrow allows
    np.testing.assert_array_equal(second, [6.0, 6.0, 6.0, 6.0])
    fresh = tensorjit.function([x], x * 2)
    a, b = fresh(np.ones(4)), fresh(np.ones(4))
    assert not np.shares_memory(a, b)
