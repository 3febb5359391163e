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
    (as Elemwise does); every output has the broadcast shape of the inputs.

    ``inplace``: (output, input) pairs, each output written into that input's buffer
    (destroyed). Every output element is computed from the inputs' elements at its
    index before any is stored, so an input may hold an output."""

    __props__ = ("scalar_op", "inplace")
    destroyhandler_tolerate_same = True  # as Elemwise: f(x, x) may overwrite x

    def __init__(self, scalar_op: Composite, inplace: tuple[tuple[int, int], ...] = ()):
        if not isinstance(scalar_op, Composite) or scalar_op.nout < 2:
            raise ValueError("MultiOutputElemwise takes a Composite with several outputs")
        self.scalar_op = scalar_op
        self.inplace = tuple(sorted(inplace))
        outputs, inputs = [k for k, _ in self.inplace], [i for _, i in self.inplace]
        if len(set(outputs)) != len(outputs) or len(set(inputs)) != len(inputs):
            raise ValueError(f"{scalar_op.name}: in place pairs {self.inplace} repeat")
        if self.inplace:
            self.destroy_map = {k: [i] for k, i in self.inplace}

    def __str__(self) -> str:
        if not self.inplace:
            return self.scalar_op.name
        pairs = ",".join(f"{k}:{i}" for k, i in self.inplace)
        return f"{self.scalar_op.name}_inplace{{{pairs}}}"

    def make_node(self, *inputs: Any) -> Apply:
        vars_, shape = elemwise_inputs(self.scalar_op, inputs)
        outputs = [TensorType(dt, shape).make_variable() for dt in self.scalar_op.out_dtypes]
        for k, i in self.inplace:
            if i >= len(vars_) or not _holds(vars_[i].type, outputs[k].type):
                raise TypeError(
                    f"{self}: can not write output {k} ({outputs[k].type}) into input {i}"
                    f"{' ' + vars_[i].describe() if i < len(vars_) else ''}: dtype or "
                    "broadcasting differ"
                )
        return Apply(self, vars_, outputs)

    def with_inplace(self, node: Apply, candidates: list[int]) -> MultiOutputElemwise | None:
        """This op also writing an output into the first of ``candidates`` that can
        hold one (None if none can): of the outputs not yet in place that fit, the one
        whose expression is the smallest reading that input (a moment's update takes
        the old moment's buffer, not the parameter's)."""
        taken_out = {k for k, _ in self.inplace}
        taken_in = {i for _, i in self.inplace}
        for i in candidates:
            if i in taken_in:
                continue
            free = [
                k
                for k, out in enumerate(node.outputs)
                if k not in taken_out and _holds(node.inputs[i].type, out.type)
            ]
            if free:
                cones = self.scalar_op.output_cones()
                k = min(free, key=lambda k: (i not in cones[k][0], len(cones[k][1]), k))
                return MultiOutputElemwise(self.scalar_op, (*self.inplace, (k, i)))
        return None

    def infer_shape(self, fgraph, node, input_shapes):
        return [broadcast_output_shape(node, input_shapes)] * len(node.outputs)

    def input_check(self, node: Apply) -> Callable[[list[Any]], None]:
        return partial(self.output_shape, node)

    def output_shape(self, node: Apply, inputs: Sequence[Any]) -> tuple[int, ...]:
        return elemwise_output_shape(node, inputs)

    def perform(self, node: Apply, inputs: list, output_storage: list) -> None:
        shape = self.output_shape(node, inputs)
        results = self.scalar_op.impl(*inputs)  # every one before any input is written
        into = dict(self.inplace)
        for k, (cell, out, value) in enumerate(zip(output_storage, node.outputs, results)):
            if k in into:
                target = inputs[into[k]]
                np.copyto(target, value, casting="unsafe")
                cell[0] = target
                continue
            value = np.asarray(value, dtype=out.type.numpy_dtype)
            if value.shape != shape:  # (a value computed from broadcast operands only)
                value = np.broadcast_to(value, shape).copy()
            cell[0] = value

    def grad(self, inputs, output_grads):
        from tensorjit.core.gradient import NotDifferentiableError

        raise NotDifferentiableError(
            "MultiOutputElemwise appears after rewriting; differentiate the original graph"
        )


def _holds(buffer: TensorType, value: TensorType) -> bool:
    """Whether an input of type ``buffer`` can take an output of type ``value``."""
    return buffer.dtype == value.dtype and buffer.broadcastable == value.broadcastable
