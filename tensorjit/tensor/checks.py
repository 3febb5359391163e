"""Ops that check a value at run time and pass it through: ``specify_shape`` (which also
gives the graph the static shape it promises) and ``Assert``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.op import Op
from tensorjit.tensor.variable import as_tensor_variable


class SpecifyShape(Op):
    """``x``, checked to have the shape given by its other inputs (int64 scalars; a
    dimension given as None is not checked). The result's static shape holds every
    constant length, so rewrites and kernels can rely on it."""

    __props__ = ()
    view_map = {0: [0]}  # noqa: RUF012  (the Op protocol's class attribute)

    def make_node(self, x: Any, *shape: Any) -> Apply:
        x = as_tensor_variable(x)
        if len(shape) != x.type.ndim:
            raise ValueError(
                f"specify_shape: {len(shape)} lengths given for the {x.type.ndim}-d {x.describe()}"
            )
        lengths: list[Variable] = []
        static: list[int | None] = []
        for axis, (given, known) in enumerate(zip(shape, x.type.shape)):
            length = as_tensor_variable(-1 if given is None else given)
            if length.type.ndim != 0 or np.dtype(length.type.dtype).kind not in "iu":
                raise TypeError(
                    f"specify_shape: the length of axis {axis} must be an integer scalar, "
                    f"got {length.describe()}"
                )
            value = int(length.data) if isinstance(length, Constant) else None
            if value is not None and value >= 0 and known is not None and known != value:
                raise ValueError(
                    f"specify_shape: axis {axis} of {x.describe()} has static length "
                    f"{known}, not {value}"
                )
            lengths.append(length)
            static.append(known if value is None or value < 0 else value)
        out = x.type.clone(shape=tuple(static)).make_variable()
        return Apply(self, [x, *lengths], [out])

    def perform(self, node, inputs, output_storage):
        x, *lengths = inputs
        want = tuple(int(n) for n in lengths)
        if x.ndim != len(want) or any(w >= 0 and w != s for w, s in zip(want, x.shape)):
            shown = tuple(None if w < 0 else w for w in want)
            raise AssertionError(
                f"specify_shape: {node.inputs[0].describe()} has shape {x.shape}, expected {shown}"
            )
        output_storage[0][0] = x

    def infer_shape(self, fgraph, node, input_shapes):
        # x's own lengths, not the promised ones: a graph that only reads the shape
        # then reports the value's real shape (the check runs where the value is used)
        return [input_shapes[0]]

    def L_op(self, inputs, outputs, output_grads):
        return [output_grads[0]] + [None] * (len(inputs) - 1)

    def connection_pattern(self, node):
        return [[True]] + [[False]] * (len(node.inputs) - 1)


def specify_shape(x: Any, shape: Sequence[Any] | Variable) -> Variable:
    """``x``, checked at run time to have ``shape`` (ints, int scalars, None for any
    length); the result's static shape holds the constant lengths."""
    x = as_tensor_variable(x)
    if isinstance(shape, Variable):
        from tensorjit.tensor.subtensor import getitem

        entries: list[Any] = [getitem(shape, i) for i in range(x.type.ndim)]
    else:
        entries = list(shape)
    return SpecifyShape()(x, *entries)


class Assert(Op):
    """``x``, after checking that every condition input is true (nonzero everywhere);
    raises AssertionError with ``msg`` otherwise."""

    __props__ = ("msg",)
    view_map = {0: [0]}  # noqa: RUF012  (the Op protocol's class attribute)
    constant_folding = False  # a failing check must fail when the function runs

    def __init__(self, msg: str = "Assert failed"):
        self.msg = msg

    def make_node(self, x: Any, *conditions: Any) -> Apply:
        x = as_tensor_variable(x)
        conds = [as_tensor_variable(c) for c in conditions]
        for c in conds:
            if c.type.ndim != 0:
                raise TypeError(f"Assert: a condition must be a scalar, got {c.describe()}")
        return Apply(self, [x, *conds], [x.type.make_variable()])

    def perform(self, node, inputs, output_storage):
        x, *conds = inputs
        for var, value in zip(node.inputs[1:], conds):
            if not np.all(value):
                where = var.created_at or "unknown"
                raise AssertionError(f"{self.msg} (condition created at {where})")
        output_storage[0][0] = x

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def L_op(self, inputs, outputs, output_grads):
        return [output_grads[0]] + [None] * (len(inputs) - 1)

    def connection_pattern(self, node):
        return [[True]] + [[False]] * (len(node.inputs) - 1)


assert_op = Assert()
