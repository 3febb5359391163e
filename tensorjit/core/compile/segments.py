"""Programs for the covered stretches of a function that has uncovered nodes.

When no backend compiles a function's whole graph (a node has no program step: a random
draw, an op only Op.perform runs), each maximal run of consecutive scheduled nodes that
one backend's program could run becomes a program of its own, called by the per-node VM
in place of those nodes (``VM.set_segments``). A segment reads the values it needs from
the VM's cells and writes back the values later nodes or the function's outputs use; its
temporaries stay inside. A node that overwrites a function input (a commit, see
commit.py) is never in a segment, so the all-or-nothing plan keeps working per node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tensorjit.core.compile.commit import overwritten_inputs
from tensorjit.core.compile.program import GraphPlan, Program
from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.memory.aliasing import alias_roots
from tensorjit.core.registries import Backend, Kernel


@dataclass(frozen=True)
class Segment:
    """Steps ``start`` to ``stop - 1`` of the schedule, run as ``program``."""

    start: int
    stop: int
    program: Program
    inputs: list[Variable]  # read from the VM's cells, in the program's argument order
    outputs: list[Variable]  # written to the VM's cells, in the program's result order


def program_segments(
    order: Sequence[Apply],
    kernels: Sequence[Kernel],
    graph_outputs: Sequence[Variable],
    backends: Sequence[Backend],
    min_nodes: int = 2,
) -> list[Segment]:
    """The segments of ``order`` that a backend (one offering ``whole_graph``) compiles;
    runs shorter than ``min_nodes`` stay per node (a program saves nothing there)."""
    by_name = {b.name: b for b in backends if b.whole_graph is not None}
    roots = alias_roots(order)

    def backend_of(k: int) -> Backend | None:
        spec = kernels[k].spec
        if spec is None or spec.step is None or overwritten_inputs(order[k], roots):
            return None
        return by_name.get(spec.backend)

    last_read: dict[Variable, int] = {}  # value -> the last step reading it
    for step, node in enumerate(order):
        for var in node.inputs:
            last_read[var] = step
    kept = set(graph_outputs)
    segments = []
    k = 0
    while k < len(order):
        backend = backend_of(k)
        stop = k + 1
        while backend is not None and stop < len(order) and backend_of(stop) is backend:
            stop += 1
        if backend is not None and stop - k >= min_nodes:
            segment = _compile(order, kernels, last_read, kept, backend, k, stop)
            if segment is not None:
                segments.append(segment)
        k = stop
    return segments


def _compile(
    order: Sequence[Apply],
    kernels: Sequence[Kernel],
    last_read: dict[Variable, int],
    kept: set[Variable],
    backend: Backend,
    start: int,
    stop: int,
) -> Segment | None:
    nodes = list(order[start:stop])
    produced = {out for node in nodes for out in node.outputs}
    inputs: list[Variable] = []
    for node in nodes:
        for var in node.inputs:
            if var not in produced and not isinstance(var, Constant) and var not in inputs:
                inputs.append(var)
    outputs = [
        out
        for node in nodes
        for out in node.outputs
        if out in kept or last_read.get(out, -1) >= stop
    ]
    plan = GraphPlan(nodes, list(kernels[start:stop]), inputs, [], outputs)
    if backend.whole_graph is None:
        return None
    program = backend.whole_graph(plan)
    return None if program is None else Segment(start, stop, program, inputs, outputs)
