"""``theano.gof.fg``."""

from tensorjit.core.graph import FunctionGraph, InconsistencyError, MissingInputError  # noqa: F401
