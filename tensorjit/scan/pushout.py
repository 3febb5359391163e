"""Rewrites that move work out of a ``Scan``'s loop, so that a step does only what the
recurrence needs and the rest runs as a few large operations over all steps:

- ``scan_push_out_sums``: a state that only accumulates (``acc + f_t``, acc read nowhere
  else) leaves the loop; ``f_t`` is recorded per step (or read from a sequence) and
  summed afterwards, and an accumulated outer product ``u_t[:, None] * v_t[None, :]``
  (what the gradient of ``dot(h, W)`` adds to ``W``'s gradient every step) becomes one
  product ``U^T V`` (with a minibatch per step, ``sum_t a_t^T b_t`` one product of the
  stacked rows). Backpropagation through time accumulates every weight's gradient so.
- ``scan_push_out_seqs``: inner nodes computed from sequences (and non-sequences) only
  run before the loop on the whole sequences (``dot(x_t, W)`` for every t is
  ``dot(X, W)``); their per-step values become new sequences.
- ``scan_push_out_nits``: an output without recurrence computed from the loop's new
  recorded values (and sequences, non-sequences) is computed after the loop from the
  recorded rows: the per-step softmax of an RNN's state becomes one row-wise softmax.

Each builds a new ``Scan`` (see ``rewriting.Loop``) and replaces the old outputs by
variables of compatible types; when anything does not fit, the loop is left as it is.
"""

from __future__ import annotations

from collections import Counter

from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.fgraph import FunctionGraph
from tensorjit.core.graph.traversal import ancestors, clone_replace, toposort
from tensorjit.core.rewrites.basic import node_rewriter
from tensorjit.scan.batching import (
    Batched,
    batch_graph,
    batch_rule_exists,
    steps_as_rows,
    widens,
)
from tensorjit.scan.loop import Loop, with_type
from tensorjit.scan.op import Scan
from tensorjit.tensor.elemwise import DimShuffle, Elemwise
from tensorjit.tensor.math import Dot
from tensorjit.tensor.type import TensorType


# ================================================================== shared helpers
def _inner_uses(outputs: list[Variable], boundary: set[Variable]) -> Counter:
    """How many times each inner variable is read (by inner nodes, or as an output)."""
    uses: Counter = Counter(outputs)
    for n in toposort(outputs, boundary):
        uses.update(n.inputs)
    return uses


def _steps(loop: Loop, outer: Variable) -> Variable:
    """The rows of an outer sequence that the loop reads (it may be longer)."""
    return outer[: loop.n_steps]


def _prune_inputs(loop: Loop) -> None:
    """Drop sequences and non-sequences that no inner output reads any more."""
    needed = set(ancestors(loop.inner_outputs()))
    loop.seqs = [(v, w) for v, w in loop.seqs if v in needed]
    loop.nonseqs = [(v, w) for v, w in loop.nonseqs if v in needed]


def _compatible(old: Variable, new: Variable) -> Variable | None:
    """``new`` standing in for ``old``: the same type, a more precise one, or reshaped."""
    if old.type == new.type or old.type.is_super(new.type):
        return new
    return with_type(new, old.type)


def _build(loop: Loop, node: Apply) -> tuple[dict | None, list[Variable]]:
    """The new loop's replacements and outputs (none when nothing stays in the loop)."""
    if not loop.inner_outputs():
        return {}, []
    _prune_inputs(loop)
    _, outs = loop.build()
    return loop.replacements(node, outs), outs


def _leaves(loop: Loop) -> dict[Variable, Batched]:
    """Sequences (their rows) and non-sequences: the leaves of batched graphs."""
    leaves: dict[Variable, Batched] = {v: (_steps(loop, w), True) for v, w in loop.seqs}
    leaves.update((v, (w, False)) for v, w in loop.nonseqs)
    return leaves


# ================================================================== 1. accumulations
def _outer_factors(f: Variable) -> tuple[Variable, Variable] | None:
    """``(u, v)`` when ``f`` is ``u[:, None] * v[None, :]`` (in either order)."""
    node = f.owner
    if node is None or not isinstance(node.op, Elemwise) or node.op.scalar_op.name != "mul":
        return None
    if len(node.inputs) != 2:
        return None
    col = row = None
    for i in node.inputs:
        d = i.owner
        if d is None or not isinstance(d.op, DimShuffle) or d.op.input_ndim != 1:
            return None
        if d.op.new_order == (0, "x"):
            col = d.inputs[0]
        elif d.op.new_order == ("x", 0):
            row = d.inputs[0]
    if col is None or row is None:
        return None
    return col, row


def _transposed_product(f: Variable) -> tuple[Variable, Variable] | None:
    """``(a, b)`` when ``f`` is ``dot(a.T, b)`` of a matrix and a matrix or vector (a
    minibatch's weight gradient ``x_t^T . d_t``): summed over the steps it is one
    product of the stacked rows."""
    node = f.owner
    if node is None or type(node.op) is not Dot:
        return None
    left, b = node.inputs
    t = left.owner
    if t is None or not isinstance(t.op, DimShuffle) or t.op.new_order != (1, 0):
        return None
    a = t.inputs[0]
    if a.type.ndim != 2 or b.type.ndim not in (1, 2):
        return None
    return a, b


@node_rewriter([Scan])
def scan_push_out_sums(fgraph: FunctionGraph, node: Apply):
    """States that only accumulate leave the loop (see the module docstring)."""
    import tensorjit.tensor as T

    loop = Loop.of(node)
    boundary = set(node.op.inner_inputs)
    outs = loop.inner_outputs()
    uses = _inner_uses(outs, boundary)
    seq_outer = {v: w for v, w in loop.seqs}
    state = {v for m in loop.mits for v in m.ins} | {c.inner for c in loop.carries}
    state |= set(seq_outer)

    def per_step(var: Variable) -> bool:
        """Changes from step to step (reads a sequence, a tap or a state)."""
        return var in state or any(a in state for a in ancestors([var], boundary))

    plans = []  # (carry, stacked factors, kind)
    for c in loop.carries:
        out = c.out
        if not isinstance(c.inner.type, TensorType) or out.owner is None:
            continue
        op = out.owner.op
        if not isinstance(op, Elemwise) or op.scalar_op.name != "add" or len(out.owner.inputs) != 2:
            continue
        a, b = out.owner.inputs
        f = b if a is c.inner else a if b is c.inner else None
        if f is None or f is c.inner or uses[c.inner] != 1 or uses[out] != 1:
            continue
        factors = _outer_factors(f)
        product = _transposed_product(f)
        if factors is not None and all(per_step(v) for v in factors):
            plans.append((c, list(factors), "outer"))
        elif product is not None and all(per_step(v) for v in product):
            plans.append((c, list(product), "rows"))
        elif per_step(f):
            plans.append((c, [f], "sum"))
    if not plans:
        return None

    # Remove the accumulating states; record each factor that is not already a sequence.
    dropped = {id(c) for c, _, _ in plans}
    loop.carries = [c for c in loop.carries if id(c) not in dropped]
    recorded: dict[Variable, int] = {}
    for _, factors, _ in plans:
        for v in factors:
            if v not in seq_outer and v not in recorded:
                recorded[v] = len(loop.nits)
                loop.nits.append((v, None))
    result, new_outs = _build(loop, node)
    if result is None:
        return None
    n_mit = len(loop.mits)

    def stacked(v: Variable) -> Variable:
        if v in seq_outer:
            return _steps(loop, seq_outer[v])
        return new_outs[n_mit + recorded[v]]

    for c, factors, kind in plans:
        # (in the accumulator's dtype, as the loop added: float32 terms into a float64 sum)
        acc_dtype = c.inner.type.dtype
        if kind == "outer":
            u, v = (T.cast(stacked(x), acc_dtype) for x in factors)
            total = T.dot(u.T, v)
        elif kind == "rows":  # sum_t a_t^T b_t: the steps' rows stacked, one product
            a, b = (T.cast(stacked(x), acc_dtype) for x in factors)
            a = steps_as_rows(a)
            b = steps_as_rows(b) if b.type.ndim == 3 else b.flatten()
            total = T.dot(a.T, b)
        else:
            total = T.sum(T.cast(stacked(factors[0]), acc_dtype), axis=0)
        old = node.outputs[c.old]
        final = c.init + total
        final = _compatible(old, T.cast(final, old.type.dtype))
        if final is None:
            return None
        result[old] = final
    return result


def _probe_leaves(node: Apply, kinds: list[str]) -> dict[Variable, Batched]:
    """Stand-ins for ``node``'s inputs (a step axis where the input is per step), to ask
    whether the node has a batched form before deciding to push it."""
    leaves: dict[Variable, Batched] = {}
    for i, k in zip(node.inputs, kinds):
        if isinstance(i, Constant) or not isinstance(i.type, TensorType):
            continue
        if k == "seq":
            leaves[i] = (TensorType(i.type.dtype, (None, *i.type.shape)).make_variable(), True)
        else:
            leaves[i] = (i.type.make_variable(), False)
    return leaves


# ================================================================== 2. before the loop
@node_rewriter([Scan])
def scan_push_out_seqs(fgraph: FunctionGraph, node: Apply):
    """Nodes computed from sequences and non-sequences alone run before the loop."""
    loop = Loop.of(node)
    if not loop.seqs:
        return None
    outs = loop.inner_outputs()
    kind: dict[Variable, str] = {v: "seq" for v, _ in loop.seqs}
    kind.update((v, "inv") for v, _ in loop.nonseqs)
    pushed: set[Apply] = set()
    order = toposort(outs, set(node.op.inner_inputs))
    for n in order:
        ins = ["inv" if isinstance(i, Constant) else kind.get(i) for i in n.inputs]
        if None in ins or not batch_rule_exists(n) or widens(n):
            continue
        if "seq" in ins and batch_graph(n.outputs, _probe_leaves(n, ins)) is None:
            continue  # no batched form for this node (e.g. a product of two steps' values)
        k = "seq" if "seq" in ins else "inv"
        kind.update((o, k) for o in n.outputs)
        if k == "seq":
            pushed.add(n)
    # A dimshuffle read only inside the loop saves no work there (it is a view) and would
    # hide patterns from the other rewrites (an outer product of a sequence): keep it in.
    read_by_pushed = {i for n in pushed for i in n.inputs}
    pushed = {
        n
        for n in pushed
        if not isinstance(n.op, DimShuffle) or any(o in read_by_pushed for o in n.outputs)
    }
    if not pushed:
        return None
    # The per-step values the loop still needs: read by a node left inside, or returned.
    frontier: list[Variable] = []
    for n in order:
        if n in pushed:
            continue
        for i in n.inputs:
            if i.owner in pushed and i not in frontier:
                frontier.append(i)
    frontier += [o for o in outs if o.owner in pushed and o not in frontier]
    if not frontier:
        return None
    batched = batch_graph(frontier, _leaves(loop))
    if batched is None:
        return None
    placeholders = {v: v.type.make_variable(v.name) for v in frontier}
    new_inner, _ = clone_replace(outs, placeholders)
    loop.set_inner_outputs(new_inner)
    loop.seqs = loop.seqs + [(placeholders[v], b) for v, b in zip(frontier, batched)]
    result, _ = _build(loop, node)
    return result


# ================================================================== 3. after the loop
@node_rewriter([Scan])
def scan_push_out_nits(fgraph: FunctionGraph, node: Apply):
    """Outputs without recurrence computed from recorded values run after the loop."""
    loop = Loop.of(node)
    if not loop.nits:
        return None
    recorded = {m.out: h for h, m in enumerate(loop.mits) if m.out.owner is not None}
    boundary = set(node.op.inner_inputs) | set(recorded)
    seqs = {v for v, _ in loop.seqs}
    nonseqs = {v for v, _ in loop.nonseqs}
    movable = []
    for k, (o, _) in enumerate(loop.nits):
        if o in seqs or o in recorded:
            movable.append(k)
            continue
        if o in boundary or o.owner is None:
            continue
        nodes = toposort([o], boundary)
        reads = {i for n in nodes for i in n.inputs if i in boundary}
        if not reads <= seqs | nonseqs | set(recorded) or not reads & (seqs | set(recorded)):
            continue
        if all(batch_rule_exists(n) for n in nodes):
            movable.append(k)
    if not movable:
        return None
    # Only where the loop does not compute the same nodes anyway for its other outputs.
    keep = [o for k, (o, _) in enumerate(loop.nits) if k not in movable]
    staying = [m.out for m in loop.mits] + keep + [c.out for c in loop.carries]
    inside = set(toposort(staying, set(node.op.inner_inputs)))
    movable = [
        k
        for k in movable
        if not (set(toposort([loop.nits[k][0]], boundary)) & inside) or loop.nits[k][0] in seqs
    ]
    if not movable:
        return None
    moved = [loop.nits[k] for k in movable]
    leaves = _leaves(loop)
    loop.nits = [n for k, n in enumerate(loop.nits) if k not in movable]
    result, new_outs = _build(loop, node)
    if result is None:
        return None
    for v, h in recorded.items():  # the loop's rows of this output, after its initial ones
        leaves[v] = (new_outs[h][node.op.lags[h] :], True)
    for inner, old_index in moved:
        if inner in leaves:
            value = leaves[inner][0]
        else:
            batched = batch_graph([inner], leaves)
            if batched is None:
                return None
            value = batched[0]
        old = node.outputs[old_index]
        value = _compatible(old, value)
        if value is None:
            return None
        result[old] = value
    return result


REWRITES = [
    ("scan_push_out_sums", scan_push_out_sums, "canonicalize"),
    ("scan_push_out_seqs", scan_push_out_seqs, "canonicalize"),
    ("scan_push_out_nits", scan_push_out_nits, "canonicalize"),
]
