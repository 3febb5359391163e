"""The Theano paper's case study: logistic regression trained by SGD, on random data.

Run: python examples/logistic_regression.py [--steps N] [--device opencl]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.config import config


def main(n_examples: int = 400, n_features: int = 784, steps: int = 10000, report: int = 1000):
    rng = np.random.default_rng(0)
    D = (rng.standard_normal((n_examples, n_features)), rng.integers(0, 2, size=n_examples))

    # Declare Theano-style symbolic variables.
    x = T.matrix("x")
    y = T.lvector("y")
    # The paper's unit-variance weights saturate p_1 to exactly 0 or 1 in float64: the
    # stabilize rewrites (log(sigmoid) -> -softplus) keep the cost and gradient finite.
    w = tensorjit.shared(rng.standard_normal(n_features), name="w")
    b = tensorjit.shared(0.0, name="b")
    print("Initial model: |w| =", np.linalg.norm(w.get_value()), " b =", b.get_value())

    # Construct the expression graph.
    p_1 = 1 / (1 + T.exp(-T.dot(x, w) - b))  # probability that target = 1
    prediction = p_1 > 0.5  # the prediction threshold
    xent = -y * T.log(p_1) - (1 - y) * T.log(1 - p_1)  # cross-entropy loss
    cost = xent.mean() + 0.01 * (w**2).sum()  # the cost to minimize
    gw, gb = tensorjit.grad(cost, [w, b])

    # Compile.
    train = tensorjit.function(
        inputs=[x, y],
        outputs=[prediction, xent.mean()],
        updates={w: w - 0.1 * gw, b: b - 0.1 * gb},
        name="train",
    )
    predict = tensorjit.function(inputs=[x], outputs=prediction, name="predict")

    # Train.
    start = time.perf_counter()
    last = start
    first_cost = None
    for step in range(1, steps + 1):
        pred, err = train(D[0], D[1])
        first_cost = err if first_cost is None else first_cost
        if step % report == 0 or step == 1:
            now = time.perf_counter()
            per_step = (now - last) / (report if step > 1 else 1)
            last = now
            accuracy = float(np.mean(predict(D[0]) == D[1]))
            print(
                f"step {step:>6}  cross-entropy {float(err):.4f}  training accuracy "
                f"{accuracy:.3f}  ({per_step * 1e6:.0f} us/step)"
            )
    total = time.perf_counter() - start
    accuracy = float(np.mean(predict(D[0]) == D[1]))
    print(f"trained {steps} steps in {total:.2f}s ({total / steps * 1e6:.0f} us/step)")
    print(
        f"cross-entropy {float(first_cost):.4f} -> {float(err):.4f}; final training accuracy "
        f"{accuracy:.3f}"
    )
    return float(first_cost), float(err), accuracy


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10000, help="SGD steps")
    parser.add_argument(
        "--device", default=None, help="where to train: cpu (default, config.device) or opencl"
    )
    args = parser.parse_args()
    with config.change_flags(device=args.device or config.device):
        print(f"device: {config.device}")
        first, last, acc = main(steps=args.steps, report=max(args.steps // 10, 1))
    if not (last < first and acc > 0.9):
        raise SystemExit(f"training failed: cost {first:.4f} -> {last:.4f}, accuracy {acc:.3f}")
