"""All-or-nothing calls: a call that raises leaves every shared variable (and every
mutable argument) as it was, whatever the number and order of its in-place updates.

A *commit* is a step that overwrites a function input's buffer (an in-place update of
a shared variable). Three parts, shared by the per-node VM and whole-graph programs:

- ``commits_last``: the schedule runs the commits, and everything after them that has
  to be, last; every other step (where most failures happen) runs before any commit.
- Prechecks: before the first commit, the failure conditions of the later steps that
  could still fail are checked on their input values, when those are already computed
  and the step can be checked (``Op.input_check`` in the VM; a program checks the step
  kinds it knows). The first commit itself raises before writing, as every kernel that
  overwrites an input must. A value a later commit updates in place (a weight that two
  GEMMs update in turn) is checked through its *stand-in*, the buffer before the update:
  same shape and dtype, and checks only look at those.
- Snapshots: a later step that can fail but can not be checked that early makes each
  commit before it save what it overwrites; a failing call puts the saved values back.
  Only unusual graphs need them (e.g. an output computed from an updated value).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tensorjit.core.devices import kind_of
from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.fgraph import OUTPUT, FunctionGraph
from tensorjit.core.memory.aliasing import alias_roots
from tensorjit.core.memory.destroy_handler import DestroyHandler, destroyed_inputs


def commits_last(fgraph: FunctionGraph, order: list[Apply]) -> list[Apply]:
    """``order`` with the commits, what depends on them and whatever must run after
    those (a destroyer of a value they read) moved to the end, in their order."""
    handler = fgraph.get_feature(DestroyHandler)
    roots = alias_roots(order)
    must_follow: dict[Apply, set[Apply]] = {}  # node -> the destroyers that must follow it
    for destroyer, readers in handler.orderings(fgraph).items():
        for reader in readers:
            must_follow.setdefault(reader, set()).add(destroyer)
    deferred: set[Apply] = set()
    stack = [node for node in order if overwritten_inputs(node, roots)]
    while stack:
        node = stack.pop()
        if node in deferred:
            continue
        deferred.add(node)
        for out in node.outputs:
            stack.extend(c for c, _ in fgraph.clients.get(out, ()) if c != OUTPUT)
        stack.extend(must_follow.get(node, ()))
    if not deferred:
        return order
    return [n for n in order if n not in deferred] + [n for n in order if n in deferred]


def overwritten_inputs(node: Apply, roots: dict[Variable, Variable]) -> tuple[Variable, ...]:
    """The function inputs (graph inputs, not constants) whose buffers ``node``
    overwrites (several for an op with several outputs in place). ``roots``:
    ``alias_roots`` of the schedule."""
    found: dict[Variable, None] = {}
    for i in destroyed_inputs(node):
        var = node.inputs[i]
        root = roots.get(var, var)
        if root.owner is None and not isinstance(root, Constant):
            found[root] = None
    return tuple(found)


@dataclass(frozen=True)
class CommitPlan:
    """What a runner does for all-or-nothing calls over one schedule."""

    first: int = -1  # the first commit step; -1: the schedule overwrites no input
    prechecks: tuple[int, ...] = ()  # steps checked just before ``first`` runs
    # step -> the inputs it saves
    snapshots: dict[int, tuple[Variable, ...]] = field(default_factory=dict)
    # A commit's in-place output -> the value it overwrote, computed before the first
    # commit: prechecks read the stand-in instead (shapes and dtypes are the same).
    stand_ins: dict[Variable, Variable] = field(default_factory=dict)


def commit_plan(
    nodes: Sequence[Apply],
    can_precheck: Callable[[Apply], bool],
    cannot_fail: Callable[[Apply], bool] = lambda node: False,
) -> CommitPlan:
    """The plan for ``nodes`` (scheduled by ``commits_last``). ``can_precheck(node)``:
    whether the runner can check that node's failure conditions from its inputs;
    ``cannot_fail(node)``: whether the runner's kernel for it can not raise, running out
    of memory aside (it needs neither a check nor snapshots)."""
    roots = alias_roots(nodes)
    overwritten = {k: overwritten_inputs(n, roots) for k, n in enumerate(nodes)}
    commits = {k: inputs for k, inputs in overwritten.items() if inputs}
    if not commits:
        return CommitPlan()
    first = min(commits)
    ready = {out for node in nodes[:first] for out in node.outputs}
    stand_ins: dict[Variable, Variable] = {}
    prechecks: list[int] = []
    snapshots: dict[int, tuple[Variable, ...]] = {}
    for j in range(first, len(nodes)):
        node = nodes[j]
        if j > first and node.op.may_raise and not cannot_fail(node):
            if can_precheck(node) and all(
                i.owner is None or i in ready or i in stand_ins for i in node.inputs
            ):
                prechecks.append(j)
            else:  # every commit before it must be able to undo
                snapshots.update((k, inputs) for k, inputs in commits.items() if k < j)
        for out, (i, *_) in node.op.destroy_map.items():
            before = node.inputs[i]
            if before.owner is None or before in ready or before in stand_ins:
                stand_ins[node.outputs[out]] = stand_ins.get(before, before)
    return CommitPlan(first, tuple(prechecks), snapshots, stand_ins)


def save_value(var: Variable, value: Any) -> Any:
    """A copy of ``value`` (of ``var``) that ``restore_value`` can put back."""
    kind = kind_of(value)
    return var.type.copy_value(value) if kind is None else kind.to_host(value)


def restore_value(cell: list, saved: Any) -> None:
    """Put ``saved`` back into ``cell``: into the same buffer where the array kind can
    (so that a borrowed alias of it sees the old value again), else as a new value."""
    value = cell[0]
    kind = kind_of(value)
    if kind is None:
        cell[0] = saved
    elif not kind.write_from_host(value, saved):
        cell[0] = kind.from_host(saved)
