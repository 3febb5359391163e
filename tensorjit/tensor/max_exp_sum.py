"""A group's maximum and the sum of the exponentials shifted by it, read in one pass:
``MaxExpSum(axis)(x) -> (top, total)`` with

    top = max(x, axis)                            (in x's dtype)
    total = sum(exp(x - top), axis)               (in x's dtype)

for float32 or float64 x: the statistics of a logsumexp (``top + log(total)``), a
log-softmax or a cross-entropy from logits. Written out, the two reductions are two
passes over x, the second waiting for the first; the host's specialize phase
(rewriting/max_exp_sum.py) computes both from this op instead, so each group is read
from memory once (its second reading comes from the cache).

For contiguous groups a kernel gives the same numbers as the graph's own host kernels:
the maximum and the sum of the shifted exponentials in the reductions' order (the run
functions are shared), and the exponential of each shifted element as the elementwise
code computes it (strided groups run in chunks: the same maximum, up to the sign of a
zero, and a sum within its rounding bound); where every shifted element of a group lies
where e^x is a normal number, through the exponential's form without the clamps and the
second scaling (the same values, a third less work).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.tensor.elemwise_reduce import ELEMENT_ULPS
from tensorjit.tensor.rounding import abs_float64, summation_bound
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable

INPUT_DTYPES = ("float32", "float64")


def shifted_exponentials(x: np.ndarray, top: np.ndarray, axis: int) -> np.ndarray:
    """``exp(x - top)`` as the graph written out computes it with NumPy, in x's dtype
    (call under ``np.errstate``)."""
    shifted = np.subtract(x, np.expand_dims(top, axis), dtype=x.dtype)
    return np.exp(shifted, dtype=x.dtype)


class MaxExpSum(Op):
    """``(max(x, axis), sum(exp(x - max(x, axis)), axis))``, one axis."""

    __props__ = ("axis",)
    # A whole-graph program's reduce step reads a reduction's kind: "max" makes it check,
    # as for a max, that no group is empty.
    kind = "max"

    def __init__(self, axis: int):
        if isinstance(axis, bool) or int(axis) != axis:
            raise TypeError(f"max_exp_sum: expected an integer axis, got {axis!r}")
        self.axis = (int(axis),)

    def __str__(self) -> str:
        return f"max_exp_sum{{axis={self.axis}}}"

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        (axis,) = self.axis
        if x.type.dtype not in INPUT_DTYPES:
            raise TypeError(f"max_exp_sum: expected float32 or float64 x, got {x.describe()}")
        if not 0 <= axis < x.type.ndim:
            raise ValueError(
                f"max_exp_sum: axis {axis} out of range for {x.describe()} (a non-negative "
                "axis: the op is made by a rewrite, which normalises it)"
            )
        if x.type.shape[axis] == 0:
            raise ValueError(
                f"max_exp_sum of {x.describe()} over axis {axis}, of static length 0: "
                "zero-size array to reduction operation maximum which has no identity"
            )
        shape = tuple(s for a, s in enumerate(x.type.shape) if a != axis)
        outputs = [TensorType(x.type.dtype, shape).make_variable() for _ in range(2)]
        return Apply(self, [x], outputs)

    def infer_shape(self, fgraph, node, input_shapes):
        (axis,) = self.axis
        kept = tuple(s for a, s in enumerate(input_shapes[0]) if a != axis)
        return [kept, kept]

    def perform(self, node: Apply, inputs: list, output_storage: list) -> None:
        """As the graph written out computes it with NumPy (Reduce max, sub, exp, Reduce
        sum), in x's dtype; an empty group raises NumPy's error for a max."""
        (x,) = inputs
        (axis,) = self.axis
        top = np.max(x, axis=axis)
        with np.errstate(all="ignore"):
            total = np.sum(shifted_exponentials(x, top, axis), axis=axis, dtype=x.dtype)
        output_storage[0][0] = np.asarray(top, dtype=x.dtype)
        output_storage[1][0] = np.asarray(total, dtype=x.dtype)

    def rounding_bounds(self, node: Apply, inputs: list) -> list:
        """The maximum is exact; the sums differ by their order and the exponentials'
        few ulps (an ElemwiseReduce's bound)."""
        (x,) = inputs
        (axis,) = self.axis
        with np.errstate(all="ignore"):
            values = shifted_exponentials(x, np.max(x, axis=axis), axis)
            abs_sum = np.sum(abs_float64(values), axis=axis)
            bound = summation_bound(abs_sum, x.shape[axis] + ELEMENT_ULPS, x.dtype)
        return [None, bound]
