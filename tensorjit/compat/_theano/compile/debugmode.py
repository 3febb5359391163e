"""``theano.compile.debugmode``: DebugMode checks every kernel against ``Op.perform``,
the declared view/destroy maps and each rewrite (see tensorjit/core/compile/debugmode.py).
"""

from tensorjit.core.compile.debugmode import (  # noqa: F401
    BadDestroyMap,
    BadOptimization,
    BadViewMap,
    DebugModeError,
)
from tensorjit.core.compile.mode import DEBUG_MODE, Mode


class InvalidValueError(DebugModeError):
    """A kernel produced a value its type does not accept."""


class _DebugModeFactory(type):
    """``DebugMode(...)`` gives tensorjit's DebugMode; ``isinstance(m, DebugMode)``
    accepts any tensorjit Mode that checks (``mode.debug``)."""

    def __call__(cls, *args, **kwargs):
        return DEBUG_MODE

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Mode) and obj.debug


class DebugMode(metaclass=_DebugModeFactory):
    """``theano.compile.DebugMode(optimizer=..., check_c_code=..., ...)``: tensorjit's
    DebugMode (the options are Theano's; tensorjit always checks every kernel, the
    declared view/destroy maps and each rewrite)."""
