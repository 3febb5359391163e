"""Small models the tests and the benchmarks both build (one definition for both)."""

from __future__ import annotations

from typing import Any

import numpy as np


def lenet_step(device: str, params0: list[np.ndarray], schedule: str = "auto") -> Any:
    """An SGD step ``step(x, y) -> cost`` of a two-layer LeNet on ``device`` (config
    ``device_schedule=schedule``): a 'half' convolution, max pooling and a ReLU, a
    'valid' convolution, average pooling over partial windows and tanh, a dense softmax
    layer; float32 images ``x`` (batch, 1, rows, cols), int32 labels ``y``. ``params0``:
    the two filters and the dense weights (shared, copied)."""
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


def lenet_parameters(rng: np.random.Generator, filters: tuple[int, int], side: int) -> list:
    """Float32 starting weights for ``lenet_step`` on ``side`` x ``side`` images:
    ``filters`` 5x5 then 3x3 filters, ten classes."""
    f0, f1 = filters
    pooled = ((side // 2) - 2 + 1) // 2
    shapes = ((f0, 1, 5, 5), (f1, f0, 3, 3), (f1 * pooled * pooled, 10))
    return [(rng.standard_normal(s) * 0.2).astype("float32") for s in shapes]
