"""Multi-output elementwise fusion: elementwise nodes over one loop space that feed one
another become one MultiOutputElemwise node, each value read outside stored once.

Serves every graph where an elementwise value is read in more than one place, which
single-output fusion (fusion.py) must store and read back: formulas with several results
(an option's call and put price from the same d1, d2 and discount), optimiser updates
(a moment and the parameter from the same gradient), gate arithmetic shared by a
recurrent cell's outputs, forward values a gradient reads again.

It runs after fusion.py and the MomentsMap rewrite (whose patterns it must not hide),
where every device the function may place nodes on has kernels for MultiOutputElemwise
(the host's C backend and the shared device families of OpenCL and CUDA do; a device
without them keeps its single-output nodes), and joins a group only where those devices
would run the joined node. Where they would not (a member's op or dtype their kernels
can not render), the group is grown again without the members they would not run alone:
those stay apart (on the host), the rest is joined on the device.
Groups grow along producer -> consumer edges whose value has the loop's broadcast
pattern, so every member has the same run-time shape; a merge is refused when a path
leaves the group and comes back (the fused node would depend on itself).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.fgraph import OUTPUT, FunctionGraph
from tensorjit.core.rewrites import GraphRewriter
from tensorjit.tensor.composite import Composite
from tensorjit.tensor.multi_output_elemwise import MultiOutputElemwise
from tensorjit.tensor.rewriting.fusion import MAX_INPUTS, fusable
from tensorjit.tensor.rewriting.util import devices_have_kernels, devices_run

MAX_OUTPUTS = 16  # outputs of one fused node (each a pointer of the C kernel)


class MultiOutputFusion(GraphRewriter):
    name = "multi_output_fusion"

    def apply(self, fgraph: FunctionGraph, apply_replacements) -> None:
        if not devices_have_kernels(fgraph, MultiOutputElemwise):
            return
        # One group at a time, fused before the next grows: the convexity test then
        # runs on the graph as it is (earlier groups are single nodes in it), where a
        # topological order bounds the search.
        runs = partial(devices_run, fgraph)
        tried: set[Apply] = set()
        changed = True
        while changed:  # (a new order after each fused group)
            changed = False
            order = {node: k for k, node in enumerate(fgraph.toposort())}
            for seed in list(order):
                if seed in tried or not fusable(seed) or seed not in fgraph.apply_nodes:
                    continue
                group, replacements = _joined(fgraph, seed, order, runs)
                tried.update(group)
                if replacements and apply_replacements(replacements, reason=self.name):
                    changed = True
                    break


def _joined(
    fgraph: FunctionGraph, seed: Apply, order: dict[Apply, int], runs: Callable[[Apply], bool]
) -> tuple[frozenset[Apply], list[tuple[Variable, Variable]]]:
    """The group grown from ``seed`` and the replacements joining it (none if it stays
    apart). Where a device would not run the joined node, the group is grown again
    without the members it would not run alone; those count as tried, the rest of the
    first group stays free to seed another."""

    def joined(group: frozenset[Apply]) -> list[tuple[Variable, Variable]]:
        members = sorted(group, key=order.__getitem__)
        return _fused(fgraph, members, runs) if len(members) > 1 else []

    group = _grow(fgraph, seed, order)
    replacements = joined(group)
    if replacements or len(group) < 2:
        return group, replacements
    apart = frozenset(node for node in group if not runs(node))
    if not apart:
        return group, []
    if seed in apart:
        return apart, []
    smaller = _grow(fgraph, seed, order, excluded=apart)
    return smaller | apart, joined(smaller)


def _grow(
    fgraph: FunctionGraph,
    seed: Apply,
    order: dict[Apply, int],
    excluded: frozenset[Apply] = frozenset(),
) -> frozenset[Apply]:
    """The largest group found from ``seed`` by adding, while any can be, a member's
    producer or consumer of the same broadcast pattern, not in ``excluded``, that keeps
    the group convex."""
    pattern = seed.outputs[0].type.broadcastable
    group = frozenset((seed,))
    grown = True
    while grown:
        grown = False
        for node in _neighbours(fgraph, group, pattern):
            if node in excluded:
                continue
            bigger = group | {node}
            if _fits(fgraph, bigger) and _convex(fgraph, bigger, order):
                group, grown = bigger, True
    return group


def _neighbours(fgraph: FunctionGraph, group: frozenset[Apply], pattern: tuple) -> list[Apply]:
    """Members' producers and consumers that may join: elementwise nodes of ``pattern``
    linked to the group by a value of that pattern."""
    found: dict[Apply, None] = {}
    for node in group:
        for var in node.inputs:
            if var.type.broadcastable == pattern and fusable(var.owner):
                found[var.owner] = None
        for client, _ in fgraph.clients.get(node.outputs[0], {}):
            if client != OUTPUT and fusable(client):
                found[client] = None
    return [n for n in found if n not in group and n.outputs[0].type.broadcastable == pattern]


def _read_outside(fgraph: FunctionGraph, var: Variable, group: frozenset[Apply]) -> bool:
    return any(c == OUTPUT or c not in group for c, _ in fgraph.clients.get(var, {}))


def _fits(fgraph: FunctionGraph, group: frozenset[Apply]) -> bool:
    """Whether the fused node's operand and output counts stay within the kernels'."""
    made = {node.outputs[0] for node in group}
    inputs = {v for node in group for v in node.inputs if v not in made}
    outputs = [v for v in made if _read_outside(fgraph, v, group)]
    return len(inputs) <= MAX_INPUTS and len(outputs) <= MAX_OUTPUTS


def _convex(fgraph: FunctionGraph, group: frozenset[Apply], order: dict[Apply, int]) -> bool:
    """Whether no path leaves ``group`` and comes back into it. A path back must reach a
    member before the last one in topological order, so the search stops there."""
    last = max(order[node] for node in group)
    stack = [
        client
        for node in group
        for client, _ in fgraph.clients.get(node.outputs[0], {})
        if client != OUTPUT and client not in group
    ]
    seen: set[Apply] = set()
    while stack:
        node = stack.pop()
        if node in seen or order[node] > last:
            continue
        seen.add(node)
        for out in node.outputs:
            for client, _ in fgraph.clients.get(out, {}):
                if client == OUTPUT:
                    continue
                if client in group:
                    return False
                stack.append(client)
    return True


def _fused(
    fgraph: FunctionGraph, members: list[Apply], runs: Callable[[Apply], bool]
) -> list[tuple[Variable, Variable]]:
    """The replacements of the group's values read outside it by the outputs of one
    MultiOutputElemwise node (``members`` in topological order); none if its values are
    read outside through one output only (single-output fusion's case, left alone), or
    if ``runs`` refuses the node (a device would not run it: its members stay apart)."""
    group = frozenset(members)
    inputs: list[Variable] = []
    index: dict[Variable, tuple[str, int]] = {}
    program: list = []
    # A step already in the program is not added again: single-output fusion recomputes
    # cheap values in each group that reads them (fusion.py's _recomputed), and the
    # inlined groups would compute them twice.
    steps: dict[tuple, tuple[str, int]] = {}

    def ref(var: Variable) -> tuple[str, int]:
        if var not in index:
            index[var] = ("in", len(inputs))
            inputs.append(var)
        return index[var]

    def step(op, args: tuple) -> tuple[str, int]:
        key = (op, args)
        if key not in steps:
            program.append(key)
            steps[key] = ("step", len(program) - 1)
        return steps[key]

    for node in members:
        args = [ref(v) for v in node.inputs]
        scalar_op = node.op.scalar_op
        if isinstance(scalar_op, Composite):  # inlined, its steps renumbered
            made: list[tuple[str, int]] = []
            for op, refs in scalar_op.program:
                made.append(step(op, tuple(args[i] if k == "in" else made[i] for k, i in refs)))
            index[node.outputs[0]] = made[scalar_op.outputs[0]]
        else:
            index[node.outputs[0]] = step(scalar_op, tuple(args))
    read = [node.outputs[0] for node in members if _read_outside(fgraph, node.outputs[0], group)]
    # One output per step: values that came out the same step share it.
    results: dict[int, list[Variable]] = {}
    for var in read:
        results.setdefault(index[var][1], []).append(var)
    if len(results) < 2:
        return []
    composite = Composite(
        tuple(program),
        len(inputs),
        read[0].type.dtype,
        outputs=tuple(results),
        out_dtypes=tuple(olds[0].type.dtype for olds in results.values()),
    )
    new = MultiOutputElemwise(composite)(*inputs)
    if not runs(new[0].owner):
        return []
    pairs = []
    for olds, value in zip(results.values(), new):
        for old in olds:
            fitted = value if value.type == old.type else old.type.convert_variable(value)
            if fitted is None:
                return []
            pairs.append((old, fitted))
    return pairs
