"""``function(..., profile=True)``: per-node, per-op-class and per-program run times,
compile phases, and a readable report; functions without it pay nothing."""

from __future__ import annotations

import io

import numpy as np
import pytest
from helpers.c_backend import NEEDS_C
from test_segments import PythonOnlyDouble

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.compile.function import Function

pytestmark = NEEDS_C


def _mlp_step(**flags):
    rng = np.random.default_rng(0)
    x, y = T.matrix("x"), T.lvector("y")
    W1 = tensorjit.shared(rng.normal(size=(30, 20)) * 0.1, name="W1")
    W2 = tensorjit.shared(rng.normal(size=(20, 4)) * 0.1, name="W2")
    prob = T.nnet.softmax(T.dot(T.tanh(T.dot(x, W1)), W2))
    cost = -T.mean(T.log(prob)[T.arange(y.shape[0]), y])
    grads = T.grad(cost, [W1, W2])
    updates = [(W1, W1 - 0.1 * grads[0]), (W2, W2 - 0.1 * grads[1])]
    with tensorjit.config.change_flags(**flags):
        step = tensorjit.function([x, y], cost, updates=updates, profile=True, name="step")
    return step, rng.normal(size=(16, 30)), rng.integers(0, 4, size=16)


def test_per_node_times_without_whole_graph_programs():
    step, X, Y = _mlp_step(whole_graph=False)
    for _ in range(7):
        step(X, Y)
    profile = step.profile
    assert type(step) is Function and profile.enabled  # one class: the call path times
    assert profile.calls == 7 and profile.call_seconds > 0
    assert not profile.programs
    assert all(rec.calls == 7 and rec.program is None for rec in profile.nodes)
    assert len(profile.nodes) == len(step.fgraph.apply_nodes)
    timed = sum(rec.seconds for rec in profile.nodes)
    assert 0 < timed <= profile.call_seconds
    classes = {name: (seconds, calls, n) for name, seconds, calls, n in profile.by_op_class()}
    assert "Dot" in classes or "Gemm" in classes
    assert sum(n for _, _, n in classes.values()) == len(profile.nodes)
    seconds = [row[1] for row in profile.by_op_class()]
    assert seconds == sorted(seconds, reverse=True)
    # Kernels are named per node: the report says which backend ran what.
    assert {rec.kernel.split(":")[0] for rec in profile.nodes} == {"c"}
    text = profile.report(limit=5)
    assert "Function profile: step" in text and "Op classes" in text
    assert "... " in text and "more nodes" in text
    node_lines = [line for line in text.splitlines() if "%" in line and "c:" in line]
    shares = [float(line.split("%")[0]) for line in node_lines]
    assert shares == sorted(shares, reverse=True)


def test_a_whole_graph_program_is_timed_as_one_unit():
    step, X, Y = _mlp_step(whole_graph=True)
    for _ in range(4):
        step(X, Y)
    [program] = step.profile.programs
    assert program.label == "whole-graph program" and program.calls == 4 and program.declined == 0
    assert program.nodes == len(step.profile.nodes)
    assert all(
        rec.program == "whole-graph program" and rec.calls == 0 for rec in step.profile.nodes
    )
    assert 0 < program.seconds <= step.profile.call_seconds
    assert "config.whole_graph=False to time each node" in step.profile.report()


def test_segments_are_programs_and_the_python_node_is_timed_alone():
    x, y = T.vectors("x", "y")
    middle = PythonOnlyDouble()(T.exp(x) * 2 + y)
    after = T.tanh(middle) + middle * 3
    out = after.sum() + after.max()  # (read twice: not fused into one reduction)
    f = tensorjit.function([x, y], out, profile=True, accept_inplace=True)
    for _ in range(3):
        f(np.ones(5), np.ones(5))
    alone = [rec for rec in f.profile.nodes if rec.program is None]
    assert any(rec.op_class == "PythonOnlyDouble" and rec.calls == 3 for rec in alone)
    assert f.profile.programs and all(p.calls == 3 for p in f.profile.programs)
    assert "segment program" in f.profile.report()


def test_config_flag_compile_phases_and_unprofiled_functions():
    x = T.vector("x")
    with tensorjit.config.change_flags(profile=True):
        flagged = tensorjit.function([x], T.exp(x))
    assert flagged.profile.enabled
    plain = tensorjit.function([x], T.exp(x))
    assert type(plain) is Function and not plain.profile.enabled
    assert list(plain.profile.compile_seconds) == ["graph", "rewrites", "linking and kernels"]
    assert all(v >= 0 for v in plain.profile.compile_seconds.values())
    assert "run times not recorded" in plain.profile.report()
    plain(np.ones(3))
    assert plain.profile.calls == 0  # no timer on an unprofiled function's calls
    # The rewrite counters stay where they were (f.profile.applied).
    assert isinstance(plain.profile.applied, dict)


def test_theano_profile_summary_and_errors_still_raise():
    from tensorjit.compat.compile import function as theano_function

    x = T.vector("x")
    f = theano_function([x], T.log(x), profile=True)
    f(np.ones(3))
    out = io.StringIO()
    f.profile.summary(file=out)
    assert "calls: 1" in out.getvalue()
    with pytest.raises(TypeError):
        f("not a vector")
    assert f.profile.calls == 2  # a failed call is counted too


def test_borrowed_outputs_run_on_the_vm_and_copies_keep_profiling():
    import copy
    import pickle

    from tensorjit import Out

    x = T.matrix("x")
    f = tensorjit.function([x], Out(T.tanh(x) * 2, borrow=True), profile=True, name="b")
    for _ in range(3):
        f(np.ones((2, 2)))
    assert not f.profile.programs  # calls ran node by node: timed per node
    assert all(rec.calls == 3 for rec in f.profile.nodes)
    for again in (f.copy(), copy.copy(f), pickle.loads(pickle.dumps(f))):
        assert again.profile.enabled
        again(np.ones((2, 2)))
        assert again.profile.calls == 1
    unprofiled = f.copy(profile=False)
    unprofiled(np.ones((2, 2)))
    assert not unprofiled.profile.enabled and unprofiled.profile.calls == 0
