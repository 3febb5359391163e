"""``theano.gof.toolbox``: the graph features Theano code attaches.

tensorjit's FunctionGraph validates every ``replace_all_validate`` through its features
already, so ``ReplaceValidate`` only records that it was asked for; ``NodeFinder``
answers ``fgraph.get_nodes(op)``.
"""

from tensorjit.core.graph.fgraph import Feature


class Bookkeeper(Feature):
    """Theano's base of features that follow imports and prunes."""


class ReplaceValidate(Feature):
    """``fgraph.replace_validate`` / ``replace_all_validate`` (built into tensorjit's
    FunctionGraph: every feature validates each transaction, changes roll back)."""


class NodeFinder(Feature):
    """Adds ``fgraph.get_nodes(op)``: the nodes applying ``op``, in graph order."""

    def on_attach(self, fgraph) -> None:
        if hasattr(fgraph, "get_nodes"):
            raise AlreadyThere("NodeFinder is already attached")

        def get_nodes(op):
            return [node for node in fgraph.toposort() if node.op == op]

        fgraph.get_nodes = get_nodes

    def on_detach(self, fgraph) -> None:
        del fgraph.get_nodes


class AlreadyThere(Exception):
    """A feature of this kind is already attached."""


class PreserveNames(Feature):
    """Theano kept a replaced variable's name on its replacement."""

    def on_change_input(self, fgraph, node, i, r, new_r, reason=None):
        if r.name is not None and new_r.name is None:
            new_r.name = r.name
