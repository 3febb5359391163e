"""An elementwise map over x that reads the Moments of x's rows:
``MomentsMap(scalar_op)(x, divisor, *operands)`` is

    total, squares = Moments(last axis)(x, divisor)
    Elemwise(scalar_op)(total[..., None], squares[..., None], *operands)

with the operands broadcasting to x's shape (x itself among them, for a layer norm's
``(x - mean) / sqrt(var + eps) * g + b``; a column of the statistics' own arithmetic,
the mean and the scale, is part of ``scalar_op``, which the compiler hoists out of the
row's loop). Written out, the statistics and the map are two kernels, each reading every
row: the map only begins when all rows' moments are known, so a matrix larger than the
cache is read from memory twice (row blocks of a program read it once, but the map's
stores and the next block's sums still take turns). A kernel computes a row's moments
and its outputs together, while the row is in the innermost cache
(rewriting/moments_map.py makes this node on the host).

The values are those of the graph written out: the same Moments of each row, and the
map's scalar function of the same numbers; a column value computed from the moments
(``sqrt(squares / n + eps)``) is the same expression, evaluated in the row's loop (hoisted
out of it by the compiler) instead of stored once per row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.tensor.elemwise import (
    broadcast_static_shapes,
    check_runtime_broadcast,
    unpadded,
)
from tensorjit.tensor.moments import Moments
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable


class MomentsMap(Op):
    """``Elemwise(scalar_op)(total, squares, *operands)`` of the Moments of x's rows
    (the last axis), their two statistics broadcast along it."""

    __props__ = ("scalar_op", "mean_by")
    # A whole-graph program runs it as an elementwise step (strided entries only: a
    # kernel needs x's rows), which reads these as of an Elemwise.
    inplace = None

    def __init__(self, scalar_op: Any, mean_by: str = "div"):
        if scalar_op.nin < 2:
            raise ValueError(f"moments_map: {scalar_op} reads fewer than the two statistics")
        self.scalar_op = scalar_op
        self.mean_by = mean_by  # Moments': the mean is the total / or * the divisor

    def moments(self, ndim: int) -> Moments:
        """The Moments of x's rows that this map reads."""
        return Moments(ndim - 1, self.mean_by)

    def __str__(self) -> str:
        return f"moments_map{{{self.scalar_op}}}"

    def make_node(self, x: Any, divisor: Any, *operands: Any) -> Apply:
        x, divisor = as_tensor_variable(x), as_tensor_variable(divisor)
        operands_ = [as_tensor_variable(v) for v in operands]
        if x.type.ndim < 2:
            raise TypeError(f"moments_map: expected an x of two or more axes, got {x.describe()}")
        self.moments(x.type.ndim).make_node(x, divisor)  # (its checks of x and the divisor)
        if len(operands_) + 2 != self.scalar_op.nin:
            raise TypeError(
                f"moments_map: {self.scalar_op} takes {self.scalar_op.nin} inputs, got the "
                f"two statistics and {len(operands_)} operands"
            )
        for v in operands_:
            if v.type.ndim != x.type.ndim:
                raise TypeError(
                    f"moments_map: operand {v.describe()} has {v.type.ndim} axes, x "
                    f"{x.type.ndim} (operands broadcast to x's shape)"
                )
        shape = broadcast_static_shapes("moments_map", [x, *operands_])
        if any(s is not None and t is not None and s != t for s, t in zip(shape, x.type.shape)):
            raise TypeError(
                f"moments_map: operands of static shape {shape} do not broadcast to x's "
                f"{x.describe()}"
            )
        dtypes = [x.type.dtype, x.type.dtype, *(v.type.dtype for v in operands_)]
        out_dtype = self.scalar_op.output_dtype(dtypes)
        out = TensorType(out_dtype, shape).make_variable()
        return Apply(self, [x, divisor, *operands_], [out])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def statistics(self, x: np.ndarray, divisor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows' (total, squares) as Moments.perform gives them, the axis kept."""
        moments = self.moments(x.ndim)
        cells: list = [[None], [None]]
        moments.perform(None, [x, divisor], cells)  # type: ignore[arg-type]
        return cells[0][0][..., None], cells[1][0][..., None]

    def check_operands(self, node: Apply, x: np.ndarray, operands: list) -> None:
        """Raise, naming the variable, where an operand's run-time shape does not
        broadcast to x's as an Elemwise's operand would."""
        for var, value in zip(node.inputs[2:], operands, strict=True):
            check_runtime_broadcast(node, var, value.shape, x.shape)
            for axis, (n, m) in enumerate(zip(value.shape, x.shape)):
                if n != m and not var.type.broadcastable[axis]:
                    user, user_axis = unpadded(var, axis)
                    raise ValueError(
                        f"{self}: input {user.describe()} has length {n} in dimension "
                        f"{user_axis} at run time, but x ({node.inputs[0].describe()}) has "
                        f"length {m} in dimension {axis}"
                    )

    def perform(self, node: Apply, inputs: list, output_storage: list) -> None:
        """As the graph written out computes it with NumPy: Moments.perform, then the
        map's scalar function over the statistics and the operands."""
        x, divisor, *operands = inputs
        self.check_operands(node, x, operands)
        total, squares = self.statistics(x, divisor)
        out_dtype = node.outputs[0].type.numpy_dtype
        with np.errstate(all="ignore"):
            result = self.scalar_op.impl(total, squares, *operands)
        result = np.broadcast_to(np.asarray(result, dtype=out_dtype), x.shape)
        output_storage[0][0] = np.array(result, dtype=out_dtype)

    def rounding_bounds(self, node: Apply, inputs: list) -> list:
        """How far a kernel's values may be from ``perform``'s: the map of statistics
        moved by Moments' own bounds (each of the four corners; the map is monotonic in
        each statistic wherever a layer norm's is), plus a few roundings of the result."""
        x, divisor, *operands = inputs
        moments = self.moments(x.ndim)
        with np.errstate(all="ignore"):
            bounds = moments.rounding_bounds(None, [x, divisor])  # type: ignore[arg-type]
            total, squares = (s.astype(np.float64) for s in self.statistics(x, divisor))
            moved = [np.zeros(()) if b is None else np.asarray(b)[..., None] for b in bounds]
            base = np.asarray(self.scalar_op.impl(total, squares, *operands), np.float64)
            worst = np.zeros(np.broadcast(base, x).shape)
            for sign_t in (-1.0, 1.0):
                for sign_s in (-1.0, 1.0):
                    corner = self.scalar_op.impl(
                        total + sign_t * moved[0], squares + sign_s * moved[1], *operands
                    )
                    worst = np.fmax(worst, np.abs(np.asarray(corner, np.float64) - base))
            dtype = node.outputs[0].type.numpy_dtype
            if dtype.kind == "f":
                worst = worst + 4 * np.finfo(dtype).eps * np.abs(base)
            largest = np.finfo(np.float64).max  # (an inf bound would accept anything)
            return [np.nan_to_num(np.minimum(worst, largest), nan=largest)]
