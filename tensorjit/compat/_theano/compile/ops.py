"""``theano.compile.ops``."""

from tensorjit.compat.op import as_op  # noqa: F401
