"""Kernel selection: one kernel per node, from the highest-priority backend of the node's
device offering one. Every choice reads the kernel specs (core/registries.py), so
selection, a backend's ``prepare`` and its whole-graph program agree by construction.

This sits below the rewrites and compilation, which both ask it (the placement pass:
"has this device a kernel for the node?"; the linker: "which kernel?"). It is given the
registries it reads (a ``KernelSource``); the plugin system builds that source from the
top of the core, and ``function()`` attaches it to the graph as a ``BackendChoice``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from tensorjit.core.devices import HOST
from tensorjit.core.diagnostics import TensorjitRuntimeWarning
from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.fgraph import Feature
from tensorjit.core.registries import (
    Backend,
    BackendRegistry,
    Kernel,
    KernelRegistry,
    TransferRegistry,
)

PERFORM = Kernel("perform", "python", lambda node: partial(node.op.perform, node), "core")

#: ``select(node, backend_name)``: a kernel factory for an op no kernel table names (the
#: ``tensorjit_select_kernel`` hook), or None.
SelectHook = Callable[[Apply, str], Any]

_warned_unavailable: set[str] = set()


class CompileError(RuntimeError):
    """A function can not be compiled as asked (e.g. a node would run on the host of a
    function that must run on a device)."""


class KernelSource:
    """Where kernels come from: the registered backends, their kernel tables, the
    device-to-device copiers and transfer lifters, and the selection hook."""

    def __init__(
        self,
        backends: BackendRegistry,
        kernels: KernelRegistry,
        transfers: TransferRegistry,
        select: SelectHook,
    ) -> None:
        self.backends = backends
        self.kernels = kernels
        self.transfers = transfers
        self._select = select
        self._selected: dict[tuple, Kernel | None] = {}

    def forget_selections(self) -> None:
        """Drop remembered hook answers (a plugin was added or removed)."""
        self._selected.clear()

    def backends_for(
        self, names: tuple[str, ...] | None, device: str = HOST, devices: Iterable[str] = ()
    ) -> list[Backend]:
        """The backends a mode may use, best first within each device: those of the
        default ``device``, the host and ``devices`` (only these are asked whether they
        can run). A named backend that can not run here is skipped with one warning (per
        backend and process) saying why; the others, and in the end Op.perform, still run
        the function. With ``names`` None, a backend of the default device that would
        have been preferred to the best available one (e.g. C without a compiler) says
        why it is not used."""
        registry = self.backends
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
                raise ValueError(
                    f"unknown backend {name!r}; registered: {sorted(registry.backends)}"
                )
            reason = registry.unavailable_reason(name)
            if reason is not None:
                _warn_unavailable(name, reason)
                continue
            chosen.append(registry.backends[name])
        return chosen

    def find_kernel(self, node: Apply, backends: list[Backend]) -> Kernel | None:
        """The first kernel that one of ``backends`` (best first) offers for ``node``:
        its kernel table's spec, else the selection hook; or None."""
        for backend in backends:
            elsewhere = [k for k, i in enumerate(node.inputs) if i.type.device != backend.device]
            if backend.name != PERFORM.backend and elsewhere:
                # Only a spec that reads them there takes host values for the inputs its
                # op reads on the host; anything else elsewhere: only Op.perform (a host
                # metadata reader of a device value)
                spec = self.kernels.lookup(backend.name, node.op)
                host = node.op.host_inputs(node)
                if (
                    spec is not None
                    and spec.reads_host_inputs
                    and all(k in host and node.inputs[k].type.device == HOST for k in elsewhere)
                ):
                    kernel = spec.bind(node)
                    if kernel is not None:
                        return kernel
                continue
            kernel = self.kernels.kernel_for(backend.name, node)
            if kernel is not None:
                return kernel
            if backend.name == PERFORM.backend:
                return PERFORM  # Op.perform is the Python backend's kernel for every op
            key = (node.op, tuple(i.type for i in node.inputs), backend.name)
            if key not in self._selected:
                factory = self._select(node, backend.name)
                self._selected[key] = (
                    None
                    if factory is None
                    else Kernel(f"{backend.name}:{_kernel_name(factory)}", backend.name, factory)
                )
            if self._selected[key] is not None:
                return self._selected[key]
        return None

    def choose_kernel(self, node: Apply, backends: list[Backend]) -> Kernel:
        """The kernel of the best backend of the node's device that covers it; Op.perform
        for host nodes and device-generic ones (transfers, copies) no backend covers."""
        device = node_device(node)
        kernel = self.find_kernel(node, [b for b in backends if b.device == device])
        if kernel is not None:
            return kernel
        if device == HOST or node.op.device_generic:
            return PERFORM
        raise CompileError(
            f"no backend of device {device!r} has a kernel for {node.op} (created at "
            f"{node.outputs[0].created_at or 'unknown'}); the placement pass keeps such "
            "nodes on the host, so a rewrite after it must have moved this one"
        )

    def choose_kernels(self, nodes: list[Apply], backends: list[Backend]) -> list[Kernel]:
        """A kernel per node; then each backend that prepares its kernels gets its
        ``(node, kernel)`` pairs."""
        kernels = [self.choose_kernel(node, backends) for node in nodes]
        for backend in backends:
            if backend.prepare is not None:
                mine = [(n, k) for n, k in zip(nodes, kernels) if k.backend == backend.name]
                if mine:
                    backend.prepare(mine)
        return kernels


class BackendChoice(Feature):
    """The backends a function may use (every device's, best first), its default device
    and where their kernels come from; attached to the graph by ``function()`` so the
    placement pass and device-aware rewrites see them."""

    def __init__(self, backends: list[Backend], default_device: str, source: KernelSource):
        self.backends = backends
        self.default_device = default_device
        self.source = source

    def of_device(self, device: str) -> list[Backend]:
        return [b for b in self.backends if b.device == device]

    def has_kernel(self, node: Apply, device: str) -> bool:
        """Whether one of this function's backends of ``device`` covers ``node``."""
        return self.source.find_kernel(node, self.of_device(device)) is not None

    def runs_once_placed(self, node: Apply, device: str) -> bool:
        """Whether one of this function's backends of ``device`` would cover ``node`` (a
        host-typed node, as rewrites before placement make) placed there: its inputs
        and outputs typed on the device."""
        try:
            inputs = [v.type.on_device(device).make_variable() for v in node.inputs]
            outputs = [v.type.on_device(device).make_variable() for v in node.outputs]
        except TypeError:
            return False  # a type that can not live there
        return self.has_kernel(Apply(node.op, inputs, outputs), device)

    def registers(self, device: str, op_class: type) -> bool:
        """Whether one of this function's backends of ``device`` has kernels for
        ``op_class`` (before placement, when no node is typed there yet; a kernel's plan
        may still decline a node, which placement then keeps on the host)."""
        table = self.source.kernels
        return any(table.lookup_class(b.name, op_class) is not None for b in self.of_device(device))


def _warn_unavailable(name: str, reason: str | None) -> None:
    if reason is not None and name not in _warned_unavailable:
        _warned_unavailable.add(name)
        warnings.warn(
            f"backend {name!r} is unavailable ({reason}); its kernels are not used",
            TensorjitRuntimeWarning,
            stacklevel=5,
        )


def _kernel_name(factory: Any) -> str:
    """A selected factory may say what it is (``kernel_name``) for profiles and errors."""
    return str(getattr(factory, "kernel_name", None) or getattr(factory, "__name__", "selected"))


def node_device(node: Apply) -> str:
    """The device a node runs on: its outputs' (a transfer runs on its target)."""
    return node.outputs[0].type.device if node.outputs else HOST
