"""Calls after the first: a device backend may replay a function's recorded launches
(``config.device_launch_plans``, plugins/device_kernels/launch_plan.py). Whatever the
backend does, a function called again and again must give exactly what it gives with
plans off: new values, new shapes, a minibatch index read on the host, shapes that
change with an input's value, in-place updates of shared weights, outputs that outlive
the call, inputs passed twice, an error on a later call, two threads. Where the backend
runs the shared device families, the calls must also be replayed."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit import Out
from tensorjit.core.config import config
from tensorjit.tensor import nnet
from tensorjit.testing.device_under_test import (
    BACKEND,
    DEVICE,
    FAST_DEVICE,
    NEEDS_DEVICE,
    device_var,
    on_device,
    to_device,
    to_host,
)

pytestmark = NEEDS_DEVICE
REPLAYS = BACKEND in ("opencl", "cuda")  # the backends running the shared families


def launch_plan(f: Any) -> Any:
    """The function's launch-plan program, or None."""
    from tensorjit.plugins.device_kernels.launch_plan import LaunchPlanProgram

    program = getattr(f.vm, "program", None)
    return program if isinstance(program, LaunchPlanProgram) else None


def replayed(f: Any, calls: int) -> None:
    """Where the backend runs the shared families, at least ``calls`` calls replayed."""
    if REPLAYS:
        plan = launch_plan(f)
        assert plan is not None, "no launch plan for a function on the device"
        assert plan.replays >= calls, plan.replays


def both(build: Any) -> tuple[Any, Any]:
    """``build()`` (a function, or a function and more) compiled with plans on and with
    plans off."""
    with config.change_flags(device_launch_plans=True):
        on = build()
    with config.change_flags(device_launch_plans=False):
        off = build()
    assert launch_plan(off[0] if isinstance(off, tuple) else off) is None
    return on, off


def host(value: Any) -> np.ndarray:
    return value if isinstance(value, np.ndarray) else to_host(value)


def test_new_values_and_new_shapes_give_what_the_vm_gives():
    def build() -> Any:
        x, w, b = T.matrix("x"), T.matrix("w"), T.vector("b")
        out = nnet.softmax(T.tanh(T.dot(x, w) + b)).sum(axis=0) + (x**2).mean()
        return on_device([x, w, b], out, mode=FAST_DEVICE)

    on, off = both(build)
    rng = np.random.default_rng(0)
    for rows in (4, 4, 7, 4, 7, 7, 4):
        args = [rng.standard_normal((rows, 5)), rng.standard_normal((5, 3)), rng.standard_normal(3)]
        np.testing.assert_array_equal(host(on(*args)), host(off(*args)))
    replayed(on, 4)
    if REPLAYS:
        assert len(launch_plan(on).plans) == 2  # one per shape of x


def test_training_with_in_place_updates_matches_step_for_step():
    rng = np.random.default_rng(1)
    data_x, data_y = rng.standard_normal((6, 16, 8)), rng.integers(0, 4, (6, 16))

    def build() -> tuple[Any, list]:
        with config.change_flags(device=DEVICE):
            w = tensorjit.shared(np.random.default_rng(2).standard_normal((8, 4)) * 0.1, name="w")
            b = tensorjit.shared(np.zeros(4), name="b")
            x, y = T.matrix("x"), T.lvector("y")
            p = nnet.softmax(T.dot(x, w) + b)
            cost = nnet.categorical_crossentropy(p, y).mean() + 1e-3 * (w**2).sum()
            gw, gb = tensorjit.grad(cost, [w, b])
            f = tensorjit.function(
                [x, y], cost, updates=[(w, w - 0.5 * gw), (b, b - 0.5 * gb)], mode=FAST_DEVICE
            )
        return f, [w, b]

    (on, params_on), (off, params_off) = both(build)
    for step in range(6):
        assert float(host(on(data_x[step], data_y[step]))) == float(
            host(off(data_x[step], data_y[step]))
        )
    for p_on, p_off in zip(params_on, params_off):
        np.testing.assert_array_equal(host(p_on.get_value()), host(p_off.get_value()))
    replayed(on, 5)


def test_an_output_brought_to_the_host_after_an_in_place_update_is_replayed():
    # The output reads the updated value, so its transfer to the host runs after the
    # update has overwritten w: a transfer can not fail, so the call stays replayable
    # (on CUDA the training steps' costs came after their products' in-place updates).
    def build() -> tuple[Any, Any]:
        with config.change_flags(device=DEVICE):
            w = tensorjit.shared(np.arange(6.0), name="w")
            x = T.vector("x")
            new = w * x + 1.0
            return tensorjit.function([x], new.sum(), updates=[(w, new)], mode=FAST_DEVICE), w

    (on, w_on), (off, w_off) = both(build)
    x = np.linspace(0.5, 1.5, 6)
    for _ in range(4):
        assert float(host(on(x))) == float(host(off(x)))
    np.testing.assert_array_equal(host(w_on.get_value()), host(w_off.get_value()))
    replayed(on, 3)


def test_a_minibatch_index_read_on_the_host():
    rng = np.random.default_rng(3)
    data = rng.standard_normal((40, 6))

    def build() -> Any:
        with config.change_flags(device=DEVICE):
            stored = tensorjit.shared(data, name="data")
            w = tensorjit.shared(rng.standard_normal((6, 2)), name="w")
            index = T.lscalar("index")
            batch = stored[index * 8 : (index + 1) * 8]
            return tensorjit.function([index], T.dot(batch, w).sum(axis=0), mode=FAST_DEVICE)

    rng = np.random.default_rng(3)
    on = build()
    rng = np.random.default_rng(3)
    with config.change_flags(device_launch_plans=False):
        off = build()
    for index in (0, 1, 4, 2, 3, 0):
        np.testing.assert_array_equal(host(on(index)), host(off(index)))
    replayed(on, 4)


def test_a_shape_that_depends_on_a_value_is_recorded_again():
    x = device_var("x", (None, 3))
    n = T.lscalar("n")
    f = on_device([x, n], (x[:n] * 2.0).sum(axis=0) + x[:n].shape[0], mode=FAST_DEVICE)
    value = np.arange(30.0).reshape(10, 3)
    device_value = to_device(value)
    for k in (2, 2, 5, 2, 7, 7, 1, 9, 3, 3):
        expected = (value[:k] * 2.0).sum(axis=0) + k
        np.testing.assert_allclose(host(f(device_value, k)), expected, rtol=1e-12)


def test_outputs_outlive_later_calls_and_views_are_right():
    x = device_var("x", (None, None))
    f = on_device(
        [x],
        [
            Out((x + 1.0).T, return_internal_type=True),
            Out(x[1:, ::2] * 3.0, return_internal_type=True),
        ],
        mode=FAST_DEVICE,
    )
    rng = np.random.default_rng(4)
    kept = []
    for _ in range(4):
        value = rng.standard_normal((5, 4))
        kept.append((value, f(to_device(value))))
    for value, (transposed, strided) in kept:
        np.testing.assert_array_equal(host(transposed), (value + 1.0).T)
        np.testing.assert_array_equal(host(strided), value[1:, ::2] * 3.0)
    replayed(f, 3)


def test_an_input_passed_twice_and_apart():
    a, b = device_var("a", (None,)), device_var("b", (None,))
    f = on_device([a, b], Out(a * 2.0 + b, return_internal_type=True), mode=FAST_DEVICE)
    x, y = np.arange(6.0), np.arange(6.0) * 10
    dx, dy = to_device(x), to_device(y)
    for first, second, expected in [(dx, dy, x * 2 + y), (dx, dx, x * 3), (dx, dy, x * 2 + y)] * 2:
        np.testing.assert_array_equal(host(f(first, second)), expected)


def test_an_error_on_a_later_call_is_the_vms_and_changes_nothing():
    rng = np.random.default_rng(5)

    def build() -> tuple[Any, Any]:
        with config.change_flags(device=DEVICE):
            w = tensorjit.shared(rng.standard_normal((5, 3)), name="w")
            x, y = T.matrix("x"), T.lvector("y")
            cost = nnet.categorical_crossentropy(nnet.softmax(T.dot(x, w)), y).mean()
            gw = tensorjit.grad(cost, w)
            return tensorjit.function([x, y], cost, updates=[(w, w - 0.1 * gw)]), w

    on, w_on = build()
    with config.change_flags(device_launch_plans=False):
        off, w_off = build()
    x = rng.standard_normal((4, 5))
    errors = []
    for f, w in ((on, w_on), (off, w_off)):
        for _ in range(3):
            f(x, np.array([0, 1, 2, 1]))
        before = host(w.get_value())
        with pytest.raises(IndexError) as info:
            f(x, np.array([0, 1, 7, 1]))
        errors.append(str(info.value))
        np.testing.assert_array_equal(host(w.get_value()), before)
        f(x, np.array([0, 1, 2, 1]))  # and it goes on
    assert errors[0].replace(str(id(on)), "") == errors[1].replace(str(id(off)), "")
    replayed(on, 2)


def test_two_threads_calling_one_function():
    x = device_var("x", (None,))
    f = on_device([x], (T.exp(x) * 2.0).sum(), mode=FAST_DEVICE)
    values = [np.linspace(-1, 1, 50) * k for k in range(8)]
    device_values = [to_device(v) for v in values]
    failures: list[str] = []

    def work(offset: int) -> None:
        for k in range(40):
            i = (k + offset) % len(values)
            got = float(host(f(device_values[i])))
            if not np.isclose(got, (np.exp(values[i]) * 2.0).sum(), rtol=1e-12):
                failures.append(f"value {i}: {got}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    replayed(f, 40)


def test_free_drops_the_plans_and_calls_go_on():
    x = device_var("x", (None,))
    f = on_device([x], (x * 3.0).sum(), mode=FAST_DEVICE)
    value = to_device(np.arange(5.0))
    assert float(host(f(value))) == 30.0
    assert float(host(f(value))) == 30.0
    f.free()
    if REPLAYS:
        assert launch_plan(f).plans == {}
    assert float(host(f(value))) == 30.0
    assert float(host(f(value))) == 30.0


def test_a_function_called_inside_another_call_leaves_that_calls_checks_alone():
    """The outer function's deferred bound check (a class index out of range) is still
    raised when a function with a plan replays inside its call (a host op's code)."""
    from tensorjit.compat.op import as_op

    def build() -> Any:
        v = device_var("v", (None,))
        inner = on_device([v], (v * 2.0).sum(), mode=FAST_DEVICE)

        @as_op([T.dvector], [T.dscalar])
        def through_inner(a):
            return np.asarray(host(inner(to_device(a))), "float64")

        x, y = T.matrix("x"), T.lvector("y")
        nll = nnet.categorical_crossentropy(nnet.softmax(x), y)
        return on_device([x, y], through_inner(nll) + 0.0, mode=FAST_DEVICE)

    x = np.random.default_rng(6).standard_normal((4, 3))
    good, bad = np.array([0, 1, 2, 1]), np.array([0, 1, 7, 1])
    for f in both(build):
        for _ in range(3):
            f(x, good)
        with pytest.raises(IndexError, match="out of range"):
            f(x, bad)
        f(x, good)


def test_a_step_with_side_effects_runs_once_per_call():
    """A Print's function runs once per call, also when the shapes it hands on change."""
    from tensorjit.printing import Print

    seen: list[int] = []
    x, n = device_var("x", (None,)), T.lscalar("n")
    printed = Print("p", global_fn=lambda op, value: seen.append(1))(x * 2.0)
    f = on_device([x, n], Out(printed[:n] * 3.0 + 1.0, return_internal_type=True), mode=FAST_DEVICE)
    value = to_device(np.arange(10.0))
    for k in (3, 3, 5, 5, 2, 7):
        np.testing.assert_array_equal(host(f(value, k)), np.arange(k) * 6.0 + 1.0)
    assert len(seen) == 6


def test_the_schedule_in_force_when_called_is_the_one_that_runs():
    """Kernels read config.device_schedule when they run: calls under 'groups' then
    'items' give what plans off gives under each, bit for bit."""
    x = device_var("x", (None, None))
    value = np.random.default_rng(7).standard_normal((64, 3000))

    def build() -> Any:
        return on_device([x], [x.sum(axis=1), nnet.softmax(x)], mode=FAST_DEVICE)

    on, off = both(build)
    device_value = to_device(value)
    for schedule in ("groups", "groups", "items", "items", "groups"):
        with config.change_flags(device_schedule=schedule):
            for got, want in zip(on(device_value), off(device_value)):
                np.testing.assert_array_equal(host(got), host(want))


@pytest.mark.skipif(
    BACKEND != "opencl",
    reason=f"reads the OpenCL runtime's memory pool; this run tests {BACKEND} (the default "
    "run, on OpenCL, checks it)",
)
def test_a_plan_holds_no_buffer_of_the_call_it_was_recorded_from():
    import gc

    from tensorjit.plugins.opencl_backend.runtime import runtime

    pool = runtime().allocator
    x = device_var("x", (None, None))
    f = on_device([x], Out(x * 2.0, return_internal_type=True), mode=FAST_DEVICE)
    gc.collect()
    start = pool.active_blocks
    for k in range(3):
        value = to_device(np.full((300, 300), float(k)))
        out = f(value)
        del value, out
    gc.collect()
    assert pool.active_blocks == start
    replayed(f, 2)
