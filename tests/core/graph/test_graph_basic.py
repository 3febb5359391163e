"""Variable, Constant, Apply and Op basics: ownership, creation sites, Op identity."""

import inspect
import os

import numpy as np
import pytest
from helpers.toy_graph import Kind

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.graph import Apply, Constant, FunctionGraph, Op, Variable
from tensorjit.core.graph.traversal import clone_graph
from tensorjit.core.rewrites.db import RewriteDB, RewriteQuery
from tensorjit.core.rewrites.merge import MergeRewriter
from tensorjit.core.rewrites.runner import RewriteStats, run_phases
from tensorjit.tensor.scalar import SCALAR_OPS


class Combine(Op):
    """n inputs of kind "a" -> one output of kind "a"."""

    def make_node(self, *inputs):
        for i in inputs:
            if i.type != Kind("a"):
                raise TypeError(f"Combine wants Kind(a) inputs, got {i.type}")
        return Apply(self, inputs, [Kind("a")()])


class Scale(Op):
    __props__ = ("factor",)

    def __init__(self, factor):
        self.factor = factor

    def make_node(self, x):
        return Apply(self, [x], [x.type()])


class Shift(Op):
    __props__ = ("factor",)

    def __init__(self, factor):
        self.factor = factor

    def make_node(self, x):
        return Apply(self, [x], [x.type()])


class Split(Op):
    def make_node(self, x):
        return Apply(self, [x], [x.type(), x.type()])


def here() -> str:
    """``file:line`` of the caller's current line."""
    frame = inspect.currentframe().f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


# ---------------------------------------------------------------- Variable / Apply


def test_variable_requires_a_type_instance():
    with pytest.raises(TypeError, match="Variable type must be a Type instance, got <class 'int'>"):
        Variable(int)


def test_input_variable_has_no_owner_and_prints_its_name():
    v = Kind()("v")
    assert v.owner is None
    assert v.index is None
    assert v.name == "v"
    assert str(v) == "v"
    assert repr(v) == "v"
    unnamed = Kind("b")()
    assert str(unnamed) == "<Kind(b)>"


def test_each_variable_gets_a_distinct_auto_name():
    a, b = Kind()(), Kind()()
    assert a.auto_name != b.auto_name
    assert a.auto_name.startswith("_")


def test_apply_sets_owner_and_index_of_outputs():
    x, y = Kind()("x"), Kind()("y")
    node = Combine().make_node(x, y)
    assert node.inputs == [x, y]
    assert len(node.outputs) == 1
    out = node.out
    assert out.owner is node
    assert out.index == 0
    assert str(out) == "Combine.out"
    assert str(node) == "Combine(x, y)"


def test_op_call_returns_single_output_or_list():
    x = Kind()("x")
    single = Combine()(x)
    assert isinstance(single, Variable)
    assert single.owner.op == Combine()
    pair = Split()(x)
    assert isinstance(pair, list)
    assert [o.index for o in pair] == [0, 1]
    assert pair[0].owner is pair[1].owner
    assert [str(o) for o in pair] == ["Split.0", "Split.1"]


def test_apply_out_requires_a_single_output():
    node = Split().make_node(Kind()("x"))
    with pytest.raises(ValueError, match="Split has 2 outputs; use .outputs"):
        _ = node.out


def test_apply_rejects_a_non_variable_input():
    with pytest.raises(TypeError, match=r"Combine: input 1 is not a Variable: 3"):
        Apply(Combine(), [Kind()("x"), 3], [Kind()()])


def test_apply_rejects_an_output_owned_by_another_node():
    x = Kind()("x")
    taken = Combine()(x)
    with pytest.raises(ValueError, match="Combine: output 0 already belongs to another Apply"):
        Apply(Combine(), [x], [taken])
    # The existing node is left intact.
    assert taken.owner.inputs == [x]
    assert taken.index == 0


def test_clone_with_new_inputs_retypechecks_and_keeps_names():
    x, y = Kind()("x"), Kind()("y")
    out = Combine()(x)
    out.name = "out"
    node = out.owner.clone_with_new_inputs([y])
    assert node is not out.owner
    assert node.inputs == [y]
    assert node.out.name == "out"
    assert node.out.created_at == out.created_at
    assert out.owner.inputs == [x]
    with pytest.raises(TypeError, match=r"Combine wants Kind\(a\) inputs, got Kind\(b\)"):
        out.owner.clone_with_new_inputs([Kind("b")("z")])


def test_variable_clone_is_a_new_ownerless_variable():
    x = Kind()("x")
    out = Combine()(x)
    out.name = "out"
    cp = out.clone()
    assert cp is not out
    assert cp.owner is None
    assert cp.type == out.type
    assert cp.name == "out"
    assert cp.created_at == out.created_at


# ---------------------------------------------------------------- created_at


def test_created_at_of_a_tensor_constructor_is_this_line():
    line = inspect.currentframe().f_lineno + 1
    x = T.matrix("x")
    filename, recorded_line = x.created_at.rsplit(":", 1)
    assert os.path.samefile(filename, __file__)
    assert int(recorded_line) == line
    y, where = T.matrix("y"), here()
    assert y.created_at == where


def test_created_at_of_derived_variables_points_at_user_code():
    x, y = T.matrix("x"), T.matrix("y")
    z, where = T.exp(x) + y * 2, here()
    assert z.created_at == where
    # Every variable made on that line (exp, mul, the constant 2 and its broadcast) too.
    made_there = [v for v in tensorjit.core.graph.ancestors([z]) if v not in (x, y)]
    assert len(made_there) >= 4
    assert {v.created_at for v in made_there} == {where}


def test_created_at_of_type_call_and_direct_construction():
    a, where_a = Kind()("a"), here()
    b, where_b = Variable(Kind(), name="b"), here()
    c, where_c = Constant(Kind(), 5), here()
    d = Combine()(a, b)
    assert a.created_at == where_a
    assert b.created_at == where_b
    assert c.created_at == where_c
    # Combine.make_node lives in this test module: it is user code, so its line is recorded.
    assert d.created_at.startswith(f"{__file__}:")
    assert d.created_at != where_a


def test_created_at_in_a_helper_function_is_the_helpers_line():
    def make():
        return T.vector("v"), here()

    v, where = make()
    assert v.created_at == where


def test_created_at_survives_cloning_into_a_function_graph():
    x, where_x = T.vector("x"), here()
    y, where_y = T.exp(x), here()
    fgraph = FunctionGraph([x], [y])
    assert fgraph.inputs[0] is not x
    assert fgraph.inputs[0].created_at == where_x
    assert fgraph.outputs[0] is not y
    assert fgraph.outputs[0].created_at == where_y
    _, outs, _ = clone_graph([x], [y])
    assert outs[0].created_at == where_y


def test_describe_names_the_variable_its_type_and_creation_site():
    x, where = T.vector("x"), here()
    assert x.describe() == f"'x' ({x.type}, created at {where})"
    assert T.vector().describe().startswith("<unnamed> (")


# ---------------------------------------------------------------- Op identity


def test_ops_compare_and_hash_by_props():
    assert Scale(2) == Scale(2)
    assert hash(Scale(2)) == hash(Scale(2))
    assert Scale(2) != Scale(3)
    # Same props but another class: different ops.
    assert Scale(2) != Shift(2)
    assert len({Scale(2), Scale(2), Scale(3), Shift(2)}) == 3
    # No props: every instance of the class is the same op.
    assert Combine() == Combine()
    assert hash(Combine()) == hash(Combine())
    assert Combine() != Split()


def test_op_str_shows_props():
    assert str(Scale(2)) == "Scale{factor=2}"
    assert str(Combine()) == "Combine"


def test_op_without_make_node_or_perform_says_so():
    class Bare(Op):
        pass

    with pytest.raises(NotImplementedError, match="Bare must implement make_node"):
        Bare()(Kind()("x"))
    with pytest.raises(NotImplementedError, match="Bare has no perform implementation"):
        Bare().perform(None, [], [])


def _merge_only(fgraph):
    db = RewriteDB()
    db.register("merge", MergeRewriter(), "canonicalize", "m")
    stats = RewriteStats()
    run_phases(fgraph, db.query(RewriteQuery(include=frozenset({"m"}))), stats)
    return stats


def test_equal_ops_applied_to_the_same_inputs_merge():
    x = Kind()("x")
    first, second = Scale(2), Scale(2)
    assert first is not second
    fgraph = FunctionGraph([x], [first(x), second(x), Scale(3)(x)])
    assert len(fgraph.apply_nodes) == 3
    stats = _merge_only(fgraph)
    assert stats.applied["merge"] == 1
    assert len(fgraph.apply_nodes) == 2
    assert fgraph.outputs[0] is fgraph.outputs[1]
    assert fgraph.outputs[2] is not fgraph.outputs[0]
    assert {n.op for n in fgraph.apply_nodes} == {Scale(2), Scale(3)}


def test_equal_tensor_ops_merge_in_a_compiled_function():
    op1 = T.Elemwise(SCALAR_OPS["exp"])
    op2 = T.Elemwise(SCALAR_OPS["exp"])
    assert op1 is not op2 and op1 == op2
    x = T.vector("x")
    f = tensorjit.function([x], [op1(x), op2(x)])
    assert len(f.fgraph.apply_nodes) == 1
    a, b = f(np.array([0.0, 1.0]))
    np.testing.assert_allclose(a, np.exp([0.0, 1.0]))
    np.testing.assert_allclose(b, np.exp([0.0, 1.0]))
    # Outputs are fresh: the merged output is not returned twice as the same buffer.
    assert a is not b


# ---------------------------------------------------------------- Constant


def test_constant_holds_data_and_prints_it():
    c = Constant(Kind(), 42)
    assert c.data == 42
    assert c.owner is None
    assert str(c) == "42"
    assert str(Constant(Kind(), "x" * 30)) == "x" * 17 + "..."
    assert str(Constant(Kind(), 1, name="one")) == "one"


def test_constant_signature_equal_for_equal_type_and_data():
    assert Constant(Kind(), 3).signature() == Constant(Kind(), 3).signature()
    assert Constant(Kind(), 3).signature() != Constant(Kind(), 4).signature()
    assert Constant(Kind("a"), 3).signature() != Constant(Kind("b"), 3).signature()


def test_constant_signature_of_arrays_compares_dtype_shape_and_bytes():
    def sig(data):
        return Constant(Kind(), data).signature()

    assert sig(np.arange(4.0)) == sig(np.arange(4.0))
    assert hash(sig(np.arange(4.0))) == hash(sig(np.arange(4.0)))
    assert sig(np.arange(4.0)) != sig(np.arange(4.0) + 1)
    assert sig(np.zeros(4)) != sig(np.zeros((2, 2)))
    assert sig(np.zeros(2, dtype="float64")) != sig(np.zeros(2, dtype="int64"))
    # Equal values with different bits must not merge (1 / -0.0 != 1 / 0.0) ...
    assert sig(np.array(0.0)) != sig(np.array(-0.0))
    # ... while identical bits do, even for NaN (which is not == to itself).
    assert sig(np.array(np.nan)) == sig(np.array(np.nan))


def test_constant_signature_of_unhashable_data_is_usable():
    a = Constant(Kind(), [1, 2, 3]).signature()
    b = Constant(Kind(), [1, 2, 3]).signature()
    assert a == b
    assert hash(a) == hash(b)
    assert a != Constant(Kind(), [1, 2]).signature()


def test_tensor_constant_signature():
    assert T.constant(np.float64(2.0)).signature() == T.constant(np.float64(2.0)).signature()
    assert T.constant(np.float64(2.0)).signature() != T.constant(np.float32(2.0)).signature()
    assert T.constant([1, 2]).signature() != T.constant([1, 3]).signature()
    # A weak (Python scalar) constant is not interchangeable with a strong one.
    weak, strong = T.constant(2.0), T.constant(np.float64(2.0))
    assert weak.type == strong.type
    assert weak.signature() != strong.signature()


def test_constant_clone_keeps_data_type_and_signature():
    c = Constant(Kind(), 7, name="seven")
    cp = c.clone()
    assert cp is not c
    assert type(cp) is Constant
    assert cp.data == 7 and cp.name == "seven" and cp.type == c.type
    assert cp.signature() == c.signature()
    assert cp.created_at == c.created_at
    tc = T.constant(np.arange(3.0))
    tcp = tc.clone()
    assert type(tcp) is type(tc)
    assert tcp.signature() == tc.signature()


def test_variables_carry_a_free_form_tag():
    x = Kind("a")("x")
    x.tag.test_value = 3
    assert x.tag.test_value == 3
    assert not hasattr(Kind("a")("y").tag, "test_value")
