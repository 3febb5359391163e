"""The registries plugins fill: ops, kernels, backends, types and shared constructors."""

import numpy as np
import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.devices import ArrayKind
from tensorjit.core.graph import Apply, Op, Type
from tensorjit.core.hooks import PluginLoadError, PluginSystem, hookimpl, registries
from tensorjit.core.registries import (
    Backend,
    BackendRegistry,
    KernelRegistry,
    OpRegistry,
    RegistrationError,
    TypeRegistry,
)


def make_op(name, **attrs):
    return type(name, (Op,), attrs)


class CudaArrays(ArrayKind):
    device = "cuda"


class Base(Op):
    def make_node(self, x):
        return Apply(self, [x], [x.type()])


class Derived(Base):
    pass


class MoreDerived(Derived):
    pass


def factory_a(node):
    return lambda inputs, storage: None


def factory_b(node):
    return lambda inputs, storage: None


# ---------------------------------------------------------------- ops


def test_op_registry_accepts_well_formed_ops():
    reg = OpRegistry()
    good_view = make_op("GoodView", view_map={0: [0]})
    # An output may destroy several inputs (the docs: "legal and supported").
    good_destroy = make_op("GoodDestroy", destroy_map={0: (1, 2)}, view_map={1: [0]})
    reg.add(good_view, "fam")
    reg.add(good_destroy, "fam")
    reg.add(good_view, "fam")  # idempotent
    reg.add(Base, "other")
    assert reg.families == {"fam": [good_view, good_destroy], "other": [Base]}
    assert reg.all_classes() == [good_view, good_destroy, Base]


@pytest.mark.parametrize(
    "attrs, message",
    [
        ({"view_map": [(0, [0])]}, r"BadOp.view_map must be a dict, got \[\(0, \[0\]\)\]"),
        (
            {"view_map": {0: 0}},
            r"BadOp.view_map must map output index -> list of input indices, got \{0: 0\}",
        ),
        ({"view_map": {"0": [0]}}, r"BadOp.view_map must map output index -> list"),
        ({"view_map": {-1: [0]}}, r"BadOp.view_map must map output index -> list"),
        ({"view_map": {0: [-2]}}, r"BadOp.view_map must map output index -> list"),
        ({"view_map": {0: ["a"]}}, r"BadOp.view_map must map output index -> list"),
        ({"destroy_map": None}, r"BadOp.destroy_map must be a dict, got None"),
        ({"destroy_map": {0: [1.0]}}, r"BadOp.destroy_map must map output index -> list"),
        (
            {"view_map": {0: [0, 1]}},
            r"BadOp.view_map: output 0 must be a view of exactly one input, got \[0, 1\]",
        ),
        (
            {"destroy_map": {1: []}},
            r"BadOp.destroy_map: output 1 lists no destroyed input",
        ),
    ],
)
def test_op_registry_rejects_malformed_alias_maps(attrs, message):
    reg = OpRegistry()
    with pytest.raises(RegistrationError, match=message):
        reg.add(make_op("BadOp", **attrs), "fam")
    assert reg.all_classes() == []


def test_op_registry_rejects_non_op_classes():
    reg = OpRegistry()
    message = "register_ops: <class 'int'> is not an Op subclass"
    with pytest.raises(RegistrationError, match=message):
        reg.add(int, "fam")
    with pytest.raises(RegistrationError, match="is not an Op subclass"):
        reg.add(Base(), "fam")


def test_registration_error_is_a_value_error():
    assert issubclass(RegistrationError, ValueError)


def test_malformed_op_from_a_plugin_fails_its_registration_naming_the_plugin():
    bad = make_op("PluginBadOp", view_map={0: [0, 1]})

    class BadPlugin:
        @hookimpl
        def tensorjit_register_ops(self, registry):
            registry.add(bad, "thirdparty")

    system = PluginSystem(autoload=False)
    with pytest.raises(
        PluginLoadError,
        match=r"tensorjit plugin 'bad_plugin' failed to register: RegistrationError: "
        r"PluginBadOp.view_map: output 0 must be a view of exactly one input",
    ):
        system.register(BadPlugin(), "bad_plugin")
    assert bad not in system.registries.ops.all_classes()


def test_tensor_ops_are_registered_under_their_family():
    tensor_ops = registries().ops.families["tensor"]
    assert T.Elemwise in tensor_ops
    assert T.Dot in tensor_ops


# ---------------------------------------------------------------- kernels


def test_kernel_registry_rejects_duplicates_naming_the_owner():
    reg = KernelRegistry()
    reg.add("c", Base, factory_a, name="c_base", plugin="first")
    with pytest.raises(
        RegistrationError,
        match=r"a 'c' kernel for Base is already registered \(c_base \(plugin 'first'\)\)",
    ):
        reg.add("c", Base, factory_b, plugin="second")
    assert reg.table[("c", Base)].factory is factory_a
    # Same op class on another backend is fine.
    reg.add("cuda", Base, factory_b)
    assert reg.table[("cuda", Base)].name == "cuda:Base"


def test_kernel_lookup_follows_the_op_class_mro():
    reg = KernelRegistry()
    reg.add("c", Base, factory_a, plugin="p")
    kernel = reg.lookup("c", MoreDerived())
    assert kernel is not None
    assert kernel.factory is factory_a
    assert kernel.backend == "c"
    assert kernel.plugin == "p"
    # A kernel for a closer class wins.
    reg.add("c", Derived, factory_b)
    assert reg.lookup("c", MoreDerived()).factory is factory_b
    assert reg.lookup("c", Derived()).factory is factory_b
    assert reg.lookup("c", Base()).factory is factory_a
    # Nothing for another backend or an unrelated op.
    assert reg.lookup("cuda", MoreDerived()) is None
    assert reg.lookup("c", make_op("Unrelated")()) is None


# ---------------------------------------------------------------- backends


class Probe:
    def __init__(self, reason=None, error=None):
        self.reason = reason
        self.error = error
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.reason


def test_backend_availability_is_lazy_and_cached_with_the_reason():
    reg = BackendRegistry()
    ok, missing = Probe(), Probe(reason="no compiler found")
    reg.add(Backend("fast", "cpu", 10, ok))
    reg.add(Backend("gpu", "cuda", 5, missing, array_kind=CudaArrays()))
    assert (ok.calls, missing.calls) == (0, 0)  # registering probes nothing
    assert reg.unavailable_reason("gpu") == "no compiler found"
    assert reg.unavailable_reason("gpu") == "no compiler found"
    assert missing.calls == 1
    assert ok.calls == 0
    assert reg.unavailable_reason("fast") is None
    assert reg.unavailable_reason("fast") is None
    assert ok.calls == 1


def test_a_failing_availability_probe_counts_as_unavailable():
    reg = BackendRegistry()
    broken = Probe(error=OSError("driver exploded"))
    reg.add(Backend("broken", "cpu", 1, broken))
    reason = reg.unavailable_reason("broken")
    assert reason == "availability check failed: OSError('driver exploded')"
    assert reg.unavailable_reason("broken") == reason
    assert broken.calls == 1
    assert reg.for_device("cpu") == []


def test_for_device_lists_available_backends_by_priority():
    reg = BackendRegistry()
    low, high = Backend("low", "cpu", 1, Probe()), Backend("high", "cpu", 9, Probe())
    down = Backend("down", "cpu", 100, Probe(reason="nope"))
    gpu = Backend("gpu", "cuda", 50, Probe(), array_kind=CudaArrays())
    for backend in (low, down, gpu, high):
        reg.add(backend)
    assert reg.for_device("cpu") == [high, low]
    assert reg.for_device("cuda") == [gpu]
    assert reg.for_device("opencl") == []


def test_backend_registry_rejects_a_conflicting_duplicate():
    reg = BackendRegistry()
    probe = Probe()
    first = Backend("c", "cpu", 1, probe, plugin="first")
    reg.add(first)
    reg.add(Backend("c", "cpu", 1, probe, plugin="first"))  # the very same backend again
    with pytest.raises(
        RegistrationError,
        match=r"backend 'c' \(plugin 'second'\) is already registered \(plugin 'first'\)",
    ):
        reg.add(Backend("c", "cpu", 2, probe, plugin="second"))
    assert reg.backends["c"] == first
    assert reg.backends["c"].priority == 1


def test_python_backend_is_always_available():
    backends = registries().backends
    assert backends.unavailable_reason("python") is None
    assert "python" in [b.name for b in backends.for_device("cpu")]


# ---------------------------------------------------------------- types and shared values


class Box(Type):
    def filter(self, value, strict=False, allow_downcast=None):
        return value

    def __eq__(self, other):
        return type(other) is Box

    def __hash__(self):
        return hash(Box)


def test_type_registry_add_type():
    reg = TypeRegistry()
    reg.add_type(Box)
    reg.add_type(Box)
    assert reg.type_classes == [Box]
    with pytest.raises(RegistrationError, match="register_types: .* is not a Type subclass"):
        reg.add_type(Box())
    with pytest.raises(RegistrationError, match="is not a Type subclass"):
        reg.add_type(dict)


def test_shared_constructor_for_picks_the_latest_matching_constructor():
    reg = TypeRegistry()

    def generic(value, name=None, borrow=False):
        return ("generic", value)

    def special(value, name=None, borrow=False):
        return ("special", value)

    reg.add_shared_constructor("numbers", lambda v: isinstance(v, (int, float)), generic)
    reg.add_shared_constructor("ints", lambda v: isinstance(v, int), special)
    assert reg.shared_constructor_for(3) is special
    assert reg.shared_constructor_for(3.5) is generic


def test_shared_constructor_for_an_unknown_value_is_a_clear_type_error():
    reg = TypeRegistry()
    with pytest.raises(
        TypeError,
        match=r"no registered constructor accepts a value of type object; "
        r"registered constructors: \['none: no plugin loaded'\]",
    ):
        reg.shared_constructor_for(object())
    reg.add_shared_constructor("numbers", lambda v: isinstance(v, int), lambda v, **kw: v)
    with pytest.raises(
        TypeError,
        match=r"value of type str; registered constructors: \['numbers'\]",
    ):
        reg.shared_constructor_for("text")


def test_shared_of_an_unsupported_value():
    with pytest.raises(
        TypeError,
        match=r"shared\(\): no registered constructor accepts a value of type object; "
        r"registered constructors: \[.*'ndarray'.*\]",
    ):
        tensorjit.shared(object())
    with pytest.raises(TypeError, match="value of type str"):
        tensorjit.shared("not an array")
    with pytest.raises(TypeError, match="value of type ndarray"):
        tensorjit.shared(np.array(["a", "b"]))


def test_shared_of_a_symbolic_variable_is_rejected():
    with pytest.raises(TypeError, match=r"shared\(\) takes a value .*not a symbolic Variable"):
        tensorjit.shared(T.vector("v"))


def test_shared_of_an_array_uses_the_tensor_constructor():
    value = np.arange(3.0)
    s = tensorjit.shared(value, name="s")
    assert isinstance(s, T.TensorSharedVariable)
    assert s.name == "s"
    np.testing.assert_array_equal(s.get_value(), value)
    assert registries().types.shared_constructor_for(value) is not None


# ---------------------------------------------------------------- devices, specs, transfers


def test_a_backend_on_a_new_device_must_declare_its_array_kind():
    reg = BackendRegistry()
    with pytest.raises(RegistrationError, match="device 'cuda' but declares no array_kind"):
        reg.add(Backend("gpu", "cuda", 5, lambda: None, plugin="p"))
    kind = CudaArrays()
    reg.add(Backend("gpu", "cuda", 5, lambda: None, array_kind=kind))
    # A second backend of the device shares its kind (or names none).
    reg.add(Backend("gpu2", "cuda", 1, lambda: None))
    with pytest.raises(RegistrationError, match="second array kind for device 'cuda'"):
        reg.add(Backend("gpu3", "cuda", 1, lambda: None, array_kind=CudaArrays()))
    with pytest.raises(RegistrationError, match="its array kind is for device 'cuda'"):
        reg.add(Backend("x", "xla", 1, lambda: None, array_kind=CudaArrays()))
    assert reg.array_kind("cuda") is kind
    assert "cuda" in reg.devices()
    with pytest.raises(ValueError, match="no loaded backend declares device 'tpu'"):
        reg.array_kind("tpu")


def test_a_kernel_spec_plans_once_and_may_decline():
    from tensorjit.core.registries import KernelSpec

    planned = []

    def plan(node):
        planned.append(node)
        return None if node.op.declines else ("plan", node.op)

    def factory(node, plan):
        return lambda inputs, storage: plan

    class Planned(Base):
        __props__ = ("declines",)

        def __init__(self, declines):
            self.declines = declines

    reg = KernelRegistry()
    reg.add_spec(KernelSpec("c:planned", "c", (Planned,), factory, plan=plan))
    node = Apply(Planned(False), [], [])
    kernel = reg.kernel_for("c", node)
    assert kernel.name == "c:planned" and kernel.plan == ("plan", node.op)
    assert kernel.factory(node)(None, None) == ("plan", node.op)
    assert len(planned) == 1  # the factory reuses the plan
    assert reg.kernel_for("c", Apply(Planned(True), [], [])) is None
    assert reg.specs_of("c") == [reg.table[("c", Planned)]]
    with pytest.raises(RegistrationError, match="already registered"):
        reg.add_spec(KernelSpec("c:other", "c", (Planned,), factory))


def test_transfer_registry_rejects_duplicates_and_follows_the_mro():
    from tensorjit.core.registries import TransferRegistry

    reg = TransferRegistry()
    reg.add_copier("cpu", "cuda", lambda v: v)
    with pytest.raises(RegistrationError, match="copier from 'cpu' to 'cuda'"):
        reg.add_copier("cpu", "cuda", lambda v: v)
    lift = lambda node, device: None  # noqa: E731
    reg.add_lifter("cuda", Base, lift, plugin="p")
    assert reg.lifter("cuda", MoreDerived()) is lift
    assert reg.lifter("opencl", MoreDerived()) is None
    with pytest.raises(RegistrationError, match=r"lifter of Base to 'cuda' .*plugin 'p'"):
        reg.add_lifter("cuda", Base, lift)


def test_a_misspelt_hook_is_refused_naming_the_closest_hook():
    class Misspelt:
        @hookimpl
        def tensorjit_register_kernel(self, registry):  # missing "s"
            pass

    system = PluginSystem(autoload=False)
    with pytest.raises(
        PluginLoadError,
        match=r"tensorjit_register_kernel \(did you mean "
        r"tensorjit_register_kernels\?\)",
    ):
        system.register(Misspelt(), "misspelt")
    assert "misspelt" not in system.plugin_names()
