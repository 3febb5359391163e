"""Basic indexing (``x[1:, ::-2, 3]``) as a view, and set/inc_subtensor."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.op import Op
from tensorjit.tensor.elemwise import DimShuffle
from tensorjit.tensor.math import reusable_buffer
from tensorjit.tensor.type import TensorType
from tensorjit.tensor.variable import as_tensor_variable, constant

# An index entry is "i" (an integer from the next input) or ("s", start?, stop?, step?)
# where each flag says whether that slice component is the next input.
IndexEntry = Any


def _is_int_index(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (int, np.integer)):
        return True
    return (
        isinstance(v, Variable)
        and isinstance(v.type, TensorType)
        and v.type.ndim == 0
        and np.dtype(v.type.dtype).kind in "iu"
    )


def _as_index_var(v: Any) -> Variable:
    if isinstance(v, Variable):
        return v
    return constant(np.int64(v))


def _parse_index(x: Variable, index: Any) -> tuple[list, list[Variable], list[int]]:
    """Split a Python index into (entries, index inputs, positions of new axes)."""
    items = list(index) if isinstance(index, tuple) else [index]
    n_real = sum(1 for i in items if i is not None and i is not Ellipsis)
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_real > x.type.ndim:
        raise IndexError(
            f"too many indices for {x.describe()}: {x.type.ndim} dimensions, {n_real} indexed"
        )
    expanded: list[Any] = []
    for item in items:
        if item is Ellipsis:
            expanded.extend([slice(None)] * (x.type.ndim - n_real))
        else:
            expanded.append(item)
    entries: list[IndexEntry] = []
    inputs: list[Variable] = []
    newaxes: list[int] = []
    out_dim = 0
    for item in expanded:
        if item is None:
            newaxes.append(out_dim)
            out_dim += 1
        elif isinstance(item, slice):
            flags = []
            for part in (item.start, item.stop, item.step):
                if part is None:
                    flags.append(False)
                elif _is_int_index(part):
                    flags.append(True)
                    inputs.append(_as_index_var(part))
                else:
                    raise TypeError(f"slice components must be integers, got {part!r}")
            entries.append(("s", *flags))
            out_dim += 1
        elif _is_int_index(item):
            entries.append("i")
            inputs.append(_as_index_var(item))
        else:
            raise TypeError(
                f"index {item!r} into {x.describe()}: only integers, slices, None and ... "
                "are supported (advanced integer-array and boolean indexing is not "
                "implemented yet)"
            )
    return entries, inputs, newaxes


def _build_index(entries: tuple, idx_values: list) -> tuple:
    values = iter(idx_values)
    index: list[Any] = []
    for entry in entries:
        if entry == "i":
            index.append(int(next(values)))
        else:
            parts = [int(next(values)) if flag else None for flag in entry[1:]]
            index.append(slice(*parts))
    return tuple(index)


def _static_shape(x: Variable, entries: tuple, idx_inputs: list[Variable]) -> tuple:
    known = [int(v.data) if isinstance(v, Constant) else None for v in idx_inputs]
    values = iter(known)
    shape: list[int | None] = []
    for axis, entry in enumerate(entries):
        length = x.type.shape[axis]
        if entry == "i":
            i = next(values)
            if i is not None and length is not None and not -length <= i < length:
                raise IndexError(
                    f"index {i} is out of bounds for dimension {axis} of {x.describe()} "
                    f"with static length {length}"
                )
            continue
        parts = [next(values) if flag else None for flag in entry[1:]]
        if parts[2] == 0:
            raise ValueError("slice step can not be zero")
        if not any(flag for flag in entry[1:]):
            shape.append(length)
        elif length is not None and all(p is not None for p, flag in zip(parts, entry[1:]) if flag):
            shape.append(len(range(*slice(*parts).indices(length))))
        else:
            shape.append(None)
    shape.extend(x.type.shape[len(entries) :])
    return tuple(shape)


class Subtensor(Op):
    """Basic indexing; the output is a view of the input."""

    __props__ = ("entries",)
    view_map = {0: [0]}

    def __init__(self, entries: tuple):
        self.entries = tuple(entries)

    def __str__(self) -> str:
        return f"Subtensor{{{_entries_str(self.entries)}}}"

    def make_node(self, x: Any, *idx: Any) -> Apply:
        x = as_tensor_variable(x)
        idx_vars = [_as_index_var(i) for i in idx]
        shape = _static_shape(x, self.entries, idx_vars)
        return Apply(self, [x] + idx_vars, [TensorType(x.type.dtype, shape).make_variable()])

    def perform(self, node, inputs, output_storage):
        x, *idx = inputs
        # The trailing Ellipsis keeps a full integer index a 0-d array view, not a scalar.
        output_storage[0][0] = x[_build_index(self.entries, idx) + (Ellipsis,)]

    def grad(self, inputs, output_grads):
        x, *idx = inputs
        (g,) = output_grads
        if np.dtype(x.type.dtype).kind not in "fc":
            return [None] * len(inputs)
        from tensorjit.tensor.math import zeros_like

        gx = IncSubtensor(self.entries, False)(zeros_like(x), g, *idx)
        return [gx] + [None] * len(idx)

    def pprint(self, input_strs):
        return f"{input_strs[0]}[{_entries_str(self.entries, input_strs[1:])}]"


def _entries_str(entries: tuple, idx_strs: list[str] | None = None) -> str:
    names = iter(idx_strs) if idx_strs is not None else None
    parts = []
    for entry in entries:
        if entry == "i":
            parts.append(next(names) if names else "i")
        else:
            comps = [(next(names) if names else "?") if flag else "" for flag in entry[1:]]
            parts.append(":".join(comps[:2]) + (f":{comps[2]}" if entry[3] else ""))
    return ", ".join(parts)


class IncSubtensor(Op):
    """A copy of ``x`` with ``x[index]`` incremented by (or set to) ``y``."""

    __props__ = ("entries", "set_instead_of_inc", "inplace")

    def __init__(self, entries: tuple, set_instead_of_inc: bool, inplace: bool = False):
        """``inplace=True``: modify ``x`` itself (it is destroyed) instead of a copy."""
        self.entries = tuple(entries)
        self.set_instead_of_inc = set_instead_of_inc
        self.inplace = inplace
        if inplace:
            self.destroy_map = {0: [0]}

    def __str__(self) -> str:
        kind = "Set" if self.set_instead_of_inc else "Inc"
        suffix = "_inplace" if self.inplace else ""
        return f"{kind}Subtensor{suffix}{{{_entries_str(self.entries)}}}"

    def make_node(self, x: Any, y: Any, *idx: Any) -> Apply:
        x = as_tensor_variable(x)
        y = as_tensor_variable(y)
        idx_vars = [_as_index_var(i) for i in idx]
        region = _static_shape(x, self.entries, idx_vars)
        if y.type.ndim > len(region):
            raise ValueError(
                f"{self}: value {y.describe()} has more dimensions than the indexed region "
                f"({len(region)})"
            )
        if y.type.dtype != x.type.dtype:
            from tensorjit.tensor.math import cast

            y = cast(y, x.type.dtype)
        return Apply(self, [x, y] + idx_vars, [x.type.make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        x, y, *idx = inputs
        if self.inplace:
            out = x
        else:
            out = reusable_buffer(output_storage[0][0], x.shape, x.dtype)
            if out is None:
                out = x.copy()
            else:
                out[...] = x
        index = _build_index(self.entries, idx) + (Ellipsis,)
        if self.set_instead_of_inc:
            out[index] = y
        else:
            out[index] += y
        output_storage[0][0] = out

    def grad(self, inputs, output_grads):
        x, y, *idx = inputs
        (g,) = output_grads
        region = Subtensor(self.entries)(g, *idx)
        if self.set_instead_of_inc:
            from tensorjit.tensor.math import zeros_like

            gx = IncSubtensor(self.entries, True)(g, zeros_like(y), *idx)
        else:
            gx = g
        gy = _reduce_to(region, y)
        return [gx, gy] + [None] * len(idx)


def _reduce_to(g: Variable, y: Variable) -> Variable:
    """Sum ``g`` over the dimensions along which ``y`` was broadcast into it."""
    from tensorjit.tensor.math import sum as tsum

    extra = g.type.ndim - y.type.ndim
    if extra:
        g = tsum(g, axis=tuple(range(extra)))
    axes = tuple(
        a
        for a, (yb, gb) in enumerate(zip(y.type.broadcastable, g.type.broadcastable))
        if yb and not gb
    )
    if axes:
        g = tsum(g, axis=axes, keepdims=True)
    return g


def getitem(x: Variable, index: Any) -> Variable:
    """``x[index]`` for basic indices: integers, slices, None (new axis) and ``...``."""
    entries, inputs, newaxes = _parse_index(x, index)
    if entries:
        out = Subtensor(tuple(entries))(x, *inputs)
    else:
        out = x
    if newaxes:
        pattern: list[Any] = []
        k = 0
        for d in range(out.type.ndim + len(newaxes)):
            if d in newaxes:
                pattern.append("x")
            else:
                pattern.append(k)
                k += 1
        out = DimShuffle(out.type.ndim, tuple(pattern))(out)
    return out


def _incsubtensor(x_indexed: Variable, y: Any, set_instead_of_inc: bool) -> Variable:
    owner = x_indexed.owner
    if owner is None or not isinstance(owner.op, Subtensor):
        raise TypeError(
            f"set_subtensor/inc_subtensor take an indexed tensor such as x[1:3], got "
            f"{x_indexed.describe() if isinstance(x_indexed, Variable) else repr(x_indexed)}"
        )
    x, *idx = owner.inputs
    return IncSubtensor(owner.op.entries, set_instead_of_inc)(x, y, *idx)


def set_subtensor(x_indexed: Variable, y: Any) -> Variable:
    """A copy of the indexed tensor with the indexed region set to ``y``."""
    return _incsubtensor(x_indexed, y, True)


def inc_subtensor(x_indexed: Variable, y: Any) -> Variable:
    """A copy of the indexed tensor with ``y`` added to the indexed region."""
    return _incsubtensor(x_indexed, y, False)
