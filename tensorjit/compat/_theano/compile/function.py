"""``theano.compile.function``: this module is callable, like Theano's ``function``."""

from tensorjit.compat.compile import function  # noqa: F401
