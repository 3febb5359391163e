"""A LeNet training step on ``device=opencl`` with the GPU shapes forced
(``config.device_schedule="groups"``, as a GPU gets them by default): every convolution
and pooling node, and their gradients, runs as an OpenCL kernel, and the losses of a
few SGD steps equal the C backend's within float32's reach. On a CPU device by default
they run on the host's kernels instead."""

from __future__ import annotations

import numpy as np

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.config import config
from tensorjit.tensor.nnet.conv import Conv2d, Conv2dGradInputs, Conv2dGradWeights, conv2d
from tensorjit.tensor.nnet.pool import AveragePoolGrad, MaxPoolGrad, Pool
from tensorjit.testing.device_under_test import NEEDS_DEVICE, ONLY_OPENCL
from tensorjit.testing.models import lenet_parameters, lenet_step

pytestmark = [NEEDS_DEVICE, ONLY_OPENCL]

CONV_AND_POOL = (Conv2d, Conv2dGradInputs, Conv2dGradWeights, Pool, MaxPoolGrad, AveragePoolGrad)


def test_a_lenet_step_on_opencl_runs_convolution_and_pooling_there_with_cs_losses():
    rng = np.random.default_rng(0)
    params0 = lenet_parameters(rng, (6, 8), 14)
    on_opencl, on_c = lenet_step("opencl", params0, "groups"), lenet_step("cpu", params0)
    nodes = [n for n in on_opencl.kernels if isinstance(n.op, CONV_AND_POOL)]
    assert {type(n.op) for n in nodes} == set(CONV_AND_POOL)
    kernels = {on_opencl.kernels[n].name for n in nodes}
    assert kernels == {"opencl:convolution", "opencl:pooling"}, kernels
    x = rng.standard_normal((16, 1, 14, 14)).astype("float32")
    y = rng.integers(0, 10, 16).astype("int32")
    for _ in range(3):
        np.testing.assert_allclose(on_opencl(x, y), on_c(x, y), rtol=1e-4)


def test_on_a_cpu_device_convolutions_stay_with_the_hosts_kernels_by_default():
    from tensorjit.plugins.opencl_backend.target import OPENCL

    if not OPENCL.runtime().is_cpu:
        return  # a GPU takes them (the test above)
    step = lenet_step("opencl", lenet_parameters(np.random.default_rng(1), (6, 8), 14))
    kernels = {step.kernels[n].name for n in step.kernels if isinstance(n.op, CONV_AND_POOL)}
    assert kernels == {"c:convolution", "c:pooling"}, kernels


def test_convolutions_over_blocks_of_images_agree_with_perform(monkeypatch):
    """Batches whose unrolled windows exceed the budget go by blocks of images (the
    weights' gradient accumulating block by block); DebugMode compares with perform."""
    from tensorjit.plugins.device_kernels import convolution
    from tensorjit.testing.device_under_test import device_var, on_device, to_device

    # 12 window rows x 28 output pixels of 8 bytes per image: blocks of two images.
    monkeypatch.setattr(convolution, "COLUMNS_BYTES", 2 * 12 * 28 * 8)

    def outputs(x, w, g):
        out = conv2d(x, w, border_mode="half", subsample=(1, 2))
        return [out, *T.grad((out * g).sum(), [x, w])]

    x, w, g = (device_var(name, (None,) * 4) for name in "xwg")
    with config.change_flags(device_schedule="groups"):
        f = on_device([x, w, g], outputs(x, w, g))
    rng = np.random.default_rng(5)
    xv, wv = rng.standard_normal((5, 3, 6, 7)), rng.standard_normal((2, 3, 2, 2))
    gv = rng.standard_normal((5, 2, 7, 4))
    hx, hw, hg = (T.tensor4(name) for name in "xwg")
    host = tensorjit.function([hx, hw, hg], outputs(hx, hw, hg), mode=tensorjit.FAST_COMPILE)
    kernels = {f.kernels[n].name for n in f.kernels if isinstance(n.op, CONV_AND_POOL)}
    assert kernels == {"debug:opencl:convolution"}, kernels
    for got, want in zip(f(*(to_device(v) for v in (xv, wv, gv))), host(xv, wv, gv)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
