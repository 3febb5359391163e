"""``theano.compile.mode``."""

from tensorjit.compat.compile import Mode, get_default_mode, get_mode  # noqa: F401
from tensorjit.core.compile import FAST_COMPILE, FAST_RUN  # noqa: F401
