"""``theano.compile.function_module``."""

from theano.compile.ops import deep_copy_op  # noqa: E402, F401

from tensorjit.compat.compile import function  # noqa: F401
from tensorjit.core.compile import Function  # noqa: F401
