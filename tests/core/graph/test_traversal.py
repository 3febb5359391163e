"""Graph walks: ancestors, graph_inputs, toposort, clone_graph, clone_replace."""

import sys

import numpy as np
import pytest
from helpers.toy_graph import Combine, Kind, Split

import tensorjit.tensor as T
from tensorjit.core.graph import (
    Constant,
    ancestors,
    clone_graph,
    clone_replace,
    graph_inputs,
    toposort,
)


def var(name, kind="a"):
    return Kind(kind)(name)


def chain(x, n):
    out = x
    for _ in range(n):
        out = Combine()(out)
    return out


def assert_topological(order):
    position = {node: k for k, node in enumerate(order)}
    assert len(position) == len(order), "a node appears twice"
    for node in order:
        for inp in node.inputs:
            if inp.owner is not None and inp.owner in position:
                assert position[inp.owner] < position[node], f"{inp.owner} after {node}"


# ---------------------------------------------------------------- ancestors / inputs


def test_ancestors_lists_outputs_first_then_everything_they_depend_on():
    x, y = var("x"), var("y")
    a = Combine()(x, y)
    b = Combine()(a, x)
    result = ancestors([b])
    assert result[0] is b
    assert set(result) == {b, a, x, y}
    assert len(result) == 4


def test_ancestors_stops_at_blockers_but_includes_them():
    x, y = var("x"), var("y")
    a = Combine()(x, y)
    b = Combine()(a)
    assert set(ancestors([b], blockers=[a])) == {b, a}


def test_graph_inputs_are_the_ownerless_ancestors_including_constants():
    x, y = var("x"), var("y")
    c = Constant(Kind(), 1)
    out = Combine()(Combine()(x, c), y, x)
    found = graph_inputs([out])
    assert set(found) == {x, y, c}
    assert len(found) == 3


def test_graph_inputs_with_blockers_returns_the_blockers():
    x, y = var("x"), var("y")
    a = Combine()(x)
    out = Combine()(a, y)
    assert set(graph_inputs([out], blockers=[a])) == {a, y}


# ---------------------------------------------------------------- toposort


def test_toposort_orders_inputs_before_clients():
    x, y = var("x"), var("y")
    a = Combine("a")(x)
    b = Combine("b")(a, y)
    c = Combine("c")(a, x)
    d = Combine("d")(c, b, a)
    order = toposort([d])
    assert set(order) == {a.owner, b.owner, c.owner, d.owner}
    assert_topological(order)
    assert order[-1] is d.owner
    assert order[0] is a.owner


def test_toposort_of_several_outputs_visits_shared_nodes_once():
    x = var("x")
    shared_node = Combine("s")(x)
    outs = [Combine("p")(shared_node), Combine("q")(shared_node), shared_node]
    order = toposort(outs)
    assert len(order) == 3
    assert order.count(shared_node.owner) == 1
    assert_topological(order)


def test_toposort_with_blockers_excludes_what_lies_behind_them():
    x = var("x")
    a = Combine("a")(x)
    b = Combine("b")(a)
    c = Combine("c")(b)
    assert toposort([c], blockers=[b]) == [c.owner]
    assert toposort([c], blockers=[c]) == []
    assert toposort([x]) == []


def test_toposort_of_a_multi_output_node():
    x = var("x")
    p, q = Split()(x)
    out = Combine()(q, p)
    order = toposort([out])
    assert order == [p.owner, out.owner]


def test_toposort_detects_a_cycle():
    x = var("x")
    a = Combine("a")(x)
    b = Combine("b")(a)
    a.owner.inputs[0] = b  # corrupt the graph by hand: a <- b <- a
    with pytest.raises(ValueError, match="graph contains a cycle through"):
        toposort([b])


def test_deep_chain_does_not_hit_the_recursion_limit():
    depth = 5000
    assert depth > sys.getrecursionlimit()
    x = var("x")
    out = chain(x, depth)
    order = toposort([out])
    assert len(order) == depth
    assert order[0].inputs == [x]
    assert order[-1] is out.owner
    assert_topological(order)
    assert len(ancestors([out])) == depth + 1
    assert graph_inputs([out]) == [x]
    (new_x,), (new_out,), _ = clone_graph([x], [out])
    assert len(toposort([new_out])) == depth
    assert graph_inputs([new_out]) == [new_x]
    y = var("y")
    (replaced,), _ = clone_replace([out], {x: y})
    assert graph_inputs([replaced]) == [y]


def test_deep_tensor_chain_compiles():
    import tensorjit

    x = T.vector("x")
    out = x
    for _ in range(3000):
        out = out + 1.0
    f = tensorjit.function([x], out)
    np.testing.assert_allclose(f(np.zeros(2)), [3000.0, 3000.0])


# ---------------------------------------------------------------- clone_graph


def test_clone_graph_makes_an_independent_copy():
    x, y = var("x"), var("y")
    c = Constant(Kind(), 5)
    a = Combine("a")(x, c)
    out = Combine("b")(a, y)
    out.name = "out"
    (nx, ny), (nout,), memo = clone_graph([x, y], [out])

    assert nx is not x and ny is not y and nout is not out
    assert (nx.name, ny.name, nout.name) == ("x", "y", "out")
    assert nx.type == x.type and nx.owner is None
    old_nodes = set(toposort([out]))
    new_nodes = toposort([nout])
    assert len(new_nodes) == 2
    assert not old_nodes & set(new_nodes)
    assert [n.op for n in new_nodes] == [Combine("a"), Combine("b")]
    assert set(graph_inputs([nout])) == {nx, ny, c}
    # Constants are immutable and shared; everything else maps to a new object.
    assert memo[c] is c
    assert memo[x] is nx and memo[a] is not a and memo[out] is nout

    # Editing the copy leaves the original alone.
    nout.owner.inputs[1] = nx
    assert out.owner.inputs == [a, y]
    assert a.owner.inputs == [x, c]


def test_clone_graph_clones_free_variables_it_meets():
    x, free = var("x"), var("free")
    out = Combine()(x, free)
    (nx,), (nout,), memo = clone_graph([x], [out])
    new_free = nout.owner.inputs[1]
    assert new_free is not free
    assert new_free.name == "free"
    assert memo[free] is new_free


def test_clone_graph_of_an_output_that_is_an_input():
    x = var("x")
    (nx,), (nout,), _ = clone_graph([x], [x])
    assert nx is nout
    assert nx is not x


# ---------------------------------------------------------------- clone_replace


def test_clone_replace_substitutes_and_leaves_the_original_alone():
    x, y, z = var("x"), var("y"), var("z")
    a = Combine("a")(x, y)
    out = Combine("b")(a, x)
    (new_out,), memo = clone_replace([out], {x: z})
    assert new_out is not out
    assert set(graph_inputs([new_out])) == {z, y}
    new_a = new_out.owner.inputs[0]
    assert new_a.owner.op == Combine("a")
    assert new_a.owner.inputs == [z, y]
    assert new_out.owner.inputs[1] is z
    assert memo[x] is z and memo[out] is new_out and memo[a] is new_a
    # The original graph is untouched.
    assert out.owner.inputs == [a, x]
    assert a.owner.inputs == [x, y]


def test_clone_replace_of_an_intermediate_variable():
    x, y = var("x"), var("y")
    a = Combine("a")(x)
    out = Combine("b")(a, a)
    (new_out,), _ = clone_replace([out], {a: y})
    assert new_out.owner.inputs == [y, y]
    assert graph_inputs([new_out]) == [y]


def test_clone_replace_does_not_recurse_into_the_replacement():
    x = var("x")
    doubled = Combine("double")(x)
    out = Combine("out")(x)
    (new_out,), _ = clone_replace([out], {x: doubled})
    assert new_out.owner.inputs == [doubled]
    # The replacement still reads the original x.
    assert doubled.owner.inputs == [x]


def test_clone_replace_of_an_output():
    x, y = var("x"), var("y")
    out = Combine()(x)
    (new_out,), _ = clone_replace([out], {out: y})
    assert new_out is y


def test_clone_replace_copy_inputs_clones_unreplaced_inputs():
    x, y = var("x"), var("y")
    out = Combine()(x, y)
    (new_out,), memo = clone_replace([out], copy_inputs=True)
    new_x, new_y = new_out.owner.inputs
    assert new_x is not x and new_y is not y
    assert (new_x.name, new_y.name) == ("x", "y")
    assert new_out.owner is not out.owner
    assert memo[x] is new_x


def test_clone_replace_with_an_incompatible_type_names_both_variables():
    x = var("x")
    wrong = var("wrong", kind="b")
    out = Combine()(x)
    message = r"cannot replace 'x' \(Kind\(a\).*with 'wrong' \(Kind\(b\)"
    with pytest.raises(TypeError, match=message):
        clone_replace([out], {x: wrong})
    assert out.owner.inputs == [x]


def test_clone_replace_of_tensors_with_an_incompatible_type():
    x = T.matrix("x")
    v = T.vector("v")
    out = T.exp(x)
    with pytest.raises(TypeError, match=r"cannot replace 'x' .* with 'v' .*incompatible"):
        clone_replace([out], {x: v})


def test_clone_replace_of_one_output_of_a_multi_output_node():
    # Replacing output 0 of a two-output node must not be undone by cloning that node
    # for the sake of its other output.
    x, c = var("x"), var("c")
    first, second = Split()(x)
    out = Combine()(first, second)
    (new_out,), memo = clone_replace([out], {first: c})
    assert memo[first] is c
    assert new_out.owner.inputs[0] is c
    assert new_out.owner.inputs[1] is second
