"""Ops that check a value at run time and pass it through: ``specify_shape`` (which also
gives the graph the static shape it promises) and ``Assert``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.op import Op
from tensorjit.tensor.variable import as_tensor_variable


class _CheckedValue(Op):
    """An op returning its first input unchanged (a view) after checking it against the
    other inputs: the gradient flows to the value only, its shape is the value's (a
    graph that reads only the shape does not run the check; the static lengths a
    SpecifyShape gives are the type's promise)."""

    view_map = {0: [0]}  # noqa: RUF012  (the Op protocol's class attribute)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def L_op(self, inputs, outputs, output_grads):
        return [output_grads[0]] + [None] * (len(inputs) - 1)

    def connection_pattern(self, node):
        return [[True]] + [[False]] * (len(node.inputs) - 1)


class SpecifyShape(_CheckedValue):
    """``x``, checked to have the shape given by its other inputs (one int scalar per
    axis; the axes in ``free`` are not checked, their input is a placeholder). The
    result's static shape holds every constant length, so rewrites and kernels can rely
    on it."""

    __props__ = ("free",)

    def __init__(self, free: Sequence[int] = ()):
        self.free = tuple(sorted(set(int(a) for a in free)))

    def make_node(self, x: Any, *shape: Any) -> Apply:
        x = as_tensor_variable(x)
        if len(shape) != x.type.ndim:
            raise ValueError(
                f"specify_shape: {len(shape)} lengths given for the {x.type.ndim}-d {x.describe()}"
            )
        lengths: list[Variable] = []
        static: list[int | None] = []
        for axis, (given, known) in enumerate(zip(shape, x.type.shape)):
            length = as_tensor_variable(0 if axis in self.free else given)
            if length.type.ndim != 0 or np.dtype(length.type.dtype).kind not in "iu":
                raise TypeError(
                    f"specify_shape: the length of axis {axis} must be an integer scalar, "
                    f"got {length.describe()}"
                )
            value = int(length.data) if isinstance(length, Constant) else None
            if axis in self.free or value is None:
                static.append(known)
            elif value < 0 or (known is not None and known != value):
                raise ValueError(
                    f"specify_shape: axis {axis} of {x.describe()} has static length "
                    f"{known}, not {value}"
                )
            else:
                static.append(value)
            lengths.append(length)
        out = x.type.clone(shape=tuple(static)).make_variable()
        return Apply(self, [x, *lengths], [out])

    def perform(self, node, inputs, output_storage):
        x, *lengths = inputs
        want = tuple(None if a in self.free else int(n) for a, n in enumerate(lengths))
        if x.ndim != len(want) or any(w is not None and w != s for w, s in zip(want, x.shape)):
            raise AssertionError(
                f"specify_shape: {node.inputs[0].describe()} has shape {x.shape}, expected {want}"
            )
        output_storage[0][0] = x


def specify_shape(x: Any, shape: Sequence[Any] | Variable) -> Variable:
    """``x``, checked at run time to have ``shape`` (ints, int scalars, None for any
    length, or an int vector of one length per axis); the result's static shape holds
    the constant lengths."""
    x = as_tensor_variable(x)
    if isinstance(shape, Variable):
        from tensorjit.tensor.subtensor import getitem

        if shape.type.ndim != 1 or shape.type.shape[0] not in (None, x.type.ndim):
            raise ValueError(
                f"specify_shape: the shape {shape.describe()} must be a vector of "
                f"{x.type.ndim} lengths for the {x.type.ndim}-d {x.describe()}"
            )
        if shape.type.shape[0] is None:  # its length is checked when it runs
            shape = SpecifyShape()(shape, x.type.ndim)
        entries: list[Any] = [getitem(shape, i) for i in range(x.type.ndim)]
    else:
        entries = list(shape)
    free = [a for a, n in enumerate(entries) if n is None]
    return SpecifyShape(free)(x, *entries)


class Assert(_CheckedValue):
    """``x``, after checking that every condition input is true (nonzero everywhere);
    raises AssertionError with ``msg`` otherwise."""

    __props__ = ("msg",)
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
                raise AssertionError(
                    f"{self.msg}: the condition {var.describe()} on "
                    f"{node.inputs[0].describe()} is false"
                )
        output_storage[0][0] = x


assert_op = Assert()
