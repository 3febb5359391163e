"""config.device_schedule chooses the shape of the row kernels: a work-group per row
(what a GPU wants) or a chunk of rows per work-item (what a CPU device wants); 'auto'
takes the device's type. Both give Op.perform's values (DebugMode) on PoCL here."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorjit.tensor as T
from tensorjit.core.config import config
from tensorjit.plugins.opencl_backend.target import OPENCL
from tensorjit.testing.device_under_test import DEVICE, NEEDS_DEVICE, ONLY_OPENCL, on_device
from tensorjit.testing.device_under_test import device_var as var

pytestmark = [NEEDS_DEVICE, ONLY_OPENCL]


@pytest.fixture
def launched(monkeypatch):
    """The names of the kernels the OpenCL runtime is asked for during the test (they
    still build and run: the runtime's own method is called)."""
    runtime_class = type(OPENCL.runtime())
    names: list[str] = []
    original = runtime_class.kernel

    def recording(self, source, name, options=()):
        names.append(name)
        return original(self, source, name, options)

    monkeypatch.setattr(runtime_class, "kernel", recording)
    return names


@pytest.mark.parametrize("schedule, kernel", [("groups", "tj_rows_grouped"), ("items", "tj_rows")])
@pytest.mark.parametrize("log", [False, True])
def test_the_schedule_picks_the_row_kernel_and_both_agree(schedule, kernel, log, launched):
    x = var("x", (None, None))
    fn = T.nnet.log_softmax if log else T.nnet.softmax
    # rows longer than a group, with a ragged tail, and a NaN that must win the max
    value = np.random.default_rng(0).standard_normal((5, 300))
    value[2, 150] = np.nan
    with config.change_flags(device_schedule=schedule):
        f = on_device([x], fn(x))  # DebugMode: the kernel against Op.perform
        got = f(value)
    assert kernel in launched and DEVICE == "opencl"
    assert np.isnan(got[2]).all() and np.isfinite(np.delete(got, 2, axis=0)).all()


def test_auto_takes_the_items_shape_on_a_cpu_device():
    from tensorjit.plugins.device_kernels.tuning import uses_groups

    rt = OPENCL.runtime()
    with config.change_flags(device_schedule="auto"):
        assert uses_groups(OPENCL, 1000) is (not rt.is_cpu)
        assert not uses_groups(OPENCL, 3)  # rows too short to give a group's items work
    with config.change_flags(device_schedule="groups"):
        assert uses_groups(OPENCL, 3)  # forced: CI runs the GPU shapes on PoCL
        assert rt.max_group_size >= 128  # (PoCL's CPU device takes 4096)


def test_a_device_whose_groups_are_too_small_keeps_the_items_shape():
    """Forced or not, a device whose work-groups are smaller than GROUP_SIZE runs the
    items kernels (checked with the real runtime's values and a smaller limit)."""
    from dataclasses import dataclass, replace

    from tensorjit.plugins.device_kernels.tuning import GROUP_SIZE, uses_groups

    @dataclass
    class Limited:
        is_cpu: bool = False
        max_group_size: int = GROUP_SIZE // 2

    def limited(runtime: Limited) -> Any:
        """The OpenCL target with a runtime reporting ``runtime``'s limits."""
        return replace(OPENCL, runtime=lambda: runtime)

    with config.change_flags(device_schedule="groups"):
        assert not uses_groups(limited(Limited()), 10_000)
    with config.change_flags(device_schedule="auto"):
        assert not uses_groups(limited(Limited()), 10_000)
        assert uses_groups(limited(Limited(max_group_size=GROUP_SIZE)), 10_000)


REDUCTIONS = {
    # (what, shape, axis): the kernel each schedule runs
    "row sums": ((7, 300), 1, "tj_reduce_group_out", "tj_reduce_out"),
    "one long sum, split": ((1 << 20,), None, "tj_reduce_group_part", "tj_reduce_part"),
    # not grouped in either: an item per output (a CPU device: a block of outputs)
    "column sums (coalesced per item)": ((300, 7), 0, "per output", "per output"),
}


@pytest.mark.parametrize("case", sorted(REDUCTIONS))
@pytest.mark.parametrize("schedule", ["groups", "items"])
def test_reductions_take_the_scheduled_kernel_and_agree_with_numpy(case, schedule, launched):
    shape, axis, grouped, chunked = REDUCTIONS[case]
    value = np.random.default_rng(1).standard_normal(shape)
    x = var("x", (None,) * len(shape))
    with config.change_flags(device_schedule=schedule):
        f = on_device([x], [x.sum(axis=axis), x.max(axis=axis)])
        total, largest = f(value)
    want = grouped if schedule == "groups" else chunked
    if want == "per output":
        want = "tj_block" if OPENCL.runtime().is_cpu else "tj_reduce_out"
    assert any(
        name == want or name == f"{want}_out" or name == f"{want}_part" for name in launched
    ), launched
    length = value.size if axis is None else shape[axis]
    np.testing.assert_allclose(total, value.sum(axis=axis), rtol=1e-13 * length, atol=1e-12)
    np.testing.assert_array_equal(largest, value.max(axis=axis))


@pytest.mark.parametrize(
    "shape, axis, grouped",
    [((6, 700), 1, "tj_arg_group_out"), ((1 << 20,), None, "tj_arg_group_part")],
)
def test_argmax_under_groups_is_numpys_first_extreme(shape, axis, grouped, launched):
    value = np.round(np.random.default_rng(2).standard_normal(shape), 1)  # many ties
    flat = value.reshape(-1)
    flat[flat.size // 2] = np.nan  # the first NaN wins, as in NumPy
    x = var("x", (None,) * len(shape))
    with config.change_flags(device_schedule="groups"):
        f = on_device([x], [T.argmax(x, axis=axis), T.argmin(x, axis=axis)])
        top, bottom = f(value)
    assert grouped in launched, launched
    np.testing.assert_array_equal(top, np.argmax(value, axis=axis))
    np.testing.assert_array_equal(bottom, np.argmin(value, axis=axis))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(70, 45), (3, 33, 65)])
def test_transposing_copies_go_through_tiles_under_groups(dtype, shape, launched):
    """A contiguous copy of a transposed value (here a reshape of ``x.T``'s last two
    axes) moves 32 x 32 tiles through local memory under the groups schedule (ragged
    edges, a batch axis), and is the elementwise copy otherwise; same values."""
    x = var("x", (None,) * len(shape), dtype)
    swapped = x.dimshuffle(*range(len(shape) - 2), len(shape) - 1, len(shape) - 2)
    value = np.random.default_rng(2).standard_normal(shape).astype(dtype)
    want = np.swapaxes(value, -1, -2).reshape(-1)
    for schedule, tiled in [("groups", True), ("items", False)]:
        launched.clear()
        with config.change_flags(device_schedule=schedule):
            f = on_device([x], swapped.reshape((-1,)))
            np.testing.assert_array_equal(f(value), want)
        assert ("tj_transpose" in launched) is tiled, (schedule, launched)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(70, 45), (3, 33, 65)])
def test_maps_with_a_transposed_operand_go_through_tiles_under_groups(dtype, shape, launched):
    """``x * y.T + z`` (z broadcast along the rows): under groups the transposed operand
    is staged through local tiles (``tj_tiled``), otherwise read element by element
    (``tj_strided``); both equal NumPy's (and Op.perform's: DebugMode)."""
    n = len(shape)
    x, y = var("x", (None,) * n, dtype), var("y", (None,) * n, dtype)
    z = var("z", (None,) * (n - 2) + (1, None), dtype)
    swapped = y.dimshuffle(*range(n - 2), n - 1, n - 2)
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape).astype(dtype)
    b = np.ascontiguousarray(np.swapaxes(rng.standard_normal(shape).astype(dtype), -1, -2))
    c = rng.standard_normal((*shape[:-2], 1, shape[-1])).astype(dtype)
    want = a * np.swapaxes(b, -1, -2) + np.tanh(c)
    for schedule, kernel in [("groups", "tj_tiled"), ("items", "tj_strided")]:
        launched.clear()
        with config.change_flags(device_schedule=schedule):
            f = on_device([x, y, z], x * swapped + T.tanh(z))
            tol = 1e-6 if dtype == "float32" else 1e-15
            np.testing.assert_allclose(f(a, b, c), want, rtol=tol, atol=tol)
        assert kernel in launched, (schedule, launched)


def test_kernels_whose_own_group_limit_is_too_small_take_the_items_shape(monkeypatch):
    """A kernel's registers or local memory can lower its work-group limit below the
    device's: forced groups then still run the items kernels, with the same values
    (here every kernel reports half the group size, the real runtime otherwise)."""
    from tensorjit.plugins.device_kernels.tuning import GROUP_SIZE

    rt = OPENCL.runtime()
    runtime_class = type(rt)
    probe = rt.kernel(
        "__kernel void tj_probe_limit(__global int *a) { a[0] = 1; }", "tj_probe_limit"
    )
    assert rt.group_limit(probe) >= GROUP_SIZE  # PoCL's own limit
    monkeypatch.setattr(runtime_class, "group_limit", lambda self, kernel: GROUP_SIZE // 2)
    enqueued: list[str] = []
    original = runtime_class.enqueue

    def enqueue(self, kernel, geometry, args):
        enqueued.append(kernel.function_name)
        original(self, kernel, geometry, args)

    monkeypatch.setattr(runtime_class, "enqueue", enqueue)
    x, y = var("x", (None, None)), var("y", (None, None))
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((40, 70)), rng.standard_normal((70, 40))
    with config.change_flags(device_schedule="groups"):
        f = on_device(
            [x, y],
            [T.nnet.softmax(x), x.sum(axis=1), T.argmax(x, axis=1), x * y.T, y.T.reshape((-1,))],
        )
        softmax, sums, argmax, product, flat = f(a, b)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(softmax, e / e.sum(axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(sums, a.sum(axis=1), rtol=1e-12)
    np.testing.assert_array_equal(argmax, a.argmax(axis=1))
    np.testing.assert_array_equal(product, a * b.T)
    np.testing.assert_array_equal(flat, b.T.reshape(-1))
    grouped = {"tj_rows_grouped", "tj_reduce_group_out", "tj_arg_group_out", "tj_tiled"}
    assert not grouped & set(enqueued), enqueued
    assert {"tj_rows", "tj_strided"} <= set(enqueued), enqueued
