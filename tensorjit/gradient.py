"""Symbolic differentiation (``tensorjit.gradient.grad``, ``verify_grad``)."""

from tensorjit.core.gradient import (
    DisconnectedInputError,
    NotDifferentiableError,
    NullGradError,
    UndefinedGrad,
    grad,
    grad_undefined,
)
from tensorjit.tensor.gradient_check import GradientError, verify_grad

__all__ = [
    "DisconnectedInputError",
    "GradientError",
    "NotDifferentiableError",
    "NullGradError",
    "UndefinedGrad",
    "grad",
    "grad_undefined",
    "verify_grad",
]
