"""Theano's generic type: ``theano.shared(obj)`` for any Python object.

tensorjit's own ``shared()`` refuses a value no plugin registered a constructor for (a
clear error beats a variable no op can use); Theano programs expect any object to
become a shared variable of the generic type, whose values are passed through as they
are (no conversion, compared with ``==``, copied with ``copy.deepcopy``).
"""

from __future__ import annotations

from typing import Any

from tensorjit.core.graph.basic import Variable
from tensorjit.core.graph.type import Type
from tensorjit.core.hooks import registries
from tensorjit.core.memory.shared import SharedVariable
from tensorjit.core.memory.shared import shared as _shared


class GenericType(Type):
    """Any Python object."""

    def filter(self, value: Any, strict: bool = False, allow_downcast: bool | None = None) -> Any:
        return value

    def is_valid_value(self, value: Any) -> bool:
        return True

    def __str__(self) -> str:
        return "generic"


generic = GenericType()


def shared(value: Any, name: str | None = None, borrow: bool = False, **kwargs: Any) -> Any:
    """``theano.shared``: tensorjit's ``shared``, or a generic shared variable for a
    value no registered constructor accepts."""
    if isinstance(value, Variable) or registries().types.find_shared_constructor(value):
        return _shared(value, name=name, borrow=borrow, **kwargs)  # (refuses a Variable)
    strict = kwargs.pop("strict", False)
    allow_downcast = kwargs.pop("allow_downcast", None)
    if kwargs:
        raise TypeError(f"shared() of a generic value takes no {sorted(kwargs)}")
    return SharedVariable(generic, value, name, borrow, strict, allow_downcast)
