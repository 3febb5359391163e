"""The memory model of "Understanding Memory Aliasing for Speed and Correctness":
shared variables, get_value/set_value and In/Out borrowing, on the CPU."""

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit import In, Out

shares = np.shares_memory


# ---------------------------------------------------------------- shared(value, borrow)


@pytest.mark.host_memory
def test_doc_example_shared_borrow_copy_vs_alias():
    np_array = np.ones(2, dtype="float32")
    s_default = tensorjit.shared(np_array)
    s_false = tensorjit.shared(np_array, borrow=False)
    s_true = tensorjit.shared(np_array, borrow=True)

    np_array += 1  # now it is an array of 2.0 s

    np.testing.assert_array_equal(s_default.get_value(), [1.0, 1.0])
    np.testing.assert_array_equal(s_false.get_value(), [1.0, 1.0])
    np.testing.assert_array_equal(s_true.get_value(), [2.0, 2.0])


def test_shared_keeps_dtype_of_the_value():
    np_array = np.ones(2, dtype="float32")
    for borrow in (False, True):
        s = tensorjit.shared(np_array, borrow=borrow)
        assert s.type.dtype == "float32"
        assert s.get_value().dtype == np.float32


def test_shared_default_does_not_alias_the_value():
    value = np.arange(4.0)
    s = tensorjit.shared(value)
    assert not shares(s.get_value(borrow=True), value)


@pytest.mark.host_memory
def test_shared_borrow_true_uses_the_value_as_storage_on_cpu():
    value = np.arange(4.0)
    s = tensorjit.shared(value, borrow=True)
    assert shares(s.get_value(borrow=True), value)


def test_shared_of_a_view_without_borrow_copies():
    base = np.arange(6.0)
    view = base[::2]
    s = tensorjit.shared(view)
    base[:] = -1
    np.testing.assert_array_equal(s.get_value(), [0.0, 2.0, 4.0])


def test_shared_of_a_read_only_array_without_borrow_is_writable():
    value = np.arange(3.0)
    value.setflags(write=False)
    s = tensorjit.shared(value)
    internal = s.get_value(borrow=True)
    assert not shares(internal, value)
    f = tensorjit.function([], [], updates={s: s + 1})
    f()
    np.testing.assert_array_equal(s.get_value(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(value, [0.0, 1.0, 2.0])


def test_shared_rejects_symbolic_values():
    with pytest.raises(TypeError, match=r"shared\(\) takes a value"):
        tensorjit.shared(T.vector("x"))


# ---------------------------------------------------------------- get_value


@pytest.mark.host_memory
def test_doc_example_get_value_borrow_false_and_true():
    np_array = np.ones(2, dtype="float32")
    s = tensorjit.shared(np_array)
    v_false = s.get_value(borrow=False)
    v_true = s.get_value(borrow=True)
    internal = s.storage[0]
    assert not shares(v_false, internal)
    assert shares(v_true, internal)
    np.testing.assert_array_equal(v_false, v_true)


def test_get_value_default_never_aliases_internal_storage():
    s = tensorjit.shared(np.arange(3.0), name="s")
    v1 = s.get_value()
    v2 = s.get_value()
    assert not shares(v1, s.get_value(borrow=True))
    assert not shares(v1, v2)
    v1[:] = 100
    np.testing.assert_array_equal(s.get_value(), [0.0, 1.0, 2.0])


def test_get_value_default_does_not_alias_after_updates_or_borrowed_set_value():
    s = tensorjit.shared(np.arange(3.0), name="s")
    tensorjit.function([], [], updates={s: s * 2})()
    assert not shares(s.get_value(), s.get_value(borrow=True))
    mine = np.zeros(3)
    s.set_value(mine, borrow=True)
    got = s.get_value()
    assert not shares(got, mine)
    got[:] = 5
    np.testing.assert_array_equal(mine, [0.0, 0.0, 0.0])


@pytest.mark.host_memory
def test_doc_example_return_internal_type():
    np_array = np.ones(2, dtype="float32")
    s = tensorjit.shared(np_array)
    v_internal = s.get_value(borrow=True, return_internal_type=True)
    assert shares(v_internal, s.storage[0])
    v_copy = s.get_value(borrow=False, return_internal_type=True)
    assert not shares(v_copy, s.storage[0])
    np.testing.assert_array_equal(v_copy, v_internal)


@pytest.mark.parametrize(
    "value",
    [
        np.ones(2, dtype="float32"),
        np.arange(6).reshape(2, 3),
        np.float64(2.5),
        np.array(3, dtype="int8"),
        2.5,
        7,
    ],
    ids=["float32 vector", "int matrix", "numpy scalar", "0-d array", "float", "int"],
)
@pytest.mark.parametrize("borrow", [False, True])
def test_get_value_returns_an_ndarray(value, borrow):
    s = tensorjit.shared(value)
    got = s.get_value(borrow=borrow)
    assert isinstance(got, np.ndarray)
    assert got.shape == np.shape(value)
    np.testing.assert_array_equal(got, value)


def test_get_value_returns_an_ndarray_after_a_scalar_update():
    s = tensorjit.shared(np.float64(1.0), name="s")
    tensorjit.function([], [], updates={s: s.sum() + 1})()
    for borrow in (False, True):
        got = s.get_value(borrow=borrow)
        assert isinstance(got, np.ndarray)
        assert got == 2.0


# ---------------------------------------------------------------- set_value


def test_set_value_copies_by_default():
    s = tensorjit.shared(np.zeros(2), name="s")
    new = np.array([1.0, 2.0])
    s.set_value(new)
    assert not shares(s.get_value(borrow=True), new)
    new[:] = 9
    np.testing.assert_array_equal(s.get_value(), [1.0, 2.0])


@pytest.mark.host_memory
def test_set_value_borrow_true_adopts_the_buffer_on_cpu():
    s = tensorjit.shared(np.zeros(2), name="s")
    new = np.array([1.0, 2.0])
    s.set_value(new, borrow=True)
    assert shares(s.get_value(borrow=True), new)
    new += 1
    np.testing.assert_array_equal(s.get_value(), [2.0, 3.0])


def test_set_value_of_a_view_of_its_own_storage_copies():
    s = tensorjit.shared(np.arange(4.0), name="s")
    old = s.get_value(borrow=True)
    s.set_value(old[::-1])
    assert not shares(s.get_value(borrow=True), old)
    old[:] = 0
    np.testing.assert_array_equal(s.get_value(), [3.0, 2.0, 1.0, 0.0])


def test_set_value_may_change_shape_and_converts_safely():
    s = tensorjit.shared(np.zeros(2), name="s")
    s.set_value(np.array([1, 2, 3], dtype="int32"))
    got = s.get_value()
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [1.0, 2.0, 3.0])


def test_set_value_rejects_wrong_ndim_and_names_the_variable():
    s = tensorjit.shared(np.zeros(2), name="weights")
    with pytest.raises(ValueError, match=r"shared variable 'weights' .*expected 1 dimensions"):
        s.set_value(np.zeros((2, 2)))
    np.testing.assert_array_equal(s.get_value(), [0.0, 0.0])


def test_doc_example_manual_inplace_update_pattern():
    np_array = np.ones(2, dtype="float32")
    s = tensorjit.shared(np_array)

    def some_inplace_fn(v):
        v *= 3
        return v

    s.set_value(some_inplace_fn(s.get_value(borrow=True)), borrow=True)
    np.testing.assert_array_equal(s.get_value(), [3.0, 3.0])
    np.testing.assert_array_equal(np_array, [1.0, 1.0])
    # functions see the new value
    np.testing.assert_array_equal(tensorjit.function([], s * 2)(), [6.0, 6.0])


# ---------------------------------------------------------------- no two shared variables alias


def test_two_shared_variables_from_the_same_array_do_not_alias_by_default():
    value = np.arange(3.0)
    a = tensorjit.shared(value)
    b = tensorjit.shared(value)
    assert not shares(a.get_value(borrow=True), b.get_value(borrow=True))
    tensorjit.function([], [], updates={a: a + 1})()
    np.testing.assert_array_equal(b.get_value(), [0.0, 1.0, 2.0])


@pytest.mark.host_memory
def test_two_shared_variables_borrowing_one_array_do_not_alias_each_other():
    # borrow=True may alias the user's array, but no two shared variables ever alias each
    # other: the second one gets its own copy.
    value = np.arange(3.0)
    a = tensorjit.shared(value, borrow=True)
    b = tensorjit.shared(value, borrow=True)
    assert a.get_value(borrow=True) is value
    assert not shares(a.get_value(borrow=True), b.get_value(borrow=True))
    tensorjit.function([], [], updates={a: a + 1})()  # in place on a's buffer
    np.testing.assert_array_equal(a.get_value(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(b.get_value(), [0.0, 1.0, 2.0])
    b.set_value(a.get_value(borrow=True), borrow=True)
    assert not shares(a.get_value(borrow=True), b.get_value(borrow=True))


def test_shared_from_another_shared_value_without_borrow_is_independent():
    a = tensorjit.shared(np.arange(3.0))
    b = tensorjit.shared(a.get_value(borrow=True))
    assert not shares(a.get_value(borrow=True), b.get_value(borrow=True))


def test_update_from_another_shared_does_not_alias_them():
    a = tensorjit.shared(np.array([1.0, 2.0]), name="a")
    b = tensorjit.shared(np.array([3.0, 4.0]), name="b")
    tensorjit.function([], [], updates={a: b})()
    np.testing.assert_array_equal(a.get_value(), [3.0, 4.0])
    assert not shares(a.get_value(borrow=True), b.get_value(borrow=True))
    a.get_value(borrow=True)[:] = 0.0  # modify a's storage in place
    np.testing.assert_array_equal(b.get_value(), [3.0, 4.0])


def test_swap_update_does_not_alias():
    a = tensorjit.shared(np.array([1.0, 2.0]), name="a")
    b = tensorjit.shared(np.array([3.0, 4.0]), name="b")
    old_a, old_b = a.get_value(borrow=True), b.get_value(borrow=True)
    tensorjit.function([], [], updates={a: b, b: a})()
    new_a, new_b = a.get_value(borrow=True), b.get_value(borrow=True)
    assert not shares(new_a, new_b)
    np.testing.assert_array_equal(new_a, [3.0, 4.0])
    np.testing.assert_array_equal(new_b, [1.0, 2.0])
    # the values the user may still hold (borrowed) are not what the variables now use
    old_a[:] = -1
    old_b[:] = -1
    np.testing.assert_array_equal(a.get_value(), [3.0, 4.0])
    np.testing.assert_array_equal(b.get_value(), [1.0, 2.0])


@pytest.mark.parametrize(
    "make_updates",
    [
        lambda a, b, y: {a: y, b: y},
        lambda a, b, y: {a: y, b: y.T},
        lambda a, b, y: {a: b.T, b: b},
        lambda a, b, y: {a: a[::-1], b: a[::-1]},
        lambda a, b, y: {b: a, a: a},
        lambda a, b, y: {a: a, b: a},
        lambda a, b, y: {a: a[::-1], b: a},
        lambda a, b, y: {a: b[1:], b: b[:-1]},
    ],
    ids=[
        "same",
        "same+view",
        "view of other",
        "two views",
        "ident+other",
        "other+ident",
        "view+other",
        "two slices",
    ],
)
def test_updates_never_make_two_shared_variables_alias(make_updates):
    a = tensorjit.shared(np.array([1.0, 2.0, 3.0]), name="a")
    b = tensorjit.shared(np.array([4.0, 5.0, 6.0]), name="b")
    y = a * 2 + b
    f = tensorjit.function([], [], updates=make_updates(a, b, y))
    for _ in range(2):
        f()
        assert not shares(a.get_value(borrow=True), b.get_value(borrow=True))


def test_update_from_an_input_does_not_alias_the_argument():
    s = tensorjit.shared(np.zeros(2), name="s")
    x = T.vector("x")
    for inp in (x, In(x, borrow=True)):
        f = tensorjit.function([inp], [], updates={s: x})
        arg = np.array([1.0, 2.0])
        f(arg)
        assert not shares(s.get_value(borrow=True), arg)
        arg[:] = 0
        np.testing.assert_array_equal(s.get_value(), [1.0, 2.0])


def test_update_to_a_constant_does_not_alias_the_constant():
    s = tensorjit.shared(np.zeros(2), name="s")
    c = T.constant(np.array([1.0, 2.0]))
    f = tensorjit.function([], [], updates={s: c})
    f()
    internal = s.get_value(borrow=True)
    assert not shares(internal, c.data)
    internal[:] = 50.0  # allowed: the storage belongs to s
    f()
    np.testing.assert_array_equal(s.get_value(), [1.0, 2.0])


def test_update_and_output_of_the_same_expression_do_not_alias():
    s = tensorjit.shared(np.array([1.0, 2.0]), name="s")
    t = tensorjit.shared(np.array([0.0, 0.0]), name="t")
    f = tensorjit.function([], s * 2, updates={s: s * 2, t: s * 2})
    out = f()
    for internal in (s.get_value(borrow=True), t.get_value(borrow=True)):
        assert not shares(out, internal)
    assert not shares(s.get_value(borrow=True), t.get_value(borrow=True))


# ---------------------------------------------------------------- outputs are fresh


def _assert_fresh(outputs, others):
    """No output shares memory with another output or with any array in ``others``."""
    for i, out in enumerate(outputs):
        assert isinstance(out, np.ndarray)
        for other in others:
            assert not shares(out, other), f"output {i} aliases a caller/managed array"
        for j, out2 in enumerate(outputs):
            if i != j:
                assert not shares(out, out2), f"outputs {i} and {j} alias each other"


def _output_cases():
    x = T.vector("x")
    m = T.matrix("m")
    s = tensorjit.shared(np.arange(3.0), name="s")
    sm = tensorjit.shared(np.arange(6.0).reshape(2, 3), name="sm")
    c = T.constant(np.array([7.0, 8.0, 9.0]))
    y = x * 2
    return {
        "input itself": ([x], [x]),
        "input twice": ([x], [x, x]),
        "+input": ([x], [+x]),
        "cast to own dtype": ([x], [T.cast(x, "float64")]),
        "slice of input": ([x], [x[1:]]),
        "ellipsis index": ([x], [x[...]]),
        "reversed input": ([x], [x[::-1]]),
        "transpose": ([m], [m.T]),
        "transpose and input": ([m], [m.T, m]),
        "reshape": ([m], [m.reshape((3, 2))]),
        "flatten": ([m], [m.flatten()]),
        "dimshuffle": ([x], [x.dimshuffle("x", 0)]),
        "reduce over no axis": ([x], [T.sum(x, axis=())]),
        "shared": ([], [s]),
        "shared twice": ([], [s, s]),
        "shared transpose": ([], [sm.T]),
        "shared slice": ([], [s[:2]]),
        "shared view and shared": ([], [sm.T, sm]),
        "constant": ([], [c]),
        "constant twice": ([], [c, c]),
        "constant slice": ([], [c[1:]]),
        "constant expression": ([], [c * 1 + 0]),
        "computed and its view": ([x], [y, y[::-1], y.dimshuffle(0, "x")]),
        "same expression twice": ([x], [x * 2, x * 2]),
        "view of computed first": ([x], [y[1:], y]),
        "mixed": ([x, m], [x, m.T, s, c, y, sm[0]]),
    }, (s, sm, c)


@pytest.mark.parametrize("case", list(_output_cases()[0]))
def test_outputs_never_alias_inputs_shared_constants_or_each_other(case):
    cases, (s, sm, c) = _output_cases()
    inputs, outputs = cases[case]
    f = tensorjit.function(inputs, outputs)
    values = {1: np.arange(3.0), 2: np.arange(6.0).reshape(2, 3)}
    args = [values[i.type.ndim] for i in inputs]
    first = f(*args)
    managed = [s.get_value(borrow=True), sm.get_value(borrow=True), c.data]
    _assert_fresh(first, list(args) + managed)
    second = f(*args)
    _assert_fresh(second, list(args) + managed)
    for out1, out2 in zip(first, second, strict=True):
        assert not shares(out1, out2), "an output aliases the previous call's output"
        np.testing.assert_array_equal(out1, out2)
    # outputs are user memory: modifying them changes nothing inside the function
    for out in first:
        out[...] = -123
    for out1, out3 in zip(second, f(*args), strict=True):
        np.testing.assert_array_equal(out1, out3)


def test_single_output_of_the_input_itself_is_a_copy():
    x = T.matrix("x")
    f = tensorjit.function([x], x)
    arg = np.ones((2, 2))
    out = f(arg)
    assert not shares(out, arg)
    out[0, 0] = 5.0
    assert arg[0, 0] == 1.0


def test_output_of_a_shared_variable_is_a_copy_and_stays_the_old_value():
    s = tensorjit.shared(np.array([1.0, 2.0]), name="s")
    f = tensorjit.function([], s, updates={s: s + 1})
    out = f()
    np.testing.assert_array_equal(out, [1.0, 2.0])
    assert not shares(out, s.get_value(borrow=True))
    out2 = f()
    np.testing.assert_array_equal(out, [1.0, 2.0])
    np.testing.assert_array_equal(out2, [2.0, 3.0])


def test_output_borrow_of_a_shared_variable_still_copies():
    # Out(borrow=True) only lets the function reuse *its* buffers: a shared variable's
    # storage is never handed out through an output.
    s = tensorjit.shared(np.array([1.0, 2.0]), name="s")
    f = tensorjit.function([], Out(s.T, borrow=True))
    out = f()
    assert not shares(out, s.get_value(borrow=True))
    out[:] = 0
    np.testing.assert_array_equal(s.get_value(), [1.0, 2.0])


def test_output_view_of_a_shared_variable_with_an_own_view_update():
    s = tensorjit.shared(np.array([1.0, 2.0, 3.0]), name="s")
    f = tensorjit.function([], s[::-1], updates={s: s[::-1]})
    out = f()
    np.testing.assert_array_equal(out, [3.0, 2.0, 1.0])
    np.testing.assert_array_equal(s.get_value(), [3.0, 2.0, 1.0])
    assert not shares(out, s.get_value(borrow=True))


# ---------------------------------------------------------------- inputs are never modified


@pytest.mark.parametrize(
    "build",
    [
        lambda x: x * 2,
        lambda x: T.set_subtensor(x[0], 100.0),
        lambda x: T.inc_subtensor(x[1:], 1.0),
        lambda x: x[::-1] + x,
        lambda x: T.exp(x).sum(),
        lambda x: [x, x.T, x.reshape((2, 2))],
    ],
    ids=["mul", "set_subtensor", "inc_subtensor", "view+input", "reduction", "views"],
)
def test_inputs_are_never_modified(build):
    x = T.vector("x")
    f = tensorjit.function([x], build(x))
    arg = np.array([1.0, 2.0, 3.0, 4.0])
    original = arg.copy()
    f(arg)
    f(arg)
    np.testing.assert_array_equal(arg, original)


@pytest.mark.host_memory
@pytest.mark.parametrize("flag", ["borrow", "mutable"])
def test_a_borrowed_or_mutable_input_may_serve_as_workspace(flag):
    # The aliasing page: a borrowed input "may be reused as a buffer (and overwritten!)".
    x = T.vector("x")
    f = tensorjit.function([In(x, **{flag: True})], T.exp(x * 2) + 1)
    arg = np.array([0.0, 1.0])
    out = f(arg)
    np.testing.assert_allclose(out, np.exp(np.array([0.0, 2.0])) + 1)
    assert not shares(out, arg)
    assert not np.array_equal(arg, [0.0, 1.0])  # the chain ran in the argument's buffer
    assert f.rewrite_stats.applied["inplace"] == 1


def test_read_only_and_default_arguments_of_a_mutable_input_are_not_destroyed():
    x = T.vector("x")
    default = np.array([1.0, 2.0])
    f = tensorjit.function([In(x, mutable=True, value=default)], x * 3)
    read_only = np.array([1.0, 2.0])
    read_only.setflags(write=False)
    np.testing.assert_array_equal(f(read_only), [3.0, 6.0])
    np.testing.assert_array_equal(read_only, [1.0, 2.0])
    np.testing.assert_array_equal(f(), [3.0, 6.0])
    np.testing.assert_array_equal(f(), [3.0, 6.0])
    np.testing.assert_array_equal(default, [1.0, 2.0])


def test_read_only_arguments_are_accepted():
    x = T.vector("x")
    f = tensorjit.function([x], [T.set_subtensor(x[0], 9.0), x, x[::-1]])
    arg = np.arange(3.0)
    arg.setflags(write=False)
    a, b, c = f(arg)
    np.testing.assert_array_equal(a, [9.0, 1.0, 2.0])
    np.testing.assert_array_equal(b, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(c, [2.0, 1.0, 0.0])
    for out in (a, b, c):
        assert out.flags.writeable


def test_default_value_is_not_modified_and_not_returned():
    x = T.vector("x")
    default = np.array([1.0, 2.0])
    f = tensorjit.function([In(x, value=default)], [x, T.set_subtensor(x[0], 0.0)])
    a, b = f()
    assert not shares(a, default)
    a[:] = 77
    np.testing.assert_array_equal(default, [1.0, 2.0])
    np.testing.assert_array_equal(f()[0], [1.0, 2.0])


# ---------------------------------------------------------------- persistence across functions


def test_shared_values_persist_across_functions():
    s = tensorjit.shared(np.array([0.0, 0.0]), name="s")
    inc = tensorjit.function([], [], updates={s: s + 1})
    read = tensorjit.function([], s * 10)
    x = T.vector("x")
    assign = tensorjit.function([x], [], updates={s: x})
    inc()
    inc()
    np.testing.assert_array_equal(read(), [20.0, 20.0])
    assign(np.array([5.0, 6.0]))
    np.testing.assert_array_equal(read(), [50.0, 60.0])
    inc()
    np.testing.assert_array_equal(s.get_value(), [6.0, 7.0])
    s.set_value(np.array([-1.0]))
    np.testing.assert_array_equal(read(), [-10.0])


def test_functions_compiled_before_set_value_see_the_new_value():
    s = tensorjit.shared(np.array(1.0), name="s")
    f = tensorjit.function([], s + 1)
    s.set_value(np.array(41.0))
    assert f() == 42.0
    borrowed = np.array(9.0)
    s.set_value(borrowed, borrow=True)
    assert f() == 10.0


# ---------------------------------------------------------------- In/Out borrowing


def test_doc_example_in_out_borrow_compiles_and_computes():
    x = T.matrix()
    y = 2 * x
    f = tensorjit.function([In(x, borrow=True)], Out(y, borrow=True))
    arg = np.arange(4.0).reshape(2, 2)
    np.testing.assert_array_equal(f(arg), [[0.0, 2.0], [4.0, 6.0]])
    arg2 = np.ones((3, 1))
    first = f(arg2).copy()  # a borrowed output must be used (or copied) right away
    np.testing.assert_array_equal(first, [[2.0], [2.0], [2.0]])


def test_identity_with_in_and_out_borrow_may_alias():
    x = T.vector("x")
    f = tensorjit.function([In(x, borrow=True)], Out(x, borrow=True))
    arg = np.array([1.0, 2.0, 3.0])
    out = f(arg)
    # aliasing is allowed here, not required: only the value is checked
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(f(np.array([4.0])), [4.0])


def test_out_borrow_without_in_borrow_does_not_alias_the_input():
    x = T.vector("x")
    f = tensorjit.function([x], Out(x, borrow=True))
    arg = np.array([1.0, 2.0])
    out = f(arg)
    assert not shares(out, arg)


def test_in_borrow_without_out_borrow_does_not_alias_the_output():
    x = T.vector("x")
    f = tensorjit.function([In(x, borrow=True)], [x, x.T])
    arg = np.array([1.0, 2.0])
    a, b = f(arg)
    assert not shares(a, arg)
    assert not shares(b, arg)
    assert not shares(a, b)


def test_out_requires_a_symbolic_variable():
    with pytest.raises(TypeError, match=r"Out\(\) expects a symbolic Variable"):
        Out(np.zeros(2))
