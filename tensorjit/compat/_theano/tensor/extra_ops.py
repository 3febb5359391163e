"""``theano.tensor.extra_ops``."""

from tensorjit.tensor.extra_ops import *  # noqa: F403
from tensorjit.tensor.linalg import diag  # noqa: F401
