"""Activations, softmax and the classification losses of ``tensorjit.tensor.nnet``.

Elementwise activations (``relu``, ``elu``, ``hard_sigmoid``) are compositions of
elementwise ops, so they fuse and differentiate like any expression. ``softmax`` and
``log_softmax`` are ops of their own (numerically stable: the maximum along the axis is
subtracted first), as are ``SelectClass`` (``x[..., y]`` for integer class indices, used
by ``categorical_crossentropy``) and ``OneHot``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.op import Op
from tensorjit.tensor import math as tm
from tensorjit.tensor.elemwise import scalar_name
from tensorjit.tensor.scalar import numpy_result_dtype
from tensorjit.tensor.subtensor import AdvancedIncSubtensor, AdvancedSubtensor
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable

sigmoid = tm.sigmoid
softplus = tm.softplus

__all__ = [
    "LogSoftmax",
    "OneHot",
    "SelectClass",
    "SelectClassGrad",
    "Softmax",
    "binary_crossentropy",
    "categorical_crossentropy",
    "elu",
    "hard_sigmoid",
    "log_softmax",
    "multiclass_hinge_loss",
    "relu",
    "sigmoid",
    "softmax",
    "softmax_crossentropy_with_logits",
    "softplus",
    "to_one_hot",
]


def _float_dtype(x: Variable, what: str) -> str:
    """The float dtype an op on ``x`` computes in (NumPy's ``exp`` promotion)."""
    kind = np.dtype(x.type.dtype).kind
    if kind == "c":
        raise TypeError(f"{what}: complex input {x.describe()} is not supported")
    if kind == "b":
        raise TypeError(f"{what}: boolean input {x.describe()} is not supported")
    return numpy_result_dtype(np.exp, (x.type.dtype,))


# ---------------------------------------------------------------- activations
def hard_sigmoid(x: Any) -> Variable:
    """Piecewise-linear sigmoid approximation ``clip(0.2 * x + 0.5, 0, 1)`` (as Theano)."""
    x = as_tensor_variable(x)
    return tm.minimum(tm.maximum(x * 0.2 + 0.5, 0.0), 1.0)


def relu(x: Any, alpha: Any = 0) -> Variable:
    """Rectifier ``max(x, 0)``; with ``alpha`` != 0 the leaky variant ``x if x > 0 else
    alpha * x``. ``alpha`` may be a Python number or a symbolic scalar."""
    x = as_tensor_variable(x)
    if isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and alpha == 0:
        return tm.maximum(x, 0)
    return tm.switch(tm.gt(x, 0), x, alpha * x)


def elu(x: Any, alpha: Any = 1) -> Variable:
    """Exponential linear unit: ``x if x > 0 else alpha * (exp(x) - 1)``."""
    x = as_tensor_variable(x)
    # expm1 of min(x, 0): the branch switch() discards never overflows (no inf * 0 grads).
    return tm.switch(tm.gt(x, 0), x, alpha * tm.expm1(tm.minimum(x, 0)))


# ---------------------------------------------------------------- softmax
def _softmax_axis(x: Variable, axis: Any, what: str) -> tuple[int, ...]:
    if x.type.ndim == 0:
        raise ValueError(f"{what}: input {x.describe()} is 0-d; it needs at least 1 dimension")
    return tm.normalize_axis(axis, x.type.ndim, what)


class Softmax(Op):
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (a tuple of axes)."""

    __props__ = ("axis",)

    def __init__(self, axis: tuple[int, ...]):
        self.axis = tuple(axis)

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        dtype = _float_dtype(x, "softmax")
        if any(a >= x.type.ndim for a in self.axis) or x.type.ndim == 0:
            raise ValueError(f"softmax: axis {self.axis} out of range for {x.describe()}")
        return Apply(self, [x], [TensorType(dtype, x.type.shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = _np_softmax(inputs[0], self.axis, node.outputs[0].type.numpy_dtype)

    def L_op(self, inputs, outputs, output_grads):
        (x,) = inputs
        (sm,) = outputs
        (g,) = output_grads
        # A term h / sm of g is the gradient of log(sm) (a cross-entropy cost): its share,
        # (h / sm - sum(h)) * sm, is h - sm * sum(h), written so. Where the softmax
        # underflows to 0 the first form is inf * 0 = NaN (a confidently wrong
        # prediction); sm as exp(log_softmax(x)) lets a cost that only takes log(sm)
        # (log_softmax after the stabilize phase) compute no softmax at all.
        h, rest = _terms_over(g, sm)
        grads = []
        if h is not None:
            probs = tm.exp(LogSoftmax(self.axis)(x))
            grads.append(h - probs * tm.sum(h, axis=self.axis, keepdims=True))
        if rest is not None:
            grads.append((rest - tm.sum(rest * sm, axis=self.axis, keepdims=True)) * sm)
        return [grads[0] if len(grads) == 1 else grads[0] + grads[1]]


def _terms_over(g: Variable, sm: Variable) -> tuple[Variable | None, Variable | None]:
    """``(h, rest)`` with ``g = h / sm + rest``: ``h`` the sum of the numerators of g's
    terms (g a sum, or one term) that are quotients by ``sm`` (see ``_over_softmax``),
    ``rest`` the sum of the others; None for an empty sum."""
    node = g.owner
    terms = [g]
    if scalar_name(node) == "add" and all(t.type == g.type for t in node.inputs):
        terms = list(node.inputs)
    over, rest = [], []
    for term in terms:
        h = _over_softmax(term, sm)
        if h is None:
            rest.append(term)
        else:
            over.append(h)
    if not over:
        return None, g
    return _sum_of(over), _sum_of(rest)


def _sum_of(terms: list[Variable]) -> Variable | None:
    if not terms:
        return None
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def _over_softmax(term: Variable, sm: Variable) -> Variable | None:
    """``h`` (of term's type) when ``term`` is ``h / sm``: the quotient itself, or
    quotients by selected entries of ``sm`` scattered into zeros (the gradients of
    ``log(sm)[rows, y]`` and of ``log(sm[rows, y])`` / ``log(select_class(sm, y))``),
    whose ``h`` scatters the numerators; else None."""
    owner = term.owner
    if scalar_name(owner) == "true_div" and owner.inputs[1] is sm:
        h = owner.inputs[0]
        return h if h.type == term.type else None
    if owner is None:
        return None
    op = owner.op
    if isinstance(op, SelectClassGrad):
        scores, quotient, y = owner.inputs
        gz = _numerator(quotient, lambda d: isinstance(d.owner.op, SelectClass)
                        and d.owner.inputs == [sm, y])  # fmt: skip
        return None if gz is None else SelectClassGrad()(scores, gz, y)
    if isinstance(op, AdvancedIncSubtensor) and not op.set_instead_of_inc and not op.inplace:
        zeros, quotient, *idx = owner.inputs
        if not _is_zeros(zeros) or zeros.type != sm.type:  # (a shape that broadcasts)
            return None
        gz = _numerator(quotient, lambda d: isinstance(d.owner.op, AdvancedSubtensor)
                        and d.owner.op.entries == op.entries
                        and d.owner.inputs == [sm, *idx])  # fmt: skip
        return None if gz is None else AdvancedIncSubtensor(op.entries, False)(zeros, gz, *idx)
    return None


def _numerator(quotient: Variable, denominator_ok: Any) -> Variable | None:
    """``gz`` when ``quotient`` is ``gz / d`` with ``gz`` of its type and
    ``denominator_ok(d)``; else None."""
    owner = quotient.owner
    if scalar_name(owner) != "true_div":
        return None
    gz, d = owner.inputs
    if gz.type != quotient.type or d.owner is None or not denominator_ok(d):
        return None
    return gz


def _is_zeros(v: Variable) -> bool:
    """Whether ``v`` is ``alloc(0, ...)`` (``zeros_like``)."""
    owner = v.owner
    if owner is None or not isinstance(owner.op, tm.Alloc):
        return False
    value = owner.inputs[0]
    return isinstance(value, Constant) and not np.any(value.data)


def _np_softmax(x: np.ndarray, axis: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    x = np.asarray(x, dtype=dtype)
    if x.size == 0:
        return np.empty(x.shape, dtype=dtype)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    e /= np.sum(e, axis=axis, keepdims=True)
    return e


def _np_log_softmax(x: np.ndarray, axis: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    x = np.asarray(x, dtype=dtype)
    if x.size == 0:
        return np.empty(x.shape, dtype=dtype)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    shifted -= np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    return shifted


class LogSoftmax(Op):
    """``x - logsumexp(x)`` along ``axis`` (a tuple of axes), computed stably."""

    __props__ = ("axis",)

    def __init__(self, axis: tuple[int, ...]):
        self.axis = tuple(axis)

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        dtype = _float_dtype(x, "log_softmax")
        if any(a >= x.type.ndim for a in self.axis) or x.type.ndim == 0:
            raise ValueError(f"log_softmax: axis {self.axis} out of range for {x.describe()}")
        return Apply(self, [x], [TensorType(dtype, x.type.shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]

    def perform(self, node, inputs, output_storage):
        dtype = node.outputs[0].type.numpy_dtype
        output_storage[0][0] = _np_log_softmax(inputs[0], self.axis, dtype)

    def L_op(self, inputs, outputs, output_grads):
        (lsm,) = outputs
        (g,) = output_grads
        return [g - tm.exp(lsm) * tm.sum(g, axis=self.axis, keepdims=True)]


def softmax(x: Any, axis: Any = -1) -> Variable:
    """Softmax along ``axis`` (an int, a tuple of ints, or None for all axes)."""
    x = as_tensor_variable(x)
    return Softmax(_softmax_axis(x, axis, "softmax"))(x)


def log_softmax(x: Any, axis: Any = -1) -> Variable:
    """Log of the softmax along ``axis``, without the ``log(0)`` of a saturated softmax."""
    x = as_tensor_variable(x)
    return LogSoftmax(_softmax_axis(x, axis, "log_softmax"))(x)


# ---------------------------------------------------------------- class selection
def _check_class_indices(x: Variable, y: Variable, what: str) -> None:
    if np.dtype(y.type.dtype).kind not in "iu":
        raise TypeError(f"{what}: class indices {y.describe()} must have an integer dtype")
    if x.type.ndim != y.type.ndim + 1:
        raise ValueError(
            f"{what}: {x.describe()} must have one more dimension (the classes) than the class "
            f"indices {y.describe()}"
        )
    for a, (sx, sy) in enumerate(zip(x.type.shape, y.type.shape)):
        if sx is not None and sy is not None and sx != sy:
            raise ValueError(
                f"{what}: dimension {a} of {x.describe()} has length {sx} but the class "
                f"indices {y.describe()} have length {sy}"
            )


def class_index_error(what: str, bad: int | None, n: int) -> IndexError:
    """The error of a class index outside ``[0, n)``, in the words every kernel uses
    (Op.perform, the host's C kernels, the device kernels' deferred checks)."""
    return IndexError(f"{what}: class index {bad} is out of range for {n} classes")


def _check_indices_runtime(x: np.ndarray, y: np.ndarray, what: str) -> None:
    if x.shape[:-1] != y.shape:
        raise ValueError(
            f"{what}: leading shape {x.shape[:-1]} of the scores does not match the class "
            f"indices' shape {y.shape}"
        )
    n = x.shape[-1]
    if y.size and (y.min() < 0 or y.max() >= n):
        raise class_index_error(what, y[(y < 0) | (y >= n)].flat[0], n)


class SelectClass(Op):
    """``x[..., y]``: for each leading index, the entry of the last axis of ``x`` that the
    integer ``y`` names (``np.take_along_axis``)."""

    __props__ = ()

    def make_node(self, x: Any, y: Any) -> Apply:
        x, y = as_tensor_variable(x), as_tensor_variable(y)
        _check_class_indices(x, y, "SelectClass")
        shape = tuple(
            sx if sx is not None else sy for sx, sy in zip(x.type.shape[:-1], y.type.shape)
        )
        return Apply(self, [x, y], [TensorType(x.type.dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[1])]

    def perform(self, node, inputs, output_storage):
        x, y = inputs
        _check_indices_runtime(x, y, "SelectClass")
        out = np.take_along_axis(x, y[..., None].astype(np.intp), axis=-1)[..., 0]
        output_storage[0][0] = np.array(out, dtype=x.dtype)

    def grad(self, inputs, output_grads):
        x, y = inputs
        (g,) = output_grads
        if np.dtype(x.type.dtype).kind not in "fc":
            return [None, None]
        return [SelectClassGrad()(x, g, y), None]


class SelectClassGrad(Op):
    """Zeros shaped like ``x`` with ``g`` scattered to ``[..., y]`` (SelectClass's gradient;
    only the shape of ``x`` is read)."""

    __props__ = ()

    def make_node(self, x: Any, g: Any, y: Any) -> Apply:
        x, g, y = (as_tensor_variable(v) for v in (x, g, y))
        _check_class_indices(x, y, "SelectClassGrad")
        if g.type.ndim != y.type.ndim:
            raise ValueError(f"SelectClassGrad: {g.describe()} must be shaped like {y.describe()}")
        dtype = np.result_type(x.type.dtype, g.type.dtype).name
        return Apply(self, [x, g, y], [TensorType(dtype, x.type.shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0])]

    def perform(self, node, inputs, output_storage):
        x, g, y = inputs
        _check_indices_runtime(x, y, "SelectClassGrad")
        out = np.zeros(x.shape, dtype=node.outputs[0].type.numpy_dtype)
        np.put_along_axis(out, y[..., None].astype(np.intp), g[..., None], axis=-1)
        output_storage[0][0] = out

    def grad(self, inputs, output_grads):
        x, g, y = inputs
        (gg,) = output_grads
        return [None, SelectClass()(gg, y), None]


class OneHot(Op):
    """``y`` (integers) as one-hot rows of length ``n_classes`` (a new last axis)."""

    __props__ = ("dtype",)

    def __init__(self, dtype: str):
        self.dtype = dtype

    def host_inputs(self, node: Apply) -> range:
        return range(1, 2)  # the number of classes

    def make_node(self, y: Any, n_classes: Any) -> Apply:
        y, n = as_tensor_variable(y), as_tensor_variable(n_classes)
        if np.dtype(y.type.dtype).kind not in "iu":
            raise TypeError(f"to_one_hot: class indices {y.describe()} must be integers")
        if n.type.ndim != 0 or np.dtype(n.type.dtype).kind not in "iu":
            raise TypeError(f"to_one_hot: n_classes {n.describe()} must be an integer scalar")
        static_n = getattr(n, "data", None)
        static = y.type.shape + (None if static_n is None else int(static_n),)
        return Apply(self, [y, n], [TensorType(self.dtype, static).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(input_shapes[0]) + (node.inputs[1],)]

    def perform(self, node, inputs, output_storage):
        y, n = inputs
        n = int(n)
        if y.size and (y.min() < 0 or y.max() >= n):
            bad = y[(y < 0) | (y >= n)].flat[0]
            raise class_index_error("to_one_hot", bad, n)
        output_storage[0][0] = (y[..., None] == np.arange(n)).astype(self.dtype)

    def grad(self, inputs, output_grads):
        return [None, None]


def to_one_hot(y: Any, n_classes: Any, dtype: Any = None) -> Variable:
    """One-hot encoding of integer class indices ``y`` (float ``floatX`` by default)."""
    from tensorjit.tensor.type import normalize_dtype

    return OneHot(normalize_dtype(dtype))(y, n_classes)


# ---------------------------------------------------------------- losses
def _is_index_target(coding: Variable, target: Variable) -> bool:
    return np.dtype(target.type.dtype).kind in "iu" and target.type.ndim == coding.type.ndim - 1


def categorical_crossentropy(coding_dist: Any, true_dist: Any) -> Variable:
    """Cross-entropy between predicted distributions (rows of ``coding_dist``) and targets.

    ``true_dist`` is either integer class indices (one fewer dimension: the loss is
    ``-log(coding_dist[i, true_dist[i]])``) or distributions shaped like
    ``coding_dist`` (``-sum(true_dist * log(coding_dist), axis=-1)``), as in Theano.
    Returns one loss per row.
    """
    coding = as_tensor_variable(coding_dist)
    target = as_tensor_variable(true_dist)
    if coding.type.ndim == 0:
        raise ValueError(f"categorical_crossentropy: {coding.describe()} must have a class axis")
    if _is_index_target(coding, target):
        return -tm.log(SelectClass()(coding, target))
    if target.type.ndim != coding.type.ndim:
        raise ValueError(
            "categorical_crossentropy: true_dist must be integer class indices with one "
            f"dimension fewer than coding_dist, or shaped like it; got {target.describe()} "
            f"for {coding.describe()}"
        )
    return -tm.sum(target * tm.log(coding), axis=-1)


def softmax_crossentropy_with_logits(logits: Any, labels: Any) -> Variable:
    """``categorical_crossentropy(softmax(logits), labels)`` computed stably from the
    unnormalized ``logits`` (through ``log_softmax``): finite even when the softmax
    saturates. ``labels``: integer class indices or distributions, as there."""
    logits = as_tensor_variable(logits)
    labels = as_tensor_variable(labels)
    lsm = log_softmax(logits, axis=-1)
    if _is_index_target(logits, labels):
        return -SelectClass()(lsm, labels)
    if labels.type.ndim != logits.type.ndim:
        raise ValueError(
            "softmax_crossentropy_with_logits: labels must be integer class indices with one "
            f"dimension fewer than the logits, or shaped like them; got {labels.describe()} "
            f"for {logits.describe()}"
        )
    return -tm.sum(labels * lsm, axis=-1)


def binary_crossentropy(output: Any, target: Any) -> Variable:
    """Elementwise ``-(target * log(output) + (1 - target) * log(1 - output))``."""
    output, target = as_tensor_variable(output), as_tensor_variable(target)
    return -(target * tm.log(output) + (1.0 - target) * tm.log(1.0 - output))


def multiclass_hinge_loss(predictions: Any, targets: Any, delta: Any = 1) -> Variable:
    """Multi-class hinge loss (as Lasagne): ``max(0, max_{j != t} p_j - p_t + delta)``
    per row. ``targets``: integer class indices or one-hot rows shaped like
    ``predictions``."""
    pred = as_tensor_variable(predictions)
    targ = as_tensor_variable(targets)
    if pred.type.ndim != 2:
        raise ValueError(f"multiclass_hinge_loss: predictions {pred.describe()} must be a matrix")
    if _is_index_target(pred, targ):
        mask = to_one_hot(targ, pred.shape[1], dtype="bool")
    elif targ.type.ndim == 2:
        mask = tm.neq(targ, 0)
    else:
        raise ValueError(
            "multiclass_hinge_loss: targets must be an integer vector of class indices or a "
            f"one-hot matrix, got {targ.describe()} for {pred.describe()}"
        )
    corrects = tm.sum(tm.switch(mask, pred, 0), axis=1)
    rest = tm.max(tm.switch(mask, -np.inf, pred), axis=1)
    return relu(rest - corrects + delta)
