"""Reverse-mode symbolic differentiation over ``Op.L_op``/``Op.grad``.

The core needs no knowledge of tensors: seeds, zeros, sums and final conversion of
gradients come from each variable's Type (its family implements ``grad_*`` methods).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from tensorjit.core.diagnostics import TensorjitWarning
from tensorjit.core.graph.basic import Variable
from tensorjit.core.graph.traversal import clone_replace, toposort


class NotDifferentiableError(TypeError):
    """The gradient path goes through an op that has no gradient."""


class DisconnectedInputError(ValueError):
    """A variable asked for in ``wrt`` does not influence the cost."""


class NullGradError(TypeError):
    """A gradient on the path is mathematically undefined."""


class UndefinedGrad:
    """Marker an op returns (via ``grad_undefined``) for an input whose gradient is undefined.

    It is an error only if it reaches a variable the user asked about.
    """

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


def grad_undefined(op: Any, index: int, var: Variable, reason: str = "") -> UndefinedGrad:
    return UndefinedGrad(f"{op}: gradient w.r.t. input {index} ({var}) is undefined. {reason}")


def _where(var: Variable) -> str:
    return f" (created at {var.created_at})" if var.created_at else ""


def grad(
    cost: Variable | None,
    wrt: Variable | Sequence[Variable],
    consider_constant: Sequence[Variable] | None = None,
    known_grads: Mapping[Variable, Any] | None = None,
    disconnected_inputs: str = "raise",
    return_disconnected: str = "zero",
    null_gradients: str = "raise",
) -> Variable | list[Variable | None] | None:
    """Symbolic gradient of scalar ``cost`` with respect to ``wrt``.

    ``consider_constant``: variables gradients do not flow through. ``known_grads``:
    ``{variable: gradient}`` seeds (then ``cost`` may be None). ``disconnected_inputs``:
    what to do when a ``wrt`` does not influence the cost ('raise', 'warn', 'ignore'),
    and ``return_disconnected`` ('zero' or 'None') what to return for it.
    """
    if disconnected_inputs not in ("raise", "warn", "ignore"):
        raise ValueError(
            f"disconnected_inputs must be raise/warn/ignore, got {disconnected_inputs!r}"
        )
    if return_disconnected not in ("zero", "None"):
        raise ValueError(
            f"return_disconnected must be 'zero' or 'None', got {return_disconnected!r}"
        )
    single = isinstance(wrt, Variable)
    wrt_list: list[Variable] = [wrt] if isinstance(wrt, Variable) else list(wrt)
    for w in wrt_list:
        if not isinstance(w, Variable):
            raise TypeError(f"grad: wrt must contain symbolic Variables, got {w!r}")

    seeds: dict[Variable, Any] = {}
    if cost is not None:
        if not isinstance(cost, Variable):
            raise TypeError(f"grad: cost must be a symbolic Variable, got {cost!r}")
        ndim = getattr(cost.type, "ndim", 0)
        if ndim != 0:
            raise TypeError(
                f"grad: the cost must be a scalar, but {cost.describe()} has {ndim} "
                "dimensions; reduce it first (e.g. cost.sum()) or pass known_grads"
            )
        seeds[cost] = cost.type.grad_one_like(cost)
    for var, known in (known_grads or {}).items():
        seeds[var] = var.type.grad_as_type_of(var, var.type.filter_variable(known))
    if not seeds:
        raise ValueError("grad: give a cost or known_grads")

    constants = set(consider_constant or ())
    nodes = toposort(list(seeds), constants)
    # Variables through which the cost depends on some wrt: only they get gradients.
    depends: set[Variable] = set(wrt_list)
    for node in nodes:
        if any(i in depends for i in node.inputs):
            depends.update(o for o in node.outputs if o not in constants)

    contribs: dict[Variable, list[Any]] = {v: [g] for v, g in seeds.items()}
    for node in reversed(nodes):
        if not any(i in depends for i in node.inputs):
            continue
        out_grads = [_total(o, contribs.get(o)) for o in node.outputs]
        if all(g is None for g in out_grads):
            continue
        undefined = next((g for g in out_grads if isinstance(g, UndefinedGrad)), None)
        if undefined is not None:
            for inp in node.inputs:
                if inp in depends:
                    contribs.setdefault(inp, []).append(undefined)
            continue
        out_grads = [
            o.type.grad_zeros_like(o) if g is None else g for o, g in zip(node.outputs, out_grads)
        ]
        for inp, g in zip(node.inputs, _input_grads(node, out_grads)):
            if inp not in depends or g is None:
                continue
            if not isinstance(g, UndefinedGrad):
                g = inp.type.grad_as_type_of(inp, g)
            contribs.setdefault(inp, []).append(g)

    results: list[Variable | None] = []
    for w in wrt_list:
        g = _total(w, contribs.get(w))
        if isinstance(g, UndefinedGrad):
            if null_gradients == "raise":
                raise NullGradError(f"grad w.r.t. {w.describe()}: {g.reason}")
            g = None
        if g is None:
            msg = (
                f"grad: the cost does not depend on {w.describe()} (it is disconnected); "
                "pass disconnected_inputs='ignore' or 'warn' to allow this"
            )
            if disconnected_inputs == "raise":
                raise DisconnectedInputError(msg)
            if disconnected_inputs == "warn":
                warnings.warn(msg, TensorjitWarning, stacklevel=2)
            g = w.type.grad_zeros_like(w) if return_disconnected == "zero" else None
        results.append(g)
    return results[0] if single else results


def _total(var: Variable, terms: list[Any] | None) -> Any:
    if not terms:
        return None
    for t in terms:
        if isinstance(t, UndefinedGrad):
            return t
    return terms[0] if len(terms) == 1 else var.type.grad_sum(terms)


def _input_grads(node, out_grads: list[Variable]) -> list[Any]:
    op = node.op
    try:
        grads = op.L_op(node.inputs, node.outputs, out_grads)
    except NotDifferentiableError as exc:
        raise NotDifferentiableError(
            f"grad: {op} (node created at {node.outputs[0].created_at or 'unknown'}) is not "
            f"differentiable: {exc}"
        ) from None
    if len(grads) != len(node.inputs):
        raise ValueError(f"{op}.grad returned {len(grads)} gradients for {len(node.inputs)} inputs")
    return list(grads)


# ---------------------------------------------------------------- L_op / R_op
def _as_list(x: Any) -> tuple[list, bool]:
    if isinstance(x, (list, tuple)):
        return list(x), False
    return [x], True


def Lop(
    f: Variable | Sequence[Variable],
    wrt: Variable | Sequence[Variable],
    eval_points: Any,
    consider_constant: Sequence[Variable] | None = None,
    disconnected_inputs: str = "raise",
) -> Variable | list[Variable | None] | None:
    """Vector-Jacobian product ``v^T (d f / d wrt)``: the gradient with respect to
    ``wrt`` of ``sum(f * v)``, for ``v = eval_points`` of ``f``'s shape (one per output
    when ``f`` is a list). Returns one result per ``wrt`` (a single one if ``wrt`` is a
    Variable)."""
    fs, single_f = _as_list(f)
    vs = [eval_points] if single_f else list(eval_points)
    if len(fs) != len(vs):
        raise ValueError(f"Lop: {len(fs)} expressions but {len(vs)} eval_points")
    known: dict[Variable, Any] = {}
    for fi, vi in zip(fs, vs):
        if not isinstance(fi, Variable):
            raise TypeError(f"Lop: f must be symbolic Variables, got {fi!r}")
        vi = fi.type.filter_variable(vi)
        known[fi] = fi.type.grad_sum([known[fi], vi]) if fi in known else vi
    return grad(
        None,
        wrt,
        consider_constant=consider_constant,
        known_grads=known,
        disconnected_inputs=disconnected_inputs,
    )


def Rop(
    f: Variable | Sequence[Variable],
    wrt: Variable | Sequence[Variable],
    eval_points: Any,
    consider_constant: Sequence[Variable] | None = None,
    disconnected_inputs: str = "raise",
) -> Variable | list[Variable]:
    """Jacobian-vector product ``(d f / d wrt) v`` for ``v = eval_points`` (one per
    ``wrt``, of its shape); one result per ``f`` (a single one if ``f`` is a Variable).

    No op needs an ``R_op``: with a dummy ``u`` of ``f``'s type, ``g(u) = Lop(f, wrt, u)
    = J^T u`` is linear in ``u``, and ``J v = d (g(u) . v) / d u = Lop(g, u, v)``. The
    result does not depend on ``u``'s value; any leftover reference to ``u`` (e.g. to
    its shape) is replaced by ``f`` itself, which has the same type and shape.
    """
    fs, single_f = _as_list(f)
    ws, single_w = _as_list(wrt)
    vs = [eval_points] if single_w else list(eval_points)
    if len(ws) != len(vs):
        raise ValueError(f"Rop: {len(ws)} wrt variables but {len(vs)} eval_points")
    for fi in fs:
        if not isinstance(fi, Variable):
            raise TypeError(f"Rop: f must be symbolic Variables, got {fi!r}")
    dummies = [fi.type.make_variable(f"rop_u_{k}") for k, fi in enumerate(fs)]
    known_u: dict[Variable, Any] = {}
    for fi, u in zip(fs, dummies):
        known_u[fi] = fi.type.grad_sum([known_u[fi], u]) if fi in known_u else u
    gs: list[Any] = grad(  # type: ignore[assignment]  # a list for a list of wrt
        None,
        ws,
        consider_constant=consider_constant,
        known_grads=known_u,
        disconnected_inputs=disconnected_inputs,
    )
    known_v: dict[Variable, Any] = {}
    for g, v in zip(gs, vs):
        v = g.type.filter_variable(v)
        known_v[g] = g.type.grad_sum([known_v[g], v]) if g in known_v else v
    results: list[Any] = grad(  # type: ignore[assignment]  # a list for a list of wrt
        None,
        dummies,
        known_grads=known_v,
        disconnected_inputs="ignore",
        return_disconnected="None",
        null_gradients="raise",
    )
    present = [r for r in results if r is not None]
    if present:
        replaced, _ = clone_replace(present, dict(zip(dummies, fs)))
        it = iter(replaced)
        results = [None if r is None else next(it) for r in results]
    out = [fi.type.grad_zeros_like(fi) if r is None else r for fi, r in zip(fs, results)]
    return out[0] if single_f else out
