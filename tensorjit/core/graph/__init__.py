"""Graph objects: Type, Variable, Constant, Apply, Op, FunctionGraph and graph walks."""

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.fgraph import (
    OUTPUT,
    Feature,
    FunctionGraph,
    InconsistencyError,
    MissingInputError,
)
from tensorjit.core.graph.op import Op
from tensorjit.core.graph.traversal import (
    ancestors,
    clone_graph,
    clone_replace,
    graph_inputs,
    toposort,
)
from tensorjit.core.graph.type import Type

__all__ = [
    "OUTPUT",
    "Apply",
    "Constant",
    "Feature",
    "FunctionGraph",
    "InconsistencyError",
    "MissingInputError",
    "Op",
    "Type",
    "Variable",
    "ancestors",
    "clone_graph",
    "clone_replace",
    "graph_inputs",
    "toposort",
]
