"""``theano.compile.io``."""

from tensorjit.core.memory import In, Out  # noqa: F401

SymbolicInput = In
SymbolicOutput = Out
