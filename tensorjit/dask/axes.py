"""Which grid axis each axis of a variable stands on, for ``map_blocks``.

A block of the grid holds one chunk of each chunked input; a variable computed from a
block is right only if no op mixes elements across a chunk boundary. Walking the graph
from the chunked inputs, each variable gets an *axis map*: per axis, the grid axis it runs
along (or None for an axis of length 1 that broadcasts). Only ops known to be block-wise
pass: element-wise ops (with their operands' axes on the same grid axes), dimshuffles,
basic indexing, and reductions, softmaxes and argmax along axes in a single chunk. A
reduction across chunks is allowed only where ``map_blocks`` combines it (a *cut*); a
shape read from a chunked axis is a block's length, so using one is refused too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.traversal import toposort
from tensorjit.tensor.allocation import ARange
from tensorjit.tensor.elemwise import DimShuffle, Elemwise
from tensorjit.tensor.math import Argmax, Dot, Reduce
from tensorjit.tensor.nnet.basic import LogSoftmax, Softmax
from tensorjit.tensor.shape_ops import Shape
from tensorjit.tensor.subtensor import AdvancedSubtensor, Subtensor

AxisMap = tuple  # tuple[int | None, ...]
FULL_SLICE = ("s", False, False, False)


class AxisError(ValueError):
    """A variable mixes elements across chunks (``map_blocks`` names the output)."""


def _node_text(node: Apply) -> str:
    out = node.outputs[0]
    where = f", created at {out.created_at}" if getattr(out, "created_at", None) else ""
    return f"{node.op} ({out.type}{where})"


def _is_block_arange(node: Apply, tainted: dict) -> bool:
    """``arange(0, n, 1)`` with ``n`` the length of a chunked axis."""
    if not isinstance(node.op, ARange) or len(node.inputs) != 3:
        return False
    start, stop, step = node.inputs
    constant_is = lambda v, k: isinstance(v, Constant) and np.all(v.data == k)  # noqa: E731
    return stop in tainted and constant_is(start, 0) and constant_is(step, 1)


def _select_per_row(node: Apply, maps: dict, row_index: dict, multi: Any, refuse: Any) -> tuple:
    """``x[arange(n), y]``: one element per row, from a block's rows and labels."""
    x, rows, picks = node.inputs
    g = row_index[rows]
    x_map = maps.get(x)
    ok = (
        node.op.entries == ("a", "a")
        and x_map is not None
        and len(x_map) == 2
        and x_map[0] == g
        and not multi(x_map[1])
        and maps.get(picks) == (g,)
    )
    if not ok:
        raise refuse(
            node,
            "indexes with arange(length of a chunked axis) in a way map_blocks can not "
            "follow: it supports x[arange(x.shape[0]), y] with x's rows and y on the same "
            "chunked axis and x's other axis in a single chunk",
        )
    return (g,)


def axis_maps(
    targets: Iterable[Variable],
    seeds: dict[Variable, AxisMap],
    chunked_axes: set[int],
    cuts: set[Apply],
) -> dict[Variable, AxisMap]:
    """Axis maps of every variable between ``seeds`` (the chunked inputs) and
    ``targets``, checking each op is block-wise; ``chunked_axes``: grid axes cut into
    several chunks; ``cuts``: reductions combined across blocks (their own outputs are
    not computed per block)."""
    maps: dict[Variable, AxisMap] = dict(seeds)
    shape_of: dict[Variable, AxisMap] = {}  # Shape(v) output -> v's axis map
    tainted: dict[Variable, int] = {}  # values holding a chunked axis's block length

    def multi(g: int | None) -> bool:
        return g is not None and g in chunked_axes

    def refuse(node: Apply, why: str) -> AxisError:
        return AxisError(f"{_node_text(node)} {why}")

    row_index: dict[Variable, int] = {}  # arange(length of a chunked axis): block rows

    for node in toposort(list(targets)):
        op = node.op
        tracked = [i for i in node.inputs if i in maps]
        if _is_block_arange(node, tainted):
            # arange(x.shape[0]) inside a block counts the block's rows: right only as the
            # row index of x[arange(n), y] (checked below), so it is followed, not refused.
            row_index[node.outputs[0]] = tainted[node.inputs[1]]
            continue
        if isinstance(op, AdvancedSubtensor) and node.inputs[1] in row_index:
            maps[node.outputs[0]] = _select_per_row(node, maps, row_index, multi, refuse)
            continue
        for inp in node.inputs:
            if inp in row_index:
                raise refuse(
                    node,
                    "uses arange(length of a chunked axis) other than as the row index of "
                    "x[arange(n), y]: inside a block it counts the chunk's rows",
                )
            if inp in tainted:
                raise refuse(
                    node,
                    f"uses the length of grid axis {tainted[inp]}, which is cut into chunks: "
                    "inside a block it is the chunk's length, not the array's",
                )
        if isinstance(op, Shape) and node.inputs[0] in maps:
            shape_of[node.outputs[0]] = maps[node.inputs[0]]
            continue
        if node.inputs and node.inputs[0] in shape_of:
            source = shape_of[node.inputs[0]]
            index = node.inputs[1] if len(node.inputs) > 1 else None
            if isinstance(op, Subtensor) and op.entries == ("i",) and isinstance(index, Constant):
                g = source[int(index.data)]
                if multi(g):
                    tainted[node.outputs[0]] = g
            elif any(multi(g) for g in source):
                tainted[node.outputs[0]] = next(g for g in source if multi(g))
            continue
        if not tracked:
            continue
        if node in cuts:
            continue  # combined across blocks: its result is not a per-block value
        in_map = maps[node.inputs[0]] if node.inputs[0] in maps else None
        if isinstance(op, Elemwise):
            out_map = []
            for axis in range(node.outputs[0].ndim):
                found = {maps[i][axis] for i in tracked if maps[i][axis] is not None}
                if len(found) > 1 and any(multi(g) for g in found):
                    raise refuse(
                        node,
                        f"combines operands whose axis {axis} stands on different grid axes "
                        f"{sorted(found)}: give map_blocks align='right' (NumPy's "
                        "broadcasting) or arguments whose axes line up",
                    )
                chosen = [g for g in found if multi(g)] or sorted(found)
                out_map.append(chosen[0] if chosen else None)
            result = tuple(out_map)
        elif isinstance(op, DimShuffle) and in_map is not None:
            result = tuple(None if o == "x" else in_map[o] for o in op.new_order)
        elif isinstance(op, Reduce) and in_map is not None:
            across = [in_map[a] for a in op.axis if multi(in_map[a])]
            if across:
                raise refuse(
                    node,
                    f"reduces across the chunks of grid axis {across[0]} inside the graph: "
                    "map_blocks combines a reduction across chunks only at the end of the "
                    "graph (followed by element-wise ops at most)",
                )
            result = tuple(g for a, g in enumerate(in_map) if a not in op.axis)
        elif isinstance(op, (Softmax, LogSoftmax, Argmax)) and in_map is not None:
            axes = op.axis if isinstance(op.axis, tuple) else (op.axis,)
            axes = tuple(range(len(in_map))) if op.axis is None else axes
            if any(multi(in_map[a]) for a in axes):
                raise refuse(node, "works along an axis cut into chunks")
            if isinstance(op, Argmax):
                result = tuple(g for a, g in enumerate(in_map) if a not in axes)
            else:
                result = in_map
        elif isinstance(op, Dot):
            x, y = node.inputs
            x_map = maps.get(x, (None,) * x.ndim)
            y_map = maps.get(y, (None,) * y.ndim)
            contracted = [x_map[-1], y_map[0]]
            if any(multi(g) for g in contracted):
                raise refuse(node, "contracts an axis cut into chunks")
            result = tuple(x_map[:-1]) + tuple(y_map[1:])
        elif isinstance(op, Subtensor) and in_map is not None and tracked == [node.inputs[0]]:
            out_map = []
            for axis, g in enumerate(in_map):
                entry = op.entries[axis] if axis < len(op.entries) else FULL_SLICE
                if entry != FULL_SLICE and multi(g):
                    raise refuse(node, f"indexes axis {axis}, which is cut into chunks")
                if entry != "i":
                    out_map.append(g)
            result = tuple(out_map)
        else:
            raise refuse(
                node,
                "is not known to be block-wise: map_blocks evaluates element-wise ops, "
                "dimshuffles, basic indexing, and dot/reductions/softmax/argmax along axes "
                "in a single chunk, plus reductions across chunks at the end of the graph",
            )
        for out in node.outputs:
            maps[out] = result
    return maps
