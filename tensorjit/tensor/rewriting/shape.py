"""Shapes from ``infer_shape`` instead of from computed values.

``shape_of(fgraph, var)`` gives one int64 scalar per dimension of ``var``: a constant
where the static shape knows it, else an expression over the shapes of the graph's
inputs built from each op's ``infer_shape``. The rewrites below then replace
``x.shape[i]`` and ``x.shape`` by it, so a gradient does not keep a big temporary alive
(or even computed) just to ask its shape.
"""

from __future__ import annotations

import numpy as np

from tensorjit.core.graph.basic import Constant, Variable
from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.rewrites import node_rewriter
from tensorjit.tensor.math import cast
from tensorjit.tensor.shape_ops import MakeVector, Shape
from tensorjit.tensor.subtensor import Subtensor, getitem
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable, constant

_CACHE_ATTR = "_tensor_shape_cache"


def _as_int64(value) -> Variable:
    if isinstance(value, (int, np.integer)):
        return constant(np.int64(value))
    var = as_tensor_variable(value)
    return var if var.type.dtype == "int64" else cast(var, "int64")


def _runtime_shape(var: Variable) -> tuple[Variable, ...] | None:
    """Shape entries read from the value at run time (None for non-tensor variables)."""
    if not isinstance(var.type, TensorType):
        return None
    shape_var = None
    entries = []
    for axis, static in enumerate(var.type.shape):
        if static is not None:
            entries.append(constant(np.int64(static)))
        else:
            shape_var = shape_var if shape_var is not None else Shape()(var)
            entries.append(getitem(shape_var, axis))
    return tuple(entries)


def shape_of(fgraph: FunctionGraph, var: Variable) -> tuple[Variable, ...]:
    """Symbolic shape of ``var`` (memoized per graph; iterative, no recursion limit)."""
    cache: dict[Variable, tuple] = fgraph.__dict__.setdefault(_CACHE_ATTR, {})
    stack = [var]
    while stack:
        top = stack[-1]
        if top in cache:
            stack.pop()
            continue
        node = top.owner
        infer = getattr(node.op, "infer_shape", None) if node is not None else None
        if infer is None:
            cache[top] = _runtime_shape(top)
            stack.pop()
            continue
        missing = [i for i in node.inputs if i not in cache]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        if any(cache[i] is None for i in node.inputs):
            # An input of another family (e.g. sparse) has no tensor shape entries here:
            # the outputs' shapes are read at run time.
            for out in node.outputs:
                cache[out] = _runtime_shape(out)
            continue
        shapes = infer(fgraph, node, [cache[i] for i in node.inputs])
        for out, shape in zip(node.outputs, shapes or [None] * len(node.outputs)):
            if shape is None or not isinstance(out.type, TensorType) or len(shape) != out.type.ndim:
                cache[out] = _runtime_shape(out)
            else:
                cache[out] = tuple(
                    constant(np.int64(s)) if s is not None else _as_int64(e)
                    for s, e in zip(out.type.shape, shape)
                )
    return cache[var]


def _is_shape_entry_of(entry: Variable, var: Variable) -> bool:
    """Whether ``entry`` is ``Shape(var)[i]`` itself (nothing to gain)."""
    owner = entry.owner
    if owner is None or not isinstance(owner.op, Subtensor):
        return False
    source = owner.inputs[0].owner
    return source is not None and isinstance(source.op, Shape) and source.inputs[0] is var


@node_rewriter([Subtensor], name="local_shape_i")
def local_shape_i(fgraph: FunctionGraph, node):
    """``x.shape[i]`` -> the i-th entry of ``shape_of(x)``."""
    source = node.inputs[0].owner
    if source is None or not isinstance(source.op, Shape) or node.op.entries != ("i",):
        return None
    index = node.inputs[1]
    if not isinstance(index, Constant):
        return None
    x = source.inputs[0]
    entry = shape_of(fgraph, x)[int(index.data)]
    if entry is node.outputs[0] or _is_shape_entry_of(entry, x):
        return None
    return [entry]


@node_rewriter([Shape], name="local_shape")
def local_shape(fgraph: FunctionGraph, node):
    """``x.shape`` -> a vector of ``shape_of(x)`` when that avoids reading x."""
    x = node.inputs[0]
    entries = shape_of(fgraph, x)
    if any(_is_shape_entry_of(e, x) for e in entries):
        return None  # it would still read x's shape (and could rewrite forever)
    if all(isinstance(e, Constant) for e in entries):
        return [constant(np.asarray([int(e.data) for e in entries], dtype="int64"))]
    return [MakeVector("int64")(*entries)]
