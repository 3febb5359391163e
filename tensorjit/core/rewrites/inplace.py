"""The generic inplace pass: swaps ops for their destructive variants where safe.

Variants come from plugins (``tensorjit_register_inplace``); the pass asks for a variant
on inputs the DestroyHandler says are destroyable, keeps it only if its destroy_map
honours the request, and applies it through ``replace_all_validate`` so that the
DestroyHandler (and every plugin veto) validates it. A rejected try is rolled back and
counted against the plugin that made the variant.
"""

from __future__ import annotations

from collections.abc import Callable

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.memory.destroy_handler import DestroyHandler
from tensorjit.core.registries import InplaceRegistry, InplaceVariant
from tensorjit.core.rewrites.basic import GraphRewriter
from tensorjit.core.rewrites.transfer import keep_placement, runs_where_placed

Proposal = tuple[Apply, Apply, InplaceVariant]


class InplacePass(GraphRewriter):
    name = "inplace"

    def __init__(self, registry_getter: Callable[[], InplaceRegistry]):
        self._registry = registry_getter  # read lazily: plugins may register late

    def apply(self, fgraph: FunctionGraph, apply_replacements) -> None:
        handler = fgraph.get_feature(DestroyHandler)
        if handler is None:
            return
        registry = self._registry()
        outputs = set(fgraph.outputs)
        nodes = fgraph.toposort()
        # Nodes computing function outputs (e.g. shared-variable updates) go first, so
        # that an update like ``w - lr * g`` gets to reuse w's own buffer.
        nodes.sort(key=lambda n: 0 if any(o in outputs for o in n.outputs) else 1)
        proposals: list[tuple[Apply, InplaceVariant, list[int]]] = []
        for node in nodes:
            if node.op.destroy_map:
                continue
            variant = registry.lookup(node.op)
            if variant is None:
                continue
            candidates = [i for i, v in enumerate(node.inputs) if handler.destroyable(v)]
            if candidates:
                candidates.sort(key=lambda i: _preference(fgraph, handler, node.inputs[i]))
                proposals.append((node, variant, candidates))
        if not proposals:
            self._repeat(fgraph, handler, registry, apply_replacements)
            return
        # Try everything at once (the common case succeeds in one validation), each node
        # on its most preferred input its variant accepts (a GEMM overwrites only its
        # accumulator, however shared its other inputs are); then one node and one input
        # at a time.
        first = [p for p in (self._first_proposal(fgraph, *p) for p in proposals) if p]
        # Replace consumers before producers: a new node then never refers to an old node
        # that was already replaced (which would re-import it).
        position = {node: k for k, node in enumerate(fgraph.toposort())}
        first.sort(key=lambda p: -position[p[0]])
        if not (first and apply_replacements(_pairs(first), reason="inplace")):
            for node, variant, candidates in proposals:
                if node in fgraph.apply_nodes:
                    self._take_one(fgraph, handler, node, variant, candidates, apply_replacements)
        self._repeat(fgraph, handler, registry, apply_replacements)

    def _take_one(
        self, fgraph, handler, node: Apply, variant: InplaceVariant, candidates, apply_replacements
    ) -> bool:
        """Tries the destroyable ``candidates`` in turn, one input each: True once the
        core accepts one."""
        for i in candidates:
            if not handler.destroyable(node.inputs[i]):
                continue
            proposal = self._propose(fgraph, node, variant, [i])
            if proposal is not None and apply_replacements(
                _pairs([proposal]), reason="inplace", plugin=variant.plugin
            ):
                return True
        return False

    def _repeat(self, fgraph, handler, registry, apply_replacements) -> None:
        """Nodes in place whose variant is repeatable ask again, one input at a time,
        until none takes one more (each accepted try changes the graph: look again)."""
        changed = True
        while changed:
            changed = False
            for node in fgraph.toposort():
                variant = registry.lookup(node.op)
                if variant is None or not variant.repeatable or not node.op.destroy_map:
                    continue
                taken = {i for ins in node.op.destroy_map.values() for i in ins}
                candidates = [i for i in range(len(node.inputs)) if i not in taken]
                candidates.sort(key=lambda i: _preference(fgraph, handler, node.inputs[i]))
                if self._take_one(fgraph, handler, node, variant, candidates, apply_replacements):
                    changed = True
                    break

    def _first_proposal(
        self, fgraph: FunctionGraph, node: Apply, variant: InplaceVariant, candidates: list[int]
    ):
        for i in candidates:
            proposal = self._propose(fgraph, node, variant, [i])
            if proposal is not None:
                return proposal
        return None

    def _propose(
        self, fgraph: FunctionGraph, node: Apply, variant: InplaceVariant, request: list[int]
    ):
        new_op = variant.maker(node, list(request))
        if new_op is None:
            return None
        destroyed = {i for ins in new_op.destroy_map.values() for i in ins}
        destroyed -= {i for ins in node.op.destroy_map.values() for i in ins}
        if not destroyed or not destroyed <= set(request):
            return None  # the variant does not honour the request: never used
        try:
            new_node = keep_placement(new_op.make_node(*node.inputs), node)
        except (TypeError, ValueError):
            return None
        if [o.type for o in new_node.outputs] != [o.type for o in node.outputs]:
            return None
        if not runs_where_placed(new_node, fgraph):
            return None
        return node, new_node, variant


def _pairs(proposals: list[Proposal]) -> list[tuple[Variable, Variable]]:
    return [pair for old, new, _ in proposals for pair in zip(old.outputs, new.outputs)]


def _preference(fgraph: FunctionGraph, handler, var: Variable) -> tuple[int, int]:
    """Prefer destroying a shared variable's own storage, then single-use temporaries."""
    root = handler.root(var)
    return (0 if root in handler.update_outputs else 1, len(fgraph.clients.get(var, ())))
