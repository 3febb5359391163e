"""``theano.tensor.nnet.conv``: the old convolution module."""

from tensorjit.compat.tensor import old_conv2d as conv2d  # noqa: F401
