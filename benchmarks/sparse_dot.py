"""Sparse x dense products: scipy.sparse vs tensorjit's Python backend vs its C backend.

Run: .venv/bin/python benchmarks/sparse_dot.py [--repeats 7] [--dtype float64]
         [--rows 100000] [--cols 1000] [--n 64]

A ``rows x cols`` sparse matrix (CSR and CSC) times a ``cols x n`` dense matrix, at
densities 0.1%, 1% and 10%: ``a @ b`` in scipy.sparse, and ``tensorjit.sparse.dot`` compiled
with FAST_RUN on the Python backend (which calls scipy, so it measures per-call overhead)
and on the C backend (the sparse plugin's C kernel). Prints the median time of each and
its ratio to scipy. Everything is single-threaded: scipy's sparse product is single-threaded
C++ (``csr_matvecs``/``csc_matvecs``), and so is the C kernel.
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import median_time


def random_sparse(rows: int, cols: int, density: float, fmt: str, dtype: str, rng):
    """A random matrix with ``density * rows * cols`` stored values (no duplicates)."""
    import scipy.sparse as ssp

    nnz = int(round(density * rows * cols))
    flat = rng.choice(rows * cols, size=nnz, replace=False)
    data = rng.standard_normal(nnz).astype(dtype)
    coo = ssp.coo_matrix((data, (flat // cols, flat % cols)), shape=(rows, cols))
    return coo.asformat(fmt)


def run(args: argparse.Namespace) -> list[tuple[str, dict[str, float]]]:
    import tensorjit
    import tensorjit.sparse as S
    import tensorjit.tensor as T

    modes = {
        "python": tensorjit.FAST_RUN.with_backends("python"),
        "c": tensorjit.FAST_RUN.with_backends("c", "python"),
    }
    rng = np.random.default_rng(0)
    b = rng.standard_normal((args.cols, args.n)).astype(args.dtype)
    rows = []
    for fmt in ("csr", "csc"):
        x = (S.csr_matrix if fmt == "csr" else S.csc_matrix)("x", dtype=args.dtype)
        y = T.tensor(args.dtype, shape=(None, None), name="y")
        fns = {name: tensorjit.function([x, y], S.dot(x, y), mode=m) for name, m in modes.items()}
        kernels = {k.name for k in fns["c"].kernels.values()}
        assert "sparse:c_structured_dot" in kernels, kernels
        for density in (0.001, 0.01, 0.1):
            a = random_sparse(args.rows, args.cols, density, fmt, args.dtype, rng)
            want = a @ b
            for f in fns.values():
                got = f(a, b)
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
            times = {"scipy": median_time(lambda a=a: a @ b, args.repeats)}
            for name, f in fns.items():
                times[name] = median_time(lambda f=f, a=a: f(a, b), args.repeats)
            rows.append((f"{fmt} {density:.1%} (nnz {a.nnz})", times))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--dtype", default="float64", choices=("float32", "float64"))
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--cols", type=int, default=1000)
    parser.add_argument("--n", type=int, default=64)
    args = parser.parse_args()
    print(
        f"sparse ({args.rows}x{args.cols}) @ dense ({args.cols}x{args.n}), {args.dtype}, "
        f"median of {args.repeats}; ratio = time / scipy time (lower is faster)"
    )
    header = f"{'case':<28}{'scipy':>11}{'python':>11}{'c':>11}{'python/sp':>11}{'c/sp':>8}"
    print(header)
    print("-" * len(header))
    for label, t in run(args):
        print(
            f"{label:<28}{t['scipy'] * 1e3:>9.2f}ms{t['python'] * 1e3:>9.2f}ms"
            f"{t['c'] * 1e3:>9.2f}ms{t['python'] / t['scipy']:>11.2f}{t['c'] / t['scipy']:>8.2f}"
        )


if __name__ == "__main__":
    main()
