"""Which buffer a variable's value lives in, following declared views and destructions."""

from __future__ import annotations

from tensorjit.core.graph.basic import Variable


def alias_root(var: Variable) -> Variable:
    """The variable whose buffer ``var`` lives in, through view_map and destroy_map."""
    while var.owner is not None:
        op = var.owner.op
        aliased = op.view_map.get(var.index) or op.destroy_map.get(var.index)
        if not aliased:
            break
        var = var.owner.inputs[aliased[0]]
    return var
