"""``theano.sandbox.rng_mrg``."""

from tensorjit.compat.random import MRG_RandomStreams  # noqa: F401
