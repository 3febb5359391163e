"""The ``Scan`` op: a symbolic loop over an inner graph, run step by step in Python.

Outer inputs, in order::

    n_steps, *seqs, *mit_inits, *carry_inits, *nonseqs

- ``seqs``: arrays iterated over their leading axis (step ``t`` reads ``seq[t]``; taps
  were turned into shifted slices by ``scan()``); each must have at least ``n_steps``
  rows.
- ``mit_inits``: recurrent outputs with history; output ``i`` reads its values at the
  (negative) ``taps[i]``; its initial value has ``L_i = -min(taps[i])`` leading rows.
- ``carry_inits``: recurrent states of which only the final value is returned (shared
  variables' updates, random generator states, gradient accumulators).
- ``nonseqs``: values every step reads unchanged.

Outer outputs: ``*mit_buffers`` (``L_i + n_steps`` rows: the initial rows, then one per
step), ``*nit_outputs`` (``n_steps`` rows, outputs without recurrence), ``*carry_finals``.

Inner inputs: ``*seq_steps, *tap_values (output by output, tap by tap), *carries,
*nonseqs``; inner outputs: ``*mit_new, *nit, *carry_new``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorjit.core.gradient import grad as symbolic_grad
from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.core.graph.op import Op
from tensorjit.core.graph.traversal import clone_replace, toposort
from tensorjit.tensor.type import TensorType

_ids = itertools.count()


def is_float_tensor(var: Variable) -> bool:
    return isinstance(var.type, TensorType) and var.type.numpy_dtype.kind in "fc"


def _contiguous_invariants(nonseqs: list, n_steps: int) -> list:
    """The values every step reads, C-ordered: a transposed or strided matrix read at
    each of several steps is copied once here, not re-read strided (or re-packed by the
    BLAS: OpenBLAS's small-matrix kernels serve untransposed operands only, so a
    gradient loop's ``dz @ U.T`` ran 2.5x slower than ``dz @ U``)."""
    if n_steps < 2:
        return list(nonseqs)
    return [
        np.ascontiguousarray(w)
        if isinstance(w, np.ndarray) and w.ndim >= 2 and not w.flags.c_contiguous
        else w
        for w in nonseqs
    ]


class Scan(Op):
    """A loop of ``n_steps`` applications of an inner graph (see the module docstring).

    Equality is identity (two scans merge only if they are the same op); the inner
    graph is compiled once, on the first ``perform``, and cached on the op.
    """

    __props__ = ("uid",)
    # Shared states read inside the loop are updated through the updates scan returns,
    # never by their default update (which is an inner-graph expression).
    skip_default_updates = True

    def __init__(
        self,
        inner_inputs: Sequence[Variable],
        inner_outputs: Sequence[Variable],
        n_seqs: int,
        mit_taps: Sequence[Sequence[int]],
        n_nit: int,
        n_carry: int,
        n_nonseqs: int,
        truncate_gradient: int = -1,
        name: str | None = None,
    ):
        self.uid = next(_ids)
        self.inner_inputs = list(inner_inputs)
        self.inner_outputs = list(inner_outputs)
        self.n_seqs = n_seqs
        self.mit_taps = tuple(tuple(sorted(t)) for t in mit_taps)
        self.n_mit = len(self.mit_taps)
        self.n_nit = n_nit
        self.n_carry = n_carry
        self.n_nonseqs = n_nonseqs
        self.truncate_gradient = truncate_gradient
        self.name = name
        self.lags = [-taps[0] for taps in self.mit_taps]
        for taps in self.mit_taps:
            if not taps or taps[-1] >= 0:
                raise ValueError(f"scan: output taps must be negative, got {taps}")
        n_taps = sum(len(t) for t in self.mit_taps)
        if len(self.inner_inputs) != n_seqs + n_taps + n_carry + n_nonseqs:
            raise ValueError("Scan: inner inputs do not match the declared layout")
        if len(self.inner_outputs) != self.n_mit + n_nit + n_carry:
            raise ValueError("Scan: inner outputs do not match the declared layout")
        self._fn = None

    def __str__(self) -> str:
        return f"Scan{{{self.name or 'scan'}}}"

    __repr__ = __str__

    # ------------------------------------------------------------ layout helpers
    def inner_slices(self):
        """Index ranges of the inner inputs: seqs, taps (per output), carries, nonseqs."""
        i = self.n_seqs
        taps = []
        for t in self.mit_taps:
            taps.append(list(range(i, i + len(t))))
            i += len(t)
        carry = list(range(i, i + self.n_carry))
        nonseq = list(range(i + self.n_carry, i + self.n_carry + self.n_nonseqs))
        return list(range(self.n_seqs)), taps, carry, nonseq

    def outer_groups(self, seq: Sequence) -> tuple[Any, list, list, list, list]:
        """Split outer inputs into (n_steps, seqs, mit_inits, carry_inits, nonseqs)."""
        i = 1
        seqs = list(seq[i : i + self.n_seqs])
        i += self.n_seqs
        mits = list(seq[i : i + self.n_mit])
        i += self.n_mit
        carries = list(seq[i : i + self.n_carry])
        i += self.n_carry
        return seq[0], seqs, mits, carries, list(seq[i:])

    # ------------------------------------------------------------ graph
    def make_node(self, n_steps: Any, *inputs: Any) -> Apply:
        from tensorjit.tensor.variable import as_tensor_variable

        n_steps = as_tensor_variable(n_steps)
        if n_steps.type.ndim != 0 or n_steps.type.numpy_dtype.kind not in "iu":
            raise TypeError(f"scan: n_steps must be an integer scalar, got {n_steps.describe()}")
        if n_steps.type.dtype != "int64":
            from tensorjit.tensor.math import cast

            n_steps = cast(n_steps, "int64")
        expected = self.n_seqs + self.n_mit + self.n_carry + self.n_nonseqs
        if len(inputs) != expected:
            raise TypeError(f"{self}: expected {expected} inputs after n_steps, got {len(inputs)}")
        _, seqs, mits, carries, nonseqs = self.outer_groups([n_steps, *inputs])
        seq_idx, tap_idx, carry_idx, nonseq_idx = self.inner_slices()
        outer = []
        for k, (s, i) in enumerate(zip(seqs, seq_idx)):
            inner = self.inner_inputs[i]
            s = as_tensor_variable(s)
            if s.type.ndim != inner.type.ndim + 1 or s.type.dtype != inner.type.dtype:
                raise TypeError(f"{self}: sequence {k} {s.describe()} does not match {inner.type}")
            outer.append(s)
        for k, (m, idx) in enumerate(zip(mits, tap_idx)):
            inner = self.inner_inputs[idx[0]]
            m = as_tensor_variable(m)
            if m.type.ndim != inner.type.ndim + 1 or m.type.dtype != inner.type.dtype:
                raise TypeError(f"{self}: initial value {k} {m.describe()} does not match")
            outer.append(m)
        for k, (c, i) in enumerate(zip(carries, carry_idx)):
            inner = self.inner_inputs[i]
            if isinstance(inner.type, TensorType):
                c = as_tensor_variable(c)
                if c.type.ndim != inner.type.ndim or c.type.dtype != inner.type.dtype:
                    raise TypeError(f"{self}: state {k} {c.describe()} does not match")
                outer.append(c)
            else:
                outer.append(inner.type.filter_variable(c))
        for w, i in zip(nonseqs, nonseq_idx):
            outer.append(self.inner_inputs[i].type.filter_variable(w))
        outputs = []
        inner_outs = self.inner_outputs
        for k in range(self.n_mit):
            init = outer[self.n_seqs + k]
            outputs.append(TensorType(init.type.dtype, (None, *init.type.shape[1:]))())
        for k in range(self.n_nit):
            o = inner_outs[self.n_mit + k]
            outputs.append(TensorType(o.type.dtype, (None, *o.type.shape))())
        for k in range(self.n_carry):
            c = outer[self.n_seqs + self.n_mit + k]
            inner = self.inner_inputs[carry_idx[k]]
            if isinstance(inner.type, TensorType):
                outputs.append(TensorType(c.type.dtype, (None,) * c.type.ndim)())
            else:
                outputs.append(inner.type.make_variable())
        return Apply(self, [n_steps, *outer], outputs)

    def connection_pattern(self, node: Apply):
        return None

    def infer_shape(self, fgraph, node, input_shapes):
        n_steps = node.inputs[0]
        shapes: list = []
        for k in range(self.n_mit):
            init_shape = input_shapes[1 + self.n_seqs + k]
            shapes.append((n_steps + self.lags[k], *init_shape[1:]))
        for k in range(self.n_nit):
            o = self.inner_outputs[self.n_mit + k]
            if all(s is not None for s in o.type.shape):
                shapes.append((n_steps, *o.type.shape))
            else:
                shapes.append(None)
        base = 1 + self.n_seqs + self.n_mit
        for k in range(self.n_carry):
            init = node.inputs[base + k]
            shapes.append(input_shapes[base + k] if isinstance(init.type, TensorType) else None)
        return shapes

    # ------------------------------------------------------------ run
    def compiled(self):
        if self._fn is None:
            from tensorjit.core.compile.function import function
            from tensorjit.core.compile.mode import get_mode
            from tensorjit.core.config import config
            from tensorjit.core.devices import HOST
            from tensorjit.core.memory.io import Out

            # The loop runs on the host (Op.perform), so its step function does too:
            # a device default would copy every step's values there and back. Placement
            # hands the loop host values (copies of device ones): its inner inputs are
            # retyped for the host.
            inputs, outputs = self._inner_graph_on_host()
            with config.change_flags(device=HOST):
                self._fn = function(
                    inputs,
                    [Out(o, borrow=True) for o in outputs],
                    mode=get_mode("FAST_RUN"),
                    on_unused_input="ignore",
                    no_default_updates=True,
                    name=f"{self}.inner",
                )
        return self._fn

    def _inner_graph_on_host(self) -> tuple[list, list]:
        """The step's inputs and outputs, with every device-typed inner input replaced
        by a host-typed one (the outer values the loop receives live on the host)."""
        from tensorjit.core.devices import HOST
        from tensorjit.core.graph.traversal import clone_replace

        on_device = [v for v in self.inner_inputs if getattr(v.type, "device", HOST) != HOST]
        if not on_device:
            return list(self.inner_inputs), list(self.inner_outputs)
        swap = {v: v.type.on_device(HOST).make_variable(v.name) for v in on_device}
        outputs, _ = clone_replace(self.inner_outputs, swap)
        return [swap.get(v, v) for v in self.inner_inputs], outputs

    def perform(self, node, inputs, output_storage):
        fn = self.compiled()
        n_steps, seqs, inits, carries, nonseqs = self.outer_groups(inputs)
        n = int(n_steps)
        if n < 0:
            raise ValueError(f"{self}: n_steps must be >= 0, got {n}")
        for k, s in enumerate(seqs):
            if s.shape[0] < n:
                raise ValueError(
                    f"{self}: sequence {k} has {s.shape[0]} entries, fewer than the "
                    f"{n} steps asked for"
                )
        bufs = []
        for k, (init, lag) in enumerate(zip(inits, self.lags)):
            if init.shape[0] != lag:
                raise ValueError(
                    f"{self}: the initial value of output {k} has leading dimension "
                    f"{init.shape[0]}, but its taps {self.mit_taps[k]} need {lag}"
                )
            buf = np.empty((lag + n, *init.shape[1:]), dtype=init.dtype)
            buf[:lag] = init
            bufs.append(buf)
        nonseqs = _contiguous_invariants(nonseqs, n)
        nit_vars = node.outputs[self.n_mit : self.n_mit + self.n_nit]
        nits: list = [None] * self.n_nit
        carries = list(carries)
        tap_plan = [(buf, lag, taps) for buf, lag, taps in zip(bufs, self.lags, self.mit_taps)]
        n_mit, n_nit = self.n_mit, self.n_nit
        # Only the carried values come back from the step function's earlier outputs (the
        # taps are read from this op's own buffers, into which results are copied).
        first_carry = len(seqs) + sum(len(taps) for taps in self.mit_taps)
        carried = range(first_carry, first_carry + len(carries))
        loop = fn.program_loop()
        done = None
        if loop is not None:  # the whole loop in compiled code
            plan = [(buf, lag, list(taps)) for buf, lag, taps in tap_plan]
            done = loop(n, list(seqs), plan, list(carries), list(nonseqs), n_mit, n_nit)
        if done is not None:
            nits, carries = list(done[0]), list(done[1])
        for t in range(0 if done is None else n, n):
            args = [s[t] for s in seqs]
            for buf, lag, taps in tap_plan:
                args.extend(buf[t + lag + tap] for tap in taps)
            args.extend(carries)
            args.extend(nonseqs)
            # Step 0 checks the argument types; later steps pass the same kinds of values.
            results = fn.call_trusted(args, carried) if t else fn(*args)
            for k in range(n_mit):
                buf = bufs[k]
                value = results[k]
                if np.shape(value) != buf.shape[1:]:
                    raise ValueError(
                        f"{self}: step {t} output {k} has shape {np.shape(value)}, but its "
                        f"initial value has rows of shape {buf.shape[1:]}"
                    )
                buf[t + self.lags[k]] = value
            for k in range(n_nit):
                value = results[n_mit + k]
                if nits[k] is None:
                    nits[k] = np.empty((n, *np.shape(value)), dtype=nit_vars[k].type.dtype)
                elif np.shape(value) != nits[k].shape[1:]:
                    raise ValueError(
                        f"{self}: step {t} output {n_mit + k} has shape {np.shape(value)}, "
                        f"but step 0 gave {nits[k].shape[1:]}"
                    )
                nits[k][t] = value
            carries = list(results[n_mit + n_nit :])
        if any(nit is None for nit in nits):
            rows = self._step_shapes(fn, seqs, tap_plan, carries, nonseqs)
            for k in range(n_nit):
                if nits[k] is None:  # no step ran: an empty result, rows shaped as a step's
                    static = nit_vars[k].type.shape[1:]
                    row = rows[k] if rows is not None else (0 if s is None else s for s in static)
                    nits[k] = np.empty((0, *row), dtype=nit_vars[k].type.dtype)
        carry_types = node.outputs[n_mit + n_nit :]
        for k, value in enumerate(carries):
            if isinstance(carry_types[k].type, TensorType) and k < len(carries):
                value = np.array(value, dtype=carry_types[k].type.dtype, copy=True)
            carries[k] = value
        for cell, value in zip(output_storage, [*bufs, *nits, *carries]):
            cell[0] = value

    def _step_shapes(self, fn, seqs, tap_plan, carries, nonseqs) -> list[tuple] | None:
        """The row shapes of the outputs without recurrence when no step ran: one step
        on zero rows (the sequences have none) gives them, so that an empty result
        still has the trailing lengths a product after the loop expects. None when the
        step fails on such values (the static shapes are used then)."""
        nit_types = self.inner_outputs[self.n_mit : self.n_mit + self.n_nit]
        if all(None not in o.type.shape for o in nit_types):
            return [tuple(o.type.shape) for o in nit_types]
        args = [np.zeros(s.shape[1:], dtype=s.dtype) for s in seqs]
        for buf, lag, taps in tap_plan:
            args.extend(buf[lag + tap] for tap in taps)
        try:
            with np.errstate(all="ignore"):
                results = fn(*args, *carries, *nonseqs)
        except Exception:  # noqa: BLE001 - only a shape is wanted; fall back to static ones
            return None
        return [np.shape(r) for r in results[self.n_mit : self.n_mit + self.n_nit]]

    # ------------------------------------------------------------ gradient
    def L_op(self, inputs, outputs, output_grads):
        return scan_grad(self, list(inputs), list(outputs), list(output_grads))


# ======================================================================= gradient
def _history_scan(op: Scan, inputs: list[Variable]):
    """A scan computing what ``op`` computes, plus what its gradient needs per step.

    Tensor carries become outputs with history (taps ``[-1]``); values computed from
    non-tensor carries (e.g. random samples drawn from a generator state) are recorded
    as extra outputs without recurrence (``frontier``), so the backward pass reuses them
    instead of drawing again. Returns ``(aug_op, aug_outputs, info)``.
    """
    seq_idx, tap_idx, carry_idx, nonseq_idx = op.inner_slices()
    ins = op.inner_inputs
    n_mit, n_nit = op.n_mit, op.n_nit
    outs = op.inner_outputs
    tcarry = [k for k, i in enumerate(carry_idx) if isinstance(ins[i].type, TensorType)]
    ocarry = [k for k in range(op.n_carry) if k not in tcarry]
    # Frontier: tensor outputs of nodes fed (transitively through non-tensors) by a
    # non-tensor carry.
    tainted = {ins[carry_idx[k]] for k in ocarry}
    frontier: list[Variable] = []
    if tainted:
        for node in toposort(outs, set(ins)):
            if any(i in tainted for i in node.inputs):
                for o in node.outputs:
                    if isinstance(o.type, TensorType):
                        if o not in frontier:
                            frontier.append(o)
                    else:
                        tainted.add(o)
    n_steps, seqs, mits, carries, nonseqs = op.outer_groups(inputs)
    if not tcarry and not frontier:
        return op, None, dict(tcarry=[], ocarry=ocarry, frontier=[])
    from tensorjit.tensor.shape_ops import expand_dims

    new_ins = [ins[i] for i in seq_idx]
    for idx in tap_idx:
        new_ins.extend(ins[i] for i in idx)
    new_ins.extend(ins[carry_idx[k]] for k in tcarry)
    new_ins.extend(ins[carry_idx[k]] for k in ocarry)
    new_ins.extend(ins[i] for i in nonseq_idx)
    new_outs = list(outs[:n_mit])
    new_outs.extend(outs[n_mit + n_nit + k] for k in tcarry)
    new_outs.extend(outs[n_mit : n_mit + n_nit])
    new_outs.extend(frontier)
    new_outs.extend(outs[n_mit + n_nit + k] for k in ocarry)
    aug = Scan(
        new_ins,
        new_outs,
        op.n_seqs,
        list(op.mit_taps) + [(-1,)] * len(tcarry),
        n_nit + len(frontier),
        len(ocarry),
        op.n_nonseqs,
        op.truncate_gradient,
        f"{op.name or 'scan'}_hist",
    )
    aug_inputs = [
        n_steps,
        *seqs,
        *mits,
        *(expand_dims(carries[k], 0) for k in tcarry),
        *(carries[k] for k in ocarry),
        *nonseqs,
    ]
    return aug, aug(*aug_inputs), dict(tcarry=tcarry, ocarry=ocarry, frontier=frontier)


def scan_grad(op: Scan, inputs: list[Variable], outputs: list[Variable], output_grads: list):
    """Backpropagation through time: a second scan runs over the reversed steps.

    For an output with history and taps ``T`` (lag ``L``), the backward scan carries a
    window ``P`` of the ``L`` pending adjoints of the rows that later steps read; at
    step ``t`` the adjoint of the row written at ``t`` is ``P[L-1] + G[t+L]``, and the
    inner vector-Jacobian product adds the adjoints of the tap values into the shifted
    window. Gradients of the non-sequences accumulate in carries.
    """
    import tensorjit.tensor as T
    from tensorjit.core.config import config
    from tensorjit.scan.residuals import residuals
    from tensorjit.tensor.subtensor import inc_subtensor, set_subtensor

    aug, aug_outs, info = _history_scan(op, inputs)
    tcarry, frontier = info["tcarry"], info["frontier"]
    n_steps, seqs, mits, carries, nonseqs = op.outer_groups(inputs)
    n_mit, n_nit = op.n_mit, op.n_nit

    # Output grads of the augmented scan's history outputs / no-recurrence outputs.
    def _g(k):
        g = output_grads[k]
        return T.zeros_like(outputs[k]) if g is None else g

    if aug is op:
        hist_outs = outputs[:n_mit]
        nit_outs = outputs[n_mit : n_mit + n_nit]
        hist_grads = [_g(k) for k in range(n_mit)]
    else:
        n_hist = n_mit + len(tcarry)
        hist_outs = aug_outs[:n_hist]
        nit_outs = aug_outs[n_hist : n_hist + n_nit]
        hist_grads = [_g(k) for k in range(n_mit)]
        for j, k in enumerate(tcarry):
            g_final = output_grads[n_mit + n_nit + k]
            buf = hist_outs[n_mit + j]
            zeros = T.zeros_like(buf)
            hist_grads.append(zeros if g_final is None else set_subtensor(zeros[-1], g_final))
    frontier_outs = [] if aug is op else aug_outs[n_mit + len(tcarry) + n_nit :][: len(frontier)]
    nit_grads = [_g(n_mit + k) for k in range(n_nit)]
    a_seq_idx, a_tap_idx, a_carry_idx, a_nonseq_idx = aug.inner_slices()
    a_ins = aug.inner_inputs
    a_outs = aug.inner_outputs
    taps_all = aug.mit_taps
    lags = aug.lags
    n_hist = aug.n_mit

    if op.truncate_gradient is not None and op.truncate_gradient >= 0:
        k_steps = T.minimum(n_steps, op.truncate_gradient)
    else:
        k_steps = n_steps

    def rev(x):
        return x[:n_steps][::-1]

    # ---- backward inner graph
    repl: dict[Variable, Variable] = {}
    b_seq_inner: list[Variable] = []
    b_seq_outer: list[Variable] = []

    def add_seq(inner_type_var: Variable, outer: Variable, name: str) -> Variable:
        v = inner_type_var.type.make_variable(name)
        b_seq_inner.append(v)
        b_seq_outer.append(rev(outer))
        return v

    for j, i in enumerate(a_seq_idx):
        repl[a_ins[i]] = add_seq(a_ins[i], seqs[j], f"seq{j}_t")
    for h, idx in enumerate(a_tap_idx):
        for tap, i in zip(taps_all[h], idx):
            start = lags[h] + tap
            outer = hist_outs[h][start : start + n_steps]
            repl[a_ins[i]] = add_seq(a_ins[i], outer, f"out{h}[t{tap}]")
    for f, fo in zip(frontier, frontier_outs):
        repl[f] = add_seq(f, fo, f"frontier{len(repl)}")
    g_hist_inner = []
    for h in range(n_hist):
        out_var = a_outs[h]
        gv = TensorType(hist_grads[h].type.dtype, out_var.type.shape)("g_out")
        b_seq_inner.append(gv)
        b_seq_outer.append(rev(hist_grads[h][lags[h] :]))
        g_hist_inner.append(gv)
    g_nit_inner = []
    for k in range(n_nit):
        out_var = a_outs[n_hist + k]
        gv = TensorType(nit_grads[k].type.dtype, out_var.type.shape)("g_nit")
        b_seq_inner.append(gv)
        b_seq_outer.append(rev(nit_grads[k]))
        g_nit_inner.append(gv)
    b_nonseq_inner = []
    for w, i in enumerate(a_nonseq_idx):
        v = a_ins[i].type.make_variable(f"nonseq{w}")
        repl[a_ins[i]] = v
        b_nonseq_inner.append(v)
    other_carries = [a_ins[i] for i in a_carry_idx]
    n_diff_out = n_hist + n_nit
    cloned, clones = clone_replace(list(a_outs[:n_diff_out]), repl)
    leftovers = [v for v in other_carries if v in set(_ancestors(cloned))]
    if leftovers:
        raise NotImplementedError(
            f"{op}: the gradient needs the per-step values of {leftovers}, which scan does not "
            "record"
        )

    # Adjoint windows for float history outputs.
    diff_hist = [h for h in range(n_hist) if is_float_tensor(a_outs[h])]
    windows = {}
    known: dict[Variable, Variable] = {}

    def add_known(var, g):
        known[var] = known[var] + g if var in known else g

    for h in diff_hist:
        out_t = a_outs[h].type
        wtype = TensorType(hist_grads[h].type.dtype, (lags[h], *out_t.shape))
        p = wtype("P")
        windows[h] = p
        add_known(cloned[h], p[lags[h] - 1] + g_hist_inner[h])
    for k in range(n_nit):
        if is_float_tensor(a_outs[n_hist + k]):
            add_known(cloned[n_hist + k], g_nit_inner[k])
    seq_wrt = [(j, repl[a_ins[i]]) for j, i in enumerate(a_seq_idx) if is_float_tensor(a_ins[i])]
    tap_wrt = []
    for h in diff_hist:
        for tap, i in zip(taps_all[h], a_tap_idx[h]):
            tap_wrt.append((h, tap, repl[a_ins[i]]))
    nonseq_wrt = [
        (w, b_nonseq_inner[w]) for w, i in enumerate(a_nonseq_idx) if is_float_tensor(a_ins[i])
    ]
    wrt = [v for _, v in seq_wrt] + [v for *_, v in tap_wrt] + [v for _, v in nonseq_wrt]
    if known and wrt:
        grads = symbolic_grad(
            None, wrt, known_grads=known, disconnected_inputs="ignore", null_gradients="raise"
        )
    else:
        grads = [T.zeros_like(v) for v in wrt]
    # The backward step reads the outputs the forward loop recorded instead of computing
    # them again (e.g. tanh's gradient needs only its output).
    recorded: dict[Variable, Variable] = {}
    for h in range(n_hist):
        if cloned[h].owner is not None and cloned[h] not in recorded:
            start = lags[h]
            recorded[cloned[h]] = add_seq(cloned[h], hist_outs[h][start : start + n_steps], "y_t")
    for k in range(n_nit):
        var = cloned[n_hist + k]
        if var.owner is not None and var not in recorded:
            recorded[var] = add_seq(var, nit_outs[k], "z_t")
    if aug is op and grads and config.scan_record_residuals:
        per_step = [repl[a_ins[i]] for i in a_seq_idx]
        per_step += [repl[a_ins[i]] for idx in a_tap_idx for i in idx]
        boundary = {*b_seq_inner, *windows.values(), *b_nonseq_inner, *recorded}
        found = residuals(clones, grads, boundary, per_step, b_nonseq_inner)
        if found:
            for clone, rows in zip(
                (c for _, c in found), _with_residuals(outputs[0].owner, [f for f, _ in found])
            ):
                recorded[clone] = add_seq(clone, rows, "residual_t")
    if recorded and grads:
        grads, _ = clone_replace(list(grads), recorded)
    g_seq = grads[: len(seq_wrt)]
    g_tap = grads[len(seq_wrt) : len(seq_wrt) + len(tap_wrt)]
    g_nonseq = grads[len(seq_wrt) + len(tap_wrt) :]

    new_windows = {}
    for h in diff_hist:
        p = windows[h]
        contribs = [(tap, g) for (hh, tap, _), g in zip(tap_wrt, g_tap) if hh == h]
        if lags[h] == 1:  # taps [-1]: the window is just the adjoint of the previous value
            new_windows[h] = T.expand_dims(T.cast(contribs[0][1], p.type.dtype), 0)
            continue
        shifted = T.concatenate([T.zeros_like(p[:1]), p[:-1]], axis=0)
        for tap, g in contribs:
            shifted = inc_subtensor(shifted[lags[h] + tap], g)
        new_windows[h] = shifted
    accs = []
    for w, _ in nonseq_wrt:
        v = b_nonseq_inner[w]
        accs.append(TensorType(_gdtype(v), v.type.shape)("acc"))
    b_inner_inputs = [
        *b_seq_inner,
        *(windows[h] for h in diff_hist),
        *accs,
        *b_nonseq_inner,
    ]
    b_inner_outputs = [
        *g_seq,
        *(new_windows[h] for h in diff_hist),
        *(a + T.cast(g, a.type.dtype) for a, g in zip(accs, g_nonseq)),
    ]
    bop = Scan(
        b_inner_inputs,
        b_inner_outputs,
        len(b_seq_inner),
        [],
        len(g_seq),
        len(diff_hist) + len(accs),
        len(b_nonseq_inner),
        -1,
        f"grad_of_{op.name or 'scan'}",
    )
    window_inits = [T.zeros_like(hist_grads[h][: lags[h]]) for h in diff_hist]
    acc_inits = [T.zeros_like(nonseqs[w], dtype=_gdtype(nonseqs[w])) for w, _ in nonseq_wrt]
    b_outs = bop(k_steps, *b_seq_outer, *window_inits, *acc_inits, *nonseqs)
    if not isinstance(b_outs, list):
        b_outs = [b_outs]
    g_seq_rev = b_outs[: len(seq_wrt)]
    final_windows = b_outs[len(seq_wrt) : len(seq_wrt) + len(diff_hist)]
    final_accs = b_outs[len(seq_wrt) + len(diff_hist) :]

    # ---- assemble the outer gradients
    result: list[Any] = [None] * len(inputs)
    result[0] = None  # n_steps: integer, no gradient
    truncated = op.truncate_gradient is not None and op.truncate_gradient >= 0
    for (j, _), g in zip(seq_wrt, g_seq_rev):
        s = seqs[j]
        zeros = T.zeros_like(s, dtype=_gdtype(s))
        result[1 + j] = set_subtensor(zeros[n_steps - k_steps : n_steps], g[::-1])
    init_grads: dict[int, Variable] = {}
    for h, pw in zip(diff_hist, final_windows):
        direct = hist_grads[h][: lags[h]]
        if truncated:
            pw = T.switch(T.eq(k_steps, n_steps), pw, T.zeros_like(pw))
        init_grads[h] = direct + pw
    base = 1 + op.n_seqs
    for h in range(n_mit):
        if h in init_grads:
            result[base + h] = init_grads[h]
    base += n_mit
    for j, k in enumerate(tcarry):
        h = n_mit + j
        if h in init_grads:
            result[base + k] = init_grads[h][0]
    base += op.n_carry
    for (w, _), g in zip(nonseq_wrt, final_accs):
        result[base + w] = g
    return result


def _with_residuals(node: Apply, extra: list[Variable]) -> list[Variable]:
    """The stacked rows of ``extra`` (inner values of ``node``'s step), from a loop that
    computes what ``node`` computes and records them too. It has ``node``'s inputs and
    inner variables, so ``scan_merge_subsumed`` lets it replace ``node``: the forward
    runs once."""
    from tensorjit.scan.loop import Loop

    loop = Loop.of(node)
    first = len(loop.mits) + len(loop.nits)
    loop.nits += [(v, None) for v in extra]
    _, outs = loop.build()
    return outs[first : first + len(extra)]


def _gdtype(var: Variable) -> str:
    from tensorjit.core.config import config

    dtype = var.type.dtype
    return dtype if np.dtype(dtype).kind in "fc" else config.floatX


def _ancestors(outs):
    from tensorjit.core.graph.traversal import ancestors

    return ancestors(outs)
