"""The registries that plugins fill through the registration hooks.

Registries only grow (an entry can not be removed or silently overwritten); the core
reads them when it compiles. Nothing here probes compilers or devices.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from tensorjit.core.devices import HOST, HOST_ARRAYS, ArrayKind, UnknownDeviceError
from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.op import Op
from tensorjit.core.graph.type import Type

# A kernel factory turns a node into a callable ``run(inputs, output_storage)`` that
# computes the node's outputs into ``output_storage[i][0]`` (the Op.perform contract).
KernelFactory = Callable[[Apply], Callable[[list, list], None]]


# A whole-graph program: ``program(values) -> outputs | None`` (core/compile/program.py
# says what the values are and when it declines).
Program = Callable[[Sequence[Any]], "list[Any] | None"]


class SourceCompiler(Protocol):
    """What tools ask of a backend's compiler part (``Backend.compiler``); a compiler
    may also offer ``clear_cache()`` and ``prune_cache(max_bytes)`` (``python -m
    tensorjit cache``), and whatever its plugins' kernels need."""

    name: str

    def unavailable_reason(self) -> str | None: ...


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

    def find_shared_constructor(self, value: Any) -> Callable[..., Any] | None:
        """The constructor for ``value``, or None when no registered one accepts it."""
        for _name, accepts, constructor in self.shared_constructors:
            if accepts(value):
                return constructor
        return None

    def shared_constructor_for(self, value: Any) -> Callable[..., Any]:
        constructor = self.find_shared_constructor(value)
        if constructor is not None:
            return constructor
        known = [n for n, _, _ in self.shared_constructors] or ["none: no plugin loaded"]
        raise TypeError(
            f"shared(): no registered constructor accepts a value of type "
            f"{type(value).__name__}; registered constructors: {known}"
        )


@dataclass(frozen=True)
class Backend:
    """A place kernels run, declared as one object with named parts.

    - ``device``: where its values live; ``array_kind`` (required for any device but the
      host's) says how to tell, allocate, transfer and alias-check them (core/devices.py).
    - ``check_available()``: None, or why the backend can not run here (called lazily).
    - ``renderer`` / ``compiler``: the backend's source renderer and compiler objects,
      for tools and for plugins that add kernels to it (the core does not call them).
    - Its kernel table is the ``KernelSpec`` entries registered for its name (by itself
      or any plugin, through ``tensorjit_register_kernels``).
    - ``prepare(kernels)``: called once per compiled function with the ``(node, kernel)``
      pairs this backend runs, before any kernel is instantiated (e.g. to build all their
      code at once, in parallel, from each spec's ``sources``).
    - ``whole_graph(plan)``: may return one compiled program running a whole function
      (see core/compile/program.py), or None when it does not cover every node.
    - ``hardware()``: lines describing what it can run on here (platforms, devices, the
      one chosen), for ``python -m tensorjit info``; may raise when unavailable.
    """

    name: str
    device: str
    priority: int
    check_available: Callable[[], str | None]
    description: str = ""
    requires_tags: tuple[str, ...] = ()
    excludes_tags: tuple[str, ...] = ()
    plugin: str | None = None
    prepare: Callable[[list[tuple[Apply, Kernel]]], None] | None = None
    whole_graph: Callable[[GraphPlan], Program | None] | None = None
    array_kind: ArrayKind | None = None
    renderer: object | None = None  # a plugins.cstyle Dialect for the C-like backends
    compiler: SourceCompiler | None = None
    hardware: Callable[[], list[str]] | None = None


@dataclass
class BackendRegistry:
    backends: dict[str, Backend] = field(default_factory=dict)
    _availability: dict[str, str | None] = field(default_factory=dict)
    _kinds: dict[str, ArrayKind] = field(default_factory=dict)

    def add(self, backend: Backend) -> None:
        old = self.backends.get(backend.name)
        if old is not None and old != backend:
            raise RegistrationError(
                f"backend {backend.name!r}{_owner_label(backend.plugin)} is already registered"
                f"{_owner_label(old.plugin)}"
            )
        kind = backend.array_kind
        if backend.device == HOST:
            if kind is not None and kind is not HOST_ARRAYS:
                raise RegistrationError(
                    f"backend {backend.name!r}{_owner_label(backend.plugin)}: the host "
                    "device's arrays are NumPy's; give array_kind only for another device"
                )
        elif kind is None and backend.device not in self._kinds:
            raise RegistrationError(
                f"backend {backend.name!r}{_owner_label(backend.plugin)} runs on device "
                f"{backend.device!r} but declares no array_kind for its values"
            )
        elif kind is not None:
            known = self._kinds.setdefault(backend.device, kind)
            if known is not kind:
                raise RegistrationError(
                    f"backend {backend.name!r}{_owner_label(backend.plugin)} declares a second "
                    f"array kind for device {backend.device!r}"
                )
            if kind.device != backend.device:
                raise RegistrationError(
                    f"backend {backend.name!r}: its array kind is for device {kind.device!r}, "
                    f"not {backend.device!r}"
                )
        self.backends[backend.name] = backend

    def array_kind(self, device: str) -> ArrayKind:
        if device == HOST:
            return HOST_ARRAYS
        try:
            return self._kinds[device]
        except KeyError:
            raise UnknownDeviceError(
                f"no loaded backend declares device {device!r}; known devices: "
                f"{sorted({HOST, *self._kinds})}"
            ) from None

    def array_kinds(self) -> dict[str, ArrayKind]:
        """The array kind of every non-host device, by device name."""
        return dict(self._kinds)

    def devices(self) -> list[str]:
        return [HOST, *self._kinds]

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
    """The kernel chosen for one node: ``factory(node)`` returns its ``run``. ``spec`` and
    ``plan`` are the kernel spec it came from and what the spec planned for this node
    (the same plan serves the factory, ``sources`` and the whole-graph ``step``)."""

    name: str
    backend: str
    factory: KernelFactory
    plugin: str | None = None
    spec: KernelSpec | None = None
    plan: Any = None

    def cannot_fail(self, node: Apply) -> bool:
        """Whether this kernel can not raise on ``node``, whatever its input values,
        allocation failures aside (its spec's ``cannot_fail``; False when the spec does
        not say)."""
        judge = None if self.spec is None else self.spec.cannot_fail
        return judge is not None and bool(judge(node, self.plan))


@dataclass(frozen=True)
class GraphPlan:
    """What a backend needs to compile a function's graph as one program
    (``Backend.whole_graph``)."""

    nodes: list[Apply]  # in the order they must run
    kernels: list[Kernel]  # the kernel chosen for each node
    inputs: list[Variable]  # the explicit inputs, in call order
    shared: list[tuple[Variable, list]]  # shared inputs and the cells holding their values
    outputs: list[Variable]  # user outputs, then update expressions


#: A kernel spec's plan: what its ``plan`` decides for a node, handed to the rest.
P = TypeVar("P")


class StepBuilder(Protocol):
    """What a backend's whole-graph program builder offers every plugin's
    ``KernelSpec.step`` (a backend's own specs may use more of its builder)."""

    def native(self, node: Apply, step: Any, /) -> object:
        """The node as the plugin's own compiled function (the C backend's contract:
        c_backend/whole_graph/native.h; ``step`` a ``NativeStep``)."""
        ...

    def decline(self, node: Apply, /) -> object:
        """The node as a step calling its kernel (no program step of its own)."""
        ...


@dataclass(frozen=True)
class KernelSpec(Generic[P]):
    """One op family's kernels on one backend: every decision about them in one place.

    - ``plan(node)``: what the kernel will do for ``node`` (any object), or None when it
      does not cover the node (then the next backend is asked). It runs when the
      kernel is chosen (and when placement asks whether a device covers a node); the
      chosen ``Kernel`` carries the plan, so the factory, ``sources`` and ``step`` never
      plan again. Without ``plan`` every node of ``op_classes`` is covered.
    - ``factory``: ``factory(node, plan)`` (``factory(node)`` without ``plan``) returns
      ``run(inputs, output_storage)``, the Op.perform contract.
    - ``sources(node, plan)``: what a backend's ``prepare`` builds ahead (optional).
    - ``step(builder, node, plan)``: the node's step in a whole-graph program (optional;
      the builder is the backend's own, and may raise to decline). The C backend's
      builder offers any plugin ``builder.native(node, NativeStep(...))`` (its own C
      function run by the program: c_backend/whole_graph/native.h) and
      ``builder.decline(node)``.
    - ``reads_host_inputs``, ``launches_only``: see the fields.
    - ``cannot_fail(node, plan)``: True when the kernel (and the node's program step)
      can not raise on ``node`` whatever the input values, e.g. an elementwise kernel on
      operands of static shapes; running out of memory aside (optional; all-or-nothing
      calls then neither check nor undo anything for it after a call's first in-place
      write: core/compile/commit.py, so a MemoryError there leaves that write).
    """

    name: str
    backend: str
    op_classes: tuple[type, ...]
    #: ``factory(node, plan)``, or ``factory(node)`` for a spec without ``plan``
    factory: Callable[..., Callable[[list, list], None]]
    plan: Callable[[Apply], P | None] | None = None
    sources: Callable[[Apply, P], list] | None = None
    step: Callable[[StepBuilder, Apply, P], object] | None = None
    plugin: str | None = None
    cannot_fail: Callable[[Apply, P], bool] | None = None
    #: True when the kernels take the inputs their op reads on the host
    #: (``Op.host_inputs``) as host values even on a device: placement then leaves them
    #: there. False (the default): every input lives on the kernel's device.
    reads_host_inputs: bool = False
    #: True when the kernel's only device work is allocating through its runtime's
    #: ``empty`` and launching through its ``launch`` methods, the same launches for the
    #: same input shapes, strides and dtypes (no reads or writes from the host, no
    #: library calls), besides arrays it keeps between calls and checks it defers, both
    #: reported to the recording (device_kernels/recording.py): a device backend's launch
    #: plan may then record one run and replay it (device_kernels/launch_plan.py).
    launches_only: bool = False

    def bind(self, node: Apply) -> Kernel | None:
        """This spec's kernel for ``node``, or None if it does not cover it."""
        if self.plan is None:
            return Kernel(self.name, self.backend, self.factory, self.plugin, self, None)
        plan = self.plan(node)
        if plan is None:
            return None
        make = self.factory
        return Kernel(
            self.name,
            self.backend,
            lambda node: make(node, plan),
            self.plugin,
            self,
            plan,
        )


@dataclass
class KernelRegistry:
    """Kernel specs per (backend, op class). Any plugin may add kernels for any backend."""

    table: dict[tuple[str, type], KernelSpec] = field(default_factory=dict)

    def add(
        self,
        backend: str,
        op_class: type,
        factory: KernelFactory,
        name: str | None = None,
        plugin: str | None = None,
    ) -> None:
        """A kernel covering every node of ``op_class``: ``factory(node)`` gives its run."""
        label = name or f"{backend}:{op_class.__name__}"
        self.add_spec(KernelSpec(label, backend, (op_class,), factory, plugin=plugin))

    def add_spec(self, spec: KernelSpec) -> None:
        for op_class in spec.op_classes:
            key = (spec.backend, op_class)
            if key in self.table:
                raise RegistrationError(
                    f"a {spec.backend!r} kernel for {op_class.__name__} is already registered "
                    f"({self.table[key].name}{_owner_label(self.table[key].plugin)})"
                )
        for op_class in spec.op_classes:
            self.table[(spec.backend, op_class)] = spec

    def lookup(self, backend: str, op: Op) -> KernelSpec | None:
        """The spec registered for the closest class of ``op`` on ``backend``."""
        return self.lookup_class(backend, type(op))

    def lookup_class(self, backend: str, op_class: type) -> KernelSpec | None:
        """The spec registered for ``op_class`` or its closest base on ``backend``."""
        for cls in op_class.__mro__:
            spec = self.table.get((backend, cls))
            if spec is not None:
                return spec
        return None

    def kernel_for(self, backend: str, node: Apply) -> Kernel | None:
        """The kernel ``backend`` runs ``node`` with, planned now, or None."""
        spec = self.lookup(backend, node.op)
        return None if spec is None else spec.bind(node)

    def specs_of(self, backend: str) -> list[KernelSpec]:
        """A backend's kernel table: each spec once."""
        seen: dict[int, KernelSpec] = {}
        for (name, _), spec in self.table.items():
            if name == backend:
                seen.setdefault(id(spec), spec)
        return list(seen.values())


# An inplace variant maker gets a node and the input indices the core found destroyable,
# and returns an Op computing the same outputs while destroying some of those inputs
# (declared in its destroy_map), or None.
InplaceMaker = Callable[[Apply, list[int]], Op | None]


@dataclass(frozen=True)
class InplaceVariant:
    maker: InplaceMaker
    plugin: str | None
    # The maker may be asked again for a node already in place, to destroy one more
    # input (an op with several outputs, each of which may take an input's buffer).
    repeatable: bool = False


@dataclass
class InplaceRegistry:
    """Inplace variant makers per op class."""

    table: dict[type, InplaceVariant] = field(default_factory=dict)

    def add(
        self,
        op_class: type,
        maker: InplaceMaker,
        plugin: str | None = None,
        repeatable: bool = False,
    ) -> None:
        if op_class in self.table:
            raise RegistrationError(
                f"an inplace variant maker for {op_class.__name__} is already registered"
                f"{_owner_label(self.table[op_class].plugin)}"
            )
        self.table[op_class] = InplaceVariant(maker, plugin, repeatable)

    def lookup(self, op: Op) -> InplaceVariant | None:
        for cls in type(op).__mro__:
            variant = self.table.get(cls)
            if variant is not None:
                return variant
        return None


# A copier moves a value of one device to another without passing through the host.
Copier = Callable[[Any], Any]
# A lifter gets a node (on the host) and a device, and returns the Op that computes the
# same outputs there (the same op, or a device-specific one), or None to keep it off it.
Lifter = Callable[[Apply, str], Op | None]


@dataclass
class TransferRegistry:
    """Transfer rules that backends supply (``tensorjit_register_transfers``).

    The core's placement pass (core/rewrites/transfer.py) owns the decisions; these rules
    only say how: ``copier(source, target)`` for direct device-to-device copies (without
    one, a copy goes through the host), and ``lifter(device, op)`` for ops that need a
    different Op on a device (without one, a node keeps its op when a backend of the
    device has a kernel for it).
    """

    copiers: dict[tuple[str, str], Copier] = field(default_factory=dict)
    lifters: dict[tuple[str, type], tuple[Lifter, str | None]] = field(default_factory=dict)

    def add_copier(self, source: str, target: str, copier: Copier) -> None:
        if (source, target) in self.copiers:
            raise RegistrationError(f"a copier from {source!r} to {target!r} is registered")
        self.copiers[(source, target)] = copier

    def add_lifter(
        self, device: str, op_class: type, lifter: Lifter, plugin: str | None = None
    ) -> None:
        key = (device, op_class)
        if key in self.lifters:
            raise RegistrationError(
                f"a lifter of {op_class.__name__} to {device!r} is already registered"
                f"{_owner_label(self.lifters[key][1])}"
            )
        self.lifters[key] = (lifter, plugin)

    def copier(self, source: str, target: str) -> Copier | None:
        return self.copiers.get((source, target))

    def lifter(self, device: str, op: Op) -> Lifter | None:
        for cls in type(op).__mro__:
            entry = self.lifters.get((device, cls))
            if entry is not None:
                return entry[0]
        return None
