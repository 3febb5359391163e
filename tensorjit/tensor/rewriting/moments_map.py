"""An elementwise node over x's shape reading the Moments of x's rows (through their
column arithmetic: the mean, the scale) -> one ``MomentsMap`` node
(tensor/moments_map.py) computing each row's statistics and outputs together.

Served: a layer norm ``(x - mean) / sqrt(var + eps) * g + b`` and a row
standardisation over the last axis, after the specialize phase made their statistics
one Moments node and fusion made the map one Elemwise: float32 and float64 x of two or
more axes, host functions, where nothing else reads the statistics or their column
values (a training graph's gradient reads them: its layer norm keeps two kernels).
Not: other axes (a batch norm's columns), a map that does not read x itself.
"""

from __future__ import annotations

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.fgraph import OUTPUT, FunctionGraph
from tensorjit.core.rewrites import node_rewriter
from tensorjit.tensor.composite import Composite
from tensorjit.tensor.elemwise import Elemwise
from tensorjit.tensor.moments import Moments
from tensorjit.tensor.moments_map import MomentsMap
from tensorjit.tensor.rewriting.fusion import MAX_INPUTS
from tensorjit.tensor.rewriting.util import compiles_for_host, fits, reduced_value_restored

Arg = tuple[str, int]


class _Folding:
    """The Composite of a map and the column nodes between it and one Moments node's
    restored outputs: its inputs are the two statistics, then the leaves."""

    def __init__(self, last: int):
        self.last = last
        self.moments: Apply | None = None
        self.folded: set[Apply] = set()
        self.leaves: list[Variable] = []
        self.program: list = []
        self.done: dict[Variable, Arg] = {}

    def statistic(self, var: Variable) -> Arg | None:
        """("in", k) when var is output k of a Moments over the last axis, restored."""
        reduced = reduced_value_restored(var, self.last)
        owner = None if reduced is None else reduced.owner
        if owner is None or type(owner.op) is not Moments or owner.op.axis != (self.last,):
            return None
        if self.moments not in (None, owner):
            return None  # (a second Moments: a leaf here)
        self.moments = owner
        self.folded.add(var.owner)
        return ("in", reduced.index)

    def reads_statistics(self, var: Variable, seen: set) -> bool:
        """Whether a column node's value derives from a restored Moments output."""
        if var in seen:
            return False
        seen.add(var)
        if self.statistic(var) is not None:
            return True
        node = var.owner
        return (
            node is not None
            and type(node.op) is Elemwise
            and node.op.inplace is None
            and var.type.broadcastable[self.last]
            and any(self.reads_statistics(v, seen) for v in node.inputs)
        )

    def arg(self, var: Variable) -> Arg:
        if var not in self.done:
            self.done[var] = self._arg(var)
        return self.done[var]

    def _arg(self, var: Variable) -> Arg:
        found = self.statistic(var)
        if found is not None:
            return found
        node = var.owner
        if (
            node is not None
            and type(node.op) is Elemwise
            and var.type.broadcastable[self.last]
            and self.reads_statistics(var, set())
        ):
            self.folded.add(node)
            return self.step(node)
        self.leaves.append(var)
        return ("in", 1 + len(self.leaves))

    def step(self, node: Apply) -> Arg:
        """The node's scalar op as steps of the program (a Composite's own, inlined)."""
        args = [self.arg(v) for v in node.inputs]
        scalar_op = node.op.scalar_op
        if type(scalar_op) is not Composite:
            self.program.append((scalar_op, tuple(args)))
            return ("step", len(self.program) - 1)
        base = len(self.program)
        for inner_op, inner_args in scalar_op.program:
            mapped = [args[i] if kind == "in" else ("step", base + i) for kind, i in inner_args]
            self.program.append((inner_op, tuple(mapped)))
        return ("step", len(self.program) - 1)


def _host_rendered(dtype: str) -> bool:
    """Whether a host kernel renders values of ``dtype`` (not complex, not float16)."""
    return not dtype.startswith("complex") and dtype != "float16"


def _only_read_by(fgraph: FunctionGraph, nodes: set[Apply], readers: set[Apply]) -> bool:
    """Whether every output of ``nodes`` is read by ``readers`` only."""
    for node in nodes:
        for out in node.outputs:
            for client, _ in fgraph.clients.get(out, {}):
                if client == OUTPUT or client not in readers:
                    return False
    return True


@node_rewriter([Elemwise], name="local_moments_map")
def local_moments_map(fgraph: FunctionGraph, node: Apply):
    """An elementwise map of x reading its rows' Moments -> one MomentsMap node."""
    if node.op.inplace is not None or not compiles_for_host(fgraph):
        return None
    out = node.outputs[0]
    ndim = out.type.ndim
    if ndim < 2:
        return None
    folding = _Folding(ndim - 1)
    if not any(folding.reads_statistics(v, set()) for v in node.inputs):
        return None
    folding.step(node)
    moments = folding.moments
    if moments is None or len(folding.leaves) + 3 > MAX_INPUTS:
        return None
    x, divisor = moments.inputs
    if x not in folding.leaves or x.type.broadcastable != out.type.broadcastable:
        return None
    if not all(_host_rendered(v.type.dtype) for v in [out, *folding.leaves]):
        return None  # (the node would run Op.perform, whose NumPy Moments differ)
    readers = folding.folded | {node}
    if not _only_read_by(fgraph, {moments} | folding.folded, readers):
        return None  # (its statistics or columns are read elsewhere: two kernels)
    composite = Composite(tuple(folding.program), 2 + len(folding.leaves), out.type.dtype)
    new = MomentsMap(composite, moments.op.mean_by)(x, divisor, *folding.leaves)
    replacement = fits(out, new)
    return None if replacement is None else {out: replacement}
