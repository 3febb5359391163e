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
from tensorjit.core.graph.traversal import ancestors, clone_replace, toposort
from tensorjit.dask.shipping import Shipped, ship
from tensorjit.tensor.math import Alloc, Reduce
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


def _analyse(f: Function, chunked: set[Variable], rank: int, lowest: int) -> _Analysis:
    """``lowest``: the smallest rank a block-wise variable may have (the blocks' rank
    less the number of axes cut into a single chunk, which a variable may drop)."""
    outputs = _user_outputs(f)
    depends = set(chunked)  # variables computed from the chunked inputs' values
    for node in toposort(outputs):
        if not isinstance(node.op, Shape) and any(i in depends for i in node.inputs):
            depends.update(node.outputs)

    def cuts_of(out: Variable) -> list[Apply] | None:
        found: list[Apply] = []
        stack, seen = [out], set()
        while stack:
            var = stack.pop()
            if var in seen or var not in depends:
                continue
            seen.add(var)
            node = var.owner
            if node is None:  # a chunked input reached without a reduction between
                return None
            op = node.op
            if isinstance(op, Reduce) and op.kind in COMBINABLE and node.inputs[0].ndim >= lowest:
                found.append(node)
            elif not isinstance(op, Shape):
                stack.extend(node.inputs)
        return found

    blockwise, tail, cuts = [], [], []
    for k, out in enumerate(outputs):
        found = cuts_of(out)
        if found is None:
            if not lowest <= out.ndim <= rank:
                raise BlockwiseError(
                    f"output {k} ({out.describe()}) has rank {out.ndim} but the blocks have "
                    f"rank {rank}, {rank - lowest} of their axes in a single chunk: "
                    "map_blocks needs block-wise outputs that keep every axis cut into "
                    f"several chunks, or outputs that end in {'/'.join(COMBINABLE)}/mean "
                    "over them"
                )
            blockwise.append(k)
        else:
            tail.append(k)
            cuts.extend(n for n in found if n not in cuts)
    return _Analysis(outputs, blockwise, cuts, tail)


def _partial(node: Apply) -> Variable:
    """The cut reduction over one block, keeping the reduced axes (size 1)."""
    op = node.op
    pattern = []
    kept = 0
    for axis in range(node.inputs[0].ndim):
        if axis in op.axis:
            pattern.append("x")
        else:
            pattern.append(kept)
            kept += 1
    return node.outputs[0].dimshuffle(*pattern)


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


def _run_tail(fn: Shipped, *args: Any) -> tuple:
    return _run_block(fn, *args)


def map_blocks(
    f: Function | Shipped, *args: Any, align: str = "rows", name: str | None = None
) -> da.Array | list[da.Array] | dict[str, da.Array]:
    """Evaluate the compiled function ``f`` over Dask arrays, block by block.

    ``args`` are ``f``'s explicit inputs in order: a Dask array is cut into blocks
    (after unifying chunks); anything else is given whole to every block. Chunked
    arguments of lower rank stand on the leading axes (``align="rows"``: labels ``y[n]``
    go with the rows of ``x[n, d]``) or on the trailing ones (``align="right"``, NumPy's
    broadcasting). An output of lower rank than the blocks drops axes that are in a
    single chunk, the last ones first (``argmax(x, axis=1)`` keeps the rows' chunks).

    Outputs are Dask arrays with chunks and dtypes inferred from the graph; outputs
    ending in a sum/mean/max/min/prod/all/any over the blocks combine across chunks.
    Returns what ``f`` returns: one array, a list, or a dict.
    """
    shipped = ship(f)
    f = shipped.function
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
    _, aligned_list = da.core.unify_chunks(*pairs)
    aligned = dict(zip(positions, aligned_list))
    grid = [1] * rank
    for arr in aligned.values():
        for j, n in enumerate(arr.numblocks):
            axis = axes_of(arr)[j]
            grid[axis] = n if n > 1 else grid[axis]

    # A variable of lower rank drops axes in a single chunk, the last ones first.
    single = [axis for axis in range(rank) if grid[axis] == 1]
    analysis = _analyse(f, {explicit[i] for i in positions}, rank, rank - len(single))
    outputs = analysis.outputs
    partials = [_partial(node) for node in analysis.cuts]
    block_outputs = [outputs[k] for k in analysis.blockwise] + partials

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
    labels = [f"output {k} ({outputs[k].describe()})" for k in analysis.blockwise]
    labels += [f"the reduction {n.op} in the graph of an output" for n in analysis.cuts]
    labels += [f"output {k} ({outputs[k].describe()})" for k in analysis.tail]
    shapes_of = _value_free(
        flat_dims + wholes,
        [shape_(v) for v in block_outputs + tail_outputs],
        stand_ins,
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

    # The grid axis each axis of a block output stands on.
    dropped = [
        single[len(single) - (rank - v.ndim) :] if v.ndim < rank else [] for v in block_outputs
    ]  # noqa: E501
    kept = [[axis for axis in range(rank) if axis not in d] for d in dropped]
    # Chunk sizes per output and axis, checked to depend on that axis's block only.
    n_block = len(block_outputs)
    chunk_sizes: list[list[dict[int, int]]] = [[{} for _ in k] for k in kept]
    for index in itertools.product(*(range(n) for n in grid)):
        shapes = shapes_of(*block_dims(index), *whole_values)[:n_block]
        for k, shape in enumerate(shapes):
            for j, size in enumerate(shape):
                known = chunk_sizes[k][j].setdefault(index[kept[k][j]], int(size))
                if known != int(size):
                    raise BlockwiseError(
                        f"{labels[k]} is not block-wise: its size along axis {j} varies "
                        f"with the block's position along other axes ({known} and {size})"
                    )
    out_chunks = [
        tuple(tuple(sizes[b] for b in range(grid[kept[k][j]])) for j, sizes in enumerate(o))
        for k, o in enumerate(chunk_sizes)
    ]

    block_fn = ship(function(explicit, block_outputs, mode=f.mode, on_unused_input="ignore"))
    token = dask.base.tokenize(shipped.token, *args)
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
        """Block output ``k`` as a Dask array (on its kept axes: a dropped axis has one
        block, so each output block comes from exactly one tuple block)."""
        dtype = np.dtype(var.type.dtype)
        out_name = f"{prefix}-out{k}-{token}"
        layer = {
            (out_name, *(index[a] for a in kept[k])): (_pick, (tuples.name, *index), k)
            for index in itertools.product(*(range(n) for n in grid))
        }
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
            stand_ins,
            [labels[n_block + t] for t in range(len(tail_outputs))],
            f.mode,
            flat_dims,
        )
        full_dims = [int(s) for i in positions for s in args[i].shape]
        full_shapes = shapes_of(*full_dims, *whole_values)[n_block:]
        done = dask.delayed(_run_tail, pure=True)(
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
