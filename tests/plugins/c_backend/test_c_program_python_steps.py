"""Python steps: a host node without a C program step (a random draw, a scan, an op only
Op.perform runs, Print) runs its own kernel from inside the whole-graph program, so the
function stays one program instead of segments run by the per-node VM."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from helpers.c_backend import NEEDS_C

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.compile.program import ProgramVM
from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.printing import Print
from tensorjit.scan import scan
from tensorjit.tensor.random import RandomStreams

pytestmark = NEEDS_C


class UnaryPythonOp(Op):
    """An op of one input, run by Op.perform only, whose output has its input's type."""

    __props__ = ()

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])


class LooseDouble(UnaryPythonOp):
    """2 * x through Op.perform, stored the way a careless perform stores it: a Python
    float for a 0-d output and float64 whatever the output type says."""

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        out = np.asarray(x, dtype=np.float64) * 2
        output_storage[0][0] = float(out) if out.ndim == 0 else out

    def infer_shape(self, fgraph, node, input_shapes):
        return input_shapes


class Failing(UnaryPythonOp):
    """Raises when its input holds a negative number."""

    def perform(self, node, inputs, output_storage):
        if (inputs[0] < 0).any():
            raise ValueError("negative input")
        output_storage[0][0] = inputs[0].copy()


def _one_program(f) -> list[str]:
    """The ops of f's nodes that run as Python steps (f must be one program)."""
    assert f.calls.program is not None, [str(n.op) for n in f.kernels]
    return [type(n.op).__name__ for n, k in f.kernels.items() if k.backend != "c"]


def test_a_random_mask_and_the_update_it_feeds_are_one_program():
    # The denoising autoencoder's pattern: a corruption mask, products, an update.
    def build():
        streams = RandomStreams(11)
        w = tensorjit.shared(np.full((4, 3), 0.5), name="w")
        x = T.matrix("x")
        tilde = streams.binomial(size=x.shape, n=1, p=0.7, dtype="float64") * x
        cost = T.sum(T.tanh(T.dot(tilde, w)) ** 2)
        return tensorjit.function([x], cost, updates=[(w, w - 0.1 * T.grad(cost, w))]), w

    f, w_f = build()
    assert "RandomVariable" in _one_program(f)
    with tensorjit.config.change_flags(whole_graph=False):
        g, w_g = build()
    assert g.calls.program is None
    xv = np.random.default_rng(0).standard_normal((5, 4))
    for _ in range(3):  # the same seed: the same masks, the same costs and updates
        np.testing.assert_allclose(f(xv), g(xv), rtol=1e-12)
        np.testing.assert_allclose(w_f.get_value(), w_g.get_value(), rtol=1e-12)
    assert f(xv) != f(xv)  # the stream's state moves on every call


def test_a_scan_runs_inside_the_program():
    x = T.matrix("x")
    h0 = T.vector("h0")
    w = tensorjit.shared(np.eye(3) * 0.5, name="w")
    hs, _ = scan(lambda x_t, h: T.tanh(x_t + T.dot(h, w)), sequences=x, outputs_info=h0)
    f = tensorjit.function([x, h0], hs.sum() * 2)
    assert "Scan" in _one_program(f)
    xv = np.random.default_rng(1).standard_normal((6, 3))
    h = np.zeros(3)
    total = 0.0
    for row in xv:
        h = np.tanh(row + h @ (np.eye(3) * 0.5))
        total += h.sum()
    np.testing.assert_allclose(f(xv, np.zeros(3)), 2 * total, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ndim", [0, 2])
def test_a_loosely_typed_perform_output_reaches_the_c_steps_as_its_type(dtype, ndim):
    x = T.TensorType(dtype, (None,) * ndim)("x")
    f = tensorjit.function([x], T.exp(LooseDouble()(x)) + 1)
    assert _one_program(f) == ["LooseDouble"]
    xv = np.asarray(np.random.default_rng(2).standard_normal((3, 2)[:ndim] or ()), dtype)
    got = f(xv)
    assert got.dtype == dtype and got.shape == xv.shape
    np.testing.assert_allclose(got, np.exp(2 * xv) + 1, rtol=1e-6)


def test_an_error_in_a_python_step_names_its_node_and_changes_nothing():
    a = tensorjit.shared(np.zeros(3), name="a")
    x = T.vector("x")
    f = tensorjit.function([x], T.exp(Failing()(x)).sum(), updates=[(a, a + x)])
    assert _one_program(f) == ["Failing"]
    with pytest.raises(ValueError, match="negative input") as info:
        f(np.array([1.0, -1.0, 2.0]))
    assert "while computing Failing" in str(info.value)
    np.testing.assert_array_equal(a.get_value(), np.zeros(3))
    np.testing.assert_allclose(f(np.ones(3)), 3 * np.e)
    np.testing.assert_array_equal(a.get_value(), np.ones(3))


def test_a_step_failing_after_a_print_prints_once_and_raises(capsys):
    x, y = T.vectors("x", "y")
    shown = Print("x is")(T.exp(x))
    f = tensorjit.function([x, y], shown * y + 1)
    assert _one_program(f) == ["Print"]
    f(np.zeros(2), np.ones(2))
    assert capsys.readouterr().out.count("x is") == 1
    with pytest.raises(ValueError, match="shape"):
        f(np.zeros(2), np.ones(3))  # the product after the print can not run
    # Handing the call to the per-node path would have printed a second time.
    assert capsys.readouterr().out.count("x is") == 1


def test_a_view_from_a_python_step_keeps_its_buffer_for_in_place_updates():
    # Print's output is its input: an update written in place through it overwrites
    # the shared value, so the program must treat it as a commit (all-or-nothing).
    a = tensorjit.shared(np.arange(3.0), name="a")
    x, y = T.vectors("x", "y")
    f = tensorjit.function([x, y], (a * y).sum(), updates=[(a, Print("a")(a) + x)])
    assert f.calls.program is not None
    with pytest.raises(ValueError):
        f(np.ones(3), np.ones(4))
    np.testing.assert_array_equal(a.get_value(), np.arange(3.0))
    f(np.ones(3), np.ones(3))
    np.testing.assert_array_equal(a.get_value(), np.arange(3.0) + 1)


def test_programs_with_python_steps_are_used_by_the_program_vm():
    x = T.vector("x")
    out = Failing()(x) * 2
    f = tensorjit.function([x], [out, out + 1])
    assert isinstance(f.vm, ProgramVM) or f.calls.direct is not None
    np.testing.assert_array_equal(f(np.ones(2))[1], [3.0, 3.0])


class SlowNegate(UnaryPythonOp):
    """-x after a pause that lets another thread run (it releases the GIL)."""

    def perform(self, node, inputs, output_storage):
        time.sleep(0.001)
        output_storage[0][0] = -inputs[0]


class Forgetful(UnaryPythonOp):
    """Stores nothing: a kernel bug the program reports instead of passing None on."""

    def perform(self, node, inputs, output_storage):
        pass


def test_two_threads_in_the_same_python_step_keep_their_own_values():
    x = T.vector("x")
    f = tensorjit.function([x], T.exp(SlowNegate()(x * 2)) + 1)
    assert _one_program(f) == ["SlowNegate"]
    errors = []

    def work(k):
        xv = np.full(5, float(k))
        for _ in range(20):
            got = f(xv)
            if not np.allclose(got, np.exp(-2 * xv) + 1):
                errors.append((k, got))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_a_kernel_that_stores_nothing_is_an_error():
    x = T.vector("x")
    f = tensorjit.function([x], Forgetful()(x) + 1)
    assert _one_program(f) == ["Forgetful"]
    with pytest.raises(RuntimeError, match="stored no value"):
        f(np.ones(3))


def test_a_step_declining_after_a_python_step_gives_the_per_node_error(capsys):
    # The class selection declines on an out-of-range label; the call can not be handed
    # to the per-node path (the print would run twice): the node's own kernel raises.
    x, y = T.matrix("x"), T.lvector("y")
    p = T.nnet.softmax(Print("x")(x))
    cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
    f = tensorjit.function([x, y], cost)
    assert _one_program(f) == ["Print"]
    xv = np.zeros((2, 3))
    np.testing.assert_allclose(f(xv, np.array([0, 2])), np.log(3.0))
    capsys.readouterr()
    with pytest.raises(IndexError) as info:
        f(xv, np.array([0, 3]))
    assert "while computing" in str(info.value)
    assert capsys.readouterr().out.count("x __str__") == 1


def test_calls_from_threads_draw_from_the_random_stream_one_at_a_time():
    # The draw is a Python step: with the stream's update, calls hold the function's
    # lock, so no two calls read the same generator state. They still go straight into
    # the program (under the lock), not through the general call path.
    streams = RandomStreams(5)
    x = T.vector("x")
    f = tensorjit.function([x], streams.uniform((4,)) + x)
    assert _one_program(f) == ["RandomVariable"]
    assert f.calls.serial and f.calls.direct is not None
    draws = []

    def work():
        for _ in range(100):
            draws.append(tuple(f(np.zeros(4))))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(draws)) == len(draws) == 400


def test_a_node_with_many_inputs_and_no_c_step_keeps_the_function_compiling():
    xs = [T.scalar(f"x{k}") for k in range(70)]
    f = tensorjit.function(xs, T.stack(xs).sum())
    assert f(*[np.float64(k) for k in range(70)]) == sum(range(70))


def test_a_loop_whose_step_prints_is_not_run_twice_when_a_row_changes_shape(capsys):
    x = T.matrix("x")
    n = T.lscalar("n")

    def step(x_t):
        shown = Print("row")(x_t)
        return shown[: n + T.cast(T.gt(shown[0], 0), "int64")] * 2  # rows of two lengths

    rows, _ = scan(step, sequences=x)
    f = tensorjit.function([x, n], rows)
    np.testing.assert_array_equal(f(-np.ones((3, 4)), 2), -2 * np.ones((3, 2)))
    capsys.readouterr()
    with pytest.raises(ValueError, match="shape"):
        f(np.array([[-1.0] * 4, [1.0] * 4, [-1.0] * 4]), 2)  # step 1's row is longer
    assert capsys.readouterr().out.count("row __str__") == 2  # steps 0 and 1, once each


def test_a_byte_swapped_perform_output_is_converted_before_c_steps_read_it():
    class Swapped(UnaryPythonOp):
        def perform(self, node, inputs, output_storage):
            output_storage[0][0] = inputs[0].astype(">f8")

    x = T.vector("x")
    f = tensorjit.function([x], T.exp(Swapped()(x)))
    assert _one_program(f) == ["Swapped"]
    np.testing.assert_allclose(f(np.array([0.0, 1.0])), [1.0, np.e])


def test_a_node_its_c_step_does_not_cover_runs_its_per_node_kernel_as_a_python_step():
    # Rows picked by one index vector: the C indexing kernel runs it, but the program's
    # indexing step covers only pairs of index vectors.
    x, rows = T.matrix("x"), T.lvector("rows")
    f = tensorjit.function([x, rows], T.exp(x[rows]).sum(axis=1))
    assert f.calls.program is not None
    assert [k.name for n, k in f.kernels.items() if type(n.op).__name__ == "AdvancedSubtensor"] == [
        "c:indexing"
    ]
    xv = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(f(xv, np.array([2, 0])), np.exp(xv[[2, 0]]).sum(axis=1))
    with pytest.raises(IndexError, match="while computing"):
        f(xv, np.array([3]))
