"""The inplace pass (FAST_RUN, tag "inplace"): swaps ops for their destructive variants
where the DestroyHandler accepts, never corrupting results or protected data, whatever
variant a plugin offers."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit import Apply, In, Op
from tensorjit.core.hooks import get_plugin_system, hookimpl, register_plugin, registries
from tensorjit.core.memory.destroy_handler import DestroyHandler
from tensorjit.tensor import Elemwise, IncSubtensor
from tensorjit.tensor.type import TensorType

shares = np.shares_memory
NO_INPLACE = tensorjit.FAST_RUN.excluding("inplace")

# Fusion would merge the elementwise ops these tests look at one by one.
NO_FUSION = tensorjit.FAST_RUN.excluding("fusion")


def _destroyers(f):
    return [n for n in f.fgraph.apply_nodes if n.op.destroy_map]


def _destroyed_roots(f):
    """The graph inputs whose memory some destroyer writes (following declared views)."""
    handler = f.fgraph.get_feature(DestroyHandler)
    return {
        handler.root(n.inputs[i])
        for n in _destroyers(f)
        for ins in n.op.destroy_map.values()
        for i in ins
    }


# ---------------------------------------------------------------- the pass fires


@pytest.mark.host_memory
def test_elementwise_chain_runs_in_place_after_the_first_op():
    x, y = T.vectors("x", "y")
    f = tensorjit.function([x, y], T.tanh(T.exp(x * y) + 1) * 3, mode=NO_FUSION)
    order = f.fgraph.toposort()
    assert [str(n.op) for n in order] == [
        "mul",
        "exp_inplace{0}",
        "add_inplace{0}",
        "tanh_inplace{0}",
        "mul_inplace{1}",  # canonical products put the constant 3 first
    ]
    # each destroyer writes into the previous temporary, never into x or y
    assert all(n.inputs[n.op.inplace].owner is prev for prev, n in zip(order, order[1:]))
    assert f.rewrite_stats.applied["inplace"] == 1  # one validated transaction
    assert not f.rewrite_stats.rejected["inplace"]
    a, b = np.array([0.5, 1.0, -2.0]), np.array([1.0, 0.25, 0.5])
    out = f(a, b)
    np.testing.assert_allclose(out, np.tanh(np.exp(a * b) + 1) * 3)
    np.testing.assert_array_equal(a, [0.5, 1.0, -2.0])
    np.testing.assert_array_equal(b, [1.0, 0.25, 0.5])


@pytest.mark.parametrize(
    "build, reference",
    [
        (lambda x: T.set_subtensor((x * 2)[0], 5.0), lambda a: np.r_[5.0, a[1:] * 2]),
        (lambda x: T.inc_subtensor((x + 1)[1:], 10.0), lambda a: np.r_[a[0] + 1, a[1:] + 11]),
        (
            lambda x: T.set_subtensor(T.exp(x)[::2], x[::2]),
            lambda a: np.where(np.arange(a.size) % 2 == 0, a, np.exp(a)),
        ),
        (
            lambda x: T.inc_subtensor(T.set_subtensor((x * 3)[0], 0.0)[-1], 7.0),
            lambda a: np.r_[0.0, 3 * a[1:-1], 3 * a[-1] + 7],
        ),
    ],
    ids=["set on temp", "inc on temp", "set from input view", "set then inc"],
)
def test_set_and_inc_subtensor_on_temporaries_run_in_place(build, reference):
    x = T.vector("x")
    f = tensorjit.function([x], build(x), mode=NO_FUSION)
    incs = [n for n in f.fgraph.apply_nodes if isinstance(n.op, IncSubtensor)]
    assert incs and all(n.op.inplace and n.op.destroy_map == {0: [0]} for n in incs)
    assert f.fgraph.inputs[0] not in _destroyed_roots(f)
    a = np.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(f(a), reference(np.array([1.0, 2.0, 3.0, 4.0])))
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0, 4.0])


# On a device the graph holds transfers too, and the copy of x there may be destroyed.
@pytest.mark.host_memory
def test_set_subtensor_of_a_protected_input_is_not_in_place():
    x = T.vector("x")
    f = tensorjit.function([x], T.set_subtensor(x[0], 5.0))
    (node,) = f.fgraph.apply_nodes
    assert not node.op.inplace and not node.op.destroy_map
    a = np.array([1.0, 2.0])
    np.testing.assert_array_equal(f(a), [5.0, 2.0])
    np.testing.assert_array_equal(a, [1.0, 2.0])


# ---------------------------------------------------------------- protected inputs


PROTECTED_CASES = {
    "mul": (lambda x, y: [x * y], lambda a, b: [a * b]),
    "chain": (lambda x, y: [T.exp(x) + T.log(y)], lambda a, b: [np.exp(a) + np.log(b)]),
    "t and exp(t)": (lambda x, y: [x * 2, T.exp(x * 2)], lambda a, b: [a * 2, np.exp(a * 2)]),
    "two readers of t": (
        lambda x, y: [T.exp(x * y) + T.log(x * y)],
        lambda a, b: [np.exp(a * b) + np.log(a * b)],
    ),
    "t and its view": (
        lambda x, y: [T.exp(x * 2), (x * 2)[::-1]],
        lambda a, b: [np.exp(a * 2), (a * 2)[::-1]],
    ),
    "t plus its view": (lambda x, y: [(x * 2) + (x * 2)[::-1]], lambda a, b: [2 * a + 2 * a[::-1]]),
    "input plus its view": (lambda x, y: [x + x[::-1]], lambda a, b: [a + a[::-1]]),
    "exp of input plus view": (
        lambda x, y: [T.exp(x) + x[::-1]],
        lambda a, b: [np.exp(a) + a[::-1]],
    ),
    "input and exp": (lambda x, y: [x, T.exp(x)], lambda a, b: [a, np.exp(a)]),
    "slice and exp": (lambda x, y: [x[1:], T.exp(x)], lambda a, b: [a[1:], np.exp(a)]),
    "set_subtensor of inputs": (
        lambda x, y: [T.set_subtensor(x[0], y[0]), T.exp(y)],
        lambda a, b: [np.r_[b[0], a[1:]], np.exp(b)],
    ),
    "dimshuffle": (
        lambda x, y: [T.exp((x * 2).dimshuffle("x", 0)) + (x * 2)],
        lambda a, b: [np.exp(a * 2)[None, :] + a * 2],
    ),
    "reshape": (
        lambda x, y: [T.exp((x * 2).reshape((3, 1))), x * 2],
        lambda a, b: [np.exp(a * 2).reshape((3, 1)), a * 2],
    ),
    "maximum": (
        lambda x, y: [T.maximum(x * 2, y * 2) + x * 2],
        lambda a, b: [np.maximum(a * 2, b * 2) + a * 2],
    ),
    "reduction": (
        lambda x, y: [T.exp(x * y).sum() + x * y],
        lambda a, b: [np.exp(a * b).sum() + a * b],
    ),
    "neg of input": (lambda x, y: [-x, -y], lambda a, b: [-a, -b]),
}


@pytest.mark.parametrize("case", list(PROTECTED_CASES))
def test_protected_inputs_are_never_destroyed(case):
    build, reference = PROTECTED_CASES[case]
    x, y = T.vectors("x", "y")
    f = tensorjit.function([x, y], build(x, y), on_unused_input="ignore")
    assert not set(f.fgraph.inputs) & _destroyed_roots(f)
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.25, 4.0])
    for _ in range(2):
        got = f(a, b)
        expected = reference(np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.25, 4.0]))
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e)
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(b, [0.5, 0.25, 4.0])


@pytest.mark.parametrize("case", list(PROTECTED_CASES))
def test_mutable_inputs_give_the_same_results(case):
    # Allowing destruction changes where results are computed, never what they are.
    build, reference = PROTECTED_CASES[case]
    x, y = T.vectors("x", "y")
    ins = [In(x, mutable=True), In(y, mutable=True)]
    f = tensorjit.function(ins, build(x, y), on_unused_input="ignore")
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.25, 4.0])
    got = f(a, b)
    expected = reference(np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.25, 4.0]))
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e)
        assert not shares(g, a) and not shares(g, b)


@pytest.mark.host_memory
def test_a_mutable_input_that_is_also_returned_is_not_destroyed():
    x = T.vector("x")
    f = tensorjit.function([In(x, mutable=True)], [x, T.exp(x)])
    assert not _destroyers(f)
    assert f.rewrite_stats.rejected["inplace"] >= 1  # tried, and vetoed
    a = np.array([0.0, 1.0])
    got_x, got_exp = f(a)
    np.testing.assert_array_equal(got_x, [0.0, 1.0])
    np.testing.assert_allclose(got_exp, np.exp([0.0, 1.0]))
    np.testing.assert_array_equal(a, [0.0, 1.0])


@pytest.mark.host_memory
@pytest.mark.parametrize(
    "build, reference",
    [
        (lambda x: x * 3, lambda a: a * 3),
        (lambda x: T.exp(x) + 1, lambda a: np.exp(a) + 1),
        (lambda x: T.set_subtensor(x[0], 9.0), lambda a: np.r_[9.0, a[1:]]),
        (lambda x: T.inc_subtensor(x[1:], 1.0), lambda a: np.r_[a[0], a[1:] + 1]),
    ],
    ids=["mul", "exp+1", "set_subtensor", "inc_subtensor"],
)
def test_a_borrowed_input_may_be_destroyed(build, reference):
    x = T.vector("x")
    f = tensorjit.function([In(x, borrow=True)], build(x))
    assert f.fgraph.inputs[0] in _destroyed_roots(f)
    a = np.array([1.0, 2.0, 3.0])
    got = f(a)
    np.testing.assert_allclose(got, reference(np.array([1.0, 2.0, 3.0])))
    np.testing.assert_allclose(a, got)  # the result was computed in the argument
    assert not shares(got, a)  # but returned as fresh memory (no Out(borrow=True))


# ---------------------------------------------------------------- shared updates


@pytest.mark.host_memory
def test_sgd_update_runs_in_place_on_the_shared_buffer():
    w = tensorjit.shared(np.array([1.0, 2.0, 3.0]), name="w")
    lr = T.dscalar("lr")
    g = T.vector("g")
    f = tensorjit.function([lr, g], [], updates={w: w - lr * g}, mode=NO_FUSION)
    (node,) = _destroyers(f)
    assert str(node.op) == "sub_inplace{0}"
    assert f.fgraph.get_feature(DestroyHandler).root(node.inputs[0]) is f.fgraph.inputs[-1]
    buffer = w.get_value(borrow=True)
    expected = np.array([1.0, 2.0, 3.0])
    grad = np.array([1.0, -2.0, 0.5])
    for step in range(3):
        f(0.1 * (step + 1), grad)
        expected = expected - 0.1 * (step + 1) * grad
        assert w.get_value(borrow=True) is buffer  # no new buffer: updated in place
        np.testing.assert_allclose(w.get_value(), expected)
    np.testing.assert_array_equal(grad, [1.0, -2.0, 0.5])


def test_in_place_update_runs_after_the_readers_of_the_old_value():
    w = tensorjit.shared(np.array([1.0, 2.0]), name="w")
    g = T.vector("g")
    f = tensorjit.function([g], [w * 10, T.exp(w)], updates={w: w - g})
    assert len(_destroyers(f)) == 1
    buffer = w.get_value(borrow=True, return_internal_type=True)  # (on any device)
    before, exp_before = f(np.array([1.0, 1.0]))
    np.testing.assert_array_equal(before, [10.0, 20.0])
    np.testing.assert_allclose(exp_before, np.exp([1.0, 2.0]))
    np.testing.assert_array_equal(w.get_value(), [0.0, 1.0])
    assert w.get_value(borrow=True, return_internal_type=True) is buffer


def test_two_updates_reading_each_other_stay_simultaneous():
    a = tensorjit.shared(np.array([1.0, 2.0]), name="a")
    b = tensorjit.shared(np.array([10.0, 20.0]), name="b")
    f = tensorjit.function([], [], updates={a: a + b, b: a * b})
    f()
    np.testing.assert_array_equal(a.get_value(), [11.0, 22.0])
    np.testing.assert_array_equal(b.get_value(), [10.0, 40.0])
    assert not shares(a.get_value(borrow=True), b.get_value(borrow=True))


def test_update_reading_its_own_storage_through_a_view():
    w = tensorjit.shared(np.array([1.0, 2.0, 3.0]), name="w")
    f = tensorjit.function([], [], updates={w: w + w[::-1]})
    f()
    np.testing.assert_array_equal(w.get_value(), [4.0, 4.0, 4.0])


def test_a_shared_variable_without_update_is_never_destroyed():
    w = tensorjit.shared(np.array([1.0, 2.0]), name="w")
    buffer = w.get_value(borrow=True, return_internal_type=True)  # (on any device)
    f = tensorjit.function([], T.exp(w) + w)
    assert not set(f.fgraph.inputs) & _destroyed_roots(f)
    np.testing.assert_allclose(f(), np.exp([1.0, 2.0]) + [1.0, 2.0])
    assert w.get_value(borrow=True, return_internal_type=True) is buffer
    np.testing.assert_array_equal(w.get_value(), [1.0, 2.0])


# ---------------------------------------------------------------- turning the pass off


def test_excluding_the_inplace_tag_turns_the_pass_off():
    x = T.vector("x")
    w = tensorjit.shared(np.array([1.0, 2.0]), name="w")
    out = T.set_subtensor(T.exp(x * 2)[0], 0.0) + 1
    on = tensorjit.function([In(x, borrow=True)], out, updates={w: w * 2})
    off = tensorjit.function([In(x, borrow=True)], out, updates={w: w * 2}, mode=NO_INPLACE)
    assert _destroyers(on) and on.rewrite_stats.applied["inplace"] >= 1
    assert not _destroyers(off)
    assert "inplace" not in off.rewrite_stats.applied
    assert "inplace" not in off.rewrite_stats.rejected
    a = np.array([0.5, 1.0])
    buffer = w.get_value(borrow=True)
    got = off(a)
    np.testing.assert_array_equal(a, [0.5, 1.0])  # borrowed, but nothing ran in it
    assert w.get_value(borrow=True) is not buffer
    np.testing.assert_allclose(got, [1.0, np.exp(2.0) + 1])
    np.testing.assert_allclose(on(np.array([0.5, 1.0])), got)


def test_fast_compile_does_not_run_the_inplace_pass():
    x = T.vector("x")
    f = tensorjit.function([In(x, mutable=True)], T.exp(x) * 2, mode="FAST_COMPILE")
    assert not _destroyers(f)
    a = np.array([0.0, 1.0])
    np.testing.assert_allclose(f(a), np.exp([0.0, 1.0]) * 2)
    np.testing.assert_array_equal(a, [0.0, 1.0])


# ---------------------------------------------------------------- third-party variants

PLUGIN = "test-inplace-variants"


class PluginMul(Op):
    """``a * b`` on float64 vectors. ``destroy``: inputs written in place (the result
    goes into the first, the others are filled with NaN: a destroyed value is garbage).
    ``swap`` builds the node with its inputs reversed; ``out_type`` overrides the output
    type. Subclassed per test: an op class can have one inplace maker only."""

    __props__ = ("destroy", "swap", "out_type")

    def __init__(self, destroy=(), swap=False, out_type=None):
        self.destroy = tuple(destroy)
        self.swap = swap
        self.out_type = out_type
        if self.destroy:
            self.destroy_map = {0: list(self.destroy)}

    def make_node(self, a, b):
        a, b = T.as_tensor_variable(a), T.as_tensor_variable(b)
        inputs = [b, a] if self.swap else [a, b]
        return Apply(self, inputs, [(self.out_type or a.type).make_variable()])

    def perform(self, node, inputs, output_storage):
        result = np.multiply(inputs[0], inputs[1])
        if self.out_type is not None:
            result = result.astype(self.out_type.dtype)
        if self.destroy:
            first, *rest = self.destroy
            inputs[first][...] = result
            for i in rest:
                inputs[i][...] = np.nan
            result = inputs[first]
        output_storage[0][0] = result


class InplaceMakerPlugin:
    def __init__(self, op_class, maker):
        self.op_class = op_class
        self.maker = maker
        self.calls: list[list[int]] = []

    @hookimpl
    def tensorjit_register_inplace(self, registry):
        def recording_maker(node, candidates):
            self.calls.append(list(candidates))
            return self.maker(node, candidates)

        registry.add(self.op_class, recording_maker, plugin=PLUGIN)


@contextlib.contextmanager
def inplace_plugin(op_class, maker):
    plugin = InplaceMakerPlugin(op_class, maker)
    table = registries().inplace.table
    assert op_class not in table
    register_plugin(plugin, PLUGIN)
    try:
        assert table[op_class].plugin == PLUGIN
        yield plugin
    finally:
        get_plugin_system().pm.unregister(plugin)
        table.pop(op_class, None)


def _plugin_graph(op_class):
    """``op(x * 2, y)``: input 0 a temporary (destroyable), input 1 the protected y."""
    x, y = T.vectors("x", "y")
    return [x, y], op_class()(x * 2, y)


def _run_plugin_graph(f):
    a, b = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])
    np.testing.assert_array_equal(f(a, b), [8.0, 20.0, 36.0])
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(b, [4.0, 5.0, 6.0])


def _plugin_nodes(f, op_class):
    return [n for n in f.fgraph.apply_nodes if isinstance(n.op, op_class)]


def test_a_well_behaved_plugin_variant_is_used():
    class GoodMul(PluginMul):
        pass

    with inplace_plugin(GoodMul, lambda node, cands: GoodMul(destroy=cands[:1])) as plugin:
        inputs, out = _plugin_graph(GoodMul)
        f = tensorjit.function(inputs, out)
    assert plugin.calls == [[0]]  # only the temporary was offered
    (node,) = _plugin_nodes(f, GoodMul)
    assert node.op.destroy_map == {0: [0]}
    assert f.rewrite_stats.applied["inplace"] == 1
    _run_plugin_graph(f)
    assert GoodMul not in registries().inplace.table


@pytest.mark.host_memory
@pytest.mark.parametrize("target", ["another temporary", "the protected input"])
def test_variant_destroying_an_input_not_requested_is_never_used(target):
    class WrongInputMul(PluginMul):
        pass

    def maker(node, candidates):
        # destroys the input that was NOT requested
        (requested,) = candidates
        return WrongInputMul(destroy=(1 - requested,))

    x, y = T.vectors("x", "y")
    other = y * 3 if target == "another temporary" else y
    with inplace_plugin(WrongInputMul, maker) as plugin:
        f = tensorjit.function([x, y], WrongInputMul()(x * 2, other))
    assert plugin.calls  # it was asked ...
    (node,) = _plugin_nodes(f, WrongInputMul)
    assert not node.op.destroy_map  # ... and its variant was never used
    assert f.rewrite_stats.applied["inplace"] == 0
    assert f.rewrite_stats.rejected_by_plugin[PLUGIN] == 0  # never even proposed
    a, b = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])
    factor = 6.0 if target == "another temporary" else 2.0
    np.testing.assert_array_equal(f(a, b), factor * a * b)
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(b, [4.0, 5.0, 6.0])


@pytest.mark.host_memory
def test_variant_declaring_the_destruction_of_a_protected_input_is_never_used():
    class GreedyMul(PluginMul):
        pass

    def maker(node, candidates):
        return GreedyMul(destroy=(*candidates, 1))  # the request, and y too

    with inplace_plugin(GreedyMul, maker) as plugin:
        inputs, out = _plugin_graph(GreedyMul)
        f = tensorjit.function(inputs, out)
    assert plugin.calls
    (node,) = _plugin_nodes(f, GreedyMul)
    assert not node.op.destroy_map
    assert f.rewrite_stats.applied["inplace"] == 0
    _run_plugin_graph(f)


@pytest.mark.host_memory
def test_variant_that_really_destroys_a_protected_input_is_vetoed_and_counted():
    # The destroy_map honours the request (input 0), but the variant builds its node with
    # the inputs swapped: its input 0 is the protected y. The DestroyHandler vetoes it.
    class SwappingMul(PluginMul):
        pass

    def maker(node, candidates):
        return SwappingMul(destroy=tuple(candidates[:1]), swap=True)

    with inplace_plugin(SwappingMul, maker) as plugin:
        inputs, out = _plugin_graph(SwappingMul)
        f = tensorjit.function(inputs, out)
    assert plugin.calls
    (node,) = _plugin_nodes(f, SwappingMul)
    assert not node.op.destroy_map and not node.op.swap
    assert f.rewrite_stats.applied["inplace"] == 0
    assert f.rewrite_stats.rejected["inplace"] >= 1
    assert f.rewrite_stats.rejected_by_plugin[PLUGIN] >= 1
    _run_plugin_graph(f)


@pytest.mark.host_memory
@pytest.mark.parametrize(
    "out_type",
    [TensorType("float32", (None,)), TensorType("float64", (3,)), TensorType("float64", ())],
    ids=["dtype", "static shape", "ndim"],
)
def test_variant_with_a_different_output_type_is_never_used(out_type):
    class RetypingMul(PluginMul):
        pass

    def maker(node, candidates):
        return RetypingMul(destroy=tuple(candidates[:1]), out_type=out_type)

    with inplace_plugin(RetypingMul, maker) as plugin:
        inputs, out = _plugin_graph(RetypingMul)
        f = tensorjit.function(inputs, out)
    assert plugin.calls
    (node,) = _plugin_nodes(f, RetypingMul)
    assert not node.op.destroy_map and node.op.out_type is None
    assert node.outputs[0].type == TensorType("float64", (None,))
    assert f.rewrite_stats.applied["inplace"] == 0
    _run_plugin_graph(f)


@pytest.mark.host_memory
def test_variant_that_can_not_build_its_node_or_declares_nothing_is_never_used():
    class RefusingMul(PluginMul):
        def make_node(self, a, b):
            if self.destroy:
                raise TypeError("this variant can not be built")
            return super().make_node(a, b)

    class PureMul(PluginMul):
        pass

    for op_class, maker in [
        (RefusingMul, lambda node, cands: RefusingMul(destroy=cands[:1])),
        (PureMul, lambda node, cands: PureMul()),  # "inplace" without a destroy_map
    ]:
        with inplace_plugin(op_class, maker) as plugin:
            inputs, out = _plugin_graph(op_class)
            f = tensorjit.function(inputs, out)
        assert plugin.calls
        assert not _destroyers(f)
        assert f.rewrite_stats.applied["inplace"] == 0
        _run_plugin_graph(f)


# On a device, the copy of x to it is one more buffer the inplace pass may destroy.
@pytest.mark.host_memory
def test_bad_plugin_variants_do_not_disturb_the_tensor_family():
    class WrongInputMul2(PluginMul):
        pass

    tensor_entries = {cls: registries().inplace.table[cls] for cls in (Elemwise, IncSubtensor)}
    with inplace_plugin(WrongInputMul2, lambda node, cands: WrongInputMul2(destroy=(1,))):
        x, y = T.vectors("x", "y")
        f = tensorjit.function([x, y], T.exp(WrongInputMul2()(x * 2, y)) + 1, mode=NO_FUSION)
    assert {cls: registries().inplace.table[cls] for cls in tensor_entries} == tensor_entries
    # the tensor family's variants still apply around the plugin op
    assert sorted(str(n.op) for n in _destroyers(f)) == ["add_inplace{0}", "exp_inplace{0}"]
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    np.testing.assert_allclose(f(a, b), np.exp(2 * a * b) + 1)
    np.testing.assert_array_equal(b, [3.0, 4.0])
