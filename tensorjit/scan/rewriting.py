"""Graph rewrites of ``Scan`` nodes, registered with :func:`register`.

Each rewrite builds a new ``Scan`` op (the inner graph is shared or partly cloned, never
mutated) and replaces the old node's outputs with variables of exactly the same types:

- ``scan_remove_unused_outputs``: outputs nobody reads (and that no kept output's
  recurrence reads) leave the loop, with the sequences and non-sequences that only
  they used.
- ``scan_hoist_invariants``: inner nodes computed from non-sequences (and constants)
  alone are computed once, outside the loop, and passed in as new non-sequences.
- ``scan_push_out_sums``, ``scan_push_out_seqs``, ``scan_push_out_nits`` (tag
  ``scan_push_out``, module ``pushout``): work that does not need the recurrence leaves
  the loop, before or after it.
- ``scan_merge_subsumed`` (a graph rewrite, first): a loop whose outputs another loop
  over the same inputs also computes (the forward loop a gradient extended with
  residuals, next to the original) is read from that one: the loop runs once.
- ``scan_keep_last_state``: an output with history of which only ``out[-1]`` is read
  (directly, or as ``out[lag:][-1]``, the form ``scan()`` returns) becomes a state
  carried from step to step: the loop keeps ``lag`` rows instead of ``lag + n_steps``.
  Gradients are built before rewriting, so a graph whose gradient reads the history has
  other clients of the output and the rewrite does not fire there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.graph.traversal import ancestors, clone_replace, toposort
from tensorjit.core.rewrites.basic import GraphRewriter, node_rewriter
from tensorjit.core.rewrites.db import RewriteDB
from tensorjit.scan.loop import Carry, Loop, with_type
from tensorjit.scan.op import Scan
from tensorjit.scan.pushout import REWRITES as PUSH_OUT_REWRITES
from tensorjit.tensor.subtensor import Subtensor
from tensorjit.tensor.type import TensorType

PLUGIN = "scan"


def _used(fgraph: FunctionGraph, var: Variable) -> bool:
    return bool(fgraph.clients.get(var))


# ======================================================================= 1. unused outputs
@node_rewriter([Scan])
def scan_remove_unused_outputs(fgraph: FunctionGraph, node: Apply):
    """Drop outputs that have no clients and that no kept output's recurrence reads."""
    loop = Loop.of(node)
    keep_mit = [_used(fgraph, node.outputs[m.old]) for m in loop.mits]
    keep_nit = [_used(fgraph, node.outputs[o]) for _, o in loop.nits]
    keep_carry = [_used(fgraph, node.outputs[c.old]) for c in loop.carries]
    if not (any(keep_mit) or any(keep_nit) or any(keep_carry)):
        return None  # the whole node is dead: the graph prunes it
    while True:
        kept = [m.out for m, k in zip(loop.mits, keep_mit) if k]
        kept += [o for (o, _), k in zip(loop.nits, keep_nit) if k]
        kept += [c.out for c, k in zip(loop.carries, keep_carry) if k]
        needed = set(ancestors(kept))
        changed = False
        for h, m in enumerate(loop.mits):
            if not keep_mit[h] and any(v in needed for v in m.ins):
                keep_mit[h] = changed = True
        for k, c in enumerate(loop.carries):
            if not keep_carry[k] and c.inner in needed:
                keep_carry[k] = changed = True
        if not changed:
            break
    seqs = [s for s in loop.seqs if s[0] in needed]
    nonseqs = [w for w in loop.nonseqs if w[0] in needed]
    if (
        all(keep_mit)
        and all(keep_nit)
        and all(keep_carry)
        and len(seqs) == len(loop.seqs)
        and len(nonseqs) == len(loop.nonseqs)
    ):
        return None
    loop.mits = [m for m, k in zip(loop.mits, keep_mit) if k]
    loop.nits = [n for n, k in zip(loop.nits, keep_nit) if k]
    loop.carries = [c for c, k in zip(loop.carries, keep_carry) if k]
    loop.seqs, loop.nonseqs = seqs, nonseqs
    _, new_outs = loop.build()
    return loop.replacements(node, new_outs)


# ======================================================================= 2. hoisting
@node_rewriter([Scan])
def scan_hoist_invariants(fgraph: FunctionGraph, node: Apply):
    """Compute inner nodes that read only non-sequences and constants once, outside."""
    loop = Loop.of(node)
    if not loop.nonseqs:
        return None
    inner_outs = loop.inner_outputs()
    boundary = set(node.op.inner_inputs)
    nonseq_inner = {v for v, _ in loop.nonseqs}
    # invariant: computed from non-sequences and constants only; hoistable: invariant
    # and reading at least one non-sequence (constant-only parts are left to folding).
    invariant: set[Variable] = set(nonseq_inner)
    hoistable: set[Variable] = set()
    order = toposort(inner_outs, boundary)
    hoisted_nodes = []
    for n in order:
        if not n.inputs:
            continue
        if all(isinstance(i, Constant) or i in invariant for i in n.inputs):
            invariant.update(n.outputs)
            if any(i in nonseq_inner or i in hoistable for i in n.inputs):
                hoistable.update(n.outputs)
                hoisted_nodes.append(n)
    if not hoisted_nodes:
        return None
    hoisted_set = set(hoisted_nodes)
    frontier: list[Variable] = []
    for n in order:
        if n in hoisted_set:
            continue
        for i in n.inputs:
            if i in hoistable and i not in frontier:
                frontier.append(i)
    for o in inner_outs:
        if o in hoistable and o not in frontier:
            frontier.append(o)
    if not frontier:
        return None
    # The outer computation: the frontier with inner non-sequences replaced by outer ones.
    outer_values, _ = clone_replace(frontier, {v: w for v, w in loop.nonseqs})
    placeholders = {}
    for var, value in zip(frontier, outer_values):
        try:
            converted = var.type.filter_variable(value)
        except TypeError:
            return None
        if converted is not value:
            return None  # would need a conversion: leave the loop as it is
        placeholders[var] = var.type.make_variable(var.name)
    new_inner, _ = clone_replace(inner_outs, placeholders)
    loop.set_inner_outputs(new_inner)
    loop.nonseqs = loop.nonseqs + [(placeholders[v], w) for v, w in zip(frontier, outer_values)]
    # Non-sequences only the hoisted nodes read are no longer needed inside.
    needed = set(ancestors(new_inner))
    loop.nonseqs = [(v, w) for v, w in loop.nonseqs if v in needed]
    _, new_outs = loop.build()
    return loop.replacements(node, new_outs)


# ======================================================================= 3. last state
def _const_int(var: Variable) -> int | None:
    if isinstance(var, Constant) and np.ndim(var.data) == 0:
        value = var.data
        if np.asarray(value).dtype.kind in "iu":
            return int(value)
    return None


def _is_last_row(node: Any) -> bool:
    """``node`` is ``x[-1]`` (a Subtensor taking the constant index -1 of axis 0)."""
    return (
        isinstance(node, Apply)
        and isinstance(node.op, Subtensor)
        and node.op.entries == ("i",)
        and _const_int(node.inputs[1]) == -1
    )


def _is_tail(node: Any, lag: int) -> bool:
    """``node`` is ``x[lag:]`` (constant start, no stop, no step)."""
    return (
        isinstance(node, Apply)
        and isinstance(node.op, Subtensor)
        and node.op.entries == (("s", True, False, False),)
        and _const_int(node.inputs[1]) == lag
    )


def _last_row_readers(
    fgraph: FunctionGraph, buf: Variable, lag: int
) -> list[tuple[Variable, bool]] | None:
    """The ``[-1]`` variables reading ``buf``, each with whether it reads through
    ``buf[lag:]`` (empty when no step ran), or None when anything else reads ``buf``."""
    readers: list[tuple[Variable, bool]] = []
    for client, i in fgraph.clients_of(buf):
        if i != 0:
            return None
        if _is_last_row(client):
            readers.append((client.outputs[0], False))
        elif _is_tail(client, lag):
            tail = client.outputs[0]
            for sub, j in fgraph.clients_of(tail):
                if j != 0 or not _is_last_row(sub):
                    return None
                readers.append((sub.outputs[0], True))
        else:
            return None
    return readers or None


@node_rewriter([Scan])
def scan_keep_last_state(fgraph: FunctionGraph, node: Apply):
    """An output with history read only as ``out[-1]`` becomes a carried state."""
    from tensorjit.tensor.math import minimum
    from tensorjit.tensor.shape_ops import concatenate, expand_dims

    loop = Loop.of(node)
    lags = node.op.lags
    chosen = []
    for h, m in enumerate(loop.mits):
        readers = _last_row_readers(fgraph, node.outputs[m.old], lags[h])
        if readers is not None:
            chosen.append((h, readers))
    if not chosen:
        return None
    tap_repl: dict[Variable, Variable] = {}
    new_carries: list[tuple[Carry, list[tuple[Variable, bool]], int]] = []
    for h, readers in chosen:
        m, lag = loop.mits[h], lags[h]
        if lag == 1:  # the state is the last row itself
            carry = Carry(m.ins[0], m.out, m.init[0], None)
        else:  # the state is a window of the last ``lag`` rows
            row = m.ins[0].type
            window = TensorType(row.dtype, (lag, *row.shape))("window")
            for tap, v in zip(m.taps, m.ins):
                tap_repl[v] = window[lag + tap]
            carry = Carry(window, m.out, m.init, None)
        new_carries.append((carry, readers, lag))
    if tap_repl:
        loop.set_inner_outputs(clone_replace(loop.inner_outputs(), tap_repl)[0])
    for (h, _), (carry, _, lag) in zip(chosen, new_carries):
        out = loop.mits[h].out
        carry.out = out if lag == 1 else concatenate([carry.inner[1:], expand_dims(out, 0)], 0)
    drop = {h for h, _ in chosen}
    loop.mits = [m for h, m in enumerate(loop.mits) if h not in drop]
    n_old_carries = len(loop.carries)
    loop.carries = loop.carries + [c for c, _, _ in new_carries]
    _, new_outs = loop.build()
    result = loop.replacements(node, new_outs)
    if result is None:
        return None
    finals = new_outs[len(new_outs) - len(loop.carries) + n_old_carries :]
    for (_, readers, lag), final in zip(new_carries, finals):
        last = final if lag == 1 else final[-1]
        for reader, through_tail in readers:
            if through_tail:
                # ``buf[lag:][-1]`` fails when no step ran: so does ``[last][start:][-1]``
                # with ``start = 1 - min(n_steps, 1)``.
                start = 1 - minimum(node.inputs[0], 1)
                value = with_type(expand_dims(last, 0)[start:][-1], reader.type)
            else:
                value = with_type(last, reader.type)
            if value is None:
                return None
            result[reader] = value
    return result


class ScanMergeSubsumed(GraphRewriter):
    """Loops over the same inputs, one computing every output of the other: the
    smaller's outputs are read from the larger (``_subsumed_outputs``)."""

    name = "scan_merge_subsumed"

    def apply(self, fgraph: FunctionGraph, apply_replacements) -> None:
        by_steps: dict[Variable, list[Apply]] = {}
        for node in fgraph.toposort():
            if isinstance(node.op, Scan):
                by_steps.setdefault(node.inputs[0], []).append(node)
        for nodes in by_steps.values():
            merged: set[Apply] = set()
            for small in nodes:
                for big in nodes:
                    if big is small or big in merged:
                        continue
                    pairs = _subsumed_outputs(small, big)
                    if pairs and apply_replacements(pairs, reason=self.name):
                        merged.add(small)
                        break


def _bindings(loop: Loop) -> dict[Variable, tuple]:
    """Each inner input -> what the loop binds it to (compared by identity)."""
    bound: dict[Variable, tuple] = {v: ("seq", id(s)) for v, s in loop.seqs}
    bound.update((v, ("nonseq", id(w))) for v, w in loop.nonseqs)
    for m in loop.mits:
        for k, v in enumerate(m.ins):
            bound[v] = ("tap", id(m.init), m.taps, id(m.out), k)
    for c in loop.carries:
        bound[c.inner] = ("carry", id(c.init), id(c.out))
    return bound


def _output_keys(loop: Loop) -> list[tuple[tuple, int]]:
    """(what an output is, its index) for each output of the loop."""
    keys = [(("mit", id(m.out), m.taps, id(m.init)), m.old) for m in loop.mits]
    keys += [(("nit", id(o)), k) for o, k in loop.nits]
    keys += [(("carry", id(c.inner), id(c.out), id(c.init)), c.old) for c in loop.carries]
    return keys


def _subsumed_outputs(small: Apply, big: Apply) -> list[tuple[Variable, Variable]] | None:
    """(small's output, big's same output) pairs when ``big`` computes every output of
    ``small``: the same inner output variables, their inner inputs bound to the same
    outer values, the same number of steps. None otherwise, or where big reads small."""
    if small.op.truncate_gradient != big.op.truncate_gradient:
        return None
    a, b = Loop.of(small), Loop.of(big)
    bound_b = _bindings(b)
    used = set(ancestors(a.inner_outputs()))
    for var, binding in _bindings(a).items():
        if var in used and bound_b.get(var) != binding:
            return None
    index_b: dict[tuple, int] = {}
    for key, k in _output_keys(b):
        index_b.setdefault(key, k)
    pairs = []
    for key, k in _output_keys(a):
        if key not in index_b:
            return None
        old, new = small.outputs[k], big.outputs[index_b[key]]
        if old.type != new.type:
            return None
        pairs.append((old, new))
    if small in toposort(big.inputs):
        return None
    return pairs


# ======================================================================= registration
# (name, rewriter, phase, tags besides "fast_run" and "scan"), in the order they run
# within a phase: a history read only at its end becomes a state before accumulations
# leave the loop, and they leave before sequence-only nodes do, so that an accumulated
# outer product is still recognisable as one.
REWRITES = [
    ("scan_remove_unused_outputs", scan_remove_unused_outputs, "canonicalize", ()),
    ("scan_hoist_invariants", scan_hoist_invariants, "canonicalize", ()),
    ("scan_keep_last_state", scan_keep_last_state, "canonicalize", ()),
    *((name, rw, phase, ("scan_push_out",)) for name, rw, phase in PUSH_OUT_REWRITES),
]


def register(db: RewriteDB) -> None:
    """Register the scan rewrites into ``db`` (tags ``fast_run``, ``scan`` and their own).
    Positions keep their order (a phase otherwise sorts by name)."""
    for k, (name, rewriter, phase, tags) in enumerate(REWRITES):
        position = k * 1e-3
        db.register(
            name, rewriter, phase, "fast_run", "scan", *tags, position=position, plugin=PLUGIN
        )
    # After the core's merge (position -1), before any rewrite rebuilds a loop.
    db.register(
        "scan_merge_subsumed",
        ScanMergeSubsumed(),
        "canonicalize",
        "fast_run",
        "scan",
        position=-0.5,
        plugin=PLUGIN,
    )
