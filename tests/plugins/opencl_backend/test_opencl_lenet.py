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
from tensorjit.tensor import nnet
from tensorjit.tensor.nnet.conv import Conv2d, Conv2dGradInputs, Conv2dGradWeights, conv2d
from tensorjit.tensor.nnet.pool import AveragePoolGrad, MaxPoolGrad, Pool, pool_2d
from tensorjit.testing.device_under_test import NEEDS_DEVICE, ONLY_OPENCL

pytestmark = [NEEDS_DEVICE, ONLY_OPENCL]

CONV_AND_POOL = (Conv2d, Conv2dGradInputs, Conv2dGradWeights, Pool, MaxPoolGrad, AveragePoolGrad)


def lenet_step(device: str, params0: list[np.ndarray], schedule: str = "groups"):
    """An SGD step of a two-layer LeNet (max and average pooling) on ``device``."""
    with config.change_flags(device=device, device_schedule=schedule):
        params = [tensorjit.shared(p.copy(), name=f"p{k}") for k, p in enumerate(params0)]
        w0, w1, w2 = params
        x, y = T.tensor4("x", dtype="float32"), T.ivector("y")
        h = T.maximum(pool_2d(conv2d(x, w0, border_mode="half"), (2, 2)), 0)
        h = T.tanh(pool_2d(conv2d(h, w1), (2, 2), ignore_border=False, mode="average_exc_pad"))
        p = nnet.softmax(T.dot(h.flatten(2), w2))
        cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
        updates = [
            (w, w - np.float32(0.1) * g) for w, g in zip(params, tensorjit.grad(cost, params))
        ]
        return tensorjit.function([x, y], cost, updates=updates)


def test_a_lenet_step_on_opencl_runs_convolution_and_pooling_there_with_cs_losses():
    rng = np.random.default_rng(0)
    params0 = [
        (rng.standard_normal(shape) * 0.3).astype("float32")
        for shape in ((6, 1, 5, 5), (8, 6, 3, 3), (8 * 3 * 3, 10))
    ]
    on_opencl, on_c = lenet_step("opencl", params0), lenet_step("cpu", params0)
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
    rng = np.random.default_rng(1)
    params0 = [
        (rng.standard_normal(shape) * 0.3).astype("float32")
        for shape in ((6, 1, 5, 5), (8, 6, 3, 3), (8 * 3 * 3, 10))
    ]
    step = lenet_step("opencl", params0, schedule="auto")
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
