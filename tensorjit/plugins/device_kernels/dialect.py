"""What the device dialects (OpenCL C, CUDA C++) share: a bool stored as a byte, the
index of the running work-item, and the helper functions the scalar renderer calls
(NumPy's floor division and remainder, clip, rounding away from zero, sigmoid and
softplus as SciPy computes them), written once with the dialect's function qualifier.
They mirror the host C backend's definitions, so every device agrees with the host.
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorjit.plugins.cstyle import Dialect

# dtype -> the type name both device dialects use (a CUDA preamble typedefs the short
# unsigned names); a bool is a byte: kernels can not take ``bool`` buffers in OpenCL.
DEVICE_TYPES = {
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


@dataclass(frozen=True)
class DeviceDialect(Dialect):
    """A device dialect: ``global_id`` is the expression of the running work-item's
    index along the launch (OpenCL ``get_global_id(0)``, CUDA's block and thread
    indices). A bool is a byte here (``uchar``): converting to it tests for nonzero,
    as C's ``_Bool`` does (a plain ``(uchar)`` cast would truncate 0.5 and 256 to 0)."""

    global_id: str = ""

    def convert(self, expr: str, src: str, dst: str) -> str:
        if dst == "bool" and src != "bool":
            return f"((uchar)(({expr}) != 0))"
        return super().convert(expr, src, dst)


def float_helpers(fn: str, t: str, s: str) -> str:
    """The helpers of float type ``t`` (suffix ``s``), each qualified by ``fn``."""
    return f"""
{fn} {t} tj_divmod_{s}({t} a, {t} b, {t} *modulus) {{
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
{fn} {t} tj_floordiv_{s}({t} a, {t} b) {{
    {t} m;
    if (!b) return a / b;
    return tj_divmod_{s}(a, b, &m);
}}
{fn} {t} tj_mod_{s}({t} a, {t} b) {{
    {t} m;
    if (!b) return fmod(a, b);
    tj_divmod_{s}(a, b, &m);
    return m;
}}
{fn} {t} tj_clip_{s}({t} x, {t} lo, {t} hi) {{
    {t} m = (x != x) ? x : (x > lo ? x : lo);
    return (m != m) ? m : (m < hi ? m : hi);
}}
{fn} {t} tj_round_away_{s}({t} x) {{
    {t} t = trunc(x);
    return t + (fabs(x - t) >= ({t})0.5 ? copysign(({t})1, x) : ({t})0);
}}
{fn} {t} tj_sigmoid_{s}({t} x) {{ return 1 / (1 + exp(-x)); }}
{fn} {t} tj_softplus_{s}({t} x) {{ return (x > 0 ? x : 0) + log1p(exp(-fabs(x))); }}
{fn} {t} tj_lgamma_{s}({t} x) {{ return x == -INFINITY ? x : lgamma(x); }}
"""


def integer_helpers(fn: str) -> str:
    """Integer floor division and remainder as NumPy's (division by zero gives 0)."""
    return f"""
{fn} long tj_floordiv_i(long a, long b) {{
    long q;
    if (b == 0) return 0;
    if (b == -1) return (long)(0 - (ulong)a);
    q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}}
{fn} long tj_mod_i(long a, long b) {{
    long r;
    if (b == 0 || b == -1) return 0;
    r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}}
{fn} ulong tj_floordiv_u(ulong a, ulong b) {{ return b ? a / b : 0; }}
{fn} ulong tj_mod_u(ulong a, ulong b) {{ return b ? a % b : 0; }}
"""


# Names of unary math functions, the same (overloaded for float and double) in both.
UNARY = {
    name: name
    for name in ("exp", "expm1", "log", "log1p", "tanh", "exp2", "log2", "log10", "sqrt")
    + ("erf", "erfc", "sin", "cos", "tan", "sinh", "cosh")
}
UNARY |= {"arc" + name: "a" + name for name in ("sin", "cos", "tan", "sinh", "cosh", "tanh")}
UNARY["gamma"] = "tgamma"
HELPERS = {
    "sigmoid": "sigmoid",
    "softplus": "softplus",
    "gammaln": "lgamma",
    "round_half_away_from_zero": "round_away",
}


def powi(x: str, n: int, t: str) -> str:
    """``x**n`` for a constant 0 <= n <= 64 by repeated squaring, as one expression (a
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
