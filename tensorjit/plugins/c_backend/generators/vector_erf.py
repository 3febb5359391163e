"""Vectorisable ``erf`` (float32 and float64) and float32 ``erfc`` for the host C
backend.

libm's ``erff``/``erfcf`` are a call per element, so a fused loop containing one is not
vectorised (benchmarks/RESULTS.md has the times). These are branch-free (every piece is
computed and one selected):

- erf, in float arithmetic (eight lanes with AVX2): |x| <= 1: x + x P32(x^2), one
  multiply-add's rounding (P32 is a correction of at most a sixth of erf); 1 < |x|
  <= 4: 1 - erfc(|x|), erfc a polynomial on each of [1, 2] and [2, 4] (NEAR32, FAR32,
  by Horner's rule in the piece mapped exactly onto [-1, 1]): erf's ulp there is 2^-24
  whatever erfc's size, so erfc needs only absolute accuracy, and neither exp nor a
  division (with exp(-x^2) Q(1/|x|) / |x|: 0.76 ns an element, 0.70 without); |x|
  clamped to 4 (beyond 3.92 float32's erf is +-1);
- erfc, in double, rounded once: |x| <= 1: 1 - x P(2 x^2 - 1); 1 < |x| <= X_MAX:
  exp(-x^2) Q(s) / |x| (x^2 is exact in double for a float32 x; tj_vexp_d is within an
  ulp of double's exp); beyond X_MAX, float32's erfc is 0 (2 for negative x), which the
  clamped tail gives (erfc's relative accuracy in its tail needs double's exp).

- float64 erf: |x| <= 1: x c0 + x u S1(u), u = x^2 (the leading product exact inside an
  FMA); 1 < |x| <= 6: 1 - exp(-x^2) T64(s) / |x| with exp(-x^2) from x^2's rounded value
  and its error (exact with FMA); beyond 5.93 double's erf is +-1.

P32, NEAR32 and FAR32, P and Q, S64 and T64 come from ``python -m tensorjit.tools.fit_erf``. The
float32 ones are at most 1 ulp from SciPy's double erf/erfc rounded to float32, float64
erf at most 1 ulp from the correctly rounded value (2 without FMA), checked by
tests/plugins/c_backend/test_c_vector_erf.py and measured by benchmarks/erf_accuracy.py
and special_accuracy.py (benchmarks/RESULTS.md has the counts). NaN stays NaN, -0 gives
-0 (erf), +-inf gives +-1 (erf), 0 and 2 (erfc). float64 erfc stays libm's call.
"""

from __future__ import annotations

from tensorjit.plugins.c_backend.generators.polynomials import estrin, estrin_powers, horner

# python -m tensorjit.tools.fit_erf: erfc's P and Q (degrees 8, 16)
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
# float32 erf in float arithmetic (fit_erf's float32 fits, float32 values): x + x P32(x^2)
# for |x| <= 1 (largest error of P32 1.3e-9); 1 - NEAR32(2|x| - 3) for 1 < |x| <= 2 and
# 1 - FAR32(|x| - 3) for 2 < |x| <= 4, erfc's polynomials (largest errors 1.8e-9 and
# 7.4e-10, against erf's half ulp 3e-8)
P32 = (
    0.12837916612625122, -0.3761262893676758, 0.11283618211746216, -0.02685512602329254,
    0.005190733820199966, -0.0008030761382542551, 7.920368079794571e-05,
)  # fmt: skip
NEAR32 = (
    0.0338948518037796, -0.05946514382958412, 0.044598910957574844, -0.017344016581773758,
    0.0027871846687048674, 0.00046468075015582144, -0.0003016388800460845,
    3.6767985875485465e-05, 9.16071621759329e-06, -3.024359557457501e-06,
)  # fmt: skip
FAR32 = (
    2.2091193386586383e-05, -0.00013925008533988148, 0.00041770635289140046,
    -0.0007891752757132053, 0.0010450483532622457, -0.0010160114616155624,
    0.0007350787054747343, -0.0003922044124919921, 0.00014103167632129043,
    -1.1560652637854218e-05, -2.2080344933783635e-05, 9.342105840914883e-06,
)  # fmt: skip
# float64 erf (fit_erf's float64 fits, least squares in 40 digits: largest errors 1.8e-17
# relative and 6.6e-18 of erf): x S64(x^2) for |x| <= 1; 1 - exp(-x^2) T64(s) / |x| for
# 1 < |x| <= 6, s = 2.4 / |x| - 1.4 in [-1, 1] (beyond 5.93 double's erf is +-1)
S64 = (
    1.1283791670955126, -0.37612638903183593, 0.11283791670946516, -0.026866170643424187,
    0.005223977608359273, -0.0008548326025302988, 0.00012055296182552283,
    -1.4924758260307543e-05, 1.6447656865154593e-06, -1.6210067169629653e-07,
    1.3726218004447581e-08, -7.806297622140089e-10,
)  # fmt: skip
T64 = (
    0.49666648512593875, -0.07128287792547476, -0.0019368880677121262, 0.006219717587738716,
    -0.002669343030629289, 0.0006408677413213794, -2.4390260537824863e-06,
    -9.303457568082257e-05, 5.951617596153019e-05, -2.385635246202767e-05,
    5.901824001150202e-06, 2.1445613154952345e-07, -1.2966217065250052e-06,
    9.302204269180138e-07, -4.359814681340764e-07, 1.3515948922669069e-07,
    -1.863871960337211e-08, -3.1397008030869608e-09, 1.2244056760934664e-09,
)  # fmt: skip
X_MAX = 10.1
T_MIN = 1 / X_MAX


def _literals(coefficients: tuple[float, ...]) -> list[str]:
    return [repr(c) for c in coefficients]


def _float_literals(coefficients: tuple[float, ...]) -> list[str]:
    """float32 constants (exact: each coefficient is a float32 value)."""
    return [f"{float(c)!r}f" for c in coefficients]


SOURCES = {
    "tj_erf_f": (
        ("tj_bits_f", "tj_bits_d"),  # TJ_MA_f, TJ_MA_d
        f"""
TJ_INLINE float tj_erf_f(float x) {{
    /* in float arithmetic: eight lanes. Beyond 3.92 float32's erf is +-1; NaN stays NaN.
       Each piece's variable (2a - 3, a - 3) is exact */
    const float a = fabsf(x) > 4 ? 4 : fabsf(x), u = a * a;
    /* a + a P32(u), rounded once: within 0.99 ulp (a c0 + a u P1(u), with a c0 rounded
       or the P1 term at twice P32's size, was 1.6 ulp near 1) */
#ifdef FP_FAST_FMAF
    const float small = fmaf(a, {horner(_float_literals(P32), "u", "f")}, a);
#else /* two roundings a step would cost 1.2 ulp: the polynomial in double */
    const double ud = (double)a * a;
    const float small = (float)((double)a + (double)a * {horner(_literals(P32), "ud", "d")});
#endif
    const float near = 2 * a - 3, far = a - 3;
    const float erfc_near = {horner(_float_literals(NEAR32), "near", "f")};
    const float erfc_far = {horner(_float_literals(FAR32), "far", "f")};
    return copysignf(a <= 1 ? small : 1 - (a <= 2 ? erfc_near : erfc_far), x); /* keeps -0 */
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
    # float64 erfc keeps libm's (its tail needs relative accuracy out to 27)
    "tj_erf_d": (
        ("tj_vexp_d",),
        f"""
TJ_INLINE double tj_erf_d(double x) {{
    /* exp(-a^2) as exp(-u) (1 - lo), a^2 = u + lo (lo exact with FMA; without, the
       rounding costs at most a^2 erfc(a) 2^-53 <= 0.16 ulp of erf); NaN stays NaN */
    const double a = fabs(x) > 6 ? 6 : fabs(x), u = a * a, t = 1 / a;
    {estrin_powers("u", len(S64) - 1, "d")}
    /* a c0 + a u S1(u): the leading product exact inside the FMA (S64(u) rounded first
       would cost an ulp of a result in a lower binade) */
    const double small = TJ_MA_d(a, {S64[0]!r}, a * (u * {estrin(_literals(S64[1:]), "u", "d")}));
    const double lo = TJ_MA_d(a, a, -u), s = TJ_MA_d(t, 2.4, -1.4);
    {estrin_powers("s", len(T64), "d")}
    const double tail = 1 - tj_vexp_d(-u) * (1 - lo) * {estrin(_literals(T64), "s", "d")} * t;
    return copysign(a <= 1 ? small : tail, x); /* keeps -0 */
}}
""",
    ),
    "tj_erfc_d": ((), "TJ_INLINE double tj_erfc_d(double x) { return erfc(x); }\n"),
}
