"""Shape, Reshape, MakeVector, the dimshuffle family (transpose, flatten, swapaxes) and
join/split/stack."""

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
    metadata_only = True  # the shape of a device value is known on the host
    may_raise = False

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
    """The shape of ``x`` as a symbolic int64 vector."""
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


class Reshape(Op):
    """``numpy.reshape`` to a shape given as an int vector (-1 allowed once)."""

    __props__ = ("ndim",)
    view_map = {0: [0]}

    def __init__(self, ndim: int):
        self.ndim = ndim

    def host_inputs(self, node: Apply) -> range:
        return range(1, 2)  # the shape

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
    """``x`` with shape ``newshape`` (one entry may be -1); ``ndim`` gives the result's rank
    when ``newshape`` is symbolic."""
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
    """Reorder ``x``'s axes and insert broadcastable ones: ``pattern`` lists input axes and
    ``"x"`` for a new axis of length 1 (Theano's ``dimshuffle``)."""
    x = as_tensor_variable(x)
    return DimShuffle(x.type.ndim, tuple(pattern))(x)


def transpose(x: Any, axes: Sequence[int] | None = None) -> Variable:
    """``x`` with its axes reversed, or permuted by ``axes`` (a view)."""
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


# ---------------------------------------------------------------- join / split / stack
def _one_axis(axis: Any, ndim: int, what: str) -> int:
    """``axis`` (an int, possibly negative) checked against ``ndim`` and made positive."""
    if isinstance(axis, Constant) and np.ndim(axis.data) == 0:
        axis = axis.data.item()
    if isinstance(axis, Variable):
        raise TypeError(f"{what}: axis must be a Python int, got the symbolic {axis.describe()}")
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, (bool, np.bool_)):
        raise TypeError(f"{what}: axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{what}: axis {axis} is out of range for {ndim} dimensions")
    return int(axis) % ndim


def _int_scalar(v: Any, what: str, name: str) -> Variable:
    """``v`` as an int64 scalar variable (a Python int or a symbolic integer scalar)."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{what}: {name} must be an integer, got {v!r}")
    var = as_tensor_variable(v) if isinstance(v, Variable) else None
    if var is None:
        if not isinstance(v, (int, np.integer)):
            raise TypeError(f"{what}: {name} must be an integer, got {v!r}")
        return constant(np.int64(v))
    if var.type.ndim != 0 or np.dtype(var.type.dtype).kind not in "iu":
        raise TypeError(f"{what}: {name} must be an integer scalar, got {var.describe()}")
    return var if var.type.dtype == "int64" else _cast_to(var, "int64")


class Join(Op):
    """``numpy.concatenate`` of tensors of equal rank along a fixed ``axis``."""

    __props__ = ("axis",)

    def __init__(self, axis: int):
        self.axis = int(axis)

    def make_node(self, *tensors: Any) -> Apply:
        if not tensors:
            raise ValueError("join: needs at least one tensor to join")
        vars_ = [as_tensor_variable(t) for t in tensors]
        ndim = vars_[0].type.ndim
        for v in vars_:
            if v.type.ndim == 0:
                raise ValueError(f"join: can not join the 0-d tensor {v.describe()}")
            if v.type.ndim != ndim:
                raise ValueError(
                    f"join: all inputs must have the same number of dimensions, but "
                    f"{vars_[0].describe()} has {ndim} and {v.describe()} has {v.type.ndim}"
                )
        if not 0 <= self.axis < ndim:
            raise ValueError(f"join: axis {self.axis} is out of range for {ndim}-d inputs")
        dtype = np.result_type(*[v.type.dtype for v in vars_]).name
        shape: list[int | None] = []
        for d in range(ndim):
            lengths = [v.type.shape[d] for v in vars_]
            if d == self.axis:
                shape.append(None if None in lengths else int(sum(lengths)))
                continue
            known = {s for s in lengths if s is not None}
            if len(known) > 1:
                raise ValueError(
                    f"join: the inputs' lengths in dimension {d} differ ({sorted(known)}; only "
                    f"the join axis {self.axis} may differ): "
                    + ", ".join(v.describe() for v in vars_)
                )
            shape.append(known.pop() if known else None)
        return Apply(self, vars_, [TensorType(dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        from tensorjit.tensor.math import add

        total = input_shapes[0][self.axis]
        for shp in input_shapes[1:]:
            total = add(total, shp[self.axis])
        return [tuple(total if d == self.axis else s for d, s in enumerate(input_shapes[0]))]

    def perform(self, node, inputs, output_storage):
        try:
            out = np.concatenate(inputs, axis=self.axis)
        except ValueError as exc:
            shapes = ", ".join(str(x.shape) for x in inputs)
            raise ValueError(
                f"join along axis {self.axis}: can not join arrays of shapes {shapes} "
                f"(inputs {', '.join(v.describe() for v in node.inputs)}): {exc}"
            ) from None
        output_storage[0][0] = np.asarray(out, dtype=node.outputs[0].type.numpy_dtype)

    def grad(self, inputs, output_grads):
        (g,) = output_grads
        if len(inputs) == 1:
            parts = [g]
        else:
            sizes = MakeVector("int64")(*[shape_entries(x)[self.axis] for x in inputs])
            parts = Split(len(inputs), self.axis)(g, sizes)
        return [p if np.dtype(x.type.dtype).kind in "fc" else None for x, p in zip(inputs, parts)]


def join(axis: Any, *tensors: Any) -> Variable:
    """Theano's ``join(axis, *tensors)``: the tensors concatenated along ``axis``."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    vars_ = [as_tensor_variable(t) for t in tensors]
    if not vars_:
        raise ValueError("join: needs at least one tensor to join")
    for v in vars_:
        if v.type.ndim == 0:
            raise ValueError(f"join: can not join the 0-d tensor {v.describe()}")
    return Join(_one_axis(axis, vars_[0].type.ndim, "join"))(*vars_)


def concatenate(tensors: Sequence[Any], axis: Any = 0) -> Variable:
    """``numpy.concatenate``: tensors of equal rank joined along ``axis`` (None: flattened)."""
    if isinstance(tensors, Variable):
        raise TypeError(
            f"concatenate takes a list of tensors, got the single tensor {tensors.describe()}"
        )
    vars_ = [as_tensor_variable(t) for t in tensors]
    if not vars_:
        raise ValueError("concatenate: needs at least one tensor to join")
    if axis is None:
        vars_ = [flatten(v) if v.type.ndim != 1 else v for v in vars_]
        axis = 0
    return join(axis, *vars_)


def stack(tensors: Sequence[Any], axis: Any = 0) -> Variable:
    """``numpy.stack``: tensors of the same shape joined along a new dimension ``axis``.

    Scalars stacked along axis 0 make a vector (MakeVector) of their promoted dtype.
    """
    if isinstance(tensors, Variable):
        raise TypeError(
            f"stack takes a list of tensors, got the single tensor {tensors.describe()}"
        )
    vars_ = [as_tensor_variable(s) for s in tensors]
    if not vars_:
        if axis not in (0, -1):
            raise ValueError(f"stack: axis {axis!r} is out of range for an empty stack")
        return MakeVector("int64")()
    ndim = vars_[0].type.ndim
    for v in vars_:
        if v.type.ndim != ndim:
            raise ValueError(
                f"stack: all inputs must have the same shape, but {vars_[0].describe()} has "
                f"{ndim} dimensions and {v.describe()} has {v.type.ndim}"
            )
    axis = _one_axis(axis, ndim + 1, "stack")
    if ndim == 0:
        dtype = np.result_type(*[v.type.dtype for v in vars_]).name
        return MakeVector(dtype)(*vars_)
    return Join(axis)(*[expand_dims(v, axis) for v in vars_])


class Split(Op):
    """Theano's Split: ``x`` cut along ``axis`` into ``n_splits`` pieces of the lengths in
    the int vector ``splits_size`` (they must add up to ``x.shape[axis]``). The pieces are
    views of ``x``."""

    __props__ = ("n_splits", "axis")

    def __init__(self, n_splits: int, axis: int):
        if not isinstance(n_splits, (int, np.integer)) or n_splits < 1:
            raise ValueError(f"split: n_splits must be a positive int, got {n_splits!r}")
        self.n_splits, self.axis = int(n_splits), int(axis)
        self.view_map = {i: [0] for i in range(self.n_splits)}

    def make_node(self, x: Any, splits_size: Any) -> Apply:
        x = as_tensor_variable(x)
        sizes = as_tensor_variable(splits_size)
        if x.type.ndim == 0:
            raise ValueError(f"split: can not split the 0-d tensor {x.describe()}")
        if not 0 <= self.axis < x.type.ndim:
            raise ValueError(f"split: axis {self.axis} is out of range for {x.describe()}")
        if sizes.type.ndim != 1 or np.dtype(sizes.type.dtype).kind not in "iu":
            raise TypeError(f"split: splits_size must be an integer vector, got {sizes.describe()}")
        if sizes.type.shape[0] is not None and sizes.type.shape[0] != self.n_splits:
            raise ValueError(
                f"split: splits_size {sizes.describe()} has {sizes.type.shape[0]} entries but "
                f"n_splits is {self.n_splits}"
            )
        known = _static_entries(sizes, self.n_splits)
        for k in known:
            if k is not None and k < 0:
                raise ValueError(f"split: negative split size in {sizes.describe()}")
        length = x.type.shape[self.axis]
        if length is not None and None not in known and sum(known) != length:
            raise ValueError(
                f"split: the split sizes {known} add up to {sum(known)}, but dimension "
                f"{self.axis} of {x.describe()} has length {length}"
            )
        outputs = []
        for k in known:
            shp = list(x.type.shape)
            shp[self.axis] = k
            outputs.append(TensorType(x.type.dtype, shp).make_variable())
        return Apply(self, [x, sizes], outputs)

    def infer_shape(self, fgraph, node, input_shapes):
        from tensorjit.tensor.subtensor import getitem

        x_shape = input_shapes[0]
        sizes = node.inputs[1]
        known = _static_entries(sizes, self.n_splits)
        result = []
        for i, k in enumerate(known):
            entry = k if k is not None else getitem(sizes, i)
            result.append(tuple(entry if d == self.axis else s for d, s in enumerate(x_shape)))
        return result

    def perform(self, node, inputs, output_storage):
        x, sizes = inputs
        sizes = np.asarray(sizes)
        if sizes.shape != (self.n_splits,):
            raise ValueError(
                f"split: splits_size {node.inputs[1].describe()} has {sizes.size} entries at "
                f"run time, but n_splits is {self.n_splits}"
            )
        if np.any(sizes < 0):
            raise ValueError(f"split: negative split size in {sizes.tolist()}")
        if int(sizes.sum()) != x.shape[self.axis]:
            raise ValueError(
                f"split: the split sizes {sizes.tolist()} add up to {int(sizes.sum())}, but "
                f"dimension {self.axis} of {node.inputs[0].describe()} has length "
                f"{x.shape[self.axis]} (shape {x.shape})"
            )
        start = 0
        lead = (slice(None),) * self.axis
        for i, n in enumerate(sizes.tolist()):
            output_storage[i][0] = x[lead + (slice(start, start + n),)]
            start += n

    def grad(self, inputs, output_grads):
        x, _ = inputs
        if np.dtype(x.type.dtype).kind not in "fc":
            return [None, None]
        return [Join(self.axis)(*output_grads), None]


def _static_entries(vec: Variable, n: int) -> list[int | None]:
    """The entries of an int vector known at graph-build time (None where not)."""
    if isinstance(vec, Constant):
        return [int(v) for v in np.asarray(vec.data).reshape(-1)]
    if vec.owner is not None and isinstance(vec.owner.op, MakeVector):
        return [int(i.data) if isinstance(i, Constant) else None for i in vec.owner.inputs]
    return [None] * n


def split(x: Any, splits_size: Any, n_splits: int, axis: Any = 0) -> list[Variable]:
    """Theano's ``split(x, splits_size, n_splits, axis=0)``: a list of ``n_splits`` views of
    ``x`` cut along ``axis`` into pieces of the lengths in ``splits_size``."""
    x = as_tensor_variable(x)
    if x.type.ndim == 0:
        raise ValueError(f"split: can not split the 0-d tensor {x.describe()}")
    axis = _one_axis(axis, x.type.ndim, "split")
    if isinstance(splits_size, (list, tuple)):
        if all(isinstance(s, (int, np.integer)) for s in splits_size):
            splits_size = constant(np.asarray(splits_size, dtype="int64").reshape(-1))
        else:
            splits_size = stack([_int_scalar(s, "split", "a split size") for s in splits_size])
    out = Split(n_splits, axis)(x, splits_size)
    return list(out) if isinstance(out, list) else [out]


def swapaxes(x: Any, axis1: Any, axis2: Any) -> Variable:
    """``numpy.swapaxes``: a view of ``x`` with the two dimensions exchanged."""
    x = as_tensor_variable(x)
    a1 = _one_axis(axis1, x.type.ndim, "swapaxes")
    a2 = _one_axis(axis2, x.type.ndim, "swapaxes")
    order = list(range(x.type.ndim))
    order[a1], order[a2] = order[a2], order[a1]
    return DimShuffle(x.type.ndim, tuple(order))(x)


class Unbroadcast(Op):
    """``x`` as it is, typed with no static length on ``axes`` (length-1 axes that no
    longer broadcast): the value may then change length there, as a shared variable's
    update of another length (Theano's ``unbroadcast``)."""

    __props__ = ("axes",)
    view_map = {0: [0]}  # noqa: RUF012  (the Op protocol's class attribute)
    may_raise = False

    def __init__(self, axes: Sequence[int]):
        self.axes = tuple(sorted(set(int(a) for a in axes)))

    def make_node(self, x: Any) -> Apply:
        x = as_tensor_variable(x)
        for a in self.axes:
            if not 0 <= a < x.type.ndim:
                raise ValueError(f"unbroadcast: axis {a} is out of range for {x.describe()}")
        shape = tuple(None if a in self.axes else s for a, s in enumerate(x.type.shape))
        return Apply(self, [x], [x.type.clone(shape=shape).make_variable()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = inputs[0]

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def grad(self, inputs, output_grads):
        (x,) = inputs
        keep = tuple(a for a in self.axes if x.type.shape[a] == 1)
        return [addbroadcast(output_grads[0], *keep)]


def unbroadcast(x: Any, *axes: int) -> Variable:
    """``x`` with its length-1 ``axes`` no longer broadcastable (a view)."""
    x = as_tensor_variable(x)
    axes = tuple(_one_axis(a, x.type.ndim, f"unbroadcast of {x.describe()}") for a in axes)
    axes = tuple(a for a in axes if x.type.shape[a] == 1)
    return Unbroadcast(axes)(x) if axes else x


def addbroadcast(x: Any, *axes: int) -> Variable:
    """``x`` with ``axes`` broadcastable: checked at run time to have length 1 there."""
    from tensorjit.tensor.checks import specify_shape

    x = as_tensor_variable(x)
    axes = tuple(_one_axis(a, x.type.ndim, f"addbroadcast of {x.describe()}") for a in axes)
    if all(x.type.shape[a] == 1 for a in axes):
        return x
    return specify_shape(x, [1 if a in axes else None for a in range(x.type.ndim)])


def patternbroadcast(x: Any, broadcastable: Sequence[bool]) -> Variable:
    """``x`` with exactly the broadcast pattern ``broadcastable``."""
    x = as_tensor_variable(x)
    if len(broadcastable) != x.type.ndim:
        raise ValueError(
            f"patternbroadcast: a pattern of {len(broadcastable)} axes for the "
            f"{x.type.ndim}-d {x.describe()}"
        )
    x = addbroadcast(x, *(a for a, b in enumerate(broadcastable) if b))
    return unbroadcast(x, *(a for a, b in enumerate(broadcastable) if not b))
