"""A reduction of an elementwise expression in one pass: ``sum(exp(x - m), axis=1)``
reads x and m and never stores the exponentials.

Made by elementwise fusion (rewriting/fusion.py) from a Reduce whose input is an
elementwise group used by nothing else; the class of graphs it serves is every reduction
of a computed array: log-sum-exp and softmax written out, the variance of a layer norm
(``sum((x - mean) ** 2)``), losses (``mean((y - t) ** 2)``, a cross-entropy's sum), and
the sums that gradients of broadcasting ops make.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.math import Reduce
from tensorjit.tensor.rounding import abs_float64, summation_bound
from tensorjit.tensor.scalar import ScalarOp
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable

# Ulps by which an element computed by a kernel may differ from NumPy's (the vectorised
# exp, log, tanh... are within a few): each adds that many roundings to a sum's bound.
ELEMENT_ULPS = 8


class ElemwiseReduce(Op):
    """``Reduce(kind, axis, dtype)`` of ``Elemwise(scalar_op)(*inputs)``."""

    __props__ = ("kind", "axis", "dtype", "scalar_op")

    def __init__(self, kind: str, axis: tuple[int, ...], dtype: str | None, scalar_op: ScalarOp):
        self.reduce = Reduce(kind, axis, dtype)
        self.elemwise = Elemwise(scalar_op)
        self.kind, self.axis, self.dtype, self.scalar_op = kind, tuple(axis), dtype, scalar_op

    def __str__(self) -> str:
        return f"{self.kind}{{{self.scalar_op.name}, axis={self.axis}}}"

    def make_node(self, *inputs: Any) -> Apply:
        mapped = self.elemwise(*inputs)
        reduced = self.reduce(mapped)
        operands = [as_tensor_variable(v) for v in mapped.owner.inputs]  # padded, resolved
        return Apply(self, operands, [TensorType(reduced.type.dtype, reduced.type.shape)()])

    def mapped_type(self, node: Apply) -> TensorType:
        """The type of the elementwise values that are reduced."""
        return self.elemwise.make_node(*node.inputs).outputs[0].type

    def infer_shape(self, fgraph, node, input_shapes):
        mapped = self.elemwise.make_node(*node.inputs)
        (shape,) = self.elemwise.infer_shape(fgraph, mapped, input_shapes)
        return [tuple(s for a, s in enumerate(shape) if a not in self.axis)]

    def input_check(self, node: Apply):
        mapped = self.elemwise.make_node(*node.inputs)
        return self.elemwise.input_check(mapped)

    def perform(self, node: Apply, inputs: list, output_storage: list) -> None:
        mapped = self.elemwise.make_node(*node.inputs)
        cell: list = [None]
        self.elemwise.perform(mapped, inputs, [cell])
        self.reduce.perform(self.reduce.make_node(mapped.outputs[0]), [cell[0]], output_storage)

    def rounding_bounds(self, node: Apply, inputs: list) -> list | None:
        if self.kind != "sum":
            return None  # max/min/all/any are exact; a product's error is relative
        mapped = self.elemwise.make_node(*node.inputs)
        cell: list = [None]
        with np.errstate(all="ignore"):
            self.elemwise.perform(mapped, inputs, [cell])
        values = np.asarray(cell[0])
        n_terms = int(np.prod([values.shape[a] for a in self.axis]))
        abs_sum = np.sum(abs_float64(values), axis=self.axis)
        dtype = np.result_type(values.dtype, node.outputs[0].type.dtype)
        return [summation_bound(abs_sum, n_terms + ELEMENT_ULPS, dtype)]

    def L_op(self, inputs, outputs, output_grads):
        from tensorjit.core.gradient import grad

        unfused = self.reduce(self.elemwise(*inputs))
        return grad(None, list(inputs), known_grads={unfused: output_grads[0]})
