"""Theano-flavoured versions of tensorjit functions whose signature or dtype rule differs.

What differs from ``tensorjit.tensor`` (only in the ``theano`` namespace):

- ``mean`` of an integer or boolean tensor is ``floatX`` (tensorjit: float64), and
  ``true_div`` of two integer tensors is ``floatX`` (Theano's ``int_division='floatX'``).
  The ``/`` *operator* on integer variables keeps tensorjit's NumPy rule (float64).
- ``dot`` takes tensors of any rank (NumPy's ``dot``), as Theano's did.
- ``TensorType(dtype, broadcastable)`` and ``tensor(dtype, broadcastable)`` take Theano's
  broadcastable pattern as the second positional argument.
- ``nnet.conv2d`` has Theano's ``(input, filters, input_shape, filter_shape, border_mode,
  subsample, filter_flip)`` order; the old ``nnet.conv.conv2d`` takes ``image_shape``.
- ``pool_2d``/``max_pool_2d`` accept the old ``ds``/``st``/``padding`` names, and
  ``ignore_border`` defaults to False, as in Theano 1.0 (tensorjit: True).
- ``shape_padleft``, ``shape_padright``; ``addbroadcast``/``patternbroadcast``/
  ``unbroadcast`` are tensorjit.tensor's (a run-time check, a view).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tensorjit.tensor as _T
from tensorjit.core.config import config
from tensorjit.tensor.nnet import conv2d as _conv2d
from tensorjit.tensor.nnet import pool_2d as _pool_2d
from tensorjit.tensor.shape_ops import addbroadcast, patternbroadcast, unbroadcast
from tensorjit.tensor.type import _KINDS
from tensorjit.tensor.type import CONSTRUCTORS as _CONSTRUCTORS
from tensorjit.tensor.type import DTYPE_PREFIXES as _DTYPE_PREFIXES
from tensorjit.tensor.type import PLURAL_OF as _PLURAL_OF
from tensorjit.tensor.type import TensorType as _TensorType
from tensorjit.tensor.variable import as_tensor_variable

__all__ = [
    "TensorType",
    "addbroadcast",
    "conv2d",
    "dot",
    "max_pool_2d",
    "mean",
    "old_conv2d",
    "patternbroadcast",
    "pool_2d",
    "shape_padleft",
    "shape_padright",
    "tensor",
    "true_div",
    "unbroadcast",
]


def _discrete(var: Any) -> bool:
    return np.dtype(var.type.dtype).kind in "biu"


def mean(
    input: Any,
    axis: Any = None,
    dtype: Any = None,
    op: bool = False,
    keepdims: bool = False,
    acc_dtype: Any = None,
) -> Any:
    """Theano's ``mean``: of integers it is ``floatX``; ``dtype`` casts the result."""
    x = as_tensor_variable(input)
    result = _T.mean(x, axis=axis, keepdims=keepdims)
    if dtype is not None:
        return _T.cast(result, dtype)
    if _discrete(x) and result.type.dtype != config.floatX:
        return _T.cast(result, config.floatX)
    return result


def dot(a: Any, b: Any) -> Any:
    """Theano's ``dot``: NumPy's ``dot`` for any ranks (N-d inputs go through
    ``tensordot`` over the last axis of ``a`` and the second-to-last of ``b``)."""
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    if a.type.ndim <= 2 and b.type.ndim <= 2:
        return _T.dot(a, b)
    if a.type.ndim == 0 or b.type.ndim == 0:
        return a * b
    return _T.tensordot(a, b, [[a.type.ndim - 1], [max(0, b.type.ndim - 2)]])


def true_div(a: Any, b: Any) -> Any:
    """``a / b``; of two integer tensors it is ``floatX`` (Theano's int_division)."""
    a, b = as_tensor_variable(a), as_tensor_variable(b)
    result = _T.true_div(a, b)
    if _discrete(a) and _discrete(b) and result.type.dtype != config.floatX:
        return _T.cast(result, config.floatX)
    return result


class _TypeFactory(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _TensorType)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, _TensorType)

    def __call__(cls, dtype: Any = None, broadcastable: Any = None, *args: Any, **kw: Any):
        if "shape" in kw:
            return _TensorType(dtype, *args, **kw)
        if broadcastable is not None and all(
            isinstance(b, (bool, np.bool_)) for b in broadcastable
        ):
            return _TensorType(dtype, broadcastable=tuple(bool(b) for b in broadcastable))
        return _TensorType(dtype, broadcastable, *args, **kw)


class TensorType(metaclass=_TypeFactory):
    """``TensorType(dtype, broadcastable)`` builds a tensorjit TensorType; isinstance
    checks against it accept tensorjit TensorTypes."""


def tensor(dtype: Any = None, broadcastable: Any = None, name: str | None = None, **kw: Any):
    """Theano's ``tensor(dtype, broadcastable, name)``."""
    if broadcastable is None and "shape" not in kw:
        raise TypeError("tensor(dtype, broadcastable, name) needs a broadcastable pattern")
    return TensorType(dtype, broadcastable, **kw)(name)


def shape_padleft(t: Any, n_ones: int = 1) -> Any:
    t = as_tensor_variable(t)
    return t.dimshuffle(*(["x"] * n_ones), *range(t.type.ndim))


def shape_padright(t: Any, n_ones: int = 1) -> Any:
    t = as_tensor_variable(t)
    return t.dimshuffle(*range(t.type.ndim), *(["x"] * n_ones))


# addbroadcast, unbroadcast, patternbroadcast: tensorjit.tensor.shape_ops's.


# ---------------------------------------------------------------- nnet
def _no_extras(what: str, **options: Any) -> None:
    defaults = {"filter_dilation": (1, 1), "num_groups": 1, "unshared": False}
    for name, value in options.items():
        if value != defaults.get(name) and tuple(np.atleast_1d(value)) != defaults.get(name):
            raise NotImplementedError(f"{what}({name}={value!r}) is not supported by tensorjit yet")


def conv2d(
    input: Any,
    filters: Any,
    input_shape: Any = None,
    filter_shape: Any = None,
    border_mode: Any = "valid",
    subsample: Any = (1, 1),
    filter_flip: bool = True,
    image_shape: Any = None,
    filter_dilation: Any = (1, 1),
    num_groups: int = 1,
    unshared: bool = False,
    **kwargs: Any,
) -> Any:
    """``theano.tensor.nnet.conv2d`` (the shape hints are accepted and not needed)."""
    _no_extras(
        "theano.tensor.nnet.conv2d",
        filter_dilation=filter_dilation,
        num_groups=num_groups,
        unshared=unshared,
    )
    return _conv2d(
        input, filters, border_mode=border_mode, subsample=subsample, filter_flip=filter_flip
    )


def old_conv2d(
    input: Any,
    filters: Any,
    image_shape: Any = None,
    filter_shape: Any = None,
    border_mode: str = "valid",
    subsample: Any = (1, 1),
    **kwargs: Any,
) -> Any:
    """The old ``theano.tensor.nnet.conv.conv2d`` ('valid' or 'full', flipped filters)."""
    if border_mode not in ("valid", "full"):
        raise ValueError(
            f"theano.tensor.nnet.conv.conv2d: border_mode must be 'valid' or "
            f"'full', got {border_mode!r}"
        )
    return _conv2d(input, filters, border_mode=border_mode, subsample=subsample, filter_flip=True)


def pool_2d(
    input: Any,
    ws: Any = None,
    ignore_border: bool | None = None,
    stride: Any = None,
    pad: Any = (0, 0),
    mode: str = "max",
    ds: Any = None,
    st: Any = None,
    padding: Any = None,
) -> Any:
    """``theano.tensor.signal.pool.pool_2d`` (Theano 1.0 defaults: ignore_border=False)."""
    ws = ws if ws is not None else ds
    if ws is None:
        raise TypeError("pool_2d needs ws (the window shape)")
    stride = stride if stride is not None else st
    pad = padding if padding is not None else pad
    if ignore_border is None:
        ignore_border = False
    return _pool_2d(input, ws, ignore_border=ignore_border, stride=stride, pad=pad, mode=mode)


def max_pool_2d(
    input: Any,
    ds: Any,
    ignore_border: bool | None = None,
    st: Any = None,
    padding: Any = (0, 0),
    mode: str = "max",
) -> Any:
    """The old ``theano.tensor.signal.downsample.max_pool_2d``."""
    return pool_2d(input, ds, ignore_border=ignore_border, stride=st, pad=padding, mode=mode)


def _theano_plural(single: Any) -> Any:
    """Theano's rule for ``scalars``, ``matrices``, ...: an int gives that many unnamed
    variables; a single string names one variable per character (``scalars('xy')``),
    several strings one each; a one-character name gives the variable itself."""

    def plural(*names: Any) -> Any:
        if names and isinstance(names[0], int):
            return [single() for _ in range(names[0])]
        if len(names) == 1:
            names = names[0]
        if len(names) == 1:
            return single(names)
        return [single(name) for name in names]

    plural.__name__ = plural.__qualname__ = single.__name__ + "s"
    return plural


#: ``scalars``, ``dmatrices``, ...: tensorjit's constructors under Theano's naming rule.
PLURALS = {name: _theano_plural(_CONSTRUCTORS[single]) for name, single in _PLURAL_OF.items()}

#: ``dscalar``, ``fmatrix``, ...: in Theano these are TensorType instances (calling one
#: makes a variable), so ``shared(7.0).type == T.dscalar`` holds.
TYPED = {
    prefix + kind: _TensorType(dtype, shape)
    for kind, shape in _KINDS.items()
    for prefix, dtype in _DTYPE_PREFIXES.items()
}
