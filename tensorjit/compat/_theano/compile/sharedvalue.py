"""``theano.compile.sharedvalue``."""

from tensorjit.compat.generic import generic, shared  # noqa: F401
from tensorjit.core.memory import SharedVariable  # noqa: F401
