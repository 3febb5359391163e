"""A small RNN (forward + gradient through time): tensorjit ``scan`` vs NumPy vs PyTensor.

Run: .venv/bin/pip install -e ".[bench]" && .venv/bin/python benchmarks/scan_rnn.py
``h[t] = tanh(x[t] @ W + h[t-1] @ U + b)``, cost ``sum(h**2)``, gradients w.r.t.
``W, U, b, h0``. Prints the median time per forward+gradient evaluation and the ratio to
the hand-written NumPy loop (forward, then backpropagation through time).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _timing import median_time


def numpy_rnn(X, h0, W, U, b):
    n, hidden = X.shape[0], h0.shape[0]
    H = np.empty((n + 1, hidden))
    H[0] = h0
    for t in range(n):
        H[t + 1] = np.tanh(X[t] @ W + H[t] @ U + b)
    cost = (H[1:] ** 2).sum()
    gW, gU, gb = np.zeros_like(W), np.zeros_like(U), np.zeros_like(b)
    dh = np.zeros(hidden)
    for t in range(n - 1, -1, -1):
        dh = dh + 2 * H[t + 1]
        dz = dh * (1 - H[t + 1] ** 2)
        gW += np.outer(X[t], dz)
        gU += np.outer(H[t], dz)
        gb += dz
        dh = U @ dz
    return cost, gW, gU, gb, dh


def tensorjit_rnn():
    import tensorjit
    import tensorjit.tensor as T
    from tensorjit.scan import scan

    X, W, U = T.matrix("X"), T.matrix("W"), T.matrix("U")
    h0, b = T.vector("h0"), T.vector("b")
    hs, _ = scan(
        lambda xt, h, W, U, b: T.tanh(T.dot(xt, W) + T.dot(h, U) + b),
        sequences=[X],
        outputs_info=[h0],
        non_sequences=[W, U, b],
    )
    cost = (hs**2).sum()
    return tensorjit.function([X, h0, W, U, b], [cost, *tensorjit.grad(cost, [W, U, b, h0])])


def pytensor_rnn():
    import pytensor
    import pytensor.tensor as pt

    X, W, U = pt.matrix("X"), pt.matrix("W"), pt.matrix("U")
    h0, b = pt.vector("h0"), pt.vector("b")
    hs, _ = pytensor.scan(
        lambda xt, h, W, U, b: pt.tanh(pt.dot(xt, W) + pt.dot(h, U) + b),
        sequences=[X],
        outputs_info=[h0],
        non_sequences=[W, U, b],
    )
    cost = (hs**2).sum()
    return pytensor.function([X, h0, W, U, b], [cost, *pytensor.grad(cost, [W, U, b, h0])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--inputs", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.steps, args.inputs))
    h0 = rng.normal(size=args.hidden)
    W = rng.normal(size=(args.inputs, args.hidden)) / np.sqrt(args.inputs)
    U = 0.9 * rng.normal(size=(args.hidden, args.hidden)) / np.sqrt(args.hidden)
    b = rng.normal(size=args.hidden) * 0.1
    vals = (X, h0, W, U, b)

    ref = numpy_rnn(*vals)
    results = {"numpy (hand-written BPTT)": median_time(lambda: numpy_rnn(*vals), args.repeats, 0)}

    start = time.perf_counter()
    f = tensorjit_rnn()
    got = f(*vals)
    compile_s = time.perf_counter() - start
    for a, r in zip(got, ref):
        np.testing.assert_allclose(a, r, rtol=1e-8, atol=1e-10)
    results["tensorjit scan"] = median_time(lambda: f(*vals), args.repeats, 0)

    try:
        g = pytensor_rnn()
    except ImportError as exc:
        results["pytensor scan"] = f"not installed ({exc})"
    else:
        for a, r in zip(g(*vals), ref):
            np.testing.assert_allclose(a, r, rtol=1e-8, atol=1e-10)
        results["pytensor scan"] = median_time(lambda: g(*vals), args.repeats, 0)

    base = results["numpy (hand-written BPTT)"]
    print(
        f"RNN forward+grad: {args.steps} steps, {args.hidden} hidden, {args.inputs} inputs; "
        f"median of {args.repeats} (tensorjit build+compile+first call {compile_s:.2f} s)"
    )
    for label, value in results.items():
        if isinstance(value, str):
            print(f"  {label:28s} {value}")
        else:
            print(f"  {label:28s} {value * 1e3:9.2f} ms   {value / base:6.2f}x numpy")


if __name__ == "__main__":
    main()
