"""Graph walks: ancestors, inputs, topological order, cloning."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from tensorjit.core.graph.basic import Apply, Constant, Variable


def ancestors(
    outputs: Iterable[Variable], blockers: Iterable[Variable] | None = None
) -> list[Variable]:
    """All variables ``outputs`` depend on (including themselves), outputs-first DFS order.

    The walk does not go past variables in ``blockers``.
    """
    blocked = set(blockers or ())
    seen: set[Variable] = set()
    order: list[Variable] = []
    stack = list(outputs)[::-1]
    while stack:
        var = stack.pop()
        if var in seen:
            continue
        seen.add(var)
        order.append(var)
        if var.owner is not None and var not in blocked:
            stack.extend(reversed(var.owner.inputs))
    return order


def graph_inputs(
    outputs: Iterable[Variable], blockers: Iterable[Variable] | None = None
) -> list[Variable]:
    """The ownerless variables (and blockers) that ``outputs`` depend on."""
    blocked = set(blockers or ())
    return [v for v in ancestors(outputs, blocked) if v.owner is None or v in blocked]


def toposort(
    outputs: Sequence[Variable], blockers: Iterable[Variable] | None = None
) -> list[Apply]:
    """Apply nodes between the blockers (or graph inputs) and ``outputs``, inputs first.

    Iterative DFS post-order, so deep graphs do not hit the recursion limit.
    """
    # A set is used as is (FunctionGraph passes its variable set: no O(n) copy per call).
    blocked = blockers if isinstance(blockers, (set, frozenset)) else set(blockers or ())
    order: list[Apply] = []
    done: set[Apply] = set()
    visiting: set[Apply] = set()
    for out in outputs:
        if out.owner is None or out in blocked:
            continue
        stack: list[tuple[Apply, int]] = [(out.owner, 0)]
        while stack:
            node, i = stack.pop()
            if node in done:
                continue
            if i == 0:
                if node in visiting:
                    raise ValueError(f"graph contains a cycle through {node}")
                visiting.add(node)
            if i < len(node.inputs):
                stack.append((node, i + 1))
                inp = node.inputs[i]
                owner = inp.owner
                if owner is not None and inp not in blocked and owner not in done:
                    stack.append((owner, 0))
            else:
                visiting.discard(node)
                done.add(node)
                order.append(node)
    return order


def clone_replace(
    outputs: Sequence[Variable],
    replace: Mapping[Variable, Variable] | None = None,
    copy_inputs: bool = False,
    strict: bool = True,
) -> tuple[list[Variable], dict[Variable, Variable]]:
    """Copy the graph of ``outputs``, substituting ``replace`` (old -> new) on the way.

    Returns the new outputs and the memo from old to new variables. Nodes are rebuilt
    with ``clone_with_new_inputs`` so a substitution is type-checked by ``make_node``.
    ``strict=False`` (Theano's ``rebuild_strict=False``) lets a replacement have another
    type: the nodes above it are rebuilt, and their outputs' types follow.
    """
    memo: dict[Variable, Variable] = dict(replace or {})
    for old, new in list(memo.items()):
        if new.type != old.type and strict:
            converted = old.type.convert_variable(new)
            if converted is None:
                raise TypeError(
                    f"cannot replace {old.describe()} with {new.describe()}: "
                    f"types {old.type} and {new.type} are incompatible"
                )
            memo[old] = converted
    # Replacement variables may themselves depend on replaced variables: treat them as fixed.
    replaced = set(memo)
    blockers = replaced
    for node in toposort(outputs, blockers):
        if all(o in memo for o in node.outputs):
            continue
        new_inputs = [_clone_leaf(i, memo, copy_inputs) for i in node.inputs]
        if all(a is b for a, b in zip(new_inputs, node.inputs)) and not copy_inputs:
            new_node = node
        elif copy_inputs and all(a is b for a, b in zip(new_inputs, node.inputs)):
            new_node = _copy_node(node, new_inputs)
        else:
            new_node = node.clone_with_new_inputs(new_inputs)
        for old, new in zip(node.outputs, new_node.outputs):
            if old not in replaced:  # an output the caller replaced keeps its replacement
                memo[old] = new
    new_outputs = [_clone_leaf(o, memo, copy_inputs) for o in outputs]
    return new_outputs, memo


def _clone_leaf(var: Variable, memo: dict, copy_inputs: bool) -> Variable:
    if var in memo:
        return memo[var]
    if var.owner is None and copy_inputs and not isinstance(var, Constant):
        memo[var] = var.clone()
        return memo[var]
    return var


def _copy_node(node: Apply, inputs: list[Variable]) -> Apply:
    outputs = []
    for out in node.outputs:
        cp = type(out)(out.type, None, None, out.name)
        cp.created_at = out.created_at
        outputs.append(cp)
    return Apply(node.op, inputs, outputs)


def clone_graph(
    inputs: Sequence[Variable], outputs: Sequence[Variable]
) -> tuple[list[Variable], list[Variable], dict[Variable, Variable]]:
    """A fully independent copy of the graph from ``inputs`` to ``outputs``.

    Every Apply and Variable between them is new; the inputs are cloned too (constants
    are shared, since they are immutable). Returns new inputs, new outputs and the memo.
    """
    memo: dict[Variable, Variable] = {}
    for inp in inputs:
        memo[inp] = inp if isinstance(inp, Constant) else inp.clone()
    for node in toposort(outputs, inputs):
        new_inputs = []
        for i in node.inputs:
            if i not in memo:
                memo[i] = i if isinstance(i, Constant) else i.clone()
            new_inputs.append(memo[i])
        new_node = _copy_node(node, new_inputs)
        for old, new in zip(node.outputs, new_node.outputs):
            memo[old] = new
    for out in outputs:
        if out not in memo:
            memo[out] = out if isinstance(out, Constant) else out.clone()
    return [memo[i] for i in inputs], [memo[o] for o in outputs], memo
