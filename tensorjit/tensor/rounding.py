"""Bounds on how far two correct evaluations of a sum may differ.

A sum of n terms computed in any order is within gamma_n * sum(|terms|) of the exact
sum, gamma_n = n*u / (1 - n*u) with u the unit roundoff (Higham, "Accuracy and Stability
of Numerical Algorithms", section 4.2). Two correct kernels that sum in different orders
(NumPy's pairwise sum, an AVX2 or AVX-512 vector loop, another BLAS kernel) are then at
most twice that apart. DebugMode uses these bounds (``Op.rounding_bounds``) to compare
kernels with ``Op.perform`` on every CPU, whatever its vector width.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _unit_roundoff(dtype: Any) -> float | None:
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc":
        return None  # integer sums are exact
    return float(np.finfo(dtype).eps) / 2


def is_exact(dtype: Any) -> bool:
    """Whether sums in ``dtype`` are exact (integers, booleans): no bound applies."""
    return _unit_roundoff(dtype) is None


def abs_float64(value: Any) -> np.ndarray:
    """|value| in float64 (the modulus of a complex value, not of its real part)."""
    with np.errstate(all="ignore"):
        return np.abs(np.asarray(value)).astype(np.float64)


def summation_bound(abs_sum: Any, n_terms: int, dtype: Any) -> Any:
    """The largest difference between two correct sums of ``n_terms`` terms whose
    absolute values sum to ``abs_sum`` (an array of such sums, or a scalar), accumulated
    in ``dtype``. None for exact (integer) sums."""
    u = _unit_roundoff(dtype)
    if u is None:
        return None
    nu = (n_terms + 1) * u  # +1: the rounding of the result into dtype
    gamma = nu / (1 - nu) if nu < 0.5 else np.inf
    with np.errstate(all="ignore"):  # inf or NaN terms: the bound is inf or NaN too
        return 2 * gamma * np.abs(np.asarray(abs_sum, dtype=np.float64))


def product_bound(x: np.ndarray, y: np.ndarray, dtype: Any, extra_roundings: int = 0) -> Any:
    """``summation_bound`` for ``dot(x, y)`` (vectors or matrices): its terms are the
    products x[i, l] * y[l, j], summed over l; ``extra_roundings``: operations applied
    to the sum afterwards (a scaling, an addition)."""
    if is_exact(dtype):
        return None
    with np.errstate(all="ignore"):
        sums = np.dot(abs_float64(x), abs_float64(y))
    return summation_bound(sums, x.shape[-1] + extra_roundings, dtype)
