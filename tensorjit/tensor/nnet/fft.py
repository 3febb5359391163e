"""Discrete Fourier transforms on the last axis, with gradients.

Complex values are stored as real/imaginary pairs in a trailing axis of length 2 (as
Theano's ``tensor.fft``), so everything stays real-valued and differentiable with the
usual tools:

- ``fft(x)`` / ``ifft(x)``: ``x`` of shape ``(..., n, 2)`` -> ``(..., n, 2)``.
- ``rfft(x)``: real ``x`` of shape ``(..., n)`` -> ``(..., n // 2 + 1, 2)``.
- ``irfft(x, is_odd=False)``: ``(..., m, 2)`` -> real ``(..., n)`` with
  ``n = 2 * (m - 1) + is_odd`` (the imaginary parts of the zero-frequency bin and, for
  even ``n``, of the Nyquist bin are ignored, as by ``numpy.fft.irfft``).

``norm`` follows ``numpy.fft``: ``None``/``'backward'`` (only the inverse scales, by
``1/n``), ``'ortho'`` (both by ``1/sqrt(n)``), ``'forward'`` (only the forward
transform scales). The gradient of a linear transform is its adjoint: ``ifft`` with the
swapped normalization for ``fft``, and so on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.op import Op
from tensorjit.tensor.shape_ops import shape_entries
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable

__all__ = [
    "FFT",
    "IRFFT",
    "IRFFTAdjoint",
    "RFFT",
    "RFFTAdjoint",
    "fft",
    "ifft",
    "irfft",
    "rfft",
]

_NORMS = ("backward", "ortho", "forward")
_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _norm(norm: Any) -> str:
    norm = "backward" if norm is None else norm
    if norm not in _NORMS:
        raise ValueError(f"fft: norm must be None, 'backward', 'ortho' or 'forward', got {norm!r}")
    return norm


def _real_dtype(x: Variable, what: str) -> str:
    kind = np.dtype(x.type.dtype).kind
    if kind not in "iuf":
        raise TypeError(
            f"{what}: input {x.describe()} must be real (complex values are (re, im) pairs "
            "in a trailing axis of length 2)"
        )
    return "float32" if x.type.dtype in ("float16", "float32") else "float64"


def _check_pairs(x: Variable, what: str) -> None:
    if x.type.ndim < 2 or x.type.shape[-1] not in (None, 2):
        raise ValueError(
            f"{what}: input {x.describe()} must hold complex numbers as (re, im) pairs: "
            f"shape (..., n, 2), got static shape {x.type.shape}"
        )


def _to_complex(x: np.ndarray, what: str) -> np.ndarray:
    if x.shape[-1] != 2:
        raise ValueError(f"{what}: the last axis must hold (re, im) pairs, got shape {x.shape}")
    return x[..., 0] + 1j * x[..., 1]


def _to_pairs(c: np.ndarray, dtype: np.dtype) -> np.ndarray:
    out = np.empty(c.shape + (2,), dtype=dtype)
    out[..., 0] = c.real
    out[..., 1] = c.imag
    return out


class FFT(Op):
    """The DFT (``inverse=False``) or its inverse of (re, im) pairs along the last
    complex axis: ``(..., n, 2) -> (..., n, 2)``."""

    __props__ = ("inverse", "norm")

    def __init__(self, inverse: bool = False, norm: Any = None):
        self.inverse = bool(inverse)
        self.norm = _norm(norm)

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        name = "ifft" if self.inverse else "fft"
        dtype = _real_dtype(x, name)
        _check_pairs(x, name)
        shape = x.type.shape[:-1] + (2,)
        return Apply(self, [x], [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0][:-1]) + (2,)]

    def perform(self, node, inputs, output_storage):
        c = _to_complex(inputs[0], "ifft" if self.inverse else "fft")
        fn = np.fft.ifft if self.inverse else np.fft.fft
        out = fn(c, axis=-1, norm=self.norm) if c.shape[-1] else c
        output_storage[0][0] = _to_pairs(out, node.outputs[0].type.numpy_dtype)

    def grad(self, inputs, output_grads):
        return [FFT(not self.inverse, _SWAP[self.norm])(output_grads[0])]


class RFFT(Op):
    """The DFT of real ``x`` along its last axis, the non-negative frequencies only:
    ``(..., n) -> (..., n // 2 + 1, 2)``."""

    __props__ = ("norm",)

    def __init__(self, norm: Any = None):
        self.norm = _norm(norm)

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        dtype = _real_dtype(x, "rfft")
        if x.type.ndim < 1:
            raise ValueError(f"rfft: input {x.describe()} needs at least 1 dimension")
        n = x.type.shape[-1]
        shape = x.type.shape[:-1] + (None if n is None else n // 2 + 1, 2)
        return Apply(self, [x], [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        shape = input_shapes[0]
        return [tuple(shape[:-1]) + (shape[-1] // 2 + 1, 2)]

    def perform(self, node, inputs, output_storage):
        (x,) = inputs
        if x.shape[-1] == 0:
            raise ValueError("rfft: the transformed axis has length 0")
        out = np.fft.rfft(x, axis=-1, norm=self.norm)
        output_storage[0][0] = _to_pairs(out, node.outputs[0].type.numpy_dtype)

    def grad(self, inputs, output_grads):
        (x,) = inputs
        return [RFFTAdjoint(_SWAP[self.norm])(output_grads[0], shape_entries(x)[-1])]


class RFFTAdjoint(Op):
    """The adjoint of ``rfft`` (its gradient): (re, im) pairs ``(..., n // 2 + 1, 2)``
    and the length ``n`` -> real ``(..., n)``, ``Re(ifft(zero-padded input))``. ``norm``
    is the ``ifft`` normalization (the swapped one of the ``rfft``)."""

    __props__ = ("norm",)

    def __init__(self, norm: Any = None):
        self.norm = _norm(norm)

    def make_node(self, g: Any, n: Any) -> Apply:
        g, n = as_tensor_variable(g), as_tensor_variable(n)
        _check_pairs(g, "RFFTAdjoint")
        if n.type.ndim != 0 or np.dtype(n.type.dtype).kind not in "iu":
            raise TypeError(f"RFFTAdjoint: n {n.describe()} must be an integer scalar")
        dtype = _real_dtype(g, "RFFTAdjoint")
        static_n = getattr(n, "data", None)
        shape = g.type.shape[:-2] + (None if static_n is None else int(static_n),)
        return Apply(self, [g, n], [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0][:-2]) + (node.inputs[1],)]

    def perform(self, node, inputs, output_storage):
        g, n = inputs
        n = int(n)
        c = _to_complex(g, "RFFTAdjoint")
        if c.shape[-1] != n // 2 + 1:
            raise ValueError(f"RFFTAdjoint: {c.shape[-1]} bins do not match length {n}")
        full = np.zeros(c.shape[:-1] + (n,), dtype=c.dtype)
        full[..., : c.shape[-1]] = c
        out = np.fft.ifft(full, axis=-1, norm=self.norm).real
        output_storage[0][0] = np.ascontiguousarray(out, dtype=node.outputs[0].type.numpy_dtype)

    def grad(self, inputs, output_grads):
        return [RFFT(_SWAP[self.norm])(output_grads[0]), None]


def _hermitian_weights(m: int, is_odd: bool) -> np.ndarray:
    """How often each of the ``m`` bins appears in the full spectrum that irfft inverts."""
    w = np.full(m, 2.0)
    w[0] = 1.0
    if not is_odd and m > 1:
        w[-1] = 1.0
    return w


class IRFFT(Op):
    """The inverse of ``rfft``: (re, im) pairs ``(..., m, 2)`` -> real ``(..., n)`` with
    ``n = 2 * (m - 1) + is_odd``."""

    __props__ = ("norm", "is_odd")

    def __init__(self, norm: Any = None, is_odd: bool = False):
        self.norm = _norm(norm)
        self.is_odd = bool(is_odd)

    def _n(self, m: Any) -> Any:
        return 2 * (m - 1) + int(self.is_odd)

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        dtype = _real_dtype(x, "irfft")
        _check_pairs(x, "irfft")
        m = x.type.shape[-2]
        shape = x.type.shape[:-2] + (None if m is None else self._n(m),)
        return Apply(self, [x], [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0][:-2]) + (self._n(input_shapes[0][-2]),)]

    def perform(self, node, inputs, output_storage):
        c = _to_complex(inputs[0], "irfft")
        n = self._n(c.shape[-1])
        if n < 1:
            raise ValueError(f"irfft: {c.shape[-1]} bins give no output (is_odd={self.is_odd})")
        out = np.fft.irfft(c, n=n, axis=-1, norm=self.norm)
        output_storage[0][0] = np.ascontiguousarray(out, dtype=node.outputs[0].type.numpy_dtype)

    def grad(self, inputs, output_grads):
        return [IRFFTAdjoint(_SWAP[self.norm], self.is_odd)(output_grads[0])]


class IRFFTAdjoint(Op):
    """The adjoint of ``irfft`` (its gradient): real ``(..., n)`` -> (re, im) pairs
    ``(..., n // 2 + 1, 2)``, the ``rfft`` (with normalization ``norm``) with every bin
    that stands for two conjugate frequencies doubled."""

    __props__ = ("norm", "is_odd")

    def __init__(self, norm: Any = None, is_odd: bool = False):
        self.norm = _norm(norm)
        self.is_odd = bool(is_odd)

    def make_node(self, g: Any) -> Apply:
        g = as_tensor_variable(g)
        dtype = _real_dtype(g, "IRFFTAdjoint")
        if g.type.ndim < 1:
            raise ValueError(f"IRFFTAdjoint: input {g.describe()} needs at least 1 dimension")
        n = g.type.shape[-1]
        shape = g.type.shape[:-1] + (None if n is None else n // 2 + 1, 2)
        return Apply(self, [g], [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        shape = input_shapes[0]
        return [tuple(shape[:-1]) + (shape[-1] // 2 + 1, 2)]

    def perform(self, node, inputs, output_storage):
        (g,) = inputs
        if g.shape[-1] % 2 != int(self.is_odd):
            raise ValueError(f"IRFFTAdjoint: length {g.shape[-1]} contradicts is_odd={self.is_odd}")
        c = np.fft.rfft(g, axis=-1, norm=self.norm)
        c *= _hermitian_weights(c.shape[-1], self.is_odd)
        output_storage[0][0] = _to_pairs(c, node.outputs[0].type.numpy_dtype)

    def grad(self, inputs, output_grads):
        return [IRFFT(_SWAP[self.norm], self.is_odd)(output_grads[0])]


def fft(x: Any, norm: Any = None) -> Variable:
    """DFT along the last complex axis of (re, im) pairs ``(..., n, 2)``."""
    return FFT(False, norm)(x)


def ifft(x: Any, norm: Any = None) -> Variable:
    """Inverse DFT along the last complex axis of (re, im) pairs ``(..., n, 2)``."""
    return FFT(True, norm)(x)


def rfft(x: Any, norm: Any = None) -> Variable:
    """DFT of real ``x`` along its last axis: ``(..., n) -> (..., n // 2 + 1, 2)``."""
    return RFFT(norm)(x)


def irfft(x: Any, norm: Any = None, is_odd: bool = False) -> Variable:
    """Inverse of ``rfft``: ``(..., m, 2) -> (..., 2 * (m - 1) + is_odd)`` (real)."""
    return IRFFT(norm, is_odd)(x)
