"""``theano.tensor.signal``."""

from theano.tensor.signal import downsample, pool  # noqa: F401
