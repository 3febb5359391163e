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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    from tensorjit.testing.models import lenet_parameters, lenet_step

    rng = np.random.default_rng(0)
    params0 = lenet_parameters(rng, (6, 16), 28)
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
