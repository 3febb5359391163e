"""A ``Scan`` node taken apart into editable groups, for rewrites that build a new loop
from an old one (see ``tensorjit.scan.op`` for the layout)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tensorjit.core.graph.basic import Apply, Variable
from tensorjit.scan.op import Scan
from tensorjit.tensor.type import TensorType


@dataclass
class Mit:
    taps: tuple[int, ...]
    ins: list[Variable]  # inner tap inputs, one per tap
    out: Variable  # inner output
    init: Variable  # outer initial rows
    old: int | None  # index of the old node's output it computes (None: new)


@dataclass
class Carry:
    inner: Variable
    out: Variable
    init: Variable
    old: int | None


@dataclass
class Loop:
    """A Scan node taken apart into editable groups (see ``tensorjit.scan.op``)."""

    op: Scan
    n_steps: Variable
    seqs: list[tuple[Variable, Variable]]  # (inner, outer)
    mits: list[Mit]
    nits: list[tuple[Variable, int | None]]  # (inner output, old output index)
    carries: list[Carry]
    nonseqs: list[tuple[Variable, Variable]]  # (inner, outer)
    extra: dict[Variable, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, node: Apply) -> Loop:
        op: Scan = node.op
        n_steps, seqs, inits, carry_inits, nonseqs = op.outer_groups(node.inputs)
        seq_idx, tap_idx, carry_idx, nonseq_idx = op.inner_slices()
        ins, outs = op.inner_inputs, op.inner_outputs
        n_mit, n_nit = op.n_mit, op.n_nit
        return cls(
            op,
            n_steps,
            [(ins[i], s) for i, s in zip(seq_idx, seqs)],
            [
                Mit(op.mit_taps[h], [ins[i] for i in tap_idx[h]], outs[h], inits[h], h)
                for h in range(n_mit)
            ],
            [(outs[n_mit + k], n_mit + k) for k in range(n_nit)],
            [
                Carry(ins[i], outs[n_mit + n_nit + k], carry_inits[k], n_mit + n_nit + k)
                for k, i in enumerate(carry_idx)
            ],
            [(ins[i], w) for i, w in zip(nonseq_idx, nonseqs)],
        )

    def inner_outputs(self) -> list[Variable]:
        outs = [m.out for m in self.mits] + [o for o, _ in self.nits]
        return outs + [c.out for c in self.carries]

    def set_inner_outputs(self, new: list[Variable]) -> None:
        it = iter(new)
        for m in self.mits:
            m.out = next(it)
        self.nits = [(next(it), old) for _, old in self.nits]
        for c in self.carries:
            c.out = next(it)

    def build(self) -> tuple[Scan, list[Variable]]:
        """A new Scan node for this layout; returns the op and its outputs."""
        inner_inputs = [v for v, _ in self.seqs]
        for m in self.mits:
            inner_inputs.extend(m.ins)
        inner_inputs += [c.inner for c in self.carries] + [v for v, _ in self.nonseqs]
        old = self.op
        op = Scan(
            inner_inputs,
            self.inner_outputs(),
            len(self.seqs),
            [m.taps for m in self.mits],
            len(self.nits),
            len(self.carries),
            len(self.nonseqs),
            old.truncate_gradient,
            old.name,
        )
        outs = op(
            self.n_steps,
            *(s for _, s in self.seqs),
            *(m.init for m in self.mits),
            *(c.init for c in self.carries),
            *(w for _, w in self.nonseqs),
        )
        return op, outs if isinstance(outs, list) else [outs]

    def replacements(self, node: Apply, new_outs: list[Variable]) -> dict | None:
        """{old output: new output} for the outputs that kept an ``old`` index; None when
        a type would change (the rewrite then does not apply)."""
        olds = [m.old for m in self.mits] + [o for _, o in self.nits]
        olds += [c.old for c in self.carries]
        result = {}
        for old_index, new in zip(olds, new_outs):
            if old_index is None:
                continue
            old = node.outputs[old_index]
            if old.type != new.type:
                return None
            result[old] = new
        return result


def with_type(var: Variable, type_: TensorType) -> Variable | None:
    """``var`` with exactly the type ``type_`` (a reshape declares its static shape)."""
    if var.type == type_:
        return var
    if not isinstance(var.type, TensorType) or var.type.ndim != type_.ndim:
        return None
    if var.type.dtype != type_.dtype:
        return None
    from tensorjit.tensor.shape_ops import reshape

    dims = [s if s is not None else var.shape[d] for d, s in enumerate(type_.shape)]
    out = reshape(var, dims, ndim=type_.ndim)
    return out if out.type == type_ else None
