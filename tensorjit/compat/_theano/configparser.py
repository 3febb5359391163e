"""``theano.configparser``."""

from tensorjit.compat.config import TheanoConfig as TheanoConfigParser  # noqa: F401
from tensorjit.compat.config import change_flags, config  # noqa: F401
