"""``theano.tensor``: everything in ``tensorjit.tensor`` plus Theano's names and module
paths; see ``tensorjit.compat.tensor`` for what differs from tensorjit."""

from tensorjit.tensor import *  # noqa: F403

# tensorjit's submodules of the same names are replaced by the compat ones.
del nnet, extra_ops, random, allocation, linalg  # noqa: F821

from theano.tensor import (  # noqa: E402
    basic,
    extra_ops,
    inplace,
    nlinalg,
    nnet,
    opt,
    shared_randomstreams,
    signal,
    slinalg,
)

from tensorjit.compat.compile import grad  # noqa: E402
from tensorjit.compat.tensor import (  # noqa: E402
    PLURALS,
    TYPED,
    TensorType,
    addbroadcast,
    dot,
    mean,
    patternbroadcast,
    shape_padleft,
    shape_padright,
    tensor,
    true_div,
    unbroadcast,
)
from tensorjit.gradient import Lop, Rop, hessian, jacobian, verify_grad  # noqa: E402
from tensorjit.tensor import linalg  # noqa: E402, F401
from tensorjit.tensor import random as raw_random  # noqa: E402, F401

matrix_inverse = nlinalg.matrix_inverse
globals().update(PLURALS)
globals().update(TYPED)
Tensor = TensorType

from theano.tensor.basic import NotScalarConstantError, get_scalar_constant_value  # noqa: E402, F401

from tensorjit.tensor.variable import tensor_shared_constructor as _shared  # noqa: E402, F401
