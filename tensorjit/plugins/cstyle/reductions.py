"""What a reduction computes, decided once for every backend's reduction loops: the
host's vectorised lanes (c_backend/generators/reduction.py) and the devices' work-item
and work-group trees (device_kernels/reductions.py) each render their own loops (their
schedule: where a partial result starts, how partial results meet) and take these
choices from here:

- the accumulator (``accumulator_dtype``): float32 sums and products in double where the
  target has it (within float tolerance of NumPy's pairwise sums at any length); all and
  any in bool; max and min in the input's dtype; integer sums and products wrap as
  NumPy's do: in the unsigned type of the same width where the dialect's signed
  arithmetic is not defined to wrap;
- an element enters a sum or a product as the result's dtype holds it, then the
  accumulator's (NumPy casts each element to the result dtype: ``x.sum(dtype=...)``);
  all and any read it as ``!= 0`` (``term``);
- partial results combine branch-free, NaN winning max and min as in NumPy's
  ``maximum.reduce``; a sum or product into a bool result is NumPy's add or multiply of
  booleans: or, and (``combine``); sums, products, all and any start from their neutral
  element (``neutral``; max and min have none that NaN-propagation keeps: a schedule
  starts them from an element, or from the type's extreme where it has no element yet).
"""

from __future__ import annotations

from collections.abc import Callable

KINDS = ("sum", "prod", "max", "min", "all", "any")
EXTREMES = ("max", "min")
_UNSIGNED = {"int8": "uint8", "int16": "uint16", "int32": "uint32", "int64": "uint64"}
_COMBINE = {
    "sum": "{a} + {b}",
    "prod": "{a} * {b}",
    "max": "(({a} >= {b}) | ({a} != {a})) ? {a} : {b}",
    "min": "(({a} <= {b}) | ({a} != {a})) ? {a} : {b}",
    "all": "{a} && {b}",
    "any": "{a} || {b}",
}
_NEUTRAL = {"sum": "0", "prod": "1", "all": "1", "any": "0"}


def accumulator_dtype(
    kind: str, in_dtype: str, out_dtype: str, has_fp64: bool, signed_wraps: bool
) -> str:
    """The dtype partial results of ``kind`` are kept in."""
    if kind in ("all", "any"):
        return "bool"
    if kind in EXTREMES:
        return in_dtype
    if out_dtype == "float32" and has_fp64:
        return "float64"
    return wrapping_dtype(out_dtype, signed_wraps)


def wrapping_dtype(dtype: str, signed_wraps: bool) -> str:
    """The dtype integer arithmetic of ``dtype`` wraps in as NumPy's does: ``dtype``
    itself, or its unsigned twin where the dialect's signed overflow is undefined."""
    return dtype if signed_wraps else _UNSIGNED.get(dtype, dtype)


def term(
    kind: str,
    value: str,
    in_dtype: str,
    out_dtype: str,
    acc_dtype: str,
    convert: Callable[[str, str, str], str],
) -> str:
    """C: element ``value`` (of ``in_dtype``) as the accumulator takes it; ``convert``:
    the dialect's ``(expression, from dtype, to dtype) -> expression``."""
    if kind in ("all", "any"):
        return f"(({value}) != 0)"
    if kind in EXTREMES:
        return value
    return convert(convert(value, in_dtype, out_dtype), out_dtype, acc_dtype)


def combine(kind: str, acc_dtype: str, a: str = "a", b: str = "b") -> str:
    """C: partial result ``a`` (the earlier elements) combined with ``b``, both of
    ``acc_dtype`` (a bool held in a byte would count, and wrap at 256, if added)."""
    if acc_dtype == "bool" and kind in ("sum", "prod"):
        kind = "any" if kind == "sum" else "all"
    return _COMBINE[kind].format(a=a, b=b)


def neutral(kind: str) -> str | None:
    """C: the value a sum, product, all or any starts from; None for max and min."""
    return _NEUTRAL.get(kind)
