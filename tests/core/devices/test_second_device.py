"""A second device, added by a third-party plugin (tests/fixtures/tensorjit_wrapdev_plugin,
installed through its entry point by tests/conftest.py).

Its values are ``WrappedArray`` objects that refuse to become ndarrays, so every path
tested here goes through the device's array kind. Results are compared with the same
function compiled for the host.
"""

from __future__ import annotations

import numpy as np
import pytest

# Installed (through its entry point) by tests/conftest.py for the whole session.
import tensorjit_wrapdev as wrapdev  # noqa: E402
from tensorjit_wrapdev import WrappedArray  # noqa: E402
from tensorjit_wrapdev.plugin import KERNEL_CALLS  # noqa: E402

import tensorjit
import tensorjit.tensor as T
from tensorjit import In, Out
from tensorjit.core.config import config
from tensorjit.core.hooks import get_plugin_system
from tensorjit.core.kernel_selection import CompileError
from tensorjit.core.memory.transfer_op import Transfer
from tensorjit.tensor.type import TensorType

DEV = "wrapdev"
KIND = wrapdev.WrapArrays


def internal(shared):
    return shared.get_value(borrow=True, return_internal_type=True)


def host_of(value):
    return get_plugin_system().registries.backends.array_kind(DEV).to_host(value)


def transfers(f):
    return [n for n in f.fgraph.toposort() if isinstance(n.op, Transfer)]


def device_nodes(f):
    return [n for n in f.fgraph.toposort() if n.outputs[0].type.device == DEV]


# ---------------------------------------------------------------- the plugin and its values


def test_the_device_comes_from_an_installed_plugin():
    system = get_plugin_system()
    assert system.entry_points["wrapdev"] == "tensorjit-wrapdev 0.3.0"
    backends = system.registries.backends
    assert backends.backends["wrapdev"].device == DEV
    assert DEV in backends.devices()
    assert isinstance(backends.array_kind(DEV), KIND)


def test_wrapped_values_refuse_to_be_ndarrays():
    value = WrappedArray(np.ones(3))
    with pytest.raises(TypeError, match="wrapdev"):
        np.asarray(value)


def test_a_device_type_filters_host_values_onto_the_device():
    t = TensorType("float64", (None,), device=DEV)
    assert str(t) == "TensorType(float64, shape=(?,), device=wrapdev)"
    assert t != TensorType("float64", (None,))
    v = t.filter([1.0, 2.0])
    assert isinstance(v, WrappedArray)
    assert t.filter(v) is v  # a device value of the right type is taken as it is
    with pytest.raises(TypeError, match="strict=True"):
        t.filter(np.ones(2), strict=True)
    with pytest.raises(TypeError, match=r"dtype float64 on wrapdev, got WrappedArray .*float32"):
        t.filter(WrappedArray(np.ones(2, "float32")), strict=True)
    assert host_of(t.filter(WrappedArray(np.ones(2, "float32")))).dtype == np.float64
    with pytest.raises(ValueError, match="expected 1 dimensions"):
        t.filter(WrappedArray(np.ones((2, 2))))
    # A host type fetches another device's value.
    host = TensorType("float64", (None,)).filter(v)
    assert isinstance(host, np.ndarray) and host.tolist() == [1.0, 2.0]


# ---------------------------------------------------------------- shared variables


def test_shared_on_the_device_follows_the_borrow_contract():
    data = np.arange(4.0)
    w = tensorjit.shared(data, name="w", borrow=True, target=DEV)
    assert w.type.device == DEV
    inner = internal(w)
    assert isinstance(inner, WrappedArray)
    assert internal(w) is inner  # constant time: the stored object itself
    data[0] = 100.0  # borrow=True can not alias host memory on a device
    assert w.get_value()[0] == 0.0
    for borrow in (False, True):
        got = w.get_value(borrow=borrow)
        assert type(got) is np.ndarray and got.tolist() == [0.0, 1.0, 2.0, 3.0]
        got[1] = -1.0  # a host copy: managed memory is untouched
        assert host_of(internal(w))[1] == 1.0
    copy = w.get_value(return_internal_type=True)
    assert isinstance(copy, WrappedArray) and copy is not inner
    assert not KIND().may_share_memory(copy, inner)


def test_set_value_reuses_the_device_buffer_and_copies_host_values():
    w = tensorjit.shared(np.zeros(4), target=DEV)
    inner = internal(w)
    host = np.arange(8.0)[::2]  # not contiguous
    w.set_value(host)
    assert internal(w) is inner  # same shape and dtype: written into the existing buffer
    assert w.get_value().tolist() == [0.0, 2.0, 4.0, 6.0]
    host[0] = 50.0
    assert w.get_value()[0] == 0.0
    w.set_value(np.ones(5))  # another shape: a new buffer
    assert internal(w) is not inner and w.get_value().tolist() == [1.0] * 5
    mine = WrappedArray(np.full(5, 3.0))
    w.set_value(mine, borrow=True)
    assert internal(w) is mine  # borrow=True adopts a device value
    w.set_value(mine)
    assert internal(w) is not mine  # without borrow it is copied


def test_shared_variables_on_the_device_never_alias_each_other():
    value = WrappedArray(np.ones(3))
    a = tensorjit.shared(value, borrow=True)
    b = tensorjit.shared(value, borrow=True)
    assert a.type.device == b.type.device == DEV
    assert not KIND().may_share_memory(internal(a), internal(b))


def test_config_device_is_the_default_target():
    with config.change_flags(device=DEV):
        w = tensorjit.shared(np.ones(3))
    assert w.type.device == DEV
    assert tensorjit.shared(np.ones(3)).type.device == "cpu"


# ---------------------------------------------------------------- placement and transfers


def _mlp_like(device):
    rng = np.random.default_rng(0)
    w = tensorjit.shared(rng.normal(size=(3,)), name="w", target=device)
    x = T.matrix("x")
    y = T.vector("y")
    pred = T.tanh(T.exp(w) * x).sum(axis=1)
    cost = ((pred - y) ** 2).sum()
    gw = tensorjit.grad(cost, w)
    f = tensorjit.function([x, y], [cost, pred], updates={w: w - 0.01 * gw}, name=device)
    return f, w


def test_a_training_step_on_the_device_equals_the_host_one():
    f_dev, w_dev = _mlp_like(DEV)
    f_host, w_host = _mlp_like("cpu")
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(5, 3)), rng.normal(size=5)
    for _ in range(3):
        for got, want in zip(f_dev(x, y), f_host(x, y)):
            assert type(got) is np.ndarray
            np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(w_dev.get_value(), w_host.get_value(), rtol=1e-12)
    assert device_nodes(f_dev)


def test_transfers_only_at_boundaries_and_debugprint_shows_them():
    w = tensorjit.shared(np.ones(3), name="w", target=DEV)
    x = T.vector("x")
    f = tensorjit.function([x], (T.exp(w) * x + x * 2).sum())
    moves = transfers(f)
    # x goes to the device once (used twice), the constant once; the sum comes back once.
    to_device = [n for n in moves if n.op.target == DEV]
    to_host = [n for n in moves if n.op.target == "cpu"]
    assert len(to_host) == 1 and to_host[0].outputs[0] is f.fgraph.outputs[0]
    assert sum(1 for n in to_device if n.inputs[0].name == "x") == 1
    # No value goes there and back again.
    for node in moves:
        assert not isinstance(getattr(node.inputs[0].owner, "op", None), Transfer)
    text = tensorjit.debugprint(f, file="str")
    assert "Transfer{wrapdev}" in text and "TransferToHost" in text
    assert "[wrapdev:elemwise]" in text and "[wrapdev:reduce]" in text
    before = dict(KERNEL_CALLS)
    assert f(np.arange(3.0)) == pytest.approx(
        float((np.e * np.arange(3.0) + 2 * np.arange(3.0)).sum())
    )
    assert KERNEL_CALLS["elemwise"] > before.get("elemwise", 0)


def test_uncovered_ops_stay_on_the_host_without_ping_pong():
    w = tensorjit.shared(np.full(3, 2.0), name="w", target=DEV)
    f = tensorjit.function([], T.exp(T.log(w * 2.0) + 1.0))  # log: not on wrapdev
    (log_node,) = [n for n in f.fgraph.toposort() if "log" in str(n.op)]
    assert log_node.outputs[0].type.device == "cpu"
    # After the host-only log, the rest stays on the host: one copy each way at most.
    moves = transfers(f)
    assert len([n for n in moves if n.op.target == "cpu"]) == 1
    np.testing.assert_allclose(f(), np.exp(np.log(np.full(3, 4.0)) + 1.0))


def test_host_scalars_stay_on_the_host_with_a_device_default():
    a, b = T.scalars("a", "b")
    with config.change_flags(device=DEV):
        f = tensorjit.function([a, b], a * b + 1)
    assert not transfers(f) and not device_nodes(f)
    assert f(2.0, 3.0) == 7.0


def test_config_device_places_host_inputs_work_on_the_device():
    x = T.matrix("x")
    with config.change_flags(device=DEV):
        f = tensorjit.function([x], T.tanh(x) * 2)
    assert device_nodes(f)
    value = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(f(value), np.tanh(value) * 2)


def test_assert_no_cpu_op_names_the_host_nodes():
    w = tensorjit.shared(np.ones(3), name="w", target=DEV)
    y = T.log(w) * 2
    with config.change_flags(assert_no_cpu_op="raise"):
        with pytest.raises(CompileError, match=r"log.*created at .*test_second_device.py"):
            tensorjit.function([], y)
        tensorjit.function([], T.exp(w) * 2)  # fully on the device: compiles
    with config.change_flags(assert_no_cpu_op="warn"):
        with pytest.warns(RuntimeWarning, match="run on the host"):
            tensorjit.function([], y)


def test_out_return_internal_type_skips_the_copy_to_the_host():
    w = tensorjit.shared(np.ones(3), name="w", target=DEV)
    f = tensorjit.function([], [Out(T.exp(w), return_internal_type=True), T.exp(w)])
    inside, outside = f()
    assert isinstance(inside, WrappedArray) and type(outside) is np.ndarray
    np.testing.assert_allclose(host_of(inside), outside)
    again, _ = f()
    assert not KIND().may_share_memory(inside, again)  # fresh every call


def test_a_device_output_returned_as_is_is_never_destroyed_by_another_node():
    w = tensorjit.shared(np.full(3, 0.5), name="w", target=DEV)
    y = T.tanh(w) * 2.0
    f = tensorjit.function([], [Out(y, return_internal_type=True), T.exp(y) + 1.0])
    inside, other = f()
    np.testing.assert_allclose(host_of(inside), np.tanh(0.5) * 2.0)
    np.testing.assert_allclose(other, np.exp(np.tanh(0.5) * 2.0) + 1.0)
    (out_node,) = [n for n in f.fgraph.toposort() if f.fgraph.outputs[0] in n.outputs]
    assert not any(
        out_node.outputs[0] in [n.inputs[i] for ins in n.op.destroy_map.values() for i in ins]
        for n in f.fgraph.toposort()
    )


def test_returning_device_storage_gives_a_copy():
    w = tensorjit.shared(np.ones(3), name="w", target=DEV)
    f = tensorjit.function([], Out(w, return_internal_type=True))
    got = f()
    assert isinstance(got, WrappedArray)
    assert not KIND().may_share_memory(got, internal(w))
    g = tensorjit.function([], w)
    assert type(g()) is np.ndarray


def test_gradients_cross_transfers():
    w = tensorjit.shared(np.array([0.5, -1.0, 2.0]), name="w", target=DEV)
    x = T.vector("x")
    cost = (T.exp(w) * x).sum()
    gw, gx = tensorjit.grad(cost, [w, x])
    f = tensorjit.function([x], [gw, gx])
    xv = np.array([1.0, 2.0, 3.0])
    got_w, got_x = f(xv)
    np.testing.assert_allclose(got_w, np.exp([0.5, -1.0, 2.0]) * xv)
    np.testing.assert_allclose(got_x, np.exp([0.5, -1.0, 2.0]))


# ---------------------------------------------------------------- memory model on the device


def test_updates_run_in_place_on_device_storage():
    w = tensorjit.shared(np.ones(3), name="w", target=DEV)
    x = T.vector("x")
    f = tensorjit.function([x], [], updates={w: w - 0.5 * x})
    (node,) = [n for n in device_nodes(f) if n.op.destroy_map]
    assert node.inputs[list(node.op.destroy_map.values())[0][0]] is f.fgraph.inputs[1]
    inner = internal(w)
    f(np.arange(3.0))
    assert internal(w) is inner  # the device buffer was updated in place
    np.testing.assert_allclose(w.get_value(), [1.0, 0.5, 0.0])


def test_updates_happen_as_if_simultaneously_on_the_device():
    a = tensorjit.shared(np.ones(2), name="a", target=DEV)
    b = tensorjit.shared(np.full(2, 2.0), name="b", target=DEV)
    f = tensorjit.function([], [a + b], updates={a: b * 1.0, b: a + 0.0})
    (total,) = f()
    np.testing.assert_allclose(total, [3.0, 3.0])
    np.testing.assert_allclose(a.get_value(), [2.0, 2.0])
    np.testing.assert_allclose(b.get_value(), [1.0, 1.0])


def test_device_inputs_are_not_modified_unless_mutable():
    xd = TensorType("float64", (None,), device=DEV)("xd")
    value = WrappedArray(np.arange(3.0))
    f = tensorjit.function([xd], Out(T.exp(xd) * 2, return_internal_type=True))
    out = f(value)
    assert host_of(value).tolist() == [0.0, 1.0, 2.0]
    np.testing.assert_allclose(host_of(out), np.exp(np.arange(3.0)) * 2)
    g = tensorjit.function([In(xd, mutable=True)], Out(T.exp(xd) * 2, return_internal_type=True))
    assert any(n.op.destroy_map for n in device_nodes(g))
    out = g(value)
    np.testing.assert_allclose(host_of(out), np.exp(np.arange(3.0)) * 2)
    # A host array for the device input is copied to the device.
    np.testing.assert_allclose(host_of(f(np.arange(3.0))), np.exp(np.arange(3.0)) * 2)
    # Another dtype converts as a host value would (on the host), or names the input.
    np.testing.assert_allclose(host_of(f(WrappedArray(np.ones(3, "float32")))), np.e * 2)
    with pytest.raises(TypeError, match=r"xd.*float64, shape=\(\?,\), device=wrapdev.*complex128"):
        f(WrappedArray(np.ones(3, "complex128")))


def test_the_destroy_handler_protects_device_values_read_later():
    w = tensorjit.shared(np.ones(3), name="w", target=DEV)
    x = T.vector("x")
    # w is read by the output after its update is computed: the update can not destroy
    # w's buffer before the output has read it.
    f = tensorjit.function([x], T.exp(w) * x, updates={w: w * 2.0})
    out = f(np.ones(3))
    np.testing.assert_allclose(out, np.e * np.ones(3))
    np.testing.assert_allclose(w.get_value(), [2.0, 2.0, 2.0])


def test_debugmode_checks_device_kernels_against_perform():
    w = tensorjit.shared(np.array([0.1, 0.2, 0.3]), name="w", target=DEV)
    x = T.vector("x")
    f = tensorjit.function([x], (T.tanh(w) * x).sum(), updates={w: w - x}, mode="DebugMode")
    assert device_nodes(f)
    assert f(np.ones(3)) == pytest.approx(float(np.tanh([0.1, 0.2, 0.3]).sum()))
    np.testing.assert_allclose(w.get_value(), [-0.9, -0.8, -0.7])


# ---------------------------------------------------------------- the whole memory suite


def test_the_memory_model_suite_passes_on_the_second_device():
    """tests/core/memory, run with config.device=wrapdev: every shared variable lives on
    the device and computation is placed there. Tests marked ``host_memory`` assert
    aliasing that only host memory permits (``borrow=True`` aliasing a user's array,
    a host argument used as workspace) and are left out."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    env = dict(os.environ, TENSORJIT_FLAGS="device=wrapdev")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not host_memory"]
        + ["tests/core/memory"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    passed = int(summary.split(" passed")[0].split()[-1])
    assert passed >= 250, summary


def test_a_protective_copy_of_device_storage_stays_on_the_device():
    from tensorjit.tensor.inplace import add_inplace

    w = tensorjit.shared(np.array([1.0, 2.0]), name="w", target=DEV)
    # A hand-built destroyer of w outside w's update works on a copy (DeepCopy), which
    # runs on the device: no round trip through the host.
    f = tensorjit.function([], add_inplace(w, 1.0) * 1.0, accept_inplace=True)
    copies = [n for n in f.fgraph.toposort() if type(n.op).__name__ == "DeepCopy"]
    assert copies and all(n.outputs[0].type.device == DEV for n in copies)
    assert [n for n in transfers(f) if n.op.target == "cpu"] == [
        n for n in f.fgraph.toposort() if f.fgraph.outputs[0] in n.outputs
    ]
    np.testing.assert_allclose(f(), [2.0, 3.0])
    np.testing.assert_allclose(w.get_value(), [1.0, 2.0])


def test_a_plugin_kernel_gets_its_device_values_for_inputs_read_on_the_host():
    """Op.host_inputs lets a kernel take a host index as it is only when its spec says
    it reads them there (``reads_host_inputs``): a kernel registered the plain way
    (every input on its device) still gets a device value for the index."""
    from tensorjit_wrapdev.arrays import WRAP_ARRAYS, unwrap

    from tensorjit.tensor.subtensor import Subtensor

    seen = []

    def factory(node):
        def run(inputs, storage):
            seen.append([type(v).__name__ for v in inputs])
            cell = [[None]]
            node.op.perform(node, [unwrap(v) for v in inputs], cell)
            storage[0][0] = WrappedArray(np.array(cell[0][0]))

        return run

    kernels = get_plugin_system().registries.kernels
    kernels.add("wrapdev", Subtensor, factory)
    try:
        x = TensorType("float64", (None, None), device="wrapdev").make_variable("x")
        i = T.lscalar("i")
        with config.change_flags(device="wrapdev"):
            f = tensorjit.function([x, i], x[i + 1])
        value = WRAP_ARRAYS.from_host(np.arange(6.0).reshape(3, 2))
        np.testing.assert_array_equal(f(value, 0), [2.0, 3.0])
        assert seen == [["WrappedArray", "WrappedArray"]], seen
    finally:
        kernels.table.pop(("wrapdev", Subtensor), None)
