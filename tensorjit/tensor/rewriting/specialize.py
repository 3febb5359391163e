"""Faster equivalent forms (the specialize phase): powers, reductions of squares and
absolute values in one pass."""

from __future__ import annotations

import numpy as np

from tensorjit.core.graph.fgraph import OUTPUT, FunctionGraph
from tensorjit.core.rewrites import node_rewriter
from tensorjit.tensor import math as tm
from tensorjit.tensor.blas import Gemm, PenalisedGemm
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.rewriting.shape import shape_of
from tensorjit.tensor.rewriting.util import (
    compiles_for_host,
    constant_data,
    fits,
    scalar_name,
    single_client,
)
from tensorjit.tensor.variable import constant

MAX_MUL_POWER = 6  # x**n for integer |n| <= this becomes multiplications


@node_rewriter([Elemwise], name="local_pow_specialize")
def local_pow_specialize(fgraph: FunctionGraph, node):
    """x**2 -> sqr(x), x**0.5 -> sqrt(x), x**-1 -> 1/x, x**1 -> x, x**0 -> 1, small
    integer powers -> a few multiplications (squaring)."""
    if scalar_name(node) != "pow":
        return None
    x, exponent = node.inputs
    data = constant_data(exponent)
    out = node.outputs[0]
    if data is None or data.size == 0 or not (data == data.flat[0]).all():
        return None
    if out.type.numpy_dtype.kind not in "fc" or x.type.dtype != out.type.dtype:
        return None
    p = float(data.flat[0])
    if p == 0.5:
        new = tm.sqrt(x)
    elif p == -0.5:
        new = tm.true_div(1.0, tm.sqrt(x))
    elif p.is_integer() and abs(p) <= MAX_MUL_POWER:
        n = int(abs(p))
        if n == 0:  # ones of the result's shape, without computing the power
            new = tm.alloc(constant(np.ones((), dtype=out.type.dtype)), *shape_of(fgraph, out))
        else:
            new = _power_by_squaring(x, n)
            if p < 0:
                new = tm.true_div(1.0, new)
    else:
        return None
    new = fits(out, new)
    return None if new is None else [new]


def _power_by_squaring(x, n: int):
    result = None
    square = x
    while n:
        if n & 1:
            result = square if result is None else tm.mul(result, square)
        n >>= 1
        if n:
            square = tm.sqr(square)
    return result


@node_rewriter([tm.Reduce], name="local_reduce_of_map")
def local_reduce_of_map(fgraph: FunctionGraph, node):
    """sum/max/... of ``sqr(x)`` or ``abs(x)`` read by nothing else -> one MappedReduce:
    the mapped values are never stored (an L2 penalty's ``sum(w ** 2)`` reads w once).
    Host functions only: device backends have no kernel for it."""
    if type(node.op) is not tm.Reduce or not compiles_for_host(fgraph):
        return None
    mapped = node.inputs[0]
    name = scalar_name(mapped.owner)
    if name not in tm.REDUCE_MAPS or single_client(fgraph, mapped) is not node:
        return None
    (x,) = mapped.owner.inputs
    if x.type.dtype != mapped.type.dtype or x.type.numpy_dtype.kind not in "fi":
        return None
    new = tm.MappedReduce(node.op.kind, node.op.axis, node.op.dtype, name)(x)
    new = fits(node.outputs[0], new)
    return None if new is None else [new]


@node_rewriter([tm.MappedReduce, Gemm], name="local_decay_with_penalty")
def local_decay_with_penalty(fgraph: FunctionGraph, node):
    """``sum(w ** 2)`` (a MappedReduce) and ``Gemm(w, a, x, y, beta)`` with a constant
    beta other than 1 (an L2-penalised weight's update: the penalty and the weight's
    decay, see local_gemm) -> ``(updated, squares) = PenalisedGemm(w, a, x, y, beta)``:
    w is read once for the sum, the decay and the product's accumulation, where the
    reduction, the GEMM's scaling pass and the GEMM each read it. Host functions only.
    Either node may be made last, so both look for the other."""
    if not compiles_for_host(fgraph):
        return None
    w = node.inputs[0]
    if w.type.dtype not in ("float32", "float64"):
        return None
    users = [client for client, i in fgraph.clients_of(w) if i == 0 and client != OUTPUT]
    penalties = [
        n
        for n in users
        if _is_sum_of_squares(n) and n.outputs[0].type.dtype in ("float32", "float64")
    ]
    updates = [n for n in users if _decays(n)]
    if not penalties or not updates:
        return None
    penalty, update = penalties[0], updates[0]
    updated, squares = PenalisedGemm(penalty.outputs[0].type.dtype)(*update.inputs)
    updated = fits(update.outputs[0], updated)
    total = fits(penalty.outputs[0], squares)
    if updated is None or total is None:
        return None
    return {penalty.outputs[0]: total, update.outputs[0]: updated}


def _is_sum_of_squares(node) -> bool:
    """Whether ``node`` is the sum of the squares of all of its input's elements."""
    op = node.op
    return (
        type(op) is tm.MappedReduce
        and (op.kind, op.map) == ("sum", "sqr")
        and sorted(op.axis) == list(range(node.inputs[0].type.ndim))
    )


def _decays(node) -> bool:
    """Whether ``node`` is a GEMM that scales its accumulator by a constant other than 1
    (and 0: BLAS does not read the accumulator then, so its NaNs do not spread)."""
    if type(node.op) is not Gemm:
        return False
    beta = constant_data(node.inputs[4])
    return beta is not None and bool(beta != 1) and bool(beta != 0)
