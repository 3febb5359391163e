"""One SGD step of the paper's logistic regression: tensorjit vs NumPy vs PyTensor.

Run: .venv/bin/pip install -e ".[bench]" && .venv/bin/python benchmarks/logreg_step.py
Prints the median time per step of each implementation (same data, same run) and the
ratio to NumPy. A competitor that is not installed is reported as such.
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import median_time


def numpy_step(x, y, w, b):
    def step():
        p = 1 / (1 + np.exp(-x @ w[0] - b[0]))
        xent = -y * np.log(p) - (1 - y) * np.log(1 - p)
        pred = p > 0.5
        gp = (-y / p + (1 - y) / (1 - p)) / len(y)
        gz = gp * p * (1 - p)
        gw = x.T @ gz + 0.02 * w[0]
        gb = gz.sum()
        w[0] = w[0] - 0.1 * gw
        b[0] = b[0] - 0.1 * gb
        return pred, xent.mean()

    return step


def symbolic_step(lib, tensor, x, y, w0):
    sx, sy = tensor.matrix("x"), tensor.lvector("y")
    w = lib.shared(w0.copy(), name="w")
    b = lib.shared(0.0, name="b")
    p = 1 / (1 + tensor.exp(-tensor.dot(sx, w) - b))
    xent = -sy * tensor.log(p) - (1 - sy) * tensor.log(1 - p)
    cost = xent.mean() + 0.01 * (w**2).sum()
    gw, gb = lib.grad(cost, [w, b])
    train = lib.function(
        [sx, sy], [p > 0.5, xent.mean()], updates=[(w, w - 0.1 * gw), (b, b - 0.1 * gb)]
    )
    return lambda: train(x, y)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--inner", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, 784))
    y = rng.integers(0, 2, size=400)
    w0 = 0.01 * rng.standard_normal(784)

    results: dict[str, float | str] = {}
    results["numpy"] = median_time(
        numpy_step(x, y, [w0.copy()], [0.0]), args.repeats, inner=args.inner
    )

    import tensorjit
    import tensorjit.tensor as tt

    results["tensorjit"] = median_time(
        symbolic_step(tensorjit, tt, x, y, w0), args.repeats, inner=args.inner
    )
    try:
        import pytensor
        import pytensor.tensor as pt

        results["pytensor"] = median_time(
            symbolic_step(pytensor, pt, x, y, w0), args.repeats, inner=args.inner
        )
    except ImportError as exc:
        results["pytensor"] = f"not installed ({exc})"

    base = results["numpy"]
    print(
        f"logistic regression SGD step, 400x784 float64, median of {args.repeats} x "
        f"{args.inner} steps"
    )
    for name, value in results.items():
        if isinstance(value, str):
            print(f"  {name:<10} {value}")
        else:
            print(f"  {name:<10} {value * 1e6:8.1f} us/step   {value / base:5.2f}x NumPy time")


if __name__ == "__main__":
    main()
