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


def _asarray(a, dtype, order=None):
    """``theano._asarray``: ``numpy.asarray`` with the dtype given."""
    import numpy

    return numpy.asarray(a, dtype=dtype, order=order)


def function_dump(
    filename,
    inputs,
    outputs=None,
    mode=None,
    updates=None,
    givens=None,
    no_default_updates=False,
    accept_inplace=False,
    name=None,
    rebuild_strict=True,
    allow_input_downcast=None,
    profile=None,
    on_unused_input=None,
    extra_tag_to_remove=None,
):
    """Pickle ``theano.function``'s arguments to ``filename`` (to reproduce a problem
    elsewhere: ``theano.function(**pickle.load(f))``)."""
    import pickle

    arguments = dict(
        inputs=inputs,
        outputs=outputs,
        mode=mode,
        updates=updates,
        givens=givens,
        no_default_updates=no_default_updates,
        accept_inplace=accept_inplace,
        name=name,
        rebuild_strict=rebuild_strict,
        allow_input_downcast=allow_input_downcast,
        on_unused_input=on_unused_input,
    )
    with open(filename, "wb") as f:
        pickle.dump(arguments, f, protocol=pickle.HIGHEST_PROTOCOL)


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
    "function_dump",
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
