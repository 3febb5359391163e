"""Fits the approximations of the vectorised float32 erf and erfc
(c_backend/generators/vector_erf.py) and prints them, with the largest error of each fit.

Against SciPy's double precision erf and erfcx, on Chebyshev nodes, erfc's in double:

- erfc, |x| <= 1: erf(x) = x P(s), s = 2 x^2 - 1 (a Chebyshev fit, as monomials in s);
- erfc, 1 < |x| <= X_MAX: erfc(|x|) = exp(-x^2) Q(s) / |x|, 1/|x| mapped onto s in
  [-1, 1] (Q approximates x erfcx(x), smooth in 1/x and 1/sqrt(pi) at 1/x = 0).

and those of the float32-arithmetic erf (eight lanes where double has four), whose
coefficients are float32 values: each rounded in turn, the later ones refitted to
absorb that rounding (Lawson's iterations):

- |x| <= 1: erf(x) = x + x P32(x^2) (absolute error weighted: x P32 is at most a
  sixth of erf, so the final multiply-add's rounding dominates);
- 1 < |x| <= 4: erf(|x|) = 1 - E(z), E a polynomial of erfc in z over two pieces, z the
  piece mapped exactly onto [-1, 1]: NEAR32 for 1 < |x| <= 2 (z = 2|x| - 3), FAR32 for
  2 < |x| <= 4 (z = |x| - 3). Absolute error weighted: erf's ulp there is 2^-24 whatever
  erfc's size, so no exp and no division (once exp(-x^2) Q(1/|x|) / |x|).

and those of the float64 erf, by least squares in 40-digit arithmetic (mpmath) on
Chebyshev nodes, the coefficients rounded to double:

- |x| <= 1: erf(x) = x S64(x^2) (relative error weighted);
- 1 < |x| <= 6: erf(|x|) = 1 - exp(-x^2) T64(s) / |x|, s = 2.4 / |x| - 1.4 (T64
  approximates x erfcx(x); the error weighted by exp(-x^2) / x: what erf's is).

Run: python -m tensorjit.tools.fit_erf (the float64 fits need mpmath: pip install mpmath)
"""

from __future__ import annotations

import numpy as np
from numpy.polynomial import chebyshev
from scipy import special

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


FLOAT_P_DEGREE = 6
# erf's tail in float32: (piece's lower end, upper end, degree); z = (2|x| - lo - hi) /
# (hi - lo) is exact in float32 on both
TAIL32_PIECES = ((1.0, 2.0, 9), (2.0, ERF_X_MAX, 11))


def float32_fit(f, lo: float, hi: float, degree: int, variable) -> tuple[np.ndarray, float]:
    """(float32 coefficients in ``variable``(x), largest absolute error on a dense grid)
    of f on [lo, hi]: each coefficient rounded to float32 in turn and the later ones
    refitted to the rest of f (Lawson's iterations towards minimax)."""
    nodes = 8000
    x = 0.5 * (lo + hi) + 0.5 * (hi - lo) * np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)
    y = f(x)
    powers = np.vander(variable(x), degree + 1, increasing=True)
    fixed: list[float] = []
    for k in range(degree + 1):
        rest = y - powers[:, :k] @ np.array(fixed) if k else y
        weights = np.ones_like(x)
        for _ in range(60):
            root = np.sqrt(weights)
            c, *_ = np.linalg.lstsq(powers[:, k:] * root[:, None], rest * root, rcond=None)
            error = ((powers[:, :k] @ np.array(fixed)) if k else 0) + powers[:, k:] @ c - y
            weights = weights * np.abs(error)
            weights /= weights.sum()
        fixed.append(float(np.float32(c[0])))
    grid = np.linspace(lo, hi, 400001)
    values = np.vander(variable(grid), degree + 1, increasing=True) @ np.array(fixed)
    return np.array(fixed), float(np.max(np.abs(values - f(grid))))


def float32_fits() -> tuple[np.ndarray, list[np.ndarray], float, list[float]]:
    """(P32, the tail's pieces, their largest absolute errors)."""
    # erf(x) = x + x P32(x^2): P32 ~ 2/sqrt(pi) - 1 = 0.128 at 0, -0.16 at 1, so its
    # roundings weigh a quarter of x c0's (erf = x c0 + ..., 1.5 ulp near 1)
    p, p_error = float32_fit(
        lambda x: _erf_ratio(x * x) - 1, 0.0, 1.0, FLOAT_P_DEGREE, lambda x: x * x
    )
    pieces, errors = [], []
    for lo, hi, degree in TAIL32_PIECES:
        coefficients, error = float32_fit(
            special.erfc,
            lo,
            hi,
            degree,
            lambda x, lo=lo, hi=hi: (2 * x - (lo + hi)) / (hi - lo),
        )
        pieces.append(coefficients)
        errors.append(error)
    return p, pieces, p_error, errors


S64_DEGREE = 11
T64_DEGREE = 18


def _mp_least_squares(f, weight, variable, lo: float, hi: float, degree: int, nodes: int):
    """(double coefficients of p, largest weighted error |p(variable(x)) - f(x)| w(x) on
    a 2001-point grid) for the least-squares fit at ``nodes`` Chebyshev nodes of
    [lo, hi], all in mpmath's working precision."""
    import mpmath

    half = mpmath.mpf(1) / 2
    xs = [
        lo + (hi - lo) * (1 + mpmath.cos(mpmath.pi * (k + half) / nodes)) / 2 for k in range(nodes)
    ]
    system, rhs = mpmath.matrix(nodes, degree + 1), mpmath.matrix(nodes, 1)
    for i, x in enumerate(xs):
        w, v, power = weight(x), variable(x), mpmath.mpf(1)
        for j in range(degree + 1):
            system[i, j] = power * w
            power *= v
        rhs[i] = f(x) * w
    solution = mpmath.qr_solve(system, rhs)[0]
    coefficients = [float(solution[j]) for j in range(degree + 1)]
    worst = mpmath.mpf(0)
    for k in range(2001):
        x = lo + (hi - lo) * mpmath.mpf(k) / 2000
        v = variable(x)
        value = sum(mpmath.mpf(c) * v**j for j, c in enumerate(coefficients))
        worst = max(worst, abs((value - f(x)) * weight(x)))
    return np.array(coefficients), float(worst)


def float64_fits() -> tuple[np.ndarray, np.ndarray, float, float]:
    """(S64, T64, S64's largest relative error, T64's largest error of erf)."""
    import mpmath

    with mpmath.workdps(40):
        two_over_root_pi = 2 / mpmath.sqrt(mpmath.pi)

        def ratio(a):
            return mpmath.erf(a) / a if a else two_over_root_pi

        s64, s_error = _mp_least_squares(
            ratio, lambda a: 1 / ratio(a), lambda a: a * a, mpmath.mpf(0), mpmath.mpf(1),
            S64_DEGREE, 120,
        )  # fmt: skip
        t64, t_error = _mp_least_squares(
            lambda a: mpmath.erfc(a) * mpmath.exp(a * a) * a,
            lambda a: mpmath.exp(-a * a) / a,
            lambda a: mpmath.mpf("2.4") / a - mpmath.mpf("1.4"),
            mpmath.mpf(1), mpmath.mpf(6), T64_DEGREE, 160,
        )  # fmt: skip
    return s64, t64, s_error, t_error


def main() -> None:
    p, q, p_error, q_error = fits()
    print(f"P (degree {P_DEGREE}, largest relative error {p_error:.3g}):")
    print("(" + ", ".join(repr(float(c)) for c in p) + ")")
    print(f"Q (degree {Q_DEGREE}, largest relative error {q_error:.3g}):")
    print("(" + ", ".join(repr(float(c)) for c in q) + ")")
    p32, pieces, p32_error, piece_errors = float32_fits()
    print(f"P32 (degree {FLOAT_P_DEGREE}, largest error {p32_error:.3g}):")
    print("(" + ", ".join(repr(float(c)) for c in p32) + ")")
    for name, (lo, hi, degree), piece, error in zip(
        ("NEAR32", "FAR32"), TAIL32_PIECES, pieces, piece_errors
    ):
        print(f"{name}: erfc on [{lo}, {hi}] (degree {degree}, largest error {error:.3g}):")
        print("(" + ", ".join(repr(float(c)) for c in piece) + ")")
    s64, t64, s64_error, t64_error = float64_fits()
    print(f"S64 (degree {S64_DEGREE}, largest relative error {s64_error:.3g}):")
    print("(" + ", ".join(repr(float(c)) for c in s64) + ")")
    print(f"T64 (degree {T64_DEGREE}, largest error of erf {t64_error:.3g}):")
    print("(" + ", ".join(repr(float(c)) for c in t64) + ")")


if __name__ == "__main__":
    main()
