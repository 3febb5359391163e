"""``theano.ifelse``: the lazy conditional."""

from tensorjit.ifelse import IfElse, ifelse  # noqa: F401
