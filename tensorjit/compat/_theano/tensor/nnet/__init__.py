"""``theano.tensor.nnet``."""

from theano.tensor.nnet import conv, nnet  # noqa: F401

import tensorjit.compat.tensor as _compat
from tensorjit.tensor.nnet import *  # noqa: F403
from tensorjit.tensor.nnet import log_softmax as logsoftmax  # noqa: F401
from tensorjit.tensor.nnet import sigmoid as ultra_fast_sigmoid  # noqa: F401

conv2d = _compat.conv2d  # Theano's signature (input, filters, input_shape, filter_shape, ...)
