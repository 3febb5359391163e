"""Elementwise graphs built on special functions, the class the vectorised float32 erf
serves (c_backend/generators/vector_erf.py): every implementation compiles the whole expression.

- options: Black-Scholes prices of a call and a put for N options (spot, strike,
  maturity, volatility per option; one rate), the normal CDF written with erf:
  N(d) = (1 + erf(d / sqrt 2)) / 2; both prices returned.
- gelu: the exact GELU, x (1 + erf(x / sqrt 2)) / 2, of a 2048 x 1024 activation.

Implementations, same data, same run: NumPy with SciPy's erf, tensorjit (default mode),
PyTensor (default mode, Numba in PyTensor 3; and mode="CVM", its C backend), JAX
(jax.jit). Results must agree with NumPy's on the same inputs in float64 to 1e-5 of the
largest value (float32) or 1e-12 (float64). Times are medians (benchmarks/_timing.py);
run pinned to one core.

Run: taskset -c 0 .venv/bin/python benchmarks/special_functions.py
     [--dtypes float32,float64] [--n 1000000] [--repeats 9]
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable

from _competitors import limit_threads, threads_from_argv

limit_threads(threads_from_argv())  # before NumPy loads its BLAS

import numpy as np  # noqa: E402
from _timing import median_time  # noqa: E402

RATE = 0.03
ROOT_HALF = float(1 / np.sqrt(2))


def make_data(name: str, dtype: str, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    if name == "options":
        spot = rng.uniform(50, 150, n)
        strike = rng.uniform(50, 150, n)
        maturity = rng.uniform(0.1, 3, n)
        volatility = rng.uniform(0.05, 0.6, n)
        return [a.astype(dtype) for a in (spot, strike, maturity, volatility)]
    return [rng.standard_normal((2048, 1024)).astype(dtype)]


def options(lib, erf, s, k, t, v, dtype, const=None):
    """(call, put) with ``lib``'s log, sqrt, exp and the given erf; ``const`` makes the
    constants (default: 0-d arrays of ``dtype``; PyTorch takes Python floats)."""
    const = const or (lambda c: np.asarray(c, dtype))
    half = const(0.5)
    root_t = lib.sqrt(t)
    d1 = (lib.log(s / k) + (const(RATE) + half * v * v) * t) / (v * root_t)
    d2 = d1 - v * root_t
    discount = k * lib.exp(const(-RATE) * t)

    def cdf(d):
        return half * (1 + erf(d * const(ROOT_HALF)))

    call = s * cdf(d1) - discount * cdf(d2)
    put = discount * cdf(-d2) - s * cdf(-d1)
    return call, put


def gelu(erf, x, dtype):
    return x * (np.asarray(0.5, dtype) * (1 + erf(x * np.asarray(ROOT_HALF, dtype))))


def numpy_fn(name: str, dtype: str) -> Callable:
    from scipy import special

    if name == "options":
        return lambda *a: options(np, special.erf, *a, dtype)
    return lambda x: gelu(special.erf, x, dtype)


def tensorjit_fn(name: str, dtype: str) -> Callable:
    import tensorjit
    import tensorjit.tensor as T

    if name == "options":
        args = [T.vector(n, dtype=dtype) for n in ("s", "k", "t", "v")]
        return tensorjit.function(args, list(options(T, T.erf, *args, dtype)))
    x = T.matrix("x", dtype=dtype)
    return tensorjit.function([x], gelu(T.erf, x, dtype))


def pytensor_fn(name: str, dtype: str, mode: str | None) -> Callable:
    import pytensor
    import pytensor.tensor as pt

    if name == "options":
        args = [pt.vector(n, dtype=dtype) for n in ("s", "k", "t", "v")]
        outputs = list(options(pt, pt.erf, *args, dtype))
        return pytensor.function(args, outputs, mode=mode)
    x = pt.matrix("x", dtype=dtype)
    return pytensor.function([x], gelu(pt.erf, x, dtype), mode=mode)


def jax_fn(name: str, dtype: str) -> Callable:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.scipy.special import erf

    if name == "options":
        step = jax.jit(lambda *a: options(jnp, erf, *a, dtype))
    else:
        step = jax.jit(lambda x: gelu(erf, x, dtype))

    def run(*arrays):
        out = step(*arrays)
        return jax.block_until_ready(out)

    return run


def implementations(name: str, dtype: str) -> dict[str, Callable]:
    made = {"numpy": numpy_fn(name, dtype), "tensorjit": tensorjit_fn(name, dtype)}
    for label, build in (
        ("pytensor", lambda: pytensor_fn(name, dtype, None)),
        ("pytensor-c", lambda: pytensor_fn(name, dtype, "CVM")),
        ("jax", lambda: jax_fn(name, dtype)),
    ):
        try:
            made[label] = build()
        except ImportError as exc:
            print(f"  ({label} not installed: {exc})")
    return made


def agree(got, want) -> float:
    """The largest difference from the float64 reference, relative to the largest
    reference value (a price is a difference of terms of the spot's size)."""
    got = got if isinstance(got, (list, tuple)) else [got]
    want = want if isinstance(want, (list, tuple)) else [want]
    worst = 0.0
    for g, w in zip(got, want):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        worst = max(worst, float(np.max(np.abs(g - w)) / np.max(np.abs(w))))
    return worst


def _call(fn: Callable, data: list[np.ndarray]) -> Callable[[], object]:
    return lambda: fn(*data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--workloads", default="options,gelu")
    parser.add_argument("--n", type=int, default=1_000_000, help="options")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1, help="(read before NumPy loads)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(f"{'workload':<10}{'dtype':<9}{'implementation':<13}{'ms':>9}{'x tensorjit':>13}"
          f"{'max rel diff':>14}")  # fmt: skip
    for name in args.workloads.split(","):
        for dtype in args.dtypes.split(","):
            data = make_data(name, dtype, args.n)
            fns = implementations(name, dtype)
            reference = numpy_fn(name, "float64")(*[a.astype(np.float64) for a in data])
            tolerance = 1e-5 if dtype == "float32" else 1e-12
            times = {}
            for label, fn in fns.items():
                difference = agree(fn(*data), reference)
                if difference > tolerance:
                    raise AssertionError(f"{label} {name} {dtype}: {difference:.3g} off")
                times[label] = (median_time(_call(fn, data), args.repeats), difference)
            mine = times["tensorjit"][0]
            for label, (seconds, difference) in times.items():
                print(f"{name:<10}{dtype:<9}{label:<13}{seconds * 1e3:>9.3f}"
                      f"{seconds / mine:>13.2f}{difference:>14.2g}")  # fmt: skip


if __name__ == "__main__":
    main()
