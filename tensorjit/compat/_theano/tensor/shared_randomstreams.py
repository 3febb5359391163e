"""``theano.tensor.shared_randomstreams``."""

from tensorjit.compat.random import RandomStreams  # noqa: F401
