"""FunctionGraph: clients, replace, pruning, transactions with rollback, features."""

from collections import Counter

import pytest
from helpers.toy_graph import Fn, Kind

import tensorjit.tensor as T
from tensorjit.core.graph import (
    OUTPUT,
    Constant,
    Feature,
    FunctionGraph,
    InconsistencyError,
    MissingInputError,
)

f, g, h, k = Fn("f"), Fn("g"), Fn("h"), Fn("k")


def var(name, kind="a"):
    return Kind(kind)(name)


def snapshot(fgraph):
    """Everything a rollback must restore."""
    return {
        "inputs": list(fgraph.inputs),
        "outputs": list(fgraph.outputs),
        "apply_nodes": set(fgraph.apply_nodes),
        "variables": set(fgraph.variables),
        "node_inputs": {node: list(node.inputs) for node in fgraph.apply_nodes},
        "clients": {v: Counter(list(c)) for v, c in fgraph.clients.items()},
    }


def assert_consistent(fgraph):
    """clients, apply_nodes and variables agree with the nodes' inputs and the outputs."""
    expected = {v: Counter() for v in fgraph.variables}
    for node in fgraph.apply_nodes:
        for i, inp in enumerate(node.inputs):
            assert inp in fgraph.variables, f"{inp} (input of {node}) is not in variables"
            expected[inp][(node, i)] += 1
        for out in node.outputs:
            assert out in fgraph.variables
    for i, out in enumerate(fgraph.outputs):
        expected[out][(OUTPUT, i)] += 1
    actual = {v: Counter(list(c)) for v, c in fgraph.clients.items()}
    assert actual == expected
    reachable = set(fgraph.toposort())
    assert reachable == fgraph.apply_nodes, "apply_nodes holds unreachable (unpruned) nodes"


class Recorder(Feature):
    def __init__(self):
        self.events = []

    def on_attach(self, fgraph):
        self.events.append(("attach",))

    def on_detach(self, fgraph):
        self.events.append(("detach",))

    def on_import(self, fgraph, node, reason):
        self.events.append(("import", node, reason))

    def on_prune(self, fgraph, node, reason):
        self.events.append(("prune", node, reason))

    def on_change_input(self, fgraph, node, i, old, new, reason):
        self.events.append(("change", node, i, old, new, reason))

    def on_validate(self, fgraph, replacements, reason):
        self.events.append(("validate", list(replacements), reason))

    def kinds(self):
        return [e[0] for e in self.events]


class Veto(Feature):
    """Vetoes any transaction while ``active``."""

    def __init__(self, active=True):
        self.active = active
        self.calls = 0

    def on_validate(self, fgraph, replacements, reason):
        self.calls += 1
        if self.active:
            raise InconsistencyError(f"vetoed {reason}")


# ---------------------------------------------------------------- structure


def test_clients_bookkeeping():
    x, y = var("x"), var("y")
    a = f(x, y)
    out = g(a, x)
    fgraph = FunctionGraph([x, y], [out], clone=False)
    assert fgraph.apply_nodes == {a.owner, out.owner}
    assert fgraph.variables == {x, y, a, out}
    assert Counter(fgraph.clients_of(x)) == Counter([(a.owner, 0), (out.owner, 1)])
    assert fgraph.clients_of(y) == [(a.owner, 1)]
    assert fgraph.clients_of(a) == [(out.owner, 0)]
    assert fgraph.clients_of(out) == [(OUTPUT, 0)]
    assert_consistent(fgraph)


def test_same_variable_used_twice_by_one_node_and_as_two_outputs():
    x = var("x")
    a = f(x, x)
    fgraph = FunctionGraph([x], [a, a, x], clone=False)
    assert Counter(fgraph.clients_of(x)) == Counter([(a.owner, 0), (a.owner, 1), (OUTPUT, 2)])
    assert Counter(fgraph.clients_of(a)) == Counter([(OUTPUT, 0), (OUTPUT, 1)])
    assert_consistent(fgraph)


def test_constants_are_imported_with_clients():
    x = var("x")
    c = Constant(Kind(), 3)
    out = f(x, c)
    fgraph = FunctionGraph([x], [out], clone=False)
    assert c in fgraph.variables
    assert fgraph.clients_of(c) == [(out.owner, 1)]


def test_default_construction_clones_the_graph():
    x = var("x")
    out = f(x)
    fgraph = FunctionGraph([x], [out])
    assert fgraph.inputs[0] is not x
    assert fgraph.outputs[0] is not out
    assert fgraph.memo[x] is fgraph.inputs[0]
    assert fgraph.memo[out] is fgraph.outputs[0]
    assert out.owner not in fgraph.apply_nodes
    (node,) = fgraph.apply_nodes
    assert node.op == f and node.inputs == [fgraph.inputs[0]]
    # Changing the graph leaves the user's graph alone.
    fgraph.replace(fgraph.outputs[0], fgraph.inputs[0])
    assert out.owner.inputs == [x]


def test_missing_input_error_names_the_variable():
    x, y = var("x"), var("y")
    out = f(x, g(y))
    with pytest.raises(MissingInputError, match=r"the graph needs 'y' \(Kind\(a\), created at"):
        FunctionGraph([x], [out])
    assert issubclass(MissingInputError, ValueError)


def test_input_with_an_owner_is_rejected():
    x = var("x")
    a = f(x)
    with pytest.raises(ValueError, match="FunctionGraph input .* has an owner"):
        FunctionGraph([a], [g(a)], clone=False)


# ---------------------------------------------------------------- replace and pruning


def test_replace_redirects_clients_and_prunes_the_unused_subgraph():
    x, y = var("x"), var("y")
    a = f(x)
    b = g(a)
    out = h(b, y)
    rec = Recorder()
    fgraph = FunctionGraph([x, y], [out], features=[rec], clone=False)
    rec.events.clear()
    fgraph.replace(b, y, reason="test")
    assert out.owner.inputs == [y, y]
    assert fgraph.apply_nodes == {out.owner}
    assert fgraph.variables == {x, y, out}
    assert a not in fgraph.clients and b not in fgraph.clients
    assert fgraph.clients_of(x) == []
    assert Counter(fgraph.clients_of(y)) == Counter([(out.owner, 0), (out.owner, 1)])
    assert ("change", out.owner, 0, b, y, "test") in rec.events
    pruned = [e[1] for e in rec.events if e[0] == "prune"]
    assert pruned == [b.owner, a.owner]
    assert_consistent(fgraph)


def test_replace_imports_the_new_subgraph():
    x = var("x")
    a = f(x)
    out = g(a)
    fgraph = FunctionGraph([x], [out], clone=False)
    new = k(h(x))
    fgraph.replace(a, new)
    assert out.owner.inputs == [new]
    assert fgraph.apply_nodes == {out.owner, new.owner, new.owner.inputs[0].owner}
    assert_consistent(fgraph)


def test_replace_keeps_nodes_that_still_have_clients():
    x = var("x")
    a = f(x)
    out1, out2 = g(a), h(a)
    fgraph = FunctionGraph([x], [out1, out2], clone=False)
    fgraph.replace(out1, x)
    assert fgraph.apply_nodes == {a.owner, out2.owner}
    assert fgraph.clients_of(a) == [(out2.owner, 0)]
    assert fgraph.outputs == [x, out2]
    assert_consistent(fgraph)


def test_unused_constant_is_pruned():
    x = var("x")
    c = Constant(Kind(), 3)
    a = f(x, c)
    fgraph = FunctionGraph([x], [g(a)], clone=False)
    fgraph.replace(a, x)
    assert c not in fgraph.variables
    assert c not in fgraph.clients
    assert_consistent(fgraph)


def test_replace_of_a_variable_outside_the_graph():
    x = var("x")
    fgraph = FunctionGraph([x], [f(x)], clone=False)
    with pytest.raises(ValueError, match="cannot replace 'stranger' .*: it is not in this graph"):
        fgraph.replace(var("stranger"), x)


def test_replace_with_an_incompatible_type_names_both_variables():
    x = var("x")
    a = f(x)
    fgraph = FunctionGraph([x], [g(a)], clone=False)
    wrong = var("wrong", kind="b")
    with pytest.raises(
        TypeError,
        match=r"cannot replace <unnamed> \(Kind\(a\).* by 'wrong' \(Kind\(b\).*reason: why",
    ):
        fgraph.replace(a, wrong, reason="why")
    assert_consistent(fgraph)


def test_replace_with_a_variable_needing_a_missing_input():
    x, y = var("x"), var("y")
    a = f(x)
    fgraph = FunctionGraph([x], [g(a)], clone=False)
    with pytest.raises(MissingInputError, match="'y'"):
        fgraph.replace(a, h(y))


def test_change_of_an_output():
    x, y = var("x"), var("y")
    a = f(x)
    out = g(a)
    rec = Recorder()
    fgraph = FunctionGraph([x, y], [out, x], features=[rec], clone=False)
    rec.events.clear()
    new_out = h(y)
    fgraph.change_node_input(OUTPUT, 0, new_out, reason="swap")
    assert fgraph.outputs == [new_out, x]
    assert fgraph.apply_nodes == {new_out.owner}
    assert fgraph.clients_of(new_out) == [(OUTPUT, 0)]
    assert fgraph.clients_of(x) == [(OUTPUT, 1)]
    assert ("change", OUTPUT, 0, out, new_out, "swap") in rec.events
    assert ("import", new_out.owner, "swap") in rec.events
    assert {e[1] for e in rec.events if e[0] == "prune"} == {out.owner, a.owner}
    assert_consistent(fgraph)


def test_replacing_an_output_by_an_input():
    x = var("x")
    out = f(x)
    fgraph = FunctionGraph([x], [out], clone=False)
    fgraph.replace(out, x)
    assert fgraph.outputs == [x]
    assert fgraph.apply_nodes == set()
    assert fgraph.clients_of(x) == [(OUTPUT, 0)]


# ---------------------------------------------------------------- transactions


def _graph_with_two_replacements():
    x, y = var("x"), var("y")
    a = f(x)
    b = g(a, y)
    out1 = h(a, b)
    out2 = k(b)
    fgraph = FunctionGraph([x, y], [out1, out2], clone=False)
    # Several replacements touching shared nodes, importing new nodes and pruning old ones.
    new_a = Fn("new_a")(y)
    new_b = Fn("new_b")(x, y)
    return fgraph, [(a, new_a), (b, new_b), (out2, x)]


def test_replace_all_validate_applies_every_replacement():
    fgraph, replacements = _graph_with_two_replacements()
    rec = Recorder()
    fgraph.attach_feature(rec)
    fgraph.replace_all_validate(replacements, reason="ok")
    assert ("validate", replacements, "ok") in rec.events
    (a, new_a), (b, new_b), (_, x) = replacements
    assert fgraph.outputs[1] is x
    assert fgraph.outputs[0].owner.inputs == [new_a, new_b]
    assert a.owner not in fgraph.apply_nodes and b.owner not in fgraph.apply_nodes
    assert_consistent(fgraph)


def test_vetoed_transaction_is_rolled_back_whole():
    fgraph, replacements = _graph_with_two_replacements()
    before = snapshot(fgraph)
    veto = Veto()
    fgraph.attach_feature(veto)
    with pytest.raises(InconsistencyError, match="vetoed why"):
        fgraph.replace_all_validate(replacements, reason="why")
    assert veto.calls == 1
    assert snapshot(fgraph) == before
    assert_consistent(fgraph)
    # The graph still works: a later, accepted transaction goes through.
    veto.active = False
    fgraph.replace_all_validate(replacements)
    assert fgraph.outputs[1] is replacements[2][1]
    assert_consistent(fgraph)


def test_rollback_notifies_features_of_the_undo():
    fgraph, replacements = _graph_with_two_replacements()
    rec = Recorder()
    fgraph.attach_feature(rec)
    fgraph.attach_feature(Veto())
    rec.events.clear()
    with pytest.raises(InconsistencyError):
        fgraph.replace_all_validate(replacements, reason="why")
    # What was imported for the transaction was pruned again, what was pruned re-imported.
    imported = Counter(e[1] for e in rec.events if e[0] == "import")
    pruned = Counter(e[1] for e in rec.events if e[0] == "prune")
    assert imported == pruned
    assert {e[5] for e in rec.events if e[0] == "change"} == {"why", "rollback"}


def test_rollback_when_a_later_replacement_fails_to_type_check():
    fgraph, replacements = _graph_with_two_replacements()
    before = snapshot(fgraph)
    bad = replacements[:2] + [(replacements[2][0], var("wrong", kind="b"))]
    with pytest.raises(TypeError, match="'wrong'"):
        fgraph.replace_all_validate(bad)
    assert snapshot(fgraph) == before
    assert_consistent(fgraph)


def test_rollback_when_a_replacement_needs_a_missing_input():
    # The second replacement imports one node fine, then fails on a missing input: the
    # half-imported subgraph must not stay behind.
    x = var("x")
    a = f(x)
    out = g(a)
    fgraph = FunctionGraph([x], [out], clone=False)
    before = snapshot(fgraph)
    missing = var("missing")
    with pytest.raises(MissingInputError, match="'missing'"):
        fgraph.replace_all_validate([(a, h(x)), (out, k(Fn("inner")(x), missing))])
    assert snapshot(fgraph) == before
    assert_consistent(fgraph)


def test_rollback_when_a_feature_vetoes_an_import():
    class NoK(Feature):
        def on_import(self, fgraph, node, reason):
            if node.op == k:
                raise InconsistencyError("k is not allowed here")

    x = var("x")
    a = f(x)
    out = g(a)
    fgraph = FunctionGraph([x], [out], features=[NoK()], clone=False)
    before = snapshot(fgraph)
    with pytest.raises(InconsistencyError, match="k is not allowed"):
        fgraph.replace_all_validate([(a, k(h(x)))])
    assert snapshot(fgraph) == before
    assert_consistent(fgraph)


class Nester(Feature):
    """On validating an outer transaction, runs one nested transaction of its own."""

    def __init__(self, replacements):
        self.replacements = replacements
        self.nested_error = None
        self.busy = False

    def on_validate(self, fgraph, replacements, reason):
        if self.busy or reason == "nested":
            return
        self.busy = True
        try:
            fgraph.replace_all_validate(self.replacements, reason="nested")
        except InconsistencyError as exc:
            self.nested_error = exc
        finally:
            self.busy = False


class VetoReason(Feature):
    def __init__(self, reason):
        self.reason = reason

    def on_validate(self, fgraph, replacements, reason):
        if reason == self.reason:
            raise InconsistencyError(f"no {reason}")


def _nested_setup(*extra_features):
    x, y = var("x"), var("y")
    a = f(x)
    b = g(y)
    fgraph = FunctionGraph([x, y], [h(a, b)], clone=False)
    nester = Nester([(b, x)])
    for feature in (nester, *extra_features):
        fgraph.attach_feature(feature)
    return fgraph, nester, (x, y, a, b)


def test_nested_transaction_accepted_with_the_outer_one():
    fgraph, nester, (x, y, a, b) = _nested_setup()
    fgraph.replace_all_validate([(a, y)], reason="outer")
    assert nester.nested_error is None
    assert fgraph.outputs[0].owner.inputs == [y, x]
    assert fgraph.apply_nodes == {fgraph.outputs[0].owner}
    assert_consistent(fgraph)


def test_nested_accepted_transaction_is_undone_with_a_vetoed_outer_one():
    fgraph, nester, (x, y, a, b) = _nested_setup(VetoReason("outer"))
    before = snapshot(fgraph)
    with pytest.raises(InconsistencyError, match="no outer"):
        fgraph.replace_all_validate([(a, y)], reason="outer")
    assert nester.nested_error is None  # the nested one was accepted, then undone
    assert snapshot(fgraph) == before
    assert fgraph.outputs[0].owner.inputs == [a, b]
    assert_consistent(fgraph)


def test_vetoed_nested_transaction_does_not_undo_the_outer_one():
    fgraph, nester, (x, y, a, b) = _nested_setup(VetoReason("nested"))
    fgraph.replace_all_validate([(a, y)], reason="outer")
    assert isinstance(nester.nested_error, InconsistencyError)
    assert fgraph.outputs[0].owner.inputs == [y, b]
    assert_consistent(fgraph)


# ---------------------------------------------------------------- features


def test_feature_callbacks_on_attach_and_detach():
    x = var("x")
    a = f(x)
    out = g(a)
    fgraph = FunctionGraph([x], [out], clone=False)
    rec = Recorder()
    fgraph.attach_feature(rec)
    assert rec.events == [
        ("attach",),
        ("import", a.owner, "attach"),
        ("import", out.owner, "attach"),
    ]
    fgraph.attach_feature(rec)  # attaching twice is a no-op
    assert fgraph.features == [rec]
    assert len(rec.events) == 3
    assert fgraph.get_feature(Recorder) is rec
    assert fgraph.get_feature(Veto) is None
    fgraph.remove_feature(rec)
    assert rec.events[-1] == ("detach",)
    assert fgraph.features == []


def test_features_given_to_the_constructor_see_every_node():
    x = T.vector("x")
    out = T.exp(x) * 2
    rec = Recorder()
    fgraph = FunctionGraph([x], [out], features=[rec])
    imported = [e[1] for e in rec.events if e[0] == "import"]
    assert set(imported) == fgraph.apply_nodes
    assert len(imported) == len(fgraph.apply_nodes)


def test_feature_sees_import_change_and_prune_in_order():
    x = var("x")
    a = f(x)
    out = g(a)
    rec = Recorder()
    fgraph = FunctionGraph([x], [out], features=[rec], clone=False)
    rec.events.clear()
    new = h(x)
    fgraph.replace(a, new, reason="r")
    assert rec.events == [
        ("import", new.owner, "r"),
        ("change", out.owner, 0, a, new, "r"),
        ("prune", a.owner, "r"),
    ]


# ---------------------------------------------------------------- toposort


class Orderings(Feature):
    def __init__(self, constraints):
        self.constraints = constraints

    def orderings(self, fgraph):
        return self.constraints


def test_toposort_honours_a_features_orderings():
    x = var("x")
    p, q = f(x), g(x)
    out = h(p, q)
    fgraph = FunctionGraph([x], [out], clone=False)
    order = fgraph.toposort()
    assert order[-1] is out.owner
    for first, second in [(p, q), (q, p)]:
        feature = Orderings({second.owner: {first.owner}})
        fgraph.attach_feature(feature)
        order = fgraph.toposort()
        assert order.index(first.owner) < order.index(second.owner)
        assert order[-1] is out.owner
        assert set(order) == fgraph.apply_nodes
        fgraph.remove_feature(feature)


def test_orderings_of_several_features_are_combined():
    x = var("x")
    p, q, r = f(x), g(x), k(x)
    out = h(p, q, r)
    fgraph = FunctionGraph([x], [out], clone=False)
    fgraph.attach_feature(Orderings({p.owner: {q.owner}}))
    fgraph.attach_feature(Orderings({q.owner: {r.owner}}))
    assert fgraph.orderings() == {p.owner: {q.owner}, q.owner: {r.owner}}
    assert fgraph.toposort() == [r.owner, q.owner, p.owner, out.owner]


def test_toposort_detects_a_cycle_through_orderings():
    x = var("x")
    a = f(x)
    out = g(a)
    fgraph = FunctionGraph([x], [out], clone=False)
    feature = Orderings({})
    fgraph.attach_feature(feature)
    # Data flow says a before out; the feature now says out before a.
    feature.constraints = {a.owner: {out.owner}}
    with pytest.raises(InconsistencyError, match="form a cycle"):
        fgraph.toposort()
