"""FunctionGraph: a graph under rewriting, with clients, features and transactions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.traversal import clone_graph, toposort

# A client is (node, input_index); graph outputs have the client ("output", output_index).
OUTPUT = "output"
IMPORT = "import"  # journal marker: a node imported during a transaction


class InconsistencyError(Exception):
    """A feature vetoed a change to a FunctionGraph; the change was rolled back."""


class MissingInputError(ValueError):
    """The graph needs an ownerless variable that is not among the declared inputs."""


class Feature:
    """A listener that can follow and veto changes to a FunctionGraph.

    All callbacks are optional. ``on_validate`` raises InconsistencyError to veto the
    changes made since the last checkpoint; ``orderings`` returns extra scheduling
    constraints ``{node: {nodes that must run before it}}``.
    """

    def on_attach(self, fgraph: FunctionGraph) -> None: ...
    def on_detach(self, fgraph: FunctionGraph) -> None: ...
    def on_import(self, fgraph: FunctionGraph, node: Apply, reason: str | None) -> None: ...
    def on_prune(self, fgraph: FunctionGraph, node: Apply, reason: str | None) -> None: ...

    def on_change_input(
        self, fgraph: FunctionGraph, node: Any, i: int, old: Variable, new: Variable, reason
    ) -> None: ...

    def on_validate(
        self, fgraph: FunctionGraph, replacements: Sequence[tuple[Variable, Variable]], reason
    ) -> None: ...

    def orderings(self, fgraph: FunctionGraph) -> dict[Apply, set[Apply]]:
        return {}


class FunctionGraph:
    """Owns a (by default cloned) graph from ``inputs`` to ``outputs``.

    Keeps ``clients``, the set of ``apply_nodes`` and ``variables``, and notifies features
    of every change. ``replace_all_validate`` applies several replacements as one
    transaction: if any feature vetoes, every change is undone.
    """

    def __init__(
        self,
        inputs: Sequence[Variable],
        outputs: Sequence[Variable],
        features: Iterable[Feature] = (),
        clone: bool = True,
    ):
        if clone:
            inputs, outputs, self.memo = clone_graph(list(inputs), list(outputs))
        else:
            self.memo = {}
        self.inputs: list[Variable] = list(inputs)
        self.outputs: list[Variable] = list(outputs)
        self.apply_nodes: set[Apply] = set()
        self.variables: set[Variable] = set()
        # var -> its clients, as an insertion-ordered set {(node, input_index): None} so that
        # removing a client of a much-used variable (a merged constant) is O(1).
        self.clients: dict[Variable, dict[tuple[Any, int], None]] = {}
        self.features: list[Feature] = []
        self._journal: list[tuple[Any, Any, Any, Any]] | None = None  # (kind, ...) entries
        for inp in self.inputs:
            if inp.owner is not None:
                raise ValueError(f"FunctionGraph input {inp.describe()} has an owner")
            self._add_variable(inp)
        for i, out in enumerate(self.outputs):
            self._import_var(out, reason="init")
            self.clients[out][(OUTPUT, i)] = None
        for feature in features:
            self.attach_feature(feature)

    # ---------------------------------------------------------------- structure
    def _add_variable(self, var: Variable) -> None:
        if var not in self.variables:
            self.variables.add(var)
            self.clients.setdefault(var, {})

    def _import_var(self, var: Variable, reason: str | None) -> None:
        if var in self.variables:
            return
        if var.owner is None:
            if not isinstance(var, Constant):
                raise MissingInputError(
                    f"the graph needs {var.describe()}, which is not one of the inputs"
                )
            self._add_variable(var)
            return
        self._import_node(var.owner, reason)

    def _import_node(self, node: Apply, reason: str | None) -> None:
        for new_node in toposort(node.outputs, self.variables):
            if new_node in self.apply_nodes:
                continue
            for inp in new_node.inputs:
                if inp not in self.variables:
                    self._import_var(inp, reason)
            self.apply_nodes.add(new_node)
            for out in new_node.outputs:
                self._add_variable(out)
            for i, inp in enumerate(new_node.inputs):
                self.clients[inp][(new_node, i)] = None
            if self._journal is not None:
                self._journal.append((IMPORT, new_node, None, None))
            for feature in self.features:
                feature.on_import(self, new_node, reason)

    def _prune_if_unused(self, var: Variable, reason: str | None) -> None:
        """Remove ``var``'s owner (recursively) once none of its outputs has clients."""
        stack = [var]
        while stack:
            v = stack.pop()
            node = v.owner
            if node is None or node not in self.apply_nodes:
                if v.owner is None and not self.clients.get(v) and isinstance(v, Constant):
                    self.variables.discard(v)
                    self.clients.pop(v, None)
                continue
            if any(self.clients[o] for o in node.outputs):
                continue
            self.apply_nodes.remove(node)
            for out in node.outputs:
                self.variables.discard(out)
                del self.clients[out]
            for feature in self.features:
                feature.on_prune(self, node, reason)
            for i, inp in enumerate(node.inputs):
                del self.clients[inp][(node, i)]
                stack.append(inp)

    def change_node_input(
        self, node: Any, i: int, new: Variable, reason: str | None = None, any_type: bool = False
    ):
        """Make input ``i`` of ``node`` (or graph output ``i`` if node is OUTPUT) be ``new``.
        ``any_type``: for graph outputs only, ``new`` may be of another type (a device
        value a function returns as it is)."""
        old = self.outputs[i] if node == OUTPUT else node.inputs[i]
        if old is new:
            return
        if any_type and node != OUTPUT:
            raise ValueError("only a graph output may change type")
        if old.type != new.type and not any_type:
            converted = old.type.convert_variable(new)
            if converted is None:
                raise TypeError(
                    f"cannot replace {old.describe()} by {new.describe()}: type {new.type} "
                    f"is not compatible with {old.type} (reason: {reason})"
                )
            new = converted
        self._import_var(new, reason)
        if node == OUTPUT:
            self.outputs[i] = new
        else:
            node.inputs[i] = new
        del self.clients[old][(node, i)]
        self.clients[new][(node, i)] = None
        if self._journal is not None:
            self._journal.append((node, i, old, new))
        for feature in self.features:
            feature.on_change_input(self, node, i, old, new, reason)
        self._prune_if_unused(old, reason)

    def clients_of(self, var: Variable) -> list[tuple[Any, int]]:
        """The (node, input index) pairs using ``var``; ("output", i) for graph outputs."""
        return list(self.clients.get(var, ()))

    def replace(self, var: Variable, new: Variable, reason: str | None = None) -> None:
        """Redirect every client of ``var`` to ``new``."""
        if var not in self.variables:
            raise ValueError(f"cannot replace {var.describe()}: it is not in this graph")
        for node, i in list(self.clients[var]):
            self.change_node_input(node, i, new, reason)

    # ---------------------------------------------------------------- transactions
    def replace_all_validate(
        self, replacements: Sequence[tuple[Variable, Variable]], reason: str | None = None
    ) -> None:
        """Apply all replacements, then let every feature validate; roll back on any error."""
        outer = self._journal
        self._journal = []
        try:
            for old, new in replacements:
                if old in self.variables:
                    self.replace(old, new, reason)
            for feature in self.features:
                feature.on_validate(self, replacements, reason)
        except Exception:
            self._rollback(self._journal)
            self._journal = outer
            raise
        if outer is not None:
            outer.extend(self._journal)
        self._journal = outer

    def _rollback(self, journal: list) -> None:
        """Undo input changes in reverse order, then drop nodes the transaction imported
        that nothing uses any more (e.g. a half-imported replacement)."""
        self._journal = None
        for node, i, old, _new in reversed(journal):
            if node != IMPORT:
                self.change_node_input(node, i, old, reason="rollback")
        for node, imported, _, _ in reversed(journal):
            if node == IMPORT and imported in self.apply_nodes:
                self._prune_if_unused(imported.outputs[0], reason="rollback")

    # ---------------------------------------------------------------- features
    def attach_feature(self, feature: Feature) -> None:
        if feature in self.features:
            return
        self.features.append(feature)
        try:
            feature.on_attach(self)
            # Data-flow order: other features' orderings may not be satisfiable yet.
            for node in toposort(self.outputs, self.inputs):
                feature.on_import(self, node, "attach")
        except Exception:
            self.features.remove(feature)  # a feature that refuses the graph is not attached
            raise

    def remove_feature(self, feature: Feature) -> None:
        self.features.remove(feature)
        feature.on_detach(self)

    def get_feature(self, cls: type) -> Any:
        for feature in self.features:
            if isinstance(feature, cls):
                return feature
        return None

    # ---------------------------------------------------------------- queries
    def orderings(self) -> dict[Apply, set[Apply]]:
        merged: dict[Apply, set[Apply]] = {}
        for feature in self.features:
            for node, before in feature.orderings(self).items():
                merged.setdefault(node, set()).update(before)
        return merged

    def toposort(self) -> list[Apply]:
        """Apply nodes in an order that respects data flow and feature orderings."""
        extra = self.orderings()
        if not extra:
            return toposort(self.outputs, self.inputs)
        # Walked in the data-flow order (not the set's, which follows ids): the same
        # graph gets the same schedule in every process.
        base = toposort(self.outputs, self.inputs)
        listed = set(base)
        base += [n for n in self.apply_nodes if n not in listed]
        deps: dict[Apply, set[Apply]] = {}
        for node in base:
            d = {i.owner for i in node.inputs if i.owner is not None}
            d |= extra.get(node, set())
            deps[node] = d & self.apply_nodes
        order: list[Apply] = []
        ready = [n for n in base if not deps[n]]
        waiting = {n: len(d) for n, d in deps.items()}
        dependents: dict[Apply, list[Apply]] = {}
        for node, d in deps.items():
            for dep in d:
                dependents.setdefault(dep, []).append(node)
        while ready:
            node = ready.pop()
            order.append(node)
            for nxt in dependents.get(node, ()):
                waiting[nxt] -= 1
                if waiting[nxt] == 0:
                    ready.append(nxt)
        if len(order) != len(self.apply_nodes):
            raise InconsistencyError("the graph's dependencies (with orderings) form a cycle")
        return order

    def __str__(self) -> str:
        return f"FunctionGraph({', '.join(map(str, self.outputs))})"
