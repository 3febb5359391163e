"""Compile time: scaling with graph size, the MLP's rewriting against PyTensor, and
cold / warm compile-cache times.

The cache table runs every measurement in a new process: "cold" with a fresh, empty
cache directory (tensorjit: TENSORJIT_FLAGS=compiledir=<tmp>; PyTensor:
PYTENSOR_FLAGS=compiledir=<tmp>), "warm" in a second new process with the same
directory. Inside the process it times the import, the ``function(...)`` call alone
(graph building excluded) and the first call. tensorjit uses its C backend
(FAST_RUN.with_backends("c", "python")); PyTensor uses mode="CVM" with its C BLAS linked
to SciPy's OpenBLAS (see _competitors.py). The MLP is the training step built by
``mlp()`` below, the same graph for both libraries.

Run: .venv/bin/pip install -e ".[bench]" && .venv/bin/python benchmarks/compile_time.py
     [--quick] [--only in-process|cache]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def in_process() -> None:
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


# ----------------------------------------------------------- cold / warm compile cache
def child(kind: str, size: int) -> None:
    """Runs in a new process: import, build the graph, time ``function(...)`` and the
    first call; prints one JSON line."""
    result: dict[str, object] = {}
    if kind.startswith("tensorjit"):
        start = time.perf_counter()
        import tensorjit
        import tensorjit.tensor as tt
        from tensorjit.plugins.c_backend.build import compiler

        result["import_s"] = time.perf_counter() - start
        lib, T = tensorjit, tt
        kwargs = {"mode": tensorjit.FAST_RUN.with_backends("c", "python")}
    else:
        from _competitors import setup_pytensor_blas

        setup_pytensor_blas()  # adds blas__ldflags to PYTENSOR_FLAGS (keeps compiledir)
        start = time.perf_counter()
        import pytensor
        import pytensor.tensor as pt

        result["import_s"] = time.perf_counter() - start
        lib, T = pytensor, pt
        kwargs = {"mode": "CVM"}
    if kind.endswith("mlp"):
        ins, outs, updates = mlp(lib, T)
        kwargs["updates"] = updates
        rng = np.random.default_rng(0)
        args = [rng.standard_normal((60, 784)), np.eye(10)[rng.integers(0, 10, 60)]]
    else:
        ins, outs = chain(T, size)
        args = [np.full(3, 0.5)]
    start = time.perf_counter()
    f = lib.function(ins, outs, **kwargs)
    result["function_s"] = time.perf_counter() - start
    start = time.perf_counter()
    f(*args)
    result["first_call_s"] = time.perf_counter() - start
    if kind.startswith("tensorjit"):
        result["cache"] = f"built {compiler.stats['built']}, loaded {compiler.stats['loaded']}"
    else:
        result["cache"] = f"{sum(1 for _ in Path(pytensor.config.compiledir).rglob('*.so'))} .so"
    print(json.dumps(result))


def run_child(kind: str, size: int, cache: str) -> dict:
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    if kind.startswith("tensorjit"):
        env["TENSORJIT_FLAGS"] = f"compiledir={cache}"
    else:
        env["PYTENSOR_FLAGS"] = f"compiledir={cache}"
    proc = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--size", str(size)],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parent,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} {size} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cache_table(quick: bool) -> None:
    cases = [("tensorjit-mlp", 0)]
    try:
        import pytensor  # noqa: F401
    except ImportError as exc:
        print(f"  PyTensor: not installed ({exc})")
    else:
        cases.append(("pytensor-mlp", 0))
    sizes = (100, 1000) if quick else (100, 1000, 5000)
    cases += [("tensorjit-chain", n) for n in sizes]
    print("\ncompile cache, each row two new processes (seconds): cold = empty cache dir,")
    print("warm = the same dir again; fn() = the function(...) call alone; first = first call")
    print(
        f"  {'case':<26}{'cold: import':>13}{'fn()':>8}{'first':>7}"
        f"{'warm: import':>14}{'fn()':>8}{'first':>7}  cache cold -> warm"
    )
    for kind, size in cases:
        with tempfile.TemporaryDirectory(prefix="compile-cache-") as cache:
            cold = run_child(kind, size, cache)
            warm = run_child(kind, size, cache)
        what = {
            "tensorjit-mlp": "tensorjit C, MLP step",
            "pytensor-mlp": "PyTensor CVM, MLP step",
            "tensorjit-chain": f"tensorjit C, chain {size}",
        }[kind]
        line = f"  {what:<26}"
        for r, width in ((cold, 13), (warm, 14)):
            line += f"{r['import_s']:>{width}.2f}{r['function_s']:>8.3f}{r['first_call_s']:>7.3f}"
        print(f"{line}  {cold['cache']} -> {warm['cache']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="cache table: chains 100, 1000")
    parser.add_argument("--only", choices=["in-process", "cache"], default=None)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.size)
        return
    from _competitors import CpuWitness

    witness = CpuWitness()
    if args.only != "cache":
        in_process()
    if args.only != "in-process":
        cache_table(args.quick)
    print(witness.report())


if __name__ == "__main__":
    main()
