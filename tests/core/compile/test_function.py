"""tensorjit.function(): outputs, inputs (In, defaults, keywords), updates, givens,
graph cutting, unused/missing inputs, modes, Variable.eval and freeing of temporaries."""

import re
import sys
import warnings

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit import In
from tensorjit.core.config import config
from tensorjit.core.graph.fgraph import MissingInputError

F64 = np.float64


def _site() -> str:
    """``file:line`` of the caller, as the library records creation sites."""
    frame = sys._getframe(1)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


# ---------------------------------------------------------------- outputs


def test_single_output_is_returned_unwrapped():
    x = T.vector("x")
    f = tensorjit.function([x], x * 2)
    out = f(np.array([1.0, 2.0]))
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, [2.0, 4.0])


def test_list_of_outputs_returns_a_list_in_order():
    x = T.vector("x")
    f = tensorjit.function([x], [x * 2, x + 1, x.sum()])
    out = f(np.array([1.0, 2.0]))
    assert isinstance(out, list)
    assert len(out) == 3
    np.testing.assert_array_equal(out[0], [2.0, 4.0])
    np.testing.assert_array_equal(out[1], [2.0, 3.0])
    assert out[2] == 3.0


def test_list_with_one_output_returns_a_list_of_one():
    x = T.vector("x")
    out = tensorjit.function([x], [x * 2])(np.array([1.0]))
    assert isinstance(out, list)
    assert len(out) == 1
    np.testing.assert_array_equal(out[0], [2.0])


def test_tuple_of_outputs_returns_a_list():
    x = T.vector("x")
    out = tensorjit.function([x], (x, x * 3))(np.array([1.0]))
    assert isinstance(out, list)
    np.testing.assert_array_equal(out[0], [1.0])
    np.testing.assert_array_equal(out[1], [3.0])


@pytest.mark.parametrize("outputs", [None, []])
def test_no_outputs_returns_empty_list_and_still_runs_updates(outputs):
    s = tensorjit.shared(np.array([1.0, 2.0]), name="s")
    f = tensorjit.function([], outputs, updates={s: s * 10})
    assert f() == []
    np.testing.assert_array_equal(s.get_value(), [10.0, 20.0])
    assert f() == []
    np.testing.assert_array_equal(s.get_value(), [100.0, 200.0])


def test_scalar_output_is_a_zero_d_ndarray():
    x = T.vector("x")
    out = tensorjit.function([x], x.sum())(np.array([1.0, 2.0, 3.0]))
    assert isinstance(out, np.ndarray)
    assert out.shape == ()
    assert out == 6.0


def test_output_that_is_a_constant():
    x = T.scalar("x")
    f = tensorjit.function([x], [x * 2, T.constant(np.array([1.0, 2.0]))])
    a, c = f(3.0)
    assert a == 6.0
    np.testing.assert_array_equal(c, [1.0, 2.0])


def test_python_list_argument_is_converted():
    x = T.vector("x")
    out = tensorjit.function([x], x + 1)([1.0, 2.0])
    np.testing.assert_array_equal(out, [2.0, 3.0])
    assert out.dtype == np.float64


# ---------------------------------------------------------------- In: defaults, keywords


def test_in_default_value_is_used_when_argument_is_omitted():
    x, y = T.scalar("x"), T.scalar("y")
    f = tensorjit.function([x, In(y, value=10.0)], x + y)
    assert f(1.0) == 11.0
    assert f(1.0, 2.0) == 3.0
    # the default is still there after being overridden once
    assert f(5.0) == 15.0


def test_arguments_by_keyword_use_the_variable_name():
    x, y = T.scalar("x"), T.scalar("y")
    f = tensorjit.function([x, In(y, value=10.0)], x - y)
    assert f(1.0, y=4.0) == -3.0
    assert f(x=1.0, y=4.0) == -3.0
    assert f(y=4.0, x=1.0) == -3.0
    assert f(x=1.0) == -9.0


def test_in_name_overrides_the_variable_name_for_keywords():
    x, w = T.scalar("x"), T.scalar("w")
    f = tensorjit.function([x, In(w, name="weight", value=2.0)], x * w)
    assert f(3.0, weight=5.0) == 15.0
    assert f(3.0) == 6.0
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'w'.*'weight'"):
        f(3.0, w=5.0)


def test_several_defaults_can_be_overridden_individually_by_keyword():
    x, a, b = T.scalar("x"), T.scalar("a"), T.scalar("b")
    f = tensorjit.function([x, In(a, value=1.0), In(b, value=100.0)], x * a + b)
    assert f(2.0) == 102.0
    assert f(2.0, b=0.0) == 2.0
    assert f(2.0, a=3.0) == 106.0
    assert f(2.0, 3.0, 0.0) == 6.0


def test_keyword_and_positional_for_the_same_input_is_an_error():
    x = T.scalar("x")
    f = tensorjit.function([x], x + 1)
    with pytest.raises(TypeError, match=r"multiple values for input 'x'"):
        f(1.0, x=2.0)


def test_in_requires_a_symbolic_variable():
    with pytest.raises(TypeError, match=r"In\(\) expects a symbolic Variable"):
        In(np.zeros(2))


def test_in_mutable_implies_borrow_and_conflicts_with_borrow_false():
    x = T.vector("x")
    assert In(x, mutable=True).borrow is True
    assert In(x).borrow is False
    with pytest.raises(ValueError, match=r"mutable=True implies borrow=True"):
        In(x, mutable=True, borrow=False)


def test_same_input_twice_is_rejected():
    x = T.vector("x")
    with pytest.raises(ValueError, match=r"input 'x' .* is given twice"):
        tensorjit.function([x, x], x * 2)


# ---------------------------------------------------------------- updates


def test_updates_as_dict():
    s = tensorjit.shared(np.array([1.0, 2.0]), name="s")
    x = T.vector("x")
    f = tensorjit.function([x], s * 2, updates={s: s + x})
    np.testing.assert_array_equal(f(np.array([1.0, 1.0])), [2.0, 4.0])
    np.testing.assert_array_equal(s.get_value(), [2.0, 3.0])
    np.testing.assert_array_equal(f(np.array([1.0, 1.0])), [4.0, 6.0])
    np.testing.assert_array_equal(s.get_value(), [3.0, 4.0])


def test_updates_as_list_of_pairs():
    a = tensorjit.shared(np.array(1.0), name="a")
    b = tensorjit.shared(np.array(5.0), name="b")
    f = tensorjit.function([], [], updates=[(a, a + 1), (b, b * 2)])
    f()
    assert a.get_value() == 2.0
    assert b.get_value() == 10.0


def test_update_list_items_must_be_pairs():
    a = tensorjit.shared(np.array(1.0), name="a")
    with pytest.raises(TypeError, match=r"updates must be a dict or a list of \(variable, value\)"):
        tensorjit.function([], [], updates=[(a, a + 1, 3)])


def test_only_shared_variables_can_be_updated():
    x = T.scalar("x")
    with pytest.raises(TypeError, match=r"only shared variables can be updated, got 'x'"):
        tensorjit.function([x], x, updates={x: x + 1})


def test_same_shared_variable_updated_twice_is_rejected():
    a = tensorjit.shared(np.array(1.0), name="a")
    with pytest.raises(ValueError, match=r"'a' .* is updated twice"):
        tensorjit.function([], [], updates=[(a, a + 1), (a, a + 2)])


def test_updates_swap_two_shared_variables():
    a = tensorjit.shared(np.array([1.0, 2.0]), name="a")
    b = tensorjit.shared(np.array([3.0, 4.0]), name="b")
    swap = tensorjit.function([], [], updates={a: b, b: a})
    swap()
    np.testing.assert_array_equal(a.get_value(), [3.0, 4.0])
    np.testing.assert_array_equal(b.get_value(), [1.0, 2.0])
    swap()
    np.testing.assert_array_equal(a.get_value(), [1.0, 2.0])
    np.testing.assert_array_equal(b.get_value(), [3.0, 4.0])


def test_updates_use_old_values_of_every_shared_variable():
    a = tensorjit.shared(np.array(10.0), name="a")
    b = tensorjit.shared(np.array(3.0), name="b")
    f = tensorjit.function([], [], updates=[(a, a + b), (b, a - b)])
    f()
    assert a.get_value() == 13.0
    assert b.get_value() == 7.0  # 10 - 3, not 13 - 3


def test_outputs_are_computed_before_any_update_is_applied():
    a = tensorjit.shared(np.array(1.0), name="a")
    b = tensorjit.shared(np.array(2.0), name="b")
    f = tensorjit.function([], [a, b, a * 100 + b], updates={a: b, b: a})
    out_a, out_b, combo = f()
    assert out_a == 1.0
    assert out_b == 2.0
    assert combo == 102.0
    assert a.get_value() == 2.0
    assert b.get_value() == 1.0


def test_update_expression_is_cast_to_the_shared_dtype():
    s = tensorjit.shared(np.zeros(2), name="s")
    i = T.lvector("i")
    f = tensorjit.function([i], [], updates={s: i})
    f(np.array([1, 2]))
    value = s.get_value()
    assert value.dtype == np.float64
    np.testing.assert_array_equal(value, [1.0, 2.0])


def test_failed_call_applies_no_update():
    s = tensorjit.shared(np.array([1.0, 2.0]), name="s")
    m = T.matrix("m")
    f = tensorjit.function([m], T.dot(m, s), updates={s: s + 1})
    with pytest.raises(ValueError, match=r"not aligned"):
        f(np.ones((2, 3)))
    np.testing.assert_array_equal(s.get_value(), [1.0, 2.0])


# ---------------------------------------------------------------- givens


def test_givens_replace_a_variable_by_an_expression_of_an_input():
    x, z = T.vector("x"), T.vector("z")
    y = x * 2
    f = tensorjit.function([z], y, givens={x: z + 1})
    np.testing.assert_array_equal(f(np.array([1.0, 2.0])), [4.0, 6.0])
    # the original graph is left untouched
    np.testing.assert_array_equal(y.eval({x: np.array([1.0])}), [2.0])


def test_givens_as_list_of_pairs():
    x, z = T.vector("x"), T.vector("z")
    f = tensorjit.function([z], x * 2, givens=[(x, z * z)])
    np.testing.assert_array_equal(f(np.array([3.0])), [18.0])


def test_givens_replace_a_variable_by_a_shared_variable():
    x = T.vector("x")
    s = tensorjit.shared(np.array([1.0, 2.0]), name="s")
    f = tensorjit.function([], x * 2, givens={x: s})
    np.testing.assert_array_equal(f(), [2.0, 4.0])
    s.set_value(np.array([5.0]))
    np.testing.assert_array_equal(f(), [10.0])


def test_givens_replace_a_shared_variable_by_an_input():
    s = tensorjit.shared(np.array([1.0, 2.0]), name="s")
    x = T.vector("x")
    f = tensorjit.function([x], s + 1, givens={s: x})
    np.testing.assert_array_equal(f(np.array([7.0])), [8.0])
    np.testing.assert_array_equal(s.get_value(), [1.0, 2.0])


def test_givens_replacement_of_incompatible_type_is_rejected():
    x = T.vector("x")
    m = T.matrix("m")
    with pytest.raises(TypeError, match=r"givens: replacement for 'x'"):
        tensorjit.function([m], x * 2, givens={x: m})


# ---------------------------------------------------------------- inputs with an owner


def test_intermediate_input_cuts_the_graph():
    x = T.vector("x")
    h = T.exp(x)
    y = h * 3
    f = tensorjit.function([h], y)
    # x is not needed: the value given for h is used as is
    np.testing.assert_array_equal(f(np.array([1.0, 2.0])), [3.0, 6.0])
    # the original graph still computes through exp
    np.testing.assert_allclose(y.eval({x: np.array([0.0])}), [3.0])


def test_intermediate_input_and_its_own_input_together():
    x = T.vector("x")
    h = x + 1
    f = tensorjit.function([x, h], h * 10 + x)
    # h is taken from the argument, not recomputed from x
    np.testing.assert_array_equal(f(np.array([1.0]), np.array([5.0])), [51.0])


def test_intermediate_input_does_not_remove_other_dependencies():
    x = T.vector("x")
    h = x + 1
    with pytest.raises(MissingInputError, match=r"depend on 'x'"):
        tensorjit.function([h], h * 2 + x)


# ---------------------------------------------------------------- unused / missing inputs


def test_unused_input_raises_by_default():
    x, y = T.vector("x"), T.vector("unused_y")
    with pytest.raises(
        ValueError,
        match=r"input 'unused_y' .* is not used to compute any output or update .*"
        r"on_unused_input='warn' or 'ignore'",
    ):
        tensorjit.function([x, y], x * 2)


def test_unused_input_raise_explicit():
    x, y = T.vector("x"), T.vector("y")
    with pytest.raises(ValueError, match=r"input 'y' .* is not used"):
        tensorjit.function([x, y], x * 2, on_unused_input="raise")


def test_unused_input_warn():
    x = T.vector("x")
    y, site = T.vector("y"), _site()
    with pytest.warns(UserWarning, match=r"input 'y' .* is not used") as record:
        f = tensorjit.function([x, y], x * 2, on_unused_input="warn")
    messages = [str(w.message) for w in record]
    assert any(site in m for m in messages)
    # the warning points at the caller of function()
    assert any(w.filename == __file__ for w in record)
    # the unused input must still be passed
    np.testing.assert_array_equal(f(np.array([1.0]), np.array([9.0])), [2.0])


def test_unused_input_ignore():
    x, y = T.vector("x"), T.vector("y")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = tensorjit.function([x, y], x * 2, on_unused_input="ignore")
    np.testing.assert_array_equal(f(np.array([1.0]), np.array([9.0])), [2.0])


def test_unused_input_default_follows_config():
    x, y = T.vector("x"), T.vector("y")
    with config.change_flags(on_unused_input="ignore"):
        f = tensorjit.function([x, y], x * 2)
    np.testing.assert_array_equal(f(np.array([1.0]), np.array([0.0])), [2.0])


def test_input_used_only_by_an_update_is_used():
    s = tensorjit.shared(np.array(0.0), name="s")
    x = T.scalar("x")
    f = tensorjit.function([x], [], updates={s: x})
    f(4.0)
    assert s.get_value() == 4.0


def test_invalid_on_unused_input_value():
    x = T.vector("x")
    with pytest.raises(ValueError, match=r"on_unused_input must be 'raise', 'warn' or 'ignore'"):
        tensorjit.function([x], x, on_unused_input="sometimes")


def test_missing_input_names_the_variable_and_its_creation_site():
    x = T.vector("x")
    y, site = T.vector("forgotten"), _site()
    with pytest.raises(MissingInputError, match=r"depend on 'forgotten'") as excinfo:
        tensorjit.function([x], x + y)
    message = str(excinfo.value)
    assert f"created at {site}" in message
    assert "test_function.py" in message
    # the declared inputs are listed too
    assert "'x'" in message


def test_missing_input_with_no_inputs_at_all():
    y = T.scalar("y")
    with pytest.raises(MissingInputError, match=r"depend on 'y' .* inputs \(none\)"):
        tensorjit.function([], y * 2)


def test_shared_variable_as_explicit_input_is_a_type_error():
    s = tensorjit.shared(np.zeros(2), name="weights")
    with pytest.raises(
        TypeError, match=r"shared variable 'weights' .* can not be an explicit input"
    ):
        tensorjit.function([s], s * 2)


def test_constant_as_input_is_a_type_error():
    c = T.constant(np.zeros(2), name="c")
    with pytest.raises(TypeError, match=r"constant 'c' .* can not be a function input"):
        tensorjit.function([c], c * 2)


def test_inputs_must_be_a_list():
    x = T.vector("x")
    with pytest.raises(TypeError, match=r"function inputs must be a list"):
        tensorjit.function(x, x * 2)


def test_non_variable_output_is_rejected():
    x = T.vector("x")
    with pytest.raises(TypeError, match=r"function outputs must be Variables or Out"):
        tensorjit.function([x], [x, 3])


# ---------------------------------------------------------------- modes


def _mode_cases():
    x = T.vector("x")
    m = T.matrix("m")
    return [
        ([x], [x * 2 + 1, T.exp(x).sum()], [np.array([0.5, -1.0, 2.0])]),
        ([m, x], [T.dot(m, x), m.T, m[1:, ::-1]], [np.arange(6.0).reshape(2, 3), np.ones(3)]),
        ([x], [(x + 0) * 1, x.max(), x.argmax(), x.shape], [np.array([3.0, 9.0, 1.0])]),
        ([m], [T.set_subtensor(m[0], 7.0), m.mean(axis=0), m.flatten()], [np.ones((2, 2))]),
    ]


@pytest.mark.parametrize("case", range(4))
def test_fast_compile_and_fast_run_agree(case):
    inputs, outputs, args = _mode_cases()[case]
    fr = tensorjit.function(inputs, outputs, mode="FAST_RUN")
    fc = tensorjit.function(inputs, outputs, mode="FAST_COMPILE")
    assert fr.mode.name == "FAST_RUN"
    assert fc.mode.name == "FAST_COMPILE"
    for a, b in zip(fr(*args), fc(*args), strict=True):
        assert a.dtype == b.dtype
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b)


def test_mode_objects_are_accepted():
    x = T.vector("x")
    for mode in (tensorjit.FAST_RUN, tensorjit.FAST_COMPILE):
        f = tensorjit.function([x], x * 3, mode=mode)
        assert f.mode is mode
        np.testing.assert_array_equal(f(np.array([2.0])), [6.0])


def test_unknown_mode_is_rejected():
    x = T.vector("x")
    with pytest.raises(ValueError, match=r"unknown mode 'TURBO'"):
        tensorjit.function([x], x, mode="TURBO")


def test_updates_agree_between_modes():
    results = []
    for mode in ("FAST_RUN", "FAST_COMPILE"):
        s = tensorjit.shared(np.array([1.0, 2.0]), name="s")
        f = tensorjit.function([], s.sum(), updates={s: s * s + 1}, mode=mode)
        results.append([f(), f(), s.get_value()])
    assert results[0][0] == results[1][0]
    assert results[0][1] == results[1][1]
    np.testing.assert_array_equal(results[0][2], results[1][2])


# ---------------------------------------------------------------- Variable.eval


def test_eval_with_inputs():
    x, y = T.vector("x"), T.vector("y")
    z = x * y + 1
    np.testing.assert_array_equal(
        z.eval({x: np.array([1.0, 2.0]), y: np.array([3.0, 4.0])}), [4.0, 9.0]
    )
    # cached function, new values
    np.testing.assert_array_equal(z.eval({x: np.array([0.0]), y: np.array([5.0])}), [1.0])


def test_eval_without_inputs_uses_shared_and_constants():
    s = tensorjit.shared(np.array([1.0, 2.0]), name="s")
    e = s * 2 + T.constant(np.array([0.5, 0.5]))
    np.testing.assert_array_equal(e.eval(), [2.5, 4.5])
    s.set_value(np.array([0.0, 0.0]))
    np.testing.assert_array_equal(e.eval(), [0.5, 0.5])


def test_eval_of_an_input_variable_itself():
    x = T.vector("x")
    value = np.array([1.0, 2.0])
    out = x.eval({x: value})
    np.testing.assert_array_equal(out, value)
    assert not np.shares_memory(out, value)


def test_eval_missing_input():
    x, y = T.scalar("x"), T.scalar("y")
    with pytest.raises(MissingInputError, match=r"depend on 'y'"):
        (x + y).eval({x: 1.0})


# ---------------------------------------------------------------- temporaries


def _intermediate_cells(f):
    return {v: cell for v, cell in f.vm.storage.items() if v.owner is not None}


def _input_cells(f):
    return [f.vm.storage[v] for v in f.fgraph.inputs[: len(f.inputs)]]


def test_intermediate_results_are_freed_after_a_call():
    x = T.vector("x")
    y = T.exp(x) * 2 + T.sqrt(x)
    with config.change_flags(allow_gc=True):
        f = tensorjit.function([x], y, mode=tensorjit.FAST_RUN.excluding("fusion"))
    np.testing.assert_allclose(f(np.array([1.0, 4.0])), 2 * np.exp([1.0, 4.0]) + [1.0, 2.0])
    cells = _intermediate_cells(f)
    assert len(cells) >= 4  # exp, mul, sqrt, add
    for var, cell in cells.items():
        assert cell[0] is None, f"{var} still holds {cell[0]!r}"
    for cell in _input_cells(f):
        assert cell[0] is None


def test_outputs_and_update_values_are_not_kept_by_the_function():
    s = tensorjit.shared(np.array([1.0]), name="s")
    x = T.vector("x")
    f = tensorjit.function([x], [x * 2, s + x], updates={s: s * x})
    f(np.array([3.0]))
    for var, cell in _intermediate_cells(f).items():
        assert cell[0] is None, f"{var} still holds {cell[0]!r}"
    for cell in _input_cells(f):
        assert cell[0] is None
    # the shared variable's own cell is not a temporary: it keeps the updated value
    np.testing.assert_array_equal(s.get_value(), [3.0])


class _Probe(tensorjit.Op):
    """Identity-like Op that records which storage cells are empty when it runs."""

    __props__ = ()

    def __init__(self):
        self.function = None
        self.seen_empty = None

    def make_node(self, x):
        return tensorjit.Apply(self, [x], [x.type.make_variable()])

    def perform(self, node, inputs, output_storage):
        self.seen_empty = {str(v): cell[0] is None for v, cell in self.function.vm.storage.items()}
        output_storage[0][0] = inputs[0] * 1.0


def test_temporaries_are_freed_right_after_their_last_use():
    x = T.vector("x")
    early = T.exp(x)
    early.name = "early"
    middle = early + 1.0
    middle.name = "middle"
    probe = _Probe()
    out = probe(middle)
    # The per-node VM's cells (a whole-graph program would run the probe as a Python
    # step, with its values in the program's slots), without the inplace pass, which
    # would let "middle" reuse "early"'s buffer.
    with config.change_flags(allow_gc=True, whole_graph=False):
        f = tensorjit.function([x], out, mode=tensorjit.FAST_RUN.excluding("inplace", "fusion"))
    probe.function = f
    np.testing.assert_allclose(f(np.array([0.0])), [2.0])
    # when the probe runs, exp's result (last used by the add) is already gone,
    # while its own input is still there
    assert probe.seen_empty["early"] is True
    assert probe.seen_empty["middle"] is False


def test_temporaries_are_freed_after_a_call_that_fails_in_a_node():
    # BUG: when a node raises, results computed by earlier nodes stay in the VM storage
    # until the next call, keeping (possibly large) arrays alive.
    a, b = T.matrix("a"), T.matrix("b")
    f = tensorjit.function([a, b], T.dot(T.exp(a), b) + 1)
    with pytest.raises(ValueError, match=r"not aligned"):
        f(np.ones((2, 3)), np.ones((4, 2)))
    for cell in _input_cells(f):
        assert cell[0] is None
    for var, cell in _intermediate_cells(f).items():
        assert cell[0] is None, f"{var} still holds a value after the failed call"


def test_arguments_are_not_kept_after_a_call_rejected_while_loading_arguments():
    # BUG: when argument 1 is rejected, argument 0 stays referenced by its input cell.
    a, b = T.vector("a"), T.vector("b")
    f = tensorjit.function([a, b], a + b)
    with pytest.raises(ValueError, match=r"bad argument 1"):
        f(np.ones(3), np.ones((2, 2)))
    for var, cell in zip(f.fgraph.inputs, _input_cells(f), strict=True):
        assert cell[0] is None, f"input {var} still holds {cell[0]!r}"


def test_function_name_appears_in_call_errors():
    x = T.vector("x")
    f = tensorjit.function([x], x, name="my_fn")
    assert f.name == "my_fn"
    with pytest.raises(TypeError, match=re.escape("compiled function 'my_fn' takes 1 arguments")):
        f(np.ones(1), np.ones(1))


def test_in_update_replaces_the_default_after_each_call():
    x = T.scalar("x")
    acc = T.scalar("acc")
    f = tensorjit.function([x, tensorjit.In(acc, value=0.0, update=acc + x)], acc + x)
    assert [float(f(1.0)), float(f(2.0)), float(f(3.0))] == [1.0, 3.0, 6.0]
    assert float(f(1.0, 10.0)) == 11.0  # an explicit argument still wins
    other = tensorjit.function([x, tensorjit.In(acc, value=0.0, update=acc + x)], acc + x)
    assert float(other(1.0)) == 1.0  # each function keeps its own state


def test_in_update_without_initial_value_is_required_until_updated():
    # As in Theano: the first call must give it; the update then becomes its default.
    x = T.scalar("x")
    f = tensorjit.function([tensorjit.In(x, update=x + 1)], x * 2)
    with pytest.raises(TypeError, match="missing 1 required argument"):
        f()
    assert float(f(1.0)) == 2.0
    assert float(f()) == 4.0 and f[x] == 3.0


def test_default_updates_of_shared_variables():
    s = tensorjit.shared(np.zeros(2), name="s")
    s.default_update = s + 1
    f = tensorjit.function([], s * 2)
    np.testing.assert_array_equal(f(), [0.0, 0.0])
    np.testing.assert_array_equal(f(), [2.0, 2.0])
    np.testing.assert_array_equal(s.get_value(), [2.0, 2.0])
    frozen = tensorjit.function([], s * 2, no_default_updates=True)
    np.testing.assert_array_equal(frozen(), [4.0, 4.0])
    np.testing.assert_array_equal(frozen(), [4.0, 4.0])
    explicit = tensorjit.function([], s * 2, updates={s: s * 10})  # an explicit one wins
    explicit()
    np.testing.assert_array_equal(s.get_value(), [20.0, 20.0])
