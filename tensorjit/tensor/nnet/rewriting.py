"""Stable forms of softmax expressions (the stabilize phase): ``log(softmax(x))`` becomes
``log_softmax(x)``, and the log of entries selected from a softmax (the cross-entropy
with class indices, ``-log(softmax(x)[i, y_i])``, by ``select_class`` or by indexing)
selects from ``log_softmax(x)`` instead."""

from __future__ import annotations

from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.rewrites import node_rewriter
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.nnet.basic import LogSoftmax, SelectClass, Softmax
from tensorjit.tensor.rewriting.util import fits, scalar_name
from tensorjit.tensor.subtensor import AdvancedSubtensor, Subtensor

# Ops whose output is elements of their first input (by the other inputs' indices)
SELECTIONS = (SelectClass, Subtensor, AdvancedSubtensor)


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
    elif isinstance(owner.op, SELECTIONS):
        # log of entries picked from a softmax (-log(p[arange(n), y])): the same entries
        # of log_softmax (a selection reads elements, so it commutes with log)
        probs, *rest = owner.inputs
        source = probs.owner
        if source is None or not isinstance(source.op, Softmax):
            return None
        new = owner.op(LogSoftmax(source.op.axis)(source.inputs[0]), *rest)
    else:
        return None
    new = fits(node.outputs[0], new)
    return None if new is None else [new]
