"""Kernel selection: one kernel per node, from the highest-priority backend of the node's
device offering one. Every choice reads the kernel specs (core/registries.py), so
selection, a backend's ``prepare`` and its whole-graph program agree by construction."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from functools import partial
from typing import Any

from tensorjit.core.compile.lazy import lazy_guards
from tensorjit.core.compile.program import GraphPlan, ProgramVM, whole_graph_program
from tensorjit.core.compile.segments import program_segments
from tensorjit.core.compile.vm import VM
from tensorjit.core.config import config
from tensorjit.core.devices import HOST
from tensorjit.core.diagnostics import TensorjitRuntimeWarning
from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.fgraph import Feature
from tensorjit.core.hooks import get_plugin_system
from tensorjit.core.memory.plan import MemoryPlan
from tensorjit.core.registries import Backend, Kernel

PERFORM = Kernel("perform", "python", lambda node: partial(node.op.perform, node), "core")

_select_cache: dict[tuple, Kernel | None] = {}


_warned_unavailable: set[str] = set()


class CompileError(RuntimeError):
    """A function can not be compiled as asked (e.g. a node would run on the host of a
    function that must run on a device)."""


class BackendChoice(Feature):
    """The backends a function may use (every device's, best first) and its default
    device; attached to the graph by ``function()`` so the placement pass sees them."""

    def __init__(self, backends: list[Backend], default_device: str):
        self.backends = backends
        self.default_device = default_device

    def of_device(self, device: str) -> list[Backend]:
        return [b for b in self.backends if b.device == device]


def backends_for(
    names: tuple[str, ...] | None, device: str = HOST, devices: Iterable[str] = ()
) -> list[Backend]:
    """The backends a mode may use, best first within each device: those of the default
    ``device``, the host and ``devices`` (only these are asked whether they can run). A
    named backend that can not run here is skipped with one warning (per backend and
    process) saying why; the others, and in the end Op.perform, still run the function.
    With ``names`` None, a backend of the default device that would have been preferred
    to the best available one (e.g. C without a compiler) says why it is not used."""
    registry = get_plugin_system().registries.backends
    if names is None:
        chosen = []
        for dev in dict.fromkeys([device, HOST, *devices]):
            mine = registry.for_device(dev)
            chosen.extend(mine)
            if dev != device:
                continue
            best = mine[0].priority if mine else float("-inf")
            for backend in registry.backends.values():
                if backend.device == dev and backend.priority > best:
                    _warn_unavailable(backend.name, registry.unavailable_reason(backend.name))
        return chosen
    chosen = []
    for name in names:
        if name not in registry.backends:
            raise ValueError(f"unknown backend {name!r}; registered: {sorted(registry.backends)}")
        reason = registry.unavailable_reason(name)
        if reason is not None:
            _warn_unavailable(name, reason)
            continue
        chosen.append(registry.backends[name])
    return chosen


def _warn_unavailable(name: str, reason: str | None) -> None:
    if reason is not None and name not in _warned_unavailable:
        _warned_unavailable.add(name)
        warnings.warn(
            f"backend {name!r} is unavailable ({reason}); its kernels are not used",
            TensorjitRuntimeWarning,
            stacklevel=5,
        )


def _kernel_name(factory) -> str:
    """A selected factory may say what it is (``kernel_name``) for profiles and errors."""
    return getattr(factory, "kernel_name", None) or getattr(factory, "__name__", "selected")


def node_device(node: Apply) -> str:
    """The device a node runs on: its outputs' (a transfer runs on its target)."""
    return node.outputs[0].type.device if node.outputs else HOST


def choose_kernels(nodes: list[Apply], backends: list[Backend]) -> list[Kernel]:
    """A kernel per node; then each backend that prepares its kernels gets its
    ``(node, kernel)`` pairs."""
    kernels = [choose_kernel(node, backends) for node in nodes]
    for backend in backends:
        if backend.prepare is not None:
            mine = [(n, k) for n, k in zip(nodes, kernels) if k.backend == backend.name]
            if mine:
                backend.prepare(mine)
    return kernels


def choose_kernel(node: Apply, backends: list[Backend]) -> Kernel:
    """The kernel of the best backend of the node's device that covers it; Op.perform
    for host nodes and device-generic ones (transfers, copies) no backend covers."""
    device = node_device(node)
    kernel = find_kernel(node, [b for b in backends if b.device == device])
    if kernel is not None:
        return kernel
    if device == HOST or node.op.device_generic:
        return PERFORM
    raise CompileError(
        f"no backend of device {device!r} has a kernel for {node.op} (created at "
        f"{node.outputs[0].created_at or 'unknown'}); the placement pass keeps such nodes "
        "on the host, so a rewrite after it must have moved this one"
    )


def find_kernel(node: Apply, backends: list[Backend]) -> Kernel | None:
    """The first kernel that one of ``backends`` (best first) offers for ``node``:
    its kernel table's spec, else the ``tensorjit_select_kernel`` hook; or None."""
    system = get_plugin_system()
    table = system.registries.kernels
    for backend in backends:
        if backend.name != PERFORM.backend and any(
            i.type.device != backend.device for i in node.inputs
        ):
            continue  # a host metadata reader of a device value: only Op.perform
        kernel = table.kernel_for(backend.name, node)
        if kernel is not None:
            return kernel
        if backend.name == PERFORM.backend:
            return PERFORM  # Op.perform is the Python backend's kernel for every op
        key = (node.op, tuple(i.type for i in node.inputs), backend.name)
        if key not in _select_cache:
            factory = system.pm.hook.tensorjit_select_kernel(node=node, backend=backend.name)
            _select_cache[key] = (
                None
                if factory is None
                else Kernel(f"{backend.name}:{_kernel_name(factory)}", backend.name, factory)
            )
        if _select_cache[key] is not None:
            return _select_cache[key]
    return None


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
