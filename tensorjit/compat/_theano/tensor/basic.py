"""``theano.tensor.basic``: the same names as ``theano.tensor``."""

import importlib


def _compat_getattr(attr):
    return getattr(importlib.import_module("theano.tensor"), attr)


class NotScalarConstantError(Exception):
    """``get_scalar_constant_value``: the variable is not a constant scalar."""


def get_scalar_constant_value(v, elemwise=True, only_process_constants=False,
                              max_recur=10):  # fmt: skip
    """The value of ``v`` if it is a one-element constant, or computed only from
    constants (folded here); raises NotScalarConstantError otherwise."""
    import numpy as np

    from tensorjit.core.graph.basic import Constant, Variable
    from tensorjit.core.graph.traversal import graph_inputs

    if not isinstance(v, Variable):
        data = np.asarray(v)
    elif isinstance(v, Constant):
        data = np.asarray(v.data)
    elif only_process_constants or not all(isinstance(i, Constant) for i in graph_inputs([v])):
        raise NotScalarConstantError(f"{v} is not a constant")
    else:
        import tensorjit

        data = np.asarray(tensorjit.function([], v, mode="FAST_COMPILE")())
    if data.size != 1:
        raise NotScalarConstantError(f"{v} has {data.size} elements")
    return data.reshape(())
