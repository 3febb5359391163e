"""Compile time: scaling with graph size, and the MLP's rewriting against PyTensor.

Run: .venv/bin/pip install -e ".[bench]" && .venv/bin/python benchmarks/compile_time.py
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np


def best_of(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def chain(T, n: int):
    x = T.vector("x")
    y = x
    for i in range(n):
        y = T.tanh(y) if i % 3 == 0 else (y * 1.0001 + 0.5 if i % 3 == 1 else T.exp(-y))
    return [x], [y]


def random_dag(T, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    inputs = [T.vector(f"x{i}") for i in range(8)]
    pool = list(inputs)
    for _ in range(n):
        kind = rng.integers(0, 4)
        a = pool[rng.integers(0, len(pool))]
        b = pool[rng.integers(0, len(pool))]
        if kind == 0:
            pool.append(a + b)
        elif kind == 1:
            pool.append(a * b)
        elif kind == 2:
            pool.append(T.tanh(a))
        else:
            pool.append(a - b * 0.5)
    outputs = pool[-5:]
    return inputs, outputs


def mlp(lib, T, softmax=None):
    """The paper's MLP (784 -> 500 tanh -> 10 softmax) training step, one-hot targets."""
    rng = np.random.default_rng(0)
    x, y = T.matrix("x"), T.matrix("y")
    w1 = lib.shared(rng.standard_normal((784, 500)) * 0.01, name="w1")
    b1 = lib.shared(np.zeros(500), name="b1")
    w2 = lib.shared(rng.standard_normal((500, 10)) * 0.01, name="w2")
    b2 = lib.shared(np.zeros(10), name="b2")
    h = T.tanh(T.dot(x, w1) + b1)
    z = T.dot(h, w2) + b2
    e = T.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    cost = -(y * T.log(p)).sum(axis=1).mean()
    params = [w1, b1, w2, b2]
    grads = lib.grad(cost, params)
    updates = [(v, v - 0.01 * g) for v, g in zip(params, grads)]
    return [x, y], [cost], updates


def count_nodes(outputs) -> int:
    from tensorjit.core.graph import toposort

    return len(toposort(outputs))


def main() -> None:
    import tensorjit
    import tensorjit.tensor as tt

    print(f"Python {sys.version.split()[0]}; compile time, best of 3 (seconds)")
    print("elementwise chains (full compile: rewrite + link):")
    times = {}
    for n in (500, 1000, 5000):
        ins, outs = chain(tt, n)
        times[n] = best_of(lambda: tensorjit.function(ins, outs))  # noqa: B023
        print(f"  {n:>5} ops: {times[n]:.3f} s")
    print(f"  t(5000) / t(500) = {times[5000] / times[500]:.1f} (linear would be 10)")
    ins, outs = random_dag(tt, 1000)
    dag = best_of(lambda: tensorjit.function(ins, outs, on_unused_input="ignore"))
    print(f"random DAG of 1000 nodes: {dag:.3f} s")

    limit = sys.getrecursionlimit()
    ins, outs = chain(tt, 10000)
    f = tensorjit.function(ins, outs)
    f(np.ones(3))
    print(f"chain of 10000 ops compiled and ran at the default recursion limit ({limit})")

    ins, outs, updates = mlp(tensorjit, tt)
    upd_vals = [u for _, u in updates]
    before = count_nodes(outs + upd_vals)
    rewrite_times = []
    for _ in range(3):
        f = tensorjit.function(ins, outs, updates=updates)
        rewrite_times.append(sum(f.profile.phase_seconds.values()))
    after = len(f.fgraph.apply_nodes)
    ours = min(rewrite_times)
    print(f"MLP training step: {before} nodes before rewriting, {after} after (FAST_RUN)")
    print(
        f"  tensorjit FAST_RUN rewriting: {ours:.4f} s (median "
        f"{statistics.median(rewrite_times):.4f})"
    )

    x, y = tt.matrix("x"), tt.lvector("y")
    w = tensorjit.shared(np.zeros(784), name="w")
    b = tensorjit.shared(0.0, name="b")
    p = 1 / (1 + tt.exp(-tt.dot(x, w) - b))
    xent = -y * tt.log(p) - (1 - y) * tt.log(1 - p)
    cost = xent.mean() + 0.01 * (w**2).sum()
    gw, gb = tensorjit.grad(cost, [w, b])
    lr_outs = [p > 0.5, xent.mean(), w - 0.1 * gw, b - 0.1 * gb]
    f = tensorjit.function(
        [x, y], [p > 0.5, xent.mean()], updates={w: w - 0.1 * gw, b: b - 0.1 * gb}
    )
    print(
        f"logistic regression step: {count_nodes(lr_outs)} nodes before rewriting, "
        f"{len(f.fgraph.apply_nodes)} after"
    )

    try:
        import pytensor
        import pytensor.tensor as pt
        from pytensor.compile.aliasing import add_supervisor_to_fgraph
        from pytensor.compile.io import In
        from pytensor.compile.mode import get_mode
        from pytensor.graph.fg import FunctionGraph
    except ImportError as exc:
        print(f"  PyTensor: not installed ({exc})")
        return
    pins, pouts, pupdates = mlp(pytensor, pt)
    outputs = list(pouts) + [u for _, u in pupdates]
    shared_inputs = [v for v, _ in pupdates]
    rewriter = get_mode("FAST_RUN").optimizer
    theirs = []
    for _ in range(3):
        fg = FunctionGraph(pins + shared_inputs, outputs, clone=True)
        specs = [In(v) for v in pins] + [In(v, mutable=True) for v in shared_inputs]
        add_supervisor_to_fgraph(fg, specs)  # as pytensor.function does before rewriting
        start = time.perf_counter()
        rewriter.rewrite(fg)
        theirs.append(time.perf_counter() - start)
    print(
        f"  PyTensor {pytensor.__version__} FAST_RUN rewriting: {min(theirs):.4f} s; "
        f"tensorjit takes {ours / min(theirs):.2f}x PyTensor's time"
    )


if __name__ == "__main__":
    main()
