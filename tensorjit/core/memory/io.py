"""In and Out: per-input and per-output memory permissions for ``function``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tensorjit.core.graph.basic import Variable


@dataclass
class In:
    """A function input with options.

    - ``value``: default used when the argument is omitted (it must then come last).
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

    def __post_init__(self) -> None:
        if not isinstance(self.variable, Variable):
            raise TypeError(f"In() expects a symbolic Variable, got {self.variable!r}")
        if self.borrow is None:
            self.borrow = self.mutable
        elif self.mutable and not self.borrow:
            raise ValueError(
                f"In({self.variable.describe()}): mutable=True implies borrow=True, "
                "but borrow=False was given"
            )
        if self.name is None:
            self.name = self.variable.name


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
