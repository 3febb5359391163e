"""``theano.compile.sharedvalue``."""

from tensorjit.core.memory import SharedVariable, shared  # noqa: F401
