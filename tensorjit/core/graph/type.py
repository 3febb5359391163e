"""Type: a description of the values a Variable may hold."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tensorjit.core.devices import HOST

if TYPE_CHECKING:
    from tensorjit.core.graph.basic import Constant, Variable


# Python's own scalar types: a value of one is no array, but Types' filters turn it into
# one (whole-graph programs take exact arrays, so calls filter these first).
PYTHON_SCALARS = (bool, int, float, complex)


class Type:
    """Base class of all types. Subclasses must be hashable and comparable by value.

    A Type validates values (``filter``), creates Variables and Constants, and tells the
    gradient machinery how to build zeros and sums of gradients for its family, so the
    core never needs to know about tensors.
    """

    variable_class: type = None  # type: ignore[assignment]  # set below to Variable
    constant_class: type = None  # type: ignore[assignment]
    # Attributes that define the type: equal props mean equal types (as for Ops).
    __props__: tuple[str, ...] = ()
    #: where values of this type live (see core/devices.py); the host is "cpu"
    device: str = HOST

    def _props(self) -> tuple:
        return tuple(getattr(self, p) for p in self.__props__)

    def __eq__(self, other: object) -> bool:
        if not self.__props__:
            return self is other
        return type(self) is type(other) and self._props() == other._props()

    def __hash__(self) -> int:
        if not self.__props__:
            return id(self)
        return hash((type(self), self._props()))

    def filter(self, value: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        """Return ``value`` converted to this type, or raise TypeError/ValueError."""
        raise NotImplementedError(f"{type(self).__name__} does not implement filter")

    def is_valid_value(self, value: Any) -> bool:
        try:
            self.filter(value, strict=True)
            return True
        except (TypeError, ValueError):
            return False

    def make_variable(self, name: str | None = None) -> Variable:
        return self.variable_class(self, None, None, name)

    def make_constant(self, value: Any, name: str | None = None) -> Constant:
        return self.constant_class(self, self.filter(value), name)

    def filter_variable(self, other: Any) -> Variable:
        """``other`` (a Variable or a plain value) as a Variable of this type, or TypeError."""
        from tensorjit.core.graph.basic import Variable

        if isinstance(other, Variable):
            converted = self.convert_variable(other)
            if converted is None:
                raise TypeError(f"expected a variable of type {self}, got {other.describe()}")
            return converted
        return self.make_constant(other)

    def __call__(self, name: str | None = None) -> Variable:
        return self.make_variable(name)

    def values_eq(self, a: Any, b: Any) -> bool:
        return a == b

    def values_eq_approx(self, a: Any, b: Any) -> bool:
        return self.values_eq(a, b)

    def may_share_memory(self, a: Any, b: Any) -> bool:
        return a is b

    def shares_memory(self, a: Any, b: Any) -> bool:
        """Exact (possibly slower) form of may_share_memory, used by DebugMode."""
        return self.may_share_memory(a, b)

    def copy_value(self, value: Any) -> Any:
        """A copy that does not alias ``value`` (used for fresh outputs and shared values)."""
        import copy

        return copy.deepcopy(value)

    def on_device(self, device: str) -> Type:
        """This type for values living on ``device`` (the placement pass re-types the
        nodes it moves with it)."""
        if device == self.device:
            return self
        raise TypeError(f"values of type {self} can not live on device {device!r}")

    def host_value(self, value: Any) -> Any:
        """``value`` as a host object: itself for host types, a new copy for a device's."""
        return value

    def is_super(self, other: Type) -> bool:
        """True if every value valid for ``other`` is valid for ``self``."""
        return self == other

    def filter_update(self, value: Any) -> Variable:
        """``value`` as the new value of a shared variable of this type (an update), or
        TypeError. By default what ``filter_variable`` accepts; a type may be stricter
        (a tensor's update keeps its broadcast pattern, as in Theano)."""
        return self.filter_variable(value)

    def convert_variable(self, var: Variable) -> Variable | None:
        """Return ``var`` as a variable of this type, or None if impossible."""
        if var.type == self:
            return var
        return None

    # Gradient support: the family of a type knows how to build zeros and sums.
    def grad_zeros_like(self, var: Variable) -> Variable:
        raise TypeError(f"gradients are not supported for variables of type {self}")

    def grad_sum(self, terms: list[Variable]) -> Variable:
        raise TypeError(f"gradients are not supported for variables of type {self}")

    def grad_one_like(self, cost: Variable) -> Variable:
        """The seed gradient d cost / d cost."""
        raise TypeError(f"can not differentiate a cost of type {self}")

    def grad_as_type_of(self, var: Variable, g: Variable) -> Variable:
        """Check/convert gradient ``g`` so it can stand for d cost / d ``var``."""
        return g

    def short_str(self) -> str:
        return str(self)
