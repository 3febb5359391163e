"""Regression tests for aliasing and buffer-reuse bugs found in review."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit import In, Out, function, shared
from tensorjit.tensor.inplace import add_inplace, mul_inplace


def test_a_borrowed_output_does_not_overwrite_a_plain_output_of_the_same_buffer():
    x = T.vector("x")
    y = x + 1
    f = function([x], [y, Out(y, borrow=True)])
    first = f(np.zeros(3))[0]
    f(np.full(3, 10.0))
    np.testing.assert_array_equal(first, [1.0, 1.0, 1.0])
    g = function([x], [y.dimshuffle("x", 0), Out(y, borrow=True)])
    kept = g(np.zeros(2))[0]
    g(np.ones(2))
    np.testing.assert_array_equal(kept, [[1.0, 1.0]])


def test_without_gc_buffers_that_left_the_function_are_not_reused():
    with tensorjit.config.change_flags(allow_gc=False):
        x = T.vector("x")
        s = shared(np.zeros(3))
        y = T.exp(x)
        f = function([x], s * y.sum(), updates={s: y[::-1]})
    f(np.zeros(3))
    np.testing.assert_allclose(f(np.log([1.0, 2.0, 3.0])), [6.0, 6.0, 6.0])
    np.testing.assert_allclose(s.get_value(), [3.0, 2.0, 1.0])


def test_reused_buffers_follow_changing_broadcast_shapes():
    r, m = T.row("r"), T.matrix("m")
    f = function([r, m], T.exp(r + m).sum())
    ones = np.ones((1, 4))
    for rows in (1, 1, 3, 1, 2):
        assert np.isclose(f(ones, np.ones((rows, 4))), rows * 4 * np.exp(2.0))


def test_free_keeps_shared_values_and_constants():
    s = shared(np.ones(1))
    f = function([], s)
    f()
    f.free()
    np.testing.assert_array_equal(s.get_value(), [1.0])
    x = T.vector("x")
    c = T.constant(np.array([5.0]))
    g = function([x], [x + c, c])
    g(np.ones(1))
    g.free()
    np.testing.assert_array_equal(g(np.ones(1))[1], [5.0])
    h = function([x], Out(x * 2, borrow=True))
    h(np.ones(3))
    h.free()
    np.testing.assert_array_equal(h(np.ones(3)), [2.0, 2.0, 2.0])


def test_a_destroyable_argument_aliasing_a_protected_one_is_copied():
    x, y = T.vector("x"), T.vector("y")
    f = function([In(x, mutable=True), y], [T.exp(x), y * 2])
    a = np.zeros(3)
    _, doubled = f(a, a)
    np.testing.assert_array_equal(doubled, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(a, [0.0, 0.0, 0.0])
    g = function([In(x, mutable=True), y], (x + 1) * y.sum())
    np.testing.assert_array_equal(g(a + 1, a + 1), [6.0, 6.0, 6.0])
    b = np.ones(3)
    np.testing.assert_array_equal(g(b, b), [6.0, 6.0, 6.0])


def test_a_failed_call_leaves_shared_values_unchanged():
    s = shared(np.zeros(3))
    x = T.vector("x")
    f = function([x], [], updates={s: s + x})
    with pytest.raises(ValueError):
        f(np.ones(2))
    np.testing.assert_array_equal(s.get_value(), [0.0, 0.0, 0.0])
    t = shared(np.zeros((2, 2)))
    a, b = T.matrices("a", "b")
    g = function([a, b], [], updates={s: s + 1, t: T.dot(a, b)})
    with pytest.raises(ValueError, match="not aligned"):
        g(np.ones((2, 3)), np.ones((2, 2)))
    np.testing.assert_array_equal(s.get_value(), [0.0, 0.0, 0.0])


def test_a_read_only_borrowed_shared_value_is_copied():
    v = np.ones(3)
    v.flags.writeable = False
    s = shared(v, borrow=True)
    function([], [], updates={s: s + 1})()
    np.testing.assert_array_equal(s.get_value(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(v, [1.0, 1.0, 1.0])
    s.set_value(v, borrow=True)
    function([], [], updates={s: s * 3})()
    np.testing.assert_array_equal(s.get_value(), [3.0, 3.0, 3.0])


def test_debugmode_accepts_an_inplace_op_reading_its_target_twice():
    s = shared(np.full(3, 2.0))
    function([], [], updates={s: s * s}, mode="DebugMode")()
    np.testing.assert_array_equal(s.get_value(), [4.0, 4.0, 4.0])


def test_debugmode_accepts_nan_inputs():
    x = T.vector("x")
    out = function([x], x * 2, mode="DebugMode")(np.array([np.nan, 1.0]))
    assert np.isnan(out[0]) and out[1] == 2.0


def test_debugmode_accepts_a_view_whose_other_input_aliases_the_viewed_one():
    iv = T.lvector("iv")
    f = function([iv], iv[iv[0] :] * 2, mode="DebugMode")
    np.testing.assert_array_equal(f(np.array([1, 1, 2])), [2, 4])


def test_hand_built_destroyers_forming_a_cycle_get_a_copy():
    x, y = T.vector("x"), T.vector("y")
    t, u = T.exp(x), T.exp(y)
    f = function([x, y], [add_inplace(t, u), mul_inplace(u, t)], accept_inplace=True)
    a, b = np.array([0.0, 1.0]), np.array([1.0, 2.0])
    total, product = f(a, b)
    np.testing.assert_allclose(total, np.exp(a) + np.exp(b))
    np.testing.assert_allclose(product, np.exp(a) * np.exp(b))


def test_cancelling_terms_keeps_the_broadcast_shape():
    v, m = T.vector("v"), T.matrix("m")
    f = function([v, m], v - (m - m))
    np.testing.assert_array_equal(f(np.ones(2), np.ones((3, 2))), np.ones((3, 2)))
    g = function([v, m], v * m / m)
    np.testing.assert_array_equal(g(np.full(2, 2.0), np.full((3, 2), 3.0)), np.full((3, 2), 2.0))


def test_a_borrowed_output_passed_back_as_input_is_not_overwritten_while_read():
    x = T.vector("x")
    f = function([x], Out(T.exp(x) + x[::-1], borrow=True))
    state = f(np.array([0.0, 1.0]))
    expected = np.exp(state) + state[::-1]
    np.testing.assert_allclose(f(state), expected)
    state = f(np.array([0.0, 1.0]))
    np.testing.assert_allclose(f.call_trusted([state])[0], expected)


def test_call_trusted_stores_every_update_like_a_call():
    # Shared variables' updates and In(update=...) both land, after the outputs.
    x, acc = T.vector("x"), T.vector("acc")
    total = shared(np.zeros(2), name="total")
    f = function(
        [x, In(acc, value=np.zeros(2), update=acc + x)],
        acc * 1,
        updates=[(total, total + x)],
    )
    step = np.array([1.0, 2.0])
    (first,) = f.call_trusted([step, np.zeros(2)])
    np.testing.assert_array_equal(first, [0.0, 0.0])  # outputs see the old values
    np.testing.assert_array_equal(total.get_value(), step)
    np.testing.assert_array_equal(f(step), step)  # the input's default was updated
    np.testing.assert_array_equal(total.get_value(), 2 * step)


def test_call_trusted_stores_input_updates_without_shared_ones():
    x, acc = T.vector("x"), T.vector("acc")
    f = function([x, In(acc, value=np.zeros(2), update=acc + x)], acc * 2)
    outputs = f.call_trusted([np.ones(2), np.full(2, 3.0)])
    assert len(outputs) == 1
    np.testing.assert_array_equal(outputs[0], [6.0, 6.0])
    np.testing.assert_array_equal(f(np.ones(2)), [8.0, 8.0])  # default became 3 + 1


@pytest.mark.host_memory  # a borrowed value aliases the user's array only on the host
@pytest.mark.parametrize("backends", [("c", "python"), ("python",)], ids=["c", "python"])
def test_an_update_never_writes_into_a_borrowed_array_made_read_only(backends):
    arr = np.ones(3)
    w = tensorjit.shared(arr, borrow=True, name="w")
    x = T.vector("x")
    f = tensorjit.function(
        [x], [], updates={w: w + x}, mode=tensorjit.FAST_RUN.with_backends(*backends)
    )
    f(np.ones(3))
    assert arr.tolist() == [2.0] * 3  # borrowed and writeable: updated in place
    arr.setflags(write=False)  # the user takes the array back
    f(np.ones(3))
    assert arr.tolist() == [2.0] * 3  # never written again
    assert w.get_value().tolist() == [3.0] * 3  # the update went to a copy of its own
    f(np.ones(3))
    assert w.get_value().tolist() == [4.0] * 3
