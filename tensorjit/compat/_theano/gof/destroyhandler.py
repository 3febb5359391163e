"""``theano.gof.destroyhandler``."""

from tensorjit.core.memory.destroy_handler import DestroyHandler  # noqa: F401
