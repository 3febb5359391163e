"""Neural-network ops (``tensorjit.tensor.nnet``), as in Theano.

- ``basic``: activations (``sigmoid``, ``hard_sigmoid``, ``softplus``, ``relu``, ``elu``),
  ``softmax``/``log_softmax`` and the classification losses.
- ``conv``: ``conv2d`` on (batch, channels, rows, cols) images, and its gradients.
- ``pool``: ``pool_2d``, ``max_pool_2d``, ``avg_pool_2d`` over the last two axes.
- ``fft``: ``fft``/``ifft``/``rfft``/``irfft`` on the last axis, complex numbers stored as
  (re, im) pairs in a trailing axis of length 2.
"""

from tensorjit.tensor.nnet import basic as _basic
from tensorjit.tensor.nnet import conv as _conv
from tensorjit.tensor.nnet import fft as _fft
from tensorjit.tensor.nnet import pool as _pool
from tensorjit.tensor.nnet.basic import *  # noqa: F403
from tensorjit.tensor.nnet.conv import *  # noqa: F403
from tensorjit.tensor.nnet.fft import *  # noqa: F403
from tensorjit.tensor.nnet.pool import *  # noqa: F403

#: The Op classes of this package (for the tensor plugin's op registry).
OP_CLASSES = (
    _basic.Softmax,
    _basic.LogSoftmax,
    _basic.SelectClass,
    _basic.SelectClassGrad,
    _basic.OneHot,
    _conv.Conv2d,
    _conv.Conv2dGradInputs,
    _conv.Conv2dGradWeights,
    _pool.Pool,
    _pool.MaxPoolGrad,
    _pool.MaxPoolGradGrad,
    _pool.AveragePoolGrad,
    _fft.FFT,
    _fft.RFFT,
    _fft.RFFTAdjoint,
    _fft.IRFFT,
    _fft.IRFFTAdjoint,
)

__all__ = [*_basic.__all__, *_conv.__all__, *_pool.__all__, *_fft.__all__]
