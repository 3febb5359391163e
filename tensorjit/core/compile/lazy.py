"""Scheduling for lazy ops (e.g. ``ifelse``): only the branch taken is computed.

A lazy op declares ``lazy_branches(node) -> (cond_index, true_inputs, false_inputs)``.
The nodes needed *only* through one branch's inputs are moved, as two contiguous blocks,
right before the lazy node; the VM evaluates the condition there and skips the block of
the branch not taken. Nodes that other parts of the graph also need, and nodes the
DestroyHandler orders, are computed eagerly as usual.
"""

from __future__ import annotations

from typing import Any

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.fgraph import FunctionGraph


def _needed_without(fgraph: FunctionGraph, lazy: Apply, skipped: set[int]) -> set[Apply]:
    """Nodes needed to compute the graph outputs if ``lazy`` did not read ``skipped``."""
    needed: set[Apply] = set()
    stack: list[Variable] = list(fgraph.outputs)
    while stack:
        var = stack.pop()
        node = var.owner
        if node is None or node in needed:
            continue
        needed.add(node)
        for i, inp in enumerate(node.inputs):
            if node is lazy and i in skipped:
                continue
            stack.append(inp)
    return needed


def lazy_schedule(
    fgraph: FunctionGraph, order: list[Apply], pinned: set[Apply]
) -> tuple[list[Apply], list[tuple[Apply, list[Apply], list[Apply]]]]:
    """Reorder ``order`` for lazy nodes; returns the order and, per lazy node, its
    true-branch and false-branch blocks (in execution order). ``pinned`` nodes (e.g.
    those the DestroyHandler orders) are never moved into a block."""
    lazies = [n for n in order if n.op.lazy_branches is not None]
    blocks = []
    for lazy in lazies:
        _, true_inputs, false_inputs = lazy.op.lazy_branches(lazy)
        everything = _needed_without(fgraph, lazy, set())
        without_true = _needed_without(fgraph, lazy, set(true_inputs))
        without_false = _needed_without(fgraph, lazy, set(false_inputs))
        only_true = (everything - without_true) - pinned
        only_false = (everything - without_false) - pinned
        position = {n: k for k, n in enumerate(order)}
        true_block = sorted(only_true, key=position.__getitem__)
        false_block = sorted(only_false, key=position.__getitem__)
        moved = only_true | only_false
        rest = [n for n in order if n not in moved]
        at = rest.index(lazy)
        order = rest[:at] + true_block + false_block + rest[at:]
        blocks.append((lazy, true_block, false_block))
    return order, blocks


def lazy_guards(
    order: list[Apply], blocks: list, storage: dict[Variable, list]
) -> dict[int, tuple[list, int, int, int]]:
    """The VM's guards for the final ``order``."""
    index = {n: k for k, n in enumerate(order)}
    guards: dict[int, tuple[Any, int, int, int]] = {}
    for lazy, true_block, false_block in blocks:
        if not true_block and not false_block:
            continue
        cond = lazy.inputs[lazy.op.lazy_branches(lazy)[0]]
        resume = index[lazy]
        true_start = index[true_block[0]] if true_block else None
        false_start = index[false_block[0]] if false_block else resume
        true_end = false_start
        guard_at = true_start if true_start is not None else false_start
        guards[guard_at] = (storage[cond], true_end, false_start, resume)
    return guards
