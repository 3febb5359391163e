"""``alpha * dot(x, y) + beta * z`` -> Gemm (the specialize phase).

A gradient summed from two products (a tied weight's) and scaled into an update,
``w - c * Gemm(dot(p, q), a, x, y, b)``, becomes ``Gemm(Gemm(w, -c b, p, q, 1), -c a, x,
y, 1)``: both products accumulate into ``w`` in place, with no pass over a gradient
temporary. An L2 penalty's ``w - c * Gemm(k * w, a, x, y, b)`` becomes
``Gemm(w, -c a, x, y, 1 - c b k)``: w decays and the product accumulates into it, in
place, in one node.
"""

from __future__ import annotations

import numpy as np

from tensorjit.core.graph.basic import Constant, Variable
from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.rewrites import node_rewriter
from tensorjit.tensor.blas import BLAS_DTYPES, Gemm, Ger
from tensorjit.tensor.elemwise import DimShuffle, Elemwise
from tensorjit.tensor.math import Alloc, Dot, mul, neg
from tensorjit.tensor.rewriting.util import (
    fits,
    is_length_of,
    op_name,
    scalar_name,
    single_client,
)
from tensorjit.tensor.variable import constant


def _scalar(var: Variable, dtype: str) -> Variable | None:
    """``var`` as a 0-d variable if it is a broadcast scalar (constant or padded)."""
    if isinstance(var, Constant) and var.data.size == 1:
        return constant(np.asarray(var.data.reshape(()), dtype=dtype))
    owner = var.owner
    if owner is not None and isinstance(owner.op, DimShuffle) and owner.inputs[0].type.ndim == 0:
        source = owner.inputs[0]
        return source if source.type.dtype == dtype else None
    return None


def _scaled_dot(fgraph: FunctionGraph, var: Variable, dtype: str):
    """(alpha, x, y) if ``var`` is ``dot(x, y)`` or ``alpha * dot(x, y)`` used only here."""
    if single_client(fgraph, var) is None:
        return None
    owner = var.owner
    if owner is not None and isinstance(owner.op, Dot):
        return constant(np.asarray(1, dtype=dtype)), *owner.inputs
    if op_name(var) != "mul":
        return None
    for d, s in (owner.inputs, owner.inputs[::-1]):
        if d.owner is not None and isinstance(d.owner.op, Dot) and single_client(fgraph, d):
            alpha = _scalar(s, dtype)
            if alpha is not None:
                return alpha, *d.owner.inputs
    return None


def _scaled_gemm(fgraph: FunctionGraph, var: Variable, dtype: str):
    """(c, the Gemm's inputs) if ``var`` is ``c * Gemm(...)`` (c a broadcast scalar)
    and both are used only here."""
    if op_name(var) != "mul" or single_client(fgraph, var) is None:
        return None
    for g, s in (var.owner.inputs, var.owner.inputs[::-1]):
        owner = g.owner
        if owner is not None and type(owner.op) is Gemm and not owner.op.inplace:
            c = _scalar(s, dtype)
            if c is not None and single_client(fgraph, g) is not None:
                return c, owner.inputs
    return None


def _matrix_product(fgraph: FunctionGraph, z: Variable) -> tuple | None:
    """(p, q) with ``z == dot(p, q)`` of two matrices, ``z`` a Dot or the transpose of one
    (``dot(a, b).T == dot(b.T, a.T)``) used only once; else None."""
    owner = z.owner
    if owner is not None and isinstance(owner.op, DimShuffle) and owner.op.new_order == (1, 0):
        inner = owner.inputs[0]
        if single_client(fgraph, inner) is None:
            return None
        found = _matrix_product(fgraph, inner)
        return None if found is None else (found[1].T, found[0].T)
    if (
        owner is not None
        and isinstance(owner.op, Dot)
        and all(v.type.ndim == 2 for v in owner.inputs)
    ):
        return tuple(owner.inputs)
    return None


def _multiple_of(fgraph: FunctionGraph, z: Variable, w: Variable, dtype: str):
    """The 0-d ``k`` when ``z == k * w``: a product whose factors are ``w`` once and
    broadcast scalars (constants, padded 0-d values, or such a value allocated to w's
    shape, as the gradient of ``l2 * sum(w ** 2)`` is); else None."""
    factors, stack, seen_w = [], [z], False
    while stack:
        v = stack.pop()
        if v is w and not seen_w:
            seen_w = True
            continue
        if op_name(v) == "mul" and single_client(fgraph, v) is not None:
            stack.extend(v.owner.inputs)
            continue
        if v.owner is not None and isinstance(v.owner.op, Alloc):
            value, dims = v.owner.inputs[0], v.owner.inputs[1:]
            if len(dims) != w.type.ndim or not all(
                is_length_of(fgraph, d, w, axis) for axis, d in enumerate(dims)
            ):
                return None
            v = value
        k = _scalar(v, dtype)
        if k is None:
            return None
        factors.append(k)
    if not seen_w or not factors:
        return None
    product = factors[0]
    for k in factors[1:]:
        product = mul(product, k)
    return product


def _update_through_gemm(fgraph: FunctionGraph, node, dtype: str):
    """``w - c * Gemm(z, a, x, y, b)`` (or ``w + ...``) -> ``Gemm(w -/+ (c b) z, -/+ c a,
    x, y, 1)``, or None."""
    name, out = scalar_name(node), node.outputs[0]
    w, term = node.inputs
    found = _scaled_gemm(fgraph, term, dtype)
    if found is None or w.type.on_device(out.type.device) != out.type:
        return None
    c, (z, a, x, y, b) = found
    if any(v.type.dtype != dtype for v in (z, x, y)) or z.type.ndim != out.type.ndim:
        return None
    c = neg(c) if name == "sub" else c
    one = constant(np.asarray(1, dtype=dtype))
    product = _matrix_product(fgraph, z)
    if product is None:
        # z = k * w (an L2 penalty's gradient): one Gemm on w whose beta is w's decay
        # (a single in-place update of w: a decay pass before it would be a second one,
        # which all-or-nothing calls would have to snapshot)
        k = _multiple_of(fgraph, z, w, dtype)
        if k is None:
            return None
        new = fits(out, Gemm()(w, mul(c, a), x, y, one + mul(mul(c, b), k)))
        return None if new is None else [new]
    inner = Gemm()(w, mul(c, b), *product, one)  # a Gemm on w, then the outer one
    new = fits(out, Gemm()(inner, mul(c, a), x, y, one))
    return None if new is None else [new]


@node_rewriter([Elemwise], name="local_gemm")
def local_gemm(fgraph: FunctionGraph, node):
    name = scalar_name(node)
    out = node.outputs[0]
    dtype = out.type.dtype
    if name not in ("add", "sub") or dtype not in BLAS_DTYPES:
        return None
    a, b = node.inputs
    through = _update_through_gemm(fgraph, node, dtype)
    if through is not None:
        return through
    for term, z, term_first in ((b, a, False), (a, b, True)):
        found = _scaled_dot(fgraph, term, dtype)
        if found is None or z.type.on_device(out.type.device) != out.type:
            continue
        alpha, x, y = found
        if x.type.ndim != 2 or x.type.dtype != dtype or y.type.dtype != dtype:
            continue
        one = constant(np.asarray(1, dtype=dtype))
        beta = one
        if name == "sub":
            if term_first:
                beta = constant(np.asarray(-1, dtype=dtype))  # alpha*dot - z
            else:
                alpha = neg(alpha)  # z - alpha*dot
        new = fits(out, Gemm()(z, alpha, x, y, beta))
        if new is not None:
            return [new]
    return None


def _outer_factors(fgraph: FunctionGraph, var: Variable, dtype: str):
    """(alpha, x, y) if ``var`` is ``[alpha *] x[:, None] * y[None, :]`` used only here."""
    if op_name(var) != "mul" or single_client(fgraph, var) is None:
        return None
    factors, stack = [], [var]
    while stack:
        v = stack.pop()
        if op_name(v) == "mul" and (v is var or single_client(fgraph, v) is not None):
            stack.extend(v.owner.inputs)
        else:
            factors.append(v)
    column = row = None
    alpha = constant(np.asarray(1, dtype=dtype))
    for f in factors:
        owner = f.owner
        if owner is not None and isinstance(owner.op, DimShuffle) and owner.op.input_ndim == 1:
            if owner.op.new_order == (0, "x") and column is None:
                column = owner.inputs[0]
                continue
            if owner.op.new_order == ("x", 0) and row is None:
                row = owner.inputs[0]
                continue
        scalar = _scalar(f, dtype)
        if scalar is None or alpha.owner is not None or not isinstance(alpha, Constant):
            return None
        if not np.all(alpha.data == 1):
            return None
        alpha = scalar
    if column is None or row is None or column.type.dtype != dtype or row.type.dtype != dtype:
        return None
    return alpha, column, row


@node_rewriter([Elemwise], name="local_ger")
def local_ger(fgraph: FunctionGraph, node):
    """z + alpha * outer(x, y) -> Ger (also z - ..., with alpha negated)."""
    name = scalar_name(node)
    out = node.outputs[0]
    dtype = out.type.dtype
    if name not in ("add", "sub") or dtype not in BLAS_DTYPES or out.type.ndim != 2:
        return None
    a, b = node.inputs
    candidates = [(b, a)] if name == "sub" else [(b, a), (a, b)]
    for term, z in candidates:
        found = _outer_factors(fgraph, term, dtype)
        if found is None or z.type.on_device(out.type.device) != out.type:
            continue
        alpha, x, y = found
        if name == "sub":
            alpha = neg(alpha)
        new = fits(out, Ger()(z, alpha, x, y))
        if new is not None:
            return [new]
    return None
