"""The OpenCL backend against NumPy and the host C backend, same run, same machine.

- Figure 7 formulae (the paper's elementwise benchmark) at 10^6 and 10^7 elements:
  NumPy, tensorjit's C backend (host arrays in and out) and tensorjit on OpenCL with
  inputs and output on the device (``Out(return_internal_type=True)``, the queue
  finished before the clock stops), as a GPU program keeps its data.
- The paper's MLP SGD step (784-500-10, minibatches of 60): NumPy, the C backend and
  OpenCL, in the two forms users write: a host minibatch passed each step, and the
  tutorials' form, the data set in shared variables sliced by a symbolic index
  (``givens``), which on a device keeps the data set there.
- Compile time of the MLP step on OpenCL: cold (empty kernel caches, a fresh process)
  and warm (the same caches, another fresh process).

Medians of repeats (benchmarks/_timing.py). ``limit_threads(1)`` holds the process to
one core, so the C backend, NumPy and PoCL's kernels all run on one core.

Run: .venv/bin/pip install -e ".[opencl]" && taskset -c 0,1 .venv/bin/python benchmarks/opencl.py
     [--sizes 6,7] [--dtypes float64,float32] [--parts figure7,gemm,mlp,compile]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

from _competitors import limit_threads

limit_threads(1)  # NumPy's BLAS and the C backend: one thread, as in the other benchmarks

import numpy as np  # noqa: E402
from _timing import median_time  # noqa: E402

import tensorjit  # noqa: E402
import tensorjit.tensor as T  # noqa: E402
from tensorjit import Out  # noqa: E402
from tensorjit.core.config import config  # noqa: E402
from tensorjit.tensor import nnet  # noqa: E402
from tensorjit.tensor.type import TensorType  # noqa: E402

FORMULAE = [
    ("a**2 + b**2 + 2*a*b", lambda a, b: a**2 + b**2 + 2 * a * b),
    ("2*a + 3*b", lambda a, b: 2 * a + 3 * b),
    ("a+1", lambda a, b: a + 1),
    ("2*a + b**10", lambda a, b: 2 * a + b**10),
]
C_MODE = tensorjit.FAST_RUN.with_backends("c", "python")


def queue():
    from tensorjit.plugins.opencl_backend.runtime import runtime

    return runtime().queue


def to_device(value):
    from tensorjit.plugins.opencl_backend.arrays import OPENCL_ARRAYS

    return OPENCL_ARRAYS.from_host(value)


def to_host(value):
    from tensorjit.plugins.opencl_backend.arrays import OPENCL_ARRAYS

    return OPENCL_ARRAYS.to_host(value)


def time_three(fn, f_c, f_cl, host_args, device_args) -> tuple[float, float, float]:
    """Medians of NumPy, the C backend and OpenCL (the device's queue finished)."""
    q = queue()

    def on_device():
        f_cl(*device_args)
        q.finish()

    return (
        median_time(lambda: fn(*host_args), 7),
        median_time(lambda: f_c(*host_args), 7),
        median_time(on_device, 7),
    )


def figure7(sizes: list[int], dtypes: list[str]) -> None:
    print("Figure 7 formulae: time per call (ms), medians of 7; ratios of OpenCL's time")
    print(
        f"{'formula':<22} {'dtype':<8} {'n':>5} {'numpy':>8} {'tj-c':>8} {'opencl':>8}"
        f" {'cl/np':>6} {'cl/c':>6}"
    )
    for name, fn in FORMULAE:
        for dtype in dtypes:
            a_sym, b_sym = T.vector("a", dtype=dtype), T.vector("b", dtype=dtype)
            f_c = tensorjit.function(
                [a_sym, b_sym], fn(a_sym, b_sym), mode=C_MODE, on_unused_input="ignore"
            )
            dev = TensorType(dtype, (None,), device="opencl")
            ad, bd = dev("a"), dev("b")
            f_cl = tensorjit.function(
                [ad, bd], Out(fn(ad, bd), return_internal_type=True), on_unused_input="ignore"
            )
            for p in sizes:
                n = 10**p
                rng = np.random.default_rng(0)
                a = rng.uniform(0.5, 1.0, n).astype(dtype)
                b = rng.uniform(0.5, 1.0, n).astype(dtype)
                a_dev, b_dev = to_device(a), to_device(b)
                want = fn(a, b)
                rtol = 1e-5 if dtype == "float32" else 1e-12
                np.testing.assert_allclose(f_c(a, b), want, rtol=rtol)
                np.testing.assert_allclose(to_host(f_cl(a_dev, b_dev)), want, rtol=rtol)
                t_np, t_c, t_cl = time_three(fn, f_c, f_cl, (a, b), (a_dev, b_dev))
                print(
                    f"{name:<22} {dtype:<8} 1e{p:<3} {t_np * 1e3:8.3f} {t_c * 1e3:8.3f} "
                    f"{t_cl * 1e3:8.3f} {t_cl / t_np:6.2f} {t_cl / t_c:6.2f}"
                )


def mlp_step(dtype: str, device: str, form: str, n_examples: int = 6000, batch: int = 60):
    """A compiled MLP SGD step and a callable running step ``i`` of the epoch."""
    rng = np.random.default_rng(0)
    n_in, n_hidden, n_out = 784, 500, 10
    data_x = rng.standard_normal((n_examples, n_in)).astype(dtype)
    data_y = rng.integers(0, n_out, n_examples).astype("int64")
    with config.change_flags(device=device):
        w1 = tensorjit.shared(
            (rng.standard_normal((n_in, n_hidden)) / np.sqrt(n_in)).astype(dtype), name="w1"
        )
        b1 = tensorjit.shared(np.zeros(n_hidden, dtype), name="b1")
        w2 = tensorjit.shared(np.zeros((n_hidden, n_out), dtype), name="w2")
        b2 = tensorjit.shared(np.zeros(n_out, dtype), name="b2")
        params = [w1, b1, w2, b2]
        x, y = T.matrix("x", dtype=dtype), T.lvector("y")
        p_y = nnet.softmax(T.dot(T.tanh(T.dot(x, w1) + b1), w2) + b2)
        cost = nnet.categorical_crossentropy(p_y, y).mean()
        grads = tensorjit.grad(cost, params)
        lr = np.asarray(0.1, dtype)
        updates = [(p, p - lr * g) for p, g in zip(params, grads)]
        mode = C_MODE if device == "cpu" else tensorjit.FAST_RUN
        if form == "minibatch":
            train = tensorjit.function([x, y], cost, updates=updates, mode=mode)
            return lambda i: train(
                data_x[i * batch : (i + 1) * batch], data_y[i * batch : (i + 1) * batch]
            )
        sx = tensorjit.shared(data_x, name="data_x")
        sy = tensorjit.shared(data_y, name="data_y")
        index = T.lscalar("index")
        givens = {
            x: sx[index * batch : (index + 1) * batch],
            y: sy[index * batch : (index + 1) * batch],
        }
        train = tensorjit.function([index], cost, updates=updates, givens=givens, mode=mode)
        return train


def mlp_numpy(dtype: str, n_examples: int = 6000, batch: int = 60):
    rng = np.random.default_rng(0)
    n_in, n_hidden, n_out = 784, 500, 10
    data_x = rng.standard_normal((n_examples, n_in)).astype(dtype)
    data_y = rng.integers(0, n_out, n_examples)
    w1 = (rng.standard_normal((n_in, n_hidden)) / np.sqrt(n_in)).astype(dtype)
    b1, w2, b2 = (
        np.zeros(n_hidden, dtype),
        np.zeros((n_hidden, n_out), dtype),
        np.zeros(n_out, dtype),
    )
    lr = np.asarray(0.1, dtype)

    def step(i):
        nonlocal w1, b1, w2, b2
        xb, yb = data_x[i * batch : (i + 1) * batch], data_y[i * batch : (i + 1) * batch]
        h = np.tanh(xb @ w1 + b1)
        z = h @ w2 + b2
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        cost = -np.log(p[np.arange(batch), yb]).mean()
        gz = p.copy()
        gz[np.arange(batch), yb] -= 1
        gz /= batch
        gh = (gz @ w2.T) * (1 - h * h)
        w2 = w2 - lr * (h.T @ gz)
        b2 = b2 - lr * gz.sum(axis=0)
        w1 = w1 - lr * (xb.T @ gh)
        b1 = b1 - lr * gh.sum(axis=0)
        return cost

    return step


def time_steps(step) -> float:
    """Median time of one step (its cost fetched to the host: the whole step ran)."""
    counter = iter(range(10**9))
    q = queue()

    def run():
        float(step(next(counter) % 100))
        q.finish()

    return median_time(run, 7, inner=20)


def mlp(dtypes: list[str]) -> None:
    print("MLP SGD step 784-500-10, minibatch 60: time per step (ms), median of 7 x 20 steps")
    for dtype in dtypes:
        rows = {"numpy": mlp_numpy(dtype)}
        for device in ("cpu", "opencl"):
            for form in ("minibatch", "givens"):
                rows[f"{'tj-c' if device == 'cpu' else 'opencl'} {form}"] = mlp_step(
                    dtype, device, form
                )
        times = {label: time_steps(step) for label, step in rows.items()}
        base = times["numpy"]
        for label, t in times.items():
            print(f"  {dtype:<8} {label:<20} {t * 1e3:8.3f} ms   {t / base:5.2f}x NumPy time")


COMPILE_SCRIPT = """
import time, numpy as np, tensorjit, tensorjit.tensor as T
from tensorjit.tensor import nnet
from tensorjit.core.config import config
rng = np.random.default_rng(0)
with config.change_flags(device="opencl"):
    w1 = tensorjit.shared(rng.standard_normal((784, 500)) / 28, name="w1")
    b1 = tensorjit.shared(np.zeros(500), name="b1")
    w2 = tensorjit.shared(np.zeros((500, 10)), name="w2")
    b2 = tensorjit.shared(np.zeros(10), name="b2")
    x, y = T.matrix("x"), T.lvector("y")
    p = nnet.softmax(T.dot(T.tanh(T.dot(x, w1) + b1), w2) + b2)
    cost = nnet.categorical_crossentropy(p, y).mean()
    params = [w1, b1, w2, b2]
    grads = tensorjit.grad(cost, params)
    start = time.perf_counter()
    f = tensorjit.function([x, y], cost, updates=[(v, v - 0.1 * g) for v, g in zip(params, grads)])
    f(rng.standard_normal((60, 784)), rng.integers(0, 10, 60))
    print(time.perf_counter() - start)
"""


def compile_time() -> None:
    print("MLP step on OpenCL: compile + first call (s), fresh process each")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, XDG_CACHE_HOME=cache)  # pyopencl's and tensorjit's caches
        for label in ("cold (empty caches)", "warm (caches kept)", "warm again"):
            out = subprocess.run(
                [sys.executable, "-c", COMPILE_SCRIPT], env=env, capture_output=True, text=True
            )
            if out.returncode:
                raise SystemExit(out.stderr[-3000:])
            print(f"  {label:<22} {float(out.stdout.split()[-1]):7.2f} s")


def gemm(dtypes: list[str]) -> None:
    print("GEMM (dot of two matrices on the device): GFLOP/s, medians of 7")
    for dtype in dtypes:
        for m, k, n in ((500, 784, 500), (1000, 1000, 1000), (60, 784, 500)):
            rng = np.random.default_rng(0)
            a, b = (
                rng.standard_normal((m, k)).astype(dtype),
                rng.standard_normal((k, n)).astype(dtype),
            )
            dev = TensorType(dtype, (None, None), device="opencl")
            x, y = dev("x"), dev("y")
            f = tensorjit.function([x, y], Out(T.dot(x, y), return_internal_type=True))
            ad, bd = to_device(a), to_device(b)
            tol = 1e-3 if dtype == "float32" else 1e-9
            np.testing.assert_allclose(to_host(f(ad, bd)), a @ b, rtol=tol, atol=tol)
            t_np, _, t_cl = time_three(lambda u, v: u @ v, lambda u, v: None, f, (a, b), (ad, bd))
            flops = 2 * m * k * n
            print(
                f"  {dtype:<8} {m}x{k}x{n:<5} opencl {flops / t_cl / 1e9:6.1f}   "
                f"numpy {flops / t_np / 1e9:6.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="6,7")
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--parts", default="figure7,gemm,mlp,compile")
    args = parser.parse_args()
    from tensorjit.plugins.opencl_backend.runtime import describe_devices

    print("OpenCL devices:", *describe_devices(), sep="\n  ")
    dtypes, parts = args.dtypes.split(","), args.parts.split(",")
    if "figure7" in parts:
        figure7([int(s) for s in args.sizes.split(",")], dtypes)
    if "gemm" in parts:
        gemm(dtypes)
    if "mlp" in parts:
        mlp(dtypes)
    if "compile" in parts:
        compile_time()


if __name__ == "__main__":
    main()
