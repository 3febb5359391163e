"""``top = max(x, a)`` and ``sum(exp(x - top), a)`` along the last axis a -> one
``MaxExpSum`` node (tensor/max_exp_sum.py) that reads each group of x once for both.

Written out, the sum waits for the maximum and reads x again: two passes over a matrix
larger than the cache. This is the statistics of every max-shifted exponential sum: a
logsumexp (``top + log(total)``), a log-softmax or a cross-entropy from logits written
out. Not a softmax written out (``e / sum(e)``, e = exp(x - top)): its exponentials are
read by the division too, and computing them once for both (row blocks keep them in the
cache) is faster than twice.

Served: float32 and float64 graphs of two or more axes, the reduction along the last axis
(rows: a classifier's logits, attention scores), the sum in x's dtype, before fusion
(``sum(exp(sub(x, top)))``) or after it joined the sum (an ElemwiseReduce of
``exp(x0 - x1)``), the exponentials read by that sum alone. Host functions only (device
backends have no MaxExpSum kernel). Not: other axes (a column's group would be gathered
twice, element by element; the reductions' own columns loop serves them), vectors (a
full reduction splits over threads as it is).
"""

from __future__ import annotations

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.rewrites import node_rewriter
from tensorjit.tensor import math as tm
from tensorjit.tensor.composite import Composite
from tensorjit.tensor.elemwise import scalar_name
from tensorjit.tensor.elemwise_reduce import ElemwiseReduce
from tensorjit.tensor.max_exp_sum import INPUT_DTYPES, MaxExpSum
from tensorjit.tensor.rewriting.util import (
    compiles_for_host,
    fits,
    reduced_value_restored,
    single_client,
)

# Composite{sub,exp}: exp(x0 - x1)
_SHIFTED_EXP = (("sub", (("in", 0), ("in", 1))), ("exp", (("step", 0),)))


def _shifted_operands(fgraph: FunctionGraph, node: Apply) -> tuple[Variable, Variable] | None:
    """(x, s) when ``node`` sums exp(x - s) and nothing else, and nothing else reads
    those exponentials (a softmax written out divides them by the sum: computed once,
    in row blocks that stay in the cache, they serve both; the kernel's would be computed
    twice, 1.3-1.6x slower)."""
    op = node.op
    if type(op) is ElemwiseReduce:
        composite = op.scalar_op
        if type(composite) is not Composite or op.kind != "sum":
            return None
        program = tuple((step.name, args) for step, args in composite.program)
        if program != _SHIFTED_EXP or len(node.inputs) != 2:
            return None
        return node.inputs[0], node.inputs[1]
    if type(op) is not tm.Reduce or op.kind != "sum":
        return None
    exponentials = node.inputs[0].owner
    if scalar_name(exponentials) != "exp" or single_client(fgraph, node.inputs[0]) is not node:
        return None
    shifted = exponentials.inputs[0].owner
    if scalar_name(shifted) != "sub":
        return None
    return shifted.inputs[0], shifted.inputs[1]


def _maximum_of(s: Variable, x: Variable, axis: int) -> Apply | None:
    """The node computing max(x, axis) (a Reduce, or a MaxExpSum node's maximum) when s
    is it with the axis kept (a DimShuffle putting it back)."""
    reduced = reduced_value_restored(s, axis)
    top = None if reduced is None else reduced.owner
    # (a MaxExpSum's first output: its total, shifted by, is no maximum)
    if top is None or top.inputs[0] is not x or reduced is not top.outputs[0]:
        return None
    if type(top.op) is MaxExpSum or (type(top.op) is tm.Reduce and top.op.kind == "max"):
        return top if top.op.axis == (axis,) else None
    return None


@node_rewriter([tm.Reduce, ElemwiseReduce], name="local_max_and_shifted_exp_sum")
def local_max_and_shifted_exp_sum(fgraph: FunctionGraph, node: Apply):
    """The sum of exp(x - max(x)) along the last axis, and that maximum -> both from one
    MaxExpSum node."""
    if not compiles_for_host(fgraph) or len(node.op.axis) != 1:
        return None
    found = _shifted_operands(fgraph, node)
    if found is None:
        return None
    x, s = found
    (axis,) = node.op.axis
    dtype = node.outputs[0].type.dtype
    if x.type.ndim < 2 or axis != x.type.ndim - 1 or dtype not in INPUT_DTYPES:
        return None
    if x.type.dtype != dtype or node.inputs[0].type.dtype != dtype:
        return None
    top = _maximum_of(s, x, axis)
    if top is None:
        return None
    if type(top.op) is MaxExpSum:  # (a second sum of the same exponentials)
        total = fits(node.outputs[0], top.outputs[1])
        return None if total is None else {node.outputs[0]: total}
    maximum, total = MaxExpSum(axis)(x)
    maximum, total = fits(top.outputs[0], maximum), fits(node.outputs[0], total)
    if maximum is None or total is None:
        return None
    return {top.outputs[0]: maximum, node.outputs[0]: total}
