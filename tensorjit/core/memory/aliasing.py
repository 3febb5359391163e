"""Which buffer a variable's value lives in, following declared views and destructions."""

from __future__ import annotations

from collections.abc import Iterable

from tensorjit.core.graph.basic import Apply, Variable


def alias_root(var: Variable) -> Variable:
    """The variable whose buffer ``var`` lives in, through view_map and destroy_map."""
    while var.owner is not None:
        op, index = var.owner.op, var.index or 0  # an owned variable has its index
        aliased = op.view_map.get(index) or op.destroy_map.get(index)
        if not aliased:
            break
        var = var.owner.inputs[aliased[0]]
    return var


def alias_roots(nodes: Iterable[Apply]) -> dict[Variable, Variable]:
    """``alias_root`` of every output of ``nodes`` (given inputs first), in linear time."""
    roots: dict[Variable, Variable] = {}
    for node in nodes:
        op = node.op
        for j, out in enumerate(node.outputs):
            aliased = op.view_map.get(j) or op.destroy_map.get(j)
            if aliased:
                source = node.inputs[aliased[0]]
                roots[out] = roots.get(source, source)
            else:
                roots[out] = out
    return roots
