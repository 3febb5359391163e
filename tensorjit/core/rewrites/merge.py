"""Merge (common subexpression elimination) and constant folding: generic rewrites the
core registers for every op family."""

from __future__ import annotations

from tensorjit.core.graph.basic import Apply, Constant
from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.rewrites.basic import GraphRewriter, node_rewriter


class MergeRewriter(GraphRewriter):
    """Equal constants become one; nodes applying equal Ops to the same inputs become one."""

    name = "merge"

    def apply(self, fgraph: FunctionGraph, apply_replacements) -> None:
        constants: dict = {}
        pairs = []
        for var in list(fgraph.variables):
            if isinstance(var, Constant) and fgraph.clients.get(var):
                sig = var.signature()
                kept = constants.setdefault(sig, var)
                if kept is not var:
                    pairs.append((var, kept))
        if pairs:
            apply_replacements(pairs)
        seen: dict = {}
        for node in fgraph.toposort():
            if node not in fgraph.apply_nodes:
                continue
            key = (node.op, tuple(node.inputs))
            try:
                other = seen.setdefault(key, node)
            except TypeError:  # an Op with unhashable props can not be merged
                continue
            if other is not node:
                apply_replacements(list(zip(node.outputs, other.outputs)))


@node_rewriter(name="constant_folding")
def constant_folding(fgraph: FunctionGraph, node: Apply):
    """Evaluate nodes whose inputs are all constants (unless the Op opts out)."""
    if not node.inputs or not all(isinstance(i, Constant) for i in node.inputs):
        return None
    if not node.op.constant_folding or node.op.destroy_map:
        return None
    storage = [[None] for _ in node.outputs]
    values = [i.data for i in node.inputs if isinstance(i, Constant)]  # all of them (above)
    node.op.perform(node, values, storage)
    return [out.type.make_constant(cell[0]) for out, cell in zip(node.outputs, storage)]
