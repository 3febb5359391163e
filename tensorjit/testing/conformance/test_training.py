"""The paper's logistic regression and the MLP train on the tested device: where the
backend claims every kernel they need, every node but the input copies runs there
(compiling with ``assert_no_cpu_op="raise"`` passes),
and the losses equal the host's (C backend) within 1e-6 relative in float64 and 1e-4
in float32, step after step."""

from __future__ import annotations

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.config import config
from tensorjit.core.rewrites.transfer import host_nodes_of_device_function
from tensorjit.tensor import nnet
from tensorjit.testing.device_under_test import DEVICE, NEEDS_DEVICE, all_nodes_on_device

pytestmark = NEEDS_DEVICE
TOLERANCE = {"float64": 1e-6, "float32": 1e-4}
# The kernels the two models need: a backend claiming them all runs every node.
KERNELS = ("elemwise", "reduce", "dot", "gemm", "dimshuffle", "alloc", "argmax")
NNET_KERNELS = (*KERNELS, "softmax", "select_class", "select_class_grad")


def strict(device: str, kernels: tuple[str, ...]) -> bool:
    return device != "cpu" and all_nodes_on_device(kernels)


def no_cpu_op(device: str, kernels: tuple[str, ...]) -> str:
    return "raise" if strict(device, kernels) else "ignore"


def logistic_regression(dtype: str, device: str, steps: int = 30) -> list[float]:
    rng = np.random.default_rng(0)
    data = rng.standard_normal((200, 50)).astype(dtype), rng.integers(0, 2, 200)
    with config.change_flags(device=device, assert_no_cpu_op=no_cpu_op(device, KERNELS)):
        x, y = T.matrix("x", dtype=dtype), T.lvector("y")
        w = tensorjit.shared(rng.standard_normal(50).astype(dtype) * 0.1, name="w")
        b = tensorjit.shared(np.asarray(0.0, dtype), name="b")
        p_1 = 1 / (1 + T.exp(-T.dot(x, w) - b))
        xent = -y * T.log(p_1) - (1 - y) * T.log(1 - p_1)
        cost = xent.mean() + 0.01 * (w**2).sum()
        gw, gb = tensorjit.grad(cost, [w, b])
        lr = np.asarray(0.1, dtype)
        train = tensorjit.function(
            [x, y], [p_1 > 0.5, xent.mean()], updates={w: w - lr * gw, b: b - lr * gb}
        )
    if strict(device, KERNELS):
        assert host_nodes_of_device_function(train.fgraph, device) == []
    return [float(train(*data)[1]) for _ in range(steps)]


def mlp(dtype: str, device: str, steps: int = 10) -> list[float]:
    rng = np.random.default_rng(1)
    data_x = rng.standard_normal((steps * 20, 784)).astype(dtype)
    data_y = rng.integers(0, 10, steps * 20)
    with config.change_flags(device=device, assert_no_cpu_op=no_cpu_op(device, NNET_KERNELS)):
        w1 = tensorjit.shared((rng.standard_normal((784, 100)) / 28).astype(dtype), name="w1")
        b1 = tensorjit.shared(np.zeros(100, dtype), name="b1")
        w2 = tensorjit.shared(np.zeros((100, 10), dtype), name="w2")
        b2 = tensorjit.shared(np.zeros(10, dtype), name="b2")
        params = [w1, b1, w2, b2]
        x, y = T.matrix("x", dtype=dtype), T.lvector("y")
        p_y = nnet.softmax(T.dot(T.tanh(T.dot(x, w1) + b1), w2) + b2)
        cost = nnet.categorical_crossentropy(p_y, y).mean()
        grads = tensorjit.grad(cost, params)
        lr = np.asarray(0.1, dtype)
        train = tensorjit.function(
            [x, y], cost, updates=[(p, p - lr * g) for p, g in zip(params, grads)]
        )
        predict = tensorjit.function([x], T.argmax(p_y, axis=1))
    if strict(device, NNET_KERNELS):
        for f in (train, predict):
            assert host_nodes_of_device_function(f.fgraph, device) == []
    losses = [
        float(train(data_x[i * 20 : i * 20 + 20], data_y[i * 20 : i * 20 + 20]))
        for i in range(steps)
    ]
    losses.append(float(np.mean(predict(data_x) == data_y)))
    return losses


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("model", [logistic_regression, mlp], ids=["logreg", "mlp"])
def test_training_on_the_device_matches_the_host(model, dtype):
    host = model(dtype, "cpu")
    device = model(dtype, DEVICE)
    np.testing.assert_allclose(device, host, rtol=TOLERANCE[dtype], atol=0)
    assert host[-2] < host[0] or model is mlp  # it trains (the mlp's last entry: accuracy)


def test_a_bad_label_raises_before_any_weight_is_updated():
    """The class-selection kernels read their error flag late (no wait for the device
    per launch), but before the first step that overwrites a shared variable."""
    rng = np.random.default_rng(2)
    with config.change_flags(device=DEVICE):
        w = tensorjit.shared(rng.standard_normal((5, 3)), name="w")
        b = tensorjit.shared(np.zeros(3), name="b")
        x, y = T.matrix("x"), T.lvector("y")
        p_y = nnet.softmax(T.dot(x, w) + b)
        cost = nnet.categorical_crossentropy(p_y, y).mean()
        gw, gb = tensorjit.grad(cost, [w, b])
        train = tensorjit.function([x, y], cost, updates=[(w, w - 0.1 * gw), (b, b - 0.1 * gb)])
    assert any(n.op.destroy_map for n in train.fgraph.apply_nodes)  # updates in place
    before = w.get_value(), b.get_value()
    with pytest.raises(IndexError, match="class index 7 is out of range for 3 classes"):
        train(rng.standard_normal((4, 5)), np.array([0, 7, 1, 2]))
    np.testing.assert_array_equal(w.get_value(), before[0])
    np.testing.assert_array_equal(b.get_value(), before[1])
    train(rng.standard_normal((4, 5)), np.array([0, 2, 1, 2]))  # a good call still works
    assert not np.array_equal(w.get_value(), before[0])
