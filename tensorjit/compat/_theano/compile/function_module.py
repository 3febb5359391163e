"""``theano.compile.function_module``."""

from tensorjit.compat.compile import function  # noqa: F401
from tensorjit.core.compile import Function  # noqa: F401
