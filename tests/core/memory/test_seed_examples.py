"""The examples of the memory pages, run with tensorjit in place of theano/pytensor.

Pages: "Understanding Memory Aliasing for Speed and Correctness" (seeds 000, 001, 004:
three renderings of one page) and "Views and inplace operations" (seed 002). Each
testcode block is reproduced, and its testoutput (or what the prose promises) asserted.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit import Apply, In, Op, Out
from tensorjit.core.registries import OpRegistry, RegistrationError
from tensorjit.tensor.inplace import add_inplace
from tensorjit.tensor.type import TensorType

shares = np.shares_memory


# ================================================================ the aliasing page


@pytest.mark.host_memory
def test_borrow_blocks_as_one_doctest_session(capsys):
    """The ``.. testcode:: borrow`` group, in order, in one namespace (as Sphinx runs it)."""
    np_array = np.ones(2, dtype="float32")

    s_default = tensorjit.shared(np_array)
    s_false = tensorjit.shared(np_array, borrow=False)
    s_true = tensorjit.shared(np_array, borrow=True)

    np_array += 1  # now it is an array of 2.0 s

    with np.printoptions(legacy="1.13"):  # the page's output predates NumPy 1.14 printing
        print(s_default.get_value())
        print(s_false.get_value())
        print(s_true.get_value())
    assert capsys.readouterr().out == "[ 1.  1.]\n[ 1.  1.]\n[ 2.  2.]\n"
    # "s_true is using the np_array object as its internal buffer" (on the CPU)
    assert s_true.get_value(borrow=True) is np_array

    # Retrieving
    s = tensorjit.shared(np_array)
    v_false = s.get_value(borrow=False)  # N.B. borrow default is False
    v_true = s.get_value(borrow=True)
    assert not shares(v_false, v_true)
    assert v_true is s.get_value(borrow=True)  # the internal buffer itself, on the CPU
    v_internal = s.get_value(borrow=True, return_internal_type=True)
    assert v_internal is v_true  # "never casts the internal object": constant time
    assert isinstance(v_internal, np.ndarray) and v_internal.dtype == np.float32
    # "borrow=False in conjunction with return_internal_type=True ... a deep copy"
    deep = s.get_value(borrow=False, return_internal_type=True)
    assert type(deep) is np.ndarray and not shares(deep, v_internal)
    for value in (v_false, v_true, v_internal, deep):
        np.testing.assert_array_equal(value, [2.0, 2.0])
    assert not shares(v_true, np_array)  # shared(np_array) without borrow copied it

    # Assigning (testsetup: some_inplace_fn returns its argument)
    def some_inplace_fn(v):
        return v

    buffer = s.get_value(borrow=True)
    s.set_value(some_inplace_fn(s.get_value(borrow=True)), borrow=True)
    assert s.get_value(borrow=True) is buffer  # "as fast as an in-place update"
    np.testing.assert_array_equal(s.get_value(), [2.0, 2.0])


@pytest.mark.host_memory
def test_manual_update_pattern_with_a_real_inplace_fn_makes_no_copy():
    s = tensorjit.shared(np.arange(4.0), name="s")
    read = tensorjit.function([], s * 1)
    calls = []

    def some_inplace_fn(v):
        calls.append(v)
        v *= 3
        v += 1
        return v

    buffer = s.get_value(borrow=True)
    for _ in range(3):
        s.set_value(some_inplace_fn(s.get_value(borrow=True)), borrow=True)
        # no copy anywhere: the function got the internal buffer, and it stays the storage
        assert calls[-1] is buffer
        assert s.get_value(borrow=True) is buffer
        assert s.storage[0] is buffer
    expected = np.arange(4.0)
    for _ in range(3):
        expected = expected * 3 + 1
    np.testing.assert_array_equal(s.get_value(), expected)
    np.testing.assert_array_equal(read(), expected)  # compiled functions see it


@pytest.mark.host_memory
def test_manual_update_pattern_returning_a_new_array_adopts_it():
    # A function that can not work in place returns a new buffer: borrow=True adopts it.
    s = tensorjit.shared(np.arange(3.0), name="s")
    new = np.zeros(5)
    s.set_value((lambda v: new)(s.get_value(borrow=True)), borrow=True)
    assert s.get_value(borrow=True) is new
    np.testing.assert_array_equal(tensorjit.function([], s + 1)(), np.ones(5))


@pytest.mark.host_memory
def test_in_out_borrow_example_uses_the_argument_as_workspace():
    """``f = function([In(x, borrow=True)], Out(y, borrow=True))`` with ``y = 2 * x``:
    "your input may be reused as a buffer (and overwritten!)"."""
    x = T.matrix()
    y = 2 * x
    f = tensorjit.function([In(x, borrow=True)], Out(y, borrow=True))

    arg = np.arange(6.0).reshape(2, 3)
    out = f(arg)
    np.testing.assert_array_equal(out, 2 * np.arange(6.0).reshape(2, 3))
    # the multiplication ran in the borrowed argument's buffer
    (node,) = f.fgraph.apply_nodes
    ((destroyed,),) = node.op.destroy_map.values()
    assert node.inputs[destroyed] is f.fgraph.inputs[0]
    assert f.rewrite_stats.applied["inplace"] == 1
    np.testing.assert_array_equal(arg, out)

    # The default (no borrowing): the argument is user memory, the output is fresh.
    g = tensorjit.function([x], y)
    arg2 = np.arange(6.0).reshape(2, 3)
    out2 = g(arg2)
    np.testing.assert_array_equal(arg2, np.arange(6.0).reshape(2, 3))
    assert not shares(out2, arg2)
    assert not any(n.op.destroy_map for n in g.fgraph.apply_nodes)


def test_in_borrow_out_default_returns_user_memory_even_when_computed_in_the_argument():
    x = T.matrix()
    f = tensorjit.function([In(x, borrow=True)], 2 * x)
    arg = np.ones((2, 2))
    out = f(arg)
    np.testing.assert_array_equal(out, [[2.0, 2.0], [2.0, 2.0]])
    assert not shares(out, arg)  # not Out(borrow=True): the caller owns the result
    out[:] = 0
    np.testing.assert_array_equal(f(np.ones((2, 2))), [[2.0, 2.0], [2.0, 2.0]])


# ================================================================ views and inplace page


def test_inplace_ops_are_refused_by_default():
    # "Theano does not allow the end user to use inplace operations by default"
    x, y = T.dscalars("x", "y")
    with pytest.raises(TypeError, match=r"inplace op add_inplace.*accept_inplace=True"):
        tensorjit.function([x, y], add_inplace(x, y))
    with pytest.raises(TypeError, match=r"pass accept_inplace=True"):
        tensorjit.function([x, y], [T.log(x), T.log(add_inplace(x, y))])


def _page_graph():
    x, y = T.dscalars("x", "y")
    r1 = T.log(x)
    # r2 is x AFTER the add_inplace - x still represents the value before adding y
    r2 = add_inplace(x, y)
    # r3 is log(x) using the x from BEFORE the add_inplace
    r3 = T.log(x)
    # this is log(x) using the x from AFTER the add_inplace (so it's like log(x + y))
    r4 = T.log(r2)
    return x, y, {"r1": r1, "r2": r2, "r3": r3, "r4": r4}


ORDERS = list(itertools.permutations(["r1", "r2", "r3", "r4"]))


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
@pytest.mark.parametrize("mutable", [False, True], ids=["plain x", "mutable x"])
def test_page_example_log_before_add_inplace_in_every_output_order(order, mutable):
    x, y, r = _page_graph()
    x_in = In(x, mutable=True) if mutable else x
    f = tensorjit.function([x_in, y], [r[name] for name in order], accept_inplace=True)
    x_val, y_val = np.array(2.0), np.array(3.0)
    got = dict(zip(order, f(x_val, y_val), strict=True))

    assert got["r1"] == got["r3"] == np.log(2.0)  # log(x) from BEFORE the add
    assert got["r2"] == 5.0
    assert got["r4"] == np.log(5.0)  # log(x + y)
    if mutable:
        assert x_val == 5.0  # the 0-d argument was the buffer add_inplace wrote into
    else:
        assert x_val == 2.0  # not mutable: add_inplace worked on a private copy
    assert y_val == 3.0
    assert not shares(got["r2"], x_val)  # an output is never the caller's array


@pytest.mark.host_memory
@pytest.mark.parametrize("mutable", [False, True])
def test_page_example_runs_the_logarithm_before_the_addition(mutable):
    # "it is imperative to do the logarithm before the addition"
    x, z = T.vectors("x", "z")
    y = T.log(x)
    x2 = add_inplace(x, z)
    f = tensorjit.function([In(x, mutable=mutable), z], [x2, y], accept_inplace=True)
    order = [str(n.op) for n in f.fgraph.toposort()]
    if mutable:
        assert order.index("log") < order.index("add_inplace{0}")
    else:  # x may not be destroyed: add_inplace works on a private copy of it
        assert order.index("DeepCopy") < order.index("add_inplace{0}")
    xv = np.array([1.0, 2.0])
    got_x2, got_y = f(xv, np.array([1.0, 1.0]))
    np.testing.assert_allclose(got_y, np.log([1.0, 2.0]))
    np.testing.assert_allclose(got_x2, [2.0, 3.0])
    np.testing.assert_array_equal(xv, [2.0, 3.0] if mutable else [1.0, 2.0])


def test_page_example_is_repeatable_across_calls():
    x, y, r = _page_graph()
    f = tensorjit.function([In(x, mutable=True), y], list(r.values()), accept_inplace=True)
    for x0 in (1.0, 2.0, 7.5):
        x_val = np.array(x0)
        r1, r2, r3, r4 = f(x_val, 0.5)
        assert r1 == r3 == np.log(x0)
        assert r2 == x0 + 0.5 and r4 == np.log(x0 + 0.5)
        assert x_val == x0 + 0.5


# ---------------------------------------------------------------- view_map examples


class ViewsOrCopies(Op):
    """Output k is ``inputs[src][::-1]``: a view (declared in view_map) or a fresh copy.

    ``spec``: one ``(kind, src)`` per output, kind "view" or "copy".
    """

    __props__ = ("spec",)

    def __init__(self, spec):
        self.spec = tuple(spec)
        self.view_map = {k: [src] for k, (kind, src) in enumerate(self.spec) if kind == "view"}

    def make_node(self, *inputs):
        inputs = [T.as_tensor_variable(i) for i in inputs]
        return Apply(self, inputs, [inputs[src].type.make_variable() for _, src in self.spec])

    def perform(self, node, inputs, output_storage):
        for k, (kind, src) in enumerate(self.spec):
            view = inputs[src][::-1]
            output_storage[k][0] = view if kind == "view" else view.copy()


VIEW_MAP_EXAMPLES = {
    # myop.view_map = {0: [0]} # first output is a view of first input
    "{0: [0]}": (("view", 0),),
    # myop.view_map = {0: [1]} # first output is a view of second input
    "{0: [1]}": (("view", 1),),
    # myop.view_map = {1: [0]} # second output is a view of first input
    "{1: [0]}": (("copy", 1), ("view", 0)),
    # {0: [0], 1: [1]}: first output a view of first input AND second of second input
    "{0: [0], 1: [1]}": (("view", 0), ("view", 1)),
    # {0: [0], 1: [0]}: both outputs are views of the first input
    "{0: [0], 1: [0]}": (("view", 0), ("view", 0)),
}


@pytest.mark.parametrize("example", list(VIEW_MAP_EXAMPLES))
def test_view_map_examples_outputs_never_alias_inputs_or_each_other(example):
    op = ViewsOrCopies(VIEW_MAP_EXAMPLES[example])
    assert str(op.view_map).replace("'", "") == example
    x, y = T.vectors("x", "y")
    outs = op(x, y)
    outs = outs if isinstance(outs, list) else [outs]
    f = tensorjit.function([x, y], outs, on_unused_input="ignore")
    xv, yv = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])
    got = f(xv, yv)
    args = (xv, yv)
    for out, (_, src) in zip(got, op.spec, strict=True):
        np.testing.assert_array_equal(out, args[src][::-1])
        assert not shares(out, xv) and not shares(out, yv)
    if len(got) == 2:
        assert not shares(got[0], got[1])
    for out in got:
        out[:] = -1  # the caller owns the outputs
    np.testing.assert_array_equal(xv, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(yv, [4.0, 5.0, 6.0])


def test_view_map_single_view_output_is_a_copy_not_the_input():
    x = T.vector("x")
    view = ViewsOrCopies((("view", 0),))(x)
    f = tensorjit.function([x], view)
    arg = np.array([1.0, 2.0, 3.0])
    out = f(arg)
    assert not shares(out, arg)
    np.testing.assert_array_equal(out, [3.0, 2.0, 1.0])
    out[0] = 100.0
    np.testing.assert_array_equal(arg, [1.0, 2.0, 3.0])


@pytest.mark.host_memory
def test_readers_of_a_declared_view_run_before_a_destroyer_of_its_input():
    x, z = T.vectors("x", "z")
    view = ViewsOrCopies((("view", 0),))(x)
    before = T.log(view)
    after = add_inplace(x, z)
    f = tensorjit.function([In(x, mutable=True), z], [after, before], accept_inplace=True)
    xv = np.array([1.0, 2.0, 4.0])
    got_after, got_before = f(xv, np.array([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(got_before, np.log([4.0, 2.0, 1.0]))
    np.testing.assert_allclose(got_after, [2.0, 3.0, 5.0])
    np.testing.assert_array_equal(xv, [2.0, 3.0, 5.0])


def test_view_map_of_several_inputs_is_not_supported():
    # myop.view_map = {0: [0, 1]} # THIS IS NOT SUPPORTED YET!
    class TwoInputView(Op):
        view_map = {0: [0, 1]}

    class TwoInputDestroy(Op):
        destroy_map = {0: [0, 1]}  # "unlike for views, the previous line is legal"

    registry = OpRegistry()  # a private registry: the process-wide one only grows
    with pytest.raises(RegistrationError, match=r"view of exactly one input, got \[0, 1\]"):
        registry.add(TwoInputView, "test-views")
    registry.add(TwoInputDestroy, "test-views")
    assert registry.families["test-views"] == [TwoInputDestroy]


# ---------------------------------------------------------------- destroy_map examples


class AddOneInPlace(Op):
    """Output k is ``inputs[src] + 1``; when it lists destroyed inputs, every destroyed
    input gets ``+= 1`` in place and the output is the buffer of ``src``.

    ``spec``: one ``(src, destroyed)`` per output.
    """

    __props__ = ("spec",)

    def __init__(self, spec):
        self.spec = tuple((src, tuple(d)) for src, d in spec)
        self.destroy_map = {k: list(d) for k, (_, d) in enumerate(self.spec) if d}

    def make_node(self, *inputs):
        inputs = [T.as_tensor_variable(i) for i in inputs]
        return Apply(self, inputs, [inputs[src].type.make_variable() for src, _ in self.spec])

    def perform(self, node, inputs, output_storage):
        destroyed = sorted({i for _, d in self.spec for i in d})
        for i in destroyed:
            inputs[i] += 1
        for k, (src, d) in enumerate(self.spec):
            output_storage[k][0] = inputs[src] if d else inputs[src] + 1


DESTROY_MAP_EXAMPLES = {
    # myop.destroy_map = {0: [0]} # first output operates inplace on first input
    "{0: [0]}": ((0, (0,)),),
    # myop.destroy_map = {0: [1]} # first output operates inplace on second input
    "{0: [1]}": ((1, (1,)),),
    # myop.destroy_map = {1: [0]} # second output operates inplace on first input
    "{1: [0]}": ((1, ()), (0, (0,))),
    # {0: [0], 1: [1]}: first output inplace on first input AND second on second input
    "{0: [0], 1: [1]}": ((0, (0,)), (1, (1,))),
    # {0: [0], 1: [0]}: second output *ALSO* operates inplace on first input
    "{0: [0], 1: [0]}": ((0, (0,)), (0, (0,))),
    # {0: [0, 1]}: first output operates inplace on both the first and second input
    "{0: [0, 1]}": ((0, (0, 1)),),
}


@pytest.mark.parametrize("example", list(DESTROY_MAP_EXAMPLES))
@pytest.mark.parametrize("mutable", [False, True], ids=["plain inputs", "mutable inputs"])
def test_destroy_map_examples_compute_right_and_destroy_only_what_they_may(example, mutable):
    op = AddOneInPlace(DESTROY_MAP_EXAMPLES[example])
    assert str(op.destroy_map).replace("'", "") == example
    x, y = T.vectors("x", "y")
    outs = op(x, y)
    outs = outs if isinstance(outs, list) else [outs]
    readers = [T.log(x), T.log(y)]  # the values from BEFORE the destruction
    f = tensorjit.function(
        [In(x, mutable=mutable), In(y, mutable=mutable)],
        outs + readers,
        accept_inplace=True,
        # without the inplace pass, the op's own destroy_map is the only destroyer
        mode=tensorjit.FAST_RUN.excluding("inplace"),
    )
    xv, yv = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    *got, log_x, log_y = f(xv, yv)
    np.testing.assert_allclose(log_x, np.log([1.0, 2.0]))
    np.testing.assert_allclose(log_y, np.log([3.0, 4.0]))
    originals = (np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    for out, (src, _) in zip(got, op.spec, strict=True):
        np.testing.assert_array_equal(out, originals[src] + 1)
        assert not shares(out, xv) and not shares(out, yv)
    destroyed = {i for _, d in op.spec for i in d}
    for i, arg in enumerate((xv, yv)):
        if mutable and i in destroyed:
            np.testing.assert_array_equal(arg, originals[i] + 1)
        else:
            np.testing.assert_array_equal(arg, originals[i])


class SumWithScratch(Op):
    """ "Destructive Operations": uses its input as scratch space (so declares it
    destroyed) although the output, a scalar sum, does not live in that buffer."""

    destroy_map = {0: [0]}

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [TensorType(x.type.dtype, ()).make_variable()])

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        np.cumsum(x, out=x)  # temporary calculations right in the input
        total = np.array(x[-1])
        x[...] = np.nan
        output_storage[0][0] = total


@pytest.mark.parametrize("mutable", [False, True])
def test_an_op_corrupting_its_input_runs_after_its_readers(mutable):
    x = T.vector("x")
    total = SumWithScratch()(x)
    f = tensorjit.function([In(x, mutable=mutable)], [x * 2, total, T.exp(x)], accept_inplace=True)
    arg = np.array([1.0, 2.0, 3.0])
    doubled, got_total, exps = f(arg)
    np.testing.assert_array_equal(doubled, [2.0, 4.0, 6.0])
    assert got_total == 6.0
    np.testing.assert_allclose(exps, np.exp([1.0, 2.0, 3.0]))
    if mutable:
        assert np.isnan(arg).all()  # the caller allowed the corruption
    else:
        np.testing.assert_array_equal(arg, [1.0, 2.0, 3.0])
