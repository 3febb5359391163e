"""C source generation for Elemwise (scalar ops and fused Composite programs) and Reduce.

Generated code is specialised to the dtypes, the number of dimensions, the static
broadcast pattern (a statically broadcastable dimension has stride 0 in the code) and
scalar constants (inlined as literals). Each Elemwise module has two entry points:
``tj_contig`` (every operand C-contiguous with the output's shape, or a single element:
one flat loop) and ``tj_strided`` (any byte strides, negative or zero, as NumPy gives
them). Semantics follow NumPy: values are converted to the dtype NumPy computes in, and
integer division and modulo round toward minus infinity (0 for a zero divisor). exp,
expm1, log, log1p and tanh (so sigmoid and softplus too), and float32 erf and erfc
(vector_erf.py), are branch-free helpers that the
compiler vectorises, not libm calls (HELPERS).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from string import Template
from typing import Any

import numpy as np

from tensorjit.plugins.c_backend.build import parallel
from tensorjit.plugins.c_backend.generators import vector_erf
from tensorjit.plugins.c_backend.generators.coalesce import merge_into_last
from tensorjit.plugins.c_backend.generators.polynomials import estrin, estrin_powers, horner
from tensorjit.plugins.cstyle.dialect import Dialect, Unsupported
from tensorjit.plugins.cstyle.elementwise import (
    contiguous_kernel,
    element_function,
    multi_element_function,
    typed_operands,
)
from tensorjit.plugins.cstyle.numpy_helpers import (
    HelperSpelling,
    float_helpers,
    integer_helpers,
    sigmoid_helper,
    softplus_helper,
    suffixed,
)
from tensorjit.plugins.cstyle.scalar import supported_names
from tensorjit.tensor.scalar import ScalarOp

C_TYPES = {
    "bool": "_Bool",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
    "float32": "float",
    "float64": "double",
}


def covered_by(plan: Callable[[Any], object]) -> Callable[[Any], bool]:
    """A test of whether a node has a C kernel: ``plan(node)`` (which builds what the
    kernel needs) raises no Unsupported."""

    def supported(node: Any) -> bool:
        try:
            plan(node)
        except Unsupported:
            return False
        return True

    return supported


# The host's spelling of the shared NumPy/SciPy helpers: always-inlined functions,
# libm's f-suffixed float names, the vectorisable exp and log1p below, and lgamma_r
# (lgamma writes the global signgam: a data race between threads).
HOST_SPELLING = HelperSpelling(
    qualifier="TJ_INLINE",
    int64="int64_t",
    uint64="uint64_t",
    math=lambda s: suffixed("f" if s == "f" else ""),
    exp=lambda s: f"tj_vexp_{s}",
    log1p=lambda s: f"tj_vlog1p_{s}",
    lgamma=lambda s: f"tj_lgamma_r_{s}",
)


def _reentrant_lgamma(t: str, s: str, suffix: str) -> str:
    return f"""
TJ_INLINE {t} tj_lgamma_r_{s}({t} x) {{
#if defined(__GLIBC__) && defined(__USE_MISC)
    int sign;
    return lgamma{suffix}_r(x, &sign);
#else
    return lgamma{suffix}(x);
#endif
}}
"""


PREAMBLE = (
    """#include <stdint.h>
#include <math.h>

#ifndef TJ_INLINE
/* Helpers are always inlined: gcc would call a large one, and a loop calling a function
   is not vectorised (softplus = exp then log1p was 10x slower than either alone). */
#define TJ_INLINE static inline __attribute__((always_inline))
#endif
"""
    + integer_helpers(HOST_SPELLING)
    + _reentrant_lgamma("double", "d", "")
    + _reentrant_lgamma("float", "f", "f")
    + float_helpers(HOST_SPELLING, "double", "d")
    + float_helpers(HOST_SPELLING, "float", "f")
)


# ---------------------------------------------------------------- vectorisable exp, log, tanh
# gcc does not vectorise a loop that calls libm's exp, log or tanh (a call per element,
# ~5 ns for exp, ~15 ns for tanh). Measured alternatives: glibc's libmvec (the simd
# attribute on the libm declarations) vectorises them without -ffast-math, but exists on
# x86-64 glibc only (tanh, log1p, expm1 from glibc 2.35), errs up to ~3 ulp (exp) and its
# log1p is slow. Instead, these branch-free versions (range reduction, a Taylor polynomial
# by Estrin's scheme, powers of two built from bits, the main sums kept exact (but float
# exp with FMA: Horner's rule, each step rounded once), special values by selects) let gcc
# vectorise any loop that calls them, on any target, about as fast as libmvec (AVX2) and
# as accurate as NumPy. Measured largest errors (ulp), float64:
# exp 0.76, log 0.66, log1p 0.66, expm1 1.29, tanh 1.99; float32: 0.94 (every float; 0.78
# without FMA), 0.64, 0.69, 1.06, 1.94; exp and log are correctly rounded 99% of the time.
# gcc if-converts the selects only under -fno-trapping-math (compiler.CFLAGS).
# tj_vexp_normal's domain starts here (per precision suffix): e^x of any x from here to 0
# is a normal number.
NORMAL_EXP_LO = {"d": "-708", "f": "-87"}


def _vector_constants(s: str) -> dict[str, str]:
    """The C literals of one precision ("d" or "f") for the template below."""
    from decimal import Decimal, localcontext

    double = s == "d"
    mant, bias = (52, 1023) if double else (23, 127)
    u = "uint64_t" if double else "uint32_t"

    def lit(x: float) -> str:
        return repr(x) if double else repr(float(np.float32(x))) + "f"

    with localcontext() as ctx:
        ctx.prec = 40
        ln2 = Decimal(2).ln()
    # ln2 = hi + lo with k * hi exact for every exponent k: hi has 32 (float: 14) bits.
    hi = float.fromhex("0x1.62e42feep-1" if double else "0x1.62e4p-1")
    factorials = [1 / math.factorial(n) for n in range(2, 14 if double else 8)]
    odd = [1 / n for n in range(3, 23 if double else 11, 2)]
    ones = 0x3FF0000000000000 if double else 0x3F800000
    half = 0x3FE6A09E667F3BCD if double else 0x3F3504F3  # sqrt(1/2)
    values = {
        "s": s,
        "t": "double" if double else "float",
        "u": u,
        "i": "int64_t" if double else "int32_t",
        "f": "" if double else "f",
        "fma": "FP_FAST_FMA" if double else "FP_FAST_FMAF",
        "mant": str(mant),
        "bias": str(bias),
        "half": lit(0.5),
        "shift": lit(1.5 * 2.0**mant),  # adding it rounds to an integer (in the low bits)
        "log2e": lit(1 / math.log(2)),
        "ln2_hi": lit(hi),
        "ln2_lo": lit(float(ln2 - Decimal(hi))),
        # Clamps that keep the results (inf, 0, -1, 1) but keep k inside tj_pow2i's range.
        "exp_hi": "710" if double else "89",
        "exp_lo": "-746" if double else "-104",
        "expm1_lo": "-40" if double else "-20",
        # e^x is normal (2^k with k >= the smallest normal exponent) from here on
        "normal_lo": NORMAL_EXP_LO[s],
        "kc_max": "60" if double else "30",
        "tanh_max": "22" if double else "10",
        "libm_log": "defined(__x86_64__) && !defined(__AVX2__)" if double else "0",
        "tail": estrin([lit(c) for c in factorials], "r", s),
        "tail_powers": estrin_powers("r", len(factorials), s),
        "atanh": estrin([lit(c) for c in odd], "z", s),
        "atanh_powers": estrin_powers("z", len(odd), s),
        "min_normal": lit(2.0 ** (1 - bias)),
        "denormal_scale": lit(2.0 ** (mant + 2)),
        "denormal_shift": str(mant + 2),
        "sqrt_half_offset": f"(({u}){ones - half:#x})",
        "int_magic": f"{(bias + mant) << mant:#x}",  # 2^mant, in bits
        "int_offset": lit(2.0**mant + bias),
        "recip_magic": f"{(2 * bias) << mant:#x}",
    }
    compensated = Template(_EXP_COMPENSATED).substitute(values)
    # float: tj_exp_poly_f where FMA is (the compensated form without: Horner's steps
    # would round twice each); double: always compensated (a Horner polynomial of degree
    # 13 would err more, not less)
    values["exp_reduced"] = (
        compensated
        if double
        else f"#ifdef FP_FAST_FMAF\n    return tj_exp_poly_f(x, k);\n#else\n{compensated}\n#endif"
    )
    return values


# e^r, r = x - k ln2, with r = rh + rl (rh exact) and 1 + rh = h + l exactly (Fast2Sum):
# only the final sum rounds (0.76 ulp, nearly always NumPy's value).
_EXP_COMPENSATED = """\
    const $t rh = TJ_MA_$s(-k, $ln2_hi, x), rl = -k * $ln2_lo;
    const $t h = 1 + rh, l = ((1 - h) + rh) + rl;
    return h + (l + tj_exp_tail_$s(rh + rl));"""


def _exp_poly_f(values: dict[str, str]) -> str:
    """tj_exp_poly_f: float's e^r in 11 operations, for tj_exp_reduced_f where FMA is;
    ``values``: float's _vector_constants."""
    hi, lo = values["ln2_hi"], values["ln2_lo"]  # (k * hi is exact)
    taylor = [repr(float(np.float32(1 / math.factorial(n)))) + "f" for n in range(8)]
    return f"""
TJ_INLINE float tj_exp_poly_f(float x, float k) {{
    /* e^r for r = x - k ln2 (|r| <= ln2/2): r in two multiply-adds, e^r's Taylor
       polynomial to r^7 by Horner's rule, one rounding per step with FMA (tj_vexp_f within
       0.94 ulp over every float, correctly rounded 99.5% of the time; a third fewer
       operations than the compensated form: float32 softmax 15% faster) */
    const float r = TJ_MA_f(-k, {lo}, TJ_MA_f(-k, {hi}, x));
    return {horner(taylor, "r", "f")};
}}
"""


_VECTOR_TEMPLATE = [
    (
        "tj_bits_$s",
        (),
        """
#ifdef $fma
#define TJ_MA_$s(a, b, c) fma$f(a, b, c)
#else
#define TJ_MA_$s(a, b, c) ((a) * (b) + (c))
#endif
typedef union { $t value; $u bits; } tj_pun_$s;
TJ_INLINE $u tj_bits_$s($t x) { tj_pun_$s p; p.value = x; return p.bits; }
TJ_INLINE $t tj_from_bits_$s($u b) { tj_pun_$s p; p.bits = b; return p.value; }
TJ_INLINE $t tj_pow2i_$s($t k) {
    /* 2^k for an integer-valued k of the normal range: k is in the low bits of k + shift */
    return tj_from_bits_$s((tj_bits_$s(k + $shift) + $bias) << $mant);
}
TJ_INLINE $t tj_clamp_$s($t x, $t lo, $t hi) {
    /* x limited to [lo, hi] for lo < 0 < hi, NaN kept. With AVX2 or AVX-512, by integer
       minimums of the bits: as signed integers the bits of x >= 0 order as the values and
       those of x < 0 are negative, so a signed min with hi's bits caps x >= 0 and leaves
       x < 0 alone; as unsigned ones every x < 0 lies above x >= 0 and orders by magnitude,
       so an unsigned min with lo's bits caps x < 0. There two float selects that keep NaN
       cost gcc four compares, a mask operation and two blends per vector (exp 20-30%
       faster without); SSE lacks the integer minimums (selects are faster). Same values. */
#if defined(__AVX2__)
    const $i b = ($i)tj_bits_$s(x), bh = ($i)tj_bits_$s(hi);
    const $u u = ($u)(b < bh ? b : bh), ul = tj_bits_$s(lo);
    const $t y = tj_from_bits_$s(u < ul ? u : ul);
    return x != x ? x : y;
#else
    x = x > hi ? hi : x;
    return x < lo ? lo : x;
#endif
}
""",
    ),
    (
        "tj_exp_tail_$s",
        ("tj_bits_$s",),
        """
TJ_INLINE $t tj_exp_tail_$s($t r) {
    /* e^r - 1 - r for |r| <= ln2/2: the Taylor series from r^2 */
    $tail_powers
    return r2 * $tail;
}
""",
    ),
    (
        "tj_vexp_$s",
        ("tj_exp_tail_$s",),
        """
TJ_INLINE $t tj_exp_reduced_$s($t x, $t k) {
    /* e^r for r = x - k ln2 (|r| <= ln2/2, k an integer) */
$exp_reduced
}
TJ_INLINE $t tj_vexp_$s($t x) {
    /* e^x = 2^k e^r with x = k ln2 + r. 2^k as two factors 2^k1 2^(k - k1): the product
       overflows to inf, or rounds once to a denormal or 0. */
    x = tj_clamp_$s(x, $exp_lo, $exp_hi);
    const $t k = TJ_MA_$s(x, $log2e, $shift) - $shift;
    const $t k1 = TJ_MA_$s(k, $half, $shift) - $shift;
    return tj_exp_reduced_$s(x, k) * tj_pow2i_$s(k1) * tj_pow2i_$s(k - k1);
}
""",
    ),
    (
        "tj_vexp_normal_$s",
        ("tj_vexp_$s",),
        """
TJ_INLINE $t tj_vexp_normal_$s($t x) {
    /* tj_vexp for x in [$normal_lo, 0] (or NaN), whose results are normal numbers: the
       same value (a normal result's two exact scalings are one), in one scaling and
       without the clamps; callers check the range for a whole chunk first */
    const $t k = TJ_MA_$s(x, $log2e, $shift) - $shift;
    return tj_exp_reduced_$s(x, k) * tj_pow2i_$s(k);
}
""",
    ),
    (
        "tj_vexpm1_$s",
        ("tj_exp_tail_$s",),
        """
TJ_INLINE $t tj_vexpm1_$s($t x) {
    /* e^x - 1 = 2^k ((c + r) + (e^r - 1 - r)) with c = 1 - 2^-k (exact while it matters),
       no cancellation; as in tj_vexp, c + rh = h + l exactly (|c| >= |rh| or c = 0) */
    const $t y = tj_clamp_$s(x, $expm1_lo, $exp_hi);
    const $t k = TJ_MA_$s(y, $log2e, $shift) - $shift;
    const $t rh = TJ_MA_$s(-k, $ln2_hi, y), rl = -k * $ln2_lo;
    const $t c = 1 - tj_pow2i_$s(-(k < $kc_max ? k : $kc_max));
    const $t h = c + rh, l = ((c - h) + rh) + rl;
    const $t k1 = TJ_MA_$s(k, $half, $shift) - $shift;
    const $t e = (h + (l + tj_exp_tail_$s(rh + rl))) * tj_pow2i_$s(k1);
    return x == 0 ? x : e * tj_pow2i_$s(k - k1); /* x == 0: keeps -0 */
}
""",
    ),
    (
        "tj_vtanh_$s",
        ("tj_vexpm1_$s",),
        """
TJ_INLINE $t tj_vtanh_$s($t x) {
    /* tanh|x| = e / d with e = expm1(2|x|), d = e + 2. The rounding error dl of d (exact, by
       Fast2Sum) is the largest error term for small |x|: q - q dl / d removes it, with a
       1/d from the bits (within 12.5%, enough for a correction below an ulp) */
    $t a = fabs$f(x);
    a = a > $tanh_max ? $tanh_max : a; /* beyond, tanh rounds to 1 */
    const $t e = tj_vexpm1_$s(2 * a), d = e + 2;
    const $t dl = e > 2 ? (e - d) + 2 : (2 - d) + e;
    const $t q = e / d, inv = tj_from_bits_$s($recip_magic - tj_bits_$s(d));
    return copysign$f(q - q * dl * inv, x);
}
""",
    ),
    (
        "tj_log_core_$s",
        ("tj_bits_$s",),
        """
TJ_INLINE $t tj_log_core_$s($t x, $t c) {
    /* log x + c for finite x > 0 and a small c: x = 2^e m, m in [sqrt(1/2), sqrt 2)
       (denormals scaled up first), f = m - 1 (exact), s = f / (2 + f) and log m =
       2 atanh s = 2s (1 + t), t = s^2/3 + s^4/5 + ... (|s| < 0.18), which is
       f - f^2/2 + s (f^2/2 + 2t). e ln2_hi + f - f^2/2 is summed exactly (Fast2Sum: each
       term outweighs the next, or e = 0; f^2's rounding error too where FMA is), so
       that only the last addition rounds much. */
    const $t y = x * (x < $min_normal ? $denormal_scale : 1);
    const $u eb = (tj_bits_$s(y) + $sqrt_half_offset) >> $mant; /* e + bias */
    const $t m = tj_from_bits_$s(tj_bits_$s(y) - ((eb - $bias) << $mant));
    const $t e = (tj_from_bits_$s($int_magic | eb) - $int_offset)
                 - (x < $min_normal ? $denormal_shift : 0);
    const $t f = m - 1, s = f / (2 + f), z = s * s;
    $atanh_powers
    const $t t = z * $atanh, ff = f * f, hfsq = ff / 2;
    const $t hfsq_lo = TJ_MA_$s(f, f, -ff) / 2; /* f^2/2 - hfsq: 0 without FMA */
    const $t a = e * $ln2_hi, h = a + f, l = (a - h) + f;
    const $t h2 = h - hfsq, l2 = (h - h2) - hfsq;
    const $t low = TJ_MA_$s(e, $ln2_lo, c) + (s * (hfsq + 2 * t) - hfsq_lo);
    return h2 + ((l + l2) + low);
}
""",
    ),
    (
        "tj_vlog_$s",
        ("tj_log_core_$s",),
        """
TJ_INLINE $t tj_vlog_$s($t x) {
#if $libm_log
    return log$f(x); /* x86-64 without AVX2: libm's log beats 2-wide SSE2 (4 ns vs 7) */
#else
    const $t l = tj_log_core_$s(x, 0);
    /* nested selects, not &&: gcc's SSE2 vectoriser fails on some mixes of masks */
    return x > 0 ? (x < INFINITY ? l : x) : (x == 0 ? -INFINITY : (x < 0 ? NAN : x));
#endif
}
""",
    ),
    (
        "tj_vlog1p_$s",
        ("tj_log_core_$s",),
        """
TJ_INLINE $t tj_vlog1p_$s($t x) {
    /* log u + (x - (u - 1)) / u with u = 1 + x: the quotient puts back what rounding u lost */
    const $t u = 1 + x, l = tj_log_core_$s(u, (x - (u - 1)) / u);
    return x > -1 ? (x < INFINITY ? (x == 0 ? x : l) : x)
                  : (x == -1 ? -INFINITY : (x < -1 ? NAN : x));
}
""",
    ),
]


def _vector_helpers() -> dict[str, tuple[tuple[str, ...], str]]:
    helpers: dict[str, tuple[tuple[str, ...], str]] = {}
    for s in ("d", "f"):
        values = _vector_constants(s)
        for name, deps, code in _VECTOR_TEMPLATE:
            needs = tuple(d.replace("$s", s) for d in deps)
            if name == "tj_vexp_$s" and s == "f":  # float's exp calls it where FMA is
                helpers["tj_exp_poly_f"] = (("tj_bits_f",), _exp_poly_f(values))
                needs += ("tj_exp_poly_f",)
            helpers[name.replace("$s", s)] = (needs, Template(code).substitute(values))
        t = values["t"]
        helpers[f"tj_sigmoid_{s}"] = ((f"tj_vexp_{s}",), sigmoid_helper(HOST_SPELLING, t, s))
        helpers[f"tj_softplus_{s}"] = (
            (f"tj_vexp_{s}", f"tj_vlog1p_{s}"),
            softplus_helper(HOST_SPELLING, t, s),
        )
    return helpers


# Functions libm lacks, in double precision (float32 is computed in double and rounded,
# as scipy.special does); a kernel's source gets only those its expressions call.
_PSI_POS_ROOT = (1.4616321449683622, 9.549995429965697e-17)  # hi + lo, the positive zero
_PSI_NEG_ROOT = (-0.5040830082644554, -8.15428206243813e-18)  # the zero in (-1, 0)
# Taylor coefficients psi^(n)(root) / n!, n = 1, 2, ... (mpmath, 60 digits).
_PSI_POS_TAYLOR = (
    0.9676722454476212, -0.4427631689835921, 0.258499760955651, -0.16394270544240652,
    0.10782405069126237, -0.07219956125645471, 0.04880428816414311, -0.03316112647484736,
    0.022597648232218104, -0.01542476590494896, 0.010538791616612175, -0.007204534386356869,
    0.004926781395729853, -0.003369801655439328, 0.002305126326734928, -0.0015769367714301972,
    0.0010788252019162967, -0.0007380709389960052, 0.000504953265834602,
    -0.0003454680251063077, 0.00023635601564027053, -0.00016170622091974803,
    0.0001106337276874741, -7.569179582195066e-05, 5.178575795222081e-05,
    -3.5430070947659604e-05, 2.424006611860132e-05, -1.6584242271854135e-05,
    1.134638458466385e-05, -7.762817668462094e-06, 5.3110609208898636e-06,
    -3.6336507898010456e-06, 2.486022733129538e-06, -1.7008538854332607e-06,
    1.1636675363548843e-06, -7.96142543124197e-07, 5.446941930669446e-07,
    -3.7266161283438227e-07, 2.549626552021554e-07, -1.7443695117727745e-07,
)  # fmt: skip
_PSI_NEG_TAYLOR = (
    8.939798558792134, -0.8093454625306507, 32.258572064915505, -2.761011648790828,
    128.27342343090902, -14.70672173553036, 513.2704629562862, -75.37700066344631,
    2055.5357119463315, -368.5783503832191, 8234.667099203069, -1743.364608867363,
    32997.785655255044, -8051.818155363498, 132262.95480834588, -36529.94596948565,
    530280.3912420176, -163451.79342700253, 2126602.3725968753, -723318.8861804305,
    8530604.878543982, -3172131.3155744765, 34228316.69580112, -13807481.997263888,
    137373435.87411496, -59721085.411294304,
)  # fmt: skip
# B_2k / (2k), k = 1..9: the asymptotic series of psi (enough for x >= 10).
_PSI_ASYMPTOTIC = (
    0.08333333333333333, -0.008333333333333333, 0.003968253968253968, -0.004166666666666667,
    0.007575757575757576, -0.021092796092796094, 0.08333333333333333, -0.4432598039215686,
    3.0539543302701198,
)  # fmt: skip


def _c_array(name: str, values: Sequence[float]) -> str:
    return f"static const double {name}[{len(values)}] = {{{', '.join(map(repr, values))}}};"


_PSI_SOURCE = f"""
{_c_array("tj_psi_pos", _PSI_POS_TAYLOR)}
{_c_array("tj_psi_neg", _PSI_NEG_TAYLOR)}
{_c_array("tj_psi_asy", _PSI_ASYMPTOTIC)}
static double tj_psi_taylor(double d, const double *c, int n) {{
    /* sum of c[k] d^(k+1): psi near one of its zeros, d = x - zero (psi(zero) = 0) */
    double s = c[n - 1];
    for (int k = n - 2; k >= 0; k--) s = s * d + c[k];
    return s * d;
}}
static double tj_psi_d(double x) {{
    /* The digamma function with scipy.special.psi's special values. x < 0: the
       reflection formula psi(x) = psi(1 - x) - pi / tan(pi x), except near the zero in
       (-1, 0), where a Taylor series about it keeps the relative error small. Then
       x < 1 moves up by one and 2 < x < 10 moves down into [1, 2] (x - 1 is exact there)
       by psi(x + 1) = psi(x) + 1/x; on [1, 2] the Taylor series about the zero of psi
       in there, and for x >= 10 the asymptotic series. */
    double acc = 0, z, s;
    if (x != x || x == INFINITY) return x;
    if (x == -INFINITY) return NAN;
    if (x == 0) return copysign(INFINITY, -x);
    if (x < 0) {{
        double r = x - trunc(x); /* exact, in (-1, 0] */
        if (fabs(x - ({_PSI_NEG_ROOT[0]!r})) < 0.1)
            return tj_psi_taylor((x - ({_PSI_NEG_ROOT[0]!r})) - ({_PSI_NEG_ROOT[1]!r}),
                                 tj_psi_neg, {len(_PSI_NEG_TAYLOR)});
        if (r == 0) return NAN; /* a pole */
        acc = -3.141592653589793 / tan(3.141592653589793 * r);
        x = 1 - x;
    }}
    if (x < 1) {{
        acc -= 1 / x;
        x += 1;
    }}
    while (x > 2 && x < 10) {{
        x -= 1;
        acc += 1 / x;
    }}
    if (x <= 2)
        return acc + tj_psi_taylor((x - {_PSI_POS_ROOT[0]!r}) - {_PSI_POS_ROOT[1]!r},
                                   tj_psi_pos, {len(_PSI_POS_TAYLOR)});
    z = 1 / (x * x);
    s = tj_psi_asy[{len(_PSI_ASYMPTOTIC) - 1}];
    for (int k = {len(_PSI_ASYMPTOTIC) - 2}; k >= 0; k--) s = s * z + tj_psi_asy[k];
    return acc + (log(x) - 0.5 / x - z * s);
}}
"""

_ERFINV_SOURCE = """
static double tj_erfinv_d(double y) {
    /* The inverse error function: a starting point within a few 1e-3 (the Maclaurin
       series for |y| <= 1/2, Winitzki's approximation beyond), then three Halley steps
       on erf(x) = |y|, written as erfc(x) = 1 - |y| (exact) near 1 where erfc keeps the
       relative accuracy. scipy.special.erfinv's special values: +0 for -0, +-inf at
       +-1 and NaN outside [-1, 1]. */
    double a = fabs(y), q = 1 - a, x, f, u;
    if (!(a < 1)) return a == 1 ? copysign(INFINITY, y) : NAN;
    if (y == 0) return 0;
    if (a <= 0.5) {
        double a2 = a * a;
        x = a * (0.886226925452758 + a2 * (0.2320136665346545
            + a2 * (0.12755617530559796 + a2 * 0.08655212924154754)));
    } else {
        double l = log(q * (1 + a)), b = 4.330746750799873 + 0.5 * l;
        x = sqrt(sqrt(b * b - l / 0.147) - b);
    }
    for (int i = 0; i < 3; i++) {
        f = a <= 0.5 ? erf(x) - a : q - erfc(x);
        u = f / (1.1283791670955126 * exp(-x * x));
        x -= u / (1 + x * u);
    }
    return copysign(x, y);
}
"""

SPECIAL_HELPERS = {"tj_psi_d": _PSI_SOURCE, "tj_erfinv_d": _ERFINV_SOURCE}
# Helper functions a kernel's source gets only if it calls them: name -> (the helpers it
# calls, its C), each after those it calls.
HELPERS = (
    _vector_helpers()
    | {name: ((), code) for name, code in SPECIAL_HELPERS.items()}
    | vector_erf.SOURCES
)


#: Above this many helper calls in one element function, helpers are only ``inline``
#: hints: forcing them inline would multiply the code (a fused chain of 5,000 tanh
#: compiled for over ten minutes), and a body that large does not vectorise anyway.
MAX_FORCED_INLINE_CALLS = 32


def inline_mode(body: str) -> str:
    """A definition of TJ_INLINE for ``body``'s source (before PREAMBLE), or ""."""
    calls = sum(body.count(f"{name}(") for name in HELPERS)
    return "#define TJ_INLINE static inline\n" if calls > MAX_FORCED_INLINE_CALLS else ""


def helper_sources(body: str) -> list[str]:
    """The C of the helpers that ``body`` calls, with those they call, in order."""
    needed = {name for name in HELPERS if f"{name}(" in body}
    for name in reversed(HELPERS):  # users come after what they call
        if name in needed:
            needed.update(HELPERS[name][0])
    return [code for name, (_, code) in HELPERS.items() if name in needed]


def _powi(x: str, n: int, t: str) -> str:
    """x**n for a constant 0 <= n <= 64 by squaring, written out (a GNU C statement
    expression): a loop over n's bits would keep gcc from vectorising the caller's loop.
    The products are those of the usual loop (r = 1; r *= x for each set bit, lowest
    first; x *= x), so the rounding is too."""
    lines, result, power, k = [f"{t} q1 = {x};"], None, "q1", 1
    while n:
        if n & 1:
            result = power if result is None else f"({result} * {power})"
        n >>= 1
        if n:
            lines.append(f"{t} q{2 * k} = q{k} * q{k};")
            k, power = 2 * k, f"q{2 * k}"
    return f"({{ {' '.join(lines)} ({t})({result or '1'}); }})"


# Unary float functions by libm: op name -> libm name (the float32 one has an "f" suffix).
_UNARY_FLOAT = {
    name: name for name in ("exp2", "log2", "log10", "sqrt") + ("sin", "cos", "tan", "sinh", "cosh")
}
_UNARY_FLOAT |= {"arc" + name: "a" + name for name in ("sin", "cos", "tan", "sinh", "cosh", "tanh")}
_UNARY_FLOAT["gamma"] = "tgamma"
# Unary float functions by a helper: op name -> helper prefix (tj_<prefix>_d or _f); exp,
# expm1, log, log1p and tanh by the vectorisable ones (tj_vexp_d ...), not libm's.
_UNARY_HELPER = {"sigmoid": "sigmoid", "softplus": "softplus", "gammaln": "lgamma"}
_UNARY_HELPER |= {name: "v" + name for name in ("exp", "expm1", "log", "log1p", "tanh")}
_UNARY_HELPER["round_half_away_from_zero"] = "round_away"
_UNARY_HELPER |= {"erf": "erf", "erfc": "erfc"}  # vectorised but float64 erfc (vector_erf.py)

# Elementwise loops carry no dependence between iterations (an operand overlapping the
# output in any other way than element for element is copied first), so they are marked
# for vectorisation: gcc then vectorises bodies whose selects it would not if-convert on
# its own (a fused cross-entropy with two softplus). Needs -fopenmp-simd (compiler.py).
SIMD = '_Pragma("omp simd") '

# The host C dialect of the shared renderer (plugins/cstyle): libm names, the vectorised
# helpers and GNU statement expressions are host-only.
C_DIALECT = Dialect(
    "C",
    C_TYPES,
    unary=_UNARY_FLOAT,
    helpers=_UNARY_HELPER,
    double_only={"psi": "tj_psi_d", "erfinv": "tj_erfinv_d"},
    powi=_powi,
    preamble=PREAMBLE,
    function_qualifier="TJ_INLINE",
    flat_loop=SIMD + "for (int64_t {i} = 0; {i} < {n}; {i}++)",
    signed_wraps=True,  # compiler.py's -fwrapv
)
SUPPORTED_NAMES = supported_names(C_DIALECT)


def ctype(dtype: str) -> str:
    return C_DIALECT.type_name(dtype)


def convert(expr: str, src: str, dst: str) -> str:
    return C_DIALECT.convert(expr, src, dst)


def literal(value: np.ndarray) -> str:
    """A C expression for a scalar constant, exactly its value."""
    return C_DIALECT.literal(value)


# Whole cache lines stored without reading them first (non-temporal stores) on x86-64,
# through compiler builtins: <immintrin.h> alone would add 0.2 s to every kernel's
# compile. Elsewhere, plain stores. The destination is a line-aligned cache line.
# tj_stream_line stores it in parts of 32 bytes with AVX (16 without); tj_stream_line_whole
# in one store of 64 bytes with AVX-512. Which is faster depends on the kernel, on this
# AMD Zen 5: one 64-byte store made the elementwise kernels over two arrays 5-10% slower
# at 10^7 elements, and a MomentsMap's rows (outputs stored row by row between their
# sums) 20% faster; each kernel uses the one measured best for it.
STREAM_STORES = """#define TJ_LINE_BYTES 64
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#if defined(__AVX__)
#define TJ_PART_BYTES 32
#else
#define TJ_PART_BYTES 16
#endif
typedef long long tj_line_part __attribute__((vector_size(TJ_PART_BYTES)));
#if defined(__clang__)
#define TJ_STORE_PART(dst, part) __builtin_nontemporal_store(part, dst)
#elif defined(__AVX__)
#define TJ_STORE_PART(dst, part) __builtin_ia32_movntdq256(dst, part)
#else
#define TJ_STORE_PART(dst, part) __builtin_ia32_movntdq(dst, part)
#endif
TJ_INLINE void tj_stream_line(void *dst, const void *src) {
    for (int k = 0; k < TJ_LINE_BYTES / TJ_PART_BYTES; k++) {
        tj_line_part part;
        __builtin_memcpy(&part, (const char *)src + TJ_PART_BYTES * k, TJ_PART_BYTES);
        TJ_STORE_PART((tj_line_part *)dst + k, part);
    }
}
#if defined(__AVX512F__) && !defined(__clang__)
typedef long long tj_line_whole __attribute__((vector_size(TJ_LINE_BYTES)));
TJ_INLINE void tj_stream_line_whole(void *dst, const void *src) {
    tj_line_whole line;
    __builtin_memcpy(&line, src, TJ_LINE_BYTES);
    __builtin_ia32_movntdq512((void *)dst, line);
}
#else
TJ_INLINE void tj_stream_line_whole(void *dst, const void *src) { tj_stream_line(dst, src); }
#endif
TJ_INLINE void tj_stream_fence(void) { __builtin_ia32_sfence(); }
#else
TJ_INLINE void tj_stream_line(void *dst, const void *src) {
    __builtin_memcpy(dst, src, TJ_LINE_BYTES);
}
TJ_INLINE void tj_stream_line_whole(void *dst, const void *src) { tj_stream_line(dst, src); }
TJ_INLINE void tj_stream_fence(void) {}
#endif
"""


def elemwise_source(
    scalar_op: ScalarOp,
    in_dtypes: Sequence[str],
    out_dtypes: Sequence[str],
    kinds: Sequence[str],
    bcast: Sequence[tuple[bool, ...]],
    consts: dict[int, np.ndarray],
    inplace: int | None,
) -> tuple[str, str]:
    """(C source, cffi cdef) for an Elemwise node (one dtype in ``out_dtypes``) or a
    MultiOutputElemwise node (a multi-output Composite, a dtype per output).

    ``kinds[i]`` is "const" (inlined), "scalar" (a single element: every dimension
    statically broadcastable) or "full". Variable inputs become operands in order; the
    outputs are the last operands, except in place, where input ``inplace`` is written.
    """
    ndim = len(bcast[0]) if bcast else 0
    var = [i for i, k in enumerate(kinds) if k != "const"]
    multi = len(out_dtypes) > 1
    if multi:
        function, body = multi_element_function(
            C_DIALECT, scalar_op, in_dtypes, out_dtypes, kinds, consts
        )
    else:
        function, body = element_function(
            C_DIALECT, scalar_op, in_dtypes, out_dtypes[0], kinds, consts
        )
    lines = [inline_mode(body), PREAMBLE, parallel.DECLARATIONS, STREAM_STORES]
    lines += [*helper_sources(body), *function]
    # Operands: the variable inputs, then the outputs unless written in place.
    ops = [(f"d{i}", in_dtypes[i], kinds[i], bcast[i]) for i in var]
    if inplace is not None:
        written = [(f"d{inplace}", out_dtypes[0])]
    else:
        written = [(f"dout{k}" if multi else "dout", dt) for k, dt in enumerate(out_dtypes)]
        ops += [(name, dt, "full", (False,) * ndim) for name, dt in written]
    names = [name for name, _ in written]

    def call(load: dict[str, str]) -> str:
        return "tj_f(" + ", ".join(load[f"d{i}"] for i in var) + ")"

    def store(load: dict[str, str], targets: Sequence[str]) -> str:
        """The statement writing one element of each output to ``targets``."""
        if not multi:
            return f"{targets[0]} = {call(load)};"
        fields = " ".join(f"{t} = tj_r.r{k};" for k, t in enumerate(targets))
        return f"{{ const tj_fr tj_r = {call(load)}; {fields} }}"

    def store_at(load: dict[str, str], index: str) -> str:
        return store(load, [f"p_{name}[{index}]" for name in names])

    # The contiguous entry points: one flat loop; and the same loop storing whole cache
    # lines with non-temporal stores, for outputs too large to keep cached (program.c
    # picks it; an in-place kernel has none, its output was read anyway, nor has one
    # with several outputs). Several outputs' pointers are not restrict: an output may
    # be an input's buffer (MultiOutputElemwise's in-place pairs); each element's
    # inputs are read before its outputs are stored, which "omp simd" keeps.
    sig = ", ".join(f"char *{name}" for name, *_ in ops)
    scalars = {name for name, _, kind, _ in ops if kind == "scalar"}
    # (one output of its own: restrict, and the streaming entries)
    streams = restrict = inplace is None and not multi
    lines += contiguous_kernel(C_DIALECT, "tj_contig_serial", ops, names, restrict, store_at)
    lines.append(f"static void tj_contig_stream_serial(int64_t n, {sig}) {{")
    if streams:
        tout = ctype(out_dtypes[0])
        setup, load = typed_operands(C_DIALECT, ops, names, scalars, restrict)
        out_at = f"p_{names[0]}"
        lines += setup
        lines += [
            "    int64_t i = 0;",
            f"    enum {{ LINE = TJ_LINE_BYTES / sizeof({tout}) }};",
            "    for (; i + LINE <= n; i += LINE) {",
            f"        {tout} line[LINE];",
            f"        {SIMD}for (int64_t k = 0; k < LINE; k++) line[k] = {call(load('i + k'))};",
            f"        tj_stream_line({out_at} + i, line);",
            "    }",
            f"    for (; i < n; i++) {out_at}[i] = {call(load('i'))};",
            "    tj_stream_fence();",
        ]
    else:
        lines.append(f"    tj_contig_serial(n, {', '.join(name for name, *_ in ops)});")
    lines.append("}")

    # The strided entry points: nested loops over byte strides; and the same loops
    # storing whole cache lines of rows contiguous in the output (a bias add, a layer
    # norm's last step: outputs broadcast from smaller operands), for program outputs too
    # large to keep cached.
    lines += _strided_function(ops, written, ndim, call, store, "tj_strided_serial", False)
    if streams:
        lines += _strided_function(
            ops, written, ndim, call, store, "tj_strided_stream_serial", True
        )
    else:
        shape_args = "".join(f"int64_t n{a}, " for a in range(ndim))
        stride_args = "".join(f", int64_t st_{n}_{a}" for n, *_ in ops for a in range(ndim))
        args = "".join(f"n{a}, " for a in range(ndim)) + ", ".join(n for n, *_ in ops)
        args += "".join(f", st_{n}_{a}" for n, *_ in ops for a in range(ndim))
        lines.append(
            f"static void tj_strided_stream_serial({shape_args}{sig}{stride_args}) "
            f"{{ tj_strided_serial({args}); }}"
        )
    lines += _parallel_entries(ops, ndim, parallel.grain_for(body))
    shape_decl = "".join("int64_t, " for _ in range(ndim))
    ptr_decl = ", ".join("char *" for _ in ops)
    stride_decl = "".join(", int64_t" for _ in ops for _ in range(ndim))
    cdef = parallel.CDEF + (
        f"void tj_contig(int64_t, {ptr_decl});\n"
        f"void tj_contig_stream(int64_t, {ptr_decl});\n"
        f"void tj_strided({shape_decl}{ptr_decl}{stride_decl});\n"
        f"void tj_strided_stream({shape_decl}{ptr_decl}{stride_decl});\n"
    )
    return "\n".join(lines) + "\n", cdef


def _strided_function(
    ops: list,
    written: Sequence[tuple[str, str]],
    ndim: int,
    call: Callable,
    store: Callable,
    name: str,
    stream: bool,
) -> list[str]:
    """``name(lengths, pointers, byte strides)``: loops over the axes, the last one
    vectorised where every operand moving along it is contiguous there; ``written``:
    (pointer, dtype) of each output; ``store(loads, targets)`` writes an element of
    each. ``stream`` (one output): that loop stores the output's aligned whole cache
    lines with non-temporal stores."""
    names = [w for w, _ in written]
    out_ptr, tout = names[0], ctype(written[0][1])
    sig = ", ".join(f"char *{n}" for n, *_ in ops)
    shape_args = "".join(f"int64_t n{a}, " for a in range(ndim))
    stride_args = "".join(f", int64_t st_{n}_{a}" for n, *_ in ops for a in range(ndim))
    lines = [f"static void {name}({shape_args}{sig}{stride_args}) {{"]
    # (axis 0 stays: the parallel entry splits it)
    lines += merge_into_last([(n, b) for n, _, _, b in ops], 1, ndim - 1)

    def stride(n: str, b: tuple, a: int) -> str | None:
        return None if b[a] else f"st_{n}_{a}"

    for n, *_ in ops:
        lines.append(f"    char *b_{n}_0 = {n};")
    indent = "    "
    for a in range(ndim - 1):
        lines.append(f"{indent}for (int64_t i{a} = 0; i{a} < n{a}; i{a}++) {{")
        indent += "    "
        for n, _, _, b in ops:
            s = stride(n, b, a)
            step = f" + i{a} * {s}" if s else ""
            lines.append(f"{indent}char *b_{n}_{a + 1} = b_{n}_{a}{step};")
    last = max(ndim - 1, 0)
    if ndim == 0:
        load = {n: f"*(const {ctype(dt)} *)b_{n}_0" for n, dt, *_ in ops}
        lines.append(f"{indent}{store(load, [f'*({ctype(dt)} *)b_{w}_0' for w, dt in written])}")
    else:
        a = ndim - 1
        moving = [(n, dt) for n, dt, _, b in ops if not b[a]]
        check = " && ".join(f"st_{n}_{a} == sizeof({ctype(dt)})" for n, dt in moving) or "1"
        lines.append(f"{indent}if ({check}) {{")
        setup, load = typed_operands(
            C_DIALECT,
            ops,
            names,
            {n for n, _, _, b in ops if b[a]},
            restrict=False,
            base=lambda n: f"b_{n}_{last}",
            indent=indent + "    ",
        )
        lines += setup
        out_at = f"p_{out_ptr}"
        if stream:
            # the elements before the first line boundary and after the last whole line
            # are stored as usual (each loop vectorised: gcc masks or peels it)
            inner = indent + "    "
            offset = f"((uintptr_t){out_at} & (TJ_LINE_BYTES - 1)) / sizeof({tout})"
            lines += [
                f"{inner}enum {{ LINE = TJ_LINE_BYTES / sizeof({tout}) }};",
                f"{inner}int64_t head = (LINE - {offset}) % LINE;",
                f"{inner}head = head < n{a} ? head : n{a};",
                f"{inner}const int64_t body = head + (n{a} - head) / LINE * LINE;",
                f"{inner}{SIMD}for (int64_t i = 0; i < head; i++) {out_at}[i] = {call(load('i'))};",
                f"{inner}for (int64_t i0 = head; i0 < body; i0 += LINE) {{",
                f"{inner}    {tout} line[LINE];",
                f"{inner}    {SIMD}for (int64_t k = 0; k < LINE; k++)",
                f"{inner}        line[k] = {call(load('i0 + k'))};",
                f"{inner}    tj_stream_line({out_at} + i0, line);",
                f"{inner}}}",
                f"{inner}{SIMD}for (int64_t i = body; i < n{a}; i++)",
                f"{inner}    {out_at}[i] = {call(load('i'))};",
            ]
        else:
            targets = [f"p_{w}[i]" for w in names]
            lines.append(
                f"{indent}    {SIMD}for (int64_t i = 0; i < n{a}; i++) {store(load('i'), targets)}"
            )
        lines.append(f"{indent}}} else {{")
        load = {}
        for n, dt, _, b in ops:
            s = stride(n, b, a)
            offset = f" + i * {s}" if s else ""
            load[n] = f"*(const {ctype(dt)} *)(b_{n}_{last}{offset})"
        patterns = {n: b for n, _, _, b in ops}
        targets = []
        for w, dt in written:
            s = stride(w, patterns[w], a)
            targets.append(f"*({ctype(dt)} *)(b_{w}_{last}{f' + i * {s}' if s else ''})")
        lines.append(f"{indent}    for (int64_t i = 0; i < n{a}; i++) {store(load, targets)}")
        lines.append(f"{indent}}}")
    for _ in range(ndim - 1):
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    if stream:
        lines.append("    tj_stream_fence();")
    lines.append("}")
    return lines


def _parallel_entries(ops: list, ndim: int, grain: int) -> list[str]:
    """``tj_contig``, ``tj_contig_stream`` and ``tj_strided`` over the pool: flat ranges
    of whole cache lines; the strided kernel's outermost axis."""
    pointers = [("char *", name) for name, *_ in ops]
    flat_steps = {name: f"sizeof({ctype(dt)})" for name, dt, kind, _ in ops if kind == "full"}
    flat = [("int64_t", "n"), *pointers]
    lines = [
        parallel.split_outer(name, flat, "n", flat_steps, "1", grain, parallel.LINE_ITEMS)
        for name in ("tj_contig", "tj_contig_stream")
    ]
    shape = [("int64_t", f"n{a}") for a in range(ndim)]
    strides = [("int64_t", f"st_{name}_{a}") for name, *_ in ops for a in range(ndim)]
    if ndim == 0:
        signature = ", ".join(f"{t} {n}" for t, n in pointers)
        call = ", ".join(n for _, n in pointers)
        lines.append(f"void tj_strided({signature}) {{ tj_strided_serial({call}); }}")
        lines.append(f"void tj_strided_stream({signature}) {{ tj_strided_serial({call}); }}")
        return lines
    steps = {name: f"st_{name}_0" for name, _, _, b in ops if not b[0]}
    per_item = " * ".join(f"n{a}" for a in range(1, ndim)) or "1"
    lines += [
        parallel.split_outer(name, shape + pointers + strides, "n0", steps, per_item, grain)
        for name in ("tj_strided", "tj_strided_stream")
    ]
    return lines
