"""Every illegal destruction, tried on hand-built graphs.

Two levels: ``function(..., accept_inplace=True)`` must still compute the right values
(compared with NumPy) without touching what the caller may not have destroyed; and on a
bare FunctionGraph with a DestroyHandler, ``replace_all_validate`` vetoes each illegal
substitution (InconsistencyError) and rolls it back.
"""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit import FunctionGraph, In
from tensorjit.core.graph.fgraph import InconsistencyError
from tensorjit.core.memory.destroy_handler import DestroyHandler, fast_inplace_check
from tensorjit.tensor import Elemwise, IncSubtensor
from tensorjit.tensor.inplace import add_inplace, exp_inplace, mul_inplace
from tensorjit.tensor.scalar import SCALAR_OPS

shares = np.shares_memory
NO_PASS = tensorjit.FAST_RUN.excluding("inplace")  # hand-built destroyers only


def _vals():
    return np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.25, 4.0])


def _assert_all_close(got, expected):
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        np.testing.assert_allclose(g, e, err_msg=f"output {k}")


def add_into_second(a, b):
    """``a + b`` computed into (and destroying) the second input."""
    return Elemwise(SCALAR_OPS["add"], inplace=1)(a, b)


# ================================================================ function level

# ---------------------------------------------------------------- destroying a value twice


def _twice_parallel(v, w):
    return [add_inplace(v, w), mul_inplace(v, w)], lambda a, b: [a + b, a * b]


def _twice_second_reads_first(v, w):
    # mul_inplace destroys v (its old value) while reading add_inplace's new version
    return [mul_inplace(v, add_inplace(v, w))], lambda a, b: [a * (a + b)]


def _twice_through_views(v, w):
    return [add_inplace(v[::-1], w), exp_inplace(v)], lambda a, b: [a[::-1] + b, np.exp(a)]


TWICE = {
    "two destroyers of x": _twice_parallel,
    "second destroyer reads the first": _twice_second_reads_first,
    "through a view and directly": _twice_through_views,
}


@pytest.mark.parametrize("case", list(TWICE))
@pytest.mark.parametrize("mutable", [False, True], ids=["plain x", "mutable x"])
def test_destroying_a_value_twice_computes_right(case, mutable):
    v, w = T.vectors("v", "w")
    outputs, reference = TWICE[case](v, w)
    f = tensorjit.function([In(v, mutable=mutable), w], outputs, accept_inplace=True)
    a, b = _vals()
    _assert_all_close(f(a, b), reference(*_vals()))
    if not mutable:
        np.testing.assert_array_equal(a, _vals()[0])
    np.testing.assert_array_equal(b, _vals()[1])


def test_chained_destroyers_destroy_different_values_and_are_legal():
    # add_inplace(mul_inplace(t, 2), 1): t and mul_inplace's result are two values.
    v = T.vector("v")
    t = v * 3
    out = add_inplace(mul_inplace(t, 2), 1)
    f = tensorjit.function([v], out, accept_inplace=True, mode=NO_PASS)
    assert not any(str(n.op) == "DeepCopy" for n in f.fgraph.apply_nodes)
    a, _ = _vals()
    np.testing.assert_allclose(f(a), a * 6 + 1)
    np.testing.assert_array_equal(a, _vals()[0])


# ---------------------------------------------------------------- constants


def test_destroying_a_constant_works_on_a_copy():
    c = T.constant(np.array([1.0, 2.0, 3.0]))
    w = T.vector("w")
    f = tensorjit.function([w], [add_inplace(c, w), c * 1], accept_inplace=True)
    g = tensorjit.function([w], c + w)  # another function using the same constant
    for _ in range(3):
        got, same = f(np.ones(3))
        np.testing.assert_array_equal(got, [2.0, 3.0, 4.0])
        np.testing.assert_array_equal(same, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(c.data, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(g(np.zeros(3)), [1.0, 2.0, 3.0])


def test_destroying_a_view_of_a_constant_works_on_a_copy():
    c = T.constant(np.array([1.0, 2.0, 3.0]))
    f = tensorjit.function([], mul_inplace(c[1:], 10), accept_inplace=True)
    np.testing.assert_array_equal(f(), [20.0, 30.0])
    np.testing.assert_array_equal(f(), [20.0, 30.0])
    np.testing.assert_array_equal(c.data, [1.0, 2.0, 3.0])


# ---------------------------------------------------------------- non-mutable inputs


@pytest.mark.parametrize(
    "build",
    [
        lambda v, w: (add_inplace(v, w), lambda a, b: a + b),
        lambda v, w: (add_inplace(v[::-1], w), lambda a, b: a[::-1] + b),
        lambda v, w: (exp_inplace(v.dimshuffle("x", 0)), lambda a, b: np.exp(a)[None, :]),
        lambda v, w: (add_into_second(v, w), lambda a, b: a + b),
        lambda v, w: (IncSubtensor((("s", False, False, False),), True, inplace=True)(v, w), None),
    ],
    ids=["add_inplace", "through a view", "through dimshuffle", "second input", "set_subtensor"],
)
@pytest.mark.parametrize("flag", [None, "explicit borrow=False"])
def test_destroying_a_non_mutable_input_leaves_the_argument_untouched(build, flag):
    v, w = T.vectors("v", "w")
    out, reference = build(v, w)
    inputs = [v, w] if flag is None else [In(v, borrow=False), In(w, borrow=False)]
    f = tensorjit.function(inputs, out, accept_inplace=True, on_unused_input="ignore")
    a, b = _vals()
    for _ in range(2):  # the same arguments again: nothing was changed by the first call
        got = f(a, b)
        expected = reference(*_vals()) if reference else _vals()[1]
        np.testing.assert_allclose(got, expected)
        assert not shares(got, a) and not shares(got, b)
    np.testing.assert_array_equal(a, _vals()[0])
    np.testing.assert_array_equal(b, _vals()[1])


@pytest.mark.host_memory
@pytest.mark.parametrize("flag", ["mutable", "borrow"])
def test_a_mutable_or_borrowed_input_is_destroyed_in_place(flag):
    v, w = T.vectors("v", "w")
    f = tensorjit.function([In(v, **{flag: True}), w], add_inplace(v, w), accept_inplace=True)
    assert not any(str(n.op) == "DeepCopy" for n in f.fgraph.apply_nodes)
    a, b = _vals()
    got = f(a, b)
    np.testing.assert_allclose(got, _vals()[0] + _vals()[1])
    np.testing.assert_allclose(a, _vals()[0] + _vals()[1])  # the caller allowed it
    assert not shares(got, a)  # still: not Out(borrow=True), so the output is fresh


# ---------------------------------------------------------------- shared storage


def test_shared_destroyed_beside_its_own_update_works_on_a_copy():
    w = tensorjit.shared(np.array([1.0, 2.0]), name="w")
    f = tensorjit.function([], add_inplace(w, 1), updates={w: w * 2}, accept_inplace=True)
    np.testing.assert_array_equal(f(), [2.0, 3.0])  # old w + 1
    np.testing.assert_array_equal(w.get_value(), [2.0, 4.0])  # old w * 2, not (w + 1) * 2
    np.testing.assert_array_equal(f(), [3.0, 5.0])
    np.testing.assert_array_equal(w.get_value(), [4.0, 8.0])


def test_shared_destroyed_without_an_update_is_unchanged():
    w = tensorjit.shared(np.array([1.0, 2.0]), name="w")
    buffer = w.get_value(borrow=True, return_internal_type=True)  # (on any device)
    f = tensorjit.function([], add_inplace(w, 1), accept_inplace=True)
    for _ in range(3):
        np.testing.assert_array_equal(f(), [2.0, 3.0])
    assert w.get_value(borrow=True, return_internal_type=True) is buffer
    np.testing.assert_array_equal(w.get_value(), [1.0, 2.0])


def test_shared_destroyed_by_another_shared_variables_update_is_unchanged():
    a = tensorjit.shared(np.array([1.0, 2.0]), name="a")
    b = tensorjit.shared(np.array([0.0, 0.0]), name="b")
    f = tensorjit.function([], [], updates={b: add_inplace(a, 1)}, accept_inplace=True)
    f()
    np.testing.assert_array_equal(a.get_value(), [1.0, 2.0])
    np.testing.assert_array_equal(b.get_value(), [2.0, 3.0])
    assert not shares(a.get_value(borrow=True), b.get_value(borrow=True))


def test_shared_destroyed_by_its_own_update_runs_in_place_after_its_readers():
    w = tensorjit.shared(np.array([1.0, 2.0]), name="w")
    buffer = w.get_value(borrow=True, return_internal_type=True)  # (on any device)
    f = tensorjit.function([], w * 10, updates={w: add_inplace(w, 1)}, accept_inplace=True)
    assert not any(str(n.op) == "DeepCopy" for n in f.fgraph.apply_nodes)
    np.testing.assert_array_equal(f(), [10.0, 20.0])  # read before the update
    np.testing.assert_array_equal(w.get_value(), [2.0, 3.0])
    assert w.get_value(borrow=True, return_internal_type=True) is buffer
    np.testing.assert_array_equal(f(), [20.0, 30.0])


def test_shared_destroyed_by_its_own_update_through_a_view():
    w = tensorjit.shared(np.array([1.0, 2.0, 3.0]), name="w")
    f = tensorjit.function([], [], updates={w: add_inplace(w[::-1], 1)}, accept_inplace=True)
    f()
    np.testing.assert_array_equal(w.get_value(), [4.0, 3.0, 2.0])
    f()
    np.testing.assert_array_equal(w.get_value(), [3.0, 4.0, 5.0])


# ---------------------------------------------------------------- still needed later


@pytest.mark.parametrize(
    "mutable",
    [
        pytest.param(False, id="plain x"),
        # the caller's host array is destroyed in place, and the destroyer reads the
        # graph input itself (on a device it works on the transferred copy)
        pytest.param(True, id="mutable x", marks=pytest.mark.host_memory),
    ],
)
def test_a_value_read_after_its_destroyer_is_read_first(mutable):
    x, y = T.vectors("x", "y")
    r = add_inplace(x, y)
    outputs = [T.log(x), r, T.log(r), T.exp(x[::-1])]
    f = tensorjit.function([In(x, mutable=mutable), y], outputs, accept_inplace=True)
    a, b = _vals()
    a0, b0 = _vals()
    _assert_all_close(f(a, b), [np.log(a0), a0 + b0, np.log(a0 + b0), np.exp(a0[::-1])])
    np.testing.assert_array_equal(a, a0 + b0 if mutable else a0)
    if mutable:
        order = f.fgraph.toposort()
        handler = f.fgraph.get_feature(DestroyHandler)
        x_in = f.fgraph.inputs[0]
        (destroyer,) = [n for n in order if n.op.destroy_map and n.inputs[0] is x_in]
        readers = [
            n
            for n in order
            if n is not destroyer and any(handler.root(i) is x_in for i in n.inputs)
        ]
        assert len(readers) == 3  # log(x), the view x[::-1] and exp of that view
        assert all(order.index(n) < order.index(destroyer) for n in readers)


# ---------------------------------------------------------------- still returned


@pytest.mark.parametrize(
    "build",
    [
        lambda v, w: ([v, add_inplace(v, w)], lambda a, b: [a, a + b]),
        lambda v, w: ([add_inplace(v, w), v], lambda a, b: [a + b, a]),
        lambda v, w: ([v[::-1], add_inplace(v, w)], lambda a, b: [a[::-1], a + b]),
        lambda v, w: ([add_inplace(v[1:], w[1:]), v], lambda a, b: [a[1:] + b[1:], a]),
    ],
    ids=["x then destroyer", "destroyer then x", "view of x", "destroyed view"],
)
def test_a_value_still_returned_is_not_destroyed(build):
    v, w = T.vectors("v", "w")
    outputs, reference = build(v, w)
    f = tensorjit.function([In(v, mutable=True), w], outputs, accept_inplace=True)
    a, b = _vals()
    _assert_all_close(f(a, b), reference(*_vals()))


def test_a_shared_value_still_returned_is_not_destroyed_by_its_update():
    w = tensorjit.shared(np.array([1.0, 2.0]), name="w")
    f = tensorjit.function([], w, updates={w: add_inplace(w, 1)}, accept_inplace=True)
    np.testing.assert_array_equal(f(), [1.0, 2.0])
    np.testing.assert_array_equal(w.get_value(), [2.0, 3.0])


# ---------------------------------------------------------------- read through an alias


@pytest.mark.parametrize("mutable", [False, True], ids=["plain x", "mutable x"])
def test_a_destroyer_reading_its_target_through_an_aliased_input(mutable):
    x = T.vector("x")
    f = tensorjit.function([In(x, mutable=mutable)], add_inplace(x, x[::-1]), accept_inplace=True)
    a, _ = _vals()
    np.testing.assert_allclose(f(a), _vals()[0] + _vals()[0][::-1])
    if not mutable:
        np.testing.assert_array_equal(a, _vals()[0])


def test_a_destroyer_reading_its_target_twice_as_the_same_variable_is_right():
    # add_inplace(x, x): Elemwise may read and write the same element (each is read
    # before it is written), so in place or on a copy, the result is 2 * x.
    x = T.vector("x")
    f = tensorjit.function([In(x, mutable=True)], add_inplace(x, x), accept_inplace=True)
    a, _ = _vals()
    np.testing.assert_allclose(f(a), 2 * _vals()[0])
    np.testing.assert_allclose(f(np.array([5.0])), [10.0])


# ---------------------------------------------------------------- cycles


CYCLES = {
    "reader depends on destroyer": (
        lambda v, w: [v + add_inplace(v, w)],
        lambda a, b: [a + (a + b)],
    ),
    "view reader depends on destroyer": (
        lambda v, w: [add_inplace(v, w) * v[::-1]],
        lambda a, b: [(a + b) * a[::-1]],
    ),
}


@pytest.mark.parametrize("case", list(CYCLES))
@pytest.mark.parametrize("mutable", [False, True], ids=["plain x", "mutable x"])
def test_a_destroyer_whose_readers_depend_on_it_still_computes_right(case, mutable):
    v, w = T.vectors("v", "w")
    build, reference = CYCLES[case]
    f = tensorjit.function([In(v, mutable=mutable), w], build(v, w), accept_inplace=True)
    a, b = _vals()
    _assert_all_close(f(a, b), reference(*_vals()))
    if not mutable:
        np.testing.assert_array_equal(a, _vals()[0])


# ================================================================ FunctionGraph level


def _fgraph(inputs, outputs, protected=(), update_outputs=None):
    fg = FunctionGraph(inputs, outputs, clone=False)
    handler = DestroyHandler(protected, update_outputs)
    fg.attach_feature(handler)
    return fg, handler


def _state(fg, handler):
    return (
        list(fg.outputs),
        set(fg.apply_nodes),
        set(fg.variables),
        {v: set(c) for v, c in fg.clients.items()},
        {n: list(n.inputs) for n in fg.apply_nodes},
        set(handler.destroyers),
        dict(handler.view_of),
        {k: set(v) for k, v in handler.views.items() if v},
    )


def _assert_vetoed(fg, handler, pairs, match):
    before = _state(fg, handler)
    with pytest.raises(InconsistencyError, match=match):
        fg.replace_all_validate(pairs, reason="test")
    assert _state(fg, handler) == before  # rolled back whole
    fg.toposort()  # and still consistent


def test_fgraph_destroying_twice_is_vetoed():
    x, y = T.vectors("x", "y")
    a, m = x + y, x * y
    fg, handler = _fgraph([x, y], [a, m])
    fg.replace_all_validate([(a, add_inplace(x, y))])
    (first,) = handler.destroyers
    _assert_vetoed(fg, handler, [(m, mul_inplace(x, y))], r"would both destroy the value of x")
    assert handler.destroyers == {first}


def test_fgraph_destroying_twice_in_one_transaction_is_vetoed_whole():
    x, y = T.vectors("x", "y")
    a, m = x + y, x * y
    fg, handler = _fgraph([x, y], [a, m])
    pairs = [(a, add_inplace(x, y)), (m, mul_inplace(x, y))]
    _assert_vetoed(fg, handler, pairs, r"would both destroy the value of x")
    assert not handler.destroyers
    assert fg.outputs == [a, m]


def test_fgraph_destroying_a_value_twice_through_a_view_is_vetoed():
    x, y = T.vectors("x", "y")
    view = x[::-1]
    a, e = view + y, T.exp(x)
    fg, handler = _fgraph([x, y], [a, e])
    fg.replace_all_validate([(e, exp_inplace(x))])
    _assert_vetoed(fg, handler, [(a, add_inplace(view, y))], r"would both destroy the value")


def test_fgraph_destroying_a_constant_is_vetoed():
    c = T.constant(np.array([1.0, 2.0]))
    y = T.vector("y")
    a = c + y
    fg, handler = _fgraph([y], [a])
    _assert_vetoed(fg, handler, [(a, add_inplace(c, y))], r"would destroy the constant")


def test_fgraph_destroying_a_protected_input_is_vetoed():
    x, y = T.vectors("x", "y")
    a = x + y
    fg, handler = _fgraph([x, y], [a], protected=[x])
    _assert_vetoed(
        fg,
        handler,
        [(a, add_inplace(x, y))],
        r"would destroy the input 'x'.*which is not mutable \(use In\(x, mutable=True\)",
    )
    # the unprotected input may be destroyed
    fg.replace_all_validate([(a, add_into_second(x, y))])
    (node,) = handler.destroyers
    assert node.inputs[1] is y


def test_fgraph_destroying_a_view_of_a_protected_input_is_vetoed():
    x, y = T.vectors("x", "y")
    view = x[::-1]
    a = view + y
    fg, handler = _fgraph([x, y], [a], protected=[x])
    assert handler.root(view) is x
    _assert_vetoed(fg, handler, [(a, add_inplace(view, y))], r"would destroy the input 'x'")


def test_fgraph_destroying_shared_storage_other_than_by_its_update_is_vetoed():
    s = tensorjit.shared(np.array([1.0, 2.0]), name="s")
    plus, twice = s + 1, s * 2
    fg, handler = _fgraph([s], [plus, twice], update_outputs={s: 1})  # output 1 updates s
    _assert_vetoed(
        fg,
        handler,
        [(plus, add_inplace(s, 1))],
        r"would destroy the storage of shared variable s other than by computing its update",
    )
    # its own update may reuse the storage: the update is computed after every reader
    fg.replace_all_validate([(twice, mul_inplace(s, 2))])
    (node,) = handler.destroyers
    assert fg.outputs[1] is node.outputs[0]
    assert handler.orderings(fg) == {node: {plus.owner}}


def test_fgraph_shared_update_through_further_destroyers_counts_as_its_own():
    s = tensorjit.shared(np.array([1.0, 2.0]), name="s")
    upd = (s * 2) + 1
    fg, handler = _fgraph([s], [upd], update_outputs={s: 0})
    inner = mul_inplace(s, 2)
    fg.replace_all_validate([(upd, add_inplace(inner, 1))])
    assert len(handler.destroyers) == 2


def test_fgraph_destroying_a_value_still_returned_is_vetoed():
    x, y = T.vectors("x", "y")
    a = x + y
    fg, handler = _fgraph([x, y], [x, a])
    _assert_vetoed(
        fg, handler, [(a, add_inplace(x, y))], r"would destroy the value of x.*still returns"
    )


def test_fgraph_destroying_a_value_whose_view_is_returned_is_vetoed():
    x, y = T.vectors("x", "y")
    view = x[1:]
    a = x + y
    fg, handler = _fgraph([x, y], [view, a])
    _assert_vetoed(fg, handler, [(a, add_inplace(x, y))], r"which the function still returns")


def test_fgraph_destroying_a_temporary_that_is_returned_is_vetoed():
    x = T.vector("x")
    t = x * 2
    e = T.exp(t)
    fg, handler = _fgraph([x], [t, e], protected=[x])
    assert fast_inplace_check(fg, [t]) == [t]  # the cheap check does not see outputs
    _assert_vetoed(fg, handler, [(e, exp_inplace(t))], r"still returns")


def test_fgraph_destroyer_reading_its_target_through_an_alias_is_vetoed():
    x = T.vector("x")
    view = x[::-1]
    a = x + view
    fg, handler = _fgraph([x], [a])
    _assert_vetoed(
        fg,
        handler,
        [(a, add_inplace(x, view))],
        r"would destroy input 0 while reading it through input 1",
    )
    # the same variable twice is tolerated by Elemwise (destroyhandler_tolerate_same) ...
    b = x * x
    fg2, handler2 = _fgraph([x], [b])
    fg2.replace_all_validate([(b, mul_inplace(x, x))])
    assert len(handler2.destroyers) == 1


def test_fgraph_same_variable_twice_is_vetoed_for_ops_that_do_not_tolerate_it():
    x = T.vector("x")
    whole = (("s", False, False, False),)
    pure = IncSubtensor(whole, True)(x, x)
    fg, handler = _fgraph([x], [pure])
    destroyer = IncSubtensor(whole, True, inplace=True)(x, x)
    _assert_vetoed(fg, handler, [(pure, destroyer)], r"destroy input 0 while reading it")


def test_fgraph_destroyer_creating_a_cycle_is_vetoed():
    x, y = T.vectors("x", "y")
    z = x + y
    out = z * x  # reads x (old value) and depends on z
    fg, handler = _fgraph([x, y], [out])
    # fast_inplace_check "will not detect cycles"
    assert fast_inplace_check(fg, [x, y]) == [x, y]
    _assert_vetoed(fg, handler, [(z, add_inplace(x, y))], r"form a cycle")


def test_fgraph_reader_before_destroyer_ordering():
    x, y = T.vectors("x", "y")
    view = x[::-1]
    log_x, log_view, a = T.log(x), T.log(view), x + y
    fg, handler = _fgraph([x, y], [log_x, log_view, a])
    fg.replace_all_validate([(a, add_inplace(x, y))])
    (destroyer,) = handler.destroyers
    orderings = handler.orderings(fg)
    # readers of x itself, and of its view (the view's own node reads x too)
    assert orderings == {destroyer: {log_x.owner, view.owner, log_view.owner}}
    assert fg.orderings() == orderings
    order = fg.toposort()
    assert order[-1] is destroyer  # every reader of x or of its view runs first
    assert order.index(view.owner) < order.index(log_view.owner)


def test_fgraph_no_orderings_without_other_readers():
    x, y = T.vectors("x", "y")
    t = x * 2
    a = t + y
    fg, handler = _fgraph([x, y], [a], protected=[x, y])
    fg.replace_all_validate([(a, add_inplace(t, y))])
    assert handler.orderings(fg) == {}
    assert len(handler.destroyers) == 1


def test_fgraph_rollback_restores_views_and_destroyers_after_partial_transaction():
    x, y = T.vectors("x", "y")
    a, b = x + y, T.exp(x)
    fg, handler = _fgraph([x, y], [a, b], protected=[x])
    # the first pair is legal on its own (a new view of y), the second is not
    pairs = [(a, add_into_second(x, y[::-1])), (b, exp_inplace(x))]
    _assert_vetoed(fg, handler, pairs, r"would destroy the input 'x'")
    assert y not in handler.views or not handler.views[y]
    assert not handler.destroyers


def test_fast_inplace_check():
    x, y, z = T.vectors("x", "y", "z")
    c = T.constant(np.array([1.0, 2.0]))
    s = tensorjit.shared(np.array([1.0, 2.0]), name="s")
    x_view, y_view = x[::-1], y[::-1]
    t = y * 2
    outs = [x_view + y_view, c + z, s * 2, t + 1]
    fg, handler = _fgraph([x, y, z, s], outs, protected=[x], update_outputs={s: 2})
    candidates = [x, y, z, c, s, x_view, y_view, t]
    assert fast_inplace_check(fg, candidates) == [y, z, s, y_view, t]
    # once y is destroyed, neither y nor its views can be destroyed again
    fg.replace_all_validate(
        [(outs[3], add_inplace(t, 1)), (outs[0], add_into_second(x_view, y_view))]
    )
    assert fast_inplace_check(fg, candidates) == [z, s]
    assert not handler.destroyable(y)


def test_fast_inplace_check_needs_a_destroy_handler():
    x = T.vector("x")
    fg = FunctionGraph([x], [x * 2], clone=False)
    with pytest.raises(ValueError, match=r"needs a FunctionGraph with a DestroyHandler"):
        fast_inplace_check(fg, [x])


def test_a_second_destroy_handler_is_refused_and_not_attached():
    x = T.vector("x")
    fg, handler = _fgraph([x], [x * 2])
    second = DestroyHandler()
    with pytest.raises(InconsistencyError, match=r"only one DestroyHandler"):
        fg.attach_feature(second)
    assert second not in fg.features
    assert fg.get_feature(DestroyHandler) is handler


def test_pruned_destroyer_is_forgotten():
    x, y = T.vectors("x", "y")
    a = x + y
    fg, handler = _fgraph([x, y], [a])
    destroyer = add_inplace(x, y)
    fg.replace_all_validate([(a, destroyer)])
    assert handler.destroyers == {destroyer.owner}
    fg.replace_all_validate([(destroyer, x * y)])
    assert not handler.destroyers
    assert fast_inplace_check(fg, [x]) == [x]
