"""``theano.gof``: the graph objects."""

from theano.gof import (  # noqa: F401
    graph,  # noqa: F401
    opt,
    toolbox,
)
from theano.gof.fg import FunctionGraph  # noqa: F401
from theano.gof.opt import (  # noqa: F401
    EquilibriumOptimizer,
    LocalOptimizer,
    MergeOptimizer,
    NavigatorOptimizer,
    OpKeyOptimizer,
    OpRemove,
    OpSub,
    Optimizer,
    PatternSub,
    SeqOptimizer,
    TopoOptimizer,
    local_optimizer,
)
from theano.gof.toolbox import ReplaceValidate  # noqa: F401

from tensorjit.compat.op import Op, PureOp  # noqa: F401
from tensorjit.core.graph import (  # noqa: F401
    Apply,
    Constant,
    Feature,
    InconsistencyError,
    MissingInputError,
    Type,
    Variable,
)
from tensorjit.core.memory.destroy_handler import DestroyHandler  # noqa: F401


class CachedConstantError(Exception):
    """Theano raised it for a cached constant used in two graphs; tensorjit's constants
    are not cached across graphs, so it is never raised (kept for imports)."""
