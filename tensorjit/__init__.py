"""tensorjit: a symbolic math compiler for NumPy-like expressions.

Write expressions on symbolic tensors (``tensorjit.tensor``), differentiate them with
``grad``, compile them with ``function``; op families, backends, kernels and rewrites
arrive as plugins (see ``tensorjit.core.hooks``).
"""

from tensorjit import tensor
from tensorjit.core.compile import FAST_COMPILE, FAST_RUN, Function, Mode, function
from tensorjit.core.config import config
from tensorjit.core.diagnostics import TensorjitWarning
from tensorjit.core.graph import Apply, Constant, FunctionGraph, Op, Type, Variable
from tensorjit.core.memory import In, Out, SharedVariable, shared
from tensorjit.gradient import Lop, Rop, grad, hessian, jacobian, verify_grad
from tensorjit.printing import Print, debugprint, pp, pprint
from tensorjit.scan import scan

__version__ = "0.1.0"

__all__ = [
    "TensorjitWarning",
    "FAST_COMPILE",
    "FAST_RUN",
    "Apply",
    "Constant",
    "Function",
    "FunctionGraph",
    "In",
    "Mode",
    "Op",
    "Lop",
    "Out",
    "Print",
    "Rop",
    "SharedVariable",
    "Type",
    "Variable",
    "config",
    "debugprint",
    "function",
    "grad",
    "hessian",
    "jacobian",
    "pp",
    "pprint",
    "scan",
    "shared",
    "tensor",
    "verify_grad",
]
