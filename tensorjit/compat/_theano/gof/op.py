"""``theano.gof.op``."""

from tensorjit.compat.op import Op, PureOp  # noqa: F401
