"""The CUDA backend against CuPy and JAX, same run, same GPU.

Needs a machine with an NVIDIA GPU, pycuda (the ``cuda`` extra), CuPy and JAX; see
benchmarks/cuda_session.sh for a GPU machine without a package registry.

- Copy bandwidth of the device, measured here (CuPy's device-to-device copy of 10^8
  float32), the bound the elementwise formulae are held to (bytes read + written).
- Figure 7 formulae at 10^6..10^8 elements, inputs and output on the device
  (``Out(return_internal_type=True)``), the device synchronised before the clock
  stops: tensorjit, CuPy (its fused elementwise kernel), JAX (jit); the achieved
  fraction of copy bandwidth.
- The paper's MLP SGD step in float32: 784-500-10 with minibatches of 60, and a
  4096-wide variant (4096-4096-10, minibatches of 512): tensorjit (the data set in
  shared variables sliced by a symbolic index, as the tutorials write it), a
  hand-written CuPy step, and JAX (jit, parameters kept on the device).
- Reductions: the full sum of 10^8 float32 and softmax over the rows of a 4096x4096
  float32 matrix, against CuPy, JAX and PyTorch; fraction of copy bandwidth.
- The paper's MLP SGD step in float32 also in PyTorch (eager), the hand-written step.
- Call overhead (a+1 on 10 elements, device in and out) against CuPy, JAX and PyTorch,
  and compile time of the MLP step (fresh process, cold and warm caches).
- Agreement: MRG31k3p uniforms on the device against the host's stream (bit for bit);
  the examples (logistic regression, MLP) trained on the device with
  ``assert_no_cpu_op=raise`` against the C backend's losses; the float32 MLP step's
  costs on both.

Run (on the GPU machine): python benchmarks/cuda_rivals.py
    [--parts copy,figure7,reductions,mlp,overhead,mrg,examples,compile]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
from _timing import median_time

import tensorjit
import tensorjit.tensor as T
from tensorjit import Out
from tensorjit.core.config import config
from tensorjit.tensor import nnet
from tensorjit.tensor.type import TensorType

FORMULAE = [
    ("a**2 + b**2 + 2*a*b", lambda a, b: a**2 + b**2 + 2 * a * b, 3),
    ("2*a + 3*b", lambda a, b: 2 * a + 3 * b, 3),
    ("a+1", lambda a, b: a + 1, 2),
    ("2*a + b**10", lambda a, b: 2 * a + b**10, 3),
]  # (name, function, arrays moved: read + written)


def sync() -> None:
    from tensorjit.plugins.cuda_backend.runtime import runtime

    runtime().synchronize()


def device(value):
    from tensorjit.plugins.cuda_backend.arrays import CUDA_ARRAYS

    return CUDA_ARRAYS.from_host(np.asarray(value))


def host(value):
    from tensorjit.plugins.cuda_backend.arrays import CUDA_ARRAYS

    return CUDA_ARRAYS.to_host(value)


def timed_until(wait, step, *args, inner: int = 20) -> float:
    """Median time of ``step(*args)`` followed by ``wait()`` (the library's device
    synchronisation: its kernels run asynchronously)."""

    def run():
        step(*args)
        wait()

    return median_time(run, 7, inner=inner)


def timed(step, *args, inner: int = 20) -> float:
    """On tensorjit's device."""
    return timed_until(sync, step, *args, inner=inner)


def timed_cupy(step, *args) -> float:
    import cupy

    return timed_until(cupy.cuda.Device().synchronize, step, *args)


def timed_jax(step, *args) -> float:
    return median_time(lambda: step(*args).block_until_ready(), 7, inner=20)


def timed_torch(step, *args, inner: int = 20) -> float:
    import torch

    return timed_until(torch.cuda.synchronize, step, *args, inner=inner)


def copy_bandwidth() -> float:
    import cupy

    n = 10**8
    a = cupy.ones(n, cupy.float32)
    b = cupy.empty_like(a)

    def run():
        b[...] = a
        cupy.cuda.Device().synchronize()

    t = median_time(run, 7, inner=10)
    bandwidth = 2 * a.nbytes / t
    print(f"copy bandwidth (CuPy, 10^8 float32, read + write): {bandwidth / 1e9:.0f} GB/s")
    return bandwidth


def figure7(bandwidth: float, dtype: str = "float32") -> None:
    import cupy
    import jax
    import jax.numpy as jnp

    print(f"Figure 7 formulae, {dtype}: time per call (ms), medians; fraction of copy bandwidth")
    print(f"{'formula':<22} {'n':>5} {'tj':>8} {'cupy':>8} {'jax':>8} {'tj bw':>6}")
    for name, fn, moved in FORMULAE:
        dev = TensorType(dtype, (None,), device="cuda")
        ad, bd = dev("a"), dev("b")
        f = tensorjit.function(
            [ad, bd], Out(fn(ad, bd), return_internal_type=True), on_unused_input="ignore"
        )
        fused = cupy.fuse(fn)
        jitted = jax.jit(fn)
        for p in (6, 7, 8):
            n = 10**p
            rng = np.random.default_rng(0)
            a = rng.uniform(0.5, 1.0, n).astype(dtype)
            b = rng.uniform(0.5, 1.0, n).astype(dtype)
            a_dev, b_dev = device(a), device(b)
            np.testing.assert_allclose(host(f(a_dev, b_dev)), fn(a, b), rtol=1e-5)
            a_cp, b_cp = cupy.asarray(a), cupy.asarray(b)
            a_jx, b_jx = jnp.asarray(a), jnp.asarray(b)
            t_tj = timed(f, a_dev, b_dev)
            t_cp = timed_cupy(fused, a_cp, b_cp)
            t_jx = timed_jax(jitted, a_jx, b_jx)
            fraction = moved * a.nbytes / t_tj / bandwidth
            print(
                f"{name:<22} 1e{p:<3} {t_tj * 1e3:8.3f} {t_cp * 1e3:8.3f} {t_jx * 1e3:8.3f} "
                f"{fraction:6.2f}"
            )


def reductions(bandwidth: float) -> None:
    """Bandwidth-bound reductions: a full sum (reads 10^8 floats) and row softmax (reads
    and writes a 4096x4096 matrix)."""
    import cupy
    import jax
    import jax.numpy as jnp
    import torch

    print("Reductions, float32: time per call (ms), medians; fraction of copy bandwidth")
    print(f"{'reduction':<26} {'tj':>8} {'cupy':>8} {'jax':>8} {'torch':>8} {'tj bw':>6}")

    def cupy_softmax(v):
        e = cupy.exp(v - v.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def numpy_softmax(v):
        e = np.exp(v - v.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def total(v):
        return v.sum()

    cases = [  # name, shape, tensorjit, cupy, jax, pytorch, reference, arrays moved
        ("sum of 10^8", (10**8,), total, total, jax.jit(total), total, total, 1),
        (
            "softmax rows 4096x4096",
            (4096, 4096),
            nnet.softmax,
            cupy_softmax,
            jax.jit(lambda v: jax.nn.softmax(v, axis=-1)),
            lambda v: torch.softmax(v, dim=-1),
            numpy_softmax,
            2,
        ),
    ]
    rng = np.random.default_rng(0)
    for name, shape, tj_fn, cp_fn, jx_fn, th_fn, reference, moved in cases:
        # positive values: the sum's check then has no cancellation to hide a lost block
        value = rng.uniform(0.5, 1.0, shape).astype("float32")
        want = reference(value.astype("float64"))
        x = TensorType("float32", (None,) * len(shape), device="cuda")("x")
        graph = tj_fn(x)
        f = tensorjit.function([x], Out(graph, return_internal_type=True))
        x_dev = device(value)
        got = host(f(x_dev))
        # A float32 tree sum of positive values errs by up to log2(n) roundings of the
        # total (3e-6 for 10^8; a lost block of 4096 elements would be 4e-5); each
        # softmax element by its exponential's and its row sum's (4096 terms) roundings.
        np.testing.assert_allclose(got, want, rtol=1e-5)
        t_tj = timed(f, x_dev, inner=10)
        t_cp = timed_cupy(cp_fn, cupy.asarray(value))
        t_jx = timed_jax(jx_fn, jnp.asarray(value))
        t_th = timed_torch(th_fn, torch.as_tensor(value, device="cuda"))
        fraction = moved * value.nbytes / t_tj / bandwidth
        print(
            f"{name:<26} {t_tj * 1e3:8.3f} {t_cp * 1e3:8.3f} {t_jx * 1e3:8.3f} "
            f"{t_th * 1e3:8.3f} {fraction:6.2f}"
        )


def mlp_tensorjit(n_in, n_hidden, n_out, batch, n_batches=20, dtype="float32", where="cuda"):
    rng = np.random.default_rng(0)
    with config.change_flags(device=where):
        data_x = tensorjit.shared(
            rng.standard_normal((batch * n_batches, n_in)).astype(dtype), name="x"
        )
        data_y = tensorjit.shared(rng.integers(0, n_out, batch * n_batches), name="y")
        w1 = tensorjit.shared(
            (rng.standard_normal((n_in, n_hidden)) / np.sqrt(n_in)).astype(dtype), name="w1"
        )
        b1 = tensorjit.shared(np.zeros(n_hidden, dtype), name="b1")
        w2 = tensorjit.shared(np.zeros((n_hidden, n_out), dtype), name="w2")
        b2 = tensorjit.shared(np.zeros(n_out, dtype), name="b2")
        x, y, index = T.matrix("x", dtype=dtype), T.lvector("y"), T.lscalar("i")
        p_y = nnet.softmax(T.dot(T.tanh(T.dot(x, w1) + b1), w2) + b2)
        cost = -T.mean(T.log(p_y)[T.arange(y.shape[0]), y])
        params = [w1, b1, w2, b2]
        grads = tensorjit.grad(cost, params)
        lr = np.asarray(0.1, dtype)
        givens = {
            x: data_x[index * batch : (index + 1) * batch],
            y: data_y[index * batch : (index + 1) * batch],
        }
        train = tensorjit.function(
            [index],
            Out(cost, return_internal_type=True),
            updates=[(v, v - lr * g) for v, g in zip(params, grads)],
            givens=givens,
        )
    counter = iter(range(10**9))
    return lambda: train(next(counter) % n_batches)


def mlp_cupy(n_in, n_hidden, n_out, batch, n_batches=20, dtype="float32"):
    import cupy as cp

    rng = np.random.default_rng(0)
    data_x = cp.asarray(rng.standard_normal((batch * n_batches, n_in)).astype(dtype))
    data_y = cp.asarray(rng.integers(0, n_out, batch * n_batches))
    w1 = cp.asarray((rng.standard_normal((n_in, n_hidden)) / np.sqrt(n_in)).astype(dtype))
    b1, w2, b2 = (
        cp.zeros(n_hidden, dtype),
        cp.zeros((n_hidden, n_out), dtype),
        cp.zeros(n_out, dtype),
    )
    rows = cp.arange(batch)
    counter = iter(range(10**9))

    def step():
        nonlocal w1, b1, w2, b2
        i = next(counter) % n_batches
        xb, yb = data_x[i * batch : (i + 1) * batch], data_y[i * batch : (i + 1) * batch]
        h = cp.tanh(xb @ w1 + b1)
        z = h @ w2 + b2
        z -= z.max(axis=1, keepdims=True)
        p = cp.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        cost = -cp.log(p[rows, yb]).mean()
        p[rows, yb] -= 1
        p /= batch
        gh = (p @ w2.T) * (1 - h * h)
        w2 -= 0.1 * (h.T @ p)
        b2 -= 0.1 * p.sum(axis=0)
        w1 -= 0.1 * (xb.T @ gh)
        b1 -= 0.1 * gh.sum(axis=0)
        return cost

    return step


def mlp_jax(n_in, n_hidden, n_out, batch, n_batches=20, dtype="float32"):
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    data_x = jnp.asarray(rng.standard_normal((batch * n_batches, n_in)).astype(dtype))
    data_y = jnp.asarray(rng.integers(0, n_out, batch * n_batches))
    params = [
        jnp.asarray((rng.standard_normal((n_in, n_hidden)) / np.sqrt(n_in)).astype(dtype)),
        jnp.zeros(n_hidden, dtype),
        jnp.zeros((n_hidden, n_out), dtype),
        jnp.zeros(n_out, dtype),
    ]

    def loss(params, xb, yb):
        w1, b1, w2, b2 = params
        logits = jnp.tanh(xb @ w1 + b1) @ w2 + b2
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(batch), yb])

    @jax.jit
    def update(params, i):
        xb = jax.lax.dynamic_slice_in_dim(data_x, i * batch, batch)
        yb = jax.lax.dynamic_slice_in_dim(data_y, i * batch, batch)
        cost, grads = jax.value_and_grad(loss)(params, xb, yb)
        return [p - 0.1 * g for p, g in zip(params, grads)], cost

    state = {"params": params}
    counter = iter(range(10**9))

    def step():
        state["params"], cost = update(state["params"], next(counter) % n_batches)
        return cost

    return step


def mlp_torch(n_in, n_hidden, n_out, batch, n_batches=20, dtype="float32"):
    import torch

    rng = np.random.default_rng(0)
    on = {"device": "cuda"}
    data_x = torch.as_tensor(rng.standard_normal((batch * n_batches, n_in)).astype(dtype), **on)
    data_y = torch.as_tensor(rng.integers(0, n_out, batch * n_batches), **on)
    params = [
        torch.as_tensor(
            (rng.standard_normal((n_in, n_hidden)) / np.sqrt(n_in)).astype(dtype), **on
        ),
        torch.zeros(n_hidden, **on),
        torch.zeros((n_hidden, n_out), **on),
        torch.zeros(n_out, **on),
    ]
    for p in params:
        p.requires_grad_(True)
    counter = iter(range(10**9))

    def step():
        i = next(counter) % n_batches
        xb, yb = data_x[i * batch : (i + 1) * batch], data_y[i * batch : (i + 1) * batch]
        w1, b1, w2, b2 = params
        logits = torch.tanh(xb @ w1 + b1) @ w2 + b2
        cost = torch.nn.functional.cross_entropy(logits, yb)
        grads = torch.autograd.grad(cost, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p -= 0.1 * g
        return cost

    return step


def mlp() -> None:
    import jax
    import torch

    # float32 means float32 in every library: no TF32 in PyTorch's or JAX's products
    # (CuPy and tensorjit's cuBLAS calls use none by default).
    torch.backends.cuda.matmul.allow_tf32 = False
    jax.config.update("jax_default_matmul_precision", "highest")
    print("MLP SGD step, float32: time per step (ms), medians of 7 x 20 steps")
    for shape in ((784, 500, 10, 60), (4096, 4096, 10, 512)):
        steps = {
            "tensorjit": mlp_tensorjit(*shape),
            "cupy (hand-written)": mlp_cupy(*shape),
            "jax (jit)": mlp_jax(*shape),
            "pytorch (eager)": mlp_torch(*shape),
        }
        times = {
            "tensorjit": timed(steps["tensorjit"]),
            "cupy (hand-written)": timed_cupy(steps["cupy (hand-written)"]),
            "jax (jit)": timed_jax(steps["jax (jit)"]),
            "pytorch (eager)": timed_torch(steps["pytorch (eager)"]),
        }
        base = times["tensorjit"]
        for label, t in times.items():
            print(f"  {shape}  {label:<20} {t * 1e3:8.3f} ms   {t / base:5.2f}x tensorjit")


def overhead() -> None:
    dev = TensorType("float32", (None,), device="cuda")
    a = dev("a")
    f = tensorjit.function([a], Out(a + 1, return_internal_type=True))
    value = device(np.ones(10, "float32"))
    t = timed(f, value, inner=200)
    import cupy
    import jax
    import jax.numpy as jnp
    import torch

    v_cp, v_jx, v_th = cupy.ones(10, cupy.float32), jnp.ones(10, jnp.float32), torch.ones(10)
    plus_one = jax.jit(lambda v: v + 1)
    rivals = {
        "cupy": timed_cupy(lambda v: v + 1, v_cp),
        "jax (jit)": timed_jax(plus_one, v_jx),
        "pytorch": timed_torch(lambda v: v + 1, v_th.cuda(), inner=200),
    }
    print(
        f"call overhead, a+1 on 10 elements (device in and out, synchronised): "
        f"tensorjit {t * 1e6:.1f} us; "
        + "; ".join(f"{k} {v * 1e6:.1f} us" for k, v in rivals.items())
    )


def mrg() -> None:
    """MRG31k3p on the device: the host's stream, bit for bit."""
    from tensorjit.tensor.random import MRG_RandomStreams

    draws = {}
    for where in ("cpu", "cuda"):
        with config.change_flags(device=where):
            streams = MRG_RandomStreams(1234)
            f = tensorjit.function([], streams.uniform((10**6,), dtype="float32"))
        draws[where] = [np.asarray(f()) for _ in range(3)]  # outputs come to the host
    same = all(np.array_equal(a, b) for a, b in zip(draws["cpu"], draws["cuda"]))
    print(f"MRG31k3p uniforms, 3 draws of 10^6 float32: device == host bit for bit: {same}")


def _example(name: str):
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", name)
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def examples() -> None:
    """The examples trained on the device with assert_no_cpu_op=raise against the C
    backend, and the float32 MLP step's costs on both."""
    import contextlib
    import io

    logreg, mlp_example = _example("logistic_regression.py"), _example("mlp.py")
    runs = {
        "logistic regression (2000 steps)": lambda: list(logreg.main(steps=2000, report=500)[:2]),
        "MLP (2 epochs of 6000)": lambda: mlp_example.main(epochs=2, verbose=False),
    }
    for label, run in runs.items():
        losses = {}
        for where, no_cpu in (("cpu", "ignore"), ("cuda", "raise")):
            with config.change_flags(device=where, assert_no_cpu_op=no_cpu):
                with contextlib.redirect_stdout(io.StringIO()):
                    losses[where] = np.asarray(run(), "float64")
        gap = np.max(np.abs(losses["cuda"] - losses["cpu"]))
        print(f"{label}: losses cpu {losses['cpu']} cuda {losses['cuda']}  max gap {gap:.2e}")
    costs = {}
    for where in ("cpu", "cuda"):
        step = mlp_tensorjit(784, 500, 10, 60, where=where)
        as_host = host if where == "cuda" else np.asarray
        costs[where] = np.asarray([float(as_host(step())) for _ in range(50)])
    gap = np.max(np.abs(costs["cuda"] - costs["cpu"]))
    print(
        f"float32 MLP step, 50 steps: cost {costs['cpu'][0]:.5f} -> {costs['cpu'][-1]:.5f} (cpu), "
        f"{costs['cuda'][0]:.5f} -> {costs['cuda'][-1]:.5f} (cuda); max gap {gap:.2e}"
    )


COMPILE_SCRIPT = """
import sys, time
sys.path.insert(0, "benchmarks")
from cuda_rivals import mlp_tensorjit, sync
start = time.perf_counter()
step = mlp_tensorjit(784, 500, 10, 60)
step(); sync()
print(time.perf_counter() - start)
"""


def compile_time() -> None:
    print("MLP step on CUDA: compile + first call (s), fresh process each")
    with tempfile.TemporaryDirectory() as cache:
        # (the driver's own cache of the PTX it compiled, too: else "cold" is not)
        env = dict(os.environ, XDG_CACHE_HOME=cache, CUDA_CACHE_PATH=cache)
        for label in ("cold (empty caches)", "warm (caches kept)"):
            out = subprocess.run(
                [sys.executable, "-c", COMPILE_SCRIPT], env=env, capture_output=True, text=True
            )
            if out.returncode:
                raise SystemExit(out.stderr[-3000:])
            print(f"  {label:<22} {float(out.stdout.split()[-1]):7.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--parts", default="copy,figure7,reductions,mlp,overhead,mrg,examples,compile"
    )
    parts = parser.parse_args().parts.split(",")
    from tensorjit.plugins.cuda_backend.runtime import describe_devices

    print("CUDA devices:", *describe_devices(), sep="\n  ")
    bandwidth = copy_bandwidth() if {"copy", "figure7", "reductions"} & set(parts) else None
    runs = {
        "figure7": lambda: figure7(bandwidth),
        "reductions": lambda: reductions(bandwidth),
        "mlp": mlp,
        "overhead": overhead,
        "mrg": mrg,
        "examples": examples,
        "compile": compile_time,
    }
    for name, run in runs.items():  # in this order, whatever --parts's
        if name in parts:
            run()


if __name__ == "__main__":
    main()
