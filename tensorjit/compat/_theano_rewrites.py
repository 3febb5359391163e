"""Theano's ``register_*`` decorators over tensorjit's rewrite database (one helper
that ``theano.tensor.opt`` and ``theano.compile.optdb`` share)."""

from __future__ import annotations

from typing import Any

from tensorjit.core.hooks import registries
from tensorjit.core.rewrites.basic import GraphRewriter, NodeRewriter


def as_tensorjit_rewriter(opt: Any) -> NodeRewriter | GraphRewriter:
    """A tensorjit rewriter for a Theano optimizer (or tensorjit rewriter) ``opt``."""
    if isinstance(opt, (NodeRewriter, GraphRewriter)):
        return opt
    if hasattr(opt, "as_node_rewriter"):
        return opt.as_node_rewriter()
    if hasattr(opt, "optimize"):  # a global Theano optimizer
        return _GlobalOptimizer(opt)
    raise TypeError(f"{opt!r} is neither a Theano optimizer nor a tensorjit rewriter")


class _GlobalOptimizer(GraphRewriter):
    def __init__(self, opt: Any):
        self.opt = opt
        self.name = getattr(opt, "__name__", type(opt).__name__)

    def apply(self, fgraph, apply_replacements) -> None:
        self.opt.optimize(fgraph)


def register_in_phase(phase: str, opt: Any, tags: tuple, kwargs: dict) -> Any:
    """Register ``opt`` in ``phase`` (a decorator when ``opt`` is a tag or missing)."""
    if opt is None or isinstance(opt, str):
        extra = (opt,) if isinstance(opt, str) else ()

        def decorate(inner):
            return register_in_phase(phase, inner, extra + tags, kwargs)

        return decorate
    name = kwargs.get("name") or getattr(opt, "__name__", None) or type(opt).__name__
    registries().rewrites.register(
        name, as_tensorjit_rewriter(opt), phase, "fast_run", *tags, plugin="theano-compat"
    )
    return opt


#: Theano's optdb positions (merge1 0, canonicalize 1, stabilize 1.5, specialize 2,
#: elemwise fusion 49, inplace 75) and the tensorjit phase each range falls in.
_POSITIONS = ((1.5, "canonicalize"), (2, "stabilize"), (49, "specialize"), (75, "fusion"))


def phase_at(position: float) -> str:
    for bound, phase in _POSITIONS:
        if position < bound:
            return phase
    return "cleanup"


class OptDB:
    """``theano.compile.optdb``: ``register(name, opt, position, *tags)`` puts ``opt``
    into the tensorjit phase that Theano's position falls in."""

    def register(self, name: str, opt: Any, position: float, *tags: str, **kwargs: Any) -> Any:
        registries().rewrites.register(
            name, as_tensorjit_rewriter(opt), phase_at(float(position)), "fast_run", *tags,
            position=float(position), plugin="theano-compat",
        )  # fmt: skip
        return opt

    def __contains__(self, name: str) -> bool:
        return name in registries().rewrites.entries


optdb = OptDB()
