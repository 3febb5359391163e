"""Symbolic differentiation (``tensorjit.gradient.grad``, ``verify_grad``, ``Lop``,
``Rop``, ``jacobian``, ``hessian``).

``grad``, ``Lop`` and ``Rop`` are generic (``tensorjit.core.gradient``); ``jacobian`` and
``hessian`` index and assemble tensors, so they live here, on top of the tensor family.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

from tensorjit.core.gradient import (
    DisconnectedInputError,
    Lop,
    NotDifferentiableError,
    NullGradError,
    Rop,
    UndefinedGrad,
    grad,
    grad_undefined,
)
from tensorjit.core.graph.basic import Variable
from tensorjit.tensor.gradient_check import GradientError, verify_grad

__all__ = [
    "DisconnectedInputError",
    "GradientError",
    "Lop",
    "NotDifferentiableError",
    "NullGradError",
    "Rop",
    "UndefinedGrad",
    "grad",
    "grad_undefined",
    "hessian",
    "jacobian",
    "verify_grad",
]


def _static_length_error(what: str, var: Variable) -> ValueError:
    return ValueError(
        f"{what}: {var.describe()} has a length that is only known at run time; the "
        "Jacobian is assembled row by row, which needs a static length (there is no "
        "symbolic loop yet). Declare the length, e.g. tensor('float64', shape=(3,))"
    )


def _rows_to_jacobian(
    expression: Variable,
    n: int,
    wrt: list[Variable],
    consider_constant: Sequence[Variable] | None,
    disconnected_inputs: str,
) -> list[Variable]:
    """``J[i] = d expression[i] / d w`` for each ``w``, stacked along a new axis 0."""
    from tensorjit.tensor.math import zeros
    from tensorjit.tensor.shape_ops import shape_entries
    from tensorjit.tensor.subtensor import set_subtensor

    rows: list[list[Variable | None]] = [[] for _ in wrt]
    for i in range(n):
        gs = grad(
            expression[i],
            wrt,
            consider_constant=consider_constant,
            disconnected_inputs="ignore",
            return_disconnected="None",
        )
        for k, g in enumerate(gs):
            rows[k].append(g)
    results = []
    for w, w_rows in zip(wrt, rows):
        if all(r is None for r in w_rows):
            msg = (
                f"jacobian: the expression does not depend on {w.describe()} (it is "
                "disconnected); pass disconnected_inputs='ignore' or 'warn' to allow this"
            )
            if disconnected_inputs == "raise":
                raise DisconnectedInputError(msg)
            if disconnected_inputs == "warn":
                warnings.warn(msg, stacklevel=3)
        dtype = next((r.type.dtype for r in w_rows if r is not None), None)
        dtype = dtype or w.type.grad_zeros_like(w).type.dtype
        jac = zeros([n, *shape_entries(w)], dtype=dtype)
        for i, r in enumerate(w_rows):
            if r is not None:
                jac = set_subtensor(jac[i], r)
        results.append(jac)
    return results


def jacobian(
    expression: Any,
    wrt: Variable | Sequence[Variable],
    consider_constant: Sequence[Variable] | None = None,
    disconnected_inputs: str = "raise",
) -> Variable | list[Variable]:
    """The Jacobian of ``expression`` with respect to ``wrt``: ``J[i, ...] =
    d expression[i] / d wrt[...]``, of shape ``(len(expression),) + wrt.shape`` (one per
    ``wrt`` if it is a list). A scalar expression gives its gradient; an expression with
    more dimensions is flattened first (as Theano does).

    The Jacobian is built with one gradient per element of ``expression``, so its length
    must be static (known when the graph is built); otherwise a ValueError explains how
    to declare it. ``disconnected_inputs`` applies to the expression as a whole: an
    element that does not depend on ``wrt`` just gives a row of zeros.
    """
    from tensorjit.tensor.variable import as_tensor_variable

    if disconnected_inputs not in ("raise", "warn", "ignore"):
        raise ValueError(
            f"disconnected_inputs must be raise/warn/ignore, got {disconnected_inputs!r}"
        )
    expression = as_tensor_variable(expression)
    single = isinstance(wrt, Variable)
    ws = [wrt] if single else list(wrt)
    if expression.type.ndim == 0:
        return grad(
            expression,
            wrt,
            consider_constant=consider_constant,
            disconnected_inputs=disconnected_inputs,
        )
    if any(s is None for s in expression.type.shape):
        raise _static_length_error("jacobian", expression)
    n = math.prod(expression.type.shape)
    if expression.type.ndim > 1:
        expression = expression.flatten()
    result = _rows_to_jacobian(expression, n, ws, consider_constant, disconnected_inputs)
    return result[0] if single else result


def hessian(
    cost: Any,
    wrt: Variable | Sequence[Variable],
    consider_constant: Sequence[Variable] | None = None,
    disconnected_inputs: str = "raise",
) -> Variable | list[Variable]:
    """The Hessian of scalar ``cost`` with respect to each vector in ``wrt``: the
    Jacobian of its gradient, ``H[i, j] = d^2 cost / d wrt[i] d wrt[j]`` (one matrix per
    ``wrt`` if it is a list). Each ``wrt`` must be a vector of static length.
    ``disconnected_inputs`` applies to the cost; a cost linear in ``wrt`` has a zero
    Hessian."""
    single = isinstance(wrt, Variable)
    ws = [wrt] if single else list(wrt)
    results = []
    for w in ws:
        if getattr(w.type, "ndim", None) != 1:
            raise TypeError(f"hessian: wrt must be vectors, got {w.describe()}")
        n = w.type.shape[0]
        if n is None:
            raise _static_length_error("hessian", w)
        g = grad(
            cost, w, consider_constant=consider_constant, disconnected_inputs=disconnected_inputs
        )
        # The gradient may be constant in w (a linear cost): the Hessian is then zero.
        results.extend(_rows_to_jacobian(g, n, [w], consider_constant, "ignore"))
    return results[0] if single else results
