"""Numerically stable forms (the stabilize phase).

``log(1 + exp(x))`` -> ``softplus(x)`` (finite for x > 709), ``log(1 + x)`` ->
``log1p(x)``, ``exp(x) - 1`` -> ``expm1(x)``, ``1 / (1 + exp(-x))`` -> ``sigmoid(x)``,
``1 - sigmoid(x)`` -> ``sigmoid(-x)``, ``log(sigmoid(x))`` -> ``-softplus(-x)``. Sums are
already canonical here (terms sorted, constants last), so "1 + t" is found by its terms.
"""

from __future__ import annotations

from tensorjit.core.graph.basic import Variable
from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.rewrites import node_rewriter
from tensorjit.tensor import math as tm
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.rewriting.util import fits, is_constant_value, op_name, scalar_name


def _plus_one(var: Variable) -> Variable | None:
    """``t`` if ``var`` is ``t + 1`` or ``1 + t``."""
    if op_name(var) != "add":
        return None
    a, b = var.owner.inputs
    if is_constant_value(b, 1):
        return a
    if is_constant_value(a, 1):
        return b
    return None


def _replace(node, new: Variable):
    new = fits(node.outputs[0], new)
    return None if new is None else [new]


@node_rewriter([Elemwise], name="local_log_stable")
def local_log_stable(fgraph: FunctionGraph, node):
    """log(1+exp(x)) -> softplus(x); log(1+x) -> log1p(x); log(sigmoid(x)) -> -softplus(-x)."""
    if scalar_name(node) != "log":
        return None
    (arg,) = node.inputs
    if op_name(arg) == "sigmoid":
        return _replace(node, tm.neg(tm.softplus(tm.neg(arg.owner.inputs[0]))))
    t = _plus_one(arg)
    if t is None:
        return None
    if op_name(t) == "exp":
        return _replace(node, tm.softplus(t.owner.inputs[0]))
    return _replace(node, tm.log1p(t))


@node_rewriter([Elemwise], name="local_expm1")
def local_expm1(fgraph: FunctionGraph, node):
    """exp(x) - 1 (canonically exp(x) + -1) -> expm1(x)."""
    name = scalar_name(node)
    if name not in ("sub", "add"):
        return None
    a, b = node.inputs
    if op_name(a) == "exp" and is_constant_value(b, 1 if name == "sub" else -1):
        return _replace(node, tm.expm1(a.owner.inputs[0]))
    return None


@node_rewriter([Elemwise], name="local_sigmoid")
def local_sigmoid(fgraph: FunctionGraph, node):
    """1/(1+exp(-x)) -> sigmoid(x); 1 - sigmoid(x) -> sigmoid(-x)."""
    name = scalar_name(node)
    if name == "true_div":
        num, den = node.inputs
        t = _plus_one(den)
        if is_constant_value(num, 1) and t is not None and op_name(t) == "exp":
            arg = t.owner.inputs[0]
            inner = arg.owner.inputs[0] if op_name(arg) == "neg" else tm.neg(arg)
            return _replace(node, tm.sigmoid(inner))
    if name == "sub":
        a, b = node.inputs
        if is_constant_value(a, 1) and op_name(b) == "sigmoid":
            return _replace(node, tm.sigmoid(tm.neg(b.owner.inputs[0])))
    return None


def _factors(var: Variable, dtype: str) -> list[Variable]:
    """The factors of a mul tree (just ``var`` if it is not a product)."""
    factors, stack = [], [var]
    while stack:
        v = stack.pop()
        if op_name(v) == "mul" and v.type.dtype == dtype:
            stack.extend(v.owner.inputs)
        else:
            factors.append(v)
    return factors


@node_rewriter([Elemwise], name="local_exp_over_1_plus_exp")
def local_exp_over_1_plus_exp(fgraph: FunctionGraph, node):
    """(... * exp(t)) / (... * (1 + exp(t))) -> (... * sigmoid(t)) / (...).

    This is the form the gradients of softplus and sigmoid written with exp take; it is
    inf/inf for large t, while sigmoid(t) is exact."""
    if scalar_name(node) != "true_div":
        return None
    num, den = node.inputs
    dtype = node.outputs[0].type.dtype
    num_factors, den_factors = _factors(num, dtype), _factors(den, dtype)
    for i, d in enumerate(den_factors):
        t = _plus_one(d)
        if t is None or op_name(t) != "exp":
            continue
        for j, n in enumerate(num_factors):
            if n is t:
                new_num = num_factors[:j] + [tm.sigmoid(t.owner.inputs[0])] + num_factors[j + 1 :]
                rest = den_factors[:i] + den_factors[i + 1 :]
                new = new_num[0]
                for f in new_num[1:]:
                    new = tm.mul(new, f)
                for f in rest:
                    new = tm.true_div(new, f)
                return _replace(node, new)
    return None
