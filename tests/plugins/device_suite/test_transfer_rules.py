"""Transfer rules through their public hook (``tensorjit_register_transfers``): the
device backends' lifters decide where convolutions and pooling run, and a third party's
plugin lifts its own host op to a device, or keeps one of tensorjit's off it."""

from __future__ import annotations

import numpy as np

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.config import config
from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.core.hooks import get_plugin_system, hookimpl
from tensorjit.tensor import nnet
from tensorjit.tensor.math import softplus
from tensorjit.tensor.nnet.conv import Conv2d, Conv2dGradInputs, Conv2dGradWeights, conv2d
from tensorjit.tensor.nnet.pool import AveragePoolGrad, MaxPoolGrad, Pool, pool_2d
from tensorjit.testing.device_under_test import NEEDS_DEVICE, ONLY_OPENCL

# tensorjit's elementwise softplus op (what ``softplus(x)`` applies)
SOFTPLUS = softplus(T.vector("probe")).owner.op
CONV_AND_POOL = (Conv2d, Conv2dGradInputs, Conv2dGradWeights, Pool, MaxPoolGrad, AveragePoolGrad)


class HostSoftplus(Op):
    """A third party's op with only a host implementation."""

    __props__ = ()

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        x = inputs[0]
        output_storage[0][0] = np.asarray(np.logaddexp(0, x), x.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return input_shapes


class LiftSoftplusToOpenCL:
    """Its plugin: on OpenCL the op is tensorjit's elementwise softplus."""

    @hookimpl
    def tensorjit_register_transfers(self, registry):
        registry.add_lifter("opencl", HostSoftplus, lambda node, device: SOFTPLUS)


class KeepSoftmaxOffOpenCL:
    """A plugin keeping softmax on the host whatever the function's device."""

    @hookimpl
    def tensorjit_register_transfers(self, registry):
        registry.add_lifter("opencl", nnet.Softmax, lambda node, device: None)


def kernel_names(f, op_class) -> set[str]:
    return {f.kernels[n].name for n in f.kernels if isinstance(n.op, op_class)}


def test_the_device_backends_register_lifters_for_convolution_and_pooling():
    transfers = get_plugin_system().registries.transfers
    for device in ("opencl", "cuda"):
        for op_class in CONV_AND_POOL:
            entry = transfers.lifters.get((device, op_class))
            assert entry is not None, (device, op_class.__name__)
            assert entry[1] == f"{device}_backend"


@NEEDS_DEVICE
@ONLY_OPENCL
def test_the_lifters_keep_convolutions_on_the_host_of_a_cpu_device_unless_forced():
    x = T.tensor4("x", dtype="float32")
    w = tensorjit.shared(np.ones((2, 1, 3, 3), "float32"), name="w")
    out = pool_2d(conv2d(x, w), (2, 2)).sum()
    g = tensorjit.grad(out, w)
    value = np.random.default_rng(0).standard_normal((2, 1, 8, 8)).astype("float32")
    results = {}
    for schedule, backend in (("auto", "c"), ("groups", "opencl")):
        with config.change_flags(device="opencl", device_schedule=schedule):
            f = tensorjit.function([x], [out, g])
        names = {name for op_class in CONV_AND_POOL for name in kernel_names(f, op_class)}
        assert names and all(name.startswith(f"{backend}:") for name in names), names
        results[schedule] = f(value)
    for a, b in zip(results["auto"], results["groups"]):
        np.testing.assert_allclose(a, b, rtol=1e-5)


@NEEDS_DEVICE
@ONLY_OPENCL
def test_a_plugin_lifts_its_own_host_op_to_a_device(tensorjit_plugins):
    x = T.vector("x")
    value = np.linspace(-30, 30, 101)
    with config.change_flags(device="opencl"):
        before = tensorjit.function([x], HostSoftplus()(x) * 2.0)
    assert all(not name.startswith("opencl:") for name in kernel_names(before, HostSoftplus))
    tensorjit_plugins.register(LiftSoftplusToOpenCL(), "lift_softplus")
    with config.change_flags(device="opencl"):
        after = tensorjit.function([x], HostSoftplus()(x) * 2.0)
    assert kernel_names(after, HostSoftplus) == set()  # the node is softplus now
    assert "opencl:elemwise" in {kernel.name for kernel in after.kernels.values()}
    np.testing.assert_allclose(after(value), before(value), rtol=1e-12)


@NEEDS_DEVICE
@ONLY_OPENCL
def test_a_plugin_lifter_keeps_a_node_off_a_device(tensorjit_plugins):
    x = T.matrix("x")
    value = np.random.default_rng(1).standard_normal((4, 5))
    with config.change_flags(device="opencl"):
        on_device = tensorjit.function([x], nnet.softmax(x * 2.0))
    assert kernel_names(on_device, nnet.Softmax) == {"opencl:softmax"}
    tensorjit_plugins.register(KeepSoftmaxOffOpenCL(), "keep_softmax")
    with config.change_flags(device="opencl"):
        on_host = tensorjit.function([x], nnet.softmax(x * 2.0))
    names = kernel_names(on_host, nnet.Softmax)
    assert names and not any(name.startswith("opencl:") for name in names), names
    np.testing.assert_allclose(on_host(value), on_device(value), rtol=1e-12)
