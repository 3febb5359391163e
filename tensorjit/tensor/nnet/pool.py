"""2-D pooling over the last two axes (Theano's ``pool_2d``) and its gradients, as ops.

``ws``: the window (rows, cols); ``stride``: its step (default ``ws``); ``pad``:
(rows, cols) added on both sides, each smaller than the window, only with
``ignore_border=True``. ``ignore_border=False`` keeps the partial windows at the bottom
and right edges (Theano's output size).

Modes: ``'max'`` (padding never wins: it counts as -inf; Theano padded with zeros),
``'sum'``, ``'average_inc_pad'`` (the mean over the window clipped to the padded
image: padding counts as zeros) and ``'average_exc_pad'`` (the mean over the part of
the window inside the image).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.op import Op
from tensorjit.tensor import math as tm
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable

__all__ = [
    "AveragePoolGrad",
    "MaxPoolGrad",
    "MaxPoolGradGrad",
    "Pool",
    "avg_pool_2d",
    "max_pool_2d",
    "pool_2d",
]

_MODES = ("max", "sum", "average_inc_pad", "average_exc_pad")


def _pair(value: Any, what: str, minimum: int) -> tuple[int, int]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (value, value)
    if (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)
        and all(v >= minimum for v in value)
    ):
        return (int(value[0]), int(value[1]))
    raise ValueError(f"pool_2d: {what} must be a pair of ints >= {minimum}, got {value!r}")


def _out_len(n: Any, ws: int, st: int, pad: int, ignore_border: bool) -> Any:
    """Pooled length of one axis, on ints or on symbolic int64 scalars alike."""
    if isinstance(n, (int, np.integer)):
        maximum, minimum = max, min
    else:
        maximum, minimum = tm.maximum, tm.minimum
    if ignore_border:
        return maximum((n + 2 * pad - ws) // st + 1, 0)
    if st >= ws:
        return (n - 1) // st + 1
    return minimum(n, maximum((n - 1 - ws + st) // st, 0) + 1)


class _PoolBase(Op):
    __props__ = ("ws", "ignore_border", "stride", "pad", "mode")

    def __init__(
        self,
        ws: Any,
        ignore_border: bool = True,
        stride: Any = None,
        pad: Any = (0, 0),
        mode: str = "max",
    ):
        self.ws = _pair(ws, "ws", 1)
        self.stride = self.ws if stride is None else _pair(stride, "stride", 1)
        self.pad = _pair(pad, "pad", 0)
        self.ignore_border = bool(ignore_border)
        if mode == "average":
            mode = "average_inc_pad"
        if mode not in _MODES:
            raise ValueError(f"pool_2d: mode must be one of {_MODES}, got {mode!r}")
        self.mode = mode
        if any(p >= w for p, w in zip(self.pad, self.ws)):
            raise ValueError(f"pool_2d: pad {self.pad} must be smaller than the window {self.ws}")
        if any(self.pad) and not self.ignore_border:
            raise ValueError("pool_2d: padding works only with ignore_border=True")

    def _check_input(self, x: Variable) -> None:
        if x.type.ndim < 2:
            raise TypeError(f"{self}: input {x.describe()} needs at least 2 dimensions")
        if np.dtype(x.type.dtype).kind not in "iuf":
            raise TypeError(f"{self}: input {x.describe()} must be real-valued (int or float)")

    def _out_shape(self, shape: tuple) -> tuple:
        return tuple(shape[:-2]) + tuple(
            _out_len(n, w, s, p, self.ignore_border)
            for n, w, s, p in zip(shape[-2:], self.ws, self.stride, self.pad)
        )

    def _static_out_shape(self, shape: tuple) -> tuple:
        return tuple(shape[:-2]) + tuple(
            None if n is None else _out_len(n, w, s, p, self.ignore_border)
            for n, w, s, p in zip(shape[-2:], self.ws, self.stride, self.pad)
        )

    # -- numeric helpers
    def _padded(self, x: np.ndarray, out_hw: tuple[int, int], fill: Any) -> np.ndarray:
        """``x`` padded with ``fill`` so that every one of the ``out_hw`` windows fits."""
        h, w = x.shape[-2:]
        (ph, pw), (sh, sw), (wh, ww) = self.pad, self.stride, self.ws
        need_h = max((out_hw[0] - 1) * sh + wh, h + 2 * ph)
        need_w = max((out_hw[1] - 1) * sw + ww, w + 2 * pw)
        xp = np.full(x.shape[:-2] + (need_h, need_w), fill, dtype=x.dtype)
        xp[..., ph : ph + h, pw : pw + w] = x
        return xp

    def _slices(self, i: int, j: int, out_hw: tuple[int, int]) -> tuple:
        """The elements at offset (i, j) of every window: a strided slice."""
        (sh, sw), (oh, ow) = self.stride, out_hw
        return (Ellipsis, slice(i, i + (oh - 1) * sh + 1, sh), slice(j, j + (ow - 1) * sw + 1, sw))

    def _counts(self, hw: tuple[int, int], out_hw: tuple[int, int]) -> np.ndarray:
        """Number of elements each window averages over, shape ``out_hw``."""
        per_axis = []
        for n, o, w, s, p in zip(hw, out_hw, self.ws, self.stride, self.pad):
            start = np.arange(o) * s
            end = start + w
            if self.mode == "average_inc_pad":
                cnt = np.minimum(end, n + 2 * p) - start
            else:
                cnt = np.minimum(end, n + p) - np.maximum(start, p)
            per_axis.append(np.maximum(cnt, 1))
        return np.multiply.outer(per_axis[0], per_axis[1])

    def _fill(self, dtype: np.dtype) -> Any:
        if self.mode != "max":
            return 0
        return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


class Pool(_PoolBase):
    """Pooling of the last two axes of ``x``; see the module docstring."""

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        self._check_input(x)
        dtype = x.type.dtype
        if self.mode.startswith("average"):
            dtype = np.result_type(dtype, np.float32 if dtype == "float32" else np.float64).name
        shape = self._static_out_shape(x.type.shape)
        return Apply(self, [x], [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [self._out_shape(input_shapes[0])]

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        dtype = node.outputs[0].type.numpy_dtype
        out_shape = self._out_shape(x.shape)
        out_hw = out_shape[-2:]
        if 0 in out_shape:
            output_storage[0][0] = np.zeros(out_shape, dtype=dtype)
            return
        xp = self._padded(x, out_hw, self._fill(x.dtype))
        # (..., out_rows, out_cols, ws_rows, ws_cols): the windows, a strided view.
        win = sliding_window_view(xp, self.ws, axis=(-2, -1))
        win = win[self._slices(0, 0, out_hw) + (slice(None), slice(None))]
        if self.mode == "max":
            out = win.max(axis=(-2, -1))
        else:
            out = win.sum(axis=(-2, -1), dtype=dtype)
            if self.mode != "sum":
                out = out / self._counts(x.shape[-2:], out_hw)
        output_storage[0][0] = np.asarray(out, dtype=dtype)

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        (g,) = output_grads
        if np.dtype(x.type.dtype).kind != "f":
            return [None]
        params = (self.ws, self.ignore_border, self.stride, self.pad, self.mode)
        if self.mode == "max":
            return [MaxPoolGrad(*params)(x, outputs[0], g)]
        return [AveragePoolGrad(*params)(x, g)]


class MaxPoolGrad(_PoolBase):
    """Gradient of max pooling: inputs ``(x, pooled, output_grad)``; each output gradient
    goes to the window's elements equal to its maximum (to all of them on ties, as in
    Theano)."""

    def make_node(self, x: Any, z: Any, g: Any) -> Apply:
        x, z, g = (as_tensor_variable(v) for v in (x, z, g))
        self._check_input(x)
        for v in (z, g):
            if v.type.ndim != x.type.ndim:
                raise TypeError(f"{self}: {v.describe()} must have {x.type.ndim} dimensions")
        dtype = np.result_type(x.type.dtype, g.type.dtype).name
        return Apply(self, [x, z, g], [TensorType(dtype, x.type.shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]

    def perform(self, node, inputs, output_storage):
        x, z, g = inputs
        dtype = node.outputs[0].type.numpy_dtype
        out_hw = self.checked_out_hw(x.shape, z.shape, g.shape)
        if 0 in g.shape or x.size == 0:
            output_storage[0][0] = np.zeros(x.shape, dtype=dtype)
            return
        xp = self._padded(x, out_hw, self._fill(x.dtype))
        gxp = np.zeros(xp.shape, dtype=dtype)
        for i in range(self.ws[0]):
            for j in range(self.ws[1]):
                sl = self._slices(i, j, out_hw)
                gxp[sl] += np.where(xp[sl] == z, g, 0)
        (ph, pw), (h, w) = self.pad, x.shape[-2:]
        output_storage[0][0] = np.ascontiguousarray(gxp[..., ph : ph + h, pw : pw + w])

    def checked_out_hw(self, x_shape: tuple, z_shape: tuple, g_shape: tuple) -> tuple:
        """The pooled size of ``x``, or the error every kernel raises when the pooled
        values or their gradient do not have it."""
        out_hw = tuple(self._out_shape(tuple(x_shape))[-2:])
        if tuple(z_shape) != tuple(g_shape) or tuple(g_shape) != tuple(x_shape[:-2]) + out_hw:
            raise ValueError(
                f"{self}: pooled shapes {tuple(z_shape)}/{tuple(g_shape)} do not match "
                f"{tuple(x_shape)}"
            )
        return out_hw

    def grad(self, inputs, output_grads):
        # Piecewise constant in x and z (through the x == z mask), linear in g.
        x, z, g = inputs
        (a,) = output_grads
        params = (self.ws, self.ignore_border, self.stride, self.pad, self.mode)
        return [tm.zeros_like(x), tm.zeros_like(z), MaxPoolGradGrad(*params)(x, z, a)]


class MaxPoolGradGrad(_PoolBase):
    """The adjoint of ``MaxPoolGrad`` in its output gradient (max pooling's second
    derivative): inputs ``(x, pooled, a)`` with ``a`` shaped like ``x``; each window sums
    ``a`` over its elements equal to the window's maximum."""

    def make_node(self, x: Any, z: Any, a: Any) -> Apply:
        x, z, a = (as_tensor_variable(v) for v in (x, z, a))
        self._check_input(x)
        for v in (z, a):
            if v.type.ndim != x.type.ndim:
                raise TypeError(f"{self}: {v.describe()} must have {x.type.ndim} dimensions")
        dtype = np.result_type(z.type.dtype, a.type.dtype).name
        return Apply(self, [x, z, a], [TensorType(dtype, z.type.shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[1])]

    def perform(self, node, inputs, output_storage):
        x, z, a = inputs
        dtype = node.outputs[0].type.numpy_dtype
        out_hw = self._out_shape(x.shape)[-2:]
        if z.shape[-2:] != tuple(out_hw) or a.shape != x.shape:
            raise ValueError(f"{self}: shapes {z.shape}/{a.shape} do not match {x.shape}")
        out = np.zeros(z.shape, dtype=dtype)
        if 0 in z.shape or x.size == 0:
            output_storage[0][0] = out
            return
        xp = self._padded(x, out_hw, self._fill(x.dtype))
        ap = self._padded(a.astype(dtype, copy=False), out_hw, 0)
        for i in range(self.ws[0]):
            for j in range(self.ws[1]):
                sl = self._slices(i, j, out_hw)
                out += np.where(xp[sl] == z, ap[sl], 0)
        output_storage[0][0] = out

    def grad(self, inputs, output_grads):
        x, z, a = inputs
        (g,) = output_grads
        params = (self.ws, self.ignore_border, self.stride, self.pad, self.mode)
        return [tm.zeros_like(x), tm.zeros_like(z), MaxPoolGrad(*params)(x, z, g)]


class AveragePoolGrad(_PoolBase):
    """Gradient of sum/average pooling: inputs ``(x, output_grad)`` (only the shape of
    ``x`` is read); each output gradient is spread evenly over its window."""

    def make_node(self, x: Any, g: Any) -> Apply:
        x, g = as_tensor_variable(x), as_tensor_variable(g)
        self._check_input(x)
        if g.type.ndim != x.type.ndim:
            raise TypeError(f"{self}: {g.describe()} must have {x.type.ndim} dimensions")
        dtype = np.result_type(x.type.dtype, g.type.dtype).name
        return Apply(self, [x, g], [TensorType(dtype, x.type.shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]

    def perform(self, node, inputs, output_storage):
        x, g = inputs
        dtype = node.outputs[0].type.numpy_dtype
        out_hw = self.checked_out_hw(x.shape, g.shape)
        if 0 in g.shape or x.size == 0:
            output_storage[0][0] = np.zeros(x.shape, dtype=dtype)
            return
        if self.mode != "sum":
            g = g / self._counts(x.shape[-2:], out_hw)
        xp_shape = self._padded(np.zeros(x.shape[-2:], dtype=dtype), out_hw, 0).shape
        gxp = np.zeros(x.shape[:-2] + xp_shape, dtype=dtype)
        for i in range(self.ws[0]):
            for j in range(self.ws[1]):
                gxp[self._slices(i, j, out_hw)] += g
        (ph, pw), (h, w) = self.pad, x.shape[-2:]
        output_storage[0][0] = np.ascontiguousarray(gxp[..., ph : ph + h, pw : pw + w])

    def checked_out_hw(self, x_shape: tuple, g_shape: tuple) -> tuple:
        """The pooled size of ``x``, or the error every kernel raises when the output
        gradient does not have it."""
        out_hw = tuple(self._out_shape(tuple(x_shape))[-2:])
        if tuple(g_shape) != tuple(x_shape[:-2]) + out_hw:
            raise ValueError(
                f"{self}: output gradient shape {tuple(g_shape)} does not match {tuple(x_shape)}"
            )
        return out_hw

    def grad(self, inputs, output_grads):
        # Linear in the output gradient: its adjoint is the pooling itself.
        x, g = inputs
        (a,) = output_grads
        params = (self.ws, self.ignore_border, self.stride, self.pad, self.mode)
        return [None, Pool(*params)(a)]


def pool_2d(
    input: Any,
    ws: Any,
    ignore_border: bool = True,
    stride: Any = None,
    pad: Any = (0, 0),
    mode: str = "max",
) -> Variable:
    """Pool the last two axes of ``input`` (Theano's ``pool_2d``); see the module
    docstring for the options and modes."""
    return Pool(ws, ignore_border, stride, pad, mode)(input)


def max_pool_2d(
    x: Any, ws: Any, ignore_border: bool = True, stride: Any = None, pad: Any = (0, 0)
) -> Variable:
    """Max pooling of the last two axes with window ``ws``."""
    return pool_2d(x, ws, ignore_border, stride, pad, "max")


def avg_pool_2d(
    x: Any,
    ws: Any,
    ignore_border: bool = True,
    stride: Any = None,
    pad: Any = (0, 0),
    include_padding: bool = False,
) -> Variable:
    """Average pooling of the last two axes (``'average_exc_pad'``, or
    ``'average_inc_pad'`` with ``include_padding=True``)."""
    mode = "average_inc_pad" if include_padding else "average_exc_pad"
    return pool_2d(x, ws, ignore_border, stride, pad, mode)
