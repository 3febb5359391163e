"""Canonical forms of sums and products (the canonicalize phase).

A sum (add/sub/neg tree) becomes its terms sorted, with ``x - x`` cancelled, constants
folded into one and ``+ 0`` dropped; ``--x`` becomes ``x``. A product (mul/true_div tree,
float only) becomes ``(c * n1 * n2 ...) / (d1 * d2 ...)`` with common factors of the
numerator and denominator cancelled (the paper's ``a / (((a*b)/c)/d)`` becomes
``(c*d)/b``), constants folded and ``* 1`` dropped. Each rewrite looks only at the root
of a tree, descends only into subexpressions used nowhere else, and does nothing when the
canonical form is what is already there.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from tensorjit.core.graph.basic import Variable
from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.rewrites import node_rewriter
from tensorjit.tensor import math as tm
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.rewriting.shape import shape_of
from tensorjit.tensor.rewriting.util import (
    constant_data,
    fits,
    op_name,
    order_key,
    same_expression,
    scalar_name,
    single_client,
)
from tensorjit.tensor.variable import constant

ADDITIVE = {"add", "sub", "neg"}
MULTIPLICATIVE = {"mul", "true_div"}


def _is_root(fgraph: FunctionGraph, node, family: set[str]) -> bool:
    client = single_client(fgraph, node.outputs[0])
    return not (
        client is not None
        and scalar_name(client) in family
        and client.outputs[0].type.dtype == node.outputs[0].type.dtype
    )


def _collect(fgraph, root: Variable, family: set[str], flip: dict[str, tuple]):
    """Leaves of the ``family`` tree under ``root`` as (sign_or_side, var) pairs."""
    dtype = root.type.dtype
    leaves = []
    stack = [(root, 1)]
    while stack:
        var, sign = stack.pop()
        name = op_name(var)
        inner = name in family and var.type.dtype == dtype
        if inner and var is not root and single_client(fgraph, var) is None:
            inner = False  # shared subexpression: keep it whole
        if not inner:
            leaves.append((sign, var))
            continue
        signs = flip[name]
        for inp, s in zip(var.owner.inputs, signs):
            stack.append((inp, sign * s))
    return leaves


def _fold(op, items: list[Variable]) -> Variable:
    result = items[0]
    for item in items[1:]:
        result = op(result, item)
    return result


def _keep_shape(fgraph, out: Variable, new: Variable) -> Variable | None:
    """``new`` as a replacement for ``out``: cancelled terms may have been what made the
    result broadcast to its full shape, so broadcast it back when the static patterns
    differ (a (1, n) result must not stand for an (m, n) one)."""
    if new.type.ndim != out.type.ndim or new.type.broadcastable != out.type.broadcastable:
        new = tm.alloc(new, *shape_of(fgraph, out))
    return fits(out, new)


def _zeros_like_output(fgraph, var: Variable) -> Variable:
    return tm.alloc(constant(np.zeros((), dtype=var.type.dtype)), *shape_of(fgraph, var))


def _in_dtype(var: Variable, dtype: str) -> Variable:
    """A term of a sum whose every operation runs in ``dtype``, converted to it first.
    Each term of a mixed-dtype sum met the rest in ``dtype`` (NumPy converts an operand
    to the operation's dtype); reordered without the conversion, two terms could meet in a
    narrower one (an int8 and a float16 term make a float16 sum that NumPy never rounds
    to, in a float64 result)."""
    return var if var.type.dtype == dtype else tm.cast(var, dtype)


@node_rewriter([Elemwise], name="canonical_sum")
def canonical_sum(fgraph: FunctionGraph, node):
    name = scalar_name(node)
    out = node.outputs[0]
    if name not in ADDITIVE or out.type.numpy_dtype.kind not in "iufc":
        return None
    if not _is_root(fgraph, node, ADDITIVE):
        return None
    leaves = _collect(fgraph, out, ADDITIVE, {"add": (1, 1), "sub": (1, -1), "neg": (-1,)})
    const_total = None
    counts: Counter = Counter()
    order: dict[Variable, tuple] = {}
    for sign, var in leaves:
        data = constant_data(var)
        if data is not None:
            # np.negative wraps unsigned values as their arithmetic does (data * -1
            # raises for them): u - 200 becomes u + 56 in uint8, the same modulo 256.
            value = data if sign > 0 else np.negative(np.asarray(data))
            const_total = value if const_total is None else const_total + value
        else:
            counts[var] += sign
            order[var] = order_key(var)
    positives, negatives = [], []
    for var in sorted(counts, key=order.__getitem__):
        n = counts[var]
        (positives if n > 0 else negatives).extend([_in_dtype(var, out.type.dtype)] * abs(n))
    if const_total is not None and np.any(const_total != 0):
        positives.append(constant(np.asarray(const_total, dtype=out.type.dtype)))
    if positives:
        new = _fold(tm.add, positives)
        for neg in negatives:
            new = tm.sub(new, neg)
    elif negatives:
        new = tm.neg(_fold(tm.add, negatives))
    else:
        new = _zeros_like_output(fgraph, out)
    if same_expression(new, out):
        return None
    new = _keep_shape(fgraph, out, new)
    return None if new is None else [new]


@node_rewriter([Elemwise], name="canonical_product")
def canonical_product(fgraph: FunctionGraph, node):
    name = scalar_name(node)
    out = node.outputs[0]
    if name not in MULTIPLICATIVE or out.type.numpy_dtype.kind not in "fc":
        return None
    if not _is_root(fgraph, node, MULTIPLICATIVE):
        return None
    leaves = _collect(fgraph, out, MULTIPLICATIVE, {"mul": (1, 1), "true_div": (1, -1)})
    if any(v.type.dtype != out.type.dtype and constant_data(v) is None for _, v in leaves):
        return None  # mixed dtypes: reordering could change the arithmetic's dtype
    coefficient = None
    counts: Counter = Counter()
    order: dict[Variable, tuple] = {}
    for side, var in leaves:
        data = constant_data(var)
        if data is not None:
            with np.errstate(divide="ignore", invalid="ignore"):  # x / 0 folds to inf
                value = data if side > 0 else 1.0 / data
            with np.errstate(over="ignore", invalid="ignore"):
                coefficient = value if coefficient is None else coefficient * value
        else:
            counts[var] += side
            order[var] = order_key(var)
    numerator, denominator = [], []
    for var in sorted(counts, key=order.__getitem__):
        n = counts[var]
        (numerator if n > 0 else denominator).extend([var] * abs(n))
    if coefficient is not None and not np.all(coefficient == 1):
        numerator.insert(0, constant(np.asarray(coefficient, dtype=out.type.dtype)))
    if numerator:
        new = _fold(tm.mul, numerator)
    else:
        new = constant(np.ones((1,) * out.type.ndim, dtype=out.type.dtype))
    if denominator:
        new = tm.true_div(new, _fold(tm.mul, denominator))
    if not numerator and not denominator:
        new = tm.alloc(constant(np.ones((), dtype=out.type.dtype)), *shape_of(fgraph, out))
    if same_expression(new, out):
        return None
    new = _keep_shape(fgraph, out, new)
    return None if new is None else [new]


def _inverse_pair(outer: str, inner: str):
    @node_rewriter([Elemwise], name=f"local_{outer}_{inner}")
    def rewrite(fgraph: FunctionGraph, node):
        if scalar_name(node) != outer or op_name(node.inputs[0]) != inner:
            return None
        new = fits(node.outputs[0], node.inputs[0].owner.inputs[0])
        return None if new is None else [new]

    return rewrite


exp_of_log = _inverse_pair("exp", "log")
log_of_exp = _inverse_pair("log", "exp")


# Functions with f(-x) = -f(x) exactly (their kernels keep the symmetry: sign-symmetric
# formulas or copysign), and with f(-x) = f(x).
ODD = {"erf", "erfinv", "tanh", "sinh", "arcsinh", "arctanh", "sin", "tan", "arcsin", "arctan"}
ODD |= {"sign", "trunc", "round_half_away_from_zero"}
EVEN = {"abs", "sqr", "cos", "cosh"}


def _float_negation(var: Variable) -> Variable | None:
    """x when ``var`` is neg(x) of the same float dtype (an integer neg may wrap)."""
    if op_name(var) != "neg":
        return None
    (inner,) = var.owner.inputs
    same = inner.type.dtype == var.type.dtype and var.type.numpy_dtype.kind == "f"
    return inner if same else None


@node_rewriter([Elemwise], name="negation_out")
def negation_out(fgraph: FunctionGraph, node):
    """Negations move outwards: f(-x) is -f(x) for an odd f and f(x) for an even one,
    a product or quotient of negated factors is the negated product. Then f(x) and f(-x)
    (the normal CDF's N(d) and N(-d) = 1 - N(d) in option pricing, symmetric
    activations) merge into one evaluation, and sums absorb the sign (canonical_sum)."""
    name = scalar_name(node)
    out = node.outputs[0]
    if out.type.numpy_dtype.kind != "f":
        return None
    if name in ODD or name in EVEN:
        inner = _float_negation(node.inputs[0])
        if inner is None or len(node.inputs) != 1:
            return None
        new = node.op(inner)
        new = fits(out, tm.neg(new) if name in ODD else new)
        return None if new is None else [new]
    if name in MULTIPLICATIVE:
        inners = [_float_negation(v) for v in node.inputs]
        flips = sum(inner is not None for inner in inners)
        if not flips:
            return None
        new = node.op(*[v if inner is None else inner for v, inner in zip(node.inputs, inners)])
        new = fits(out, tm.neg(new) if flips % 2 else new)
        return None if new is None else [new]
    return None
