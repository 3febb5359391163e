"""The Theano paper's MLP benchmark: one SGD step of 784 -> 500 tanh -> 10 softmax.

Minibatches of 60, mean categorical cross-entropy, SGD (learning rate 0.1) on shared
w1, b1, w2, b2 updated by the compiled function. Prints examples per second for
hand-written NumPy, tensorjit (C backend and default mode), PyTensor (default mode:
Numba in PyTensor 3; and mode="CVM", its C backend, with its C BLAS linked through a
forwarding library to the OpenBLAS tensorjit calls, NumPy's bundled one, see
_competitors.py) and JAX (jax.jit), for float64 and float32. Times are medians of
samples taken round-robin (one sample of each implementation per round, each after
--settle seconds untimed), same data, same run; the process is held to --threads cores.

"bound" is the time of the step's five matrix products alone through NumPy's BLAS (the
one tensorjit calls: see config ``blas``) (x@w1, h@w2, h.T@gz, gz@w2.T, x.T@gh);
"% bound" is bound time / the implementation's
time. Every implementation's first-step loss is checked against NumPy's before timing.
A competitor that is not installed is reported as such. --impls keeps only the named
implementations (groups or row names, by prefix).

Run: .venv/bin/pip install -e ".[bench]" && .venv/bin/python benchmarks/mlp_sgd.py
     [--threads 1] [--dtypes float64,float32] [--impls numpy,tensorjit,pytensor,jax]
     [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
import warnings
from collections import Counter

from _competitors import (
    CpuWitness,
    forwarder_loaded,
    limit_threads,
    pytensor_blas_nodes,
    setup_pytensor_blas,
    thread_report,
    threads_from_argv,
    whole_graph_program,
)

limit_threads(threads_from_argv())  # before NumPy loads OpenBLAS
PYTENSOR_BLAS = setup_pytensor_blas()  # before PyTensor is imported

import numpy as np  # noqa: E402
from _mlp_bound import five_gemms  # noqa: E402
from _timing import median_time  # noqa: E402

N_IN, N_HIDDEN, N_OUT, BATCH, LR = 784, 500, 10, 60, 0.1
N_BATCHES = 20  # the step cycles through these minibatches


def make_problem(dtype: str, seed: int = 0):
    """Minibatches (inputs normal, labels from a random teacher network) and the initial
    parameters (Glorot-uniform w1, small random w2, zero biases)."""
    rng = np.random.default_rng(seed)
    n = N_BATCHES * BATCH
    x = rng.standard_normal((n, N_IN))
    teacher1 = rng.standard_normal((N_IN, N_HIDDEN)) / np.sqrt(N_IN)
    teacher2 = rng.standard_normal((N_HIDDEN, N_OUT)) / np.sqrt(N_HIDDEN)
    y = np.argmax(np.tanh(x @ teacher1) @ teacher2, axis=1).astype(np.int64)
    bound = np.sqrt(6.0 / (N_IN + N_HIDDEN))
    params = [
        rng.uniform(-bound, bound, (N_IN, N_HIDDEN)),
        np.zeros(N_HIDDEN),
        rng.uniform(-0.05, 0.05, (N_HIDDEN, N_OUT)),
        np.zeros(N_OUT),
    ]
    batches = [
        (
            np.ascontiguousarray(x[i * BATCH : (i + 1) * BATCH], dtype=dtype),
            y[i * BATCH : (i + 1) * BATCH],
        )
        for i in range(N_BATCHES)
    ]
    return batches, [p.astype(dtype) for p in params]


def cycling(batches, train):
    """A step that trains on the next minibatch (round robin) and returns the loss."""
    it = itertools.cycle(batches)

    def step():
        x, y = next(it)
        return train(x, y)

    return step


# ------------------------------------------------------------------------------ NumPy
def numpy_train(params0, dtype):
    """Forward and backward written out; products into kept buffers, in-place updates.
    The output gradient is scaled by lr/n first, so every later gradient is already the
    update."""
    w1, b1, w2, b2 = (p.copy() for p in params0)
    h = np.empty((BATCH, N_HIDDEN), dtype)
    gh = np.empty((BATCH, N_HIDDEN), dtype)
    tmp = np.empty((BATCH, N_HIDDEN), dtype)
    gw1 = np.empty((N_IN, N_HIDDEN), dtype)
    gw2 = np.empty((N_HIDDEN, N_OUT), dtype)
    rows = np.arange(BATCH)
    scale = np.asarray(LR / BATCH, dtype)

    def train(x, y):
        np.matmul(x, w1, out=h)
        np.add(h, b1, out=h)
        np.tanh(h, out=h)
        z = h @ w2
        z += b2
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        s = e.sum(axis=1)
        loss = np.mean(np.log(s) - z[rows, y])
        e /= s[:, None]  # softmax
        e[rows, y] -= 1
        e *= scale  # lr * d(loss)/dz
        np.matmul(e, w2.T, out=gh)
        np.multiply(h, h, out=tmp)
        np.subtract(1, tmp, out=tmp)
        np.multiply(gh, tmp, out=gh)
        np.matmul(h.T, e, out=gw2)
        np.subtract(w2, gw2, out=w2)
        np.subtract(b2, e.sum(axis=0), out=b2)
        np.matmul(x.T, gh, out=gw1)
        np.subtract(w1, gw1, out=w1)
        np.subtract(b1, gh.sum(axis=0), out=b1)
        return loss

    return train


def gemm_bound(batches, params0, dtype):
    """Only the step's five matrix products, into kept buffers (NumPy's BLAS)."""
    w1, _, w2, _ = params0
    return five_gemms(batches[0][0], w1, w2)


# ------------------------------------------------------- tensorjit / PyTensor (symbolic)
def tensorjit_train(params0, dtype, mode):
    import tensorjit
    import tensorjit.tensor as T
    from tensorjit.tensor import nnet

    x, y = T.matrix("x", dtype=dtype), T.lvector("y")
    params = [tensorjit.shared(p.copy(), name=n) for p, n in zip(params0, ["w1", "b1", "w2", "b2"])]
    w1, b1, w2, b2 = params
    hidden = T.tanh(T.dot(x, w1) + b1)
    p_y = nnet.softmax(T.dot(hidden, w2) + b2)
    cost = nnet.categorical_crossentropy(p_y, y).mean()
    grads = tensorjit.grad(cost, params)
    lr = np.asarray(LR, dtype)
    kwargs = {} if mode is None else {"mode": mode}
    return tensorjit.function(
        [x, y], cost, updates=[(p, p - lr * g) for p, g in zip(params, grads)], **kwargs
    )


def pytensor_train(params0, dtype, mode):
    import pytensor
    import pytensor.tensor as pt
    from pytensor.tensor.special import softmax

    x, y = pt.matrix("x", dtype=dtype), pt.lvector("y")
    params = [pytensor.shared(p.copy(), name=n) for p, n in zip(params0, ["w1", "b1", "w2", "b2"])]
    w1, b1, w2, b2 = params
    hidden = pt.tanh(pt.dot(x, w1) + b1)
    p_y = softmax(pt.dot(hidden, w2) + b2, axis=-1)
    cost = -pt.log(p_y)[pt.arange(y.shape[0]), y].mean()
    grads = pytensor.grad(cost, params)
    lr = np.asarray(LR, dtype)
    return pytensor.function(
        [x, y], cost, updates=[(p, p - lr * g) for p, g in zip(params, grads)], mode=mode
    )


# -------------------------------------------------------------------------------- JAX
def jax_train(params0, batches):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)  # float64 arrays stay float64

    def loss_fn(params, x, y):
        w1, b1, w2, b2 = params
        hidden = jnp.tanh(x @ w1 + b1)
        logp = jax.nn.log_softmax(hidden @ w2 + b2, axis=1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def update(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return [p - LR * g for p, g in zip(params, grads)], loss

    compiled = jax.jit(update, donate_argnums=0)
    state = [[jnp.asarray(p) for p in params0]]
    device_batches = [(jnp.asarray(x), jnp.asarray(y)) for x, y in batches]

    def train(x, y):
        state[0], loss = compiled(state[0], x, y)
        return loss.block_until_ready()

    return train, device_batches, jax.__version__


# ------------------------------------------------------------------------------- main
def settle(step, seconds: float) -> None:
    """Run ``step`` untimed for a while. NumPy and SciPy (tensorjit's and PyTensor's C
    BLAS) each bring their own OpenBLAS; with 2+ threads, the pool used last keeps
    spinning for ~0.1 s and halves the speed of the other one."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        step()


def run_dtype(dtype: str, args) -> None:
    batches, params0 = make_problem(dtype)
    rtol = 1e-9 if dtype == "float64" else 1e-4
    rows: list[tuple[str, object]] = []  # (name, step to time, or why there is none)
    notes: list[str] = []
    reference = float(numpy_train(params0, dtype)(*batches[0]))

    wanted = tuple(p.strip() for p in args.impls.split(","))

    def want(name: str) -> bool:  # a group ("tensorjit") or a row ("tensorjit C")
        return any(name.startswith(w) or w.startswith(name) for w in wanted)

    def timed(name: str, train, data=batches) -> None:
        first = float(train(*data[0]))
        if not np.isclose(first, reference, rtol=rtol, atol=0):
            raise AssertionError(f"{name}: first-step loss {first!r} != NumPy's {reference!r}")
        rows.append((name, cycling(data[1:], train)))

    if want("numpy"):
        timed("numpy (hand-written)", numpy_train(params0, dtype))

    if want("tensorjit"):
        import tensorjit

        c_mode = tensorjit.FAST_RUN.with_backends("c", "python")
        for name, mode in [("tensorjit C", c_mode), ("tensorjit default", None)]:
            if not want(name):
                continue
            start = time.perf_counter()
            fn = tensorjit_train(params0, dtype, mode)
            elapsed = time.perf_counter() - start
            backends = Counter(getattr(k, "backend", "?") for k in fn.kernels.values())
            kinds = ", ".join(f"{n} {b}" for b, n in backends.most_common())
            whole = whole_graph_program(fn) is not None
            runs = "one whole-graph C program" if whole else "per-node VM"
            notes.append(f"{name}: compiled in {elapsed:.2f} s; node kernels: {kinds}; {runs}")
            timed(name, fn)

    try:
        import pytensor  # noqa: F401
    except ImportError as exc:
        rows.append(("pytensor", f"not installed ({exc})"))
    else:
        for name, mode in [("pytensor default", None), ("pytensor CVM", "CVM")]:
            if not want(name):
                continue
            try:
                start = time.perf_counter()
                fn = pytensor_train(params0, dtype, mode)
            except Exception as exc:  # e.g. default mode needs numba
                rows.append((name, f"unavailable ({type(exc).__name__}: {exc})"[:160]))
                continue
            linker = type(fn.maker.linker).__name__
            notes.append(f"{name}: {linker}, compiled in {time.perf_counter() - start:.2f} s")
            timed(name, fn)
            if mode == "CVM":
                blas = ", ".join(pytensor_blas_nodes(fn)) or "none"
                notes.append(
                    f"pytensor CVM product nodes: {blas}; forwarder loaded: {forwarder_loaded()}"
                )

    try:
        import jax  # noqa: F401
    except ImportError as exc:
        rows.append(("jax", f"not installed ({exc})"))
    else:
        if want("jax"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # donation warnings, if any
                train, device_batches, version = jax_train(params0, batches)
                timed(f"jax {version} jit", train, device_batches)

    # Samples taken round-robin (one of each implementation per round), so a slow spell
    # of this shared machine hits them all alike; the median per implementation.
    steps = {"bound": gemm_bound(batches, params0, dtype)}
    steps.update((name, step) for name, step in rows if callable(step))
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, step in steps.items():
            settle(step, args.settle)
            samples[name].append(median_time(step, 1, args.budget))
    times = {name: statistics.median(values) for name, values in samples.items()}
    bound = times["bound"]
    print(f"\n{dtype}: first-step loss {reference:.6f} (all implementations agree)")
    print(f"  {'implementation':<24}{'ms/step':>10}{'examples/s':>13}{'% bound':>10}")
    print(f"  {'bound (5 GEMMs, NumPy)':<24}{bound * 1e3:>10.3f}{BATCH / bound:>13.0f}{100:>9.0f}%")
    for name, value in rows:
        if isinstance(value, str):
            print(f"  {name:<24}{value}")
        else:
            value = times[name]
            pct = 100 * bound / value
            print(f"  {name:<24}{value * 1e3:>10.3f}{BATCH / value:>13.0f}{pct:>9.0f}%")
    for note in notes:
        print(f"  - {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP/XLA threads")
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--impls", default="numpy,tensorjit,pytensor,jax", help="prefixes")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--budget", type=float, default=0.2, help="seconds per timing sample")
    parser.add_argument(
        "--settle", type=float, default=0.15, help="untimed seconds before each sample"
    )
    parser.add_argument("--quick", action="store_true", help="3 repeats of 0.05 s")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.budget, args.settle = 3, 0.05, 0.05
    import scipy

    witness = CpuWitness()

    print(
        f"MLP {N_IN}-{N_HIDDEN}-{N_OUT} SGD step, minibatch {BATCH}; Python "
        f"{sys.version.split()[0]}, NumPy {np.__version__}, SciPy {scipy.__version__}; "
        f"--threads {args.threads}; median of {args.repeats} round-robin samples of "
        f"~{args.budget} s"
    )
    print(f"PyTensor C BLAS: {PYTENSOR_BLAS}")
    for dtype in args.dtypes.split(","):
        run_dtype(dtype.strip(), args)
    print(f"\nthread pools: {thread_report()}")
    print(witness.report())
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}")


if __name__ == "__main__":
    main()
