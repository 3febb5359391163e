"""The registries that plugins fill through the registration hooks.

Registries only grow (an entry can not be removed or silently overwritten); the core
reads them when it compiles. Nothing here probes compilers or devices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tensorjit.core.graph.basic import Apply
from tensorjit.core.graph.op import Op
from tensorjit.core.graph.type import Type

# A kernel factory turns a node into a callable ``run(inputs, output_storage)`` that
# computes the node's outputs into ``output_storage[i][0]`` (the Op.perform contract).
KernelFactory = Callable[[Apply], Callable[[list, list], None]]


class RegistrationError(ValueError):
    """A plugin registered something malformed or conflicting."""


def _owner_label(plugin: str | None) -> str:
    return f" (plugin {plugin!r})" if plugin else ""


def check_alias_map(op_class: type, attr: str) -> None:
    """Reject a view_map/destroy_map that is not ``{int: [int, ...]}``."""
    mapping = getattr(op_class, attr, {})
    if not isinstance(mapping, dict):
        raise RegistrationError(f"{op_class.__name__}.{attr} must be a dict, got {mapping!r}")
    for out_idx, in_idxs in mapping.items():
        ok = isinstance(out_idx, int) and out_idx >= 0 and isinstance(in_idxs, (list, tuple))
        ok = ok and all(isinstance(i, int) and i >= 0 for i in in_idxs)
        if not ok:
            raise RegistrationError(
                f"{op_class.__name__}.{attr} must map output index -> list of input indices, "
                f"got {mapping!r}"
            )
        # A view is of exactly one input (the docs: several is "not supported yet"); an
        # output may destroy several inputs, but must destroy at least one if listed.
        if attr == "view_map" and len(in_idxs) != 1:
            raise RegistrationError(
                f"{op_class.__name__}.view_map: output {out_idx} must be a view of exactly "
                f"one input, got {list(in_idxs)}"
            )
        if attr == "destroy_map" and not in_idxs:
            raise RegistrationError(
                f"{op_class.__name__}.destroy_map: output {out_idx} lists no destroyed input"
            )


@dataclass
class OpRegistry:
    """Op classes by family ("tensor", "sparse", a third party's name)."""

    families: dict[str, list[type]] = field(default_factory=dict)

    def add(self, op_class: type, family: str) -> None:
        if not (isinstance(op_class, type) and issubclass(op_class, Op)):
            raise RegistrationError(f"register_ops: {op_class!r} is not an Op subclass")
        check_alias_map(op_class, "view_map")
        check_alias_map(op_class, "destroy_map")
        classes = self.families.setdefault(family, [])
        if op_class not in classes:
            classes.append(op_class)

    def all_classes(self) -> list[type]:
        return [c for classes in self.families.values() for c in classes]


@dataclass
class TypeRegistry:
    """Type classes, and constructors that turn user values into shared variables."""

    type_classes: list[type] = field(default_factory=list)
    shared_constructors: list[tuple[str, Callable[[Any], bool], Callable[..., Any]]] = field(
        default_factory=list
    )

    def add_type(self, type_class: type) -> None:
        if not (isinstance(type_class, type) and issubclass(type_class, Type)):
            raise RegistrationError(f"register_types: {type_class!r} is not a Type subclass")
        if type_class not in self.type_classes:
            self.type_classes.append(type_class)

    def add_shared_constructor(
        self, name: str, accepts: Callable[[Any], bool], constructor: Callable[..., Any]
    ) -> None:
        """``constructor(value, name=, borrow=, **kwargs)`` is used when ``accepts(value)``.

        Later registrations are tried first, so a plugin can specialise a value kind.
        """
        self.shared_constructors.insert(0, (name, accepts, constructor))

    def shared_constructor_for(self, value: Any) -> Callable[..., Any]:
        for _name, accepts, constructor in self.shared_constructors:
            if accepts(value):
                return constructor
        known = [n for n, _, _ in self.shared_constructors] or ["none: no plugin loaded"]
        raise TypeError(
            f"shared(): no registered constructor accepts a value of type "
            f"{type(value).__name__}; registered constructors: {known}"
        )


@dataclass(frozen=True)
class Backend:
    """A place kernels run. ``check_available()`` returns None, or why it is unavailable.
    ``prepare(nodes)``, if given, is called once per compiled function with every node
    whose kernel this backend supplies, before any kernel factory runs (e.g. to build
    all their code at once, in parallel). ``whole_graph(plan)``, if given, may return
    one compiled program running a whole function (see core/compile/program.py), or
    None when it does not cover every node."""

    name: str
    device: str
    priority: int
    check_available: Callable[[], str | None]
    description: str = ""
    requires_tags: tuple[str, ...] = ()
    excludes_tags: tuple[str, ...] = ()
    plugin: str | None = None
    prepare: Callable[[list[Any]], None] | None = None
    whole_graph: Callable[[Any], Callable | None] | None = None


@dataclass
class BackendRegistry:
    backends: dict[str, Backend] = field(default_factory=dict)
    _availability: dict[str, str | None] = field(default_factory=dict)

    def add(self, backend: Backend) -> None:
        old = self.backends.get(backend.name)
        if old is not None and old != backend:
            raise RegistrationError(
                f"backend {backend.name!r}{_owner_label(backend.plugin)} is already registered"
                f"{_owner_label(old.plugin)}"
            )
        self.backends[backend.name] = backend

    def unavailable_reason(self, name: str) -> str | None:
        """None if the backend can run here; checked lazily once, then cached."""
        if name not in self._availability:
            try:
                self._availability[name] = self.backends[name].check_available()
            except Exception as exc:  # an availability probe must not break compilation
                self._availability[name] = f"availability check failed: {exc!r}"
        return self._availability[name]

    def for_device(self, device: str) -> list[Backend]:
        """Available backends of a device, highest priority first."""
        found = [b for b in self.backends.values() if b.device == device]
        found = [b for b in found if self.unavailable_reason(b.name) is None]
        return sorted(found, key=lambda b: -b.priority)


@dataclass(frozen=True)
class Kernel:
    name: str
    backend: str
    factory: KernelFactory
    plugin: str | None = None


@dataclass
class KernelRegistry:
    """Kernels per (backend, op class). Any plugin may add kernels for any backend."""

    table: dict[tuple[str, type], Kernel] = field(default_factory=dict)

    def add(
        self,
        backend: str,
        op_class: type,
        factory: KernelFactory,
        name: str | None = None,
        plugin: str | None = None,
    ) -> None:
        key = (backend, op_class)
        if key in self.table:
            raise RegistrationError(
                f"a {backend!r} kernel for {op_class.__name__} is already registered "
                f"({self.table[key].name}{_owner_label(self.table[key].plugin)})"
            )
        label = name or f"{backend}:{op_class.__name__}"
        self.table[key] = Kernel(label, backend, factory, plugin)

    def lookup(self, backend: str, op: Op) -> Kernel | None:
        for cls in type(op).__mro__:
            kernel = self.table.get((backend, cls))
            if kernel is not None:
                return kernel
        return None


# An inplace variant maker gets a node and the input indices the core found destroyable,
# and returns an Op computing the same outputs while destroying some of those inputs
# (declared in its destroy_map), or None.
InplaceMaker = Callable[[Apply, list[int]], Op | None]


@dataclass(frozen=True)
class InplaceVariant:
    maker: InplaceMaker
    plugin: str | None


@dataclass
class InplaceRegistry:
    """Inplace variant makers per op class."""

    table: dict[type, InplaceVariant] = field(default_factory=dict)

    def add(self, op_class: type, maker: InplaceMaker, plugin: str | None = None) -> None:
        if op_class in self.table:
            raise RegistrationError(
                f"an inplace variant maker for {op_class.__name__} is already registered"
                f"{_owner_label(self.table[op_class].plugin)}"
            )
        self.table[op_class] = InplaceVariant(maker, plugin)

    def lookup(self, op: Op) -> InplaceVariant | None:
        for cls in type(op).__mro__:
            variant = self.table.get(cls)
            if variant is not None:
                return variant
        return None
