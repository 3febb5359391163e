"""What the kernels that build whole arrays compute, decided once for every backend: the
host's loops (c_backend/generators/construct.py) and the devices' work-items
(device_kernels/construct.py) each render their own schedule and take from here

- when a call is NumPy's error rather than a result (a negative size, an arange
  NumPy can not make, a triangle offset ``np.tri`` overflows on): the caller then runs
  ``Op.perform``, which raises NumPy's error with the op's context;
- the element rules: an ``arange`` is NumPy's fill (the first two values as computed,
  then ``start + i * (second - start)`` in the output dtype, without a fused
  multiply-add); ``eye`` and ``tri`` are conditions on a cell's row and column with the
  offset clamped so that no arithmetic overflows; a one-hot cell is ``y == class`` with
  the class index checked first; a running sum or product adds or multiplies each
  element, converted to the output dtype, to the previous result along the axis;
- a sort orders by ``<`` with NaNs last, in their input order; a stable kind
  (``STABLE_SORTS``) also keeps -0.0 and 0.0, which compare equal, in their input order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

CUMULATIVE = {"add": "+", "mul": "*"}  # CumOp's mode -> the C operator
STABLE_SORTS = ("stable", "mergesort")  # the kinds NumPy sorts stably
MATRIX_CELL = {"eye": "{j} - {i} == {k}", "tri": "{j} - {i} <= {k}"}
# An arange's length beyond this is NumPy's error (it could not allocate it anyway).
_ARANGE_LIMIT = float(2**62)


def matrix_cell(kind: str, i: str, j: str, k: str) -> str:
    """C: whether cell (i, j) of ``np.eye``/``np.tri`` (``kind``) is one."""
    return MATRIX_CELL[kind].format(i=i, j=j, k=k)


def matrix_offset(kind: str, n: int, m: int, k: int) -> int | None:
    """The diagonal offset ``k`` of an (n, m) eye or tri, clamped to [-n - 1, m + 1]
    (the same cells, and ``j - i - k`` can not overflow), or None where NumPy raises: a
    negative size, or ``np.tri``'s ``arange(-k, m - k)`` out of int64."""
    if n < 0 or m < 0:
        return None
    if kind == "tri" and (k <= -(2**63) or m - k >= 2**63):
        return None
    return min(max(k, -n - 1), m + 1)


def arange_fill(start: Any, stop: Any, step: Any, dtype: str) -> tuple | None:
    """(length, first, second) of ``np.arange(start, stop, step, dtype)``, the first two
    values as NumPy computes them (Python numbers), or None where NumPy raises (a zero
    step, a length that is NaN, infinite or too large, bounds outside an integer dtype).
    The i-th value, i >= 2, is then ``arange_element``."""
    if step == 0:
        return None
    span = (stop - start) / step
    if not -_ARANGE_LIMIT < span < _ARANGE_LIMIT:
        return None
    n = max(math.ceil(span), 0)
    second = start + step
    if np.dtype(dtype).kind == "f":
        return n, float(start), float(second if n > 1 else start)
    info = np.iinfo(dtype)
    if (n > 0 and not info.min <= start <= info.max) or (
        n > 1 and not info.min <= second <= info.max
    ):
        return None
    return n, int(start), int(second if n > 1 else start)


def arange_element(index: str, first: str, second: str, ctype: str, floating: bool) -> list[str]:
    """C statements setting ``v_`` (of ``ctype``) to element ``index`` >= 2 of an arange.
    The product and the sum are separate statements: a compiler may fuse the two
    operations of one expression into a multiply-add, which NumPy's fill does not."""
    if floating:
        return [
            f"const {ctype} d_ = ({ctype})({second} - {first});",
            f"const {ctype} p_ = ({ctype}){index} * d_;",
            f"const {ctype} v_ = ({ctype})({first} + p_);",
        ]
    # In unsigned 64 bits, whose arithmetic wraps in every C dialect: the value is then
    # right modulo 2**64, hence in any integer type (each value of the arange is in
    # range, so no wrapped intermediate is ever seen); bounds arrive as 64-bit integers
    # holding the value's bit pattern (``arange_bound``).
    return [
        f"const unsigned long d_ = (unsigned long)({second}) - (unsigned long)({first});",
        f"const {ctype} v_ = ({ctype})((unsigned long)({first}) + (unsigned long){index} * d_);",
    ]


def arange_bound(value: int) -> int:
    """An integer arange's first or second value as a signed 64-bit integer of the same
    bit pattern (a uint64 from 2**63 on is negative here)."""
    return (value + 2**63) % 2**64 - 2**63


def class_out_of_range(value: str, n: str, index_dtype: str) -> str:
    """C: whether class index ``value`` (of ``index_dtype``) is outside [0, n)."""
    below = f"{value} < 0 || " if np.dtype(index_dtype).kind == "i" else ""
    return f"({below}(unsigned long)({value}) >= (unsigned long)({n}))"


def join_shape(shapes: Sequence[tuple[int, ...]], axis: int) -> tuple[int, ...] | None:
    """The shape of ``np.concatenate`` of arrays of ``shapes`` along ``axis``, or None
    where their other lengths differ (NumPy's error)."""
    first = shapes[0]
    if any(s[:axis] != first[:axis] or s[axis + 1 :] != first[axis + 1 :] for s in shapes):
        return None
    return (*first[:axis], sum(s[axis] for s in shapes), *first[axis + 1 :])
