"""An elementwise map over x that reads the Moments of x's rows:
``MomentsMap(scalar_op)(x, divisor, *operands)`` is

    total, squares = Moments(last axis)(x, divisor)
    Elemwise(scalar_op)(total[..., None], squares[..., None], *operands)

with the operands broadcasting to x's shape (x itself among them, for a layer norm's
``(x - mean) / sqrt(var + eps) * g + b``; a column of the statistics' own arithmetic,
the mean and the scale, is part of ``scalar_op``). Written out, the statistics and the
map are two kernels, each reading every row: the map only begins when all rows' moments
are known, so a matrix larger than the cache is read from memory twice (row blocks of a
program read it once, but the map's stores and the next block's sums still take turns).
A kernel computes a row's moments and its outputs together, while the row is in the
innermost cache (rewriting/moments_map.py makes this node on the host).

The values are those of the graph written out: the same Moments of each row, and the
map's scalar function of the same numbers; a column value computed from the moments
(``sqrt(squares / n + eps)``) is the same expression evaluated once per row instead of
once per row and stored.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.tensor.elemwise import broadcast_static_shapes
from tensorjit.tensor.moments import INPUT_DTYPES, Moments
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable


class MomentsMap(Op):
    """``Elemwise(scalar_op)(total, squares, *operands)`` of the Moments of x's rows
    (the last axis), their two statistics broadcast along it."""

    __props__ = ("scalar_op",)
    # A whole-graph program runs it as an elementwise step (strided entries only: a
    # kernel needs x's rows), which reads these as of an Elemwise.
    inplace = None

    def __init__(self, scalar_op: Any):
        if scalar_op.nin < 2:
            raise ValueError(f"moments_map: {scalar_op} reads fewer than the two statistics")
        self.scalar_op = scalar_op

    def __str__(self) -> str:
        return f"moments_map{{{self.scalar_op}}}"

    def make_node(self, x: Any, divisor: Any, *operands: Any) -> Apply:
        x, divisor = as_tensor_variable(x), as_tensor_variable(divisor)
        operands_ = [as_tensor_variable(v) for v in operands]
        if x.type.dtype not in INPUT_DTYPES or x.type.ndim < 2:
            raise TypeError(
                f"moments_map: expected a float32 or float64 x of two or more axes, got "
                f"{x.describe()}"
            )
        if len(operands_) + 2 != self.scalar_op.nin:
            raise TypeError(
                f"moments_map: {self.scalar_op} takes {self.scalar_op.nin} inputs, got the "
                f"two statistics and {len(operands_)} operands"
            )
        if any(v.type.ndim != x.type.ndim for v in operands_):
            bad = next(v for v in operands_ if v.type.ndim != x.type.ndim)
            raise TypeError(
                f"moments_map: operand {bad.describe()} has {bad.type.ndim} axes, x "
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
        out = TensorType(out_dtype, x.type.shape).make_variable()
        return Apply(self, [x, divisor, *operands_], [out])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def statistics(self, x: np.ndarray, divisor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows' (total, squares) as Moments.perform gives them, the axis kept."""
        moments = Moments(x.ndim - 1)
        cells: list = [[None], [None]]
        moments.perform(None, [x, divisor], cells)  # type: ignore[arg-type]
        return cells[0][0][..., None], cells[1][0][..., None]

    def perform(self, node: Apply, inputs: list, output_storage: list) -> None:
        """As the graph written out computes it with NumPy: Moments.perform, then the
        map's scalar function over the statistics and the operands."""
        x, divisor, *operands = inputs
        shape = x.shape
        for i, v in enumerate(operands):
            if any(s != 1 and s != t for s, t in zip(v.shape, shape)):
                raise ValueError(
                    f"{self}: operand {i + 2} ({node.inputs[i + 2].describe()}) of shape "
                    f"{v.shape} does not broadcast to x's shape {shape}"
                )
        total, squares = self.statistics(x, divisor)
        out_dtype = node.outputs[0].type.numpy_dtype
        with np.errstate(all="ignore"):
            result = self.scalar_op.impl(total, squares, *operands)
        result = np.broadcast_to(np.asarray(result, dtype=out_dtype), shape)
        output_storage[0][0] = np.array(result, dtype=out_dtype)
