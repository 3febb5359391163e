"""The sum of x along one axis and the sum of squared deviations from its mean, read in
one pass: ``Moments(axis)(x) -> (sum, m2)``, both float64.

A layer norm, a variance or a standard deviation written out reduces x twice, the
second time about the mean the first gave (``sum((x - sum(x) / n) ** 2)``): two passes
over x, the second waiting for the first. The host's specialize phase
(rewriting/moments.py) computes both from this op instead, so x is read once.

A kernel sums x and x ** 2 in float64, then ``m2 = s2 - s1 * s1 / n``. The subtraction
loses what ``s2 / m2 = 1 + mean ** 2 / var`` amplifies, so a group amplified beyond
``max_amplification`` (or holding inf or NaN) is read a second time, about its mean:
a row of a matrix is then still in the cache. Either way m2 is within a few times ``n``
float64 roundings of its exact value, relative: better than float32 arithmetic about a
float32 mean, and like a float64 two-pass variance.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.tensor.rounding import abs_float64, summation_bound
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable

# The one-pass m2 is kept while s2 / m2 is at most this (float64 inputs: then its error
# is within a few times that of a two-pass m2). float32 inputs allow more (see
# max_amplification): their float64 sums carry 29 bits more than the inputs.
MAX_AMPLIFICATION = 8.0
# float32 inputs: amplification times the summation's length (in float64 roundings)
# stays below 2**30, a relative error of about eps(float32) / 16.
FLOAT32_BUDGET = 2.0**30
INPUT_DTYPES = ("float32", "float64")


def max_amplification(dtype: str, n: int) -> float:
    """The largest s2 / m2 kept from the one-pass sums of ``n`` elements of ``dtype``."""
    if dtype == "float32":
        return max(MAX_AMPLIFICATION, FLOAT32_BUDGET / max(n, 1))
    return MAX_AMPLIFICATION


class Moments(Op):
    """``(sum(x, axis), sum((x - mean) ** 2, axis))`` in float64, one axis, float x."""

    __props__ = ("axis",)
    kind = "moments"  # (a whole-graph program's reduce step reads a reduction's kind)

    def __init__(self, axis: int):
        self.axis = (int(axis),)

    def __str__(self) -> str:
        return f"moments{{axis={self.axis}}}"

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        (axis,) = self.axis
        if x.type.dtype not in INPUT_DTYPES:
            raise TypeError(f"moments: expected float32 or float64, got {x.describe()}")
        if not 0 <= axis < x.type.ndim:
            raise ValueError(f"moments: axis {axis} out of range for {x.describe()}")
        shape = tuple(s for a, s in enumerate(x.type.shape) if a != axis)
        outputs = [TensorType("float64", shape).make_variable() for _ in range(2)]
        return Apply(self, [x], outputs)

    def infer_shape(self, fgraph, node, input_shapes):
        (axis,) = self.axis
        kept = tuple(s for a, s in enumerate(input_shapes[0]) if a != axis)
        return [kept, kept]

    def perform(self, node: Apply, inputs: list, output_storage: list) -> None:
        x = np.asarray(inputs[0], dtype=np.float64)
        with np.errstate(all="ignore"):
            total = np.sum(x, axis=self.axis)
            n = x.shape[self.axis[0]]
            mean = np.expand_dims(total / n, self.axis) if n else np.zeros_like(x)
            m2 = np.sum((x - mean) ** 2, axis=self.axis)
        output_storage[0][0] = np.asarray(total, dtype=np.float64)
        output_storage[1][0] = np.asarray(m2, dtype=np.float64)

    def rounding_bounds(self, node: Apply, inputs: list) -> list:
        """The sum's bound; m2's: its terms' sum, amplified as much as a kernel keeps
        (plus the shift's terms, about the same size), in float64."""
        x = np.asarray(inputs[0])
        (axis,) = self.axis
        n = x.shape[axis]
        abs_sum = np.sum(abs_float64(x), axis=axis)
        x64 = x.astype(np.float64)
        with np.errstate(all="ignore"):
            mean = np.sum(x64, axis=axis, keepdims=True) / max(n, 1)
            m2 = np.sum((x64 - mean) ** 2, axis=axis)
        amplified = m2 * (2 + 2 * max_amplification(x.dtype.name, n))
        return [
            summation_bound(abs_sum, n + 2, np.float64),
            summation_bound(amplified, n + 4, np.float64),
        ]
