"""``theano.tensor.inplace``."""

from tensorjit.tensor.inplace import *  # noqa: F403
