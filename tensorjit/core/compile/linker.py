"""Kernel selection: one kernel per node, from the highest-priority backend offering one."""

from __future__ import annotations

import warnings
from functools import partial

from tensorjit.core.graph.basic import Apply
from tensorjit.core.hooks import get_plugin_system
from tensorjit.core.registries import Backend, Kernel

PERFORM = Kernel("perform", "python", lambda node: partial(node.op.perform, node), "core")

_select_cache: dict[tuple, Kernel | None] = {}


_warned_unavailable: set[str] = set()


def backends_for(names: tuple[str, ...] | None, device: str) -> list[Backend]:
    """The backends a mode may use, best first. A named backend that can not run here is
    skipped with one warning (per backend and process) saying why; the others, and in the
    end Op.perform, still run the function."""
    registry = get_plugin_system().registries.backends
    if names is None:
        # The device's backends by priority; one that would have been preferred to the
        # best available one (e.g. C without a compiler) says once why it is not used.
        chosen = registry.for_device(device)
        best = chosen[0].priority if chosen else float("-inf")
        for backend in registry.backends.values():
            if backend.device == device and backend.priority > best:
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
            RuntimeWarning,
            stacklevel=5,
        )


def _kernel_name(factory) -> str:
    """A selected factory may say what it is (``kernel_name``) for profiles and errors."""
    return getattr(factory, "kernel_name", None) or getattr(factory, "__name__", "selected")


def choose_kernels(nodes: list[Apply], backends: list[Backend]) -> list[Kernel]:
    """A kernel per node; then each backend that prepares its kernels gets its nodes."""
    kernels = [choose_kernel(node, backends) for node in nodes]
    for backend in backends:
        if backend.prepare is not None:
            mine = [n for n, k in zip(nodes, kernels) if k.backend == backend.name]
            if mine:
                backend.prepare(mine)
    return kernels


def choose_kernel(node: Apply, backends: list[Backend]) -> Kernel:
    system = get_plugin_system()
    table = system.registries.kernels
    for backend in backends:
        kernel = table.lookup(backend.name, node.op)
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
    return PERFORM
