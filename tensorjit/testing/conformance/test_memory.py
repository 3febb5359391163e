"""The seed documents' memory contract with values on the tested device: shared
variables there (``target=``, ``config.device=`` the tested device), borrow, set_value into
the existing device buffer, in-place updates of shared weights on the device, and the
whole memory-model suite run with config.device set to it."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.config import config
from tensorjit.core.hooks import get_plugin_system
from tensorjit.core.memory.transfer_op import Transfer
from tensorjit.testing.device_under_test import (
    DEVICE,
    HOST_MEMORY,
    NEEDS_DEVICE,
    SEPARATE_MEMORY,
    buffer_address,
    to_device,
    view,
)

pytestmark = NEEDS_DEVICE
DEV = DEVICE


def kind():
    return get_plugin_system().registries.backends.array_kind(DEV)


def internal(shared):
    return shared.get_value(borrow=True, return_internal_type=True)


def buffer_of(value):
    return buffer_address(value)


@SEPARATE_MEMORY
def test_shared_on_the_device_follows_the_borrow_contract():

    data = np.arange(4.0)
    w = tensorjit.shared(data, name="w", borrow=True, target=DEV)
    assert w.type.device == DEV
    inner = internal(w)
    assert kind().is_value(inner)
    assert internal(w) is inner  # return_internal_type with borrow: the object itself
    data[0] = 100.0  # borrow=True can not alias host memory on a device
    assert w.get_value()[0] == 0.0
    for borrow in (False, True):
        got = w.get_value(borrow=borrow)
        assert type(got) is np.ndarray and got.tolist() == [0.0, 1.0, 2.0, 3.0]
        got[1] = -1.0  # a host copy: the device value is untouched
        assert kind().to_host(internal(w))[1] == 1.0
    copy = w.get_value(return_internal_type=True)
    assert kind().is_value(copy) and copy is not inner
    assert not kind().may_share_memory(copy, inner)


@SEPARATE_MEMORY
def test_set_value_reuses_the_device_buffer_and_copies_host_values():
    w = tensorjit.shared(np.zeros(4), target=DEV)
    inner = internal(w)
    host = np.arange(8.0)[::2]  # not contiguous: made contiguous before the transfer
    w.set_value(host)
    assert internal(w) is inner
    assert w.get_value().tolist() == [0.0, 2.0, 4.0, 6.0]
    host[0] = 50.0
    assert w.get_value()[0] == 0.0
    w.set_value(np.ones(5))  # another shape: a new buffer
    assert internal(w) is not inner and w.get_value().tolist() == [1.0] * 5
    mine = to_device(np.full(5, 3.0))
    w.set_value(mine, borrow=True)
    assert internal(w) is mine  # borrow=True adopts a device value
    w.set_value(mine)
    assert internal(w) is not mine and not kind().may_share_memory(internal(w), mine)


def test_device_views_alias_only_where_their_bytes_overlap():
    base = to_device(np.arange(10.0))
    first = view(base, (5,), (8,), 0)
    last = view(base, (5,), (8,), 40)
    reversed_all = view(base, (10,), (-8,), 72)
    assert not kind().may_share_memory(first, last)
    assert kind().may_share_memory(first, reversed_all)
    assert kind().to_host(reversed_all).tolist() == list(np.arange(10.0)[::-1])
    assert not kind().may_share_memory(base, to_device(np.arange(10.0)))


def test_shared_variables_on_the_device_never_alias_each_other():
    value = to_device(np.ones(3))
    a = tensorjit.shared(value, borrow=True)
    b = tensorjit.shared(value, borrow=True)
    assert a.type.device == b.type.device == DEV
    assert not kind().may_share_memory(internal(a), internal(b))


def test_config_device_is_the_default_target():
    with config.change_flags(device=DEV):
        w = tensorjit.shared(np.ones(3))
    assert w.type.device == DEV
    assert tensorjit.shared(np.ones(3)).type.device == "cpu"


def test_updates_of_shared_weights_run_in_place_on_the_device_buffer():
    w = tensorjit.shared(np.ones(3), name="w", target=DEV)
    x = T.vector("x")
    f = tensorjit.function([x], [], updates={w: w - 0.5 * x})
    (node,) = [n for n in f.fgraph.toposort() if n.op.destroy_map]
    assert node.outputs[0].type.device == DEV
    before = buffer_of(internal(w))
    f(np.arange(3.0))
    assert buffer_of(internal(w)) == before  # written into the same device buffer
    np.testing.assert_allclose(w.get_value(), [1.0, 0.5, 0.0])


def test_updates_happen_as_if_simultaneously_on_the_device():
    a = tensorjit.shared(np.ones(2), name="a", target=DEV)
    b = tensorjit.shared(np.full(2, 2.0), name="b", target=DEV)
    f = tensorjit.function([], [a + b], updates={a: b * 1.0, b: a + 0.0})
    (total,) = f()
    np.testing.assert_allclose(total, [3.0, 3.0])
    np.testing.assert_allclose(a.get_value(), [2.0, 2.0])
    np.testing.assert_allclose(b.get_value(), [1.0, 1.0])


def test_a_failing_call_changes_no_shared_variable_on_the_device():
    a = tensorjit.shared(np.zeros(3), name="a", target=DEV)
    b = tensorjit.shared(np.zeros(3), name="b", target=DEV)
    x, y, z = T.vectors("x", "y", "z")
    new_a, new_b = a + x, b + y
    updates = [(a, new_a), (b, new_b)]
    f = tensorjit.function([x, y], [], updates=updates)  # prechecked before any write
    g = tensorjit.function([x, y, z], new_a * new_b * z, updates=updates)  # saved, restored
    buffers = [buffer_of(internal(a)), buffer_of(internal(b))]
    with pytest.raises(ValueError):
        f(np.ones(3), np.ones(2))
    with pytest.raises(ValueError):
        g(np.ones(3), np.ones(3), np.ones(2))
    np.testing.assert_array_equal(a.get_value(), np.zeros(3))
    np.testing.assert_array_equal(b.get_value(), np.zeros(3))
    assert [buffer_of(internal(a)), buffer_of(internal(b))] == buffers
    f(np.ones(3), np.ones(3))
    np.testing.assert_array_equal(b.get_value(), np.ones(3))


@SEPARATE_MEMORY
def test_outputs_are_fresh_host_arrays_unless_returned_as_device_values():
    w = tensorjit.shared(np.ones(3), name="w", target=DEV)
    f = tensorjit.function([], [w * 2, tensorjit.Out(w * 3, return_internal_type=True)])
    host, device = f()
    assert type(host) is np.ndarray and host.tolist() == [2.0] * 3
    assert kind().is_value(device) and kind().to_host(device).tolist() == [3.0] * 3
    again, _ = f()
    assert not np.shares_memory(host, again)
    moves = [n for n in f.fgraph.toposort() if isinstance(n.op, Transfer)]
    assert [n.op.target for n in moves] == ["cpu"]  # one copy back, for the host output


def test_a_device_input_is_not_modified_unless_mutable():
    from tensorjit.tensor.type import TensorType

    x = TensorType("float64", (None,), device=DEV)("x")
    arg = to_device(np.arange(3.0))
    f = tensorjit.function([x], T.exp(x) + 1)
    f(arg)
    assert kind().to_host(arg).tolist() == [0.0, 1.0, 2.0]
    g = tensorjit.function([tensorjit.In(x, mutable=True)], T.exp(x) + 1)
    out = g(arg)
    np.testing.assert_allclose(out, np.exp(np.arange(3.0)) + 1)


def test_a_wrong_value_names_the_variable_and_the_device_type():
    from tensorjit.tensor.type import TensorType

    x = TensorType("float64", (None,), device=DEV)("xd")
    f = tensorjit.function([x], x * 2)
    where = "" if HOST_MEMORY else f"device={DEVICE}.*"  # the host's types name no device
    with pytest.raises(ValueError, match=rf"xd.*{where}expected 1 dimensions, got 2") as error:
        f(to_device(np.ones((2, 2))))
    assert f"{__file__}:" in str(error.value)  # where the variable was made: this test
