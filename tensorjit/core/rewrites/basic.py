"""Rewriter kinds. Rewriters never mutate a graph: they return replacements, which the
core applies with ``FunctionGraph.replace_all_validate`` so that every feature (the
DestroyHandler, plugin vetoes) validates them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.fgraph import FunctionGraph

Replacements = list[tuple[Variable, Variable]]


class RewriteError(TypeError):
    """A rewriter returned something malformed (a bug in the rewriter)."""


class NodeRewriter:
    """Looks at one node; returns new outputs (list or {old: new} dict) or None.

    ``tracks`` limits the op classes it is offered (None: every node).
    """

    tracks: tuple[type, ...] | None = None

    def __init__(self, fn: Callable[[FunctionGraph, Apply], Any], tracks=None, name=None):
        self.fn = fn
        self.tracks = tuple(tracks) if tracks is not None else None
        self.name = name or getattr(fn, "__name__", type(self).__name__)

    def transform(self, fgraph: FunctionGraph, node: Apply) -> Any:
        return self.fn(fgraph, node)

    def accepts(self, node: Apply) -> bool:
        return self.tracks is None or isinstance(node.op, self.tracks)

    def __repr__(self) -> str:
        return f"NodeRewriter({self.name})"


def node_rewriter(tracks: Sequence[type] | None = None, name: str | None = None):
    """Decorator: ``@node_rewriter([Elemwise])`` turns ``fn(fgraph, node)`` into a rewriter."""

    def wrap(fn):
        return NodeRewriter(fn, tracks, name)

    return wrap


class GraphRewriter:
    """Works on the whole graph at once; ``apply(fgraph, apply_replacements)``.

    ``apply_replacements(replacements, reason)`` returns True if the core accepted them.
    """

    name = "graph_rewriter"

    def apply(self, fgraph: FunctionGraph, apply_replacements) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement apply")


def normalize_replacements(node: Apply, result: Any, who: str) -> Replacements:
    """Turn a node rewriter's result into (old, new) pairs, checking it is well-formed."""
    if isinstance(result, dict):
        pairs = list(result.items())
    else:
        if len(result) != len(node.outputs):
            raise RewriteError(
                f"rewriter {who} returned {len(result)} outputs for {node.op}, "
                f"which has {len(node.outputs)}"
            )
        pairs = list(zip(node.outputs, result))
    for _old, new in pairs:
        if not isinstance(new, Variable):
            raise RewriteError(f"rewriter {who} returned a non-Variable {new!r} for {node.op}")
    return [(old, new) for old, new in pairs if old is not new]


class SequenceRewriter(GraphRewriter):
    """Runs graph rewriters one after the other."""

    def __init__(self, *rewriters: GraphRewriter, name: str = "sequence"):
        self.rewriters = list(rewriters)
        self.name = name

    def apply(self, fgraph: FunctionGraph, apply_replacements) -> None:
        for rewriter in self.rewriters:
            rewriter.apply(fgraph, apply_replacements)
