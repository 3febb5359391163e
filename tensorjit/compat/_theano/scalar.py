"""``theano.scalar``: the names Theano code uses from its scalar module.

tensorjit has no separate scalar types: ``theano.scalar.float64`` and friends are the
0-d tensor types of those dtypes, and the scalar ops (``add``, ``exp``, ...) are
tensorjit's, which ``Elemwise`` applies.
"""

import numpy as np

from tensorjit.tensor.scalar import SCALAR_OPS, ScalarOp  # noqa: F401
from tensorjit.tensor.type import TensorType

_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
           "uint64", "float16", "float32", "float64", "complex64", "complex128")  # fmt: skip


def Scalar(dtype):  # noqa: N802  (Theano's class name)
    """The 0-d tensor type of ``dtype``."""
    return TensorType(dtype, ())


globals().update({dtype: Scalar(dtype) for dtype in _DTYPES})
globals().update(SCALAR_OPS)


def upcast(dtype, *dtypes):
    """The dtype NumPy gives a result of these dtypes (Theano's ``upcast``)."""
    return np.result_type(*(np.dtype(d) for d in (dtype, *dtypes))).name


def as_scalar(x, name=None):
    from tensorjit.tensor.variable import as_tensor_variable

    var = as_tensor_variable(x, name=name)
    if var.type.ndim != 0:
        raise TypeError(f"as_scalar: {var.describe()} is not 0-d")
    return var
