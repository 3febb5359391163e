"""The rewrite database, queries and phases; merge, constant folding and rejected rewrites."""

from collections import Counter

import numpy as np
import pytest
from helpers.toy_graph import Fn, Kind

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.compile.mode import FAST_COMPILE, FAST_RUN
from tensorjit.core.graph import (
    OUTPUT,
    Apply,
    Constant,
    Feature,
    FunctionGraph,
    InconsistencyError,
    Op,
)
from tensorjit.core.hooks import registries
from tensorjit.core.rewrites import (
    PHASES,
    GraphRewriter,
    NodeRewriter,
    RewriteDB,
    RewriteQuery,
    node_rewriter,
)
from tensorjit.core.rewrites.basic import RewriteError, normalize_replacements
from tensorjit.core.rewrites.merge import MergeRewriter, constant_folding
from tensorjit.core.rewrites.runner import (
    RewriteStats,
    apply_replacements,
    run_node_rewriters,
    run_phases,
)


class Unfoldable(Fn):
    constant_folding = False


class Pair(Op):
    def make_node(self, x):
        return Apply(self, [x], [Kind("a")(), Kind("a")()])


def var(name):
    return Kind("a")(name)


def noop(fgraph, node):
    return None


def entry_names(selected):
    return {phase: [e.name for e in entries] for phase, entries in selected.items() if entries}


def q(include=(), require=(), exclude=()):
    return RewriteQuery(frozenset(include), frozenset(require), frozenset(exclude))


def snapshot(fgraph):
    return (
        list(fgraph.outputs),
        set(fgraph.apply_nodes),
        {node: list(node.inputs) for node in fgraph.apply_nodes},
        {v: Counter(list(c)) for v, c in fgraph.clients.items()},
    )


# ---------------------------------------------------------------- registration


def test_phases_are_the_documented_order():
    assert PHASES == (
        "canonicalize",
        "stabilize",
        "specialize",
        "fusion",
        "transfer",
        "inplace",
        "cleanup",
    )


def test_register_rejects_an_unknown_phase():
    db = RewriteDB()
    with pytest.raises(ValueError, match=r"rewrite 'r': unknown phase 'optimize'; phases are"):
        db.register("r", NodeRewriter(noop), "optimize")
    assert db.entries == {}


def test_register_rejects_a_duplicate_name():
    db = RewriteDB()
    db.register("r", NodeRewriter(noop), "canonicalize", "a")
    with pytest.raises(ValueError, match="a rewrite named 'r' is already registered"):
        db.register("r", NodeRewriter(noop), "specialize", "b")
    assert db.entries["r"].phase == "canonicalize"


def test_register_rejects_something_that_is_not_a_rewriter():
    db = RewriteDB()
    with pytest.raises(TypeError, match="rewrite 'r': .* is not a NodeRewriter/GraphRewriter"):
        db.register("r", noop, "canonicalize")


def test_registered_entry_carries_its_tags_phase_and_plugin():
    db = RewriteDB()
    rw = NodeRewriter(noop)
    db.register("r", rw, "stabilize", "fast_run", "extra", position=2.5, plugin="mine")
    entry = db.entries["r"]
    assert entry.rewriter is rw
    assert entry.phase == "stabilize"
    assert entry.tags == {"fast_run", "extra", "stabilize"}
    assert entry.position == 2.5
    assert entry.plugin == "mine"


def test_node_rewriter_decorator():
    @node_rewriter([Fn], name="named")
    def rw(fgraph, node):
        return None

    assert isinstance(rw, NodeRewriter)
    assert rw.name == "named"
    assert rw.tracks == (Fn,)
    x = var("x")
    assert rw.accepts(Fn("f")(x).owner)
    assert rw.accepts(Unfoldable("u")(x).owner)  # subclasses of a tracked op class
    assert not rw.accepts(Pair()(x)[0].owner)
    assert NodeRewriter(noop).accepts(Pair()(x)[0].owner)
    assert NodeRewriter(noop).name == "noop"


# ---------------------------------------------------------------- queries


def _db():
    db = RewriteDB()
    db.register("a", NodeRewriter(noop), "canonicalize", "fast_run", "x")
    db.register("b", NodeRewriter(noop), "canonicalize", "fast_run", "y")
    db.register("c", NodeRewriter(noop), "specialize", "fast_run", "x", "y")
    db.register("d", NodeRewriter(noop), "cleanup", "fast_compile")
    return db


def test_query_include_is_any_of_the_tags():
    db = _db()
    assert entry_names(db.query(q(include={"fast_run"}))) == {
        "canonicalize": ["a", "b"],
        "specialize": ["c"],
    }
    assert entry_names(db.query(q(include={"x", "fast_compile"}))) == {
        "canonicalize": ["a"],
        "specialize": ["c"],
        "cleanup": ["d"],
    }
    # Including nothing selects nothing.
    assert entry_names(db.query(q(require={"fast_run"}))) == {}


def test_query_require_is_all_of_the_tags():
    db = _db()
    assert entry_names(db.query(q(include={"fast_run"}, require={"x", "y"}))) == {
        "specialize": ["c"]
    }
    assert entry_names(db.query(q(include={"fast_run"}, require={"x"}))) == {
        "canonicalize": ["a"],
        "specialize": ["c"],
    }


def test_query_exclude_wins_over_include():
    db = _db()
    assert entry_names(db.query(q(include={"fast_run"}, exclude={"y"}))) == {"canonicalize": ["a"]}
    assert entry_names(db.query(q(include={"x"}, exclude={"x"}))) == {}


def test_phase_name_is_a_tag():
    db = _db()
    assert entry_names(db.query(q(include={"canonicalize"}))) == {"canonicalize": ["a", "b"]}
    assert entry_names(db.query(q(include={"fast_run"}, exclude={"specialize"}))) == {
        "canonicalize": ["a", "b"]
    }


def test_query_builders_return_new_queries():
    base = RewriteQuery()
    more = base.including("a", "b").requiring("c").excluding("d")
    assert base == RewriteQuery()
    assert more.include == {"a", "b"}
    assert more.require == {"c"}
    assert more.exclude == {"d"}
    assert more.including("e").include == {"a", "b", "e"}
    with pytest.raises(AttributeError):
        more.include = frozenset()


def test_query_result_has_every_phase_in_order_sorted_by_position_then_name():
    db = RewriteDB()
    db.register("zz", NodeRewriter(noop), "stabilize", "t", position=-1)
    db.register("bb", NodeRewriter(noop), "stabilize", "t")
    db.register("aa", NodeRewriter(noop), "stabilize", "t")
    db.register("late", NodeRewriter(noop), "stabilize", "t", position=10)
    selected = db.query(q(include={"t"}))
    assert tuple(selected) == PHASES
    assert [e.name for e in selected["stabilize"]] == ["zz", "aa", "bb", "late"]


def test_names_and_tags_do_not_collide_on_registration():
    db = RewriteDB()
    db.register("shared_word", NodeRewriter(noop), "canonicalize", "t1")
    # A tag equal to an existing rewrite's name, and a name equal to an existing tag.
    db.register("other", NodeRewriter(noop), "canonicalize", "shared_word")
    db.register("t1", NodeRewriter(noop), "specialize", "t2")
    assert set(db.entries) == {"shared_word", "other", "t1"}


def test_a_tag_query_does_not_select_an_entry_by_its_name():
    # Names and tags are separate namespaces: an entry *named* "fast_run" that does not
    # carry the tag "fast_run" is not part of FAST_RUN.
    db = RewriteDB()
    db.register("fast_run", NodeRewriter(noop), "specialize", "experimental")
    db.register("tagged", NodeRewriter(noop), "specialize", "fast_run")
    assert entry_names(db.query(FAST_RUN.query)) == {"specialize": ["tagged"]}


def test_core_rewrites_are_registered_for_both_modes():
    db = registries().rewrites
    for mode in (FAST_RUN, FAST_COMPILE):
        selected = db.query(mode.query)
        names = [e.name for e in selected["canonicalize"]]
        assert names[0] == "merge" and "constant_folding" in names
        assert "final_merge" in [e.name for e in selected["cleanup"]]
    assert db.entries["merge"].plugin == "core"


# ---------------------------------------------------------------- running phases


class Logger(GraphRewriter):
    def __init__(self, log, label):
        self.log = log
        self.label = label

    def apply(self, fgraph, apply_replacements):
        self.log.append(self.label)


def test_phases_run_in_phases_order_whatever_the_registration_order():
    log = []
    db = RewriteDB()
    for phase in reversed(PHASES):
        db.register(f"log_{phase}", Logger(log, phase), phase, "t")
    db.register("first_of_cleanup", Logger(log, "cleanup-first"), "cleanup", "t", position=-5)
    x = var("x")
    fgraph = FunctionGraph([x], [Fn("f")(x)])
    run_phases(fgraph, db.query(q(include={"t"})), RewriteStats())
    assert log == [*PHASES[:-1], "cleanup-first", "cleanup"]


def test_graph_rewriters_run_before_the_node_rewriters_of_a_phase():
    log = []

    def node_fn(fgraph, node):
        log.append("node")

    db = RewriteDB()
    db.register("n", NodeRewriter(node_fn), "canonicalize", "t", position=-10)
    db.register("g", Logger(log, "graph"), "canonicalize", "t", position=10)
    x = var("x")
    fgraph = FunctionGraph([x], [Fn("f")(x)])
    run_phases(fgraph, db.query(q(include={"t"})), RewriteStats())
    assert log == ["graph", "node"]


def test_node_rewriters_run_to_a_fixed_point():
    # f(f(f(x))) -> x, one f at a time.
    @node_rewriter([Fn])
    def drop_f(fgraph, node):
        if node.op == Fn("f"):
            return [node.inputs[0]]
        return None

    db = RewriteDB()
    db.register("drop_f", drop_f, "canonicalize", "t")
    x = var("x")
    fgraph = FunctionGraph([x], [Fn("g")(Fn("f")(Fn("f")(Fn("f")(x))))])
    stats = RewriteStats()
    run_phases(fgraph, db.query(q(include={"t"})), stats)
    assert stats.applied["drop_f"] == 3
    (node,) = fgraph.apply_nodes
    assert node.op == Fn("g")
    assert node.inputs == [fgraph.inputs[0]]


def test_rewriter_may_return_a_dict_of_replacements():
    def first_only(fgraph, node):
        if isinstance(node.op, Pair):
            return {node.outputs[0]: node.inputs[0]}
        return None

    x = var("x")
    p, r = Pair()(x)
    fgraph = FunctionGraph([x], [Fn("f")(p, r)], clone=False)
    db = RewriteDB()
    db.register("first_only", NodeRewriter(first_only), "canonicalize", "t")
    run_phases(fgraph, db.query(q(include={"t"})), RewriteStats())
    assert fgraph.outputs[0].owner.inputs == [x, r]


def test_malformed_rewriter_results_are_reported():
    x = var("x")
    node = Pair().make_node(x)
    with pytest.raises(RewriteError, match="rewriter bad returned 1 outputs for Pair, which has 2"):
        normalize_replacements(node, [x], "bad")
    with pytest.raises(RewriteError, match="rewriter bad returned a non-Variable 3 for Pair"):
        normalize_replacements(node, [x, 3], "bad")
    assert normalize_replacements(node, [node.outputs[0], x], "ok") == [(node.outputs[1], x)]


# ---------------------------------------------------------------- rejected rewrites


class VetoFeature(Feature):
    def __init__(self):
        self.calls = 0

    def on_validate(self, fgraph, replacements, reason):
        self.calls += 1
        raise InconsistencyError(f"no {reason}")


def test_vetoed_node_rewrite_is_counted_as_rejected_and_changes_nothing():
    @node_rewriter([Fn], name="g_to_h")
    def g_to_h(fgraph, node):
        if node.op == Fn("g"):
            return [Fn("h")(*node.inputs)]
        return None

    x = var("x")
    out = Fn("f")(Fn("g")(x), x)
    veto = VetoFeature()
    fgraph = FunctionGraph([x], [out], features=[veto], clone=False)
    before = snapshot(fgraph)
    db = RewriteDB()
    db.register("g_to_h", g_to_h, "specialize", "t", plugin="someone")
    stats = RewriteStats()
    run_phases(fgraph, db.query(q(include={"t"})), stats)
    assert veto.calls == 1
    assert stats.rejected == Counter({"g_to_h": 1})
    assert stats.rejected_by_plugin == Counter({"someone": 1})
    assert stats.applied == Counter()
    assert snapshot(fgraph) == before
    assert {n.op for n in fgraph.apply_nodes} == {Fn("f"), Fn("g")}


def test_apply_replacements_reports_acceptance_and_rejection():
    db = RewriteDB()
    db.register("rw", NodeRewriter(noop), "canonicalize")
    entry = db.entries["rw"]
    x, y = var("x"), var("y")
    a = Fn("a")(x)
    fgraph = FunctionGraph([x, y], [Fn("out")(a)], clone=False)
    stats = RewriteStats()
    assert apply_replacements(fgraph, [], entry, stats) is False
    assert stats.applied == Counter() and stats.rejected == Counter()

    veto = VetoFeature()
    fgraph.attach_feature(veto)
    before = snapshot(fgraph)
    assert apply_replacements(fgraph, [(a, y)], entry, stats) is False
    assert stats.rejected == Counter({"rw": 1})
    assert stats.rejected_by_plugin == Counter({"core": 1})
    assert snapshot(fgraph) == before

    fgraph.remove_feature(veto)
    assert apply_replacements(fgraph, [(a, y)], entry, stats) is True
    assert stats.applied == Counter({"rw": 1})
    assert fgraph.outputs[0].owner.inputs == [y]


def test_a_rejected_rewrite_does_not_stop_the_others():
    class VetoOp(Feature):
        def on_validate(self, fgraph, replacements, reason):
            for _old, new in replacements:
                if new.owner is not None and new.owner.op == Fn("forbidden"):
                    raise InconsistencyError("forbidden")

    def to_forbidden(fgraph, node):
        if node.op == Fn("g"):
            return [Fn("forbidden")(*node.inputs)]
        return None

    def to_allowed(fgraph, node):
        if node.op == Fn("g"):
            return [Fn("allowed")(*node.inputs)]
        return None

    x = var("x")
    fgraph = FunctionGraph([x], [Fn("g")(x)], features=[VetoOp()])
    db = RewriteDB()
    db.register("to_forbidden", NodeRewriter(to_forbidden), "specialize", "t", position=0)
    db.register("to_allowed", NodeRewriter(to_allowed), "specialize", "t", position=1)
    stats = RewriteStats()
    run_node_rewriters(fgraph, db.query(q(include={"t"}))["specialize"], stats)
    assert stats.rejected["to_forbidden"] >= 1
    assert stats.applied == Counter({"to_allowed": 1})
    assert fgraph.outputs[0].owner.op == Fn("allowed")


# ---------------------------------------------------------------- merge


def test_merge_rewriter_merges_equal_constants_and_duplicate_nodes():
    x = var("x")
    c1, c2 = Constant(Kind(), 5), Constant(Kind(), 5)
    first = Fn("f")(x, c1)
    second = Fn("f")(x, c2)
    out = Fn("g")(Fn("h")(first), Fn("h")(second))
    fgraph = FunctionGraph([x], [out])
    assert len(fgraph.apply_nodes) == 5
    db = RewriteDB()
    db.register("merge", MergeRewriter(), "canonicalize", "t")
    stats = RewriteStats()
    run_phases(fgraph, db.query(q(include={"t"})), stats)
    # Constants first, then f and (in the same pass, downstream) h.
    assert len(fgraph.apply_nodes) == 3
    (g_node,) = [n for n in fgraph.apply_nodes if n.op == Fn("g")]
    assert g_node.inputs[0] is g_node.inputs[1]
    assert len([v for v in fgraph.variables if isinstance(v, Constant)]) == 1
    assert stats.applied["merge"] == 3


def test_merge_of_duplicate_subexpressions_in_a_compiled_function():
    x, y = T.matrix("x"), T.matrix("y")
    out1 = T.exp(x) * y + 1.0
    out2 = T.exp(x) * y - 1.0
    f = tensorjit.function(
        [x, y], [out1, out2], mode=tensorjit.FAST_RUN.excluding("inplace", "fusion")
    )
    ops = Counter(str(n.op) for n in f.fgraph.apply_nodes)
    assert ops["exp"] == 1
    assert ops["mul"] == 1
    xv, yv = np.arange(4.0).reshape(2, 2), np.full((2, 2), 2.0)
    r1, r2 = f(xv, yv)
    np.testing.assert_allclose(r1, np.exp(xv) * yv + 1.0)
    np.testing.assert_allclose(r2, np.exp(xv) * yv - 1.0)
    assert f.rewrite_stats.applied["merge"] >= 1


def test_merge_of_identical_outputs_in_a_compiled_function():
    x = T.vector("x")
    f = tensorjit.function([x], [T.exp(x), T.exp(x)])
    assert len(f.fgraph.apply_nodes) == 1
    assert f.fgraph.outputs[0] is f.fgraph.outputs[1]
    a, b = f(np.array([1.0, 2.0]))
    np.testing.assert_allclose(a, np.exp([1.0, 2.0]))
    assert a is not b
    a[0] = -1.0
    assert b[0] == np.exp(1.0)


def test_merge_of_equal_constants_in_a_compiled_function():
    x = T.vector("x")
    two_a = T.constant(np.array([2.0, 2.0]))
    two_b = T.constant(np.array([2.0, 2.0]))
    three = T.constant(np.array([3.0, 3.0]))
    assert two_a is not two_b
    # without the algebra and fusion rewrites, which would fold x - 3 into x + -3
    mode = tensorjit.FAST_RUN.excluding("algebra", "fusion")
    f = tensorjit.function([x], [x * two_a, x + two_b, x - three], mode=mode)
    constants = [v for v in f.fgraph.variables if isinstance(v, Constant)]
    assert len(constants) == 2
    assert sorted(c.data[0] for c in constants) == [2.0, 3.0]
    mul_node, add_node = (
        next(n for n in f.fgraph.apply_nodes if str(n.op) == name) for name in ("mul", "add")
    )
    assert mul_node.inputs[1] is add_node.inputs[1]
    res = f(np.array([1.0, 5.0]))
    np.testing.assert_allclose(res[0], [2.0, 10.0])
    np.testing.assert_allclose(res[1], [3.0, 7.0])
    np.testing.assert_allclose(res[2], [-2.0, 2.0])


def test_ops_with_different_props_do_not_merge_in_a_compiled_function():
    x = T.vector("x")
    f = tensorjit.function([x], [T.exp(x), T.log(x)])
    assert len(f.fgraph.apply_nodes) == 2
    assert f.fgraph.outputs[0] is not f.fgraph.outputs[1]


# ---------------------------------------------------------------- constant folding


def test_constant_folding_in_a_compiled_function():
    x = T.vector("x")
    c = T.constant(np.array([1.0, 2.0]))
    folded = T.exp(c) * 3.0 + T.log(c)
    f = tensorjit.function([x], x + folded)
    # Only the addition of x is left: no node has only constant inputs.
    assert [str(n.op) for n in f.fgraph.apply_nodes] == ["add"]
    for node in f.fgraph.apply_nodes:
        assert not all(isinstance(i, Constant) for i in node.inputs)
    (const,) = [v for v in f.fgraph.variables if isinstance(v, Constant)]
    expected = np.exp([1.0, 2.0]) * 3.0 + np.log([1.0, 2.0])
    np.testing.assert_allclose(const.data, expected)
    np.testing.assert_allclose(f(np.array([10.0, 20.0])), expected + [10.0, 20.0])
    assert f.rewrite_stats.applied["constant_folding"] >= 3


def test_fully_constant_output_is_folded():
    f = tensorjit.function([], T.constant(np.array([1.0, 4.0])) ** 0.5 * 2.0)
    assert f.fgraph.apply_nodes == set()
    assert isinstance(f.fgraph.outputs[0], Constant)
    out1 = f()
    np.testing.assert_allclose(out1, [2.0, 4.0])
    out1[0] = 100.0  # the returned value does not alias the folded constant
    np.testing.assert_allclose(f(), [2.0, 4.0])


def test_constant_folding_rewriter_on_a_function_graph():
    x = var("x")
    c, d = Constant(Kind(), 1), Constant(Kind(), 2)
    folded = Fn("f")(c, d)
    kept = Unfoldable("u")(c)
    out = Fn("g")(x, folded, kept)
    fgraph = FunctionGraph([x], [out], clone=False)
    db = RewriteDB()
    db.register("constant_folding", constant_folding, "canonicalize", "t")
    stats = RewriteStats()
    run_phases(fgraph, db.query(q(include={"t"})), stats)
    assert stats.applied == Counter({"constant_folding": 1})
    new_folded = out.owner.inputs[1]
    assert isinstance(new_folded, Constant)
    assert new_folded.data == ("f", 1, 2)
    # An op that opts out of constant folding is kept; nodes with a variable input too.
    assert out.owner.inputs[2] is kept
    assert {n.op for n in fgraph.apply_nodes} == {Fn("g"), Unfoldable("u")}
    assert fgraph.clients_of(new_folded) == [(out.owner, 1)]
    assert fgraph.clients_of(out) == [(OUTPUT, 0)]
