"""Polynomials as C expressions for the vectorised helpers (codegen.py, vector_erf.py):
Estrin's scheme, whose dependency chain grows with the log of the degree, so a
vectorised loop keeps its multiply-add units busy, and Horner's rule, one multiply-add a
coefficient, where its rounding error is what matters."""

from __future__ import annotations

from collections.abc import Sequence


def estrin_powers(x: str, n: int, s: str) -> str:
    """Declarations of x^2, x^4, ... as Estrin's scheme uses them for n coefficients
    (``s``: "d" double, "f" float)."""
    names, k = [], 2
    while k < n:
        names.append(f"{x}{k} = {x}{k // 2 if k > 2 else ''} * {x}{k // 2 if k > 2 else ''}")
        k *= 2
    return f"const {'double' if s == 'd' else 'float'} {', '.join(names)};" if names else ""


def estrin(coeffs: Sequence[str], x: str, s: str) -> str:
    """c0 + c1 x + c2 x^2 + ... as pairs (c0 + c1 x), combined with x^2, then x^4, ...
    (``TJ_MA_<s>`` is the multiply-add: fused where the target has FMA)."""
    terms, power = list(coeffs), x
    while len(terms) > 1:
        pairs = [terms[i : i + 2] for i in range(0, len(terms), 2)]
        terms = [f"TJ_MA_{s}({p[1]}, {power}, {p[0]})" if len(p) == 2 else p[0] for p in pairs]
        power = f"{x}2" if power == x else f"{x}{2 * int(power[len(x) :])}"
    return terms[0]


def horner(coeffs: Sequence[str], x: str, s: str) -> str:
    """c0 + c1 x + ... by Horner's rule: one multiply-add a coefficient, each partial sum
    rounded once (Estrin's rounds its pairs apart and adds them). Its chain is long, but
    a loop's iterations are independent: they overlap."""
    result = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        result = f"TJ_MA_{s}({result}, {x}, {c})"
    return result
