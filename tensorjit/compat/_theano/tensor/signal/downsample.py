"""``theano.tensor.signal.downsample``: Theano's old name for pooling."""

from tensorjit.compat.tensor import max_pool_2d  # noqa: F401
