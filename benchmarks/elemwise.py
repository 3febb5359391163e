"""Elementwise formulae of the Theano paper's Figure 7, single thread.

For each formula, size (10^3..10^7) and dtype: NumPy, numexpr (if installed; one thread),
tensorjit on its Python kernels, tensorjit with the C backend, and a plain copy of the
same number of bytes as the memory-bandwidth bound. Medians of repeats; ratios are to
NumPy's time (lower is faster).

    .venv/bin/pip install -e ".[bench]" && .venv/bin/python benchmarks/elemwise.py
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from _timing import median_time  # noqa: E402

import tensorjit  # noqa: E402
import tensorjit.tensor as T  # noqa: E402

try:
    import numexpr
except ImportError:  # optional
    numexpr = None

FORMULAE = [
    ("a**2 + b**2 + 2*a*b", lambda a, b: a**2 + b**2 + 2 * a * b),
    ("2*a + 3*b", lambda a, b: 2 * a + 3 * b),
    ("a+1", lambda a, b: a + 1),
    ("2*a + b**10", lambda a, b: 2 * a + b**10),
]

BUDGET = 0.02  # seconds of repeated calls per timing sample


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="3,4,5,6,7", help="exponents of 10")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    if numexpr is not None:
        numexpr.set_num_threads(1)
    modes = {
        "python": tensorjit.FAST_RUN.with_backends("python"),
        "c": tensorjit.FAST_RUN.with_backends("c", "python"),
    }
    print(f"NumPy {np.__version__}, numexpr {getattr(numexpr, '__version__', 'not installed')}")
    print("times in microseconds; (x) = time / NumPy time; copy = memcpy of the same bytes")
    header = f"{'formula':<22}{'dtype':<9}{'n':>9}{'numpy':>10}"
    for name in ["numexpr", "tj-python", "tj-c", "copy"]:
        header += f"{name:>18}"
    print(header)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as cache, tensorjit.config.change_flags(compiledir=cache):
        for dtype in ["float64", "float32"]:
            a_sym = T.tensor(dtype, shape=(None,), name="a")
            b_sym = T.tensor(dtype, shape=(None,), name="b")
            for text, formula in FORMULAE:
                fns = {
                    k: tensorjit.function(
                        [a_sym, b_sym], formula(a_sym, b_sym), mode=m, on_unused_input="ignore"
                    )
                    for k, m in modes.items()
                }
                for exp in [int(e) for e in args.sizes.split(",")]:
                    n = 10**exp
                    a = rng.uniform(0.5, 1.0, n).astype(dtype)
                    b = rng.uniform(0.5, 1.0, n).astype(dtype)
                    # The copy reads both inputs' bytes and writes one output, as the formulae.
                    src = np.concatenate([a, b])
                    dst = np.empty_like(src)
                    row = {
                        "numpy": median_time(functools.partial(formula, a, b), args.repeats, BUDGET)
                    }
                    if numexpr is not None:
                        expr = text
                        row["numexpr"] = median_time(
                            functools.partial(numexpr.evaluate, expr, {"a": a, "b": b}),
                            args.repeats,
                            BUDGET,
                        )
                    for k, f in fns.items():
                        row[f"tj-{k}"] = median_time(
                            functools.partial(f, a, b), args.repeats, BUDGET
                        )
                    row["copy"] = median_time(
                        functools.partial(np.copyto, dst, src), args.repeats, BUDGET
                    )
                    expected = formula(a, b)
                    got = fns["c"](a, b)
                    rtol = 1e-5 if dtype == "float32" else 1e-12
                    np.testing.assert_allclose(got, expected, rtol=rtol)
                    line = f"{text:<22}{dtype:<9}{n:>9}{row['numpy'] * 1e6:>10.1f}"
                    for name in ["numexpr", "tj-python", "tj-c", "copy"]:
                        if name in row:
                            t = row[name]
                            line += f"{t * 1e6:>10.1f} ({t / row['numpy']:4.2f})"
                        else:
                            line += f"{'-':>18}"
                    print(line, flush=True)


if __name__ == "__main__":
    main()
