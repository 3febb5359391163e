"""The OpenCL C dialect of the shared renderer (plugins/cstyle).

OpenCL's math builtins are overloaded for float and double (no ``f`` suffix), 64-bit
integers are ``long``/``ulong``, and a bool is stored as a byte (``uchar``): OpenCL
kernels can not take ``bool`` buffers. The helpers mirror the host C backend's
definitions (NumPy's floor division and remainder, clip, rounding away from zero,
sigmoid and softplus as SciPy computes them) so both devices agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorjit.plugins.cstyle import Dialect
from tensorjit.plugins.cstyle.scalar import supported_names

TYPES = {
    "bool": "uchar",
    "int8": "char",
    "int16": "short",
    "int32": "int",
    "int64": "long",
    "uint8": "uchar",
    "uint16": "ushort",
    "uint32": "uint",
    "uint64": "ulong",
    "float32": "float",
    "float64": "double",
}


def _float_helpers(t: str, s: str) -> str:
    return f"""
inline {t} tj_divmod_{s}({t} a, {t} b, {t} *modulus) {{
    {t} div, mod, floordiv;
    mod = fmod(a, b);
    div = (a - mod) / b;
    if (mod) {{
        if ((b < 0) != (mod < 0)) {{ mod += b; div -= 1; }}
    }} else {{
        mod = copysign(({t})0, b);
    }}
    if (div) {{
        floordiv = floor(div);
        if (div - floordiv > ({t})0.5) floordiv += 1;
    }} else {{
        floordiv = copysign(({t})0, a / b);
    }}
    *modulus = mod;
    return floordiv;
}}
inline {t} tj_floordiv_{s}({t} a, {t} b) {{
    {t} m;
    if (!b) return a / b;
    return tj_divmod_{s}(a, b, &m);
}}
inline {t} tj_mod_{s}({t} a, {t} b) {{
    {t} m;
    if (!b) return fmod(a, b);
    tj_divmod_{s}(a, b, &m);
    return m;
}}
inline {t} tj_clip_{s}({t} x, {t} lo, {t} hi) {{
    {t} m = (x != x) ? x : (x > lo ? x : lo);
    return (m != m) ? m : (m < hi ? m : hi);
}}
inline {t} tj_round_away_{s}({t} x) {{
    {t} t = trunc(x);
    return t + (fabs(x - t) >= ({t})0.5 ? copysign(({t})1, x) : ({t})0);
}}
inline {t} tj_sigmoid_{s}({t} x) {{ return 1 / (1 + exp(-x)); }}
inline {t} tj_softplus_{s}({t} x) {{ return (x > 0 ? x : 0) + log1p(exp(-fabs(x))); }}
inline {t} tj_lgamma_{s}({t} x) {{ return x == -INFINITY ? x : lgamma(x); }}
"""


INTEGER_HELPERS = """
typedef long int64_t;
typedef ulong uint64_t;
#define INT64_C(x) (x##L)
#define UINT64_C(x) (x##UL)
#define INT64_MIN (-0x7fffffffffffffffL - 1)
inline long tj_floordiv_i(long a, long b) {
    long q;
    if (b == 0) return 0;
    if (b == -1) return (long)(0 - (ulong)a);
    q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}
inline long tj_mod_i(long a, long b) {
    long r;
    if (b == 0 || b == -1) return 0;
    r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}
inline ulong tj_floordiv_u(ulong a, ulong b) { return b ? a / b : 0; }
inline ulong tj_mod_u(ulong a, ulong b) { return b ? a % b : 0; }
"""

FP64 = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"

PREAMBLE_F32 = INTEGER_HELPERS + _float_helpers("float", "f")
PREAMBLE = FP64 + PREAMBLE_F32 + _float_helpers("double", "d")

_UNARY = {
    name: name
    for name in ("exp", "expm1", "log", "log1p", "tanh", "exp2", "log2", "log10", "sqrt")
    + ("erf", "erfc", "sin", "cos", "tan", "sinh", "cosh")
}
_UNARY |= {"arc" + name: "a" + name for name in ("sin", "cos", "tan", "sinh", "cosh", "tanh")}
_UNARY["gamma"] = "tgamma"
_HELPERS = {
    "sigmoid": "sigmoid",
    "softplus": "softplus",
    "gammaln": "lgamma",
    "round_half_away_from_zero": "round_away",
}

# A work-item computes a contiguous chunk of TJ_CHUNK elements (a build option, the
# kernel's tunable): on a CPU runtime (PoCL) chunks keep each core streaming through
# memory; a GPU prefers one element per work-item (TJ_CHUNK=1).
FLAT_LOOP = (
    "for (long {i} = get_global_id(0) * TJ_CHUNK, tj_end = min({i} + TJ_CHUNK, (long){n}); "
    "{i} < tj_end; {i}++)"
)


def _powi(x: str, n: int, t: str) -> str:
    """``x**n`` for a constant 0 <= n <= 64 by repeated squaring, as one expression (the
    device's ``pow`` costs ~100 ns an element on PoCL). The products are the host C
    dialect's, in its order (set bits lowest first), so the roundings are too; the
    repeated subexpressions are pure, and the compiler computes each once."""
    result, power = None, f"(({t}){x})"
    while n:
        if n & 1:
            result = power if result is None else f"({result} * {power})"
        n >>= 1
        if n:
            power = f"({power} * {power})"
    return result or f"(({t})1)"


@dataclass(frozen=True)
class OpenCLDialect(Dialect):
    """A bool is a byte here (``uchar``): converting to it tests for nonzero, as C's
    ``_Bool`` does (a plain ``(uchar)`` cast would truncate 0.5 and 256 to 0)."""

    def convert(self, expr: str, src: str, dst: str) -> str:
        if dst == "bool" and src != "bool":
            return f"((uchar)(({expr}) != 0))"
        return super().convert(expr, src, dst)


OPENCL_DIALECT = OpenCLDialect(
    "OpenCL",
    TYPES,
    math_suffix_f32=False,
    unary=_UNARY,
    helpers=_HELPERS,
    kernel_qualifier="__kernel",
    global_qualifier="__global",
    function_qualifier="inline",
    restrict="restrict",
    powi=_powi,
    flat_loop=FLAT_LOOP,
    preamble=PREAMBLE,
)
SUPPORTED_NAMES = supported_names(OPENCL_DIALECT)


def preamble(dtypes: set[str]) -> str:
    """The preamble for kernels on ``dtypes``: double helpers (and the fp64 extension)
    only where a double is used, so float32 kernels build on devices without fp64."""
    return PREAMBLE if "float64" in dtypes else PREAMBLE_F32
