"""A sum along one axis and the sum of squared deviations from the mean it gives, read
in one pass: ``Moments(axis)(x, divisor) -> (total, squares)`` with

    total = sum(x, axis)                     (in x's dtype)
    mean = total / divisor                   (in x's dtype, as the graph divides;
                                              total * divisor with mean_by="mul")
    squares = sum((x - mean) ** 2, axis)     (in x's dtype)

for float32 or float64 x and a divisor of x's dtype broadcast everywhere (the axis's
length, for a mean). A layer norm, a variance or a standard deviation written out
reduces x twice, the second time about the mean the first gave: two passes over x, the
second waiting for the first. The host's specialize phase (rewriting/moments.py)
computes both from this op instead, so x is read once.

A kernel sums x - k and (x - k) ** 2 in float64 (s1, s2; k is 0 for float32 x, the
group's first element for float64 x), rounds ``n k + s1`` to ``total`` and divides it as
the graph does, then ``squares = s2 - 2 c s1 + n c ** 2`` with ``c = mean - k``. The
subtraction loses what ``(s2 + 2 |c s1| + n c ** 2) / squares`` amplifies (about
2 + 4 c ** 2 / var), so a group amplified beyond ``max_amplification``, or where anything
is not finite, is read a second time (a row of a matrix is then still in the cache) for
the sum of ``(x - mean) ** 2`` itself, in float64. Either way squares is within about ``n``
float64 roundings times the amplification of its exact value, then rounded to x's dtype:
for float32 more accurate than the graph's own float32 arithmetic, for float64 like it
(its float64 roundings of x - mean and of the squares); inf and NaN as the graph gives
them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.tensor.rounding import abs_float64, summation_bound
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable

# The one-pass squares are kept while amplified at most this much (float64 inputs: then
# their error is within a few times that of the two passes). float32 inputs allow more
# (see max_amplification): their float64 sums carry 29 bits more than the inputs.
MAX_AMPLIFICATION = 8.0
# float32 inputs: amplification times the summation's length stays below 2**27, so the
# float64 roundings add at most 2**27 * 2**-53 = eps(float32) / 8, relative.
FLOAT32_BUDGET = 2.0**27
INPUT_DTYPES = ("float32", "float64")


def max_amplification(dtype: str, n: int) -> float:
    """The largest amplification kept from the one-pass sums of ``n`` elements."""
    if dtype == "float32":
        return max(MAX_AMPLIFICATION, FLOAT32_BUDGET / max(n, 1))
    return MAX_AMPLIFICATION


MEANS_BY = ("div", "mul")


def graph_total_and_mean(x: np.ndarray, divisor: np.ndarray, axis: int, mean_by: str) -> tuple:
    """(total, mean) as the graph written out computes them with NumPy, in x's dtype:
    Reduce.perform's sum, then true_div by the divisor (or mul by it, ``mean_by="mul"``:
    a static length's reciprocal) (call under ``np.errstate``)."""
    total = np.sum(x, axis=axis, dtype=x.dtype)
    scale = np.true_divide if mean_by == "div" else np.multiply
    return total, scale(total, divisor.reshape(()).astype(x.dtype), dtype=x.dtype)


class Moments(Op):
    """``(sum(x, axis), sum((x - sum(x, axis) / divisor) ** 2, axis))``, one axis."""

    __props__ = ("axis", "mean_by")
    kind = "moments"  # (a whole-graph program's reduce step reads a reduction's kind)

    def __init__(self, axis: int, mean_by: str = "div"):
        if mean_by not in MEANS_BY:
            raise ValueError(f"moments: mean_by must be one of {MEANS_BY}, got {mean_by!r}")
        self.axis = (int(axis),)
        self.mean_by = mean_by

    def __str__(self) -> str:
        by = "" if self.mean_by == "div" else ", mean_by=mul"
        return f"moments{{axis={self.axis}{by}}}"

    def make_node(self, x: Any, divisor: Any) -> Apply:
        x, divisor = as_tensor_variable(x), as_tensor_variable(divisor)
        (axis,) = self.axis
        if x.type.dtype not in INPUT_DTYPES:
            raise TypeError(f"moments: expected float32 or float64 x, got {x.describe()}")
        if not 0 <= axis < x.type.ndim:
            raise ValueError(f"moments: axis {axis} out of range for {x.describe()}")
        if divisor.type.ndim != x.type.ndim or not all(divisor.type.broadcastable):
            raise TypeError(
                f"moments: the divisor must broadcast over every axis of {x.describe()}, "
                f"got {divisor.describe()}"
            )
        if divisor.type.dtype != x.type.dtype:
            raise TypeError(
                f"moments: expected a {x.type.dtype} divisor for {x.describe()}, got "
                f"{divisor.describe()}"
            )
        shape = tuple(s for a, s in enumerate(x.type.shape) if a != axis)
        outputs = [TensorType(x.type.dtype, shape).make_variable() for _ in range(2)]
        return Apply(self, [x, divisor], outputs)

    def infer_shape(self, fgraph, node, input_shapes):
        (axis,) = self.axis
        kept = tuple(s for a, s in enumerate(input_shapes[0]) if a != axis)
        return [kept, kept]

    def perform(self, node: Apply, inputs: list, output_storage: list) -> None:
        """As the graph written out computes it with NumPy (Reduce, true_div, sub, sqr,
        Reduce), in x's dtype: a rewrite checked by DebugMode finds the same values."""
        x, divisor = inputs
        dtype = x.dtype
        (axis,) = self.axis
        with np.errstate(all="ignore"):
            total, mean = graph_total_and_mean(x, divisor, axis, self.mean_by)
            deviations = np.subtract(x, np.expand_dims(mean, axis), dtype=dtype)
            squares = np.sum(np.square(deviations), axis=axis, dtype=dtype)
        output_storage[0][0] = np.asarray(total, dtype=dtype)
        output_storage[1][0] = np.asarray(squares, dtype=dtype)

    def rounding_bounds(self, node: Apply, inputs: list) -> list:
        """How far a kernel's values may be from ``perform``'s: both totals are correct
        sums of x; their means then differ by that over the divisor (and a rounding
        each), which moves the squares by ``2 dm |sum(x - m)| + n dm ** 2``; perform's
        squares round each term twice and sum in x's dtype; a kernel's are within as many
        float64 roundings as terms of the one pass's terms (at most the amplification it
        keeps times the squares), rounded once into x's dtype."""
        x, divisor = inputs
        (axis,) = self.axis
        n, dtype = x.shape[axis], x.dtype
        with np.errstate(all="ignore"):
            x64 = x.astype(np.float64)
            _, mean = graph_total_and_mean(x, divisor, axis, self.mean_by)
            md = np.abs(mean.astype(np.float64))
            deviations = x64 - np.expand_dims(mean.astype(np.float64), axis)
            squares = np.sum(deviations**2, axis=axis)
            sums = summation_bound(np.sum(abs_float64(x), axis=axis), n + 1, dtype)
            d = abs(float(divisor.reshape(())))
            dm = (sums / d if self.mean_by == "div" else sums * d) + 4 * np.finfo(dtype).eps * md
            moved = 2 * dm * np.abs(np.sum(deviations, axis=axis)) + n * dm * dm
            s1, s2 = np.sum(x64, axis=axis), np.sum(x64 * x64, axis=axis)
            terms = np.minimum(
                s2 + md * (2 * np.abs(s1) + n * md),
                squares * (4 + max_amplification(dtype.name, n)),
            )
            bound = (
                moved
                + summation_bound(squares, n + 2, dtype)  # perform's
                + summation_bound(terms, n + 4, np.float64)  # a kernel's one pass
                + summation_bound(squares, 1, dtype)  # its rounding into the dtype
            )
            largest = np.finfo(np.float64).max  # (an inf bound would accept anything)
            bound = np.nan_to_num(np.minimum(bound, largest), nan=largest)
            return [np.minimum(sums, largest), bound]
