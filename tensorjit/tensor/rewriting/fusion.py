"""Elementwise fusion: each connected group of elementwise nodes whose intermediate
results are used only inside the group becomes one Elemwise(Composite) node."""

from __future__ import annotations

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.fgraph import OUTPUT, FunctionGraph
from tensorjit.core.rewrites import GraphRewriter
from tensorjit.tensor.composite import Composite
from tensorjit.tensor.elemwise import Elemwise

MAX_INPUTS = 32  # keep fused kernels' argument lists reasonable


def _fusable(node: Apply | None) -> bool:
    return (
        node is not None
        and isinstance(node.op, Elemwise)
        and node.op.inplace is None
        and len(node.outputs) == 1
    )


class FusionRewriter(GraphRewriter):
    name = "elemwise_fusion"

    def apply(self, fgraph: FunctionGraph, apply_replacements) -> None:
        fused: set[Apply] = set()
        for node in reversed(fgraph.toposort()):
            if node in fused or not _fusable(node) or node not in fgraph.apply_nodes:
                continue
            group = self._grow(fgraph, node)
            fused.update(group)
            if len(group) < 2:
                continue
            replacement = self._build(node, group)
            if replacement is not None:
                apply_replacements([(node.outputs[0], replacement)], reason=self.name)

    def _grow(self, fgraph: FunctionGraph, root: Apply) -> list[Apply]:
        """Nodes feeding ``root`` (transitively) that only feed the group."""
        group = [root]
        members = {root}
        out_ndim = root.outputs[0].type.ndim
        external = set(root.inputs)  # the group's inputs so far
        frontier = list(root.inputs)
        while frontier:
            var = frontier.pop()
            producer = var.owner
            if not _fusable(producer) or producer in members:
                continue
            if var.type.ndim != out_ndim:
                continue
            clients = fgraph.clients.get(var, {})
            if any(c == OUTPUT or c not in members for c, _ in clients):
                continue
            grown = (external - {var}) | set(producer.inputs)
            if len(grown) > MAX_INPUTS:
                continue  # stop growing here rather than give up on the whole group
            external = grown
            group.append(producer)
            members.add(producer)
            frontier.extend(producer.inputs)
        return group

    def _build(self, root: Apply, group: list[Apply]) -> Variable | None:
        members = set(group)
        order = [n for n in _toposort_group(root, members)]
        inputs: list[Variable] = []
        index: dict[Variable, tuple[str, int]] = {}
        program = []
        for node in order:
            args = []
            for var in node.inputs:
                if var.owner in members:
                    args.append(index[var])
                else:
                    if var not in index:
                        index[var] = ("in", len(inputs))
                        inputs.append(var)
                    args.append(index[var])
            program.append((node.op.scalar_op, tuple(args)))
            index[node.outputs[0]] = ("step", len(program) - 1)
        if len(inputs) > MAX_INPUTS:
            return None
        out = root.outputs[0]
        composite = Composite(tuple(program), len(inputs), out.type.dtype)
        new = Elemwise(composite)(*inputs)
        return new if new.type == out.type else out.type.convert_variable(new)


def _toposort_group(root: Apply, members: set[Apply]) -> list[Apply]:
    order: list[Apply] = []
    done: set[Apply] = set()
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if node in done:
            continue
        if expanded:
            done.add(node)
            order.append(node)
            continue
        stack.append((node, True))
        for var in node.inputs:
            if var.owner in members and var.owner not in done:
                stack.append((var.owner, False))
    return order
