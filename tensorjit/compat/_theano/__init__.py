"""``theano`` (tensorjit's compatibility layer; see ``tensorjit.compat``)."""

from theano import compile, gof, gradient, ifelse, printing, tensor  # noqa: F401

from tensorjit.compat.compile import Mode, Param, function, get_mode, grad
from tensorjit.compat.config import change_flags, config
from tensorjit.compat.generic import shared
from tensorjit.compat.op import Op
from tensorjit.core.graph import Apply, Constant, FunctionGraph, Type, Variable, clone_replace
from tensorjit.core.memory import In, Out, SharedVariable
from tensorjit.gradient import Lop, Rop
from tensorjit.printing import pp, pprint

__version__ = "1.0.5+tensorjit"
dot = tensor.dot


def clone(output, replace=None, strict=True, share_inputs=True, copy_inputs=None):
    """``theano.clone``: a copy of ``output`` with ``replace`` (old -> new) substituted."""
    single = not isinstance(output, (list, tuple))
    outs = [output] if single else list(output)
    if isinstance(replace, (list, tuple)):
        replace = dict(replace)
    new, _ = clone_replace(outs, replace or {}, copy_inputs=not share_inputs)
    return new[0] if single else new


__all__ = [
    "Apply",
    "Constant",
    "FunctionGraph",
    "In",
    "Lop",
    "Mode",
    "Op",
    "Out",
    "Param",
    "Rop",
    "SharedVariable",
    "Type",
    "Variable",
    "change_flags",
    "clone",
    "compile",
    "config",
    "dot",
    "function",
    "get_mode",
    "gof",
    "grad",
    "gradient",
    "ifelse",
    "pp",
    "pprint",
    "printing",
    "shared",
    "tensor",
]
