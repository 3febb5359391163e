"""All-or-nothing calls: a call that raises changes no shared variable, whatever the
number and order of its updates, on the whole-graph program, the per-node C kernels and
Op.perform (core/compile/commit.py)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.compile.commit import commit_plan
from tensorjit.core.compile.mode import get_mode
from tensorjit.core.compile.program import ProgramVM
from tensorjit.core.compile.vm import VM
from tensorjit.tensor.inplace import add_inplace
from tensorjit.tensor.multi_output_elemwise import MultiOutputElemwise

PATHS = ["whole-graph program", "per-node C", "python"]
NO_PASS = tensorjit.FAST_RUN.excluding("inplace")  # hand-built destroyers only


def _compile(path: str, inputs, outputs, updates, separate: bool = False):
    """``separate``: without multi-output fusion (the updates stay nodes of their own)."""
    mode = get_mode(None)
    if separate:
        mode = mode.without("multi_output_fusion")
    if path == "python":
        mode = mode.with_backends("python")
    with tensorjit.config.change_flags(whole_graph=path == "whole-graph program"):
        f = tensorjit.function(inputs, outputs, updates=updates, mode=mode)
    assert isinstance(f.vm, ProgramVM) == (path == "whole-graph program")
    return f


def _vm(f) -> VM:
    return f.vm.vm if isinstance(f.vm, ProgramVM) else f.vm


def _values(shared):
    return [s.get_value() for s in shared]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("n_updates", [2, 3, 5])
def test_a_failing_update_at_every_position_changes_nothing(path, n_updates):
    params = [tensorjit.shared(np.arange(3.0) + 10 * k, name=f"p{k}") for k in range(n_updates)]
    steps = [T.vector(f"d{k}") for k in range(n_updates)]
    updates = [(p, p + d * 2) for p, d in zip(params, steps)]
    for order in (updates, updates[::-1]):
        f = _compile(path, steps, [], order)
        buffers = [p.get_value(borrow=True) for p in params]
        for bad in range(n_updates):
            before = _values(params)
            args = [np.ones(3)] * n_updates
            args[bad] = np.ones(2)  # this update's shapes do not match
            with pytest.raises(ValueError, match=r"shape|broadcast"):
                f(*args)
            for p, old, buffer in zip(params, before, buffers):
                np.testing.assert_array_equal(p.get_value(), old, err_msg=f"{path} bad={bad}")
                assert p.get_value(borrow=True) is buffer  # still updated in place
        f(*[np.ones(3)] * n_updates)  # a good call updates them all
        for k, p in enumerate(params):
            np.testing.assert_array_equal(p.get_value(), before[k] + 2)


@pytest.mark.parametrize("path", PATHS)
def test_gemm_updates_are_all_or_nothing(path):
    rng = np.random.default_rng(0)
    w = tensorjit.shared(rng.normal(size=(4, 3)), name="w")
    v = tensorjit.shared(rng.normal(size=(3, 4)), name="v")
    x, h = T.matrix("x"), T.matrix("h")
    lr = 0.1
    f = _compile(path, [x, h], [], [(w, w - lr * T.dot(x.T, h)), (v, v - lr * T.dot(h.T, x))])
    kinds = {type(n.op).__name__ for n in f.fgraph.toposort()}
    assert "Gemm" in kinds  # the updates are BLAS calls writing in place
    before = _values([w, v])
    with pytest.raises(ValueError):
        f(rng.normal(size=(5, 4)), rng.normal(size=(6, 3)))  # 5 rows against 6
    for value, old in zip(_values([w, v]), before):
        np.testing.assert_array_equal(value, old)
    f(rng.normal(size=(5, 4)), rng.normal(size=(5, 3)))
    assert not np.array_equal(w.get_value(), before[0])


@pytest.mark.parametrize("path", PATHS)
def test_a_failure_after_the_updates_puts_back_what_they_overwrote(path):
    # The output needs the updated values and can fail after both updates ran (an
    # index out of range: no check of shapes sees it first): the commits save what
    # they overwrite and the failed call restores it in place.
    a = tensorjit.shared(np.zeros(3), name="a")
    b = tensorjit.shared(np.zeros(3), name="b")
    x, y = T.vectors("x", "y")
    i = T.lscalar("i")
    new_a, new_b = a + x, b + y
    f = _compile(path, [x, y, i], (new_a * new_b)[i], [(a, new_a), (b, new_b)])
    plan = commit_plan(_vm(f).nodes, lambda node: node.op.input_check(node) is not None)
    # the case this test is about (both updates may be one node, saving both)
    assert {v.name for inputs in plan.snapshots.values() for v in inputs} == {"a", "b"}
    buffers = [a.get_value(borrow=True), b.get_value(borrow=True)]
    with pytest.raises(IndexError):
        f(np.ones(3), np.ones(3), 5)
    np.testing.assert_array_equal(a.get_value(), np.zeros(3))
    np.testing.assert_array_equal(b.get_value(), np.zeros(3))
    assert a.get_value(borrow=True) is buffers[0] and b.get_value(borrow=True) is buffers[1]
    np.testing.assert_array_equal(f(np.ones(3), np.full(3, 2.0), 1), 2.0)
    np.testing.assert_array_equal(a.get_value(), np.ones(3))


@pytest.mark.parametrize("fused", [False, True], ids=["apart", "one node"])
@pytest.mark.parametrize("path", PATHS)
def test_an_output_of_the_updated_values_is_checked_before_them(path, fused):
    # (a + x) * (b + y) * z with a mismatched z. Apart: the product's shapes are checked
    # on a's and b's buffers before either update writes, so nothing needs saving. Fused
    # (multi-output fusion): one node writes a + x into a, b + y into b and the product,
    # and checks its shapes before it writes anything.
    a = tensorjit.shared(np.zeros(3), name="a")
    b = tensorjit.shared(np.zeros(3), name="b")
    x, y, z = T.vectors("x", "y", "z")
    new_a, new_b = a + x, b + y
    updates = [(a, new_a), (b, new_b)]
    f = _compile(path, [x, y, z], (new_a * new_b) * z, updates, separate=not fused)
    if fused:
        (node,) = [n for n in _vm(f).nodes if isinstance(n.op, MultiOutputElemwise)]
        assert len(node.op.destroy_map) == 2
    else:
        plan = commit_plan(_vm(f).nodes, lambda node: node.op.input_check(node) is not None)
        assert not plan.snapshots and plan.prechecks
    buffers = [a.get_value(borrow=True), b.get_value(borrow=True)]
    with pytest.raises(ValueError):
        f(np.ones(3), np.ones(3), np.ones(2))
    np.testing.assert_array_equal(a.get_value(), np.zeros(3))
    np.testing.assert_array_equal(b.get_value(), np.zeros(3))
    np.testing.assert_array_equal(f(np.ones(3), np.full(3, 2.0), np.full(3, 3.0)), [6.0] * 3)
    if fused:  # (each update written into its own variable's buffer)
        assert a.get_value(borrow=True) is buffers[0] and b.get_value(borrow=True) is buffers[1]


def test_a_borrowed_array_sees_the_restored_values():
    data = np.arange(3.0)
    a = tensorjit.shared(data, borrow=True, name="a")
    b = tensorjit.shared(np.zeros(3), name="b")
    x, y = T.vectors("x", "y")
    f = tensorjit.function([x, y], a + b * y, updates=[(a, a + x), (b, b + y)])
    with pytest.raises(ValueError):
        f(np.ones(3), np.ones(4))
    np.testing.assert_array_equal(data, [0.0, 1.0, 2.0])


def test_inc_subtensor_updates_are_all_or_nothing():
    # A sparse update (an embedding row) next to a dense one: the index error of the
    # second leaves the first unapplied, on whichever path runs it.
    emb = tensorjit.shared(np.zeros((4, 2)), name="emb")
    w = tensorjit.shared(np.zeros((4, 2)), name="w")
    i = T.lscalar("i")
    g = T.vector("g")
    f = tensorjit.function([i, g], [], updates=[(w, w + 1.0), (emb, T.inc_subtensor(emb[i], g))])
    with pytest.raises(IndexError):
        f(7, np.ones(2))
    np.testing.assert_array_equal(w.get_value(), np.zeros((4, 2)))
    np.testing.assert_array_equal(emb.get_value(), np.zeros((4, 2)))
    f(1, np.ones(2))
    np.testing.assert_array_equal(emb.get_value()[1], [1.0, 1.0])
    np.testing.assert_array_equal(w.get_value(), np.ones((4, 2)))


def test_commits_run_after_everything_that_can_fail_first():
    a = tensorjit.shared(np.zeros(3), name="a")
    x, y = T.vectors("x", "y")
    f = tensorjit.function([x, y], T.exp(y).sum(), updates=[(a, a + x)])
    order = _vm(f).nodes
    destroyers = [k for k, n in enumerate(order) if n.op.destroy_map]
    assert destroyers == [len(order) - 1]


@pytest.mark.parametrize("path", ["whole-graph program", "per-node C"])
def test_a_destroyer_of_a_value_a_late_step_reads_runs_after_it(path):
    # prod reads exp(x) and the update's result, so it runs late; the hand-built
    # add_inplace destroying exp(x) must then run even later, not before prod.
    a = tensorjit.shared(np.array([1.0, 2.0, 3.0]), name="a")
    x = T.vector("x")
    e = T.exp(x)
    new_a = add_inplace(a, x)
    prod = e * new_a
    bumped = add_inplace(e, T.constant(1.0))
    with tensorjit.config.change_flags(whole_graph=path == "whole-graph program"):
        f = tensorjit.function(
            [x], [prod, bumped], updates={a: new_a}, accept_inplace=True, mode=NO_PASS
        )
    xv = np.array([0.0, 1.0, 2.0])
    got_prod, got_bumped = f(xv)
    np.testing.assert_allclose(got_prod, np.exp(xv) * (np.array([1.0, 2.0, 3.0]) + xv))
    np.testing.assert_allclose(got_bumped, np.exp(xv) + 1)
    np.testing.assert_array_equal(a.get_value(), [1.0, 3.0, 5.0])


@pytest.mark.parametrize("path", PATHS)
def test_a_weight_two_gemms_update_in_turn_is_checked_without_a_copy(path):
    # A tied weight (the denoising autoencoder's): two products accumulate into w one
    # after the other. The second reads the first's in-place result, so it is checked
    # through w's own buffer before the first writes; no call copies w.
    rng = np.random.default_rng(1)
    w = tensorjit.shared(rng.normal(size=(4, 3)), name="w")
    x, h, g, y = T.matrix("x"), T.matrix("h"), T.matrix("g"), T.matrix("y")
    f = _compile(path, [x, h, g, y], [], [(w, w - 0.1 * (T.dot(x.T, h) + T.dot(g.T, y)))])
    nodes = _vm(f).nodes
    gemms = [n for n in nodes if type(n.op).__name__ == "Gemm" and n.op.destroy_map]
    assert len(gemms) == 2 and gemms[1].inputs[0] is gemms[0].outputs[0]
    plan = commit_plan(nodes, lambda node: node.op.input_check(node) is not None)
    assert not plan.snapshots and nodes.index(gemms[1]) in plan.prechecks
    assert plan.stand_ins[gemms[0].outputs[0]] is gemms[0].inputs[0]
    buffer, before = w.get_value(borrow=True), w.get_value()
    args = [rng.normal(size=s) for s in ((5, 4), (5, 3), (6, 4), (6, 3))]
    for bad in (1, 3):  # the first product's shapes, then the second's
        wrong = list(args)
        wrong[bad] = rng.normal(size=(7, 3))
        with pytest.raises(ValueError):
            f(*wrong)
        np.testing.assert_array_equal(w.get_value(), before)
        assert w.get_value(borrow=True) is buffer
    f(*args)
    x_, h_, g_, y_ = args
    np.testing.assert_allclose(w.get_value(), before - 0.1 * (x_.T @ h_ + g_.T @ y_))
    assert w.get_value(borrow=True) is buffer


def _penalised_plan(f):
    """The commit plan the function's runner made (the VM's rules, with its kernels)."""
    vm = _vm(f)
    kernel_of = dict(zip(vm.nodes, vm.kernels))
    return commit_plan(
        vm.nodes,
        lambda node: node.op.input_check(node) is not None,
        lambda node: kernel_of[node].cannot_fail(node),
    )


@pytest.mark.parametrize("path", PATHS)
def test_a_penalised_update_in_place_is_all_or_nothing(path):
    # The L2-penalised update overwrites w (PenalisedGemm in place) and the cost reads
    # the penalty's sum afterwards. On C kernels that sum's elementwise reader of static
    # shapes can not fail: nothing is saved (the point of this test). Calls whose shapes
    # do not match fail before the update and change nothing.
    from tensorjit.tensor.blas import PenalisedGemm

    rng = np.random.default_rng(3)
    w = tensorjit.shared(rng.normal(size=(6, 4)), name="w")
    x, y = T.matrices("x", "y")
    cost = (T.tanh(T.dot(x, w)) * y).sum() + 0.01 * (w**2).sum()
    f = _compile(path, [x, y], cost, [(w, w - 0.5 * tensorjit.grad(cost, w))])
    (node,) = [n for n in f.fgraph.toposort() if isinstance(n.op, PenalisedGemm)]
    assert node.op.inplace
    if path != "python":
        assert not _penalised_plan(f).snapshots
    buffer, before = w.get_value(borrow=True), w.get_value()
    for bad in [(rng.normal(size=(3, 6)), rng.normal(size=(2, 4))),
                (rng.normal(size=(3, 5)), rng.normal(size=(3, 4)))]:  # fmt: skip
        with pytest.raises(ValueError):
            f(*bad)
        np.testing.assert_array_equal(w.get_value(), before)
    xv, yv = rng.normal(size=(3, 6)), rng.normal(size=(3, 4))
    h = np.tanh(xv @ before)
    np.testing.assert_allclose(f(xv, yv), (h * yv).sum() + 0.01 * (before**2).sum())
    grad = xv.T @ ((1 - h**2) * yv) + 0.02 * before
    np.testing.assert_allclose(w.get_value(), before - 0.5 * grad, rtol=1e-12)
    assert w.get_value(borrow=True) is buffer  # updated in place


@pytest.mark.parametrize("path", PATHS)
def test_a_failure_after_a_penalised_update_restores_the_weight(path):
    # An output that indexes with the penalty's sum after the in-place update can fail
    # (an index out of range): the update saves w first and a failed call puts it back.
    rng = np.random.default_rng(4)
    w = tensorjit.shared(rng.normal(size=(5, 3)), name="w")
    x, y = T.matrices("x", "y")
    i = T.lscalar("i")
    penalty = (w**2).sum()
    cost = (T.dot(x, w) * y).sum() + 0.01 * penalty
    picked = (penalty * T.ones_like(x[0]))[i]
    f = _compile(path, [x, y, i], [cost, picked], [(w, w - 0.5 * tensorjit.grad(cost, w))])
    assert _penalised_plan(f).snapshots  # the case this test is about
    buffer, before = w.get_value(borrow=True), w.get_value()
    xv, yv = rng.normal(size=(4, 5)), rng.normal(size=(4, 3))
    with pytest.raises(IndexError):
        f(xv, yv, 9)
    np.testing.assert_array_equal(w.get_value(), before)
    assert w.get_value(borrow=True) is buffer
    _, value = f(xv, yv, 1)
    np.testing.assert_allclose(value, (before**2).sum())
    np.testing.assert_allclose(w.get_value(), before - 0.5 * (xv.T @ yv + 0.02 * before))
