"""NumPy's and SciPy's scalar semantics as C helper functions, written once for every
C-like backend (host C, OpenCL, CUDA).

The scalar renderer (scalar.py) calls ``tj_floordiv_*``, ``tj_mod_*``, ``tj_clip_*``,
``tj_round_away_*``, ``tj_sigmoid_*``, ``tj_softplus_*`` and ``tj_lgamma_*``; this module
is the one definition of what they compute. A backend only says how its language spells
things (``HelperSpelling``): the qualifier of a helper function, the 64-bit integer type
names, a float math function's name, and which exp/log1p/lgamma the SciPy helpers call
(the host gives its vectorisable exp and log1p and a thread-safe lgamma).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def suffixed(suffix: str) -> Callable[[str], str]:
    """Math names of C's libm for one float type: ``fmod`` -> ``fmodf`` for suffix "f"."""
    return lambda name: name + suffix


def overloaded(name: str) -> str:
    """Math names of a language that overloads them for float and double (OpenCL, CUDA)."""
    return name


@dataclass(frozen=True)
class HelperSpelling:
    """How one language spells the helpers.

    - ``qualifier``: what precedes each helper definition;
    - ``int64``, ``uint64``: the 64-bit integer type names;
    - ``math``: float type suffix ("d"/"f") -> (math function name -> its spelling);
    - ``exp``, ``log1p``, ``lgamma``: suffix -> the function the SciPy helpers call.
    """

    qualifier: str
    int64: str
    uint64: str
    math: Callable[[str], Callable[[str], str]]
    exp: Callable[[str], str]
    log1p: Callable[[str], str]
    lgamma: Callable[[str], str]


def integer_helpers(sp: HelperSpelling) -> str:
    """NumPy's integer floor division and remainder: rounding toward minus infinity,
    0 for a zero divisor, and the most negative value // -1 wrapping around."""
    q, i, u = sp.qualifier, sp.int64, sp.uint64
    return f"""
{q} {i} tj_floordiv_i({i} a, {i} b) {{
    {i} q;
    if (b == 0) return 0;
    if (b == -1) return ({i})(0 - ({u})a);
    q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}}
{q} {i} tj_mod_i({i} a, {i} b) {{
    {i} r;
    if (b == 0 || b == -1) return 0;
    r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}}
{q} {u} tj_floordiv_u({u} a, {u} b) {{ return b ? a / b : 0; }}
{q} {u} tj_mod_u({u} a, {u} b) {{ return b ? a % b : 0; }}
"""


def float_helpers(sp: HelperSpelling, t: str, s: str) -> str:
    """The helpers of float type ``t`` (helper suffix ``s``: "d" or "f")."""
    q, m = sp.qualifier, sp.math(s)
    return f"""
{q} {t} tj_divmod_{s}({t} a, {t} b, {t} *modulus) {{
    /* numpy's npy_divmod: the remainder takes the divisor's sign, the quotient is
       rounded to the nearest integer the remainder allows */
    {t} div, mod, floordiv;
    mod = {m("fmod")}(a, b);
    div = (a - mod) / b;
    if (mod) {{
        if ((b < 0) != (mod < 0)) {{ mod += b; div -= 1; }}
    }} else {{
        mod = {m("copysign")}(({t})0, b);
    }}
    if (div) {{
        floordiv = {m("floor")}(div);
        if (div - floordiv > ({t})0.5) floordiv += 1;
    }} else {{
        floordiv = {m("copysign")}(({t})0, a / b);
    }}
    *modulus = mod;
    return floordiv;
}}
{q} {t} tj_floordiv_{s}({t} a, {t} b) {{
    {t} m;
    if (!b) return a / b;
    return tj_divmod_{s}(a, b, &m);
}}
{q} {t} tj_mod_{s}({t} a, {t} b) {{
    {t} m;
    if (!b) return {m("fmod")}(a, b);
    tj_divmod_{s}(a, b, &m);
    return m;
}}
{q} {t} tj_clip_{s}({t} x, {t} lo, {t} hi) {{
    /* numpy.clip: minimum(maximum(x, lo), hi) where a NaN first operand wins, and the
       comparisons make a NaN bound win too (and a bound win a tie of signed zeros) */
    {t} m = (x != x) ? x : (x > lo ? x : lo);
    return (m != m) ? m : (m < hi ? m : hi);
}}
{q} {t} tj_round_away_{s}({t} x) {{
    /* trunc(x) + sign(x) where the dropped fraction (exact) is >= 1/2, as the Python
       kernel computes it: unlike C round, -0.3 gives +0.0 there */
    {t} t = {m("trunc")}(x);
    return t + ({m("fabs")}(x - t) >= ({t})0.5 ? {m("copysign")}(({t})1, x) : ({t})0);
}}
{q} {t} tj_lgamma_{s}({t} x) {{
    /* scipy.special.gammaln: log|gamma(x)|, but -inf at -inf */
    return x == -INFINITY ? x : {sp.lgamma(s)}(x);
}}
"""


def sigmoid_helper(sp: HelperSpelling, t: str, s: str) -> str:
    """scipy.special.expit's formula: 0 once e^-x overflows."""
    return f"{sp.qualifier} {t} tj_sigmoid_{s}({t} x) {{ return 1 / (1 + {sp.exp(s)}(-x)); }}\n"


def softplus_helper(sp: HelperSpelling, t: str, s: str) -> str:
    """log(1 + e^x) as max(x, 0) + log1p(e^-|x|): no overflow, no cancellation."""
    return (
        f"{sp.qualifier} {t} tj_softplus_{s}({t} x) {{\n"
        f"    return (x > 0 ? x : 0) + {sp.log1p(s)}({sp.exp(s)}(-{sp.math(s)('fabs')}(x)));\n"
        "}\n"
    )
