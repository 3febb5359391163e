"""Table 1's "extra" array ops with NumPy semantics: tile, repeat, roll, sort/argsort,
cumsum/cumprod, diff, bincount, unique, searchsorted, take_along_axis, and (re-exported
from shape_ops) concatenate/join/stack/split/swapaxes/squeeze/expand_dims/transpose/flatten.

Ops whose ``axis`` may be None (NumPy: "work on the flattened array") take an int axis;
the functions flatten first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.op import Op
from tensorjit.tensor.shape_ops import (
    Join,
    Split,
    _int_scalar,
    _one_axis,
    concatenate,
    expand_dims,
    flatten,
    join,
    reshape,
    shape_entries,
    split,
    squeeze,
    stack,
    swapaxes,
    transpose,
)
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable, constant

__all__ = [
    "Argsort",
    "Join",
    "Split",
    "Bincount",
    "CumOp",
    "CumprodGrad",
    "Repeat",
    "RepeatGrad",
    "Roll",
    "ScatterAddAlongAxis",
    "SearchSorted",
    "Sort",
    "TakeAlongAxis",
    "Tile",
    "Unique",
    "argsort",
    "bincount",
    "concatenate",
    "cumprod",
    "cumsum",
    "diff",
    "expand_dims",
    "flatten",
    "join",
    "repeat",
    "roll",
    "searchsorted",
    "sort",
    "split",
    "squeeze",
    "stack",
    "swapaxes",
    "take_along_axis",
    "tile",
    "transpose",
    "unique",
]


def _is_float(var: Variable) -> bool:
    return np.dtype(var.type.dtype).kind in "fc"


def _check_int_tensor(var: Variable, what: str, name: str) -> None:
    if np.dtype(var.type.dtype).kind not in "iu":
        raise TypeError(f"{what}: {name} must be of an integer dtype, got {var.describe()}")


def _flip(x: Variable, axis: int) -> Variable:
    from tensorjit.tensor.subtensor import getitem

    return getitem(x, (slice(None),) * axis + (slice(None, None, -1),))


def _check_axis(op: Op, x: Variable) -> None:
    if not 0 <= op.axis < x.type.ndim:  # type: ignore[attr-defined]
        raise ValueError(f"{op}: axis {op.axis} is out of range for {x.describe()}")  # type: ignore[attr-defined]


# ---------------------------------------------------------------- tile
class Tile(Op):
    """``numpy.tile`` for ``x`` and one int64 scalar repetition count per dimension of x."""

    __props__ = ("ndim",)
    constant_folding = False  # the result can be much bigger than the inputs

    def __init__(self, ndim: int):
        self.ndim = int(ndim)

    def make_node(self, x: Any, *reps: Any) -> Apply:
        x = as_tensor_variable(x)
        if x.type.ndim != self.ndim or len(reps) != self.ndim:
            raise ValueError(
                f"Tile({self.ndim}) takes a {self.ndim}-d tensor and {self.ndim} repetition "
                f"counts, got {x.describe()} and {len(reps)} counts"
            )
        reps_ = [_int_scalar(r, "tile", "a repetition count") for r in reps]
        shape: list[int | None] = []
        for s, r in zip(x.type.shape, reps_):
            k = int(r.data) if isinstance(r, Constant) else None
            if k is not None and k < 0:
                raise ValueError(f"tile: negative repetition count {k} for {x.describe()}")
            shape.append(None if s is None or k is None else s * k)
        return Apply(self, [x, *reps_], [TensorType(x.type.dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        from tensorjit.tensor.math import mul

        return [tuple(mul(s, r) for s, r in zip(input_shapes[0], node.inputs[1:]))]

    def perform(self, node, inputs, output_storage):
        x, *reps = inputs
        reps = tuple(int(r) for r in reps)
        if any(r < 0 for r in reps):
            raise ValueError(f"tile: negative repetition counts {reps} for {node.inputs[0]}")
        output_storage[0][0] = np.asarray(np.tile(x, reps), dtype=x.dtype)

    def grad(self, inputs, output_grads):
        from tensorjit.tensor.math import sum as tsum

        x, *reps = inputs
        (g,) = output_grads
        if not _is_float(x):
            return [None] * len(inputs)
        if self.ndim == 0:
            return [g]
        interleaved: list[Any] = []
        for r, s in zip(reps, shape_entries(x)):
            interleaved += [r, s]
        gx = tsum(reshape(g, interleaved), axis=tuple(range(0, 2 * self.ndim, 2)))
        return [gx] + [None] * len(reps)


def tile(x: Any, reps: Any) -> Variable:
    """``numpy.tile(x, reps)``; ``reps`` is an int, a sequence of ints / integer scalars, or
    an integer vector of static length."""
    x = as_tensor_variable(x)
    if isinstance(reps, Variable) and reps.type.ndim == 1:
        from tensorjit.tensor.subtensor import getitem

        n = reps.type.shape[0]
        if n is None:
            raise ValueError(f"tile: the length of reps {reps.describe()} must be known")
        _check_int_tensor(reps, "tile", "reps")
        reps = [getitem(reps, i) for i in range(n)]
    elif isinstance(reps, (int, np.integer, Variable)):
        reps = [reps]
    reps = list(reps)
    d = max(len(reps), x.type.ndim)
    reps = [1] * (d - len(reps)) + reps
    if x.type.ndim < d:
        x = expand_dims(x, tuple(range(d - x.type.ndim)))
    return Tile(d)(x, *reps)


# ---------------------------------------------------------------- repeat
class Repeat(Op):
    """``numpy.repeat(x, repeats, axis)`` with ``repeats`` an integer scalar, or a vector
    with one count per element of ``x`` along ``axis``."""

    __props__ = ("axis",)
    constant_folding = False  # the result can be much bigger than the inputs

    def __init__(self, axis: int):
        self.axis = int(axis)

    def make_node(self, x: Any, repeats: Any) -> Apply:
        x = as_tensor_variable(x)
        repeats = as_tensor_variable(repeats)
        _check_axis(self, x)
        _check_int_tensor(repeats, "repeat", "repeats")
        if repeats.type.ndim > 1:
            raise ValueError(
                f"repeat: repeats must be a scalar or a vector, got {repeats.describe()}"
            )
        if repeats.type.dtype != "int64":
            from tensorjit.tensor.math import cast

            repeats = cast(repeats, "int64")
        length = x.type.shape[self.axis]
        out_len: int | None = None
        if repeats.type.ndim == 1:
            n = repeats.type.shape[0]
            if n is not None and length is not None and n != length:
                raise ValueError(
                    f"repeat: repeats {repeats.describe()} has {n} entries but dimension "
                    f"{self.axis} of {x.describe()} has length {length}"
                )
        if isinstance(repeats, Constant):
            data = np.asarray(repeats.data)
            if np.any(data < 0):
                raise ValueError(f"repeat: negative repeats {data.tolist()}")
            if data.ndim == 1:
                out_len = int(data.sum())
            elif length is not None:
                out_len = length * int(data)
        shape = list(x.type.shape)
        shape[self.axis] = out_len
        return Apply(self, [x, repeats], [TensorType(x.type.dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        from tensorjit.tensor.math import mul
        from tensorjit.tensor.math import sum as tsum

        repeats = node.inputs[1]
        x_shape = input_shapes[0]
        n = tsum(repeats) if repeats.type.ndim == 1 else mul(x_shape[self.axis], repeats)
        return [tuple(n if d == self.axis else s for d, s in enumerate(x_shape))]

    def perform(self, node, inputs, output_storage):
        x, repeats = inputs
        if np.any(repeats < 0):
            raise ValueError(f"repeat: negative repeats {np.asarray(repeats).tolist()}")
        if repeats.ndim == 1 and repeats.shape[0] != x.shape[self.axis]:
            raise ValueError(
                f"repeat: repeats {node.inputs[1].describe()} has {repeats.shape[0]} entries "
                f"but dimension {self.axis} of {node.inputs[0].describe()} has length "
                f"{x.shape[self.axis]}"
            )
        output_storage[0][0] = np.repeat(x, repeats, axis=self.axis)

    def grad(self, inputs, output_grads):
        from tensorjit.tensor.math import sum as tsum

        x, repeats = inputs
        (g,) = output_grads
        if not _is_float(x):
            return [None, None]
        if repeats.type.ndim == 0:
            entries: list[Any] = shape_entries(x)
            entries = (
                entries[: self.axis] + [entries[self.axis], repeats] + entries[self.axis + 1 :]
            )
            return [tsum(reshape(g, entries), axis=self.axis + 1), None]
        return [RepeatGrad(self.axis)(g, repeats), None]


class RepeatGrad(Op):
    """The gradient of Repeat with a vector of counts: sums of ``g``'s consecutive
    segments of ``repeats[i]`` elements along ``axis``."""

    __props__ = ("axis",)

    def __init__(self, axis: int):
        self.axis = int(axis)

    def make_node(self, g: Any, repeats: Any) -> Apply:
        g = as_tensor_variable(g)
        repeats = as_tensor_variable(repeats)
        _check_axis(self, g)
        if repeats.type.ndim != 1:
            raise ValueError(f"RepeatGrad: repeats must be a vector, got {repeats.describe()}")
        _check_int_tensor(repeats, "RepeatGrad", "repeats")
        shape = list(g.type.shape)
        shape[self.axis] = repeats.type.shape[0]
        return Apply(self, [g, repeats], [TensorType(g.type.dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        g_shape, r_shape = input_shapes
        return [tuple(r_shape[0] if d == self.axis else s for d, s in enumerate(g_shape))]

    def perform(self, node, inputs, output_storage):
        g, repeats = inputs
        if int(np.sum(repeats)) != g.shape[self.axis]:
            raise ValueError(
                f"RepeatGrad: repeats add up to {int(np.sum(repeats))}, but dimension "
                f"{self.axis} of the gradient has length {g.shape[self.axis]}"
            )
        gm = np.moveaxis(g, self.axis, 0)
        out = np.zeros((len(repeats),) + gm.shape[1:], dtype=g.dtype)
        np.add.at(out, np.repeat(np.arange(len(repeats)), repeats), gm)
        output_storage[0][0] = np.ascontiguousarray(np.moveaxis(out, 0, self.axis))

    def grad(self, inputs, output_grads):
        return [Repeat(self.axis)(output_grads[0], inputs[1]), None]


def repeat(x: Any, repeats: Any, axis: Any = None) -> Variable:
    """``numpy.repeat``: each element of ``x`` repeated ``repeats`` times along ``axis``
    (None: of the flattened ``x``). ``repeats`` is an int, an integer scalar, or a vector
    with one count per element along ``axis`` (a vector of static length 1 counts for
    all; other vectors must match the length at run time)."""
    x = as_tensor_variable(x)
    if axis is None:
        x = flatten(x) if x.type.ndim != 1 else x
        axis = 0
    axis = _one_axis(axis, x.type.ndim, "repeat")
    if isinstance(repeats, (list, tuple, np.ndarray)) and not any(
        isinstance(r, Variable) for r in repeats
    ):
        repeats = constant(np.asarray(repeats, dtype="int64"))
    repeats = as_tensor_variable(repeats)
    if repeats.type.ndim == 1 and repeats.type.shape[0] == 1 and x.type.shape[axis] != 1:
        from tensorjit.tensor.subtensor import getitem

        repeats = getitem(repeats, 0)
    return Repeat(axis)(x, repeats)


# ---------------------------------------------------------------- roll
class Roll(Op):
    """``numpy.roll(x, shift, axis)`` for one int axis, or None (the flattened order)."""

    __props__ = ("axis",)

    def __init__(self, axis: int | None):
        self.axis = None if axis is None else int(axis)

    def make_node(self, x: Any, shift: Any) -> Apply:
        x = as_tensor_variable(x)
        if self.axis is not None:
            _check_axis(self, x)
        shift = _int_scalar(shift, "roll", "shift")
        return Apply(self, [x, shift], [x.type.make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        x, shift = inputs
        output_storage[0][0] = np.roll(x, int(shift), axis=self.axis)

    def grad(self, inputs, output_grads):
        from tensorjit.tensor.math import neg

        x, shift = inputs
        if not _is_float(x):
            return [None, None]
        return [Roll(self.axis)(output_grads[0], neg(shift)), None]


def roll(x: Any, shift: Any, axis: Any = None) -> Variable:
    """``numpy.roll``: elements shifted by ``shift`` along ``axis`` (None: flattened order,
    same shape); ``shift`` and ``axis`` may be matching tuples."""
    x = as_tensor_variable(x)
    if axis is None:
        return Roll(None)(x, shift)
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    shifts = list(shift) if isinstance(shift, (list, tuple)) else [shift] * len(axes)
    if len(shifts) != len(axes):
        if len(axes) == 1:
            axes = axes * len(shifts)
        else:
            raise ValueError(f"roll: shift {shift!r} and axis {axis!r} do not match in length")
    out = x
    for s, a in zip(shifts, axes):
        out = Roll(_one_axis(a, x.type.ndim, "roll"))(out, s)
    return out


# ---------------------------------------------------------------- sort / argsort
_SORT_KINDS = ("quicksort", "mergesort", "heapsort", "stable")


class Sort(Op):
    """``numpy.sort`` along one axis."""

    __props__ = ("axis", "kind")

    def __init__(self, axis: int, kind: str = "quicksort"):
        if kind not in _SORT_KINDS:
            raise ValueError(f"sort: kind must be one of {_SORT_KINDS}, got {kind!r}")
        self.axis, self.kind = int(axis), kind

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        _check_axis(self, x)
        return Apply(self, [x], [x.type.make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.sort(inputs[0], axis=self.axis, kind=self.kind)

    def grad(self, inputs, output_grads):
        (x,) = inputs
        if not _is_float(x):
            return [None]
        # sort(x) = take_along_axis(x, p); its gradient puts g back through p, which is
        # taking g along the inverse permutation argsort(p).
        perm = Argsort(self.axis, self.kind)(x)
        inverse = Argsort(self.axis, "stable")(perm)
        return [TakeAlongAxis(self.axis)(output_grads[0], inverse)]


class Argsort(Op):
    """``numpy.argsort`` along one axis (int64 indices)."""

    __props__ = ("axis", "kind")

    def __init__(self, axis: int, kind: str = "quicksort"):
        if kind not in _SORT_KINDS:
            raise ValueError(f"argsort: kind must be one of {_SORT_KINDS}, got {kind!r}")
        self.axis, self.kind = int(axis), kind

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        _check_axis(self, x)
        return Apply(self, [x], [TensorType("int64", x.type.shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        out = np.argsort(inputs[0], axis=self.axis, kind=self.kind)
        output_storage[0][0] = np.asarray(out, dtype="int64")

    def grad(self, inputs, output_grads):
        # Piecewise constant in x: the gradient is zero wherever it is defined.
        from tensorjit.tensor.math import zeros_like

        (x,) = inputs
        return [zeros_like(x) if _is_float(x) else None]


def _sort_input(x: Any, axis: Any, what: str) -> tuple[Variable, int]:
    x = as_tensor_variable(x)
    if axis is None:
        return (flatten(x) if x.type.ndim != 1 else x), 0
    if x.type.ndim == 0:
        raise ValueError(f"{what}: can not sort the 0-d {x.describe()} along axis {axis}")
    return x, _one_axis(axis, x.type.ndim, what)


def sort(x: Any, axis: Any = -1, kind: str = "quicksort") -> Variable:
    """``numpy.sort(x, axis=-1)``; axis None sorts the flattened ``x``."""
    x, axis = _sort_input(x, axis, "sort")
    return Sort(axis, kind)(x)


def argsort(x: Any, axis: Any = -1, kind: str = "quicksort") -> Variable:
    """``numpy.argsort(x, axis=-1)``; axis None: indices into the flattened ``x``."""
    x, axis = _sort_input(x, axis, "argsort")
    return Argsort(axis, kind)(x)


# ---------------------------------------------------------------- take_along_axis
class TakeAlongAxis(Op):
    """``numpy.take_along_axis(arr, indices, axis)`` (indices of the same rank)."""

    __props__ = ("axis",)

    def __init__(self, axis: int):
        self.axis = int(axis)

    def make_node(self, arr: Any, indices: Any) -> Apply:
        arr = as_tensor_variable(arr)
        indices = as_tensor_variable(indices)
        _check_axis(self, arr)
        _check_int_tensor(indices, "take_along_axis", "indices")
        if indices.type.ndim != arr.type.ndim:
            raise ValueError(
                f"take_along_axis: indices {indices.describe()} must have as many dimensions "
                f"as {arr.describe()}"
            )
        return Apply(
            self,
            [arr, indices],
            [TensorType(arr.type.dtype, self._shape(arr, indices)).make_variable()],
        )

    def _shape(self, arr: Variable, indices: Variable) -> tuple:
        shape: list[int | None] = []
        for d, (a, i) in enumerate(zip(arr.type.shape, indices.type.shape)):
            if d == self.axis:
                shape.append(i)
            elif a is not None and i is not None and a != i and 1 not in (a, i):
                raise ValueError(
                    f"take_along_axis: {arr.describe()} and {indices.describe()} do not "
                    f"broadcast in dimension {d}"
                )
            elif a == 1 or i == 1:
                shape.append(i if a == 1 else a)
            else:
                shape.append(a if a is not None else i)
        return tuple(shape)

    def infer_shape(self, fgraph, node, input_shapes):
        arr, indices = node.inputs
        a_shape, i_shape = input_shapes
        result = []
        for d, (a, i) in enumerate(zip(a_shape, i_shape)):
            if d == self.axis or arr.type.shape[d] == 1:
                result.append(i)
            elif indices.type.shape[d] == 1:
                result.append(a)
            else:
                from tensorjit.tensor.math import maximum

                result.append(maximum(a, i))
        return [tuple(result)]

    def perform(self, node, inputs, output_storage):
        arr, indices = inputs
        try:
            out = np.take_along_axis(arr, indices, axis=self.axis)
        except (IndexError, ValueError) as exc:
            raise type(exc)(
                f"take_along_axis of {node.inputs[0].describe()} (shape {arr.shape}) with "
                f"indices of shape {indices.shape}: {exc}"
            ) from None
        output_storage[0][0] = out

    def grad(self, inputs, output_grads):
        arr, indices = inputs
        if not _is_float(arr):
            return [None, None]
        scatter = ScatterAddAlongAxis(self.axis)(output_grads[0], indices, *shape_entries(arr))
        return [scatter, None]


class ScatterAddAlongAxis(Op):
    """The gradient of TakeAlongAxis: zeros of the given shape, with ``g`` added at the
    positions ``indices`` selected (repeated positions accumulate)."""

    __props__ = ("axis",)
    constant_folding = False  # the result can be much bigger than the inputs

    def __init__(self, axis: int):
        self.axis = int(axis)

    def make_node(self, g: Any, indices: Any, *shape: Any) -> Apply:
        g = as_tensor_variable(g)
        indices = as_tensor_variable(indices)
        dims = [_int_scalar(s, "ScatterAddAlongAxis", "a shape entry") for s in shape]
        if not (g.type.ndim == indices.type.ndim == len(dims)):
            raise ValueError(
                f"ScatterAddAlongAxis: {g.describe()}, {indices.describe()} and the shape "
                f"({len(dims)} entries) must have the same rank"
            )
        _check_axis(self, g)
        _check_int_tensor(indices, "ScatterAddAlongAxis", "indices")
        static = [int(d.data) if isinstance(d, Constant) else None for d in dims]
        return Apply(self, [g, indices, *dims], [TensorType(g.type.dtype, static).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [tuple(node.inputs[2:])]

    def perform(self, node, inputs, output_storage):
        g, indices, *shape = inputs
        shape = tuple(int(s) for s in shape)
        out = np.zeros(shape, dtype=node.outputs[0].type.numpy_dtype)
        index = []
        for d, n in enumerate(shape):
            if d == self.axis:
                index.append(np.where(indices < 0, indices + n, indices))
            else:
                view = [1] * len(shape)
                view[d] = n
                index.append(np.arange(n).reshape(view))
        bshape = np.broadcast_shapes(*(i.shape for i in index))
        np.add.at(out, tuple(index), np.broadcast_to(g, bshape))
        output_storage[0][0] = out

    def grad(self, inputs, output_grads):
        g, indices, *shape = inputs
        return [TakeAlongAxis(self.axis)(output_grads[0], indices), None] + [None] * len(shape)


def take_along_axis(arr: Any, indices: Any, axis: Any) -> Variable:
    """``numpy.take_along_axis``; axis None takes from the flattened ``arr``."""
    arr = as_tensor_variable(arr)
    indices = as_tensor_variable(indices)
    if axis is None:
        arr = flatten(arr) if arr.type.ndim != 1 else arr
        axis = 0
    return TakeAlongAxis(_one_axis(axis, arr.type.ndim, "take_along_axis"))(arr, indices)


# ---------------------------------------------------------------- cumsum / cumprod
_CUM_FUNCS = {"add": np.cumsum, "mul": np.cumprod}


class CumOp(Op):
    """``numpy.cumsum`` (mode 'add') or ``numpy.cumprod`` (mode 'mul') along one axis.

    The dtype is NumPy's: small integers and bool accumulate in int64 (uint64).
    """

    __props__ = ("mode", "axis")

    def __init__(self, mode: str, axis: int):
        if mode not in _CUM_FUNCS:
            raise ValueError(f"CumOp: mode must be 'add' or 'mul', got {mode!r}")
        self.mode, self.axis = mode, int(axis)

    def __str__(self) -> str:
        return f"Cum{'sum' if self.mode == 'add' else 'prod'}{{axis={self.axis}}}"

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        _check_axis(self, x)
        dtype = _CUM_FUNCS[self.mode](np.ones(1, dtype=x.type.dtype)).dtype
        return Apply(self, [x], [TensorType(dtype, x.type.shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        dtype = node.outputs[0].type.numpy_dtype
        output_storage[0][0] = _CUM_FUNCS[self.mode](inputs[0], axis=self.axis, dtype=dtype)

    def grad(self, inputs, output_grads):
        (x,) = inputs
        (g,) = output_grads
        if not _is_float(x):
            return [None]
        if self.mode == "add":  # a reversed cumulative sum
            return [_flip(CumOp("add", self.axis)(_flip(g, self.axis)), self.axis)]
        return [CumprodGrad(self.axis)(x, g)]


class CumprodGrad(Op):
    """The gradient of cumprod, exact when ``x`` has zeros (no division by ``x``).

    With ``L_i`` the product of the ``x_k`` before ``i``, the gradient at ``i`` is
    ``L_i * S_i`` where ``S_i = g_i + x_{i+1} * S_{i+1}`` (a reverse recurrence).
    It has no gradient itself (cumprod is differentiable once).
    """

    __props__ = ("axis",)

    def __init__(self, axis: int):
        self.axis = int(axis)

    def make_node(self, x: Any, g: Any) -> Apply:
        x = as_tensor_variable(x)
        g = as_tensor_variable(g)
        _check_axis(self, x)
        if g.type.ndim != x.type.ndim:
            raise ValueError(f"CumprodGrad: {g.describe()} does not match {x.describe()}")
        dtype = np.result_type(x.type.dtype, g.type.dtype)
        return Apply(self, [x, g], [TensorType(dtype, x.type.shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        dtype = node.outputs[0].type.numpy_dtype
        x = np.moveaxis(np.asarray(inputs[0], dtype=dtype), self.axis, 0)
        g = np.moveaxis(np.asarray(inputs[1], dtype=dtype), self.axis, 0)
        n = x.shape[0]
        out = np.empty(x.shape, dtype=dtype)
        if n:
            prefix = np.ones_like(x)
            prefix[1:] = np.cumprod(x[:-1], axis=0)
            s = g[n - 1].copy()
            out[n - 1] = s
            for i in range(n - 2, -1, -1):
                s = g[i] + x[i + 1] * s
                out[i] = s
            out *= prefix
        output_storage[0][0] = np.ascontiguousarray(np.moveaxis(out, 0, self.axis))


def _cum(mode: str, x: Any, axis: Any, what: str) -> Variable:
    x = as_tensor_variable(x)
    if axis is None:
        x = flatten(x) if x.type.ndim != 1 else x
        axis = 0
    return CumOp(mode, _one_axis(axis, x.type.ndim, what))(x)


def cumsum(x: Any, axis: Any = None) -> Variable:
    """``numpy.cumsum``: running sums along ``axis`` (None: of the flattened ``x``)."""
    return _cum("add", x, axis, "cumsum")


def cumprod(x: Any, axis: Any = None) -> Variable:
    """``numpy.cumprod``: running products along ``axis`` (None: of the flattened ``x``).
    Its gradient is exact where ``x`` has zeros."""
    return _cum("mul", x, axis, "cumprod")


# ---------------------------------------------------------------- diff
def diff(x: Any, n: int = 1, axis: Any = -1) -> Variable:
    """``numpy.diff``: the ``n``-th discrete difference along ``axis`` (bool: not_equal)."""
    from tensorjit.tensor.math import neq, sub
    from tensorjit.tensor.subtensor import getitem

    x = as_tensor_variable(x)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise ValueError(f"diff: order n must be a non-negative int, got {n!r}")
    if n == 0:
        return x
    if x.type.ndim == 0:
        raise ValueError(
            f"diff requires input that is at least one dimensional, got {x.describe()}"
        )
    axis = _one_axis(axis, x.type.ndim, "diff")
    lead = (slice(None),) * axis
    op = neq if x.type.dtype == "bool" else sub
    for _ in range(n):
        x = op(getitem(x, lead + (slice(1, None),)), getitem(x, lead + (slice(None, -1),)))
    return x


# ---------------------------------------------------------------- bincount
class Bincount(Op):
    """``numpy.bincount(x, weights, minlength)`` of a vector of non-negative integers."""

    __props__ = ("minlength", "weighted")

    def __init__(self, minlength: int = 0, weighted: bool = False):
        if not isinstance(minlength, (int, np.integer)) or minlength < 0:
            raise ValueError(f"bincount: minlength must be a non-negative int, got {minlength!r}")
        self.minlength, self.weighted = int(minlength), bool(weighted)

    def make_node(self, x: Any, *weights: Any) -> Apply:
        x = as_tensor_variable(x)
        if x.type.ndim != 1:
            raise ValueError(f"bincount: x must be a vector, got {x.describe()}")
        if x.type.dtype == "bool" or np.dtype(x.type.dtype).kind not in "iu":
            raise TypeError(f"bincount: x must be of an integer dtype, got {x.describe()}")
        if len(weights) != int(self.weighted):
            raise ValueError(f"{self} takes {int(self.weighted)} weights input(s)")
        inputs = [x]
        dtype = "int64"
        if self.weighted:
            w = as_tensor_variable(weights[0])
            if w.type.ndim != 1:
                raise ValueError(f"bincount: weights must be a vector, got {w.describe()}")
            a, b = x.type.shape[0], w.type.shape[0]
            if a is not None and b is not None and a != b:
                raise ValueError(
                    f"bincount: weights {w.describe()} and x {x.describe()} differ in length"
                )
            inputs.append(w)
            dtype = "float64"
        return Apply(self, inputs, [TensorType(dtype, (None,)).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        from tensorjit.tensor.math import add, cast, maximum
        from tensorjit.tensor.math import max as tmax

        x = cast(node.inputs[0], "int64")
        top = tmax(Join(0)(x, constant(np.asarray([-1], dtype="int64"))))
        return [(maximum(add(top, 1), self.minlength),)]

    def perform(self, node, inputs, output_storage):
        x = inputs[0]
        if x.size and x.min() < 0:
            raise ValueError(
                f"bincount: {node.inputs[0].describe()} has negative entries ({x.min()})"
            )
        weights = inputs[1] if self.weighted else None
        if weights is not None and weights.shape != x.shape:
            raise ValueError(
                f"bincount: weights of shape {weights.shape} do not match x of shape {x.shape}"
            )
        out = np.bincount(x.astype(np.intp), weights=weights, minlength=self.minlength)
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].type.numpy_dtype)

    def grad(self, inputs, output_grads):
        if not self.weighted:
            return [None]
        x, w = inputs
        # out[k] = sum of w[i] with x[i] == k: d/dw[i] = g[x[i]].
        gw = TakeAlongAxis(0)(output_grads[0], x)
        return [None, gw if _is_float(w) else None]


def bincount(x: Any, weights: Any = None, minlength: int = 0) -> Variable:
    """``numpy.bincount``: counts (or summed ``weights``) of each value in ``x``."""
    if weights is None:
        return Bincount(minlength)(x)
    return Bincount(minlength, weighted=True)(x, weights)


# ---------------------------------------------------------------- unique
class Unique(Op):
    """``numpy.unique`` of the flattened ``x``, with the optional index, inverse and counts
    outputs in NumPy's order (int64). The inverse has the shape of ``x``."""

    __props__ = ("return_index", "return_inverse", "return_counts")

    def __init__(
        self, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False
    ):
        self.return_index = bool(return_index)
        self.return_inverse = bool(return_inverse)
        self.return_counts = bool(return_counts)

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        outputs = [TensorType(x.type.dtype, (None,)).make_variable()]
        if self.return_index:
            outputs.append(TensorType("int64", (None,)).make_variable())
        if self.return_inverse:
            outputs.append(TensorType("int64", x.type.shape).make_variable())
        if self.return_counts:
            outputs.append(TensorType("int64", (None,)).make_variable())
        return Apply(self, [x], outputs)

    def infer_shape(self, fgraph, node, input_shapes):
        # The number of unique values is only known at run time.
        shapes: list[Any] = [None]
        if self.return_index:
            shapes.append(None)
        if self.return_inverse:
            shapes.append(input_shapes[0])
        if self.return_counts:
            shapes.append(None)
        return shapes

    def perform(self, node, inputs, output_storage):
        result = np.unique(
            inputs[0],
            return_index=self.return_index,
            return_inverse=self.return_inverse,
            return_counts=self.return_counts,
        )
        if not isinstance(result, tuple):
            result = (result,)
        x_shape = inputs[0].shape
        for k, (value, out) in enumerate(zip(result, node.outputs)):
            value = np.asarray(value, dtype=out.type.numpy_dtype)
            if k and out.type.ndim != 1:
                value = value.reshape(x_shape)
            output_storage[k][0] = value

    def grad(self, inputs, output_grads):
        from tensorjit.core.gradient import NotDifferentiableError

        raise NotDifferentiableError("unique has no gradient")


def unique(
    x: Any,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
) -> Variable | list[Variable]:
    """``numpy.unique`` of the flattened ``x`` (a variable, or a list with the extra
    outputs asked for)."""
    return Unique(return_index, return_inverse, return_counts)(x)


# ---------------------------------------------------------------- searchsorted
class SearchSorted(Op):
    """``numpy.searchsorted(a, v, side, sorter)``: int64 insertion indices of ``v`` into
    the sorted vector ``a`` (or ``a`` sorted by the permutation ``sorter``)."""

    __props__ = ("side",)

    def __init__(self, side: str = "left"):
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        self.side = side

    def make_node(self, a: Any, v: Any, *sorter: Any) -> Apply:
        a = as_tensor_variable(a)
        v = as_tensor_variable(v)
        if a.type.ndim != 1:
            raise ValueError(f"searchsorted: a must be a vector, got {a.describe()}")
        inputs = [a, v]
        if sorter:
            s = as_tensor_variable(sorter[0])
            if s.type.ndim != 1:
                raise ValueError(f"searchsorted: sorter must be a vector, got {s.describe()}")
            _check_int_tensor(s, "searchsorted", "sorter")
            inputs.append(s)
        return Apply(self, inputs, [TensorType("int64", v.type.shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[1]]

    def perform(self, node, inputs, output_storage):
        a, v, *sorter = inputs
        out = np.searchsorted(a, v, side=self.side, sorter=sorter[0] if sorter else None)
        output_storage[0][0] = np.asarray(out, dtype="int64")

    def grad(self, inputs, output_grads):
        from tensorjit.tensor.math import zeros_like

        # Piecewise constant in a and v.
        return [zeros_like(i) if _is_float(i) else None for i in inputs]


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None) -> Variable:
    """``numpy.searchsorted``: where ``v``'s values would be inserted into sorted ``a``."""
    if sorter is None:
        return SearchSorted(side)(a, v)
    return SearchSorted(side)(a, v, sorter)
