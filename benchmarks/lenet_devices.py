"""A LeNet training step on the C backend and on ``device=opencl`` (PoCL here).

Run: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE taskset -c 0,1 \\
         .venv/bin/python benchmarks/lenet_devices.py [--repeats 7] [--batch 64]

On ``opencl`` as configured by default (``device_schedule=auto``: a CPU device such as
PoCL leaves convolutions and pooling to the host's kernels) and with the GPU shapes
forced (``groups``: they run as OpenCL kernels). Two 'half'/'valid' convolutions (6
and 16 filters of 5x5 and 3x3), max and average pooling, a dense softmax layer, SGD on
the three weights, float32, 28x28 images. Prints ms per step for each, the losses of
the first steps (checked equal within 1e-4), and for the groups run how many nodes run
on other backends and which kernels the convolution and pooling nodes run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import numpy as np  # noqa: E402
from _timing import median_time  # noqa: E402

CONV_AND_POOL = (
    "Conv2d",
    "Conv2dGradInputs",
    "Conv2dGradWeights",
    "Pool",
    "MaxPoolGrad",
    "AveragePoolGrad",
)


def lenet_step(device: str, params0: list[np.ndarray], schedule: str = "auto"):
    import tensorjit
    import tensorjit.tensor as T
    from tensorjit.core.config import config
    from tensorjit.tensor import nnet
    from tensorjit.tensor.nnet.conv import conv2d
    from tensorjit.tensor.nnet.pool import pool_2d

    with config.change_flags(device=device, device_schedule=schedule):
        params = [tensorjit.shared(p.copy(), name=f"p{k}") for k, p in enumerate(params0)]
        w0, w1, w2 = params
        x, y = T.tensor4("x", dtype="float32"), T.ivector("y")
        h = T.maximum(pool_2d(conv2d(x, w0, border_mode="half"), (2, 2)), 0)
        h = T.tanh(pool_2d(conv2d(h, w1), (2, 2), ignore_border=False, mode="average_exc_pad"))
        p = nnet.softmax(T.dot(h.flatten(2), w2))
        cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
        grads = tensorjit.grad(cost, params)
        updates = [(w, w - np.float32(0.05) * g) for w, g in zip(params, grads)]
        return tensorjit.function([x, y], cost, updates=updates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    shapes = ((6, 1, 5, 5), (16, 6, 3, 3), (16 * 6 * 6, 10))
    params0 = [(rng.standard_normal(s) * 0.2).astype("float32") for s in shapes]
    x = rng.standard_normal((args.batch, 1, 28, 28)).astype("float32")
    y = rng.integers(0, 10, args.batch).astype("int32")
    steps = {
        "cpu": lenet_step("cpu", params0),
        "opencl": lenet_step("opencl", params0),  # auto: on PoCL, conv/pool on the host
        "opencl, groups": lenet_step("opencl", params0, "groups"),  # the GPU shapes
    }
    losses = {name: [float(f(x, y)) for _ in range(3)] for name, f in steps.items()}
    for name in steps:
        np.testing.assert_allclose(losses[name], losses["cpu"], rtol=1e-4)
    print(f"losses (first 3 steps): {losses['cpu']}")
    f = steps["opencl, groups"]
    kernels = {
        f"{type(n.op).__name__}: {f.kernels[n].name}"
        for n in f.kernels
        if type(n.op).__name__ in CONV_AND_POOL
    }
    host = [n for n in f.kernels if f.kernels[n].backend != "opencl" and n.outputs]
    print("opencl (groups) conv/pool kernels:", ", ".join(sorted(kernels)))
    print(f"opencl (groups) nodes on other backends: {len(host)} of {len(f.kernels)}")
    for name, step in steps.items():
        ms = median_time(lambda step=step: step(x, y), args.repeats) * 1e3
        print(f"{name:16s} {ms:8.2f} ms/step (batch {args.batch})")


if __name__ == "__main__":
    main()
