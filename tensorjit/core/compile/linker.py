"""Linking: how a compiled function runs, once each node has its kernel (kernel
selection is core/kernel_selection.py): the per-node VM, a whole-graph program, or
program segments inside the VM."""

from __future__ import annotations

from typing import Any

from tensorjit.core.compile.lazy import lazy_guards
from tensorjit.core.compile.program import GraphPlan, ProgramVM, whole_graph_program
from tensorjit.core.compile.segments import program_segments
from tensorjit.core.compile.vm import VM
from tensorjit.core.config import config
from tensorjit.core.graph.basic import Apply
from tensorjit.core.memory.plan import MemoryPlan
from tensorjit.core.registries import Backend, Kernel


def link(
    order: list[Apply],
    kernels: list[Kernel],
    memory: MemoryPlan,
    backends: list[Backend],
    lazy_blocks: list,
    debug: bool,
) -> tuple[Any, Any]:
    """The one place that chooses how a function runs: ``(runner, program)``.

    ``runner`` serves ``__call__``: the per-node VM, or a whole-graph program with the VM
    behind it for values the program declines. ``program`` serves trusted callers
    (``call_trusted``, scan's loop), or is None. No program in DebugMode (which checks
    each kernel), with lazy branches, or with config ``whole_graph`` off. When an
    ``Out(borrow=True)`` asks for its buffer to be reused between calls, ``__call__``
    keeps the VM (only it reuses buffers) while trusted callers, which copy what they
    keep, still get the program's fresh outputs.
    """
    vm = VM(
        order, kernels, memory.storage, keep=set(memory.fgraph.outputs), allow_gc=config.allow_gc
    )
    if lazy_blocks:
        vm.set_lazy_blocks(lazy_guards(order, lazy_blocks, memory.storage))
    if not config.whole_graph or debug or lazy_blocks:
        return vm, None
    plan = GraphPlan(
        nodes=order,
        kernels=kernels,
        inputs=memory.input_vars,
        shared=memory.shared_cells,
        outputs=list(memory.fgraph.outputs),
    )
    program = whole_graph_program(plan, backends)
    if program is None:
        # Some node is not covered: its covered stretches still run as programs.
        segments = program_segments(order, kernels, memory.fgraph.outputs, backends)
        if segments:
            vm.set_segments(segments)
        return vm, None
    if memory.borrowed_output_cells:
        return vm, program
    return ProgramVM(program, vm, memory.input_cells, memory.output_cells), program
