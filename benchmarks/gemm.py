"""Matrix products: NumPy vs tensorjit's Python backend vs tensorjit's C backend.

Run: .venv/bin/python benchmarks/gemm.py [--repeats 7] [--dtype float64]
Cases: square ``dot(x, y)`` of 64, 256 and 1024; the MLP-sized product 60x784 . 784x500;
one SGD step of a 784-500-10 MLP on a batch of 60 (tanh hidden layer, sigmoid outputs,
cross-entropy; NumPy's step is written by hand). Prints the median time of each and the
ratio to NumPy. Both tensorjit backends call SciPy's BLAS (the Python one through
``scipy.linalg.blas``/``np.dot``, the C one through SciPy's function pointers), so the
difference is per-call overhead, which matters for small matrices.

NumPy and SciPy each bundle their own OpenBLAS with its own thread pool. A step that
alternates between the two (the Python backend: np.dot for Dot, SciPy for Gemm/Ger)
oversubscribes the cores while one pool's threads spin; compare with
``OPENBLAS_NUM_THREADS=1`` to see the single-threaded numbers.
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import median_time


def dot_cases(dtype: str, repeats: int, modes: dict) -> list[tuple[str, dict[str, float]]]:
    import tensorjit
    import tensorjit.tensor as tt

    rng = np.random.default_rng(0)
    rows = []
    for label, (m, k, n) in [
        ("gemm 64", (64, 64, 64)),
        ("gemm 256", (256, 256, 256)),
        ("gemm 1024", (1024, 1024, 1024)),
        ("dot 60x784.784x500", (60, 784, 500)),
    ]:
        x = rng.standard_normal((m, k)).astype(dtype)
        y = rng.standard_normal((k, n)).astype(dtype)
        times = {"numpy": median_time(lambda x=x, y=y: np.dot(x, y), repeats)}
        sx = tt.tensor(dtype, shape=(None, None), name="x")
        sy = tt.tensor(dtype, shape=(None, None), name="y")
        for name, mode in modes.items():
            f = tensorjit.function([sx, sy], tt.dot(sx, sy), mode=mode)
            np.testing.assert_allclose(f(x, y), np.dot(x, y), rtol=1e-4, atol=1e-3)
            times[name] = median_time(lambda f=f, x=x, y=y: f(x, y), repeats)
        rows.append((label, times))
    return rows


def mlp_data(dtype: str):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((60, 784)).astype(dtype)
    y = (rng.uniform(size=(60, 10)) > 0.5).astype(dtype)
    w1 = (0.05 * rng.standard_normal((784, 500))).astype(dtype)
    w2 = (0.05 * rng.standard_normal((500, 10))).astype(dtype)
    return x, y, w1, w2


def numpy_mlp_step(dtype: str):
    x, y, w1, w2 = mlp_data(dtype)
    b1, b2 = np.zeros(500, dtype), np.zeros(10, dtype)
    lr = dtype_scalar(0.1, dtype)
    n = dtype_scalar(x.shape[0], dtype)

    def step():
        nonlocal w1, w2, b1, b2
        h = np.tanh(x @ w1 + b1)
        p = 1 / (1 + np.exp(-(h @ w2 + b2)))
        cost = (-y * np.log(p) - (1 - y) * np.log(1 - p)).sum(axis=1).mean()
        gz = (p - y) / n
        gh = (gz @ w2.T) * (1 - h * h)
        w2 -= lr * (h.T @ gz)
        b2 -= lr * gz.sum(axis=0)
        w1 -= lr * (x.T @ gh)
        b1 -= lr * gh.sum(axis=0)
        return cost

    return step


def dtype_scalar(value, dtype: str):
    return np.asarray(value, dtype=dtype)[()]


def tensorjit_mlp_step(dtype: str, mode):
    import tensorjit
    import tensorjit.tensor as tt

    xv, yv, w1v, w2v = mlp_data(dtype)
    w1, w2 = tensorjit.shared(w1v, name="w1"), tensorjit.shared(w2v, name="w2")
    b1 = tensorjit.shared(np.zeros(500, dtype), name="b1")
    b2 = tensorjit.shared(np.zeros(10, dtype), name="b2")
    x = tt.tensor(dtype, shape=(None, None), name="x")
    y = tt.tensor(dtype, shape=(None, None), name="y")
    h = tt.tanh(tt.dot(x, w1) + b1)
    p = tt.sigmoid(tt.dot(h, w2) + b2)
    cost = (-y * tt.log(p) - (1 - y) * tt.log(1 - p)).sum(axis=1).mean()
    params = [w1, b1, w2, b2]
    lr = np.asarray(0.1, dtype)
    grads = tensorjit.grad(cost, params)
    train = tensorjit.function(
        [x, y], cost, updates=[(q, q - lr * g) for q, g in zip(params, grads)], mode=mode
    )
    return lambda: train(xv, yv)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    args = parser.parse_args()

    import tensorjit
    from tensorjit.core.hooks import get_plugin_system

    modes = {"tj-python": tensorjit.FAST_RUN}
    reason = get_plugin_system().registries.backends.unavailable_reason("c")
    if reason is None:
        modes["tj-c"] = tensorjit.FAST_RUN.with_backends("c", "python")
    rows = dot_cases(args.dtype, args.repeats, modes)
    mlp = {"numpy": median_time(numpy_mlp_step(args.dtype), args.repeats)}
    for name, mode in modes.items():
        mlp[name] = median_time(tensorjit_mlp_step(args.dtype, mode), args.repeats)
    rows.append(("MLP step 60x784-500-10", mlp))

    print(f"{args.dtype}, median of {args.repeats} repeats (each ~0.2 s of calls)")
    if reason is not None:
        print(f"C backend unavailable: {reason}")
    names = ["numpy", *modes]
    header = f"{'case':<24}" + "".join(f"{n:>14}" for n in names)
    header += "".join(f"{n + '/np':>14}" for n in modes)
    print(header)
    for label, times in rows:
        line = f"{label:<24}" + "".join(f"{times[n] * 1e6:>11.1f} us" for n in names)
        line += "".join(f"{times[n] / times['numpy']:>13.2f}x" for n in modes)
        print(line)
    if "tj-c" in modes:
        print("C backend time / Python backend time:")
        for label, times in rows:
            print(f"  {label:<24} {times['tj-c'] / times['tj-python']:.2f}")


if __name__ == "__main__":
    main()
