"""``theano.gradient``."""

from tensorjit.compat.compile import grad  # noqa: F401
from tensorjit.compat.op import (  # noqa: F401
    DisconnectedType,
    consider_constant,
    disconnected_grad,
    zero_grad,
)
from tensorjit.gradient import (  # noqa: F401
    DisconnectedInputError,
    GradientError,
    Lop,
    NullGradError,
    Rop,
    grad_undefined,
    hessian,
    jacobian,
    verify_grad,
)

grad_not_implemented = grad_undefined
