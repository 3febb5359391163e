"""The L2-penalised weight update in one pass (c_backend/penalised.py) against the decay
pass then BLAS's GEMM, on the tutorial MLP's W1 update: ``out = beta * W + alpha * X^T G``
and ``sum(W**2)``, W 784 x 500, X the next 20-row minibatch of a 12,000-row data set (read
transposed, as the gradient reads it), one thread; in place (out is W, as the MLP's
update runs) and into another array. Both paths are the project's own
kernel: tj_penalised_one_pass(0) makes it take the decay pass and ``tj_gemm`` (as more
than one thread does); the two alternate call by call. Then NumPy's three passes,
``beta * W + alpha * (X.T @ G)`` and the sum.

Run: taskset -c 0 .venv/bin/python benchmarks/penalised_update.py [--dtype float32]
"""

from __future__ import annotations

import argparse
import statistics
import time

from _competitors import limit_threads

limit_threads(1)  # before NumPy loads OpenBLAS

import numpy as np  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--calls", type=int, default=3000, help="calls of each, round-robin")
    args = parser.parse_args()

    import tensorjit
    from tensorjit.plugins.c_backend import blas, penalised

    tensorjit.config.threads = 1
    ffi, lib = blas.library()
    fn = getattr(lib, penalised.function_name(args.dtype))
    rng = np.random.default_rng(0)
    dtype = np.dtype(args.dtype)
    m, n, k, rows = 784, 500, 20, 12000
    data = rng.standard_normal((rows, m)).astype(dtype)
    g = rng.standard_normal((k, n)).astype(dtype)
    w = rng.standard_normal((m, n)).astype(dtype)
    out = np.empty_like(w)
    # In place, as a weight update runs: each path updates its own weight.
    own = {flag: w.copy() for flag in (0, 1)}
    squares = ffi.new("double *")
    alpha, beta = -0.01, 0.999

    def ptr(a: np.ndarray):
        return ffi.cast("char *", a.ctypes.data)

    def kernel(i: int, one_pass: int, in_place: bool) -> None:
        x = data[(i % (rows // k)) * k :][:k].T
        c = own[one_pass] if in_place else w
        lib.tj_penalised_one_pass(one_pass)
        status = fn(ptr(x), m, k, *x.strides, ptr(g), n, *g.strides, ptr(c),
                    ptr(c if in_place else out), alpha, beta, squares)  # fmt: skip
        assert status == 0

    def numpy(i: int, _: int, in_place: bool) -> None:
        x = data[(i % (rows // k)) * k :][:k].T
        np.add(beta * w, alpha * (x.T.T @ g), out=out)
        squares[0] = float(np.sum(np.square(w), dtype=np.float64))

    variants = {
        "one pass, in place": (kernel, 1, True),
        "decay + tj_gemm, in place": (kernel, 0, True),
        "one pass, new array": (kernel, 1, False),
        "decay + tj_gemm, new array": (kernel, 0, False),
        "numpy (three passes)": (numpy, 0, False),
    }
    results = {}
    for name, (call, flag, in_place) in variants.items():
        if not in_place:
            call(0, flag, in_place)
            results[name] = (out.copy(), squares[0])
    reference = results["decay + tj_gemm, new array"]
    # The kernel's paths alternate; NumPy (whose temporaries evict W) runs after them.
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for group in (list(variants)[:4], list(variants)[4:]):
        for i in range(args.calls):
            for name in group:
                call, flag, in_place = variants[name]
                start = time.perf_counter()
                call(i, flag, in_place)
                samples[name].append(time.perf_counter() - start)
    lib.tj_penalised_one_pass(1)
    print(f"W {m} x {n} {args.dtype}, k {k}: us a call ({args.calls} calls each)")
    if args.dtype == "float64":
        print("  (float64 has no one-pass kernel: its rows run the decay pass and tj_gemm)")
    print(f"  {'':<28}{'min':>9}{'median':>9}  new array: largest difference, sums")
    for name, times in samples.items():
        line = f"  {name:<28}{min(times) * 1e6:>9.1f}{statistics.median(times) * 1e6:>9.1f}"
        if name in results:
            value, total = results[name]
            gap = float(np.abs(value - reference[0]).max())
            line += f"  {gap:.3g}, {total:.10g} (against {reference[1]:.10g})"
        print(line)


if __name__ == "__main__":
    main()
