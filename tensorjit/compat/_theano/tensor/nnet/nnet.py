"""``theano.tensor.nnet.nnet``."""

from tensorjit.tensor.nnet.basic import *  # noqa: F403
from tensorjit.tensor.nnet.basic import log_softmax as logsoftmax  # noqa: F401
