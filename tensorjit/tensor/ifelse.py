"""``ifelse(cond, then, else)``: a lazy conditional that computes only the branch taken.

Unlike ``switch`` (elementwise, both sides computed), ``ifelse`` takes a scalar
condition and whole values (or lists of values) for each branch; the VM skips the nodes
that only the branch not taken needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.tensor.variable import as_tensor_variable


class IfElse(Op):
    """Outputs the ``n`` true-branch inputs if the condition holds, else the ``n``
    false-branch inputs. A true-branch value is returned as is (a view); a false-branch
    value is copied, since an output may be declared a view of only one input."""

    __props__ = ("n_outs",)

    def __init__(self, n_outs: int):
        self.n_outs = n_outs
        self.view_map = {i: [1 + i] for i in range(n_outs)}

    def lazy_branches(self, node: Apply) -> tuple[int, list[int], list[int]]:
        n = self.n_outs
        return 0, list(range(1, 1 + n)), list(range(1 + n, 1 + 2 * n))

    def make_node(self, cond: Any, *branches: Any) -> Apply:
        cond = as_tensor_variable(cond)
        if cond.type.ndim != 0:
            raise TypeError(f"ifelse: the condition must be a scalar, got {cond.describe()}")
        values = [as_tensor_variable(b) for b in branches]
        n = self.n_outs
        if len(values) != 2 * n:
            raise TypeError(f"ifelse: expected {n} values per branch, got {len(values)} in all")
        outputs = []
        for then_v, else_v in zip(values[:n], values[n:]):
            if then_v.type.dtype != else_v.type.dtype or then_v.type.ndim != else_v.type.ndim:
                raise TypeError(
                    f"ifelse: branches differ: {then_v.describe()} vs {else_v.describe()}"
                )
            shape = tuple(
                a if a == b else None for a, b in zip(then_v.type.shape, else_v.type.shape)
            )
            outputs.append(then_v.type.clone(shape=shape).make_variable())
        return Apply(self, [cond, *values], outputs)

    def perform(self, node, inputs, output_storage):
        cond, *values = inputs
        n = self.n_outs
        if bool(cond):
            chosen = values[:n]
        else:
            chosen = [np.array(v, copy=True) for v in values[n:]]
        for cell, value in zip(output_storage, chosen):
            cell[0] = value

    def grad(self, inputs, output_grads):
        from tensorjit.tensor.math import zeros_like

        cond, *values = inputs
        n = self.n_outs
        then_grads, else_grads = [], []
        for g, then_v, else_v in zip(output_grads, values[:n], values[n:]):
            then_grads.append(ifelse(cond, g, zeros_like(then_v, dtype=g.type.dtype)))
            else_grads.append(ifelse(cond, zeros_like(else_v, dtype=g.type.dtype), g))
        return [None, *then_grads, *else_grads]

    def infer_shape(self, fgraph, node, input_shapes):
        n = self.n_outs
        shapes = []
        for then_s, else_s in zip(input_shapes[1 : 1 + n], input_shapes[1 + n :]):
            shapes.append(tuple(ifelse(node.inputs[0], a, b) for a, b in zip(then_s, else_s)))
        return shapes


def ifelse(cond: Any, then_branch: Any, else_branch: Any, name: str | None = None) -> Any:
    """``then_branch`` if the scalar ``cond`` is true, else ``else_branch`` (each a value or
    a list of values); only the branch taken is computed."""
    as_list = isinstance(then_branch, (list, tuple))
    then_vals: Sequence[Any] = list(then_branch) if as_list else [then_branch]
    else_vals: Sequence[Any] = list(else_branch) if as_list else [else_branch]
    if len(then_vals) != len(else_vals):
        raise ValueError(
            f"ifelse: {len(then_vals)} values in the then branch, {len(else_vals)} in the else"
        )
    outputs = IfElse(len(then_vals))(cond, *then_vals, *else_vals)
    if not isinstance(outputs, list):
        outputs = [outputs]
    if name is not None:
        for out in outputs:
            out.name = name
    return outputs if as_list else outputs[0]


__all__ = ["IfElse", "ifelse"]
