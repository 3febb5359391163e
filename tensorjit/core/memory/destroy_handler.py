"""The DestroyHandler: keeps destructive (inplace) operations correct.

It follows which variables alias which (through ``view_map`` and ``destroy_map``), orders
every destroyer after all other readers of the value it destroys (and of that value's
views), and vetoes any change after which a value would be destroyed twice, a constant or
protected input destroyed, a shared variable's storage destroyed other than by the
computation of its own update, a value destroyed while still needed (by a function
output, or by a reader that depends on the destroyer: a cycle), or a destroyer would read
the value it destroys through a second, aliased input.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.fgraph import OUTPUT, Feature, FunctionGraph, InconsistencyError
from tensorjit.core.memory.aliasing import buffer_source
from tensorjit.core.memory.transfer_op import is_transfer


def view_input(node: Apply, out_index: int) -> int | None:
    """The input index that output ``out_index`` of ``node`` is a view of, if any.

    A destroyer's output is *not* a view here: it lives in the destroyed input's buffer,
    but it is a new value (a new version of that buffer), and readers of the old value
    are ordered before the destroyer. So chains like ``add_inplace(mul_inplace(t, 2), 1)``
    destroy two different values.
    """
    aliased = node.op.view_map.get(out_index)
    return aliased[0] if aliased else None


def indestructible(var: Variable) -> bool:
    """Whether ``var`` is marked never to be destroyed (Theano's ``tag.indestructible``)."""
    return bool(getattr(getattr(var, "tag", None), "indestructible", False))


def destroyed_inputs(node: Apply) -> list[int]:
    return sorted({i for ins in node.op.destroy_map.values() for i in ins})


class DestroyHandler(Feature):
    """A FunctionGraph feature; see the module docstring.

    ``protected``: graph inputs that must never be destroyed (the function's non-mutable
    inputs). ``update_outputs``: for each shared-variable input, the index of the graph
    output holding its update; its storage may be destroyed only by the computation of
    that update.
    """

    def __init__(
        self, protected: Iterable[Variable] = (), update_outputs: dict[Variable, int] | None = None
    ):
        self.protected = set(protected)
        self.update_outputs = dict(update_outputs or {})
        self.view_of: dict[Variable, Variable] = {}
        self.views: dict[Variable, set[Variable]] = {}
        self.destroyers: set[Apply] = set()
        self.fgraph: FunctionGraph | None = None

    # ---------------------------------------------------------------- bookkeeping
    def on_attach(self, fgraph: FunctionGraph) -> None:
        if fgraph.get_feature(DestroyHandler) not in (None, self):
            raise InconsistencyError("a FunctionGraph can have only one DestroyHandler")
        self.fgraph = fgraph

    def on_detach(self, fgraph: FunctionGraph) -> None:
        self.fgraph = None

    def on_import(self, fgraph, node: Apply, reason) -> None:
        for j, out in enumerate(node.outputs):
            i = view_input(node, j)
            if i is not None:
                self._link(out, node.inputs[i])
        if node.op.destroy_map:
            self.destroyers.add(node)

    def on_prune(self, fgraph, node: Apply, reason) -> None:
        for out in node.outputs:
            viewed = self.view_of.pop(out, None)
            if viewed is not None:
                self.views[viewed].discard(out)
        self.destroyers.discard(node)

    def on_change_input(self, fgraph, node, i, old, new, reason) -> None:
        if node == OUTPUT:
            return
        for j, out in enumerate(node.outputs):
            if view_input(node, j) == i:
                self.views[old].discard(out)
                self._link(out, new)

    def _link(self, out: Variable, viewed: Variable) -> None:
        self.view_of[out] = viewed
        self.views.setdefault(viewed, set()).add(out)

    # ---------------------------------------------------------------- queries
    def root(self, var: Variable) -> Variable:
        """The variable whose memory ``var`` uses (itself if it is not a view)."""
        while var in self.view_of:
            var = self.view_of[var]
        return var

    def impact(self, root: Variable, exclude: Sequence[Variable] = ()) -> list[Variable]:
        """``root`` and every variable that views it, not descending into ``exclude``."""
        blocked = set(exclude)
        found, stack = [], [root]
        while stack:
            var = stack.pop()
            found.append(var)
            stack.extend(v for v in self.views.get(var, ()) if v not in blocked)
        return found

    def destroyable(self, var: Variable) -> bool:
        """Whether some op could destroy ``var`` now (cheap; cycles are not checked)."""
        root = self.root(var)
        if isinstance(root, Constant) or root in self.protected or indestructible(root):
            return False
        return not any(self._destroys_root(d, root) for d in self.destroyers)

    def _destroys_root(self, node: Apply, root: Variable) -> bool:
        return any(self.root(node.inputs[i]) is root for i in destroyed_inputs(node))

    # ---------------------------------------------------------------- validation
    def _readers(self, node: Apply) -> tuple[set[Apply], list[Variable]]:
        """Other nodes reading values ``node`` destroys, and graph outputs aliasing them."""
        fgraph = self.fgraph
        assert fgraph is not None, "the handler is attached to a graph"
        own = [o for j, o in enumerate(node.outputs) if j in node.op.destroy_map]
        readers: set[Apply] = set()
        outputs: list[Variable] = []
        for i in destroyed_inputs(node):
            for var in self.impact(self.root(node.inputs[i]), exclude=own):
                for client, _ in fgraph.clients.get(var, ()):
                    if client == OUTPUT:
                        outputs.append(var)
                    elif client is not node:
                        readers.add(client)
        return readers, outputs

    def _check_destroyer(self, node: Apply, owner_of_root: dict) -> None:
        op = node.op
        where = f"{op} (created at {node.outputs[0].created_at or 'unknown'})"
        for i in destroyed_inputs(node):
            var = node.inputs[i]
            root = self.root(var)
            other = owner_of_root.setdefault(root, node)
            if other is not node:
                raise InconsistencyError(
                    f"{where} and {other.op} would both destroy the value of {root}"
                )
            if isinstance(root, Constant):
                raise InconsistencyError(f"{where} would destroy the constant {root}")
            if indestructible(root):
                raise InconsistencyError(f"{where} would destroy {root}, marked indestructible")
            if root in self.protected:
                raise InconsistencyError(
                    f"{where} would destroy the input {root.describe()}, which is not "
                    "mutable (use In(x, mutable=True) to allow it)"
                )
            if root in self.update_outputs and not self._is_own_update(node, root):
                raise InconsistencyError(
                    f"{where} would destroy the storage of shared variable {root} other than "
                    "by computing its update"
                )
            j = self.reads_destroyed_through_alias(node, i)
            if j is not None:
                raise InconsistencyError(
                    f"{where} would destroy input {i} while reading it through input {j}"
                )

    def reads_destroyed_through_alias(self, node: Apply, i: int) -> int | None:
        """Another input of ``node`` aliasing destroyed input ``i`` (its index), if any.

        The same variable twice is fine for ops that read each element before writing it
        (``destroyhandler_tolerate_same``: True, or Theano's list of (destroyed, other)
        input pairs), e.g. ``add_inplace(x, x)``; Theano's ``destroyhandler_tolerate_aliased``
        pairs also allow another view of the same buffer.
        """
        var = node.inputs[i]
        root = self.root(var)
        same = node.op.destroyhandler_tolerate_same
        aliased = getattr(node.op, "destroyhandler_tolerate_aliased", ())
        for j, inp in enumerate(node.inputs):
            if j == i or self.root(inp) is not root or (i, j) in aliased:
                continue
            if inp is var and (
                same is True or (isinstance(same, (list, tuple)) and (i, j) in same)
            ):
                continue
            return j
        return None

    def _is_own_update(self, node: Apply, shared_input: Variable) -> bool:
        """Whether the update output of ``shared_input`` is ``node``'s result, possibly
        through further views and destroyers (all living in the same buffer)."""
        assert self.fgraph is not None, "the handler is attached to a graph"
        var = self.fgraph.outputs[self.update_outputs[shared_input]]
        own = {o for j, o in enumerate(node.outputs) if j in node.op.destroy_map}
        while var not in own:
            owner = var.owner
            if owner is None:
                return False
            source = buffer_source(owner, var.index or 0)  # an owned variable has its index
            if source is not None:
                var = source
            elif is_transfer(owner):
                # A copy between devices of the destroyer's result (placement inserts
                # them, and removes those that go there and back): the update is still
                # the value the destroyer computed in the shared buffer.
                var = owner.inputs[0]
            else:
                return False
        return True

    def on_validate(self, fgraph, replacements, reason) -> None:
        if not self.destroyers:
            return
        owner_of_root: dict[Variable, Apply] = {}
        needs_cycle_check = False
        for node in self.destroyers:
            self._check_destroyer(node, owner_of_root)
            readers, outputs = self._readers(node)
            if outputs:
                raise InconsistencyError(
                    f"{node.op} would destroy the value of {outputs[0]}, which the function "
                    "still returns"
                )
            needs_cycle_check = needs_cycle_check or bool(readers)
        if needs_cycle_check:
            fgraph.toposort()  # raises InconsistencyError on a cycle

    def orderings(self, fgraph) -> dict[Apply, set[Apply]]:
        """Every destroyer runs after all other readers of the value it destroys."""
        result: dict[Apply, set[Apply]] = {}
        for node in self.destroyers:
            readers, _ = self._readers(node)
            if readers:
                result[node] = readers
        return result


def fast_inplace_check(fgraph: FunctionGraph, inputs: Sequence[Variable]) -> list[Variable]:
    """The variables among ``inputs`` that an inplace op could destroy now.

    A cheap pre-filter (constants, protected inputs and already-destroyed values are
    excluded); the full validation, which also detects cycles, still runs on substitution.
    """
    handler: DestroyHandler | None = fgraph.get_feature(DestroyHandler)
    if handler is None:
        raise ValueError("fast_inplace_check needs a FunctionGraph with a DestroyHandler")
    return [v for v in inputs if handler.destroyable(v)]
