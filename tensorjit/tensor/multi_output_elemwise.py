"""MultiOutputElemwise: one elementwise loop that writes several results.

Elementwise fusion makes one Elemwise(Composite) node of each group whose intermediate
values stay inside it; a value read in two places (``d1`` and ``d2`` of an option
pricing formula, a gradient shared by an optimiser's moment and parameter updates)
ends a group, and every group then reads it back from memory. The multi-output pass
(tensor/rewriting/multi_output_fusion.py) joins such groups into one node of this op:
a multi-output Composite evaluated element by element, each value that is read outside
stored once. It is its own op, not an Elemwise, so that no rewrite written for
single-output elementwise nodes meets it; it only appears after fusion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.tensor.composite import Composite
from tensorjit.tensor.elemwise import (
    broadcast_output_shape,
    elemwise_inputs,
    elemwise_output_shape,
)
from tensorjit.tensor.type import TensorType


class MultiOutputElemwise(Op):
    """Applies a Composite with several outputs elementwise, with NumPy broadcasting
    (as Elemwise does); every output has the broadcast shape of the inputs."""

    __props__ = ("scalar_op",)

    def __init__(self, scalar_op: Composite):
        if not isinstance(scalar_op, Composite) or scalar_op.nout < 2:
            raise ValueError("MultiOutputElemwise takes a Composite with several outputs")
        self.scalar_op = scalar_op

    def __str__(self) -> str:
        return self.scalar_op.name

    def make_node(self, *inputs: Any) -> Apply:
        vars_, shape = elemwise_inputs(self.scalar_op, inputs)
        outputs = [TensorType(dt, shape).make_variable() for dt in self.scalar_op.out_dtypes]
        return Apply(self, vars_, outputs)

    def infer_shape(self, fgraph, node, input_shapes):
        return [broadcast_output_shape(node, input_shapes)] * len(node.outputs)

    def input_check(self, node: Apply) -> Callable[[list[Any]], None]:
        return partial(self.output_shape, node)

    def output_shape(self, node: Apply, inputs: Sequence[Any]) -> tuple[int, ...]:
        return elemwise_output_shape(node, inputs)

    def perform(self, node: Apply, inputs: list, output_storage: list) -> None:
        shape = self.output_shape(node, inputs)
        results = self.scalar_op.impl(*inputs)
        for cell, out, value in zip(output_storage, node.outputs, results):
            value = np.asarray(value, dtype=out.type.numpy_dtype)
            if value.shape != shape:  # (a value computed from broadcast operands only)
                value = np.broadcast_to(value, shape).copy()
            cell[0] = value

    def grad(self, inputs, output_grads):
        from tensorjit.core.gradient import NotDifferentiableError

        raise NotDifferentiableError(
            "MultiOutputElemwise appears after rewriting; differentiate the original graph"
        )
