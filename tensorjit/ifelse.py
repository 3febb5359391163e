"""Theano's module path for the lazy conditional: ``from tensorjit.ifelse import ifelse``."""

from tensorjit.tensor.ifelse import IfElse, ifelse

__all__ = ["IfElse", "ifelse"]
