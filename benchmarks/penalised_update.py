"""The L2-penalised weight update in one pass (c_backend/linalg/penalised.py) against the decay
pass then BLAS's GEMM, on the tutorial MLP's W1 update: ``out = beta * W + alpha * X^T G``
and ``sum(W**2)``, W 784 x 500, X the next 20-row minibatch of a 12,000-row data set (read
transposed, as the gradient reads it), one thread; in place (out is W, as the MLP's
update runs) and into another array. Both paths are the project's own
kernel, chosen by the layout of G as the library chooses (no switch): a row-major G
takes the one pass, the same G in column-major order the decay pass and ``tj_gemm`` (as
more than one thread does); the two alternate call by call. Then NumPy's three passes,
``beta * W + alpha * (X.T @ G)`` and the sum.

With --step: the tutorial MLP's whole training step instead, against its five GEMMs
alone (the bound); for the step without the one pass, run it on an older checkout
(PYTHONPATH=<git worktree>, benchmarks/RESULTS.md's A/B runs).

Run: taskset -c 0 .venv/bin/python benchmarks/penalised_update.py [--dtype float32] [--step]
"""

from __future__ import annotations

import argparse
import statistics
import time

import tutorial  # (limits the threads, by --threads, before NumPy loads)

# isort: split
import numpy as np  # noqa: E402
from _mlp_bound import five_gemms  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--calls", type=int, default=3000, help="calls of each, round-robin")
    parser.add_argument("--step", action="store_true", help="the tutorial MLP's whole step")
    parser.add_argument("--threads", type=int, default=1, help="(read by tutorial.py)")
    args = parser.parse_args()
    if args.step:
        whole_step(args.dtype, args.calls)
        return

    import tensorjit
    from tensorjit.plugins.c_backend.linalg import blas, penalised

    tensorjit.config.threads = 1
    ffi, lib = blas.library()
    fn = getattr(lib, penalised.function_name(args.dtype))
    rng = np.random.default_rng(0)
    dtype = np.dtype(args.dtype)
    m, n, k, rows = 784, 500, 20, 12000
    data = rng.standard_normal((rows, m)).astype(dtype)
    g = rng.standard_normal((k, n)).astype(dtype)
    # G by the path it sends the kernel on: row-major (one pass), column-major (decay).
    g_of = {1: g, 0: np.asfortranarray(g)}
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
        b = g_of[one_pass]
        status = fn(ptr(x), m, k, *x.strides, ptr(b), n, *b.strides, ptr(c),
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


def whole_step(dtype: str, blocks: int) -> None:
    """The tutorial MLP's training step (benchmarks/tutorial.py, tensorjit) and the
    step's five GEMMs alone (the bound), in blocks of 100 calls taking turns; medians
    and minimums of the blocks' mean times."""
    x_all, y_all, params0 = tutorial.make_data("mlp", dtype)
    step = tutorial.symbolic_step("tensorjit", "mlp", x_all, y_all, params0, dtype, None)
    w1, _, w2, _ = (np.asarray(p, dtype) for p in params0)
    bound = five_gemms(np.ascontiguousarray(x_all[:20]), w1, w2)

    def block(bound_only: bool, calls: int = 100) -> float:
        start = time.perf_counter()
        for i in range(calls):
            if bound_only:
                bound()
            else:
                step(i % tutorial.N_BATCHES)
        return (time.perf_counter() - start) / calls

    step(0)
    kinds = {"as built": False, "bound (5 GEMMs)": True}
    samples: dict[str, list[float]] = {name: [] for name in kinds}
    for _ in range(max(1, blocks // 50)):
        for name, bound_only in kinds.items():
            samples[name].append(block(bound_only))
    limit = statistics.median(samples["bound (5 GEMMs)"])
    print(f"tutorial MLP step, {dtype}, one thread: ms a step ({len(samples['bound (5 GEMMs)'])} "
          "blocks of 100 calls each, taking turns)")  # fmt: skip
    print(f"  {'':<18}{'median':>9}{'min':>9}{'% bound':>9}")
    for name, times in samples.items():
        middle = statistics.median(times)
        print(f"  {name:<18}{middle * 1e3:>9.4f}{min(times) * 1e3:>9.4f}"
              f"{100 * limit / middle:>8.1f}%")  # fmt: skip


if __name__ == "__main__":
    main()
