"""Fits the approximations of the vectorised float32 erf and erfc
(c_backend/vector_erf.py) and prints them, with the largest relative error of each fit.

Against SciPy's double precision erf and erfcx, on Chebyshev nodes:

- erf, |x| <= 4: erf(x) = x N(t) / D(t), t = x^2 / 16 (N/D approximates erf(sqrt u) /
  sqrt u, u = x^2): a rational least-squares fit, linearised (Sanathanan-Koerner
  iterations) then reweighted towards the smallest largest error (Lawson's iterations);
- erfc, |x| <= 1: erf(x) = x P(s), s = 2 x^2 - 1 (a Chebyshev fit, as monomials in s);
- erfc, 1 < |x| <= X_MAX: erfc(|x|) = exp(-x^2) Q(s) / |x|, 1/|x| mapped onto s in
  [-1, 1] (Q approximates x erfcx(x), smooth in 1/x and 1/sqrt(pi) at 1/x = 0).

Run: python -m tensorjit.tools.fit_erf
"""

from __future__ import annotations

import numpy as np
from numpy.polynomial import chebyshev
from scipy import special

RATIONAL_DEGREES = (6, 6)
ERF_X_MAX = 4.0  # float32's erf is +-1 beyond 3.92
P_DEGREE = 8
Q_DEGREE = 16
X_MAX = 10.1  # float32's erfc is 0 beyond 10.06 (half the smallest denormal)
T_MIN = 1 / X_MAX


def _fit(f, lo: float, hi: float, degree: int, nodes: int = 6000) -> np.ndarray:
    s = np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)
    x = 0.5 * (lo + hi) + 0.5 * (hi - lo) * s
    return chebyshev.cheb2poly(chebyshev.chebfit(s, f(x), degree))


def _horner(coefficients: np.ndarray, s: np.ndarray) -> np.ndarray:
    result = np.zeros_like(s)
    for c in coefficients[::-1]:
        result = result * s + c
    return result


def _erf_ratio(u: np.ndarray) -> np.ndarray:
    root = np.sqrt(np.maximum(u, 1e-300))
    return np.where(u == 0, 2 / np.sqrt(np.pi), special.erf(root) / root)


def _scaled_tail(t: np.ndarray) -> np.ndarray:
    return special.erfcx(1 / t) / t


def rational_fit(
    numerator: int, denominator: int, iterations: int = 30, reweighting: int = 60
) -> tuple[np.ndarray, np.ndarray, float]:
    """(N, D with D(0) = 1, largest relative error) for erf(sqrt u) / sqrt u on
    u in [0, ERF_X_MAX^2], in t = u / ERF_X_MAX^2."""
    nodes = 20000
    top = ERF_X_MAX**2
    u = 0.5 * top * (1 + np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes))
    g = _erf_ratio(u)
    powers = np.vander(u / top, max(numerator, denominator) + 1, increasing=True)
    previous = np.ones_like(u)
    weights = np.ones_like(u)
    for step in range(iterations + reweighting):
        # residual (N - g D) / (g D_previous), unknowns N's and D's (but D(0) = 1)
        scale = (g * previous)[:, None]
        system = np.hstack(
            [powers[:, : numerator + 1], -g[:, None] * powers[:, 1 : denominator + 1]]
        )
        root = np.sqrt(weights)
        solution, *_ = np.linalg.lstsq(system / scale * root[:, None], root / previous, rcond=None)
        n = solution[: numerator + 1]
        d = np.concatenate([[1.0], solution[numerator + 1 :]])
        value_d = powers[:, : denominator + 1] @ d
        error = (powers[:, : numerator + 1] @ n) / value_d / g - 1
        if step < iterations:
            previous = value_d
        else:
            weights = weights * np.abs(error)
            weights /= weights.sum()
    return n, d, float(np.max(np.abs(error)))


def fits() -> tuple[np.ndarray, np.ndarray, float, float]:
    """(P, Q, P's largest relative error, Q's) on dense grids of their intervals."""
    p = _fit(_erf_ratio, 0.0, 1.0, P_DEGREE)
    q = _fit(_scaled_tail, T_MIN, 1.0, Q_DEGREE)
    u = np.linspace(0, 1, 400001)
    t = np.linspace(T_MIN, 1, 400001)
    p_error = float(np.max(np.abs(_horner(p, 2 * u - 1) / _erf_ratio(u) - 1)))
    s = (2 * t - (1 + T_MIN)) / (1 - T_MIN)
    q_error = float(np.max(np.abs(_horner(q, s) / _scaled_tail(t) - 1)))
    return p, q, p_error, q_error


def main() -> None:
    n, d, r_error = rational_fit(*RATIONAL_DEGREES)
    print(f"erf N/D (degrees {RATIONAL_DEGREES}, largest relative error {r_error:.3g}):")
    print("(" + ", ".join(repr(float(c)) for c in n) + ")")
    print("(" + ", ".join(repr(float(c)) for c in d) + ")")
    p, q, p_error, q_error = fits()
    print(f"P (degree {P_DEGREE}, largest relative error {p_error:.3g}):")
    print("(" + ", ".join(repr(float(c)) for c in p) + ")")
    print(f"Q (degree {Q_DEGREE}, largest relative error {q_error:.3g}):")
    print("(" + ", ".join(repr(float(c)) for c in q) + ")")


if __name__ == "__main__":
    main()
