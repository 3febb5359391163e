"""``theano.tensor.signal.pool``."""

from tensorjit.compat.tensor import pool_2d  # noqa: F401
from tensorjit.tensor.nnet.pool import Pool  # noqa: F401
