"""The test kit for op and plugin authors (tensorjit.testing): check_op passes good ops
(tensorjit's own included) and names the culprit of each fault it exists to catch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tensorjit.tensor as T
from tensorjit.core.config import config
from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.core.hooks import hookimpl
from tensorjit.tensor.math import Argmax, Dot, MappedReduce, Reduce
from tensorjit.tensor.nnet.basic import LogSoftmax, Softmax
from tensorjit.testing import OpCheckError, check_op


class Scale(Op):
    """y = factor * x, with a gradient; subclasses below each carry one fault."""

    __props__ = ("factor",)

    def __init__(self, factor: float):
        self.factor = factor

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.asarray(inputs[0] * self.factor, node.outputs[0].type.dtype)

    def infer_shape(self, fgraph, node, input_shapes):
        return input_shapes

    def grad(self, inputs, output_grads):
        return [output_grads[0] * self.factor]


def good_kernel(node):
    factor, dtype = node.op.factor, node.outputs[0].type.dtype

    def run(inputs, output_storage):
        output_storage[0][0] = np.multiply(inputs[0], factor, dtype=dtype)

    return run


class KernelPlugin:
    """Registers ``factory`` as the C backend's kernel for ``op_class``."""

    def __init__(self, op_class, factory):
        self.op_class, self.factory = op_class, factory

    @hookimpl
    def tensorjit_register_kernels(self, registry):
        registry.add("c", self.op_class, self.factory, name=f"c:{self.op_class.__name__}")


def with_kernel(plugins, op_class, factory):
    plugins.register(KernelPlugin(op_class, factory), f"kit_{op_class.__name__}")


def test_a_good_op_with_a_kernel_passes_every_check(tensorjit_plugins):
    class GoodScale(Scale):
        pass

    with_kernel(tensorjit_plugins, GoodScale, good_kernel)
    x = np.random.default_rng(0).normal(size=(4, 3))
    report = check_op(GoodScale(2.5), x, dtypes=("float32",))
    assert report.backends == {"c"}
    for layout in ("contiguous", "fortran", "strided", "negative_strides", "broadcast", "empty"):
        assert f"c kernel: {layout} inputs, given dtypes" in report.checks
        assert f"infer_shape: {layout} inputs, float32" in report.checks
    assert "grad (verify_grad)" in report.checks and "R-op (finite differences)" in report.checks


def test_a_wrong_kernel_is_named(tensorjit_plugins):
    class WrongKernelScale(Scale):
        pass

    def off_by_one(node):
        def run(inputs, output_storage):
            output_storage[0][0] = inputs[0] * node.op.factor + 1

        return run

    with_kernel(tensorjit_plugins, WrongKernelScale, off_by_one)
    with pytest.raises(OpCheckError, match=r"the c kernel 'c:WrongKernelScale' of .* computes "
                       r"output 0 differently from perform .*the kernel is wrong"):  # fmt: skip
        check_op(WrongKernelScale(2.0), np.ones((3, 2)))


def test_a_wrong_infer_shape_is_named():
    class WrongShapeScale(Scale):
        def infer_shape(self, fgraph, node, input_shapes):
            return [tuple(reversed(input_shapes[0]))]

    with pytest.raises(OpCheckError, match=r"infer_shape gives \(2, 3\) for output 0 .* shape "
                       r"\(3, 2\): the op's infer_shape is wrong"):  # fmt: skip
        check_op(WrongShapeScale(2.0), np.ones((3, 2)))


def test_a_missing_props_is_named():
    class NoPropsScale(Scale):
        __props__ = ()

    with pytest.raises(OpCheckError, match=r"NoPropsScale.__init__ takes factor but NoPropsScale "
                       r"declares no __props__"):  # fmt: skip
        check_op(NoPropsScale(2.0), np.ones(3))


def test_a_kernel_writing_into_its_input_is_named(tensorjit_plugins):
    class InplaceKernelScale(Scale):
        pass

    def in_place(node):
        def run(inputs, output_storage):
            x = inputs[0]
            x *= node.op.factor
            output_storage[0][0] = x.copy()

        return run

    with_kernel(tensorjit_plugins, InplaceKernelScale, in_place)
    with pytest.raises(OpCheckError, match=r"c kernel .* wrote into input 0, which "
                       r"InplaceKernelScale does not declare in destroy_map"):  # fmt: skip
        check_op(InplaceKernelScale(3.0), np.ones((2, 2)))


def test_a_kernel_returning_an_undeclared_view_is_named(tensorjit_plugins):
    class ViewKernelScale(Scale):
        pass

    def view_when_one(node):
        def run(inputs, output_storage):
            x = inputs[0]
            output_storage[0][0] = x if node.op.factor == 1 else x * node.op.factor

        return run

    with_kernel(tensorjit_plugins, ViewKernelScale, view_when_one)
    with pytest.raises(OpCheckError, match=r"returns output 0 as a view of input 0, which "
                       r"ViewKernelScale does not declare in view_map"):  # fmt: skip
        check_op(ViewKernelScale(1.0), np.ones((2, 2)))


def test_a_perform_of_the_wrong_dtype_is_the_ops_fault():
    class SinglePerformScale(Scale):
        def perform(self, node, inputs, output_storage):
            output_storage[0][0] = (inputs[0] * self.factor).astype("float32")

    wrong = r"returned float32 of rank 2 for output 0 .* declared TensorType\(float64"
    with pytest.raises(OpCheckError, match=wrong + r".*the op's perform is wrong, not a kernel"):
        check_op(SinglePerformScale(2.0), np.ones((2, 2)))


def test_a_wrong_gradient_is_named():
    class WrongGradScale(Scale):
        def grad(self, inputs, output_grads):
            return [output_grads[0] * (self.factor + 1)]

    with pytest.raises(OpCheckError, match=r"grad disagrees with finite differences"):
        check_op(WrongGradScale(2.0), np.ones((2, 2)))


@pytest.mark.parametrize(
    "op, inputs",
    [
        (Softmax((1,)), [np.random.default_rng(1).normal(size=(4, 5))]),
        (Dot(), [np.ones((4, 5)), np.arange(15.0).reshape(5, 3)]),
        (Reduce("sum", (0,)), [np.arange(12.0).reshape(4, 3)]),
        (T.exp(T.matrix()).owner.op, [np.linspace(-1, 1, 12).reshape(3, 4)]),
        (T.tanh(T.vector()).owner.op, [np.linspace(-2, 2, 7)]),
        (LogSoftmax((1,)), [np.random.default_rng(2).normal(size=(4, 5))]),
        (Argmax("argmax", 1), [np.random.default_rng(3).normal(size=(4, 5))]),
        (Reduce("max", (1,)), [np.random.default_rng(4).normal(size=(4, 5))]),
        (MappedReduce("sum", (0, 1), None, "sqr"), [np.arange(12.0).reshape(4, 3) - 5]),
        (MappedReduce("max", (0,), None, "abs"), [np.random.default_rng(5).normal(size=(4, 5))]),
        ((T.matrix() * T.matrix()).owner.op, [np.ones((3, 4)) * 2, np.arange(12.0).reshape(3, 4)]),
        (T.matrix().T.owner.op, [np.arange(12.0).reshape(3, 4)]),
        (T.sqrt(T.matrix()).owner.op, [np.linspace(0.5, 2.0, 12).reshape(3, 4)]),
    ],
)
def test_tensorjits_own_ops_pass_the_kit(op, inputs):
    from tensorjit.testing.device_under_test import REASON as OPENCL_UNAVAILABLE

    report = check_op(op, *inputs, dtypes=("float32",))
    assert "c" in report.backends  # their C kernels were compared with perform
    if OPENCL_UNAVAILABLE is None and not isinstance(op, MappedReduce):  # host-only op
        # and their OpenCL kernels, on the device
        assert "opencl" in report.backends


def test_the_fixtures_isolate_the_cache_and_the_plugin_set(tensorjit_cache, tensorjit_plugins):
    assert config.compiledir == str(tensorjit_cache)

    class Isolated(Scale):
        pass

    with_kernel(tensorjit_plugins, Isolated, good_kernel)
    table = tensorjit_plugins.system.registries.kernels.table
    assert ("c", Isolated) in table
    tensorjit_plugins.restore()
    assert ("c", Isolated) not in table
    tensorjit_plugins.names.clear()


@pytest.mark.tensorjit_isolated
def test_the_marker_gives_both(request):
    assert {"tensorjit_cache", "tensorjit_plugins"} <= set(request.fixturenames)
    assert "tensorjit-cache" in config.compiledir


def test_the_pytest_plugin_is_found_through_its_entry_point(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--fixtures", "-q", "-p", "no:cacheprovider"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert "tensorjit_cache" in done.stdout and "tensorjit_plugins" in done.stdout
    assert "check_op" in done.stdout


def test_a_kernel_assuming_c_order_is_caught_on_fortran_inputs(tensorjit_plugins):
    class RowMajorScale(Scale):
        pass

    def row_major(node):
        def run(inputs, output_storage):
            x = inputs[0]  # reads memory as if rows were contiguous (a naive C loop)
            raw = np.lib.stride_tricks.as_strided(x, x.shape, (x.strides[0], x.itemsize))
            output_storage[0][0] = np.array(raw) * node.op.factor

        return run

    with_kernel(tensorjit_plugins, RowMajorScale, row_major)
    with pytest.raises(OpCheckError, match=r"\(fortran inputs.*differently from perform"):
        check_op(RowMajorScale(2.0), np.arange(12.0).reshape(3, 4))


def test_a_kernel_reusing_a_stale_output_buffer_is_caught(tensorjit_plugins):
    class StaleBufferScale(Scale):
        pass

    def reuses_blindly(node):
        def run(inputs, output_storage):
            out = output_storage[0][0]
            if out is None:
                out = np.empty_like(inputs[0])
            np.multiply(inputs[0], node.op.factor, out=out)  # wrong when the shape changed
            output_storage[0][0] = out

        return run

    with_kernel(tensorjit_plugins, StaleBufferScale, reuses_blindly)
    with pytest.raises(OpCheckError, match=r"empty inputs.*raised"):
        check_op(StaleBufferScale(2.0), np.ones((3, 4)))


def test_scalars_keep_their_rank_and_partial_props_are_named():
    from tensorjit.tensor.math import Alloc

    report = check_op(Alloc(), np.float64(2.0), np.int64(3), np.int64(4), gradients=False)
    assert "c" in report.backends

    class TwoArguments(Scale):
        __props__ = ("factor",)

        def __init__(self, factor, offset):
            self.factor, self.offset = factor, offset

    with pytest.raises(OpCheckError, match=r"takes offset, kept as attribute.*leaves them out"):
        check_op(TwoArguments(2.0, 1.0), np.ones(3))
