"""Elementwise fusion: each connected group of elementwise nodes whose intermediate
results are used only inside the group becomes one Elemwise(Composite) node; a group
read only by a reduction (sum, max, ...) becomes, with it, one ElemwiseReduce node
(host functions: device backends have no kernel for it), so its values are never
stored."""

from __future__ import annotations

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.fgraph import OUTPUT, FunctionGraph
from tensorjit.core.rewrites import GraphRewriter
from tensorjit.tensor.composite import Composite
from tensorjit.tensor.elemwise import Elemwise, scalar_name
from tensorjit.tensor.elemwise_reduce import ElemwiseReduce
from tensorjit.tensor.math import MappedReduce, Reduce
from tensorjit.tensor.rewriting.util import compiles_for_host
from tensorjit.tensor.scalar import SCALAR_OPS

MAX_INPUTS = 32  # keep fused kernels' argument lists reasonable


def fusable(node: Apply | None) -> bool:
    """An elementwise node fusion may join: a plain Elemwise, not in place."""
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
        on_host = compiles_for_host(fgraph)
        for node in reversed(fgraph.toposort()):
            if node in fused or node not in fgraph.apply_nodes:
                continue
            if on_host and _reduces_elemwise(fgraph, node):
                self._fuse_reduction(fgraph, node, fused, apply_replacements)
                continue
            if not fusable(node):
                continue
            group = self._grow(fgraph, node)
            fused.update(group)
            if len(group) < 2:
                continue
            replacement = self._build(node, group)
            if replacement is not None:
                apply_replacements([(node.outputs[0], replacement)], reason=self.name)

    def _fuse_reduction(self, fgraph: FunctionGraph, node: Apply, fused: set, apply) -> None:
        """``node``, a Reduce of an elementwise group, and the group -> ElemwiseReduce."""
        producer = node.inputs[0].owner
        group = self._grow(fgraph, producer, reader=node)
        composite, inputs = self._program(producer, group)
        if composite is None:
            return
        op = node.op
        if isinstance(op, MappedReduce):  # its map becomes the program's last step
            mapped = (SCALAR_OPS[op.map], (("step", len(composite.program) - 1),))
            program = (*composite.program, mapped)
            composite = Composite(program, composite.nin, composite.out_dtype)
        new = ElemwiseReduce(op.kind, op.axis, op.dtype, composite)(*inputs)
        out = node.outputs[0]
        if new.type != out.type:
            new = out.type.convert_variable(new)
        if new is not None:
            fused.update(group)
            apply([(out, new)], reason="reduce_fusion")

    def _grow(self, fgraph: FunctionGraph, root: Apply, reader: Apply | None = None) -> list[Apply]:
        """Nodes feeding ``root`` (transitively) that only feed the group (with
        ``reader``, the one node that reads root's output)."""
        group = [root]
        members = {root} if reader is None else {root, reader}
        # Members whose result is also read outside the group (recomputed, not moved):
        # what they read is read outside too, so it joins only if it may be recomputed.
        recomputed: set[Apply] = set()
        out_pattern = root.outputs[0].type.broadcastable
        external = set(root.inputs)  # the group's inputs so far
        frontier = list(root.inputs)
        while frontier:
            var = frontier.pop()
            producer = var.owner
            if not fusable(producer) or producer in members:
                continue
            if var.type.broadcastable != out_pattern:
                # a value broadcast over the group (one per row, say) is computed once,
                # not again for every element it is broadcast to
                continue
            clients = fgraph.clients.get(var, {})
            if any(c == OUTPUT or c not in members or c in recomputed for c, _ in clients):
                if not _recomputed(producer):
                    continue
                recomputed.add(producer)
            grown = (external - {var}) | set(producer.inputs)
            if len(grown) > MAX_INPUTS:
                continue  # stop growing here rather than give up on the whole group
            external = grown
            group.append(producer)
            members.add(producer)
            frontier.extend(producer.inputs)
        return group

    def _build(self, root: Apply, group: list[Apply]) -> Variable | None:
        composite, inputs = self._program(root, group)
        if composite is None:
            return None
        out = root.outputs[0]
        new = Elemwise(composite)(*inputs)
        return new if new.type == out.type else out.type.convert_variable(new)

    def _program(self, root: Apply, group: list[Apply]) -> tuple[Composite | None, list]:
        """The group as one Composite of its outside inputs (None: too many inputs)."""
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
            return None, inputs
        return Composite(tuple(program), len(inputs), root.outputs[0].type.dtype), inputs


# Scalar ops so cheap that a group recomputes them rather than read their stored result.
CHEAP = frozenset({"add", "sub", "mul", "neg", "true_div", "maximum", "minimum", "abs"})


def _recomputed(node: Apply) -> bool:
    """Whether a group may include ``node`` although its result is also read outside
    the group (the node stays for those readers): a cheap op reading at most one array
    of its own size (the others broadcast), so the group reads no more memory than the
    stored result, and that result's other readers may not need it stored at all.
    ``x - m`` read by both ``exp`` (under a sum) and a later subtraction: two passes
    over x, and no array of differences."""
    name = scalar_name(node)
    if name not in CHEAP:
        return False
    pattern = node.outputs[0].type.broadcastable
    return sum(v.type.broadcastable == pattern for v in node.inputs) <= 1


def _reduces_elemwise(fgraph: FunctionGraph, node: Apply) -> bool:
    """Whether ``node`` is a reduction of an elementwise node's output that nothing else
    reads (a MappedReduce too: ``sum((x - y) ** 2)`` became one in specialize)."""
    if type(node.op) not in (Reduce, MappedReduce):
        return False
    var = node.inputs[0]
    if not fusable(var.owner):
        return False
    clients = fgraph.clients.get(var, {})
    return all(c is node for c, _ in clients)


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
