"""Stable forms of softmax expressions (the stabilize phase): ``log(softmax(x))`` becomes
``log_softmax(x)``, and the cross-entropy of a softmax with class indices,
``-log(softmax(x)[i, y_i])``, selects from ``log_softmax(x)`` instead."""

from __future__ import annotations

from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.rewrites import node_rewriter
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.nnet.basic import LogSoftmax, SelectClass, Softmax
from tensorjit.tensor.rewriting.util import fits, scalar_name


@node_rewriter([Elemwise], name="local_log_softmax")
def local_log_softmax(fgraph: FunctionGraph, node):
    if scalar_name(node) != "log":
        return None
    (arg,) = node.inputs
    owner = arg.owner
    if owner is None:
        return None
    if isinstance(owner.op, Softmax):
        new = LogSoftmax(owner.op.axis)(owner.inputs[0])
    elif isinstance(owner.op, SelectClass):
        probs, labels = owner.inputs
        source = probs.owner
        if source is None or not isinstance(source.op, Softmax):
            return None
        new = SelectClass()(LogSoftmax(source.op.axis)(source.inputs[0]), labels)
    else:
        return None
    new = fits(node.outputs[0], new)
    return None if new is None else [new]
