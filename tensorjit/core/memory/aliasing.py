"""Which buffer a variable's value lives in, following declared views and destructions."""

from __future__ import annotations

from collections.abc import Iterable

from tensorjit.core.graph.basic import Apply, Variable


def buffer_source(node: Apply, j: int) -> Variable | None:
    """The input whose buffer ``node``'s output ``j`` lives in (a view of it, or it
    overwritten in place), or None for an output in a buffer of its own."""
    aliased = node.op.view_map.get(j) or node.op.destroy_map.get(j)
    return node.inputs[aliased[0]] if aliased else None


def alias_root(var: Variable) -> Variable:
    """The variable whose buffer ``var`` lives in, through view_map and destroy_map."""
    while var.owner is not None:
        source = buffer_source(var.owner, var.index or 0)  # an owned variable has its index
        if source is None:
            break
        var = source
    return var


def alias_roots(nodes: Iterable[Apply]) -> dict[Variable, Variable]:
    """``alias_root`` of every output of ``nodes`` (given inputs first), in linear time."""
    roots: dict[Variable, Variable] = {}
    for node in nodes:
        for j, out in enumerate(node.outputs):
            source = buffer_source(node, j)
            roots[out] = out if source is None else roots.get(source, source)
    return roots
