"""2-D convolution of image batches and its two gradients, as ops (im2col + tensordot).

Layouts are Theano's: images ``(batch, channels, rows, cols)``, filters
``(n_filters, channels, filter_rows, filter_cols)``, output
``(batch, n_filters, out_rows, out_cols)``. ``filter_flip=True`` (the default) computes a
true convolution (the filters are flipped, as in ``scipy.signal.convolve``); False a
cross-correlation.

``border_mode``: ``'valid'`` (no padding), ``'full'`` (pad ``k - 1`` on each side),
``'half'`` (pad ``k // 2`` on each side: the output keeps the input size for odd
filters), ``'same'`` (pad ``k - 1`` in total, ``(k - 1) // 2`` before: the output
always keeps the input size, or ``ceil(size / stride)`` with a stride), an int ``p`` or
a pair ``(p_rows, p_cols)`` (zero padding on both sides). ``subsample`` is the stride.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.op import Op
from tensorjit.tensor.shape_ops import shape_entries
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable

__all__ = [
    "Conv2d",
    "Conv2dGradInputs",
    "Conv2dGradWeights",
    "conv2d",
    "conv2d_grad_wrt_inputs",
    "conv2d_grad_wrt_weights",
]

_MODES = ("valid", "full", "half", "same")


def _normalize_border_mode(border_mode: Any) -> tuple:
    """``border_mode`` as one spec per spatial axis: a mode name or a padding int."""
    if isinstance(border_mode, str) or (
        isinstance(border_mode, (int, np.integer)) and not isinstance(border_mode, bool)
    ):
        border_mode = (border_mode, border_mode)
    if isinstance(border_mode, (tuple, list)) and len(border_mode) == 2:
        specs = []
        for spec in border_mode:
            if isinstance(spec, str) and spec in _MODES:
                specs.append(spec)
            elif isinstance(spec, (int, np.integer)) and not isinstance(spec, bool) and spec >= 0:
                specs.append(int(spec))
            else:
                break
        else:
            return tuple(specs)
    raise ValueError(
        f"conv2d: border_mode must be one of {_MODES}, an int >= 0 or a pair of them, "
        f"got {border_mode!r}"
    )


def _normalize_pair(value: Any, what: str) -> tuple[int, int]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (value, value)
    if (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)
        and all(v >= 1 for v in value)
    ):
        return (int(value[0]), int(value[1]))
    raise ValueError(f"{what} must be a pair of ints >= 1, got {value!r}")


def _pads(spec: Any, k: int) -> tuple[int, int]:
    """Padding (before, after) of one spatial axis for a filter of length ``k``."""
    if spec == "valid":
        return (0, 0)
    if spec == "full":
        return (k - 1, k - 1)
    if spec == "half":
        return (k // 2, k // 2)
    if spec == "same":
        return ((k - 1) // 2, k - 1 - (k - 1) // 2)
    return (spec, spec)


def _out_len(n: Any, k: Any, spec: Any, s: int) -> Any:
    """Output length of one axis; works on ints and on symbolic int64 scalars alike."""
    if spec == "valid":
        span = n - k
    elif spec == "full":
        span = n + k - 2
    elif spec == "half":
        span = n + (k // 2) * 2 - k
    elif spec == "same":
        span = n - 1
    else:
        span = n + 2 * spec - k
    return span // s + 1


def _static_out_len(n: int | None, k: int | None, spec: Any, s: int) -> int | None:
    if n is None or (k is None and spec != "same"):
        return None
    if spec == "same":
        return max((n - 1) // s + 1, 0)
    out = _out_len(n, k, spec, s)
    return out if out > 0 else None  # an error at run time; leave it to perform


def _check_image_args(op: Op, x: Variable, what: str) -> None:
    if x.type.ndim != 4:
        raise TypeError(
            f"{op}: {what} must be a 4-d tensor (batch, channels, rows, cols) / (filters, "
            f"channels, rows, cols), got {x.describe()}"
        )
    if np.dtype(x.type.dtype).kind != "f":
        raise TypeError(f"{op}: {what} must have a float dtype, got {x.describe()}")


def _check_channels(op: Op, x: Variable, w: Variable, x_axis: int = 1, w_axis: int = 1) -> None:
    cx, cw = x.type.shape[x_axis], w.type.shape[w_axis]
    if cx is not None and cw is not None and cx != cw:
        raise ValueError(
            f"{op}: {x.describe()} has {cx} channels but the filters {w.describe()} expect {cw}"
        )


def _as_int_scalar(v: Any, what: str) -> Variable:
    var = as_tensor_variable(v)
    if var.type.ndim != 0 or np.dtype(var.type.dtype).kind not in "iu":
        raise TypeError(f"{what} must be an integer scalar, got {var.describe()}")
    return var


def _const(v: Variable) -> int | None:
    data = getattr(v, "data", None)
    return None if data is None else int(data)


class _ConvBase(Op):
    __props__ = ("border_mode", "subsample", "filter_flip")

    def __init__(self, border_mode: Any = "valid", subsample: Any = (1, 1), filter_flip=True):
        self.border_mode = _normalize_border_mode(border_mode)
        self.subsample = _normalize_pair(subsample, "conv2d: subsample")
        self.filter_flip = bool(filter_flip)

    # -- numeric helpers shared by the three kernels
    def _geometry(self, img_hw: tuple[int, int], k_hw: tuple[int, int]):
        if min(k_hw) < 1:
            raise ValueError(
                f"{self}: filters must have at least one row and one column, got {k_hw}"
            )
        pads = [_pads(spec, k) for spec, k in zip(self.border_mode, k_hw)]
        padded = [n + p[0] + p[1] for n, p in zip(img_hw, pads)]
        for axis, (n, k) in enumerate(zip(padded, k_hw)):
            if n < k:
                raise ValueError(
                    f"{self}: the filter ({k_hw[0]}x{k_hw[1]}) is larger than the padded "
                    f"image ({padded[0]}x{padded[1]}) along axis {axis + 2}"
                )
        out = [(n - k) // s + 1 for n, k, s in zip(padded, k_hw, self.subsample)]
        return pads, padded, out

    def _windows(self, x: np.ndarray, k_hw, pads, out_hw) -> np.ndarray:
        """(N, C, oh, ow, kh, kw) windows of the zero-padded image (a strided view)."""
        if any(pads[0]) or any(pads[1]):
            x = np.pad(x, ((0, 0), (0, 0), pads[0], pads[1]))
        sh, sw = self.subsample
        win = sliding_window_view(x, k_hw, axis=(2, 3))
        return win[:, :, : (out_hw[0] - 1) * sh + 1 : sh, : (out_hw[1] - 1) * sw + 1 : sw]

    def _effective(self, w: np.ndarray) -> np.ndarray:
        return w[:, :, ::-1, ::-1] if self.filter_flip else w

    def _check_runtime_channels(self, cx: int, cw: int) -> None:
        if cx != cw:
            raise ValueError(f"{self}: the images have {cx} channels but the filters expect {cw}")


class Conv2d(_ConvBase):
    """``conv2d(images, filters)``: see the module docstring for the parameters."""

    def make_node(self, x: Any, w: Any) -> Apply:
        x, w = as_tensor_variable(x), as_tensor_variable(w)
        _check_image_args(self, x, "the input")
        _check_image_args(self, w, "the filters")
        _check_channels(self, x, w)
        dtype = np.result_type(x.type.dtype, w.type.dtype).name
        shape = (
            x.type.shape[0],
            w.type.shape[0],
            *(
                _static_out_len(n, k, spec, s)
                for n, k, spec, s in zip(
                    x.type.shape[2:], w.type.shape[2:], self.border_mode, self.subsample
                )
            ),
        )
        return Apply(self, [x, w], [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        xs, ws = input_shapes
        spatial = [
            _out_len(n, k, spec, s)
            for n, k, spec, s in zip(xs[2:], ws[2:], self.border_mode, self.subsample)
        ]
        return [(xs[0], ws[0], *spatial)]

    def checked_geometry(self, x_shape: tuple, w_shape: tuple):
        """(pads, padded size, output size) for images and filters of these shapes, or
        the error every kernel raises (Op.perform's and the devices')."""
        self._check_runtime_channels(x_shape[1], w_shape[1])
        return self._geometry(tuple(x_shape[2:]), tuple(w_shape[2:]))

    def perform(self, node, inputs, output_storage):
        x, w = inputs
        dtype = node.outputs[0].type.numpy_dtype
        k_hw = w.shape[2:]
        pads, _, out_hw = self.checked_geometry(x.shape, w.shape)
        win = self._windows(x.astype(dtype, copy=False), k_hw, pads, out_hw)
        weff = self._effective(w).astype(dtype, copy=False)
        out = np.tensordot(win, weff, ([1, 4, 5], [1, 2, 3]))
        output_storage[0][0] = np.ascontiguousarray(out.transpose(0, 3, 1, 2), dtype=dtype)

    def grad(self, inputs, output_grads):
        x, w = inputs
        (g,) = output_grads
        params = (self.border_mode, self.subsample, self.filter_flip)
        gx = Conv2dGradInputs(*params)(w, g, *shape_entries(x)[2:])
        gw = Conv2dGradWeights(*params)(x, g, *shape_entries(w)[2:])
        return [gx, gw]


class Conv2dGradInputs(_ConvBase):
    """The gradient of ``conv2d`` w.r.t. its images: inputs ``(filters, output_grad,
    rows, cols)``, the image size being ambiguous with strides. Also a transposed
    convolution."""

    def host_inputs(self, node: Apply) -> range:
        return range(2, 4)  # the image or filter size

    def make_node(self, w: Any, g: Any, rows: Any, cols: Any) -> Apply:
        w, g = as_tensor_variable(w), as_tensor_variable(g)
        _check_image_args(self, w, "the filters")
        _check_image_args(self, g, "the output gradient")
        _check_channels(self, g, w, 1, 0)
        rows = _as_int_scalar(rows, f"{self}: rows")
        cols = _as_int_scalar(cols, f"{self}: cols")
        dtype = np.result_type(w.type.dtype, g.type.dtype).name
        shape = (g.type.shape[0], w.type.shape[1], _const(rows), _const(cols))
        return Apply(self, [w, g, rows, cols], [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        ws, gs = input_shapes[0], input_shapes[1]
        return [(gs[0], ws[1], node.inputs[2], node.inputs[3])]

    def checked_geometry(self, w_shape: tuple, g_shape: tuple, rows: int, cols: int):
        """(pads, padded size, output size) for these filters, output gradient and image
        size, or the error every kernel raises (Op.perform's and the devices')."""
        self._check_runtime_channels(g_shape[1], w_shape[0])
        pads, padded, out_hw = self._geometry((int(rows), int(cols)), tuple(w_shape[2:]))
        if tuple(out_hw) != tuple(g_shape[2:]):
            raise ValueError(
                f"{self}: an output gradient of spatial shape {tuple(g_shape[2:])} does not "
                f"match images of size {(int(rows), int(cols))} (expected {tuple(out_hw)})"
            )
        return pads, padded, out_hw

    def perform(self, node, inputs, output_storage):
        w, g, rows, cols = inputs
        dtype = node.outputs[0].type.numpy_dtype
        k_hw = w.shape[2:]
        pads, padded, out_hw = self.checked_geometry(w.shape, g.shape, rows, cols)
        n, c = g.shape[0], w.shape[1]
        gxp = np.zeros((n, c, *padded), dtype=dtype)
        # cols[n, oh, ow, c, i, j]: each output gradient spread over its window.
        spread = np.tensordot(g.astype(dtype, copy=False), self._effective(w).astype(dtype), (1, 0))
        sh, sw = self.subsample
        oh, ow = out_hw
        for i in range(k_hw[0]):
            for j in range(k_hw[1]):
                region = gxp[:, :, i : i + (oh - 1) * sh + 1 : sh, j : j + (ow - 1) * sw + 1 : sw]
                region += spread[:, :, :, :, i, j].transpose(0, 3, 1, 2)
        (pt, _), (pl, _) = pads
        gx = gxp[:, :, pt : pt + int(rows), pl : pl + int(cols)]
        output_storage[0][0] = np.ascontiguousarray(gx)

    def grad(self, inputs, output_grads):
        w, g, rows, cols = inputs
        (a,) = output_grads
        params = (self.border_mode, self.subsample, self.filter_flip)
        gw = Conv2dGradWeights(*params)(a, g, *shape_entries(w)[2:])
        gg = Conv2d(*params)(a, w)
        return [gw, gg, None, None]


class Conv2dGradWeights(_ConvBase):
    """The gradient of ``conv2d`` w.r.t. its filters: inputs ``(images, output_grad,
    filter_rows, filter_cols)``."""

    def host_inputs(self, node: Apply) -> range:
        return range(2, 4)  # the image or filter size

    def make_node(self, x: Any, g: Any, rows: Any, cols: Any) -> Apply:
        x, g = as_tensor_variable(x), as_tensor_variable(g)
        _check_image_args(self, x, "the input")
        _check_image_args(self, g, "the output gradient")
        rows = _as_int_scalar(rows, f"{self}: filter rows")
        cols = _as_int_scalar(cols, f"{self}: filter cols")
        dtype = np.result_type(x.type.dtype, g.type.dtype).name
        shape = (g.type.shape[1], x.type.shape[1], _const(rows), _const(cols))
        return Apply(self, [x, g, rows, cols], [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        xs, gs = input_shapes[0], input_shapes[1]
        return [(gs[1], xs[1], node.inputs[2], node.inputs[3])]

    def checked_geometry(self, x_shape: tuple, g_shape: tuple, rows: int, cols: int):
        """(pads, padded size, output size) for these images, output gradient and filter
        size, or the error every kernel raises (Op.perform's and the devices')."""
        k_hw = (int(rows), int(cols))
        pads, padded, out_hw = self._geometry(tuple(x_shape[2:]), k_hw)
        if tuple(out_hw) != tuple(g_shape[2:]) or g_shape[0] != x_shape[0]:
            raise ValueError(
                f"{self}: an output gradient of shape {tuple(g_shape)} does not match images "
                f"of shape {tuple(x_shape)} and {k_hw} filters (expected spatial shape "
                f"{tuple(out_hw)})"
            )
        return pads, padded, out_hw

    def perform(self, node, inputs, output_storage):
        x, g, rows, cols = inputs
        dtype = node.outputs[0].type.numpy_dtype
        k_hw = (int(rows), int(cols))
        pads, _, out_hw = self.checked_geometry(x.shape, g.shape, rows, cols)
        win = self._windows(x.astype(dtype, copy=False), k_hw, pads, out_hw)
        gw = np.tensordot(g.astype(dtype, copy=False), win, ([0, 2, 3], [0, 2, 3]))
        output_storage[0][0] = np.ascontiguousarray(self._effective(gw), dtype=dtype)

    def grad(self, inputs, output_grads):
        x, g, rows, cols = inputs
        (b,) = output_grads
        params = (self.border_mode, self.subsample, self.filter_flip)
        gx = Conv2dGradInputs(*params)(b, g, *shape_entries(x)[2:])
        gg = Conv2d(*params)(x, b)
        return [gx, gg, None, None]


def conv2d(
    input: Any,
    filters: Any,
    border_mode: Any = "valid",
    subsample: Any = (1, 1),
    filter_flip: bool = True,
) -> Variable:
    """2-D convolution of ``input`` (batch, channels, rows, cols) with ``filters``
    (n_filters, channels, rows, cols); see the module docstring for the options."""
    return Conv2d(border_mode, subsample, filter_flip)(input, filters)


def conv2d_grad_wrt_inputs(
    output_grad: Any,
    filters: Any,
    input_shape: Any,
    border_mode: Any = "valid",
    subsample: Any = (1, 1),
    filter_flip: bool = True,
) -> Variable:
    """The gradient of ``conv2d`` w.r.t. its input (a transposed convolution);
    ``input_shape``: the (rows, cols) of the images, or their full 4-d shape."""
    shape = list(input_shape)
    return Conv2dGradInputs(border_mode, subsample, filter_flip)(filters, output_grad, *shape[-2:])


def conv2d_grad_wrt_weights(
    input: Any,
    output_grad: Any,
    filter_shape: Any,
    border_mode: Any = "valid",
    subsample: Any = (1, 1),
    filter_flip: bool = True,
) -> Variable:
    """The gradient of ``conv2d`` w.r.t. its filters; ``filter_shape``: the (rows, cols)
    of the filters, or their full 4-d shape."""
    shape = list(filter_shape)
    return Conv2dGradWeights(border_mode, subsample, filter_flip)(input, output_grad, *shape[-2:])
