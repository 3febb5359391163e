"""Useless or mergeable structure: dimshuffles, reshapes, nested sums (canonicalize)."""

from __future__ import annotations

from tensorjit.core.graph.basic import Constant
from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.rewrites import node_rewriter
from tensorjit.tensor.elemwise import DimShuffle, Elemwise
from tensorjit.tensor.math import Alloc, Reduce
from tensorjit.tensor.rewriting.util import fits, is_length_of, op_name
from tensorjit.tensor.shape_ops import MakeVector, Reshape
from tensorjit.tensor.subtensor import Subtensor


@node_rewriter([DimShuffle], name="local_dimshuffle_lift")
def local_dimshuffle_lift(fgraph: FunctionGraph, node):
    """An identity dimshuffle disappears; a dimshuffle of a dimshuffle becomes one."""
    op = node.op
    x = node.inputs[0]
    if op.new_order == tuple(range(op.input_ndim)):
        return [x]
    inner = x.owner
    if inner is None or not isinstance(inner.op, DimShuffle):
        return None
    composed = tuple("x" if d == "x" else inner.op.new_order[d] for d in op.new_order)
    source = inner.inputs[0]
    if composed == tuple(range(source.type.ndim)):
        new = source
    else:
        new = DimShuffle(source.type.ndim, composed)(source)
    new = fits(node.outputs[0], new)
    return None if new is None else [new]


@node_rewriter([Reshape], name="local_reshape_chain")
def local_reshape_chain(fgraph: FunctionGraph, node):
    """reshape(reshape(x, s1), s2) -> reshape(x, s2); a reshape to x's own static shape
    disappears."""
    x, shape = node.inputs
    out = node.outputs[0]
    inner = x.owner
    if inner is not None and isinstance(inner.op, Reshape):
        new = fits(out, Reshape(node.op.ndim)(inner.inputs[0], shape))
        return None if new is None else [new]
    if None not in x.type.shape and x.type.shape == out.type.shape:
        return [x]
    return None


@node_rewriter([Reduce], name="local_sum_of_sum")
def local_sum_of_sum(fgraph: FunctionGraph, node):
    """sum(sum(x, a1), a2) -> sum(x, a1 + a2) (axes of the outer sum renumbered)."""
    if type(node.op) is not Reduce or node.op.kind != "sum" or node.op.dtype is not None:
        return None  # (a MappedReduce's map is not a sum's business)
    inner = node.inputs[0].owner
    if inner is None or type(inner.op) is not Reduce or inner.op.kind != "sum":
        return None
    if inner.op.dtype is not None or len(fgraph.clients.get(node.inputs[0], ())) != 1:
        return None
    kept = [a for a in range(inner.inputs[0].type.ndim) if a not in inner.op.axis]
    axes = tuple(sorted(set(inner.op.axis) | {kept[a] for a in node.op.axis}))
    new = fits(node.outputs[0], Reduce("sum", axes)(inner.inputs[0]))
    return None if new is None else [new]


@node_rewriter([Reduce], name="local_sum_of_scaled")
def local_sum_of_scaled(fgraph: FunctionGraph, node):
    """sum(x / c, axes) -> sum(x, axes) / c and sum(x * c) -> sum(x) * c, where c is
    the same all along the summed axes (statically broadcast there): a mean of a mean
    (``mean(mean(h, -1), -1)``, the division between them) becomes nested sums, which
    local_sum_of_sum makes one reduction over both axes (one pass, whose axes the
    kernels can fold together) instead of two."""
    op = node.op
    if type(op) is not Reduce or op.kind != "sum" or op.dtype is not None:
        return None
    scaled = node.inputs[0]
    name = op_name(scaled)
    if name not in ("mul", "true_div"):  # (other clients of x / c keep it: no loss)
        return None
    out = node.outputs[0]
    axes = range(scaled.type.ndim) if op.axis is None else op.axis
    positions = (1,) if name == "true_div" else (1, 0)
    for position in positions:
        x, c = scaled.owner.inputs[1 - position], scaled.owner.inputs[position]
        if x.type.dtype != out.type.dtype or c.type.ndim != scaled.type.ndim:
            continue
        if x.type.dtype != scaled.type.dtype or not all(c.type.shape[a] == 1 for a in axes):
            continue
        kept = [a for a in range(c.type.ndim) if a not in axes]
        summed = Reduce("sum", tuple(axes))(x)
        factor = DimShuffle(c.type.ndim, tuple(kept))(c) if len(kept) < c.type.ndim else c
        pair = (summed, factor) if position == 1 else (factor, summed)
        new = fits(out, scaled.owner.op(*pair))
        if new is not None:
            return [new]
    return None


@node_rewriter([Subtensor], name="local_subtensor_of_makevector")
def local_subtensor_of_makevector(fgraph: FunctionGraph, node):
    """MakeVector(a, b, c)[1] -> b."""
    source = node.inputs[0].owner
    if source is None or not isinstance(source.op, MakeVector) or node.op.entries != ("i",):
        return None
    index = node.inputs[1]
    if not isinstance(index, Constant):
        return None
    new = fits(node.outputs[0], source.inputs[int(index.data)])
    return None if new is None else [new]


@node_rewriter([Alloc], name="local_useless_alloc")
def local_useless_alloc(fgraph: FunctionGraph, node):
    """alloc(v) with v already of the output's type (e.g. 0-d alloc) -> v."""
    value = node.inputs[0]
    if value.type == node.outputs[0].type and len(node.inputs) == 1:
        return [value]
    return None


@node_rewriter([Elemwise], name="local_elemwise_alloc")
def local_elemwise_alloc(fgraph: FunctionGraph, node):
    """An operand that is a broadcast value allocated to the shape of another operand
    (the gradient of ``c * sum(w**2)`` is ``2 * w * alloc(c, *w.shape)``) -> the value
    itself, broadcast by the elementwise op: no array of that shape is filled."""
    if node.op.inplace is not None or len(node.inputs) < 2:
        return None
    new_inputs = list(node.inputs)
    for k, operand in enumerate(node.inputs):
        alloc = operand.owner
        if alloc is None or not isinstance(alloc.op, Alloc):
            continue
        value, dims = alloc.inputs[0], alloc.inputs[1:]
        if any(s != 1 for s in value.type.shape):
            continue  # only values broadcast along every axis (scalars and the like)
        # Only operands that stay can give the shape (not another alloc replaced here).
        others = [
            x
            for j, x in enumerate(node.inputs)
            if j != k and (x.owner is None or not isinstance(x.owner.op, Alloc))
        ]
        if all(
            operand.type.shape[axis] == 1
            or any(
                x.type.shape[axis] != 1 and is_length_of(fgraph, dims[axis], x, axis)
                for x in others
            )
            for axis in range(operand.type.ndim)
        ):
            pad = operand.type.ndim - value.type.ndim
            new_inputs[k] = (
                DimShuffle(value.type.ndim, ("x",) * pad + tuple(range(value.type.ndim)))(value)
                if pad
                else value
            )
    if new_inputs == list(node.inputs):
        return None
    new = fits(node.outputs[0], node.op.make_node(*new_inputs).outputs[0])
    return None if new is None else [new]


@node_rewriter([Reduce], name="local_reduce_of_new_axes")
def local_reduce_of_new_axes(fgraph: FunctionGraph, node):
    """sum/max/... over axes a dimshuffle only added -> drop those axes instead."""
    inner = node.inputs[0].owner
    if type(node.op) is not Reduce:
        return None  # a MappedReduce keeps its map
    if inner is None or not isinstance(inner.op, DimShuffle) or node.op.kind == "prod":
        return None
    order = inner.op.new_order
    if not node.op.axis or any(order[a] != "x" for a in node.op.axis):
        return None
    kept = tuple(d for a, d in enumerate(order) if a not in node.op.axis)
    source = inner.inputs[0]
    new = (
        source
        if kept == tuple(range(source.type.ndim))
        else DimShuffle(source.type.ndim, kept)(source)
    )
    if node.op.dtype is not None:
        return None
    new = fits(node.outputs[0], new)
    return None if new is None else [new]
