"""``theano.gof.type``."""

from tensorjit.core.graph import Type  # noqa: F401
