"""Residuals: per-step values of a forward loop that its backward loop reads rather than
computes again.

The backward step of ``scan_grad`` is built from a clone of the forward step (the gates
of a GRU or LSTM, an attention score) and the gradient nodes reading it. Recomputing
what the gradient reads costs, per step, what the forward step cost: for a recurrent net
the state's products with the recurrent weights, a third of the training step. Recorded
by the forward loop (as outputs without recurrence), those values cost a row written per
step and read back once.

A value is recorded when the gradient reads it, recomputing it would run an op other
than the elementwise and view ops (a product, a reduction, a convolution) on a value
that changes from step to step, and its shape is the same at every step (the rows of
one stacked output: a shape read from the step's values, such as a boolean mask's
length, rules it out). Values cheap to derive from recorded ones (``1 - z`` of a
recorded ``z``) are recomputed, fused into the backward step's kernels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.traversal import toposort
from tensorjit.tensor.elemwise import DimShuffle, Elemwise
from tensorjit.tensor.shape_ops import MakeVector, Reshape, Shape
from tensorjit.tensor.subtensor import Subtensor
from tensorjit.tensor.type import TensorType

# Ops whose recomputation costs about what reading a recorded row would: elementwise
# arithmetic and views, and the shape arithmetic they need.
CHEAP_OPS = (Elemwise, DimShuffle, Reshape, Subtensor, Shape, MakeVector)


def residuals(
    clones: Mapping[Variable, Variable],
    gradients: Sequence[Variable],
    boundary: Iterable[Variable],
    per_step: Iterable[Variable],
    invariant: Iterable[Variable],
) -> list[tuple[Variable, Variable]]:
    """``(forward inner variable, its clone)`` pairs the backward step should read from a
    recorded row, in the clones' topological order.

    ``clones``: forward inner variable -> its clone in the backward step (inner inputs
    map to the backward's own inputs); ``gradients``: the backward step's values;
    ``boundary``: the backward step's inner inputs; ``per_step``: those of them that
    change from step to step (sequences and the forward's history rows), with rows of
    one shape; ``invariant``: those every step reads unchanged (non-sequences).
    """
    boundary = set(boundary)
    per_step = set(per_step)
    invariant = set(invariant)
    forward_of = {
        clone: fwd
        for fwd, clone in clones.items()
        if fwd.owner is not None
        and clone.owner is not None
        and clone not in boundary
        and isinstance(clone.type, TensorType)
    }
    order = toposort(list(gradients), boundary)
    cloned_nodes = {n for n in order if any(o in forward_of for o in n.outputs)}
    read: list[Variable] = []
    for n in order:
        if n in cloned_nodes:
            continue
        read.extend(i for i in n.inputs if i in forward_of and i not in read)
    read.extend(g for g in gradients if g in forward_of and g not in read)
    position = {o: k for k, n in enumerate(order) for o in n.outputs}
    chosen: list[Variable] = []
    for value in sorted(read, key=position.__getitem__):
        nodes = toposort([value], boundary | set(chosen))
        if _costly_per_step(nodes, per_step | set(chosen)) and _same_shape_every_step(
            value, boundary, invariant
        ):
            chosen.append(value)
    return [(forward_of[c], c) for c in chosen]


def _costly_per_step(nodes: Sequence[Apply], varying: set[Variable]) -> bool:
    """Whether a node other than the cheap ones reads (through ``nodes``, in topological
    order) a value that changes from step to step: a product of non-sequences alone is
    the loop-invariant work the scan rewrites hoist, not worth a row per step."""
    varying = set(varying)
    for n in nodes:
        if any(i in varying for i in n.inputs):
            if not isinstance(n.op, CHEAP_OPS):
                return True
            varying.update(n.outputs)
    return False


class _ShapeScratch:
    """What ``shape_of`` memoizes its entries on, outside a FunctionGraph."""


def _same_shape_every_step(
    value: Variable, boundary: set[Variable], invariant: set[Variable]
) -> bool:
    """Whether ``value``'s inferred shape reads the step's inputs only through their
    shapes (the rows of a sequence or a history all have one shape) and the values of
    non-sequences: then every step's value has the same shape."""
    from tensorjit.tensor.rewriting.shape import shape_of

    try:
        entries = shape_of(_ShapeScratch(), value)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - an op's infer_shape failed here: do not record
        return False
    if entries is None:
        return False
    for n in toposort(list(entries), boundary):
        if isinstance(n.op, Shape):
            continue
        if any(i in boundary and i not in invariant for i in n.inputs):
            return False
    return True
