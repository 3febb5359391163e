"""Errors when calling a compiled function: wrong argument count, unknown keywords, wrong
dtype/ndim/static shape, and errors raised inside a node at run time. Every message must
name the input (or node), what was expected vs given, and where the variable was created."""

import os
import re
import sys

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit import In

THIS_FILE = os.path.basename(__file__)


def _site() -> str:
    """``file:line`` of the caller: put it on the line that creates a variable."""
    frame = sys._getframe(1)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _line_of(site: str) -> str:
    return site.rsplit(":", 1)[1]


def test_site_helper_matches_the_recorded_creation_site():
    x, site = T.vector("x"), _site()
    assert x.created_at == site
    assert THIS_FILE in site


# ---------------------------------------------------------------- argument count


def test_too_many_positional_arguments():
    x = T.vector("x")
    f = tensorjit.function([x], x * 2)
    with pytest.raises(TypeError, match=r"compiled function takes 1 arguments, got 3"):
        f(np.ones(2), np.ones(2), np.ones(2))


def test_too_many_arguments_counts_inputs_with_defaults():
    x, y = T.scalar("x"), T.scalar("y")
    f = tensorjit.function([x, In(y, value=1.0)], x + y)
    with pytest.raises(TypeError, match=r"takes 2 arguments, got 3"):
        f(1.0, 2.0, 3.0)


def test_too_few_arguments_names_each_missing_input_and_its_creation_site():
    x, site_x = T.vector("x"), _site()
    y, site_y = T.vector("y"), _site()
    f = tensorjit.function([x, y], x + y)
    with pytest.raises(TypeError, match=r"missing 2 required argument\(s\)") as excinfo:
        f()
    message = str(excinfo.value)
    assert f"'x' (TensorType(float64, shape=(?,)), created at {site_x})" in message
    assert f"'y' (TensorType(float64, shape=(?,)), created at {site_y})" in message
    assert "expected 2 positional arguments, got 0" in message


def test_too_few_arguments_names_only_the_missing_one():
    x = T.vector("x")
    y, site_y = T.vector("y"), _site()
    f = tensorjit.function([x, y], x + y)
    with pytest.raises(TypeError, match=r"missing 1 required argument\(s\): 'y'") as excinfo:
        f(np.ones(2))
    message = str(excinfo.value)
    assert site_y in message
    assert "'x'" not in message
    assert "got 1" in message


def test_missing_argument_without_a_default_before_an_input_with_one():
    x, y = T.scalar("x"), T.scalar("y")
    f = tensorjit.function([x, In(y, value=1.0)], x + y)
    with pytest.raises(TypeError, match=r"missing 1 required argument\(s\): 'x'"):
        f(y=2.0)


def test_missing_unnamed_input_is_described():
    x, site = T.vector(), _site()
    f = tensorjit.function([x], x + 1)
    with pytest.raises(TypeError, match=r"missing 1 required argument\(s\): <unnamed>") as excinfo:
        f()
    assert site in str(excinfo.value)


def test_unknown_keyword_argument():
    x, y = T.scalar("x"), T.scalar("y")
    f = tensorjit.function([x, y], x + y)
    with pytest.raises(
        TypeError, match=r"unexpected keyword argument 'z'; named inputs: \['x', 'y'\]"
    ):
        f(1.0, 2.0, z=3.0)


def test_keyword_argument_for_an_unnamed_input_is_unknown():
    x = T.scalar()
    f = tensorjit.function([x], x + 1)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'x'; named inputs: \[\]"):
        f(x=1.0)


# ---------------------------------------------------------------- dtype


def test_float64_array_into_float32_input_is_a_type_error():
    x, site = T.fvector("xf"), _site()
    f = tensorjit.function([x], x + 1)
    with pytest.raises(TypeError) as excinfo:
        f(np.ones(3, dtype="float64"))
    message = str(excinfo.value)
    assert "bad argument 0" in message
    assert "input 'xf'" in message
    assert f"created at {site}" in message
    assert THIS_FILE in message
    assert f":{_line_of(site)})" in message
    assert "expects TensorType(float32, shape=(?,))" in message
    assert "got ndarray of dtype float64 and shape (3,)" in message
    assert "would lose precision" in message
    assert "allow_input_downcast=True" in message


def test_float64_array_into_float32_input_with_match():
    x, site = T.fvector("xf"), _site()
    f = tensorjit.function([x], x + 1)
    with pytest.raises(
        TypeError,
        match=re.escape(
            f"input 'xf' (TensorType(float32, shape=(?,)), created at {site}) expects "
            "TensorType(float32, shape=(?,)), got ndarray of dtype float64 and shape (3,)"
        ),
    ):
        f(np.ones(3))


def test_allow_input_downcast_accepts_float64_into_float32():
    x = T.fvector("xf")
    f = tensorjit.function([x], x + 1, allow_input_downcast=True)
    out = f(np.array([0.1, 2.5, 3.0]))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array([0.1, 2.5, 3.0], dtype="float32") + 1)


def test_in_allow_downcast_per_input():
    x, y = T.fvector("xf"), T.fvector("yf")
    f = tensorjit.function([In(x, allow_downcast=True), y], x + y)
    out = f(np.array([0.1]), np.array([1.0], dtype="float32"))
    assert out.dtype == np.float32
    with pytest.raises(TypeError, match=r"bad argument 1 .* input 'yf'"):
        f(np.array([0.1]), np.array([0.1]))


def test_allow_input_downcast_of_one_function_does_not_leak_into_another():
    # BUG: function(..., allow_input_downcast=True) writes the flag into the caller's In
    # object, so a later function compiled from the same In silently downcasts too.
    x = T.fvector("xf")
    shared_in = In(x)
    lenient = tensorjit.function([shared_in], x + 1, allow_input_downcast=True)
    assert lenient(np.array([0.1])).dtype == np.float32
    strict = tensorjit.function([shared_in], x + 2)
    with pytest.raises(TypeError, match=r"input 'xf' .* would lose precision"):
        strict(np.array([0.1]))


def test_allow_input_downcast_false_still_rejects_lossy_arrays():
    x = T.fvector("xf")
    f = tensorjit.function([x], x * 2, allow_input_downcast=False)
    with pytest.raises(TypeError, match=r"input 'xf' .* would lose precision"):
        f(np.array([0.1]))


def test_int64_array_into_int32_input_is_a_type_error():
    i, site = T.ivector("idx"), _site()
    f = tensorjit.function([i], i + 1)
    with pytest.raises(TypeError, match=r"input 'idx'.*got ndarray of dtype int64") as excinfo:
        f(np.array([1, 2], dtype="int64"))
    assert site in str(excinfo.value)


def test_upcasting_arguments_is_allowed():
    x = T.dvector("xd")
    f = tensorjit.function([x], x * 2)
    out = f(np.array([1, 2], dtype="float32"))
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [2.0, 4.0])


def test_non_numeric_argument_is_a_type_error():
    x, site = T.vector("x"), _site()
    f = tensorjit.function([x], x * 2)
    with pytest.raises(TypeError, match=r"input 'x' .* got ndarray of dtype <U1") as excinfo:
        f(np.array(["a", "b"]))
    assert site in str(excinfo.value)


def test_symbolic_argument_is_rejected():
    x, site = T.vector("x"), _site()
    f = tensorjit.function([x], x * 2)
    with pytest.raises(TypeError, match=r"input 'x' .* got the symbolic variable") as excinfo:
        f(T.vector("other"))
    assert site in str(excinfo.value)


# ---------------------------------------------------------------- ndim and static shape


def test_wrong_ndim_names_input_expected_type_and_actual_shape():
    x, site = T.vector("vec"), _site()
    f = tensorjit.function([x], x * 2)
    with pytest.raises(ValueError) as excinfo:
        f(np.ones((2, 2)))
    message = str(excinfo.value)
    assert "input 'vec'" in message
    assert f"created at {site}" in message
    assert THIS_FILE in message
    assert "expects TensorType(float64, shape=(?,))" in message
    assert "got ndarray of dtype float64 and shape (2, 2)" in message
    assert "expected 1 dimensions, got 2" in message


def test_scalar_given_for_a_matrix():
    m, site = T.matrix("mat"), _site()
    f = tensorjit.function([m], m.sum())
    with pytest.raises(ValueError, match=r"input 'mat' .*expected 2 dimensions, got 0") as excinfo:
        f(3.0)
    assert site in str(excinfo.value)


def test_shape_contradicting_static_shape():
    x, site = T.tensor("float64", shape=(None, 3), name="fixed"), _site()
    f = tensorjit.function([x], x.sum())
    assert f(np.ones((5, 3))) == 15.0
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"input 'fixed' (TensorType(float64, shape=(?, 3)), created at {site}) expects "
            "TensorType(float64, shape=(?, 3)), got ndarray of dtype float64 and shape (2, 4)"
        ),
    ) as excinfo:
        f(np.ones((2, 4)))
    message = str(excinfo.value)
    assert "dimension 1 has length 4" in message
    assert "requires 3" in message


def test_broadcastable_dimension_must_have_length_one():
    r, site = T.row("r"), _site()
    f = tensorjit.function([r], r * 2)
    with pytest.raises(ValueError, match=r"input 'r' .*dimension 0 has length 2") as excinfo:
        f(np.ones((2, 3)))
    assert site in str(excinfo.value)


def test_error_names_the_right_argument_position():
    x = T.vector("first")
    y, site = T.matrix("second"), _site()
    f = tensorjit.function([x, y], x.sum() + y.sum())
    with pytest.raises(ValueError, match=r"bad argument 1 to compiled function: input 'second'"):
        f(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match=re.escape(site)):
        f(np.ones(2), np.ones(3))


def test_bad_keyword_argument_is_reported_like_a_positional_one():
    x = T.vector("x")
    y, site = T.vector("y"), _site()
    f = tensorjit.function([x, y], x + y)
    with pytest.raises(ValueError, match=r"bad argument 1 .* input 'y'") as excinfo:
        f(np.ones(2), y=np.ones((1, 1)))
    assert site in str(excinfo.value)


def test_bad_default_value_is_reported_when_the_function_is_built():
    x, site = T.vector("x"), _site()
    with pytest.raises(ValueError, match=r"In\('x' .*value=.*expected 1 dimensions") as excinfo:
        tensorjit.function([In(x, value=np.ones((2, 2)))], x * 2)
    assert site in str(excinfo.value)


def test_intermediate_input_error_points_at_the_intermediate_variable():
    x = T.vector("x")
    h, site = T.exp(x), _site()
    h.name = "h"
    f = tensorjit.function([h], h * 2)
    with pytest.raises(ValueError, match=r"input 'h'.*expected 1 dimensions") as excinfo:
        f(np.ones((2, 2)))
    assert site in str(excinfo.value)


def test_error_is_raised_before_the_function_runs():
    s = tensorjit.shared(np.array(0.0), name="s")
    x = T.vector("x")
    f = tensorjit.function([x], x.sum(), updates={s: s + 1})
    with pytest.raises(ValueError, match=r"input 'x'"):
        f(np.ones((2, 2)))
    assert s.get_value() == 0.0
    f(np.ones(2))
    assert s.get_value() == 1.0


# ---------------------------------------------------------------- run-time errors in nodes


def test_runtime_error_in_dot_names_op_and_creation_site():
    a, b = T.matrix("a"), T.matrix("b")
    prod, site = T.dot(a, b), _site()
    f = tensorjit.function([a, b], prod * 2)
    assert f(np.ones((2, 3)), np.ones((3, 4))).shape == (2, 4)
    with pytest.raises(ValueError, match=r"dot: shapes \(2, 3\) and \(4, 2\) not aligned") as e:
        f(np.ones((2, 3)), np.ones((4, 2)))
    # the op, its kernel and where the node was created come with the exception (a note)
    full = "\n".join([str(e.value), *getattr(e.value, "__notes__", [])])
    (kernel,) = [k.name for n, k in f.kernels.items() if n.op == prod.owner.op]
    assert f"while computing Dot [kernel {kernel}], node created at {site}" in full
    assert THIS_FILE in full
    assert "a (shape=(2, 3), dtype=float64)" in full
    assert "b (shape=(4, 2), dtype=float64)" in full


def test_runtime_error_context_is_matched_by_pytest_raises():
    a, b = T.matrix("a"), T.matrix("b")
    prod, site = T.dot(a, b), _site()
    f = tensorjit.function([a, b], prod)
    with pytest.raises(ValueError, match=r"while computing Dot .*" + re.escape(site)):
        f(np.ones((2, 3)), np.ones((4, 2)))


def test_runtime_broadcast_error_in_elemwise_names_op_and_creation_site():
    x, y = T.vector("x"), T.vector("y")
    total, site = x + y, _site()
    f = tensorjit.function([x, y], total)
    with pytest.raises(ValueError) as excinfo:
        f(np.ones(3), np.ones(4))
    full = "\n".join([str(excinfo.value), *getattr(excinfo.value, "__notes__", [])])
    assert "while computing add" in full
    assert f"node created at {site}" in full
    assert "x (shape=(3,), dtype=float64)" in full
    assert "y (shape=(4,), dtype=float64)" in full


def test_runtime_error_in_a_later_node_points_at_that_node():
    m = T.matrix("m")
    v = T.vector("v")
    first = T.exp(m)
    second, site = T.dot(first, v), _site()
    f = tensorjit.function([m, v], second)
    with pytest.raises(ValueError, match=r"while computing Dot") as excinfo:
        f(np.ones((2, 3)), np.ones(5))
    full = "\n".join([str(excinfo.value), *getattr(excinfo.value, "__notes__", [])])
    assert site in full
    assert "exp" not in full.split("while computing", 1)[1].split("node created", 1)[0]


def test_function_still_works_after_a_runtime_error():
    a, b = T.matrix("a"), T.matrix("b")
    f = tensorjit.function([a, b], T.dot(a, b))
    with pytest.raises(ValueError, match=r"not aligned"):
        f(np.ones((2, 3)), np.ones((4, 2)))
    np.testing.assert_array_equal(f(np.ones((1, 2)), np.ones((2, 1))), [[2.0]])
