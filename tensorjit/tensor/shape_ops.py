"""Shape, Reshape, MakeVector and the dimshuffle family (transpose, flatten)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.op import Op
from tensorjit.tensor.elemwise import DimShuffle
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable, constant


class Shape(Op):
    """The shape of a tensor as an int64 vector."""

    __props__ = ()

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        return Apply(self, [x], [TensorType("int64", (x.type.ndim,)).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [(node.inputs[0].type.ndim,)]

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.asarray(inputs[0].shape, dtype="int64")

    def grad(self, inputs, output_grads):
        return [None]

    def pprint(self, input_strs):
        return f"{input_strs[0]}.shape"


def shape(x: Any) -> Variable:
    x = as_tensor_variable(x)
    if all(s is not None for s in x.type.shape):
        return constant(np.asarray(x.type.shape, dtype="int64"))
    return Shape()(x)


def shape_entries(x: Variable) -> list[Variable]:
    """One int64 scalar per dimension: a constant where the static shape knows it."""
    from tensorjit.tensor.subtensor import getitem

    sym = None
    entries = []
    for axis, s in enumerate(x.type.shape):
        if s is not None:
            entries.append(constant(np.int64(s)))
        else:
            sym = sym if sym is not None else Shape()(x)
            entries.append(getitem(sym, axis))
    return entries


class MakeVector(Op):
    """Stacks scalars into a vector."""

    __props__ = ("dtype",)

    def __init__(self, dtype: str):
        self.dtype = dtype

    def make_node(self, *scalars: Any) -> Apply:
        vars_ = [as_tensor_variable(s) for s in scalars]
        for v in vars_:
            if v.type.ndim != 0:
                raise TypeError(f"MakeVector takes scalars, got {v.describe()}")
        vars_ = [_cast_to(v, self.dtype) for v in vars_]
        return Apply(self, vars_, [TensorType(self.dtype, (len(vars_),)).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [(len(node.inputs),)]

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = np.asarray(inputs, dtype=self.dtype).reshape(len(inputs))

    def grad(self, inputs, output_grads):
        from tensorjit.tensor.subtensor import getitem

        (g,) = output_grads
        return [
            getitem(g, i) if np.dtype(v.type.dtype).kind in "fc" else None
            for i, v in enumerate(inputs)
        ]


def _cast_to(v: Variable, dtype: str) -> Variable:
    from tensorjit.tensor.math import cast

    return cast(v, dtype)


def stack(scalars: Sequence[Any]) -> Variable:
    """A vector from scalars (symbolic or not), of their promoted dtype."""
    vars_ = [as_tensor_variable(s) for s in scalars]
    dtype = np.result_type(*[v.type.dtype for v in vars_]).name if vars_ else "int64"
    return MakeVector(dtype)(*vars_)


class Reshape(Op):
    """``numpy.reshape`` to a shape given as an int vector (-1 allowed once)."""

    __props__ = ("ndim",)
    view_map = {0: [0]}

    def __init__(self, ndim: int):
        self.ndim = ndim

    def make_node(self, x: Any, shp: Any) -> Apply:
        x = as_tensor_variable(x)
        shp = as_tensor_variable(shp)
        if shp.type.ndim != 1 or np.dtype(shp.type.dtype).kind not in "iu":
            raise TypeError(f"reshape: the shape must be an integer vector, got {shp.describe()}")
        static: list[int | None] = [None] * self.ndim
        if isinstance(shp, Constant):
            static = [None if int(s) == -1 else int(s) for s in shp.data]
        elif shp.owner is not None and isinstance(shp.owner.op, MakeVector):
            static = [
                int(i.data) if isinstance(i, Constant) and int(i.data) >= 0 else None
                for i in shp.owner.inputs
            ]
        known = [s for s in x.type.shape]
        if None not in known and None not in static:
            if int(np.prod(known)) != int(np.prod(static)):
                raise ValueError(
                    f"reshape: can not reshape {x.describe()} of static shape "
                    f"{x.type.shape} into {tuple(static)}"
                )
        return Apply(self, [x, shp], [TensorType(x.type.dtype, static).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        shp = node.inputs[1]
        owner = shp.owner
        entries = None
        if isinstance(shp, Constant):
            entries = [int(v) for v in shp.data]
        elif owner is not None and isinstance(owner.op, MakeVector):
            entries = list(owner.inputs)
        if entries is None or any(isinstance(e, int) and e < 0 for e in entries):
            return None  # -1 or an opaque shape vector: ask at run time
        if any(isinstance(e, Constant) and int(e.data) < 0 for e in entries):
            return None
        return [tuple(entries)]

    def perform(self, node, inputs, output_storage):
        x, shp = inputs
        try:
            output_storage[0][0] = np.reshape(x, tuple(int(s) for s in shp))
        except ValueError as exc:
            raise ValueError(
                f"reshape: can not reshape array of shape {x.shape} into {tuple(shp)}: {exc}"
            ) from None

    def grad(self, inputs, output_grads):
        x, _ = inputs
        return [reshape(output_grads[0], shape(x), ndim=x.type.ndim), None]


def reshape(x: Any, newshape: Any, ndim: int | None = None) -> Variable:
    x = as_tensor_variable(x)
    if isinstance(newshape, (int, np.integer)):
        newshape = (newshape,)
    if isinstance(newshape, Variable) and newshape.type.ndim == 1:
        shp = newshape
        n = newshape.type.shape[0] if ndim is None else ndim
        if n is None:
            raise ValueError(
                f"reshape: the length of shape vector {newshape.describe()} is not known; "
                "pass ndim="
            )
    else:
        entries = list(newshape)
        n = len(entries)
        for e in entries:
            if not (isinstance(e, (int, np.integer)) and not isinstance(e, bool)) and not (
                isinstance(e, Variable) and np.dtype(e.type.dtype).kind in "iu"
            ):
                raise TypeError(f"reshape: shape entries must be integers, got {e!r}")
        if sum(1 for e in entries if isinstance(e, (int, np.integer)) and e == -1) > 1:
            raise ValueError(f"reshape: only one dimension can be -1, got {tuple(entries)}")
        if all(isinstance(e, (int, np.integer)) for e in entries):
            shp = constant(np.asarray(entries, dtype="int64"))
        else:
            shp = stack(entries)
            if shp.type.dtype != "int64":
                shp = _cast_to(shp, "int64")
    return Reshape(int(n))(x, shp)


def dimshuffle(x: Any, pattern: Sequence[int | str]) -> Variable:
    x = as_tensor_variable(x)
    return DimShuffle(x.type.ndim, tuple(pattern))(x)


def transpose(x: Any, axes: Sequence[int] | None = None) -> Variable:
    x = as_tensor_variable(x)
    if axes is None:
        axes = tuple(reversed(range(x.type.ndim)))
    if sorted(axes) != list(range(x.type.ndim)):
        raise ValueError(f"transpose: axes {tuple(axes)} are not a permutation for {x.describe()}")
    return DimShuffle(x.type.ndim, tuple(axes))(x)


def flatten(x: Any, ndim: int = 1) -> Variable:
    """Collapse trailing dimensions so that the result has ``ndim`` dimensions."""
    x = as_tensor_variable(x)
    if not 1 <= ndim <= max(x.type.ndim, 1):
        raise ValueError(f"flatten: ndim={ndim} is out of range for {x.describe()}")
    entries = shape_entries(x)
    return reshape(x, entries[: ndim - 1] + [-1])


def squeeze(x: Any, axis: Any = None) -> Variable:
    """Drop dimensions of static length 1 (all of them, or those in ``axis``); a view."""
    x = as_tensor_variable(x)
    if axis is None:
        drop = [a for a, s in enumerate(x.type.shape) if s == 1]
    else:
        from tensorjit.tensor.math import normalize_axis

        drop = list(normalize_axis(axis, x.type.ndim, "squeeze"))
        for a in drop:
            if x.type.shape[a] != 1:
                raise ValueError(
                    f"squeeze: dimension {a} of {x.describe()} does not have static length 1"
                )
    return DimShuffle(x.type.ndim, tuple(a for a in range(x.type.ndim) if a not in drop))(x)


def expand_dims(x: Any, axis: Any) -> Variable:
    """Insert new dimensions of length 1 at the positions ``axis`` of the result; a view."""
    x = as_tensor_variable(x)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out_ndim = x.type.ndim + len(axes)
    positions = sorted(a % out_ndim for a in axes)
    if len(set(positions)) != len(positions) or any(not -out_ndim <= a < out_ndim for a in axes):
        raise ValueError(f"expand_dims: bad axis {axis!r} for {x.describe()}")
    pattern: list[Any] = []
    k = 0
    for d in range(out_ndim):
        if d in positions:
            pattern.append("x")
        else:
            pattern.append(k)
            k += 1
    return DimShuffle(x.type.ndim, tuple(pattern))(x)
