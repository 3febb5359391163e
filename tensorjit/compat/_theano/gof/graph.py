"""``theano.gof.graph``: graph walks with Theano's names and signatures."""

from tensorjit.core.graph import Apply, Constant, Variable  # noqa: F401
from tensorjit.core.graph import ancestors as _ancestors
from tensorjit.core.graph import clone_graph as _clone_graph
from tensorjit.core.graph import graph_inputs as _graph_inputs
from tensorjit.core.graph import toposort as _toposort


def ancestors(variable_list, blockers=None):
    return _ancestors(variable_list, blockers)


def inputs(variable_list, blockers=None):
    """The ownerless variables ``variable_list`` depends on (Theano's ``graph.inputs``)."""
    return _graph_inputs(variable_list, blockers)


def io_toposort(inputs, outputs, orderings=None):
    """Apply nodes from ``inputs`` to ``outputs``, inputs first."""
    if orderings:
        raise NotImplementedError(
            "theano.gof.graph.io_toposort(orderings=...) is not supported by tensorjit yet"
        )
    return _toposort(outputs, set(inputs))


def toposort(outputs, blockers=None):
    return _toposort(outputs, blockers)


def clone(i, o, copy_inputs=True, copy_orphans=None):
    """Copies of inputs ``i`` and outputs ``o`` (Theano's ``graph.clone``)."""
    new_i, new_o, _ = _clone_graph(i, o)
    if not copy_inputs:
        raise NotImplementedError(
            "theano.gof.graph.clone(copy_inputs=False) is not supported by tensorjit yet"
        )
    return new_i, new_o


def clone_get_equiv(i, o, copy_inputs=True):
    _, _, memo = _clone_graph(i, o)
    return memo
