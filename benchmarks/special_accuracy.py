"""Accuracy of the C backend's elementwise special functions: the largest error in ulps
of the exactly rounded result, and the share of results that are not exactly rounded,
for each function and float dtype, over seeded random samples of each function's domain
(results finite, denormal and beyond) and tiny magnitudes. sigmoid follows SciPy's
expit, 0 where e^-x overflows (the exact value is a denormal there): measured above.

References: float64 for float32 results (SciPy's erf/erfc in double), long double (the
x87's 64-bit significand) for float64 results of exp, expm1, log, log1p, tanh, sigmoid
and softplus; float64 erf/erfc (libm's calls) against mpmath at 40 digits on a smaller
sample, where mpmath is installed (it is in the bench extra, with SymPy).
The unit tests (tests/plugins/c_backend/test_c_vector_math.py, test_c_vector_erf.py)
assert bounds; this prints what is measured.

Run: .venv-bench/bin/python benchmarks/special_accuracy.py [--n 1000000]
"""

from __future__ import annotations

import argparse

import numpy as np
import scipy.special

import tensorjit
import tensorjit.tensor as T

SYMBOLIC = {
    "exp": T.exp,
    "expm1": T.expm1,
    "log": T.log,
    "log1p": T.log1p,
    "tanh": T.tanh,
    "sigmoid": T.sigmoid,
    "softplus": T.softplus,
    "erf": T.erf,
    "erfc": T.erfc,
}


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(np.zeros_like(x), x)


WIDE = {
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "softplus": _softplus,
    "erf": scipy.special.erf,  # float64 only: float32's reference
    "erfc": scipy.special.erfc,
}


def samples(name: str, dtype: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Seeded values over the domain: uniform over the range where results are finite
    (and past it), around the origin, tiny magnitudes of both signs."""
    single = dtype == "float32"
    top, low = (89.0, -104.0) if single else (710.0, -746.0)
    lo_exp, hi_exp = (-149, 128) if single else (-1074, 1024)
    tiny = np.exp2(rng.uniform(lo_exp, -10, n)) * rng.choice([-1.0, 1.0], n)
    if name in ("log", "log1p"):
        parts = [np.exp2(rng.uniform(lo_exp, hi_exp, n)), rng.uniform(0.5, 2, n)]
        if name == "log1p":
            parts += [rng.uniform(-1, 1, n), tiny]
    elif name in ("erf", "erfc"):
        parts = [rng.uniform(-11 if single else -28, 11 if single else 28, n)]
        parts += [rng.uniform(-1.5, 1.5, n), tiny]
    elif name == "tanh":
        parts = [rng.uniform(-25, 25, n), rng.uniform(-1, 1, n), tiny]
    elif name == "sigmoid":
        # SciPy's expit formula, 1 / (1 + e^-x), is 0 once e^-x overflows (x below -88.72
        # in float32, -709.78 in float64) where the exact value is a denormal: the
        # kernel follows SciPy there, so that range is left out
        parts = [rng.uniform(-88.72 if single else -709.78, top, n), rng.uniform(-2, 2, n)]
        parts.append(tiny)
    else:
        parts = [rng.uniform(low, top, n), rng.uniform(-2, 2, n), tiny]
    return np.concatenate(parts).astype(dtype)


def ulp_errors(got: np.ndarray, exact: np.ndarray, dtype: str) -> np.ndarray:
    """|got - exact| in ulps of exact's binade in ``dtype`` (denormals: the smallest
    denormal); 0 where both are the same infinity, NaN or zero."""
    info = np.finfo(dtype)
    exact = np.asarray(exact, dtype=np.longdouble)
    magnitude = np.maximum(np.abs(exact), info.tiny)
    ulp = np.exp2(np.floor(np.log2(magnitude)) - (info.nmant)).astype(np.longdouble)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(got.astype(np.longdouble) - exact) / ulp
    same = (got.astype(np.longdouble) == exact) | (np.isnan(got) & np.isnan(exact))
    overflow = np.isinf(got) & (np.abs(exact) > info.max)
    return np.where(same | overflow, 0, err).astype(np.float64)


def mpmath_reference(name: str, x: np.ndarray) -> np.ndarray | None:
    try:
        import mpmath
    except ImportError:
        return None
    mpmath.mp.dps = 40
    fn = getattr(mpmath, name)
    return np.array([float(fn(mpmath.mpf(float(v)))) for v in x])


def measure(name: str, dtype: str, n: int) -> tuple[float, float, int] | None:
    rng = np.random.default_rng(7)
    x = T.vector("x", dtype=dtype)
    f = tensorjit.function([x], SYMBOLIC[name](x))
    values = samples(name, dtype, n, rng)
    if dtype == "float32":
        exact = WIDE[name](values.astype(np.float64))
    elif name in ("erf", "erfc"):
        values = values[:: max(1, values.size // 30000)]
        exact = mpmath_reference(name, values)
        if exact is None:
            return None
    else:
        with np.errstate(all="ignore"):
            exact = WIDE[name](values.astype(np.longdouble))
    with np.errstate(all="ignore"):
        err = ulp_errors(f(values), exact, dtype)
    with np.errstate(over="ignore"):
        rounded = np.asarray(exact, dtype=np.longdouble).astype(dtype)
    not_exact = np.count_nonzero(f(values) != rounded) - np.count_nonzero(
        np.isnan(rounded) & np.isnan(f(values))
    )
    return float(err.max()), 100 * not_exact / values.size, values.size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="values per range")
    args = parser.parse_args()
    print(f"{'function':<10}{'dtype':<9}{'values':>10}{'max ulp':>9}{'not exactly rounded':>21}")
    for name in SYMBOLIC:
        for dtype in ("float32", "float64"):
            result = measure(name, dtype, args.n)
            if result is None:
                print(f"{name:<10}{dtype:<9}  (mpmath not installed: not measured)")
                continue
            worst, off, count = result
            print(f"{name:<10}{dtype:<9}{count:>10}{worst:>9.2f}{off:>20.3f}%")


if __name__ == "__main__":
    main()
