"""In and Out: per-input and per-output memory permissions for ``function``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tensorjit.core.graph.basic import Variable


class Container:
    """The value an input of a compiled function takes when a call omits it: its
    default (``In(x, value=...)``), replaced after each call by ``In(update=...)``.
    ``In(y, value=f.container[x])`` makes two functions share one state."""

    def __init__(self, variable: Variable, value: Any = None, strict: bool = False):
        self.variable = variable
        self.name = variable.name
        self.strict = strict
        self.storage: list[Any] = [value]

    @property
    def value(self) -> Any:
        return self.storage[0]

    @value.setter
    def value(self, value: Any) -> None:
        """Set the value, checked against the variable's type (None clears it)."""
        if value is not None:
            value = self.variable.type.filter(value, strict=self.strict)
        self.storage[0] = value

    def __repr__(self) -> str:
        return f"<Container of {self.variable.describe()}: {self.storage[0]!r}>"


@dataclass
class In:
    """A function input with options.

    - ``value``: default used when the argument is omitted (it must then come last); a
      ``Container`` (``f.container[x]`` of another function) shares its state.
    - ``borrow``: the function may use the argument's buffer as workspace.
    - ``mutable``: inplace ops may destroy the argument (implies ``borrow``).
    - ``update``: a new value stored back into this input's default after each call.
    """

    variable: Variable
    name: str | None = None
    value: Any = None
    update: Variable | None = None
    mutable: bool = False
    borrow: bool | None = None
    strict: bool = False
    allow_downcast: bool | None = None
    #: Theano's flag; here an input with a value may always be omitted.
    implicit: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.variable, Variable):
            raise TypeError(f"In() expects a symbolic Variable, got {self.variable!r}")
        if self.name is not None and not isinstance(self.name, str):
            raise TypeError(f"In(name=...) must be a string, got {self.name!r}")
        if self.borrow is None:
            self.borrow = self.mutable
        elif self.mutable and not self.borrow:
            raise ValueError(
                f"In({self.variable.describe()}): mutable=True implies borrow=True, "
                "but borrow=False was given"
            )
        if self.name is None:
            self.name = self.variable.name
        if isinstance(self.update, Variable) and not _same_kind(self.update, self.variable):
            raise TypeError(
                f"In({self.variable.describe()}): the update {self.update.describe()} is of "
                f"type {self.update.type}, the input of type {self.variable.type}"
            )


def _same_kind(new: Variable, old: Variable) -> bool:
    """Whether ``new`` can replace ``old``'s value: same dtype and broadcasting (static
    lengths may differ), or an equal type for values that are not tensors."""
    fields = ("dtype", "broadcastable", "device")
    if all(hasattr(old.type, f) and hasattr(new.type, f) for f in fields):
        return all(getattr(old.type, f) == getattr(new.type, f) for f in fields)
    return new.type == old.type


@dataclass
class Out:
    """A function output.

    - ``borrow``: the function may reuse the output's buffer across calls (a returned
      value may then be overwritten by a later call).
    - ``return_internal_type``: return a device value as is, without conversion to NumPy
      (host values are returned as they are either way).
    """

    variable: Variable
    borrow: bool = False
    return_internal_type: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.variable, Variable):
            raise TypeError(f"Out() expects a symbolic Variable, got {self.variable!r}")
