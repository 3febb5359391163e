"""What the device dialects (OpenCL C, CUDA C++) share: a bool stored as a byte, the
index of the running work-item, and the devices' spelling of the helper functions the
scalar renderer calls (NumPy's floor division and remainder, clip, rounding away from
zero, sigmoid and softplus as SciPy computes them): the helpers themselves are
cstyle/numpy_helpers.py's, the host C backend's too, so every device agrees with the host.
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorjit.plugins.cstyle import Dialect
from tensorjit.plugins.cstyle.numpy_helpers import (
    HelperSpelling,
    float_helpers,
    integer_helpers,
    overloaded,
    sigmoid_helper,
    softplus_helper,
)

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

# The short unsigned names (OpenCL's builtins) in plain C, for a dialect whose compiler
# lacks them (CUDA's, the host's) and for declarations parsed without the typedefs (cffi).
UNSIGNED_NAMES = {
    "uchar": "unsigned char",
    "ushort": "unsigned short",
    "uint": "unsigned int",
    "ulong": "unsigned long",
}
UNSIGNED_TYPEDEFS = "\n".join(f"typedef {c} {name};" for name, c in UNSIGNED_NAMES.items())


@dataclass(frozen=True)
class DeviceDialect(Dialect):
    """A device dialect: ``global_id`` is the expression of the running work-item's
    index along the launch (OpenCL ``get_global_id(0)``, CUDA's block and thread
    indices). A bool is a byte here (``uchar``): converting to it tests for nonzero,
    as C's ``_Bool`` does (a plain ``(uchar)`` cast would truncate 0.5 and 256 to 0)."""

    global_id: str = ""
    # Work-groups (kernels with a group-wide tree): the running group's index, the
    # work-item's index in it, the qualifier of memory the group shares, and a barrier
    # for that memory. Empty where the dialect has no work-groups (the host target).
    group_id: str = ""
    local_id: str = ""
    local_qualifier: str = ""
    local_barrier: str = ""

    def convert(self, expr: str, src: str, dst: str) -> str:
        if dst == "bool" and src != "bool":
            return f"((uchar)(({expr}) != 0))"
        return super().convert(expr, src, dst)


def helper_spelling(qualifier: str) -> HelperSpelling:
    """The device dialects' spelling of the shared helpers (cstyle/numpy_helpers.py):
    ``long``/``ulong``, overloaded math functions, the device's own exp, log1p, lgamma."""
    return HelperSpelling(
        qualifier=qualifier,
        int64="long",
        uint64="ulong",
        math=lambda s: overloaded,
        exp=lambda s: "exp",
        log1p=lambda s: "log1p",
        lgamma=lambda s: "lgamma",
    )


def device_helpers(qualifier: str, float_types: tuple[str, ...]) -> str:
    """The integer helpers and those of each float type (``float``, ``double``)."""
    spelling = helper_spelling(qualifier)
    parts = [integer_helpers(spelling)]
    for t in float_types:
        s = "d" if t == "double" else "f"
        parts += [
            float_helpers(spelling, t, s),
            sigmoid_helper(spelling, t, s),
            softplus_helper(spelling, t, s),
        ]
    return "".join(parts)


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
