"""Hook specifications and the plugin manager.

Every op family, backend, kernel and rewrite arrives through these hooks. Built-in
plugins are discovered through the same entry-point group, ``tensorjit.plugins``, as a
third party's. Registration hooks are *historic*: a plugin registered late still gets
them, so registries are always complete. No hook is called per node or per rewrite
iteration, except ``tensorjit_select_kernel`` (only when a kernel table misses, cached)
and ``tensorjit_validate_replacement`` (once per substitution).
"""

from __future__ import annotations

import difflib
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import pluggy

from tensorjit.core import devices
from tensorjit.core.config import config
from tensorjit.core.diagnostics import logger
from tensorjit.core.kernel_selection import KernelSource
from tensorjit.core.memory import transfer_op
from tensorjit.core.memory.shared import use_shared_constructors
from tensorjit.core.registries import (
    BackendRegistry,
    InplaceRegistry,
    KernelRegistry,
    OpRegistry,
    TransferRegistry,
    TypeRegistry,
)
from tensorjit.core.rewrites.db import RewriteDB
from tensorjit.core.source import add_library_code

PROJECT = "tensorjit"
ENTRY_POINT_GROUP = "tensorjit.plugins"
DISABLE_AUTOLOAD_ENV = "TENSORJIT_DISABLE_PLUGIN_AUTOLOAD"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class PluginLoadError(ImportError):
    """A plugin declared by entry point could not be loaded or registered."""


def _how_to_block(name: str) -> str:
    return (
        f"To run without it, set TENSORJIT_FLAGS=plugins_blocklist={name} (several: "
        "separated by ';'), or uninstall its distribution"
    )


def _mark_library_code(module_name: str) -> None:
    """The top-level package (or module) of a plugin loaded by entry point is library
    code for error locations (core/source.py)."""
    top = sys.modules.get(module_name.split(".")[0])
    path = getattr(top, "__file__", None)
    if path is None:
        return
    package_dirs = getattr(top, "__path__", None)
    add_library_code(list(package_dirs)[0] if package_dirs else path)


class HookSpecs:
    """The hook specifications (the contract with plugin authors; see the README and
    docs/architecture.md). An implementation may take fewer arguments than its spec."""

    @hookspec(historic=True)
    def tensorjit_register_types(self, registry: TypeRegistry) -> None:
        """Register Type classes and shared-variable constructors for value kinds.

        ``registry``: ``add_type(TypeClass)``; ``add_shared_constructor(name, accepts,
        constructor)`` where ``constructor(value, name=, borrow=, **kwargs)`` is used for
        values ``accepts(value)`` holds (later registrations are tried first).
        """

    @hookspec(historic=True)
    def tensorjit_register_ops(self, registry: OpRegistry) -> None:
        """Register op classes under a family name.

        ``registry``: ``add(OpClass, family)``; a malformed view_map/destroy_map is
        rejected here, naming the class.
        """

    @hookspec(historic=True)
    def tensorjit_register_backends(self, registry: BackendRegistry) -> None:
        """Register backends, each one ``Backend`` object with its parts.

        ``registry``: ``add(Backend(name, device, priority, check_available, ...,
        array_kind=, prepare=, whole_graph=))``. A backend on a new device declares that
        device's ``array_kind``. ``check_available`` runs lazily, never at registration.
        """

    @hookspec(historic=True)
    def tensorjit_register_kernels(self, registry: KernelRegistry) -> None:
        """Register kernels for any backend.

        ``registry``: ``add_spec(KernelSpec(name, backend, op_classes, factory, plan=,
        sources=, step=))`` (one spec per op family; see core/registries.py), or
        ``add(backend, OpClass, factory)`` for a kernel covering every node of a class.
        """

    @hookspec(firstresult=True)
    def tensorjit_select_kernel(self, node: Any, backend: str) -> Any:
        """Fallback when a backend's kernel table has no entry for a node's op class.

        ``node``: the Apply node; ``backend``: the backend's name. Return a kernel
        factory ``factory(node) -> run``, or None. Results are cached per (op, input
        types, backend).
        """

    @hookspec(historic=True)
    def tensorjit_register_transfers(self, registry: TransferRegistry) -> None:
        """Register transfer rules: ``registry.add_copier(source, target, copier)`` for a
        direct device-to-device copy, ``registry.add_lifter(device, OpClass, lifter)``
        where ``lifter(node, device)`` returns the Op computing ``node`` on ``device``
        (or None). The core's placement pass decides where each node runs.
        """

    @hookspec(historic=True)
    def tensorjit_register_rewrites(self, db: RewriteDB) -> None:
        """Register rewriters into phases.

        ``db``: ``register(name, rewriter, phase, *tags, position=, plugin=)``; phases are
        listed in core/rewrites/db.py.
        """

    @hookspec(historic=True)
    def tensorjit_register_inplace(self, registry: InplaceRegistry) -> None:
        """Register inplace variant makers: ``registry.add(OpClass, maker, plugin=)``.

        ``maker(node, candidates)`` returns an Op destroying only inputs among
        ``candidates`` (declared in its destroy_map), or None. The core keeps the variant
        only if its destroy_map honours the request and the DestroyHandler accepts it.
        """

    @hookspec
    def tensorjit_validate_replacement(
        self, fgraph: Any, replacements: Sequence[tuple[Any, Any]], reason: str | None
    ) -> None:
        """Veto a substitution by raising InconsistencyError (after the core's own checks).

        ``fgraph``: the FunctionGraph after the substitution; ``replacements``: the
        (old, new) variable pairs; ``reason``: the rewrite's name.
        """


HOOK_NAMES = frozenset(name for name in vars(HookSpecs) if name.startswith("tensorjit_"))


def unknown_hook_names(plugin: Any) -> list[str]:
    """Names of ``plugin``'s hook implementations that match no hook specification
    (a misspelt hook would otherwise never be called)."""
    unknown = []
    for name in dir(plugin):
        if not name.startswith("tensorjit_") or name in HOOK_NAMES:
            continue
        if getattr(getattr(plugin, name, None), PROJECT + "_impl", None) is not None:
            unknown.append(name)
    return unknown


@dataclass
class Registries:
    types: TypeRegistry
    ops: OpRegistry
    backends: BackendRegistry
    kernels: KernelRegistry
    rewrites: RewriteDB
    inplace: InplaceRegistry
    transfers: TransferRegistry


class PluginSystem:
    """The pluggy manager plus the registries its registration hooks fill."""

    def __init__(self, autoload: bool = True, blocklist: Sequence[str] = ()):
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(HookSpecs)
        self.registries = Registries(
            TypeRegistry(),
            OpRegistry(),
            BackendRegistry(),
            KernelRegistry(),
            RewriteDB(),
            InplaceRegistry(),
            TransferRegistry(),
        )
        r = self.registries
        self.kernel_source = KernelSource(r.backends, r.kernels, r.transfers, self._select_kernel)
        self.entry_points: dict[str, str] = {}  # plugin name -> distribution "name version"
        self.blocked: list[str] = []
        from tensorjit.core import builtin_plugin

        self.register(builtin_plugin, "core")
        self._call_registration_hooks()
        if autoload:
            self._load_entry_points(set(blocklist))

    def _select_kernel(self, node: Any, backend: str) -> Any:
        return self.pm.hook.tensorjit_select_kernel(node=node, backend=backend)

    def _call_registration_hooks(self) -> None:
        r = self.registries
        hook = self.pm.hook
        hook.tensorjit_register_types.call_historic(kwargs={"registry": r.types})
        hook.tensorjit_register_ops.call_historic(kwargs={"registry": r.ops})
        hook.tensorjit_register_backends.call_historic(kwargs={"registry": r.backends})
        hook.tensorjit_register_kernels.call_historic(kwargs={"registry": r.kernels})
        hook.tensorjit_register_rewrites.call_historic(kwargs={"db": r.rewrites})
        hook.tensorjit_register_inplace.call_historic(kwargs={"registry": r.inplace})
        hook.tensorjit_register_transfers.call_historic(kwargs={"registry": r.transfers})

    def _load_entry_points(self, blocklist: set[str]) -> None:
        seen: set[tuple[str, str]] = set()
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if (ep.name, ep.value) in seen:
                continue  # the same distribution found twice on sys.path
            seen.add((ep.name, ep.value))
            if ep.name in blocklist:
                self.blocked.append(ep.name)
                continue
            dist = getattr(ep, "dist", None)
            dist_label = f"{dist.name} {dist.version}" if dist is not None else "unknown"
            try:
                plugin = ep.load()
            except Exception as exc:
                raise PluginLoadError(
                    f"tensorjit plugin {ep.name!r} (entry point {ep.value!r} of distribution "
                    f"{dist_label}) failed to import: {type(exc).__name__}: {exc}. "
                    f"{_how_to_block(ep.name)}"
                ) from exc
            _mark_library_code(ep.value.partition(":")[0])
            self.register(plugin, ep.name)
            logger.debug("loaded tensorjit plugin %r from %s (%s)", ep.name, ep.value, dist_label)
            self.entry_points[ep.name] = dist_label

    def register(self, plugin: Any, name: str) -> None:
        """Register a plugin object (module or instance); historic hooks run for it now."""
        if self.pm.has_plugin(name):
            if self.pm.get_plugin(name) is plugin:
                return
            raise PluginLoadError(f"a different tensorjit plugin named {name!r} is registered")
        unknown = unknown_hook_names(plugin)
        if unknown:
            hints = []
            for bad in unknown:
                close = difflib.get_close_matches(bad, sorted(HOOK_NAMES), n=1)
                hints.append(f"{bad} (did you mean {close[0]}?)" if close else bad)
            raise PluginLoadError(
                f"tensorjit plugin {name!r} implements hooks that no specification has: "
                f"{', '.join(hints)}; known hooks: {', '.join(sorted(HOOK_NAMES))}. "
                f"{_how_to_block(name)}"
            )
        try:
            self.pm.register(plugin, name)
        except Exception as exc:
            raise PluginLoadError(
                f"tensorjit plugin {name!r} failed to register: {type(exc).__name__}: {exc}. "
                f"{_how_to_block(name)}"
            ) from exc

    def plugin_names(self) -> list[str]:
        return [name for name, _ in self.pm.list_name_plugin()]


_system: PluginSystem | None = None
_lock = threading.RLock()


def get_plugin_system() -> PluginSystem:
    """The process-wide plugin system, created (and entry points loaded) on first use."""
    global _system
    if _system is None:
        with _lock:
            if _system is None:
                autoload = os.environ.get(DISABLE_AUTOLOAD_ENV, "") in ("", "0")
                _system = PluginSystem(autoload, config.plugins_blocklist)
    return _system


def registries() -> Registries:
    return get_plugin_system().registries


def _install() -> None:
    """Give the lower layers of the core the registries they read, without their
    importing this module: the devices backends declare, the shared-variable
    constructors and the direct copiers."""
    devices.use_declared_devices(lambda: registries().backends)
    use_shared_constructors(lambda: registries().types)
    transfer_op.use_copiers(lambda: registries().transfers)


_install()


def register_plugin(plugin: Any, name: str) -> None:
    """Register a plugin by hand (when autoload is disabled, or for a local plugin)."""
    get_plugin_system().register(plugin, name)
