"""``theano.compile.debugmode``: DebugMode checks every kernel against ``Op.perform``,
the declared view/destroy maps and each rewrite (see tensorjit/core/compile/debugmode.py).
"""

from tensorjit.core.compile.debugmode import (  # noqa: F401
    BadDestroyMap,
    BadOptimization,
    BadViewMap,
    DebugModeError,
)
from tensorjit.core.compile.mode import DEBUG_MODE


class InvalidValueError(DebugModeError):
    """A kernel produced a value its type does not accept."""


def DebugMode(optimizer="fast_run", stability_patience=None, check_c_code=True,
              check_py_code=True, check_isfinite=True, check_preallocated_output=None,
              require_matching_strides=0, linker=None):  # fmt: skip
    """``theano.compile.DebugMode(...)``: tensorjit's DebugMode (its options are
    Theano's; tensorjit always checks every kernel and rewrite)."""
    return DEBUG_MODE
