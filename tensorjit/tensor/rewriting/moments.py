"""``sum(x, a)`` and ``sum((x - g) ** 2, a)``, g constant along axis a (a row's mean, in
a layer norm, a variance, a standard deviation) -> one ``Moments`` node (tensor/moments.py)
that reads x once for both.

Written out, the second sum waits for the first (g is its mean) and reads x again:
two passes over a matrix larger than the cache. Moments gives the sum and the sum of
squared deviations from the exact mean, both in float64; then

    sum((x - g) ** 2) = m2 + n (g - mean) ** 2

(the second term is what moving the centre from the mean to g adds; both are
non-negative, so nothing cancels) is a few operations on the kept values, which fusion
joins into one kernel. The result is that of exact arithmetic rounded once (the graph's
own float32 arithmetic rounded x - g and its square first).

Served: any graph reducing x and its squared deviations from a per-row value along the
last axis, in float32 or float64 (layer norm and its statistics; ``var``/``std`` along
rows; standardising features). The last axis only: the kernel reads a group along its
axis, which for a column (axis 0 of a C-ordered matrix, a batch norm's statistics)
would be a strided walk, slower than the two passes' vector loops. Host functions only
(device backends have no Moments kernel).
"""

from __future__ import annotations

import numpy as np

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.fgraph import OUTPUT, FunctionGraph
from tensorjit.core.rewrites import node_rewriter
from tensorjit.tensor import math as tm
from tensorjit.tensor.elemwise import scalar_name
from tensorjit.tensor.moments import INPUT_DTYPES, Moments
from tensorjit.tensor.rewriting.shape import shape_of
from tensorjit.tensor.rewriting.util import compiles_for_host, fits
from tensorjit.tensor.variable import constant

FLOATS = ("float32", "float64")


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


def _centred(d: Variable, axis: int) -> tuple[Variable, Variable] | None:
    """(x, g) when ``d`` is ``x - g`` or ``g - x``, x of d's own shape pattern and g
    broadcast along ``axis``."""
    if scalar_name(d.owner) != "sub":
        return None
    for x, g in (d.owner.inputs, reversed(d.owner.inputs)):
        if (
            x.type.broadcastable == d.type.broadcastable
            and g.type.broadcastable[axis]
            and x.type.dtype in INPUT_DTYPES
            and g.type.dtype in FLOATS
        ):
            return x, g
    return None


def _sum_of(fgraph: FunctionGraph, x: Variable, axis: int) -> Apply | None:
    """A node summing x (as it is) along ``axis`` only, into a float: a Reduce, or a
    Moments node an earlier rewrite made of it (several deviations from the one sum)."""
    for client, _ in fgraph.clients_of(x):
        if client == OUTPUT:
            continue
        if type(client.op) is Moments and client.op.axis == (axis,):
            return client
        if (
            type(client.op) is tm.Reduce
            and client.op.kind == "sum"
            and client.op.axis == (axis,)
            and client.outputs[0].type.dtype in FLOATS
            # (a sum into a narrower dtype rounds each element first, as NumPy's does)
            and np.can_cast(x.type.dtype, client.outputs[0].type.dtype, "safe")
        ):
            return client
    return None


@node_rewriter([tm.Reduce, tm.MappedReduce], name="local_sum_and_squared_deviations")
def local_sum_and_squared_deviations(fgraph: FunctionGraph, node: Apply):
    """The sum of squared deviations from g along the last axis, when x's sum along it is
    also computed -> both from one Moments node."""
    if not compiles_for_host(fgraph) or len(node.op.axis) != 1:
        return None
    (axis,) = node.op.axis
    d = _deviation(node)
    if d is None or axis != d.type.ndim - 1 or d.type.ndim < 2:
        return None
    if node.outputs[0].type.dtype not in FLOATS:
        return None
    found = _centred(d, axis)
    if found is None:
        return None
    x, g = found
    summed = _sum_of(fgraph, x, axis)
    if summed is None:
        return None
    replacements = {}
    if type(summed.op) is Moments:
        total, m2 = summed.outputs
    else:
        total, m2 = Moments(axis)(x)
        new_sum = fits(summed.outputs[0], tm.cast(total, summed.outputs[0].type.dtype))
        if new_sum is None:
            return None
        replacements[summed.outputs[0]] = new_sum
    n = tm.cast(shape_of(fgraph, x)[axis], "float64")
    kept = [a for a in range(g.type.ndim) if a != axis]
    centre = tm.cast(g.dimshuffle(kept), "float64")
    shifted = m2 + n * tm.sqr(centre - total / n)
    # an empty group: no terms (the mean's 0 / 0 would make the shift's term NaN)
    squares = tm.switch(tm.gt(n, constant(0.0)), shifted, constant(0.0))
    new_squares = fits(node.outputs[0], tm.cast(squares, node.outputs[0].type.dtype))
    if new_squares is None:
        return None
    replacements[node.outputs[0]] = new_squares
    return replacements
