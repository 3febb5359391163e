"""Compilation: function(), modes, kernel selection, the VM."""

from tensorjit.core.compile.function import Function, function
from tensorjit.core.compile.mode import FAST_COMPILE, FAST_RUN, Mode, get_mode

__all__ = ["FAST_COMPILE", "FAST_RUN", "Function", "Mode", "function", "get_mode"]
