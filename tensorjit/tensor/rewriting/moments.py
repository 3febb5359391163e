"""``total = sum(x, a)`` and ``sum((x - total / divisor) ** 2, a)`` along one axis a (the
mean of a layer norm, a batch norm, ``var``, ``std``; the divisor broadcast everywhere;
or ``total * c``, as canonicalize writes the mean of a static length) -> one ``Moments``
node (tensor/moments.py) that reads x once for both.

Written out, the second sum waits for the first (the mean is its quotient) and reads x
again: two passes over a matrix larger than the cache. Moments computes the total, the
mean as the graph divides it, and the squared deviations from that mean in one pass
(a group the one-pass formula would amplify, or that is not finite, is read again from
the cache); the graph's own mean, computed from Moments' total, is the same number.

Served: float32 and float64 graphs of two or more axes reducing x and its squared
deviations from its own mean along one axis: a layer norm's rows, a batch norm's or
a feature standardisation's columns, ``var``/``std`` along an axis (several axes at
once, a batch norm of images' channels, keep two passes). Host functions only (device
backends have no Moments kernel).
"""

from __future__ import annotations

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.rewrites import node_rewriter
from tensorjit.tensor import math as tm
from tensorjit.tensor.elemwise import scalar_name
from tensorjit.tensor.moments import INPUT_DTYPES, Moments
from tensorjit.tensor.rewriting.util import compiles_for_host, fits, reduced_value_restored


def _deviation(node: Apply) -> Variable | None:
    """``d`` when ``node`` sums ``d ** 2`` (a MappedReduce, or a Reduce of sqr(d) or
    d * d) and nothing else."""
    op = node.op
    if type(op) is tm.MappedReduce:
        return node.inputs[0] if (op.kind, op.map) == ("sum", "sqr") else None
    if type(op) is not tm.Reduce or op.kind != "sum":
        return None
    squares = node.inputs[0].owner
    name = scalar_name(squares)
    if name == "sqr":
        return squares.inputs[0]
    if name == "mul" and squares.inputs[0] is squares.inputs[1]:
        return squares.inputs[0]
    return None


def _scaled_sum(g: Variable, axis: int) -> tuple[Variable, Variable, str] | None:
    """(the reduced value, the divisor, mean_by) when g is that value with its axis put
    back, divided by one broadcast everywhere ("div"), or multiplied by one ("mul": a
    static length's reciprocal, as canonicalize writes a division by a constant), all of
    one dtype."""
    name = scalar_name(g.owner)
    if name == "true_div":
        pairs = [tuple(g.owner.inputs)]
    elif name == "mul" and len(g.owner.inputs) == 2:
        a, b = g.owner.inputs
        pairs = [(a, b), (b, a)]
    else:
        return None
    for kept, divisor in pairs:
        if all(divisor.type.broadcastable) and divisor.type.dtype == g.type.dtype:
            reduced = reduced_value_restored(kept, axis)
            if reduced is not None:
                return reduced, divisor, "div" if name == "true_div" else "mul"
    return None


def _mean_of(g: Variable, axis: int) -> tuple[Apply, Variable, str] | None:
    """(the node summing x, the divisor, mean_by) when g is ``sum(x, axis)`` (a Reduce,
    or a Moments node's total) with the axis kept, divided by (or multiplied by) a value
    broadcast everywhere, all of one dtype."""
    found = _scaled_sum(g, axis)
    if found is None:
        return None
    reduced, divisor, mean_by = found
    summed = reduced.owner
    if (
        summed is not None
        and type(summed.op) is Moments
        and summed.inputs[1] is divisor
        and summed.op.mean_by == mean_by
    ):
        return summed, divisor, mean_by  # (a second copy of the squares: the first was rewritten)
    if (
        summed is None
        or type(summed.op) is not tm.Reduce
        or summed.op.kind != "sum"
        or summed.op.axis != (axis,)
        or summed.outputs[0].type.dtype != g.type.dtype
    ):
        return None
    return summed, divisor, mean_by


@node_rewriter([tm.Reduce, tm.MappedReduce], name="local_sum_and_squared_deviations")
def local_sum_and_squared_deviations(fgraph: FunctionGraph, node: Apply):
    """The squared deviations of x from its own mean along one axis, and the sum that
    mean divides -> both from one Moments node."""
    if not compiles_for_host(fgraph) or len(node.op.axis) != 1:
        return None
    (axis,) = node.op.axis
    d = _deviation(node)
    if d is None or d.type.ndim < 2 or scalar_name(d.owner) != "sub":
        return None  # (a vector's: the reduction's own split over threads serves it)
    dtype = node.outputs[0].type.dtype
    if dtype not in INPUT_DTYPES or d.type.dtype != dtype:
        return None
    for x, g in (d.owner.inputs, reversed(d.owner.inputs)):
        found = _mean_of(g, axis)
        if found is None or x.type.dtype != dtype or x.type.broadcastable != d.type.broadcastable:
            continue
        summed, divisor, mean_by = found
        if summed.inputs[0] is not x:
            continue
        if type(summed.op) is Moments:
            squares = fits(node.outputs[0], summed.outputs[1])
            if summed.op.axis != (axis,) or squares is None:
                return None
            return {node.outputs[0]: squares}
        total, squares = Moments(axis, mean_by)(x, divisor)
        total, squares = fits(summed.outputs[0], total), fits(node.outputs[0], squares)
        if total is None or squares is None:
            return None
        return {summed.outputs[0]: total, node.outputs[0]: squares}
    return None
