"""Indexing: basic (``x[1:, ::-2, 3]``, a view), advanced (integer arrays and boolean
masks, following NumPy's rules, a copy), ``take``, and set/inc_subtensor of both."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.op import Op
from tensorjit.core.memory.transfer_op import before_transfers
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
            raise _invalid_index_error(x, item)
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

    def host_inputs(self, node: Apply) -> range:
        return range(1, len(node.inputs))  # the indices

    def make_node(self, x: Any, *idx: Any) -> Apply:
        x = as_tensor_variable(x)
        idx_vars = [_as_index_var(i) for i in idx]
        shape = _static_shape(x, self.entries, idx_vars)
        return Apply(self, [x] + idx_vars, [TensorType(x.type.dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        x_shape = input_shapes[0]
        values = iter(node.inputs[1:])
        shape = []
        for axis, entry in enumerate(self.entries):
            if entry == "i":
                next(values)
                continue
            start, stop, step = (next(values) if flag else None for flag in entry[1:])
            shape.append(slice_length(start, stop, step, x_shape[axis]))
        shape.extend(x_shape[len(self.entries) :])
        return [tuple(shape)]

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
    placeholders = {"i": "i", "a": "int_array", "b": "bool_mask"}
    for entry in entries:
        if entry == "n":
            parts.append("None")
        elif entry in placeholders:
            parts.append(next(names) if names else placeholders[entry])
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

    def host_inputs(self, node: Apply) -> range:
        return range(2, len(node.inputs))  # the indices

    def make_node(self, x: Any, y: Any, *idx: Any) -> Apply:
        x = as_tensor_variable(x)
        y = as_tensor_variable(y)
        idx_vars = [_as_index_var(i) for i in idx]
        region = _static_shape(x, self.entries, idx_vars)
        y = _value_for_region(self, x, y, region)
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


# ---------------------------------------------------------------- advanced indexing
# Advanced indices add three entry kinds to the basic ones: "a" (an integer array from
# the next input), "b" (a boolean mask from the next input, covering as many dimensions
# as it has) and "n" (a new axis: None, whose place matters in advanced indexing).

_VALID_INDICES = (
    "only integers, slices, None and ... (basic indexing), integer arrays and boolean "
    "masks (advanced indexing) are valid indices"
)


def _invalid_index_error(x: Variable, item: Any, reason: str = "") -> TypeError:
    what = item.describe() if isinstance(item, Variable) else repr(item)
    reason = f" ({reason})" if reason else ""
    return TypeError(f"index {what} into {x.describe()} is not valid{reason}: {_VALID_INDICES}")


def _normalize_item(x: Variable, item: Any) -> Any:
    """A basic index item unchanged, an array-like index as a tensor; else a TypeError."""
    if item is None or item is Ellipsis or isinstance(item, slice):
        return item
    if isinstance(item, (bool, np.bool_)):
        raise _invalid_index_error(x, item, "a boolean scalar")
    if _is_int_index(item):
        return item
    if isinstance(item, Variable):
        if not isinstance(item.type, TensorType):
            raise _invalid_index_error(x, item)
        var = item
    elif isinstance(item, (list, tuple, np.ndarray)):
        if isinstance(item, (list, tuple)) and any(isinstance(e, Variable) for e in item):
            var = as_tensor_variable(item)
        else:
            try:
                arr = np.asarray(item)
            except ValueError:
                raise _invalid_index_error(x, item, "not a rectangular array") from None
            if arr.size == 0 and not isinstance(item, np.ndarray):
                arr = arr.astype("int64")  # an empty list indexes like an empty int array
            if arr.dtype.kind not in "biu":
                raise _invalid_index_error(x, item, f"an array of dtype {arr.dtype}")
            if arr.ndim == 0 and arr.dtype.kind in "iu":
                return np.int64(arr)  # NumPy treats 0-d integer arrays as integers
            var = constant(arr)
    else:
        raise _invalid_index_error(x, item)
    kind = np.dtype(var.type.dtype).kind
    if kind == "b" and var.type.ndim == 0:
        raise _invalid_index_error(x, item, "a 0-d boolean index")
    if kind not in "biu":
        raise _invalid_index_error(x, item, f"dtype {var.type.dtype}")
    return var


def _is_advanced_item(item: Any) -> bool:
    return isinstance(item, Variable) and (
        item.type.ndim > 0 or np.dtype(item.type.dtype).kind == "b"
    )


def _is_mask(var: Variable) -> bool:
    return np.dtype(var.type.dtype).kind == "b"


def _slice_entry(item: slice, inputs: list[Variable]) -> tuple:
    flags = []
    for part in (item.start, item.stop, item.step):
        if part is None:
            flags.append(False)
        elif _is_int_index(part):
            flags.append(True)
            inputs.append(_as_index_var(part))
        else:
            raise TypeError(f"slice components must be integers, got {part!r}")
    return ("s", *flags)


def _parse_advanced_index(x: Variable, items: list) -> tuple[tuple, list[Variable]]:
    """Entries and index inputs of an index with at least one array or mask."""
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = 0
    for item in items:
        if _is_advanced_item(item) and _is_mask(item):
            n_real += item.type.ndim
        elif item is not None and item is not Ellipsis:
            n_real += 1
    if n_real > x.type.ndim:
        raise IndexError(
            f"too many indices for {x.describe()}: {x.type.ndim} dimensions, {n_real} indexed"
        )
    entries: list = []
    inputs: list[Variable] = []
    for item in items:
        if item is Ellipsis:
            entries.extend([("s", False, False, False)] * (x.type.ndim - n_real))
        elif item is None:
            entries.append("n")
        elif isinstance(item, slice):
            entries.append(_slice_entry(item, inputs))
        elif _is_advanced_item(item):
            entries.append("b" if _is_mask(item) else "a")
            inputs.append(item)
        else:
            entries.append("i")
            inputs.append(_as_index_var(item))
    return tuple(entries), inputs


def _entry_info(entries: tuple, idx_ndims: list[int]) -> tuple[list, int]:
    """Per entry: (entry, first axis of x it indexes, positions of its index inputs);
    and the number of axes of x the entries index."""
    info = []
    axis = k = 0
    for e in entries:
        if e == "n":
            info.append((e, axis, []))
        elif e in ("i", "a"):
            info.append((e, axis, [k]))
            k += 1
            axis += 1
        elif e == "b":
            info.append((e, axis, [k]))
            axis += idx_ndims[k]
            k += 1
        else:
            n = sum(e[1:])
            info.append((e, axis, list(range(k, k + n))))
            k += n
            axis += 1
    return info, axis


def _layout(entries: tuple, idx_ndims: list[int], x_ndim: int) -> tuple[list, list, int]:
    """(entry info, output dimensions, ndim of the broadcast advanced indices).

    Each output dimension is ("new",), ("slice", axis, entry position), ("full", axis)
    or ("adv", d): dimension d of the advanced indices broadcast together. As in NumPy,
    that block replaces the advanced indices if they are adjacent (integers count as
    advanced indices here), and goes first otherwise.
    """
    info, n_axes = _entry_info(entries, idx_ndims)
    dims: list[tuple] = []
    adv_positions = []
    adv_ndim = 0
    insert_at = None
    for pos, (e, axis, ks) in enumerate(info):
        if e == "n":
            dims.append(("new",))
        elif e in ("i", "a", "b"):
            adv_positions.append(pos)
            if e == "a":
                adv_ndim = max(adv_ndim, idx_ndims[ks[0]])
            elif e == "b":
                adv_ndim = max(adv_ndim, 1)
            if insert_at is None:
                insert_at = len(dims)
        else:
            dims.append(("slice", axis, pos))
    dims.extend(("full", a) for a in range(n_axes, x_ndim))
    adjacent = adv_positions == list(range(adv_positions[0], adv_positions[-1] + 1))
    at = insert_at if adjacent else 0
    dims[at:at] = [("adv", d) for d in range(adv_ndim)]
    return info, dims, adv_ndim


def _broadcast_index_shapes(shapes: list[tuple], ndim: int, what: str) -> tuple:
    """Static broadcast of index-array shapes (a None length may be 1 at run time)."""
    out = []
    for d in range(ndim):
        lengths = [s[d - ndim + len(s)] for s in shapes if d - ndim + len(s) >= 0]
        known = {n for n in lengths if n is not None and n != 1}
        if len(known) > 1:
            raise IndexError(
                f"shape mismatch: the index arrays of {what} can not be broadcast together "
                f"(static shapes {', '.join(str(s) for s in shapes)})"
            )
        if known:
            out.append(known.pop())
        elif None in lengths:
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def _slice_static_length(length: int | None, entry: tuple, parts: list[Variable]) -> int | None:
    flags = entry[1:]
    if not any(flags):
        return length
    it = iter([int(p.data) if isinstance(p, Constant) else None for p in parts])
    comps = [next(it) if flag else None for flag in flags]
    if comps[2] == 0:
        raise ValueError("slice step can not be zero")
    if length is None or any(c is None for c, flag in zip(comps, flags) if flag):
        return None
    return len(range(*slice(*comps).indices(length)))


def _check_index_inputs(op: Op, entries: tuple, idx: list[Variable]) -> None:
    info, _ = _entry_info(entries, [v.type.ndim for v in idx])
    needed = sum(len(ks) for _, _, ks in info)
    if len(idx) != needed:
        raise TypeError(f"{op} takes {needed} index inputs, got {len(idx)}")
    for e, _, ks in info:
        for k in ks:
            v = idx[k]
            kind = np.dtype(v.type.dtype).kind
            if e == "a":
                ok, want = kind in "iu" and v.type.ndim > 0, "an integer array (ndim >= 1)"
            elif e == "b":
                ok, want = kind == "b" and v.type.ndim > 0, "a boolean mask (ndim >= 1)"
            else:
                ok, want = kind in "iu" and v.type.ndim == 0, "an integer scalar"
            if not ok:
                raise TypeError(f"{op}: index input {v.describe()} must be {want}")


def _advanced_static_shape(op: Op, x: Variable, entries: tuple, idx: list[Variable]) -> tuple:
    """The static shape of ``x[index]``; static errors (bounds, mask shapes) raise."""
    _check_index_inputs(op, entries, idx)
    n_axes = _entry_info(entries, [v.type.ndim for v in idx])[1]
    if n_axes > x.type.ndim:
        raise IndexError(
            f"too many indices for {x.describe()}: {x.type.ndim} dimensions, {n_axes} indexed"
        )
    info, dims, adv_ndim = _layout(entries, [v.type.ndim for v in idx], x.type.ndim)
    adv_shapes = []
    for e, axis, ks in info:
        if e in ("i", "a"):
            v = idx[ks[0]]
            length = x.type.shape[axis]
            if e == "a":
                adv_shapes.append(v.type.shape)
            if isinstance(v, Constant) and length is not None and v.data.size:
                data = np.asarray(v.data)
                bad = data[(data < -length) | (data >= length)]
                if bad.size:
                    raise IndexError(
                        f"index {int(bad.flat[0])} is out of bounds for dimension {axis} of "
                        f"{x.describe()} with static length {length}"
                    )
        elif e == "b":
            v = idx[ks[0]]
            for j, m in enumerate(v.type.shape):
                n = x.type.shape[axis + j]
                if m is not None and n is not None and m != n:
                    raise IndexError(
                        f"boolean index {v.describe()} has length {m} in its dimension {j}, "
                        f"but dimension {axis + j} of {x.describe()} has static length {n}"
                    )
            count = int(np.count_nonzero(v.data)) if isinstance(v, Constant) else None
            adv_shapes.append((count,))
        elif e != "n":
            _slice_static_length(None, e, [idx[k] for k in ks])  # a zero step raises
    adv_static = _broadcast_index_shapes(adv_shapes, adv_ndim, x.describe())
    shape: list[int | None] = []
    for d in dims:
        if d[0] == "new":
            shape.append(1)
        elif d[0] == "full":
            shape.append(x.type.shape[d[1]])
        elif d[0] == "adv":
            shape.append(adv_static[d[1]])
        else:
            _, axis, pos = d
            e, _, ks = info[pos]
            shape.append(_slice_static_length(x.type.shape[axis], e, [idx[k] for k in ks]))
    return tuple(shape)


def _numpy_index(entries: tuple, values: list) -> tuple:
    it = iter(values)
    index: list[Any] = []
    for e in entries:
        if e == "n":
            index.append(None)
        elif e == "i":
            index.append(int(next(it)))
        elif e in ("a", "b"):
            index.append(next(it))
        else:
            index.append(slice(*[int(next(it)) if flag else None for flag in e[1:]]))
    return tuple(index)


def _advanced_shape(
    info: list, values: list, x_var: Variable, op: Op, x_shape: tuple
) -> tuple[int, ...]:
    """The broadcast shape of the advanced indices (a boolean mask counts its true
    entries; one of the wrong shape is left to the caller's check), or NumPy's IndexError
    where they do not broadcast, raised before any bounds check as NumPy does."""
    shapes = []
    for e, axis, ks in info:
        if e == "a":
            shapes.append(np.shape(values[ks[0]]))
        elif e == "b":
            m = np.asarray(values[ks[0]])
            if m.shape == tuple(x_shape[axis : axis + m.ndim]):
                shapes.append((int(np.count_nonzero(m)),))
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise IndexError(
            f"{op}: shape mismatch: the index arrays of {x_var.describe()} with shapes "
            f"{', '.join(str(s) for s in shapes)} can not be broadcast together"
        ) from None


def check_runtime_index(
    op: Op, x_var: Variable, idx_vars: list, x_shape: tuple, entries: tuple, values: list
) -> tuple:
    """Raise a clear IndexError for out-of-bounds indices or ill-shaped masks; return the
    shape of the indexed region (``values``: the index values, on the host; every
    backend's kernels check through this)."""
    x_var = before_transfers(x_var)  # the user's variables, not their device copies
    idx_vars = [before_transfers(v) for v in idx_vars]
    info, dims, adv_ndim = _layout(entries, [np.ndim(v) for v in values], len(x_shape))
    # NumPy first broadcasts the index arrays; indices that select nothing (a broadcast
    # to length 0) are never checked against the axis
    adv = _advanced_shape(info, values, x_var, op, x_shape)
    selects = math.prod(adv) > 0
    for e, axis, ks in info:
        if e in ("i", "a"):
            v = np.asarray(values[ks[0]])
            n = x_shape[axis]
            if v.size and (e == "i" or selects):
                bad = v[(v < -n) | (v >= n)]
                if bad.size:
                    raise IndexError(
                        f"{op}: index {int(bad.flat[0])} is out of bounds for dimension "
                        f"{axis} (length {n}) of {x_var.describe()} (index "
                        f"{idx_vars[ks[0]].describe()})"
                    )
        elif e == "b":
            m = values[ks[0]]
            expected = tuple(x_shape[axis : axis + m.ndim])
            if m.shape != expected:
                raise IndexError(
                    f"{op}: boolean index {idx_vars[ks[0]].describe()} has shape {m.shape}, "
                    f"but the dimensions it indexes of {x_var.describe()} have lengths "
                    f"{expected}"
                )
    region = []
    for d in dims:
        if d[0] == "new":
            region.append(1)
        elif d[0] == "full":
            region.append(x_shape[d[1]])
        elif d[0] == "adv":
            region.append(adv[d[1]])
        else:
            _, axis, pos = d
            e, _, ks = info[pos]
            parts = iter(int(values[k]) for k in ks)
            sl = slice(*[next(parts) if flag else None for flag in e[1:]])
            region.append(len(range(*sl.indices(x_shape[axis]))))
    return tuple(region)


def _symbolic_broadcast(lengths: list) -> Any:
    """The broadcast of symbolic lengths none of which is statically 1."""
    from tensorjit.tensor.math import eq, switch

    result = lengths[0]
    for n in lengths[1:]:
        result = switch(eq(result, 1), n, result)
    return result


def _advanced_infer_shape(node: Apply, entries: tuple, x_shape: tuple, idx: list, idx_shapes):
    from tensorjit.tensor.math import add, cast, int_div
    from tensorjit.tensor.math import sum as tsum

    x = node.inputs[0]
    info, dims, adv_ndim = _layout(entries, [v.type.ndim for v in idx], x.type.ndim)
    contribs = []  # (static shape, symbolic shape) of each advanced index, right-aligned
    for e, _, ks in info:
        if e == "a":
            contribs.append((idx[ks[0]].type.shape, tuple(idx_shapes[ks[0]])))
        elif e == "b":
            contribs.append(((None,), (cast(tsum(idx[ks[0]]), "int64"),)))
    out = []
    for pos, d in enumerate(dims):
        if d[0] == "new":
            out.append(1)
        elif d[0] == "full":
            out.append(x_shape[d[1]])
        elif d[0] == "adv":
            j = d[1]
            lengths = []
            for static, sym in contribs:
                k = j - adv_ndim + len(static)
                if k >= 0 and static[k] != 1:
                    lengths.append(static[k] if static[k] is not None else sym[k])
            known = [n for n in lengths if isinstance(n, int)]
            out.append(known[0] if known else _symbolic_broadcast(lengths) if lengths else 1)
        else:
            _, axis, p = d
            e, _, ks = info[p]
            static = node.outputs[0].type.shape[pos]
            if not any(e[1:]):
                out.append(x_shape[axis])
            elif static is not None:
                out.append(static)
            elif e[1:] == (False, False, True) and isinstance(idx[ks[0]], Constant):
                step = abs(int(idx[ks[0]].data))  # x[::step]: ceil(length / |step|)
                out.append(int_div(add(x_shape[axis], step - 1), step))
            else:
                return None  # a slice with symbolic bounds: its length is asked at run time
    return tuple(out)


class AdvancedSubtensor(Op):
    """Advanced indexing by integer arrays and/or boolean masks, mixed with basic indices,
    by NumPy's rules; the output is a new array."""

    __props__ = ("entries",)

    def __init__(self, entries: tuple):
        self.entries = tuple(entries)
        if not any(e in ("a", "b") for e in self.entries):
            raise ValueError("AdvancedSubtensor needs an integer-array or boolean-mask entry")

    def __str__(self) -> str:
        return f"AdvancedSubtensor{{{_entries_str(self.entries)}}}"

    def make_node(self, x: Any, *idx: Any) -> Apply:
        x = as_tensor_variable(x)
        idx_vars = [_as_index_var(i) if _is_int_index(i) else as_tensor_variable(i) for i in idx]
        shape = _advanced_static_shape(self, x, self.entries, idx_vars)
        return Apply(self, [x] + idx_vars, [TensorType(x.type.dtype, shape).make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        x_shape, *idx_shapes = input_shapes
        shape = _advanced_infer_shape(node, self.entries, x_shape, node.inputs[1:], idx_shapes)
        return [shape]

    def perform(self, node, inputs, output_storage):
        x, *idx = inputs
        try:
            out = x[_numpy_index(self.entries, idx)]
        except IndexError:
            check_runtime_index(self, node.inputs[0], node.inputs[1:], x.shape, self.entries, idx)
            raise
        output_storage[0][0] = np.asarray(out)

    def grad(self, inputs, output_grads):
        x, *idx = inputs
        (g,) = output_grads
        if np.dtype(x.type.dtype).kind not in "fc":
            return [None] * len(inputs)
        from tensorjit.tensor.math import zeros_like

        gx = AdvancedIncSubtensor(self.entries, False)(zeros_like(x), g, *idx)
        return [gx] + [None] * len(idx)

    def pprint(self, input_strs):
        return f"{input_strs[0]}[{_entries_str(self.entries, input_strs[1:])}]"


class AdvancedIncSubtensor(Op):
    """A copy of ``x`` with the advanced-indexed region ``x[index]`` set to ``y``, or
    incremented by it; repeated indices accumulate then, like ``numpy.add.at``."""

    __props__ = ("entries", "set_instead_of_inc", "inplace")

    def __init__(self, entries: tuple, set_instead_of_inc: bool, inplace: bool = False):
        """``inplace=True``: modify ``x`` itself (it is destroyed) instead of a copy."""
        self.entries = tuple(entries)
        if not any(e in ("a", "b") for e in self.entries):
            raise ValueError("AdvancedIncSubtensor needs an integer-array or boolean-mask entry")
        self.set_instead_of_inc = set_instead_of_inc
        self.inplace = inplace
        if inplace:
            self.destroy_map = {0: [0]}

    def __str__(self) -> str:
        kind = "Set" if self.set_instead_of_inc else "Inc"
        suffix = "_inplace" if self.inplace else ""
        return f"Advanced{kind}Subtensor{suffix}{{{_entries_str(self.entries)}}}"

    def make_node(self, x: Any, y: Any, *idx: Any) -> Apply:
        x = as_tensor_variable(x)
        y = as_tensor_variable(y)
        idx_vars = [_as_index_var(i) if _is_int_index(i) else as_tensor_variable(i) for i in idx]
        region = _advanced_static_shape(self, x, self.entries, idx_vars)
        y = _value_for_region(self, x, y, region)
        return Apply(self, [x, y] + idx_vars, [x.type.make_variable()])

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def perform(self, node, inputs, output_storage):
        x, y, *idx = inputs
        y_var = node.inputs[1]
        # Everything is checked before anything is written (x may be worked on in place).
        region = check_runtime_index(
            self, node.inputs[0], node.inputs[2:], x.shape, self.entries, idx
        )
        if y.ndim > len(region):
            raise ValueError(f"{self}: value {y_var.describe()} has more dimensions than {region}")
        for j in range(1, y.ndim + 1):
            n, m = y.shape[-j], region[-j]
            if n == m or (n == 1 and y_var.type.shape[-j] == 1):
                continue
            if n == 1:
                raise ValueError(
                    f"{self}: value {y_var.describe()} has length 1 in dimension "
                    f"{y.ndim - j} at run time but its type does not declare it broadcastable "
                    f"(static length 1), and the indexed region has length {m} there"
                )
            raise ValueError(
                f"{self}: value {y_var.describe()} of shape {y.shape} does not match the "
                f"indexed region's shape {region}"
            )
        if self.inplace:
            out = x
        else:
            out = reusable_buffer(output_storage[0][0], x.shape, x.dtype)
            if out is None:
                out = x.copy()
            else:
                out[...] = x
        index = _numpy_index(self.entries, idx)
        if self.set_instead_of_inc:
            out[index] = y
        else:
            np.add.at(out, index, y)
        output_storage[0][0] = out

    def grad(self, inputs, output_grads):
        x, y, *idx = inputs
        (g,) = output_grads
        if np.dtype(x.type.dtype).kind not in "fc":
            return [None] * len(inputs)
        if self.set_instead_of_inc:
            zero = constant(np.zeros((), dtype=g.type.dtype))
            gx = AdvancedIncSubtensor(self.entries, True)(g, zero, *idx)
        else:
            gx = g
        gy = _reduce_to(AdvancedSubtensor(self.entries)(g, *idx), y)
        return [gx, gy] + [None] * len(idx)


def advanced_incsubtensor_inplace_variant(node: Apply, candidates: list[int]):
    """Inplace variant maker (for the plugin's InplaceRegistry): write into ``x``."""
    if 0 not in candidates:
        return None
    op = node.op
    return AdvancedIncSubtensor(op.entries, op.set_instead_of_inc, inplace=True)


def take(a: Any, indices: Any, axis: int | None = None) -> Variable:
    """``numpy.take``: elements of ``a`` at integer ``indices`` along ``axis`` (of the
    flattened ``a`` if None); ``indices`` may be symbolic, a list or an ndarray."""
    from tensorjit.tensor.math import normalize_axis
    from tensorjit.tensor.shape_ops import flatten

    a = as_tensor_variable(a)
    if axis is None:
        if a.type.ndim != 1:
            a = flatten(a)
        axis = 0
    else:
        if a.type.ndim == 0:
            raise ValueError(f"take: axis {axis!r} is out of range for the 0-d {a.describe()}")
        (axis,) = normalize_axis(axis, a.type.ndim, "take")
    item = _normalize_item(a, indices)
    if (
        item is None
        or item is Ellipsis
        or isinstance(item, slice)
        or (isinstance(item, Variable) and _is_mask(item))
    ):
        what = item.describe() if isinstance(item, Variable) else repr(item)
        raise TypeError(f"take: indices must be integers or integer arrays, got {what}")
    return getitem(a, (slice(None),) * axis + (item,))


def _value_for_region(op: Op, x: Variable, y: Variable, region: tuple) -> Variable:
    """``y`` checked against the static shape of the region it is written into, and cast
    to ``x``'s dtype."""
    if y.type.ndim > len(region):
        raise ValueError(
            f"{op}: value {y.describe()} has more dimensions than the indexed region "
            f"({len(region)})"
        )
    for j in range(1, y.type.ndim + 1):
        n, m = y.type.shape[-j], region[-j]
        if n is not None and m is not None and n != 1 and n != m:
            raise ValueError(
                f"{op}: value {y.describe()} of static shape {y.type.shape} can not be "
                f"broadcast to the indexed region's static shape {region}"
            )
    if y.type.dtype != x.type.dtype:
        from tensorjit.tensor.math import cast

        y = cast(y, x.type.dtype)
    return y


def slice_length(start: Any, stop: Any, step: Any, n: Any) -> Any:
    """Symbolic ``len(range(*slice(start, stop, step).indices(n)))`` (None = omitted)."""
    from tensorjit.tensor import math as tm

    def normalized(index, low, high):
        # Negative indices count from the end; then clamp to [low, high].
        index = tm.switch(tm.lt(index, 0), tm.add(index, n), index)
        return tm.minimum(tm.maximum(index, low), high)

    def forward(step_value):
        first = 0 if start is None else normalized(start, 0, n)
        end = n if stop is None else normalized(stop, 0, n)
        return tm.maximum(tm.int_div(tm.add(tm.sub(end, first), step_value - 1), step_value), 0)

    def backward(step_value):
        last = tm.sub(n, 1) if start is None else normalized(start, -1, tm.sub(n, 1))
        end = -1 if stop is None else normalized(stop, -1, tm.sub(n, 1))
        size = tm.neg(step_value)
        return tm.maximum(tm.int_div(tm.add(tm.sub(last, end), tm.sub(size, 1)), size), 0)

    if step is None:
        return forward(1)
    if isinstance(step, Constant):
        value = int(step.data)
        return forward(value) if value > 0 else backward(value)
    return tm.switch(tm.gt(step, 0), forward(step), backward(step))


def getitem(x: Variable, index: Any) -> Variable:
    """``x[index]`` with NumPy's semantics.

    Basic indices (integers, slices, None for a new axis, ``...``) give a view; integer
    arrays and boolean masks (symbolic tensors, lists or ndarrays), possibly mixed with
    basic indices, give a copy by NumPy's advanced indexing rules.
    """
    items = list(index) if isinstance(index, tuple) else [index]
    items = [_normalize_item(x, item) for item in items]
    if any(_is_advanced_item(item) for item in items):
        entries, inputs = _parse_advanced_index(x, items)
        return AdvancedSubtensor(entries)(x, *inputs)
    index = tuple(items) if isinstance(index, tuple) else items[0]
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
    if owner is not None and isinstance(owner.op, AdvancedSubtensor):
        x, *idx = owner.inputs
        return AdvancedIncSubtensor(owner.op.entries, set_instead_of_inc)(x, y, *idx)
    if owner is None or not isinstance(owner.op, Subtensor):
        raise TypeError(
            f"set_subtensor/inc_subtensor take an indexed tensor such as x[1:3], got "
            f"{x_indexed.describe() if isinstance(x_indexed, Variable) else repr(x_indexed)}"
        )
    x, *idx = owner.inputs
    return IncSubtensor(owner.op.entries, set_instead_of_inc)(x, y, *idx)


def set_subtensor(x_indexed: Variable, y: Any) -> Variable:
    """A copy of the indexed tensor with the indexed region set to ``y``.

    With repeated integer-array indices the last value wins, as in NumPy (and the
    gradient w.r.t. ``y`` counts every occurrence, as in Theano).
    """
    return _incsubtensor(x_indexed, y, True)


def inc_subtensor(x_indexed: Variable, y: Any) -> Variable:
    """A copy of the indexed tensor with ``y`` added to the indexed region.

    With integer-array indices, repeated indices accumulate (like ``numpy.add.at``).
    """
    return _incsubtensor(x_indexed, y, False)
