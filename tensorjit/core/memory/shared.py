"""Shared variables: symbolic variables with a persistent value in managed memory.

The contract (docs "Understanding Memory Aliasing"): ``shared(v)`` copies ``v``;
``borrow=True`` may alias it. ``get_value()`` returns a copy; ``borrow=True`` may return
the internal buffer. ``set_value(v)`` copies; ``borrow=True`` may adopt ``v``. No two
shared variables alias each other. Every compiled function reads and (through updates)
writes the same storage cell, so values persist across functions.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Protocol

from tensorjit.core.devices import HOST, HOST_ARRAYS, array_kind, writeable
from tensorjit.core.graph.basic import Variable
from tensorjit.core.graph.type import Type

# Every live shared variable, to keep borrowed values from aliasing one another.
_live_shared: weakref.WeakSet = weakref.WeakSet()


class SharedVariable(Variable):
    """A Variable whose value lives in ``self.storage[0]``, an implicit function input.

    ``default_update``: an expression every function using this variable stores back into
    it when no explicit update is given (random-number states use this).
    """

    default_update: Variable | None = None

    def __init__(
        self,
        type: Type,
        value: Any,
        name: str | None = None,
        borrow: bool = False,
        strict: bool = False,
        allow_downcast: bool | None = None,
    ):
        super().__init__(type, None, None, name)
        self.storage: list[Any] = [None]
        # Kept for set_value, as Theano's containers keep them.
        self.strict = strict
        self.allow_downcast = allow_downcast
        self._set_filtered(value, borrow, strict, allow_downcast)

    def _set_filtered(self, value: Any, borrow: bool, strict: bool, allow_downcast) -> None:
        if self._write_into_device_buffer(value):
            return
        try:
            filtered = self.type.filter(value, strict=strict, allow_downcast=allow_downcast)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"shared variable {self.describe()}: {exc}") from None
        if not borrow and self.type.may_share_memory(filtered, value):
            filtered = self.type.copy_value(filtered)
        elif borrow and (not writeable(filtered) or self._aliases_another_shared(filtered)):
            # Shared variables never alias each other, and their storage must be writable
            # (updates may run in place).
            filtered = self.type.copy_value(filtered)
        self.storage[0] = filtered
        _live_shared.add(self)

    def _aliases_another_shared(self, value: Any) -> bool:
        for other in list(_live_shared):
            if other is not self and other.storage[0] is not None:
                if self.type.may_share_memory(value, other.storage[0]):
                    return True
        return False

    def _write_into_device_buffer(self, value: Any) -> bool:
        """On a device, a host value of the stored value's shape and dtype is copied into
        the existing device buffer (made C-contiguous first), without a new allocation."""
        if self.type.device == HOST or self.storage[0] is None:
            return False
        kind = array_kind(self.type.device)
        if kind.is_value(value) or not HOST_ARRAYS.is_value(value):
            return False
        current = self.storage[0]
        if tuple(value.shape) != tuple(current.shape) or value.dtype != current.dtype:
            return False
        import numpy as np

        return kind.write_from_host(current, np.ascontiguousarray(value))

    def get_value(self, borrow: bool = False, return_internal_type: bool = False) -> Any:
        """The current value, as a host value; a copy unless ``borrow=True``.

        A device's value is always returned as a new host array, unless
        ``return_internal_type=True``: then the device value itself is returned (in
        constant time with ``borrow=True``, else a device copy).
        """
        value = self.storage[0]
        if return_internal_type:
            return value if borrow else self.type.copy_value(value)
        host = self.type.host_value(value)
        if host is not value or borrow:
            return host  # a device's value fetched to the host is already a new array
        return self.type.copy_value(value)

    @property
    def container(self) -> SharedContainer:
        """Theano's ``s.container``: ``storage`` (this variable's cell) and ``value``."""
        return SharedContainer(self)

    def set_value(self, value: Any, borrow: bool = False) -> None:
        """Replace the value; it is copied unless ``borrow=True``. A variable created
        with ``strict=True`` takes only values of its exact type; with
        ``allow_downcast=True``, values are cast to its dtype even with loss."""
        self._set_filtered(value, borrow, self.strict, self.allow_downcast)


class SharedConstructors(Protocol):
    """Finds the constructor for a kind of value (the type registry)."""

    def shared_constructor_for(self, value: Any) -> Callable[..., Variable]: ...


_constructors: Callable[[], SharedConstructors] | None = None


def use_shared_constructors(source: Callable[[], SharedConstructors] | None) -> None:
    """Where ``shared()`` finds the constructors that plugins registered: the plugin
    system installs its type registry here (core/hooks.py)."""
    global _constructors
    _constructors = source


def shared(value: Any, name: str | None = None, borrow: bool = False, **kwargs: Any) -> Variable:
    """Create a shared variable for ``value``, using the constructor a plugin registered
    for that kind of value (the tensor family registers NumPy arrays and scalars)."""
    if isinstance(value, Variable):
        raise TypeError(
            f"shared() takes a value (e.g. a NumPy array), not a symbolic Variable: {value!r}"
        )
    if _constructors is None:
        raise TypeError(
            f"shared(): no constructor for {type(value).__name__} values, no plugin system "
            "is installed"
        )
    constructor = _constructors().shared_constructor_for(value)
    return constructor(value, name=name, borrow=borrow, **kwargs)


class SharedContainer:
    """A shared variable's storage seen as a function input's Container."""

    def __init__(self, shared: SharedVariable):
        self.variable = shared
        self.name = shared.name
        self.storage = shared.storage

    @property
    def value(self) -> Any:
        return self.variable.get_value(borrow=True, return_internal_type=True)

    @value.setter
    def value(self, value: Any) -> None:
        self.variable.set_value(value)
