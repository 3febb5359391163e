"""Batching an inner graph of ``Scan``: the same computation for every step at once.

A per-step value ``v_t`` that depends only on sequences (and non-sequences) can be
computed for all steps before the loop, as an array ``V`` with a leading step axis; one
that depends on the loop's recorded outputs can be computed after it. ``batch_graph``
rebuilds a piece of inner graph that way, op by op, with a rule per op kind; an op
without a rule (or a case a rule does not cover) makes it return None, and the caller
leaves the loop alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.traversal import toposort
from tensorjit.tensor.elemwise import DimShuffle, Elemwise
from tensorjit.tensor.math import Dot, Reduce
from tensorjit.tensor.nnet.basic import LogSoftmax, Softmax
from tensorjit.tensor.type import TensorType

# A value during batching: the outer variable and whether it has the leading step axis.
Batched = tuple[Variable, bool]


def _shifted(axes: Sequence[int], ndim: int) -> tuple[int, ...]:
    """Axes of a step's ``ndim``-d value, on the batched value (a leading step axis)."""
    return tuple(a % ndim + 1 for a in axes)


def steps_as_rows(x: Variable) -> Variable:
    """A (T, B, n) stack of per-step matrices as the (T B, n) matrix of all their rows."""
    from tensorjit.tensor.shape_ops import reshape

    return reshape(x, (-1, x.shape[2]), ndim=2)


def batch_rule_exists(node: Apply) -> bool:
    """Whether ``node`` can be batched (given batched inputs of the kinds it reads)."""
    op = node.op
    if isinstance(op, Elemwise):
        return op.inplace is None
    # exact classes: a subclass (a MappedReduce's map) is not what the rules rebuild
    return type(op) in (DimShuffle, Dot, Reduce, Softmax, LogSoftmax)


def widens(node: Apply) -> bool:
    """An elementwise node whose output is larger than each of its inputs (an outer
    product ``u[:, None] * v[None, :]``): batching it would build a per-step matrix that
    a product of the stacked vectors computes better, so it is not pushed by itself."""
    if not isinstance(node.op, Elemwise):
        return False
    out = node.outputs[0].type.broadcastable
    return (
        all(
            any(b and not o for b, o in zip(i.type.broadcastable, out))
            for i in node.inputs
            if isinstance(i.type, TensorType)
        )
        and len(node.inputs) > 1
    )


def _apply_batched(node: Apply, ins: list[Batched]) -> list[Variable] | None:
    op = node.op
    values = [v for v, _ in ins]
    if not any(b for _, b in ins):
        return op.make_node(*values).outputs
    if isinstance(op, Elemwise):
        if op.inplace is not None:
            return None
        # Unbatched inputs gain a broadcast leading axis when make_node pads them.
        return op.make_node(*values).outputs
    if isinstance(op, DimShuffle):
        order = (0, *("x" if d == "x" else d + 1 for d in op.new_order))
        return [DimShuffle(op.input_ndim + 1, order)(values[0])]
    if isinstance(op, Reduce):
        return [Reduce(op.kind, _shifted(op.axis, node.inputs[0].type.ndim), op.dtype)(values[0])]
    if isinstance(op, (Softmax, LogSoftmax)):
        return [type(op)(_shifted(op.axis, node.inputs[0].type.ndim))(values[0])]
    if isinstance(op, Dot):
        (x, bx), (y, by) = ins
        step_x = x.type.ndim - 1 if bx else x.type.ndim
        step_y = y.type.ndim - 1 if by else y.type.ndim
        if bx and not by and step_x == 1:  # x_t . y for all t: X . y
            return [Dot()(x, y)]
        if bx and not by and step_x == 2:  # a minibatch per step: (T, B, n) as (T B, n)
            from tensorjit.tensor.shape_ops import reshape

            flat = Dot()(steps_as_rows(x), y)
            tail = (flat.shape[1],) if y.type.ndim == 2 else ()
            return [reshape(flat, (x.shape[0], x.shape[1], *tail), ndim=1 + y.type.ndim)]
        if by and not bx and step_y == 1 and step_x == 2:  # A . y_t = (Y . A^T)[t]
            return [Dot()(y, x.T)]
        if by and not bx and step_y == 1 and step_x == 1:  # a . y_t
            return [Dot()(y, x)]
        return None
    return None


def batch_graph(
    outputs: Sequence[Variable], leaves: Mapping[Variable, Batched]
) -> list[Variable] | None:
    """The outer variables computing ``outputs`` for every step, or None.

    ``leaves`` maps inner variables to outer ones: a sequence's inner step to its outer
    rows ``(seq[:n_steps], True)``, a non-sequence to ``(outer, False)``, a recorded output
    to its rows. Every other variable ``outputs`` read must be a constant or computed by
    nodes between the leaves and ``outputs``.
    """
    env: dict[Variable, Batched] = dict(leaves)
    for node in toposort(list(outputs), set(leaves)):
        ins: list[Batched] = []
        for i in node.inputs:
            if i in env:
                ins.append(env[i])
            elif isinstance(i, Constant):
                ins.append((i, False))
            else:
                return None  # reads loop state: not batchable here
        if not batch_rule_exists(node):
            return None
        try:
            outs = _apply_batched(node, ins)
        except (TypeError, ValueError):
            # e.g. a leaf whose rows lost a static length 1 that a dimshuffle drops
            return None
        if outs is None:
            return None
        batched = any(b for _, b in ins)
        for old, new in zip(node.outputs, outs):
            if new.type.dtype != old.type.dtype:
                return None
            env[old] = (new, batched)
    result = []
    for o in outputs:
        if o in env:
            var, batched = env[o]
        elif isinstance(o, Constant):
            return None
        else:
            return None
        if not batched:
            return None  # the same for every step: hoisting's job, not ours
        result.append(var)
    return result
