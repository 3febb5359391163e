"""Vectorisable float32 ``erf`` and ``erfc`` for the host C backend.

libm's ``erff``/``erfcf`` are a call per element, so a fused loop containing one is not
vectorised (10^6 float32 erf took 11.5 ms, exp 0.44 ms). These are branch-free (every
piece is computed and one selected), in double precision, rounded to float32 at the end:

- erf: x N(t) / D(t), t = x^2 / 16, |x| clamped to 4 (beyond 3.92 float32's erf is +-1);
- erfc, |x| <= 1: 1 - x P(2 x^2 - 1);
- erfc, 1 < |x| <= X_MAX: exp(-x^2) Q(s) / |x|, s the image of 1/|x| in [-1, 1] (x^2 is
  exact in double for a float32 x; tj_vexp_d is within an ulp of double's exp); beyond
  X_MAX, float32's erfc is 0 (2 for negative x), which the clamped tail gives.

N/D, P and Q come from ``python -m tensorjit.tools.fit_erf`` (largest relative errors
9.3e-10, 9.3e-13 and 1.6e-11, below float32's 6e-8), so a result is float32's correctly
rounded value except where the exact value lies that close to a rounding boundary: at
most 1 ulp from SciPy's double erf/erfc rounded to float32, checked by
tests/plugins/c_backend/test_c_vector_erf.py over [-11, 11] and measured by
benchmarks/erf_accuracy.py (benchmarks/RESULTS.md has the counts). NaN stays NaN, -0
gives -0 (erf), +-inf gives +-1 (erf), 0 and 2 (erfc).
float64 erf and erfc stay libm's calls.
"""

from __future__ import annotations

from tensorjit.plugins.c_backend.polynomials import estrin, estrin_powers

# python -m tensorjit.tools.fit_erf: erf's N/D (degrees 6, 6), erfc's P and Q (8, 16)
N = (
    1.1283791681456747, 2.670459334606656, 13.040277192627345, 12.107922777177585,
    20.038420693777464, -0.3025155912367342, -0.7522710909000956,
)  # fmt: skip
D = (
    1.0, 7.699966919867724, 27.023066985018424, 55.260983329538334, 68.14907112671426,
    42.99258851541858, -10.402983805519911,
)  # fmt: skip
P = (
    0.9654687386698851, -0.14053608901552944, 0.019852496688084344, -0.002285485656954685,
    0.0002175171632333989, -1.7536824686368907e-05, 1.2233626128540118e-06,
    -7.557492890686303e-08, 4.138779766424889e-09,
)  # fmt: skip
Q = (
    0.5024375941379418, -0.07659085613249968, -0.0041624411732492424, 0.009009783381359732,
    -0.004000796328211801, 0.0009268161933066505, 9.984839048443711e-05,
    -0.00023840207531399582, 0.00014716412572001825, -5.550502830050091e-05,
    9.955402250736767e-06, 1.4780352927984126e-06, -4.9160238023586555e-06,
    7.691628823849662e-06, -3.6260470877426805e-06, -1.1773140423639678e-06,
    9.649895994105191e-07,
)  # fmt: skip
X_MAX = 10.1
T_MIN = 1 / X_MAX


def _literals(coefficients: tuple[float, ...]) -> list[str]:
    return [repr(c) for c in coefficients]


SOURCES = {
    "tj_erf_f": (
        ("tj_bits_d",),
        f"""
TJ_INLINE float tj_erf_f(float x) {{
    const double c = x > 4 ? 4 : (x < -4 ? -4 : x); /* NaN stays NaN */
    const double t = c * c * 0.0625;
    {estrin_powers("t", len(N), "d")}
    const double n = {estrin(_literals(N), "t", "d")};
    const double d = {estrin(_literals(D), "t", "d")};
    return (float)(c * (n / d));
}}
""",
    ),
    "tj_erf_core_d": (
        ("tj_vexp_d",),
        f"""
TJ_INLINE double tj_erf_small_d(double x) {{
    /* erf(x) for |x| <= 1 (finite, unused, beyond), to 1e-12: erfc's 1 - erf keeps it */
    const double s = 2 * (x * x) - 1;
    {estrin_powers("s", len(P), "d")}
    return x * {estrin(_literals(P), "s", "d")};
}}
TJ_INLINE double tj_erfc_tail_d(double a) {{
    /* erfc(a) for a >= 0, clamped into [1, {X_MAX!r}] (NaN stays NaN) */
    a = a < 1 ? 1 : (a > {X_MAX!r} ? {X_MAX!r} : a);
    const double t = 1 / a, s = (2 * t - {1 + T_MIN!r}) * {1 / (1 - T_MIN)!r};
    {estrin_powers("s", len(Q), "d")}
    return tj_vexp_d(-(a * a)) * {estrin(_literals(Q), "s", "d")} * t;
}}
""",
    ),
    "tj_erfc_f": (
        ("tj_erf_core_d",),
        """
TJ_INLINE float tj_erfc_f(float x) {
    const double d = x, a = fabs(d), tail = tj_erfc_tail_d(a);
    return (float)(a <= 1 ? 1 - tj_erf_small_d(d) : (d > 0 ? tail : 2 - tail));
}
""",
    ),
    # float64 keeps libm's (its accuracy needs longer fits: a later step)
    "tj_erf_d": ((), "TJ_INLINE double tj_erf_d(double x) { return erf(x); }\n"),
    "tj_erfc_d": ((), "TJ_INLINE double tj_erfc_d(double x) { return erfc(x); }\n"),
}
