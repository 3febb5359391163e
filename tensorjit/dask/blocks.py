"""``map_blocks``: a compiled function evaluated chunk by chunk over Dask arrays.

The function's outputs are sorted into three kinds by looking at its graph:

- **block-wise**: of the blocks' rank and reaching the chunked inputs without passing a
  reduction over them; evaluated per block, like ``dask.array.map_blocks``;
- **reduced**: every path to the chunked inputs' values passes a sum/prod/max/min/all/any
  over the blocks' rank (a mean is a sum divided by a shape). Each block computes that
  reduction with ``keepdims``; Dask combines the partial results across blocks (a tree
  reduction), and the rest of the graph (the *tail*: a division by the count, a
  negation...) runs once on the combined values;
- **whole**: not depending on the chunked inputs' values at all; computed by the tail.

Chunk sizes and dtypes come from the graph (``infer_shape`` and types), never from
running the function on data: the inputs are replaced by allocations of the block's
shape, and a shape that still needs them (``x[x > 0]``) is an error naming the output.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.highlevelgraph import HighLevelGraph

from tensorjit.core.compile.function import Function, function
from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.traversal import ancestors, clone_replace, graph_inputs, toposort
from tensorjit.core.memory.shared import SharedVariable, shared
from tensorjit.dask.axes import AxisError, axis_maps
from tensorjit.dask.shipping import Shipped, ship
from tensorjit.tensor.math import Alloc, Reduce, _keepdims_pattern
from tensorjit.tensor.math import alloc as alloc_
from tensorjit.tensor.shape_ops import Shape
from tensorjit.tensor.shape_ops import shape as shape_
from tensorjit.tensor.type import TensorType

#: Reductions whose partial results over blocks combine with the same reduction.
COMBINABLE = ("sum", "prod", "max", "min", "all", "any")


class BlockwiseError(ValueError):
    """The function can not be evaluated block by block as asked."""


@dataclass
class _Analysis:
    """What ``map_blocks`` learnt from the function's graph."""

    outputs: list[Variable]  # the function's outputs, givens applied
    blockwise: list[int]  # positions of block-wise outputs
    cuts: list[Apply]  # reductions over the chunked values, combined across blocks
    tail: list[int]  # positions of reduced and whole outputs
    maps: dict[Variable, tuple]  # axis maps (axes.py) of per-block values
    labels: dict[Variable, str]  # how errors name a per-block value


def _user_outputs(f: Function) -> list[Variable]:
    made = f._construction
    outputs = made["outputs"]
    if isinstance(outputs, dict):
        outputs = [outputs[k] for k in sorted(outputs)]
    elif not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    variables = [getattr(o, "variable", o) for o in outputs]
    givens = dict(made["givens"])
    if givens:
        variables, _ = clone_replace(variables, givens, strict=made["rebuild_strict"])
    return variables


def _analyse(f: Function, seeds: dict[Variable, tuple], chunked_axes: set[int]) -> _Analysis:
    """Sort ``f``'s outputs into block-wise, reduced and whole ones (see the module
    docstring) and check, with axis maps, that every per-block value is block-wise."""
    outputs = _user_outputs(f)
    depends = set(seeds)  # variables computed from the chunked inputs' values
    for node in toposort(outputs):
        if not isinstance(node.op, Shape) and any(i in depends for i in node.inputs):
            depends.update(node.outputs)

    def cuts_of(out: Variable) -> list[Apply] | None:
        """The reductions every path from ``out`` to the chunked values passes; None
        when a path reaches them without one."""
        found: list[Apply] = []
        stack, seen = [out], set()
        while stack:
            var = stack.pop()
            if var in seen or var not in depends:
                continue
            seen.add(var)
            node = var.owner
            if node is None:
                return None
            if isinstance(node.op, Reduce) and node.op.kind in COMBINABLE:
                found.append(node)
            elif not isinstance(node.op, Shape):
                stack.extend(node.inputs)
        return found

    blockwise, tail, cuts, cut_owner = [], [], [], {}
    for k, out in enumerate(outputs):
        found = cuts_of(out)
        if found is None:
            blockwise.append(k)
            continue
        tail.append(k)
        for node in found:
            if node not in cuts:
                cuts.append(node)
                cut_owner[node] = k
    labels = {outputs[k]: f"output {k} ({outputs[k].describe()})" for k in blockwise}
    labels.update(
        {n.inputs[0]: f"output {cut_owner[n]} ({outputs[cut_owner[n]].describe()})" for n in cuts}
    )
    targets = [outputs[k] for k in blockwise] + [n.inputs[0] for n in cuts]
    try:
        maps = axis_maps(targets, seeds, chunked_axes, set(cuts))
    except AxisError as exc:
        raise BlockwiseError(
            f"map_blocks can not evaluate this function block by block: {exc}"
        ) from None  # noqa: E501
    for var in targets:
        placed = [g for g in maps[var] if g is not None]
        dropped = [g for g in sorted(chunked_axes) if g not in placed]
        if placed != sorted(set(placed)) or dropped:
            why = "puts the grid's axes in another order" if not dropped else (
                f"has no axis along grid axis {dropped[0]}, which is cut into chunks"
            )  # fmt: skip
            raise BlockwiseError(
                f"{labels[var]} {why}: map_blocks needs block-wise outputs that keep the "
                f"chunked axes in order, or outputs that end in {'/'.join(COMBINABLE)}/mean "
                "over them"
            )
    return _Analysis(outputs, blockwise, cuts, tail, maps, labels)


def _partial(node: Apply) -> Variable:
    """The cut reduction over one block, keeping the reduced axes (size 1), as
    ``keepdims=True`` does."""
    return node.outputs[0].dimshuffle(*_keepdims_pattern(node.inputs[0].ndim, node.op.axis))


def _value_free(
    inputs: list[Variable],
    outputs: list[Variable],
    stand_ins: dict[Variable, Variable],
    labels: list[str],
    mode: Any,
    dims: list[Variable],
) -> Function:
    """Compile ``outputs`` with the chunked inputs replaced by allocations of their
    shapes (``stand_ins``), and check that no allocation survived the shape rewrites:
    one that did means an output needs the chunked values, not only their shapes."""
    cloned, _ = clone_replace(outputs, stand_ins, strict=False)
    compiled = function(inputs, cloned, mode=mode, on_unused_input="ignore")
    # The compiled graph's inputs stand for ours, in order (they may be copies).
    dim_inputs = set(compiled.fgraph.inputs[: len(dims)])
    for k, out in enumerate(compiled.fgraph.outputs):
        for var in ancestors([out]):
            node = var.owner
            if node is not None and isinstance(node.op, Alloc):
                if dim_inputs & set(ancestors(node.inputs[1:])):
                    raise BlockwiseError(
                        f"{labels[k]} depends on the values of the chunked inputs, not only "
                        "on their shapes (as x[x > 0] does): map_blocks can not infer its "
                        "chunks; compute it with dask.array.map_blocks and explicit chunks"
                    )
    return compiled


def _run_block(fn: Shipped, *args: Any) -> tuple:
    out = fn.function(*args)
    return tuple(out) if isinstance(out, (list, tuple)) else (out,)


def _pick(block: tuple, k: int) -> np.ndarray:
    return block[k]


def map_blocks(
    f: Function | Shipped, *args: Any, align: str = "rows", name: str | None = None
) -> da.Array | list[da.Array] | dict[str, da.Array]:
    """Evaluate the compiled function ``f`` over Dask arrays, block by block.

    ``args`` are ``f``'s explicit inputs in order: a Dask array is cut into blocks
    (after unifying chunks); anything else is given whole to every block. Chunked
    arguments of lower rank stand on the leading axes (``align="rows"``: labels ``y[n]``
    go with the rows of ``x[n, d]``) or on the trailing ones (``align="right"``, NumPy's
    broadcasting). Each axis of an output keeps the chunks of the grid axis it comes from
    (``argmax(x, axis=1)`` keeps the rows' chunks); only axes in a single chunk may be
    reduced, indexed or contracted inside the graph (axes.py checks every op).

    Outputs are Dask arrays with chunks and dtypes inferred from the graph; outputs
    ending in a sum/mean/max/min/prod/all/any over the blocks combine across chunks.
    Returns what ``f`` returns: one array, a list, or a dict.
    """
    f = f.original if isinstance(f, Shipped) else f
    made = f._construction
    if made.get("updates"):
        raise BlockwiseError(
            f"{f.name or 'the function'} has updates: a block-wise evaluation would apply "
            "them once per block; compile it without updates for map_blocks"
        )
    explicit = [inp.variable for inp in f.inputs]
    if len(args) != len(explicit):
        raise TypeError(
            f"map_blocks: the function takes {len(explicit)} inputs "
            f"({', '.join(str(v) for v in explicit)}), got {len(args)} arguments"
        )
    positions = [i for i, a in enumerate(args) if isinstance(a, da.Array)]
    if not positions:
        raise TypeError("map_blocks: none of the arguments is a dask array")
    for i in positions:
        var, arr = explicit[i], args[i]
        if not isinstance(var.type, TensorType) or arr.ndim != var.ndim:
            raise BlockwiseError(
                f"argument {i} is a {arr.ndim}-d dask array but input {var.describe()} "
                f"expects {var.type}"
            )
        if not (f.inputs[i].allow_downcast or np.can_cast(arr.dtype, var.type.dtype, "safe")):
            raise TypeError(
                f"argument {i} is a dask array of {arr.dtype} but input {var.describe()} "
                f"expects {var.type.dtype}, which would lose precision"
            )
    rank = max(args[i].ndim for i in positions)
    if align not in ("rows", "right"):
        raise ValueError(f"align must be 'rows' or 'right', got {align!r}")

    def axes_of(arr: da.Array) -> tuple[int, ...]:
        """The grid axes a chunked argument's axes stand on."""
        first = 0 if align == "rows" else rank - arr.ndim
        return tuple(range(first, first + arr.ndim))

    pairs = []
    for i in positions:
        pairs += [args[i], axes_of(args[i])]
    try:
        _, aligned_list = da.core.unify_chunks(*pairs)
    except ValueError as exc:
        shapes = ", ".join(f"{explicit[i]}: {args[i].shape}" for i in positions)
        raise BlockwiseError(
            f"the chunked arguments do not line up on the grid ({shapes}; align={align!r}): {exc}"
        ) from None
    aligned = dict(zip(positions, aligned_list))
    grid = [1] * rank
    for arr in aligned.values():
        for j, n in enumerate(arr.numblocks):
            axis = axes_of(arr)[j]
            grid[axis] = n if n > 1 else grid[axis]
    chunked_axes = {axis for axis in range(rank) if grid[axis] > 1}
    seeds = {}
    for i in positions:
        # An axis of length 1 broadcasts: it stands on no grid axis.
        seeds[explicit[i]] = tuple(
            None if args[i].shape[j] == 1 and rank > 0 else g
            for j, g in enumerate(axes_of(args[i]))
        )
    analysis = _analyse(f, seeds, chunked_axes)
    outputs = analysis.outputs
    partials = [_partial(node) for node in analysis.cuts]
    block_outputs = [outputs[k] for k in analysis.blockwise] + partials
    axis_of = [analysis.maps[outputs[k]] for k in analysis.blockwise]
    axis_of += [analysis.maps[node.inputs[0]] for node in analysis.cuts]  # keepdims partials
    labels = [analysis.labels[outputs[k]] for k in analysis.blockwise]
    labels += [analysis.labels[node.inputs[0]] for node in analysis.cuts]
    labels += [f"output {k} ({outputs[k].describe()})" for k in analysis.tail]

    # Shared values are read now, once: every block (on any worker, or in this process
    # with a local scheduler) sees the same snapshot.
    snapshot = {
        v: shared(v.get_value(), name=v.name)
        for v in graph_inputs(outputs)
        if isinstance(v, SharedVariable)
    }
    # One scalar per dimension of each chunked input stands for its shape.
    dims = {
        i: [TensorType("int64", ())(f"{explicit[i]}_dim{d}") for d in range(args[i].ndim)]
        for i in positions
    }
    flat_dims = [d for i in positions for d in dims[i]]
    stand_ins = {
        explicit[i]: alloc_(np.zeros((), explicit[i].type.dtype), *dims[i]) for i in positions
    }
    wholes = [explicit[i] for i in range(len(args)) if i not in positions]
    whole_values = [args[i] for i in range(len(args)) if i not in positions]
    tail_outputs = [outputs[k] for k in analysis.tail]
    shapes_of = _value_free(
        flat_dims + wholes,
        [shape_(v) for v in block_outputs + tail_outputs],
        {**stand_ins, **snapshot},
        labels,
        f.mode,
        flat_dims,
    )

    def block_dims(index: tuple[int, ...]) -> list[int]:
        sizes = []
        for i in positions:
            arr = aligned[i]
            for j, chunks in enumerate(arr.chunks):
                sizes.append(chunks[index[axes_of(arr)[j]]] if len(chunks) > 1 else chunks[0])
        return sizes

    # Chunk sizes per output and axis, checked to depend on that axis's block only.
    n_block = len(block_outputs)
    chunk_sizes: list[list[dict[int, int]]] = [[{} for _ in m] for m in axis_of]
    for index in itertools.product(*(range(n) for n in grid)):
        shapes = shapes_of(*block_dims(index), *whole_values)[:n_block]
        for k, shape in enumerate(shapes):
            for j, size in enumerate(shape):
                g = axis_of[k][j]
                known = chunk_sizes[k][j].setdefault(0 if g is None else index[g], int(size))
                if known != int(size):
                    raise BlockwiseError(
                        f"{labels[k]} is not block-wise: its size along axis {j} varies "
                        f"with the block's position along other axes ({known} and {size})"
                    )
    out_chunks = [
        tuple(
            tuple(sizes[b] for b in range(1 if m[j] is None else grid[m[j]]))
            for j, sizes in enumerate(o)
        )
        for m, o in zip(axis_of, chunk_sizes)
    ]

    block_graph, _ = clone_replace(block_outputs, snapshot) if snapshot else (block_outputs, {})
    block_fn = ship(function(explicit, block_graph, mode=f.mode, on_unused_input="ignore"))
    token = dask.base.tokenize(block_fn.token, *args)
    prefix = name or f"tensorjit-{f.name or 'map-blocks'}"
    blockwise_args: list[Any] = [block_fn, None]
    for i, arg in enumerate(args):
        blockwise_args += [aligned[i], axes_of(arg)] if i in aligned else [arg, None]
    tuples = da.blockwise(
        _run_block,
        tuple(range(rank)),
        *blockwise_args,
        dtype=object,
        meta=np.empty((0,) * rank, dtype=object),
        align_arrays=False,
        name=f"{prefix}-blocks-{token}",
    )

    def pick(k: int, var: Variable) -> da.Array:
        """Block output ``k`` as a Dask array: its axes stand on the grid axes of its
        axis map (an axis on none, and every grid axis it lacks, has one block)."""
        dtype = np.dtype(var.type.dtype)
        out_name = f"{prefix}-out{k}-{token}"
        layer = {
            (out_name, *(0 if g is None else index[g] for g in axis_of[k])): (
                _pick, (tuples.name, *index), k,
            )
            for index in itertools.product(*(range(n) for n in grid))
        }  # fmt: skip
        graph = HighLevelGraph.from_collections(out_name, layer, dependencies=[tuples])
        meta = np.empty((0,) * var.ndim, dtype)
        return da.Array(graph, out_name, chunks=out_chunks[k], dtype=dtype, meta=meta)

    results: list[da.Array | None] = [None] * len(outputs)
    for k, position in enumerate(analysis.blockwise):
        results[position] = pick(k, outputs[position])
    if analysis.tail:
        combined = []
        for j, node in enumerate(analysis.cuts):
            part = pick(len(analysis.blockwise) + j, partials[j])
            kind, axes = node.op.kind, tuple(node.op.axis)
            kwargs = {"dtype": part.dtype} if kind in ("sum", "prod") else {}
            combined.append(getattr(da, kind)(part, axis=axes, **kwargs))
        placeholders = {node.outputs[0]: node.outputs[0].type() for node in analysis.cuts}
        tail_graph, _ = clone_replace(tail_outputs, placeholders)
        tail_fn = _value_free(
            flat_dims + wholes + list(placeholders.values()),
            tail_graph,
            {**stand_ins, **snapshot},
            labels[n_block:],
            f.mode,
            flat_dims,
        )
        full_dims = [int(s) for i in positions for s in args[i].shape]
        full_shapes = shapes_of(*full_dims, *whole_values)[n_block:]
        done = dask.delayed(_run_block, pure=True)(
            ship(tail_fn),
            *full_dims,
            *whole_values,
            *combined,
            dask_key_name=f"{prefix}-tail-{token}",
        )
        cut_outputs = [node.outputs[0] for node in analysis.cuts]
        for t, position in enumerate(analysis.tail):
            var = outputs[position]
            if var in cut_outputs:  # the reduction itself: keep its chunks, skip the tail
                results[position] = combined[cut_outputs.index(var)]
                continue
            results[position] = da.from_delayed(
                dask.delayed(operator.getitem)(done, t),
                shape=tuple(int(s) for s in full_shapes[t]),
                dtype=np.dtype(var.type.dtype),
            )
    if f.output_keys is not None:
        return dict(zip(f.output_keys, results))
    return results[0] if f.unpack_single else results
