"""Pattern rewriters: ``(op, sub_pattern, ...)`` trees matched against a graph.

A pattern is an Op (matches a node applying an equal Op), a tuple ``(op, p1, p2, ...)``
(a node of that op whose inputs match p1, p2, ...), a string (binds a variable; the same
name must bind the same variable everywhere), a number (a constant whose every element
equals it), or a callable ``predicate(var) -> bool``. The replacement is a pattern of
the same shape, built by calling each op on its built arguments; a callable there is
called with the bindings dict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.graph.op import Op
from tensorjit.core.rewrites.basic import NodeRewriter, RewriteError

Pattern = Any


def constant_value_is(var: Variable, value: Any) -> bool:
    """Whether ``var`` is a Constant all of whose elements equal ``value``."""
    if not isinstance(var, Constant):
        return False
    data = var.data
    try:
        result = data == value
        return bool(result.all()) if hasattr(result, "all") else bool(result)
    except (TypeError, ValueError):
        return False


def match(pattern: Pattern, var: Variable, bindings: dict[str, Variable]) -> bool:
    if isinstance(pattern, str):
        bound = bindings.setdefault(pattern, var)
        return bound is var
    if isinstance(pattern, (int, float)) and not isinstance(pattern, bool):
        return constant_value_is(var, pattern)
    if isinstance(pattern, Op):
        pattern = (pattern,)
    if isinstance(pattern, tuple):
        op, *args = pattern
        node = var.owner
        if node is None or node.op != op or len(node.inputs) != len(args):
            return False
        return all(match(p, v, bindings) for p, v in zip(args, node.inputs))
    if callable(pattern):
        return bool(pattern(var))
    raise TypeError(f"bad pattern element {pattern!r}")


def build(pattern: Pattern, bindings: dict[str, Variable]) -> Any:
    if isinstance(pattern, str):
        return bindings[pattern]
    if isinstance(pattern, tuple):
        op, *args = pattern
        return op(*[build(a, bindings) for a in args])
    if callable(pattern) and not isinstance(pattern, Op):
        return pattern(bindings)
    return pattern  # a number: the op's make_node turns it into a constant


class PatternRewriter(NodeRewriter):
    """Replaces what matches ``in_pattern`` by ``out_pattern`` (same output type only)."""

    def __init__(
        self,
        in_pattern: tuple,
        out_pattern: Pattern,
        name: str | None = None,
        condition: Callable[[dict[str, Variable]], bool] | None = None,
    ):
        root_op = in_pattern[0]
        super().__init__(self._rewrite, tracks=[type(root_op)], name=name or "pattern")
        self.in_pattern = in_pattern
        self.out_pattern = out_pattern
        self.condition = condition

    def _rewrite(self, fgraph: FunctionGraph, node: Apply):
        if len(node.outputs) != 1:
            return None
        bindings: dict[str, Variable] = {}
        if not match(self.in_pattern, node.outputs[0], bindings):
            return None
        if self.condition is not None and not self.condition(bindings):
            return None
        new = build(self.out_pattern, bindings)
        if not isinstance(new, Variable):
            raise RewriteError(
                f"pattern rewriter {self.name}: the replacement pattern must build a "
                f"Variable, got {new!r} (wrap constants in an op or a callable)"
            )
        if new.type != node.outputs[0].type:
            return None  # e.g. the replacement broadcasts differently: leave it
        return [new]

    def __repr__(self) -> str:
        return f"PatternRewriter({self.name}: {self.in_pattern} -> {self.out_pattern})"
